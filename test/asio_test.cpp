// Every public asynchronous operation of the library, through every kind of
// completion token an Asio user writes: a callback, use_awaitable (the
// default), use_future, deferred, as_tuple, redirect_error,
// bind_cancellation_slot with each cancellation type, bind_allocator with a
// counting allocator, bind_executor, and experimental::make_parallel_group.
// The operations: local_session::async_run, task_group::async_run,
// async_run_step and run_probe::async_where (mpi_session::async_run in the
// MPI suite). One translation unit, kept cheap to compile.
#include <taskgroup/taskgroup.hpp>

#include "support/counting_allocator.hpp"
#include "support/steps.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

using namespace taskgroup;
using namespace taskgroup::test;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

// A group of one task on node "n": x = 7, declared output; or, failing,
// its op fails; or, waiting, it sleeps an hour (until cancelled).
enum class shape { succeeds, fails, waits };
struct made {
  task_group group;
  task_output<i64> x;
};
made group_of(shape s) {
  net n("work");
  if (s == shape::fails) n.op("Fail", {}, {}, {{"message", std::string("no")}});
  if (s == shape::waits) n.op("Sleep", {}, {}, {{"ms", i64{3'600'000}}});
  n.op("ConstantFill", {}, {"x"}, {{"value", i64{7}}});
  task t("t", step("s").add_net(n));
  auto x = t.output<i64>("x");
  task_group g;
  REQUIRE(g.add(t, node("n")));
  return {g, x};
}

}  // namespace

TEST_CASE("an Asio user's program: io_context, a callback, error_code first, standard conditions", "[asio]") {
  asio::io_context io;
  local_session s(io);  // from the execution context, as Asio's I/O objects are
  static_assert(std::is_same_v<local_session::executor_type, asio::any_io_executor>);
  CHECK(s.get_executor() == asio::any_io_executor(io.get_executor()));

  made ok_group = group_of(shape::succeeds);
  boost::system::error_code seen_ec = asio::error::would_block;
  s.async_run(ok_group.group, [&](boost::system::error_code ec, run_report r) {
    seen_ec = ec;
    CHECK(r.ok());
  });
  io.run();
  CHECK_FALSE(seen_ec);
  CHECK(ok_group.x.get().value() == 7);

  // A deadline: std::errc::timed_out.
  made waiting = group_of(shape::waits);
  io.restart();
  s.async_run(waiting.group, {.timeout = 10ms}, [&](boost::system::error_code ec, run_report) { seen_ec = ec; });
  io.run();
  CHECK(seen_ec == std::errc::timed_out);
  CHECK(seen_ec == boost::system::errc::timed_out);

  // A cancellation: std::errc::operation_canceled.
  io.restart();
  asio::cancellation_signal cancel;
  s.async_run(waiting.group, asio::bind_cancellation_slot(
                                 cancel.slot(), [&](boost::system::error_code ec, run_report) { seen_ec = ec; }));
  asio::steady_timer soon(io, 5ms);
  soon.async_wait([&](boost::system::error_code) { cancel.emit(asio::cancellation_type::terminal); });
  io.run();
  CHECK(seen_ec == std::errc::operation_canceled);
  CHECK(seen_ec == boost::system::errc::operation_canceled);

  // A step run alone: error_code first, then the step's report.
  auto ws = workspace::make("w");
  io.restart();
  std::optional<step_report> step_seen;
  async_run_step(io.get_executor(), step("f").add_net(fill_int("f", "y", 3)), ws,
                 [&](boost::system::error_code ec, step_report r) {
                   seen_ec = ec;
                   step_seen = std::move(r);
                 });
  io.run();
  CHECK_FALSE(seen_ec);
  REQUIRE(step_seen);
  CHECK(step_seen->ok());
  CHECK(ws->read<i64>("y").value() == 3);
}

TEST_CASE("async_run through each token: values, codes, and the exception with the run's message", "[asio]") {
  asio::io_context io;
  local_session s(io);
  made good = group_of(shape::succeeds);
  made bad = group_of(shape::fails);

  SECTION("use_awaitable (the default) returns the report, or throws system_error with the message") {
    std::optional<run_report> value;
    std::string what;
    boost::system::error_code thrown;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          value = co_await s.async_run(good.group);
          try {
            (void)co_await s.async_run(bad.group, asio::use_awaitable);
          } catch (const boost::system::system_error& e) {  // taskgroup::system_error is one
            what = e.what();
            thrown = e.code();
          }
        },
        asio::detached);
    io.run();
    REQUIRE(value);
    CHECK(value->ok());
    CHECK(thrown == errc::op_failed);
    CHECK(what.find("task \"n/t\" (node \"n\"): s/net \"work\" op #0 (Fail): no") == 0);
  }
  SECTION("use_future: the report, or the same exception") {
    auto f_ok = s.async_run(good.group, asio::use_future);
    auto f_bad = s.async_run(bad.group, {}, asio::use_future);
    io.run();
    CHECK(f_ok.get().ok());
    try {
      (void)f_bad.get();
      FAIL("no exception");
    } catch (const taskgroup::system_error& e) {
      CHECK(e.error().code == errc::op_failed);
      CHECK(std::string(e.what()) == e.error().message);
    }
  }
  SECTION("as_tuple and redirect_error keep the report of a failed run") {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          auto [ec, report] = co_await s.async_run(bad.group, asio::as_tuple(asio::use_awaitable));
          CHECK(ec == errc::op_failed);
          CHECK(report.failure);
          CHECK(report.tasks.at(0).status == task_status::failed);
          boost::system::error_code redirected;
          run_report kept = co_await s.async_run(bad.group, asio::redirect_error(asio::use_awaitable, redirected));
          CHECK(redirected == errc::op_failed);
          CHECK(kept.tasks.at(0).status == task_status::failed);
        },
        asio::detached);
    io.run();
  }
  SECTION("deferred: nothing runs until the operation is launched") {
    auto later = s.async_run(good.group, asio::deferred);
    io.run();
    io.restart();
    CHECK_FALSE(good.x.get());  // not run yet
    bool called = false;
    std::move(later)([&](boost::system::error_code ec, run_report) {
      CHECK_FALSE(ec);
      called = true;
    });
    io.run();
    CHECK(called);
    CHECK(good.x.get().value() == 7);
  }
  SECTION("bind_executor: the handler runs on the executor bound to it") {
    auto strand = asio::make_strand(io);
    bool on_strand = false;
    s.async_run(good.group, asio::bind_executor(strand, [&](boost::system::error_code, run_report) {
                  on_strand = strand.running_in_this_thread();
                }));
    io.run();
    CHECK(on_strand);
  }
  SECTION("make_parallel_group waits for several runs") {
    made other = group_of(shape::succeeds);
    std::optional<std::pair<run_report, run_report>> both;
    asio::experimental::make_parallel_group(s.async_run(good.group, asio::deferred),
                                            s.async_run(other.group, asio::deferred))
        .async_wait(asio::experimental::wait_for_all(),
                    [&](std::array<std::size_t, 2>, boost::system::error_code e1, run_report r1,
                        boost::system::error_code e2, run_report r2) {
                      CHECK_FALSE(e1);
                      CHECK_FALSE(e2);
                      both.emplace(std::move(r1), std::move(r2));
                    });
    io.run();
    REQUIRE(both);
    CHECK(both->first.ok());
    CHECK(both->second.ok());
  }
}

TEST_CASE("async_run through bind_allocator allocates its state with the handler's allocator", "[asio]") {
  asio::io_context io;
  local_session s(io);
  made good = group_of(shape::succeeds);
  allocation_counts counts;
  bool called = false;
  s.async_run(good.group,
              asio::bind_allocator(counting_allocator<void>(&counts), [&](boost::system::error_code ec, run_report) {
                CHECK_FALSE(ec);
                called = true;
              }));
  io.run();
  CHECK(called);
  CHECK(counts.allocated > 0);
  CHECK(counts.freed == counts.allocated);

  // The same for a step run, a group on a session of its own and a probe.
  allocation_counts step_counts;
  io.restart();
  auto ws = workspace::make("w");
  async_run_step(io.get_executor(), step("f").add_net(fill_int("f", "y", 1)), ws,
                 asio::bind_allocator(counting_allocator<void>(&step_counts),
                                      [&](boost::system::error_code ec, step_report) { CHECK_FALSE(ec); }));
  io.run();
  CHECK(step_counts.allocated > 0);
  CHECK(step_counts.freed == step_counts.allocated);

  allocation_counts group_counts;
  io.restart();
  made alone = group_of(shape::succeeds);
  alone.group.async_run(asio::bind_executor(
      io, asio::bind_allocator(counting_allocator<void>(&group_counts),
                               [&](boost::system::error_code ec, run_report) { CHECK_FALSE(ec); })));
  io.run();
  CHECK(group_counts.allocated > 0);
  CHECK(group_counts.freed == group_counts.allocated);

  allocation_counts probe_counts;
  io.restart();
  run_probe probe;
  probe.async_where(
      asio::bind_executor(io, asio::bind_allocator(counting_allocator<void>(&probe_counts),
                                                   [&](boost::system::error_code ec, std::vector<std::string> lines) {
                                                     CHECK_FALSE(ec);
                                                     CHECK(lines.empty());  // it follows no run
                                                   })));
  io.run();
  CHECK(probe_counts.allocated > 0);
  CHECK(probe_counts.freed == probe_counts.allocated);
}

TEST_CASE("each cancellation type: terminal and partial stop a run, total is not supported", "[asio]") {
  for (const auto type :
       {asio::cancellation_type::terminal, asio::cancellation_type::partial, asio::cancellation_type::total}) {
    CAPTURE(static_cast<int>(type));
    asio::io_context io;
    local_session s(io);
    made waiting = group_of(shape::waits);
    asio::cancellation_signal cancel;
    std::optional<boost::system::error_code> seen;
    s.async_run(
        waiting.group, {.timeout = 200ms},
        asio::bind_cancellation_slot(cancel.slot(), [&](boost::system::error_code ec, run_report) { seen = ec; }));
    asio::steady_timer soon(io, 5ms);
    soon.async_wait([&](boost::system::error_code) { cancel.emit(type); });
    io.run();
    REQUIRE(seen);
    if (type == asio::cancellation_type::total) {
      CHECK(*seen == std::errc::timed_out);  // ignored: the run's own deadline ended it
    } else {
      CHECK(*seen == std::errc::operation_canceled);
    }
  }
}

TEST_CASE("async_run_step through each token and each cancellation type", "[asio]") {
  asio::io_context io;
  auto ws = workspace::make("w");
  auto c = std::make_shared<stuck_counters>();
  SECTION("use_awaitable, use_future, as_tuple") {
    std::optional<step_report> awaited;
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          awaited = co_await async_run_step(io.get_executor(), step("s").add_net(fill_int("s", "y", 2)), ws);
          auto [ec, r] = co_await async_run_step(io.get_executor(), step("f").add_net(failing("bad", "nope")), ws,
                                                 asio::as_tuple(asio::use_awaitable));
          CHECK(ec == errc::op_failed);
          REQUIRE(r.failure);
          CHECK(r.failure->message == "f/net \"bad\" op #0 (Fail): nope");
        },
        asio::detached);
    io.run();
    REQUIRE(awaited);
    CHECK(awaited->ok());
    CHECK(awaited->stats.net_runs == 1);
  }
  SECTION("cancelled by any type") {
    for (const auto type :
         {asio::cancellation_type::terminal, asio::cancellation_type::partial, asio::cancellation_type::total}) {
      CAPTURE(static_cast<int>(type));
      io.restart();
      asio::cancellation_signal cancel;
      boost::system::error_code seen;
      async_run_step(
          io.get_executor(), step("s").add_net(stuck("stuck", c)), ws,
          asio::bind_cancellation_slot(cancel.slot(), [&](boost::system::error_code ec, step_report) { seen = ec; }));
      asio::steady_timer soon(io, 5ms);
      soon.async_wait([&](boost::system::error_code) { cancel.emit(type); });
      io.run();
      CHECK(seen == std::errc::operation_canceled);
    }
  }
}

TEST_CASE("task_group::async_run runs on a session of its own, on the handler's executor", "[asio]") {
  asio::io_context io;
  made good = group_of(shape::succeeds);
  made bad = group_of(shape::fails);
  std::optional<run_report> value;
  boost::system::error_code failed;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        value = co_await good.group.async_run();
        auto [ec, r] = co_await bad.group.async_run(asio::as_tuple(asio::use_awaitable));
        failed = ec;
        CHECK(r.tasks.at(0).status == task_status::failed);
      },
      asio::detached);
  io.run();
  REQUIRE(value);
  CHECK(value->ok());
  CHECK(good.x.get().value() == 7);
  CHECK(failed == errc::op_failed);

  // Cancelled through the handler's slot.
  io.restart();
  made waiting = group_of(shape::waits);
  asio::cancellation_signal cancel;
  boost::system::error_code seen;
  waiting.group.async_run(asio::bind_executor(
      io, asio::bind_cancellation_slot(cancel.slot(), [&](boost::system::error_code ec, run_report) { seen = ec; })));
  asio::steady_timer soon(io, 5ms);
  soon.async_wait([&](boost::system::error_code) { cancel.emit(asio::cancellation_type::terminal); });
  io.run();
  CHECK(seen == std::errc::operation_canceled);
}

TEST_CASE("run_probe::async_where completes with error_code first, through as_tuple and use_future", "[asio]") {
  asio::io_context io;
  run_probe probe;
  auto f = probe.async_where(asio::use_future);
  CHECK(f.get().empty());  // it follows no run
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto [ec, lines] = co_await probe.async_where(asio::as_tuple(asio::use_awaitable));
        CHECK_FALSE(ec);
        CHECK(lines.empty());
      },
      asio::detached);
  io.run();
}

TEST_CASE("the blocking run returns the report, keeping it on failure with an error_code", "[asio]") {
  local_session s(2);
  made good = group_of(shape::succeeds);
  made bad = group_of(shape::fails);
  CHECK(s.run(good.group).ok());
  boost::system::error_code ec;
  run_report kept = s.run(bad.group, {}, ec);
  CHECK(ec == errc::op_failed);
  CHECK(kept.tasks.at(0).status == task_status::failed);
  try {
    (void)s.run(bad.group);
    FAIL("no exception");
  } catch (const taskgroup::system_error& e) {
    CHECK(std::string(e.what()) == kept.failure->message);
  }
}
