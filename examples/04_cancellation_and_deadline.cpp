// 04: stopping a run: from outside, by a run deadline, by a step timeout.
//
// Every wait inside a run (Sleep, Enqueue on a full queue, Dequeue on an
// empty one, report-step timers) is an Asio operation that honours
// cancellation, so a run can be stopped at any moment and still unwinds
// cleanly: each task is cancelled, every coroutine returns, and only then
// does the run complete, with an error saying why.
//
// 1. From outside: `session.async_run(group, options, token)` takes any
//    completion token; a token with a cancellation slot (here a callback
//    bound to a `cancellation_signal` with `asio::bind_cancellation_slot`)
//    cancels the whole run when the signal is emitted. A timer emits it
//    after 20 ms. The handler gets `errc::cancelled` and the report, which
//    says that every task was cancelled.
// 2. A deadline for the whole run: `run_options{.timeout = 30ms}`. The
//    run completes with `errc::timeout` ("run timed out after 30 ms").
// 3. A deadline for one step: `execution_step::timeout(25ms)`. Only that
//    step is bounded; when it expires the step fails with `errc::timeout`,
//    naming the task and the step, and (under the default `join` policy)
//    the other tasks are cancelled and the run fails with that error.
// 4. After all that, the session and the groups are still usable: the
//    first group is compiled once and rerun in parts 1 and 2, and a last
//    quick run succeeds.
//
// The "forever" group would run for minutes: a task sleeping 10 s on node
// `local` and a task on node `n1` looping over 2 ms sleeps a million times.
// Each part checks that the run ended promptly (well under a second).
#include <taskgroup/taskgroup.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <system_error>
#include <tuple>

namespace asio = boost::asio;
namespace tg = taskgroup;
using namespace std::chrono_literals;
using i64 = std::int64_t;
using clock_type = std::chrono::steady_clock;

namespace {

int failures = 0;
void check(bool ok, const std::string& what) {
  if (!ok) {
    std::cerr << "check failed: " << what << '\n';
    ++failures;
  }
}

long long ms_since(clock_type::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0).count();
}

// Prints how a run ended and checks it ended with `expected`, promptly.
void expect_error(const char* part, const tg::error& e, tg::errc expected, long long elapsed_ms) {
  std::cout << part << ": " << e.code.message() << " after " << elapsed_ms << " ms\n  " << e.message << '\n';
  check(e.code == expected, std::string(part) + ": error code");
  check(elapsed_ms < 1000, std::string(part) + ": completed promptly");
}

void expect_error(const char* part, const tg::run_report& r, tg::errc expected, long long elapsed_ms) {
  if (!r.failure) {
    std::cout << part << ": unexpectedly succeeded\n";
    check(false, std::string(part) + ": the run should fail");
    return;
  }
  expect_error(part, *r.failure, expected, elapsed_ms);
}

tg::task_group make_forever() {
  tg::net nap("nap");
  nap.op("Sleep", {}, {}, {{"ms", i64{10'000}}});
  tg::net tick("tick");
  tick.op("Sleep", {}, {}, {{"ms", i64{2}}});
  tg::task_group g;
  (void)g.add(tg::task("nap", tg::step("nap").add_net(nap))).value();
  (void)g.add(tg::task("spin", tg::step("spin").add_net(tick).iterations(1'000'000)), "n1").value();
  return g;
}

// Parts 2 to 4, as a coroutine on the io_context.
asio::awaitable<void> later_parts(tg::local_session& session, tg::task_group forever) {
  // 2. A deadline for the whole run.
  auto t0 = clock_type::now();
  // as_tuple: the code and the report (kept on failure) instead of an
  // exception; the code compares equal to the standard condition.
  auto [ec, r] = co_await session.async_run(forever, {.timeout = 30ms}, asio::as_tuple(asio::use_awaitable));
  expect_error("2. run deadline", r, tg::errc::timeout, ms_since(t0));
  check(ec == std::errc::timed_out, "2. the code is a timed_out condition");

  // 3. A deadline for one step. `fetch` would sleep 10 s, but its step
  //    allows 25 ms; `quick` finishes first and is unaffected.
  tg::net slow("slow_fetch");
  slow.op("Sleep", {}, {}, {{"ms", i64{10'000}}}).op("ConstantFill", {}, {"data"}, {{"value", i64{1}}});
  tg::net fast("fast");
  fast.op("Sleep", {}, {}, {{"ms", i64{5}}}).op("ConstantFill", {}, {"quick_done"}, {{"value", true}});
  tg::task quick("quick", tg::step("quick").add_net(fast));
  auto quick_done = quick.output<bool>("quick_done");
  tg::task_group bounded;
  (void)bounded.add(tg::task("fetch", tg::step("fetch").add_net(slow).timeout(25ms))).value();
  (void)bounded.add(quick).value();
  t0 = clock_type::now();
  std::tie(ec, r) = co_await session.async_run(bounded, asio::as_tuple(asio::use_awaitable));
  expect_error("3. step timeout", r, tg::errc::timeout, ms_since(t0));
  check(r.failure && r.failure->message.find("local/fetch") != std::string::npos, "3. the error names the task");
  // Outputs are fetched per node when its tasks end: `quick` succeeded.
  check(quick_done.get().has_value() && quick_done.get().value(), "3. quick's output was fetched");

  // 4. The session is fine: a last run succeeds.
  tg::net hello("hello");
  hello.op("ConstantFill", {}, {"greeting"}, {{"value", std::string("still here")}});
  tg::task last("last", tg::step("last").add_net(hello));
  auto greeting = last.output<std::string>("greeting");
  tg::task_group final_group;
  (void)final_group.add(last).value();
  // Without as_tuple a failure would throw taskgroup::system_error.
  const tg::run_report last_run = co_await session.async_run(final_group);
  check(last_run.ok(), "4. a later run succeeds");
  std::cout << "4. afterwards: " << (greeting.get() ? greeting.get().value() : "no greeting") << '\n';
}

}  // namespace

int main() {
  asio::io_context io;
  tg::local_session session(io.get_executor());
  tg::task_group forever = make_forever();

  // 1. Cancelling from outside, through the completion token's slot.
  asio::cancellation_signal signal;
  asio::steady_timer stopper(io, 20ms);
  stopper.async_wait([&](boost::system::error_code) {
    std::cout << "1. emitting terminal cancellation\n";
    signal.emit(asio::cancellation_type::terminal);
  });
  const auto t0 = clock_type::now();
  std::optional<tg::run_report> outcome;
  boost::system::error_code code;
  long long elapsed = 0;
  session.async_run(forever, {},
                    asio::bind_cancellation_slot(signal.slot(), [&](boost::system::error_code ec, tg::run_report r) {
                      elapsed = ms_since(t0);
                      code = ec;
                      outcome = std::move(r);
                    }));
  io.run();
  check(outcome.has_value(), "1. the handler ran");
  if (outcome) {
    check(code == tg::errc::cancelled && outcome->failure && outcome->failure->code == code,
          "1. the code is the report's failure");
    // The report is there even though the run failed: every task cancelled.
    for (const auto& t : outcome->tasks) {
      std::cout << "1. " << t.name << ": " << tg::to_string(t.status) << '\n';
      check(t.status == tg::task_status::cancelled, "1. each task cancelled");
    }
    expect_error("1. cancelled from outside", *outcome->failure, tg::errc::cancelled, elapsed);
  }

  // Parts 2 to 4 on the same io_context.
  io.restart();
  asio::co_spawn(io, later_parts(session, forever), [](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      std::cerr << "exception: " << ex.what() << '\n';
    }
    ++failures;
  });
  io.run();

  std::cout << (failures == 0 ? "ok" : "FAILED") << '\n';
  return failures == 0 ? 0 : 1;
}
