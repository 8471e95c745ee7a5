// run_probe: where the tasks of a run in flight stand, on both drivers,
// against the words of the error the same run ends with when cancelled.
#include <taskgroup/session.hpp>
#include <taskgroup/task_group.hpp>

#include "support/steps.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace taskgroup;
using namespace taskgroup::test;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

constexpr i64 hour_ms = 3'600'000;

net sleep_net(const std::string& name) {
  net n(name);
  n.op("Sleep", {}, {}, {{"ms", hour_ms}});
  return n;
}

// Tasks that wait on every kind of op, on both drivers, and one that
// waits on none; with the lines a probe gives for each, sorted.
struct waiting_group {
  task_group g;
  std::vector<std::string> lines;

  waiting_group() {
    // Frame-free: a Sleep, and a Sleep whose duration is a blob.
    REQUIRE(g.add(task("sleeper", step("s").add_net(sleep_net("nap"))), node("a")));
    net nap2("nap2");
    nap2.op("ConstantFill", {}, {"delay"}, {{"value", hour_ms}}).op("Sleep", {"delay"}, {});
    REQUIRE(g.add(task("sleeper2", step("s2").add_net(nap2)), node("a")));
    // Coroutine driver (Dequeue has no callback form): an empty queue.
    net make("make");
    make.op("CreateQueue", {}, {"jobs"}, {{"capacity", i64{4}}});
    net take("take");
    take.op("Dequeue", {"jobs"}, {"job", "more"});
    REQUIRE(g.add(task("consumer", step("consume").nets({make, take})), node("a")));
    // Concurrent substeps: a Sleep beside an Enqueue on a full queue.
    net fill("fill");
    fill.op("CreateQueue", {}, {"q"}, {{"capacity", i64{1}}})
        .op("ConstantFill", {}, {"x"}, {{"value", i64{1}}})
        .op("Enqueue", {"q", "x"}, {})
        .op("Enqueue", {"q", "x"}, {});
    REQUIRE(g.add(task("pair", step("both")
                                   .concurrent_substeps(true)
                                   .add_substep(step("left").add_net(sleep_net("l")))
                                   .add_substep(step("right").add_net(fill))),
                  node("b")));
    // RunNet of a node's net whose op waits.
    REQUIRE(g.add_remote_net(sleep_net("inner"), node("r")));
    net calls("calls");
    calls.op("RunNet", {}, {}, {{"net", std::string("inner")}});
    REQUIRE(g.add(task("caller", step("call").add_net(calls)), node("r")));
    // A loop that never waits on an op: between two at any moment.
    REQUIRE(g.add(task("spinner", step("spin").iterations(1'000'000'000'000).add_net(incr("inc", "n"))), node("c")));

    lines = {
        R"(task "a/sleeper" (node "a"): s/net "nap" op #0 (Sleep): sleeping for 3600000 ms)",
        R"(task "a/sleeper2" (node "a"): s2/net "nap2" op #1 (Sleep): input #0 "delay": sleeping for 3600000 ms)",
        R"(task "a/consumer" (node "a"): consume/net "take" op #0 (Dequeue): input #0 "jobs": waiting for an item: )"
        R"(the queue is empty (0 of 4, open))",
        R"(task "b/pair" (node "b"): both/left/net "l" op #0 (Sleep): sleeping for 3600000 ms)",
        R"(task "b/pair" (node "b"): both/right/net "fill" op #3 (Enqueue): input #0 "q": waiting for room: )"
        R"(the queue is full (1 of 1))",
        R"(task "r/caller" (node "r"): call/net "calls" op #0 (RunNet): running net "inner": net "inner" op #0 )"
        R"((Sleep): sleeping for 3600000 ms)",
        R"(task "c/spinner" (node "c"): spin: running, not waiting on an op)",
    };
    std::sort(lines.begin(), lines.end());
  }
};

// A run's code and report, once it has ended.
std::pair<boost::system::error_code, run_report> run_to_end(local_session& s, const task_group& g,
                                                            const run_options& o) {
  std::promise<std::pair<boost::system::error_code, run_report>> p;
  s.async_run(g, o, [&](boost::system::error_code ec, run_report r) { p.set_value({ec, std::move(r)}); });
  return p.get_future().get();
}

std::vector<std::string> where(run_probe& p) { return p.async_where(asio::use_future).get(); }

// Asks until the probe sees `want` (the tasks take a moment to reach their
// waits); the last answer.
std::vector<std::string> where_once(run_probe& p, const std::vector<std::string>& want) {
  std::vector<std::string> got;
  for (int i = 0; i < 1000; ++i) {
    got = where(p);
    std::sort(got.begin(), got.end());
    if (got == want) break;
    std::this_thread::sleep_for(10ms);
  }
  return got;
}

}  // namespace

TEST_CASE("a probe says where each task of a run in flight waits, on both drivers", "[probe]") {
  waiting_group w;
  asio::thread_pool pool(2);
  local_session session(pool.get_executor());
  run_probe probe;
  CHECK(where(probe).empty());  // no run yet

  asio::cancellation_signal cancel;
  std::promise<run_report> ended;
  run_options o;
  o.probe = &probe;
  session.async_run(w.g, o, asio::bind_cancellation_slot(cancel.slot(), [&](boost::system::error_code, run_report r) {
                      ended.set_value(std::move(r));
                    }));
  const std::vector<std::string> got = where_once(probe, w.lines);
  CHECK(got == w.lines);
  // Asked again: the same (the waits go on).
  std::vector<std::string> again = where(probe);
  std::sort(again.begin(), again.end());
  CHECK(again == w.lines);

  asio::post(pool, [&] { cancel.emit(asio::cancellation_type::terminal); });
  const run_report r = ended.get_future().get();
  REQUIRE(r.failure);
  CHECK(r.failure->code == errc::cancelled);
  // The error names the same places, each op in its cancellation's words.
  const std::string& m = r.failure->message;
  CHECK_THAT(m, Catch::Contains(R"(task "a/sleeper" (node "a"): s/net "nap" op #0 (Sleep): wait cancelled )"));
  CHECK_THAT(m, Catch::Contains(R"(task "a/consumer" (node "a"): consume/net "take" op #0 (Dequeue): input #0 )"
                                R"("jobs": cancelled while waiting for an item: the queue is empty (0 of 4, open))"));
  // Once the run has ended the probe follows nothing.
  CHECK(where(probe).empty());
}

TEST_CASE("a probe follows one run at a time", "[probe]") {
  asio::thread_pool pool(2);
  local_session session(pool.get_executor());
  run_probe probe;
  task_group stuck;
  REQUIRE(stuck.add(task("t", step("s").add_net(sleep_net("nap")))));
  task_group quick;
  REQUIRE(quick.add(task("q", step("q").add_net(incr("inc", "n")))));

  asio::cancellation_signal cancel;
  std::promise<run_report> first;
  run_options o;
  o.probe = &probe;
  session.async_run(stuck, o, asio::bind_cancellation_slot(cancel.slot(), [&](boost::system::error_code, run_report r) {
                      first.set_value(std::move(r));
                    }));
  REQUIRE(where_once(probe, {R"(task "local/t" (node "local"): s/net "nap" op #0 (Sleep): sleeping for 3600000 ms)"})
              .size() == 1);
  // A second run given the same probe is refused before it starts.
  auto refused = run_to_end(session, quick, o);
  CHECK(std::get<0>(refused) == errc::invalid_task);
  REQUIRE(std::get<1>(refused).failure);
  CHECK(std::get<1>(refused).failure->message == "run_options::probe already follows another run in flight");
  CHECK(std::get<1>(refused).tasks.at(0).status == task_status::not_run);

  asio::post(pool, [&] { cancel.emit(asio::cancellation_type::terminal); });
  CHECK(first.get_future().get().failure->code == errc::cancelled);
  // Free again once that run has ended.
  auto later = run_to_end(session, quick, o);
  CHECK_FALSE(std::get<0>(later));
  CHECK(where(probe).empty());
}
