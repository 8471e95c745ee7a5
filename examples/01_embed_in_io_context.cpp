// 01: a task group inside an io_context that has other work to do.
//
// A session does not need its own threads. Built on an executor, it runs
// every node of a group as coroutines on strands of that executor, so a
// program that already owns an `io_context` (a server, a GUI loop, ...)
// can run task groups beside everything else on the same thread. Tasks
// that wait (here the `Sleep` op) suspend, never block, so the rest of the
// program keeps going while a run is in flight.
//
// To show it, a `steady_timer` ticks every 2 ms on the same single-threaded
// io_context while a coroutine does `co_await session.async_run(group)`: the
// ticks counted across that one co_await are the proof that the loop was
// free during the run. The run report then tells how each task went: its
// full name `<node>/<task>`, its status, its duration and its declared
// outputs (copied out of the node workspace when the node's tasks end).
//
// A second, shorter part shows `co_await group.async_run()`: the same thing with
// a session made for the one run on the awaiting coroutine's executor.
#include <taskgroup/taskgroup.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <iomanip>
#include <iostream>
#include <string>

namespace asio = boost::asio;
namespace tg = taskgroup;
using namespace std::chrono_literals;
using i64 = std::int64_t;

namespace {

// The "other work" of the program: a timer that ticks until told to stop.
struct ticker {
  asio::steady_timer timer;
  int ticks = 0;
  bool stopped = false;

  explicit ticker(asio::io_context& io) : timer(io) {}

  asio::awaitable<void> run() {
    while (!stopped) {
      timer.expires_after(2ms);
      // as_tuple: a cancelled wait is an ordinary result, not an exception.
      (void)co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
      if (!stopped) ++ticks;
    }
  }
  void stop() {
    stopped = true;
    timer.cancel();
  }
};

double ms(std::chrono::nanoseconds d) { return std::chrono::duration<double, std::milli>(d).count(); }

void print_report(const tg::run_report& report) {
  std::cout << std::fixed << std::setprecision(1) << "run report (" << ms(report.finished - report.started)
            << " ms):\n";
  for (const auto& t : report.tasks) {
    std::cout << "  " << t.name << ": " << tg::to_string(t.status) << " in " << ms(t.duration()) << " ms";
    for (const auto& [blob_name, value] : t.outputs)
      std::cout << ", " << blob_name << " = " << tg::to_display_string(*value);
    std::cout << '\n';
    if (t.failure) std::cout << "    " << t.failure->message << '\n';
  }
}

// Three tasks on node `local`; each waits a little, then writes a result.
// They run concurrently, so the run lasts about as long as the longest.
struct demo_group {
  tg::task_group group;
  tg::task_output<i64> bytes;
  tg::task_output<i64> count;
  tg::task_output<std::string> message;
};

demo_group make_group() {
  // "download": one net, an async Sleep then a result.
  tg::net download("download");
  download.op("Sleep", {}, {}, {{"ms", i64{30}}}).op("ConstantFill", {}, {"bytes"}, {{"value", i64{1024}}});
  tg::task t_download("download", tg::step("download").add_net(download));
  auto bytes = t_download.output<i64>("bytes");

  // "count": an init net, then a net iterated 5 times (4 ms each). The init
  // net is bound first, so `n` and `one` exist when `work` is bound.
  tg::net init("count_init");
  init.op("ConstantFill", {}, {"n"}, {{"value", i64{0}}}).op("ConstantFill", {}, {"one"}, {{"value", i64{1}}});
  tg::net work("count_work");
  work.op("Sleep", {}, {}, {{"ms", i64{4}}}).op("Add", {"n", "one"}, {"n"});
  tg::task t_count("count", tg::step("count")
                                .add_substep(tg::step("init").add_net(init))
                                .add_substep(tg::step("work").add_net(work).iterations(5)));
  auto count = t_count.output<i64>("n");

  // "greet": a string result.
  tg::net greet("greet");
  greet.op("Sleep", {}, {}, {{"ms", i64{10}}}).op("ConstantFill", {}, {"message"}, {{"value", std::string("hello")}});
  tg::task t_greet("greet", tg::step("greet").add_net(greet));
  auto message = t_greet.output<std::string>("message");

  // The default group type is PRIVATE: each task gets a child workspace of
  // the node's, and its outputs are created in the node workspace so they
  // outlive it.
  tg::task_group group;
  (void)group.add(t_download).value();
  (void)group.add(t_count).value();
  (void)group.add(t_greet).value();
  return {group, bytes, count, message};
}

asio::awaitable<int> demo(tg::local_session& session, ticker& tick) {
  int failures = 0;
  auto check = [&](bool ok, const char* what) {
    if (!ok) {
      std::cerr << "check failed: " << what << '\n';
      ++failures;
    }
  };

  // Part 1: session.async_run on the program's io_context. With
  // `as_tuple` the run completes with its code and its report, kept on
  // failure too; plain `co_await session.async_run(g.group)` would throw
  // `taskgroup::system_error` instead.
  demo_group g = make_group();
  const int before = tick.ticks;
  auto [ec, r] = co_await session.async_run(g.group, asio::as_tuple(asio::use_awaitable));
  const int during = tick.ticks - before;
  if (ec) {
    std::cerr << "run failed: " << r.failure->message << '\n';
    co_return 1;
  }
  print_report(r);
  std::cout << "timer ticks while the group ran: " << during << '\n';
  check(r.ok(), "every task succeeded");
  check(during >= 3, "the timer kept ticking during the run");
  check(g.bytes.get().value() == 1024, "download output");
  check(g.count.get().value() == 5, "count output");
  check(g.message.get().value() == "hello", "greet output");
  const auto* counted = r.find("local/count");
  check(counted != nullptr && counted->iterations == 1, "the count task ran its step once");

  // Part 2: group.async_run(), a session for one run on this coroutine's
  // executor. Handy for a single group; a long-lived session keeps node
  // workspaces across runs, this one drops them when the run ends.
  tg::net answer("answer");
  answer.op("Sleep", {}, {}, {{"ms", i64{10}}}).op("ConstantFill", {}, {"answer"}, {{"value", i64{42}}});
  tg::task t_answer("answer", tg::step("answer").add_net(answer));
  auto out = t_answer.output<i64>("answer");
  tg::task_group one;
  (void)one.add(t_answer).value();
  const int before2 = tick.ticks;
  // as_tuple: the code and the report, which a failure would keep.
  auto [ec2, r2] = co_await one.async_run(asio::as_tuple(asio::use_awaitable));
  const int during2 = tick.ticks - before2;
  check(!ec2 && r2.ok(), "group.async_run() succeeded");
  check(out.get().has_value() && out.get().value() == 42, "answer output");
  std::cout << "group.async_run(): answer = " << (out.get() ? std::to_string(out.get().value()) : "unset")
            << ", ticks meanwhile: " << during2 << '\n';

  tick.stop();  // let io.run() return
  co_return failures == 0 ? 0 : 1;
}

}  // namespace

int main() {
  asio::io_context io;  // one thread: this one
  tg::local_session session(io.get_executor());
  ticker tick(io);

  asio::co_spawn(io, tick.run(), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
  int rc = 1;
  asio::co_spawn(io, demo(session, tick), [&](std::exception_ptr e, int code) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        std::cerr << "exception: " << ex.what() << '\n';
      }
      code = 1;
    }
    rc = code;
    tick.stop();
  });
  io.run();
  std::cout << (rc == 0 ? "ok" : "FAILED") << '\n';
  return rc;
}
