// Admission control of a local session (session_limits, run_options::
// priority, load, async_drain): generated arrivals, releases, cancellations
// and limit changes against a model of the queue, on an io_context the
// test drives itself (so every step is deterministic), then the timed
// paths and concurrent submitters.
#include <taskgroup/builtin_ops.hpp>
#include <taskgroup/net.hpp>
#include <taskgroup/session.hpp>
#include <taskgroup/task_group.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace taskgroup;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using i64 = std::int64_t;

namespace {

// The runs waiting at their gate, by id: a run holds its place until the
// test opens its gate (or cancels it). Touched on the io_context's thread.
struct gate_hub {
  std::map<i64, std::vector<asio::steady_timer*>> waiting;
  std::set<i64> opened;
  void open(i64 id) {
    opened.insert(id);
    for (asio::steady_timer* t : waiting[id]) t->cancel();
  }
};

// A group of `nodes` tasks (one a node), each waiting at the gate of the
// run's fed `id`.
task_group gated_group(const std::shared_ptr<gate_hub>& g, int nodes) {
  task_group group;
  for (int j = 0; j < nodes; ++j) {
    const std::string n = "n" + std::to_string(j);
    REQUIRE(group.input<i64>("id", node(n)));
    net gate("gate");
    gate.lambda("Gate", {"id"}, {}, [g](op_context& ctx) -> asio::awaitable<status> {
      const i64 id = ctx.input<i64>(0);
      asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::hours(1));
      g->waiting[id].push_back(&t);
      co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
      std::erase(g->waiting[id], &t);
      if (g->opened.count(id) == 0) co_return fail(errc::cancelled, "gate cancelled");
      co_return ok();
    });
    REQUIRE(group.add(task("t", step("s").add_net(gate)), node(n)));
  }
  return group;
}

feeds fed_ids(i64 id, int nodes) {
  feeds f;
  for (int j = 0; j < nodes; ++j) f.set("n" + std::to_string(j), "id", id);
  return f;
}

struct run_end {
  boost::system::error_code ec;
  run_report report;
};

// A completion handler that files run `id`'s end in `done`.
auto record_end(std::map<i64, run_end>& done, i64 id) {
  return [&done, id](boost::system::error_code ec, run_report r) { done[id] = {ec, std::move(r)}; };
}

// The model: the runs in flight, the queue (highest priority first, then
// arrival), the runs shed so far.
struct queue_model {
  std::optional<std::size_t> max_in_flight, max_queued;
  std::size_t headroom = 0;  // extra places for priorities above 0
  std::set<i64> in_flight;
  std::map<std::pair<i64, i64>, i64> queue;  // (-priority, id) -> id, negated as i64 (INT_MIN too)
  std::uint64_t shed = 0;
  std::map<i64, errc> refused;  // runs that end without running, and why
  [[nodiscard]] bool fits(int priority) const {
    return !max_in_flight || in_flight.size() < *max_in_flight + (priority > 0 ? headroom : 0);
  }
  void admit() {
    while (!queue.empty() && fits(static_cast<int>(-queue.begin()->first.first))) {
      in_flight.insert(queue.begin()->second);
      queue.erase(queue.begin());
    }
  }
  void arrive(i64 id, int priority) {
    if (fits(priority)) {
      in_flight.insert(id);
      return;
    }
    if (max_queued && queue.size() >= *max_queued) {
      if (queue.empty() || -std::prev(queue.end())->first.first >= i64{priority}) {
        ++shed;
        refused[id] = errc::overloaded;
        return;
      }
      refused[std::prev(queue.end())->second] = errc::overloaded;
      ++shed;
      queue.erase(std::prev(queue.end()));
    }
    queue[{-i64{priority}, id}] = id;
  }
  void leave(i64 id) {  // opened or cancelled
    if (in_flight.erase(id) != 0) {
      admit();
      return;
    }
    for (auto it = queue.begin(); it != queue.end(); ++it) {
      if (it->second == id) {
        refused[id] = errc::cancelled;
        queue.erase(it);
        return;
      }
    }
  }
};

std::string show_limit(const std::optional<std::size_t>& v) { return v ? std::to_string(*v) : "-"; }

}  // namespace

TEST_CASE("limits are checked, named and kept", "[admission]") {
  asio::io_context io;
  CHECK_FALSE(check_limits({.max_runs_in_flight = 0}));
  CHECK_THAT(check_limits({.max_runs_in_flight = 0}).error().message,
             Catch::Contains("max_runs_in_flight must be at least 1"));
  CHECK_THAT(check_limits({.max_queue_wait = -1us}).error().message,
             Catch::Contains("session_limits::max_queue_wait must be >= 0 us, got -1"));
  CHECK(check_limits({.max_runs_in_flight = 1, .max_queued = 0, .max_queue_wait = 0ms}));
  constexpr std::size_t most = std::numeric_limits<std::size_t>::max();
  CHECK(check_limits({.max_runs_in_flight = 1, .priority_headroom = most - 1}));
  CHECK(check_limits({.priority_headroom = most}));  // meaningless alone, and harmless
  CHECK_THAT(check_limits({.max_runs_in_flight = 2, .priority_headroom = most - 1}).error().message,
             Catch::Contains("session_limits::priority_headroom") && Catch::Contains("must fit a std::size_t"));
  CHECK_THROWS_WITH(local_session(io, session_limits{.max_runs_in_flight = 0}), Catch::Contains("max_runs_in_flight"));
  local_session session(io, session_limits{.max_runs_in_flight = 3, .max_queued = 7});
  CHECK(session.limits().max_runs_in_flight == 3u);
  CHECK(session.limits().max_queued == 7u);
  CHECK_FALSE(session.limits().max_queue_wait);
  CHECK_THROWS_WITH(session.set_limits({.max_queue_wait = std::chrono::milliseconds(max_duration.count() + 1)}),
                    Catch::Contains("max_queue_wait must be at most"));
  CHECK(session.limits().max_runs_in_flight == 3u);  // unchanged by the refused call
  const session_load l = session.load();
  CHECK((l.in_flight == 0 && l.queued == 0 && l.shed == 0));
}

TEST_CASE("generated arrivals, releases, cancellations and limit changes follow the queue's model", "[admission]") {
  for (std::uint64_t seed = 1; seed <= 120; ++seed) {
    std::mt19937_64 rng(seed);
    const int nodes = 1 + static_cast<int>(rng() % 2);
    std::ostringstream trail;  // what happened, printed on failure
    trail << "seed " << seed << ", " << nodes << " node(s):";
    asio::io_context io;
    auto g = std::make_shared<gate_hub>();
    const task_group group = gated_group(g, nodes);
    queue_model m;
    m.max_in_flight = 1 + rng() % 3;
    if (rng() % 3 != 0) m.max_queued = rng() % 4;
    if (rng() % 2 != 0) m.headroom = rng() % 3;
    local_session session(
        io, session_limits{
                .max_runs_in_flight = m.max_in_flight, .max_queued = m.max_queued, .priority_headroom = m.headroom});
    trail << " limits " << show_limit(m.max_in_flight) << "/" << show_limit(m.max_queued) << " headroom " << m.headroom;
    std::map<i64, run_end> done;
    std::map<i64, std::unique_ptr<asio::cancellation_signal>> signals;
    i64 next_id = 0;
    for (int step = 0; step < 40; ++step) {
      const unsigned what = rng() % 10;
      if (what < 5) {
        const i64 id = next_id++;
        // The extremes too: a priority is compared, never negated.
        const int priority =
            std::array{std::numeric_limits<int>::min(), -1, 0, 0, 1, 2, std::numeric_limits<int>::max()}[rng() % 7];
        trail << " | arrive " << id << " p" << priority;
        auto& sig = signals[id] = std::make_unique<asio::cancellation_signal>();
        session.async_run(group, {.feeds = fed_ids(id, nodes), .priority = priority},
                          asio::bind_cancellation_slot(sig->slot(), record_end(done, id)));
        m.arrive(id, priority);
      } else if (what < 8 && !m.in_flight.empty()) {
        auto it = m.in_flight.begin();
        std::advance(it, static_cast<long>(rng() % m.in_flight.size()));
        const i64 id = *it;
        trail << " | open " << id;
        g->open(id);
        m.leave(id);
      } else if (what == 8 && next_id > 0) {
        const i64 id = static_cast<i64>(rng() % static_cast<std::uint64_t>(next_id));
        const bool live = m.in_flight.count(id) != 0 ||
                          std::any_of(m.queue.begin(), m.queue.end(), [id](const auto& e) { return e.second == id; });
        if (!live) continue;
        // Any type reaches a queued run; total cancellation is ignored by
        // one in flight.
        const asio::cancellation_type type =
            std::array{asio::cancellation_type::terminal, asio::cancellation_type::partial,
                       asio::cancellation_type::total}[rng() % 3];
        trail << " | cancel " << id << " (" << static_cast<int>(type) << ")";
        signals[id]->emit(type);
        if (m.in_flight.count(id) != 0) {
          if (type == asio::cancellation_type::total) continue;
          m.refused[id] = errc::cancelled;
        }
        m.leave(id);
      } else if (what == 9) {
        m.max_in_flight = 1 + rng() % 3;
        m.headroom = rng() % 3;
        trail << " | limit " << *m.max_in_flight << " headroom " << m.headroom;
        session.set_limits(
            {.max_runs_in_flight = m.max_in_flight, .max_queued = m.max_queued, .priority_headroom = m.headroom});
        m.admit();
      }
      io.restart();
      io.poll();
      // The runs at their gates are the model's runs in flight, all their
      // tasks there.
      std::set<i64> at_gate;
      for (const auto& [id, timers] : g->waiting) {
        if (timers.size() == static_cast<std::size_t>(nodes)) at_gate.insert(id);
      }
      INFO(trail.str());
      REQUIRE(at_gate == m.in_flight);
      const session_load l = session.load();
      REQUIRE(l.in_flight == m.in_flight.size());
      REQUIRE(l.queued == m.queue.size());
      REQUIRE(l.shed == m.shed);
      // Every run that left has completed as the model says.
      for (const auto& [id, why] : m.refused) {
        REQUIRE(done.count(id) == 1);
        const run_end& e = done[id];
        REQUIRE(e.ec == why);
        if (why == errc::overloaded) {
          REQUIRE_THAT(e.report.failure->message, Catch::StartsWith("session overloaded:"));
          REQUIRE(e.ec == std::errc::resource_unavailable_try_again);
        }
        const bool ran = std::any_of(e.report.tasks.begin(), e.report.tasks.end(),
                                     [](const task_report& t) { return t.status != task_status::not_run; });
        // A run cancelled in flight has run; one refused from the queue never did.
        const bool was_queued =
            e.report.failure->message.find("admission") != std::string::npos || why == errc::overloaded;
        if (was_queued) REQUIRE_FALSE(ran);
      }
      for (const auto& [id, e] : done) {
        if (m.refused.count(id) == 0) REQUIRE(!e.ec);
      }
    }
    // Open every gate: everything admitted and queued runs to its end.
    for (int round = 0; round < 100 && (!m.in_flight.empty() || !m.queue.empty()); ++round) {
      for (i64 id : std::set<i64>(m.in_flight)) {
        g->open(id);
        m.leave(id);
      }
      io.restart();
      io.poll();
    }
    INFO(trail.str());
    CHECK(done.size() == static_cast<std::size_t>(next_id));
    CHECK(session.load().in_flight == 0);
  }
}

TEST_CASE("a run of priority above 0 starts in the headroom while the regular places are full", "[admission]") {
  asio::io_context io;
  auto g = std::make_shared<gate_hub>();
  const task_group group = gated_group(g, 1);
  std::map<i64, run_end> done;
  local_session session(io, session_limits{.max_runs_in_flight = 1, .priority_headroom = 1});
  auto arrive = [&](i64 id, int priority) {
    session.async_run(group, {.feeds = fed_ids(id, 1), .priority = priority}, record_end(done, id));
    io.restart();
    io.poll();
  };
  auto at_gate = [&] {
    std::set<i64> ids;
    for (const auto& [id, timers] : g->waiting) {
      if (!timers.empty()) ids.insert(id);
    }
    return ids;
  };
  auto open = [&](i64 id) {
    g->open(id);
    io.restart();
    io.poll();
  };
  arrive(0, 0);
  arrive(1, 0);  // the regular place is taken: queued
  arrive(2, 1);  // the headroom's place
  CHECK(at_gate() == std::set<i64>{0, 2});
  arrive(3, 5);  // the headroom is taken too: queued, ahead of 1
  CHECK(session.load().in_flight == 2);
  CHECK(session.load().queued == 2);
  open(0);  // one place left: 3 (priority 5) may take it, 1 may not
  CHECK(at_gate() == std::set<i64>{2, 3});
  open(2);  // one in flight: still no place for priority 0
  CHECK(at_gate() == std::set<i64>{3});
  CHECK(session.load().queued == 1);
  open(3);
  CHECK(at_gate() == std::set<i64>{1});
  open(1);
  CHECK(done.size() == 4);
  for (const auto& [id, e] : done) CHECK(!e.ec);
}

TEST_CASE("a queue wait below a millisecond is kept to the microsecond", "[admission]") {
  asio::io_context io;
  auto g = std::make_shared<gate_hub>();
  const task_group group = gated_group(g, 1);
  local_session session(io, session_limits{.max_runs_in_flight = 1, .max_queue_wait = 1500us});
  CHECK(session.limits().max_queue_wait == 1500us);
  std::map<i64, run_end> done;
  session.async_run(group, {.feeds = fed_ids(0, 1)}, record_end(done, 0));
  const auto arrived = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point shed_at{};
  session.async_run(group, {.feeds = fed_ids(1, 1)}, [&](boost::system::error_code ec, run_report r) {
    shed_at = std::chrono::steady_clock::now();
    done[1] = {ec, std::move(r)};
  });  // shed after 1.5 ms
  io.run_for(200ms);
  REQUIRE(done.count(1) == 1);
  CHECK(done[1].ec == errc::overloaded);
  CHECK(shed_at - arrived >= 1500us);
  CHECK_THAT(done[1].report.failure->message,
             Catch::Matches("session overloaded: waited [0-9]+ us in the queue \\(max_queue_wait 1500 us\\)"));
  g->open(0);
  io.run_for(50ms);
  CHECK(!done[0].ec);
}

TEST_CASE("a queued run waits at most max_queue_wait, and its own timeout counts from its arrival", "[admission]") {
  asio::io_context io;
  auto g = std::make_shared<gate_hub>();
  const task_group group = gated_group(g, 1);
  local_session session(io, session_limits{.max_runs_in_flight = 1, .max_queue_wait = 30ms});
  std::map<i64, run_end> done;
  session.async_run(group, {.feeds = fed_ids(0, 1)}, record_end(done, 0));
  session.async_run(group, {.feeds = fed_ids(1, 1)}, record_end(done, 1));                   // shed after 30 ms
  session.async_run(group, {.timeout = 10ms, .feeds = fed_ids(2, 1)}, record_end(done, 2));  // its own 10 ms first
  io.run_for(200ms);
  REQUIRE(done.count(1) == 1);
  CHECK(done[1].ec == errc::overloaded);
  CHECK_THAT(done[1].report.failure->message,
             Catch::Matches("session overloaded: waited [0-9]+ ms in the queue \\(max_queue_wait 30 ms\\)"));
  REQUIRE(done.count(2) == 1);
  CHECK(done[2].ec == errc::timeout);
  CHECK_THAT(done[2].report.failure->message, Catch::Contains("run timed out after 10 ms waiting for admission"));
  CHECK(done[2].report.tasks.at(0).status == task_status::not_run);
  CHECK(session.load().shed == 1);  // the timeout is the run's own, not a shed
  // A run admitted after a wait keeps the rest of its timeout: 0 waits in
  // flight, 3 arrives with 80 ms and finds it there; opened after 50 ms, 0
  // makes room, and 3 times out 80 ms after its arrival, not after its start.
  session.set_limits({.max_runs_in_flight = 1});
  session.async_run(group, {.timeout = 80ms, .feeds = fed_ids(3, 1)}, record_end(done, 3));
  io.run_for(50ms);
  g->open(0);
  const auto opened = std::chrono::steady_clock::now();
  io.run_for(300ms);
  REQUIRE(done.count(0) == 1);
  CHECK(!done[0].ec);
  REQUIRE(done.count(3) == 1);
  CHECK(done[3].ec == errc::timeout);
  CHECK(done[3].report.tasks.at(0).status == task_status::cancelled);  // it ran, then timed out
  CHECK(done[3].report.finished - done[3].report.started < 300ms);
  (void)opened;
}

TEST_CASE("a drain refuses new runs, lets the queued and running ones end, then completes", "[admission]") {
  asio::io_context io;
  auto g = std::make_shared<gate_hub>();
  const task_group group = gated_group(g, 1);
  local_session session(io, session_limits{.max_runs_in_flight = 1});
  std::map<i64, run_end> done;
  session.async_run(group, {.feeds = fed_ids(0, 1)}, record_end(done, 0));
  session.async_run(group, {.feeds = fed_ids(1, 1)}, record_end(done, 1));
  io.poll();
  std::optional<boost::system::error_code> drained;
  session.async_drain([&](boost::system::error_code ec) { drained = ec; });
  CHECK(session.closed());
  session.async_run(group, {.feeds = fed_ids(2, 1)}, record_end(done, 2));
  io.restart();
  io.poll();
  REQUIRE(done.count(2) == 1);
  CHECK(done[2].ec == errc::session_closed);
  CHECK_FALSE(drained);
  g->open(0);
  io.restart();
  io.poll();
  CHECK(done.count(0) == 1);
  CHECK_FALSE(drained);  // 1 was queued: it runs now
  CHECK(g->waiting[1].size() == 1);
  g->open(1);
  io.restart();
  io.poll();
  REQUIRE(drained);
  CHECK(!*drained);
  CHECK(!done[1].ec);
  // Nothing left: a second drain completes at once, never inside its call.
  bool again = false;
  session.async_drain([&](boost::system::error_code ec) { again = !ec; });
  CHECK_FALSE(again);
  io.restart();
  io.poll();
  CHECK(again);
}

TEST_CASE("a cancelled drain cancels what is queued and in flight and completes cancelled", "[admission]") {
  asio::io_context io;
  auto g = std::make_shared<gate_hub>();
  const task_group group = gated_group(g, 2);
  local_session session(io, session_limits{.max_runs_in_flight = 2});
  std::map<i64, run_end> done;
  for (i64 id = 0; id < 5; ++id) {
    session.async_run(group, {.feeds = fed_ids(id, 2)}, record_end(done, id));
  }
  io.poll();
  CHECK(session.load().in_flight == 2);
  CHECK(session.load().queued == 3);
  asio::cancellation_signal sig;
  std::optional<boost::system::error_code> drained;
  session.async_drain(asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code ec) { drained = ec; }));
  io.restart();
  io.poll();
  CHECK_FALSE(drained);
  sig.emit(asio::cancellation_type::terminal);
  io.restart();
  io.poll();
  REQUIRE(drained);
  CHECK(*drained == errc::cancelled);
  REQUIRE(done.size() == 5);
  for (const auto& [id, e] : done) {
    INFO("run " << id);
    CHECK(e.ec == errc::cancelled);
  }
  CHECK(done[4].report.tasks.at(0).status == task_status::not_run);
  CHECK(session.load().in_flight == 0);
}

TEST_CASE("closing the session refuses the queued runs", "[admission]") {
  asio::io_context io;
  auto g = std::make_shared<gate_hub>();
  const task_group group = gated_group(g, 1);
  std::map<i64, run_end> done;
  {
    local_session session(io, session_limits{.max_runs_in_flight = 1});
    for (i64 id = 0; id < 3; ++id) {
      session.async_run(group, {.feeds = fed_ids(id, 1)}, record_end(done, id));
    }
    io.poll();
  }  // destroyed: closed
  io.restart();
  io.poll();
  CHECK(done.count(1) == 1);
  CHECK(done.count(2) == 1);
  CHECK(done[1].ec == errc::session_closed);
  g->open(0);
  io.restart();
  io.poll();
  CHECK(!done[0].ec);
}

TEST_CASE("GLOBAL runs keep taking turns under an in-flight limit", "[admission]") {
  // Each run adds one to a node blob, through a GLOBAL task; the limit is
  // below the number of runs waiting for the node's turn.
  task_group group;
  net add("add");
  add.op("Sleep", {}, {}, {{"ms", i64{1}}}).op("Add", {"count", "one"}, {"count"});
  REQUIRE(group.add(task("t", step("s").add_net(add)).workspace_type(workspace_type::global), node("g")));
  asio::thread_pool pool(2);
  local_session session(pool, session_limits{.max_runs_in_flight = 2});
  {
    auto ws = session.node_workspace("g");
    ws->set("count", i64{0});
    ws->set("one", i64{1});
  }
  constexpr int runs = 24;
  std::vector<std::future<run_report>> all;
  for (int i = 0; i < runs; ++i) all.push_back(session.async_run(group, asio::use_future));
  for (auto& f : all) CHECK(f.get().ok());
  CHECK(session.node_workspace("g")->read<i64>("count").value() == runs);
}

TEST_CASE("concurrent submitters on two threads: every run ends once, the limits hold", "[admission]") {
  asio::thread_pool pool(2);
  task_group group;
  net n("n");
  n.op("Sleep", {}, {}, {{"ms", i64{1}}});
  REQUIRE(group.add(task("a", step("s").add_net(n)), node("n1")));
  REQUIRE(group.add(task("b", step("s").add_net(n)), node("n2")));
  local_session session(pool, session_limits{.max_runs_in_flight = 3, .max_queued = 5, .priority_headroom = 1});
  std::atomic<int> ok_runs = 0, shed_runs = 0, other = 0;
  std::atomic<std::size_t> most_in_flight = 0;
  auto submit = [&](int count) {
    std::vector<std::future<void>> waits;
    for (int i = 0; i < count; ++i) {
      auto p = std::make_shared<std::promise<void>>();
      waits.push_back(p->get_future());
      session.async_run(group, {.priority = i % 3}, [&, p](boost::system::error_code ec, run_report) {
        const std::size_t now = session.load().in_flight;
        std::size_t seen = most_in_flight.load();
        while (now > seen && !most_in_flight.compare_exchange_weak(seen, now)) {
        }
        if (!ec) {
          ++ok_runs;
        } else if (ec == errc::overloaded) {
          ++shed_runs;
        } else {
          ++other;
        }
        p->set_value();
      });
    }
    for (auto& w : waits) w.get();
  };
  std::thread t1(submit, 150);
  std::thread t2(submit, 150);
  t1.join();
  t2.join();
  CHECK(ok_runs + shed_runs == 300);
  CHECK(other == 0);
  CHECK(ok_runs >= 8);
  CHECK(most_in_flight <= 4);  // 3, and one more of priority 1 or 2
  CHECK(session.load().shed == static_cast<std::uint64_t>(shed_runs.load()));
  CHECK(session.load().in_flight == 0);
  CHECK(session.load().queued == 0);
}

TEST_CASE("a run shed as it arrives is refused without waiting for the session's coordinator", "[admission]") {
  // Under overload most arrivals are shed; refused on the coordinator they
  // would queue in front of the admitted runs' ends. Here a shed run's
  // handler without an executor of its own holds the coordinator (where
  // it is called) until a second shed run, its handler bound to the pool,
  // has completed: that one must not need the coordinator.
  asio::thread_pool pool(2);
  task_group group;
  net n("n");
  n.op("Sleep", {}, {}, {{"ms", i64{600'000}}});
  // Two nodes: a run of one node seen before is coordinated on its strand.
  REQUIRE(group.add(task("long", step("s").add_net(n)), node("n1")));
  REQUIRE(group.add(task("long", step("s").add_net(n)), node("n2")));
  local_session session(pool, session_limits{.max_runs_in_flight = 1, .max_queued = 0});
  asio::cancellation_signal stop_long;
  std::promise<boost::system::error_code> long_done;
  session.async_run(group, {},
                    asio::bind_cancellation_slot(stop_long.slot(), asio::bind_executor(pool, [&](auto ec, run_report) {
                                                   long_done.set_value(ec);
                                                 })));
  REQUIRE(session.load().in_flight == 1);

  std::promise<void> holding;
  std::promise<std::pair<boost::system::error_code, bool>> second;  // its code, and whether on the pool
  std::shared_future<std::pair<boost::system::error_code, bool>> second_done = second.get_future().share();
  std::promise<std::pair<boost::system::error_code, std::future_status>> first;
  session.async_run(group, {}, [&](boost::system::error_code ec, run_report) {
    holding.set_value();
    first.set_value({ec, second_done.wait_for(30s)});
  });
  REQUIRE(holding.get_future().wait_for(30s) == std::future_status::ready);
  session.async_run(group, {}, asio::bind_executor(pool, [&](boost::system::error_code ec, run_report) {
                      second.set_value({ec, pool.get_executor().running_in_this_thread()});
                    }));
  const auto [first_ec, saw_second] = first.get_future().get();
  CHECK(first_ec == errc::overloaded);
  CHECK(saw_second == std::future_status::ready);
  const auto [second_ec, on_pool] = second_done.get();
  CHECK(second_ec == errc::overloaded);
  CHECK(on_pool);
  CHECK(session.load().shed == 2);

  stop_long.emit(asio::cancellation_type::terminal);
  CHECK(long_done.get_future().get() == errc::cancelled);
}

TEST_CASE("a run admitted as another ends begins there, not behind the work queued on the context", "[admission]") {
  // One thread, driven here: each task posts a handler to the context as
  // it runs, so when the first run ends those handlers are queued. The
  // queued run admitted then must have begun (its report's `started`)
  // before any of them runs: posted, its begin would wait behind them.
  asio::io_context io;
  std::optional<std::chrono::system_clock::time_point> queued_work_ran;
  task_group group;
  for (const char* n : {"n1", "n2"}) {
    net post("post");
    post.lambda("PostWork", {}, {}, [&](op_context&) -> status {
      asio::post(io, [&] {
        if (!queued_work_ran) queued_work_ran = std::chrono::system_clock::now();
      });
      return ok();
    });
    REQUIRE(group.add(task("t", step("s").add_net(post)), node(n)));
  }
  local_session session(io, session_limits{.max_runs_in_flight = 1});
  std::map<i64, run_end> done;
  session.async_run(group, {}, record_end(done, 0));
  session.async_run(group, {}, record_end(done, 1));
  CHECK(session.load().queued == 1);
  io.run();
  REQUIRE(done.size() == 2);
  CHECK(!done[0].ec);
  CHECK(!done[1].ec);
  REQUIRE(queued_work_ran);
  CHECK(done[0].report.finished <= done[1].report.started);
  CHECK(done[1].report.started <= *queued_work_ran);
}

TEST_CASE("runs refused as they begin, one admitted at each one's end, all end without nesting", "[admission]") {
  // A run admitted at another's end begins inline there; one refused as it
  // begins ends at once and admits the next: those begin by a post, or
  // ten thousand of them would nest ten thousand calls deep.
  asio::io_context io;
  auto g = std::make_shared<gate_hub>();
  const task_group group = gated_group(g, 2);
  local_session session(io, session_limits{.max_runs_in_flight = 1});
  std::map<i64, run_end> done;
  session.async_run(group, {.feeds = fed_ids(0, 2)}, record_end(done, 0));
  constexpr i64 refused = 10'000;
  for (i64 id = 1; id <= refused; ++id) session.async_run(group, {}, record_end(done, id));  // no feeds
  io.run_for(50ms);
  CHECK(session.load().queued == refused);
  g->open(0);
  io.run();
  REQUIRE(done.size() == refused + 1);
  CHECK(!done[0].ec);
  for (i64 id = 1; id <= refused; ++id) {
    INFO("run " << id);
    REQUIRE(done[id].ec == errc::invalid_feed);
  }
  CHECK(session.load().in_flight == 0);
}
