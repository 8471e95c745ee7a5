// The join (lib/detail/join.hpp), the one behind a run's nodes, concurrent
// steps, report steps and a node's tasks. Generated rounds: children that
// the test ends one by one, in a generated order, with generated outcomes
// (success, a failure, an exception, a cancelled end of their own), and at
// a generated point a cancellation of the parent, checked after every step
// against a model of the documented rules: the round's status, each
// child's status, which children the join cancelled, when the round ends
// and when the holder has the join back. Several rounds reuse one join;
// children run on the joining executor or on strands of their own (the
// relayed path, whose cancellation may arrive before a child starts).
#include "detail/join.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

using namespace taskgroup;
using taskgroup::detail::join_mode;
using taskgroup::detail::spawn_join;
namespace asio = boost::asio;

namespace {

enum class outcome { succeed, fail, raise, cancel_itself };

// What a child does, and what it saw; the test releases it.
struct child_ctl {
  asio::steady_timer* timer = nullptr;  // while it waits
  bool released = false;
  bool saw_join_cancel = false;
  outcome out = outcome::succeed;
};

// The status a released child ends with, as the join sees it.
status released_status(std::size_t k, outcome o) {
  switch (o) {
    case outcome::succeed: return ok();
    case outcome::fail: return fail(errc::op_failed, "child " + std::to_string(k) + " failed");
    case outcome::raise: return fail(errc::op_failed, "child " + std::to_string(k) + " threw");
    case outcome::cancel_itself: return fail(errc::cancelled, "child " + std::to_string(k) + " cancelled itself");
  }
  return ok();
}

// What a child ends with once the join cancelled it (its own words, as a
// step's path would be), and what a join cancelled from outside reports.
status cancelled_child(std::size_t k) { return fail(errc::cancelled, "child " + std::to_string(k) + ": cancelled"); }
status join_cancelled() { return fail(errc::cancelled, "cancelled"); }

asio::awaitable<status> child(child_ctl& c, std::size_t k) {
  asio::steady_timer t(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
  c.timer = &t;
  (void)co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
  c.timer = nullptr;
  if (!c.released) {
    c.saw_join_cancel = true;
    co_return cancelled_child(k);
  }
  if (c.out == outcome::raise) throw std::runtime_error("child " + std::to_string(k) + " threw");
  co_return released_status(k, c.out);
}

// The documented rules, written plainly for one round.
struct model {
  join_mode mode;
  std::vector<bool> alive;
  std::vector<bool> cancelled_by_join;
  std::vector<status> results;
  std::optional<status> winner;
  std::optional<status> first;
  std::optional<status> first_cancelled;  // by the join, while no failure
  std::size_t more_cancelled = 0;
  bool cancel_sent = false;
  bool from_outside = false;

  model(join_mode m, std::size_t n) : mode(m), alive(n, true), cancelled_by_join(n, false), results(n, ok()) {}

  void end(std::size_t k, const status& st) {
    alive[k] = false;
    results[k] = st;
    if (mode == join_mode::race) {
      if (!winner) {
        winner = st;
        cancel_all();
      }
      return;
    }
    const bool caused_by_join = cancel_sent && !st && st.error().is_cancelled();
    if (!st && !first && !caused_by_join) {
      first = st;
      if (mode == join_mode::fail_fast) cancel_all();
    }
    if (!first && caused_by_join) {
      if (first_cancelled) {
        ++more_cancelled;
      } else {
        first_cancelled = st;
      }
    }
  }
  void cancel_all() {
    cancel_sent = true;
    for (std::size_t k = 0; k < alive.size(); ++k) {
      if (!alive[k]) continue;
      cancelled_by_join[k] = true;
      end(k, cancelled_child(k));
    }
  }
  void cancel_parent() {
    from_outside = true;
    cancel_sent = true;  // before the children's ends, as the join
    cancel_all();
  }
  [[nodiscard]] bool done() const {
    return std::none_of(alive.begin(), alive.end(), [](bool a) { return a; });
  }
  [[nodiscard]] status result() const {
    status r = winner ? *winner : first ? *first : ok();
    if (r && from_outside) {
      // The first child the cancellation ended speaks for the join, with
      // a count of the others.
      if (!first_cancelled) return join_cancelled();
      if (more_cancelled == 0) return *first_cancelled;
      return fail(errc::cancelled, first_cancelled->error().message + " (and " + std::to_string(more_cancelled) +
                                       (more_cancelled == 1 ? " more concurrent branch" : " more concurrent branches") +
                                       " cancelled)");
    }
    return r;
  }
};

std::string text(const status& st) {
  if (st) return "ok";
  std::ostringstream os;
  os << st.error().code.value() << " " << st.error().message;
  return os.str();
}

const char* mode_name(join_mode m) {
  switch (m) {
    case join_mode::fail_fast: return "fail_fast";
    case join_mode::gather: return "gather";
    case join_mode::race: return "race";
  }
  return "?";
}

// One generated case: a join of n children reused for several rounds.
void check_seed(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](std::size_t bound) { return static_cast<std::size_t>(rng() % bound); };
  const std::size_t n = 1 + pick(5);
  const join_mode mode = std::array{join_mode::fail_fast, join_mode::gather, join_mode::race}[pick(3)];
  const bool same_executor = pick(2) == 0;
  const std::size_t rounds = 1 + pick(4);
  std::ostringstream where;
  where << "seed " << seed << ": " << n << " children, " << mode_name(mode) << ", "
        << (same_executor ? "on the joining executor" : "each on its own strand") << ", " << rounds << " rounds";
  INFO(where.str());

  asio::io_context io;
  std::vector<asio::strand<asio::io_context::executor_type>> strands;
  for (std::size_t k = 0; k < n; ++k) strands.push_back(asio::make_strand(io));
  auto join = std::make_shared<spawn_join>(n, mode);
  for (std::size_t r = 0; r < rounds; ++r) {
    INFO("round " << r);
    std::vector<child_ctl> ctl(n);
    std::vector<status> results;
    std::optional<status> got;
    asio::cancellation_signal parent_signal;
    auto make = [&](std::size_t k) { return child(ctl[k], k); };
    auto parent = [&]() -> asio::awaitable<status> {
      const asio::any_io_executor ex = co_await asio::this_coro::executor;
      if (same_executor) {
        co_return co_await spawn_join::round<true>(
            join, ex, make, [](std::size_t) { return 0; }, &results);
      }
      co_return co_await spawn_join::round<false>(
          join, ex, make, [&](std::size_t k) { return asio::any_io_executor(strands[k]); }, &results);
    };
    asio::co_spawn(io, parent(),
                   asio::bind_cancellation_slot(parent_signal.slot(), [&](std::exception_ptr e, status st) {
                     got = e ? detail::error_from_exception(e) : st;
                   }));
    model m(mode, n);
    // The parent cancelled now and then, sometimes before the children on
    // strands have started (their relayed cancellation waits for them).
    const bool cancel_early = pick(4) == 0;
    const std::size_t cancel_after = pick(n + 1);  // releases before a late cancellation
    const bool cancel_late = !cancel_early && pick(3) == 0;
    io.restart();
    while (join != nullptr && io.poll_one() > 0) {
    }
    REQUIRE(join == nullptr);  // the round holds the join
    if (cancel_early) {
      parent_signal.emit(asio::cancellation_type::terminal);
      m.cancel_parent();
    }
    io.poll();
    std::vector<std::size_t> order(n);
    for (std::size_t k = 0; k < n; ++k) order[k] = k;
    std::shuffle(order.begin(), order.end(), rng);
    std::size_t released = 0;
    for (std::size_t k : order) {
      if (cancel_late && released == cancel_after && !m.done()) {
        parent_signal.emit(asio::cancellation_type::terminal);
        m.cancel_parent();
        io.poll();
      }
      if (!m.alive[k]) continue;
      REQUIRE(ctl[k].timer != nullptr);
      ctl[k].out = static_cast<outcome>(pick(4));
      ctl[k].released = true;
      ctl[k].timer->cancel();
      m.end(k, released_status(k, ctl[k].out));
      ++released;
      io.poll();
      INFO("after releasing child " << k);
      REQUIRE(got.has_value() == m.done());
      REQUIRE((join != nullptr) == m.done());
    }
    io.poll();
    REQUIRE(m.done());
    REQUIRE(got.has_value());
    CHECK(text(*got) == text(m.result()));
    REQUIRE(results.size() == n);
    for (std::size_t k = 0; k < n; ++k) {
      INFO("child " << k);
      CHECK(ctl[k].saw_join_cancel == m.cancelled_by_join[k]);
      CHECK(text(results[k]) == text(m.results[k]));
    }
    REQUIRE(join != nullptr);
  }
}

// A round whose children never end.
asio::awaitable<status> abandoned_parent(std::shared_ptr<spawn_join>& join, bool same_executor,
                                         std::vector<child_ctl>& ctl, asio::any_io_executor strand) {
  const asio::any_io_executor ex = co_await asio::this_coro::executor;
  auto make = [&ctl](std::size_t k) { return child(ctl[k], k); };
  auto same = [](std::size_t) { return 0; };
  auto on_strand = [&strand](std::size_t) { return strand; };
  if (same_executor) co_return co_await spawn_join::round<true>(join, ex, make, same);
  co_return co_await spawn_join::round<false>(join, ex, make, on_strand);
}

std::uint64_t cases_from_env(std::uint64_t fallback) {
  if (const char* s = std::getenv("TASKGROUP_JOIN_CASES"); s != nullptr) return std::stoull(s);
  return fallback;
}

}  // namespace

TEST_CASE("generated rounds of a join follow the rules of the model", "[join]") {
  // TASKGROUP_JOIN_CASES for more; TASKGROUP_JOIN_SEED for one seed.
  if (const char* s = std::getenv("TASKGROUP_JOIN_SEED"); s != nullptr) {
    check_seed(std::stoull(s));
    return;
  }
  const std::uint64_t cases = cases_from_env(2000);
  for (std::uint64_t seed = 1; seed <= cases; ++seed) check_seed(seed);
}

TEST_CASE("a join abandoned with its io_context frees itself and its parent", "[join]") {
  for (const bool same_executor : {true, false}) {
    INFO((same_executor ? "on the joining executor" : "on strands"));
    std::vector<child_ctl> ctl(3);
    auto join = std::make_shared<spawn_join>(3, join_mode::fail_fast);
    const std::weak_ptr<spawn_join> weak = join;
    bool completed = false;
    {
      asio::io_context io;
      const asio::any_io_executor strand = asio::make_strand(io);
      asio::co_spawn(io, abandoned_parent(join, same_executor, ctl, strand),
                     [&](std::exception_ptr, status) { completed = true; });
      io.poll();
      REQUIRE(join == nullptr);  // held by its children while they wait
      REQUIRE(!weak.expired());
      REQUIRE(ctl[2].timer != nullptr);
    }
    CHECK_FALSE(completed);
    CHECK(weak.expired());
  }
}
