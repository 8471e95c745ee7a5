// run_probe: where the tasks of a run in flight stand, on both drivers,
// against the words of the error the same run ends with when cancelled;
// and local_session::async_describe, the same words for every run of a
// session without a probe.
#include <taskgroup/retry_policy.hpp>
#include <taskgroup/session.hpp>
#include <taskgroup/session_description.hpp>
#include <taskgroup/task_group.hpp>

#include "support/steps.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <future>
#include <optional>
#include <random>
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

// A net whose one op holds its node's thread: it sets `entered`, then
// waits for `released` (at most a minute: a failing test still ends).
net holding_net(std::promise<void>& entered, std::shared_future<void> released) {
  net hold("hold");
  hold.lambda("Hold", {}, {}, [&entered, released = std::move(released)](op_context&) -> status {
    entered.set_value();
    released.wait_for(60s);
    return ok();
  });
  return hold;
}

// The line for task "calm/sleeper" in its Sleep, and for node "busy"
// whose thread holding_net holds.
const std::string calm_line =
    R"(task "calm/sleeper" (node "calm"): s/net "nap" op #0 (Sleep): sleeping for 3600000 ms)";
const std::string busy_line = "node \"busy\": did not answer within " +
                              std::to_string(run_probe::answer_within.count()) +
                              " ms: a task there holds the node's thread (an op that blocks, or a long computation "
                              "between two yields)";

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
        // Node "a" has no task that can enqueue (Sleeps only).
        R"(task "a/consumer" (node "a"): consume/net "take" op #0 (Dequeue): input #0 "jobs": waiting for an item: )"
        R"(the queue is empty (0 of 4, open); no producer left: no task of this node that has not ended can )"
        R"(enqueue or close)",
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

// A run that `probe` follows, until the test cancels it from outside.
struct probed_run {
  run_probe probe;
  asio::cancellation_signal cancel;
  std::promise<run_report> ended;

  void start(local_session& s, const task_group& g, run_options o = {}) {
    o.probe = &probe;
    s.async_run(g, o, asio::bind_cancellation_slot(cancel.slot(), [this](boost::system::error_code, run_report r) {
                  ended.set_value(std::move(r));
                }));
  }
  // Cancels the run (terminal, from a thread of `pool`): its report.
  run_report cancel_and_end(asio::thread_pool& pool) {
    asio::post(pool, [this] { cancel.emit(asio::cancellation_type::terminal); });
    return ended.get_future().get();
  }
};

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
  probed_run run;
  run_probe& probe = run.probe;
  CHECK(where(probe).empty());  // no run yet

  run.start(session, w.g);
  const std::vector<std::string> got = where_once(probe, w.lines);
  CHECK(got == w.lines);
  // Asked again: the same (the waits go on).
  std::vector<std::string> again = where(probe);
  std::sort(again.begin(), again.end());
  CHECK(again == w.lines);
  // Without a token (default_completion_token_t): co_awaited.
  std::vector<std::string> awaited =
      asio::co_spawn(
          pool, [&]() -> asio::awaitable<std::vector<std::string>> { co_return co_await probe.async_where(); },
          asio::use_future)
          .get();
  std::sort(awaited.begin(), awaited.end());
  CHECK(awaited == w.lines);

  const run_report r = run.cancel_and_end(pool);
  REQUIRE(r.failure);
  CHECK(r.failure->code == errc::cancelled);
  // The error names the same places, each op in its cancellation's words.
  const std::string& m = r.failure->message;
  CHECK_THAT(m, Catch::Contains(R"(task "a/sleeper" (node "a"): s/net "nap" op #0 (Sleep): wait cancelled )"));
  CHECK_THAT(m, Catch::Contains(R"(task "a/consumer" (node "a"): consume/net "take" op #0 (Dequeue): input #0 )"
                                R"("jobs": cancelled while waiting for an item: the queue is empty (0 of 4, open); )"
                                R"(no producer left)"));
  // A task cancelled inside concurrent substeps names where the first of
  // its branches waited, and how many more were cancelled.
  const bool left_first =
      m.find(R"(task "b/pair" (node "b"): both/left/net "l" op #0 (Sleep): wait cancelled )") != std::string::npos;
  const bool right_first =
      m.find(R"(task "b/pair" (node "b"): both/right/net "fill" op #3 (Enqueue): input #0 "q": cancelled )") !=
      std::string::npos;
  CHECK(left_first != right_first);
  CHECK_THAT(m, Catch::Contains("(and 1 more concurrent branch cancelled)"));
  // Once the run has ended the probe follows nothing.
  CHECK(where(probe).empty());
}

TEST_CASE("a probe follows one run at a time", "[probe]") {
  asio::thread_pool pool(2);
  local_session session(pool.get_executor());
  probed_run run;
  run_probe& probe = run.probe;
  task_group stuck;
  REQUIRE(stuck.add(task("t", step("s").add_net(sleep_net("nap")))));
  task_group quick;
  REQUIRE(quick.add(task("q", step("q").add_net(incr("inc", "n")))));

  CHECK(probe.trace_id().empty());  // no run yet
  run.start(session, stuck);
  REQUIRE(where_once(probe, {R"(task "local/t" (node "local"): s/net "nap" op #0 (Sleep): sleeping for 3600000 ms)"})
              .size() == 1);
  // The trace id of the run it follows, as the run's report will have it.
  const std::string followed = probe.trace_id();
  CHECK(followed.size() == 32);
  // A second run given the same probe is refused before it starts.
  run_options o;
  o.probe = &probe;
  auto refused = run_to_end(session, quick, o);
  CHECK(std::get<0>(refused) == errc::invalid_task);
  REQUIRE(std::get<1>(refused).failure);
  CHECK(std::get<1>(refused).failure->message == "run_options::probe already follows another run in flight");
  CHECK(std::get<1>(refused).tasks.at(0).status == task_status::not_run);

  const run_report ended = run.cancel_and_end(pool);
  CHECK(ended.failure->code == errc::cancelled);
  CHECK(ended.trace_id == followed);
  CHECK(probe.trace_id().empty());
  // Free again once that run has ended.
  auto later = run_to_end(session, quick, o);
  CHECK_FALSE(std::get<0>(later));
  CHECK(where(probe).empty());
}

namespace {

// What a task beside the consumers of a node does; whether it is still
// there to feed a queue while they wait is the model's part.
enum class other_kind {
  ended_feeder,      // enqueues into its own queue, then ends
  sleeping_feeder,   // sleeps, then would enqueue
  stuck_feeder,      // waits on an empty queue of its own, then would enqueue
  sleeper,           // sleeps; no op that feeds
  ended_plain,       // a ConstantFill, then ends
  inline_op,         // a lambda op (may feed, for all the run knows), then sleeps
  ended_closer,      // closes a queue of its own, then ends
  run_net,           // RunNet of a sleeping net (its net is unknown until it runs)
  timed_out_feeder,  // an Enqueue after a Sleep that its step's deadline ends
  count
};

constexpr const char* hint = "; no producer left: no task of this node that has not ended can enqueue or close";

struct other_task {
  task t;
  std::optional<std::string> line;  // the probe's, while the consumers wait; none once ended
  bool feeds = false;               // still there to feed when the consumers wait
};

other_task make_other(other_kind kind, const std::string& node_name, const std::string& name) {
  const std::string prefix =
      "task \"" + node_name + "/" + name + "\" (node \"" + node_name + "\"): " + name + "/net \"" + name + "\" ";
  const std::string sleeping = "(Sleep): sleeping for 3600000 ms";
  net n(name);
  execution_step st = step(name);
  other_task out{task(name, step(name)), std::nullopt, false};
  switch (kind) {
    case other_kind::ended_feeder:
      n.op("ConstantFill", {}, {"x"}, {{"value", i64{1}}})
          .op("CreateQueue", {}, {"mine"}, {{"capacity", i64{1}}})
          .op("Enqueue", {"mine", "x"}, {});
      break;
    case other_kind::sleeping_feeder:
      n.op("Sleep", {}, {}, {{"ms", hour_ms}})
          .op("ConstantFill", {}, {"x"}, {{"value", i64{1}}})
          .op("CreateQueue", {}, {"mine"}, {{"capacity", i64{1}}})
          .op("Enqueue", {"mine", "x"}, {});
      out.line = prefix + "op #0 " + sleeping;
      out.feeds = true;
      break;
    case other_kind::stuck_feeder:
      n.op("ConstantFill", {}, {"x"}, {{"value", i64{1}}})
          .op("CreateQueue", {}, {"other"}, {{"capacity", i64{1}}})
          .op("Dequeue", {"other"}, {"y", "more"})
          .op("Enqueue", {"other", "x"}, {});
      out.line = prefix + "op #2 (Dequeue): input #0 \"other\": waiting for an item: the queue is empty (0 of 1, open)";
      out.feeds = true;
      break;
    case other_kind::sleeper:
      n.op("Sleep", {}, {}, {{"ms", hour_ms}});
      out.line = prefix + "op #0 " + sleeping;
      break;
    case other_kind::ended_plain: n.op("ConstantFill", {}, {"x"}, {{"value", i64{1}}}); break;
    case other_kind::inline_op:
      n.lambda("Nothing", {}, {}, [](op_context&) -> status { return ok(); }).op("Sleep", {}, {}, {{"ms", hour_ms}});
      out.line = prefix + "op #1 " + sleeping;
      out.feeds = true;
      break;
    case other_kind::ended_closer:
      n.op("CreateQueue", {}, {"mine"}, {{"capacity", i64{1}}}).op("CloseQueue", {"mine"}, {});
      break;
    case other_kind::run_net:
      n.op("RunNet", {}, {}, {{"net", std::string("inner")}});
      out.line = prefix + "op #0 (RunNet): running net \"inner\": net \"inner\" op #0 " + sleeping;
      out.feeds = true;
      break;
    case other_kind::timed_out_feeder:
      n.op("Sleep", {}, {}, {{"ms", hour_ms}})
          .op("ConstantFill", {}, {"x"}, {{"value", i64{1}}})
          .op("CreateQueue", {}, {"mine"}, {{"capacity", i64{1}}})
          .op("Enqueue", {"mine", "x"}, {});
      st.timeout(1ms);
      break;
    case other_kind::count: break;
  }
  out.t = task(name, st.add_net(n));
  return out;
}

}  // namespace

// Generated groups: two nodes, each with consumers waiting on empty queues
// and other tasks of every kind. A consumer's wait says that no producer
// is left exactly when no task of its node that can feed a queue (and no
// report step of its node) is still there; the probe and the cancelled
// run's reports say it alike.
TEST_CASE("a Dequeue says when no task of its node can feed it any more", "[probe]") {
  asio::thread_pool pool(2);
  for (std::uint32_t seed = 0; seed < 60; ++seed) {
    INFO("seed " << seed);
    // A session per group: remote nets stay on their nodes.
    local_session session(pool.get_executor());
    std::mt19937 rng(seed);
    auto pick = [&](std::uint32_t n) { return static_cast<std::uint32_t>(rng() % n); };
    task_group g;
    std::vector<std::string> lines;
    // Per consumer: its full name and whether its wait is starved.
    std::vector<std::pair<std::string, bool>> consumers;
    const std::vector<std::string> nodes{"n", "m"};
    for (const std::string& nd : nodes) {
      const bool report = pick(4) == 0;
      if (report) g.report_step(step("r_" + nd).add_net(incr("r_" + nd, "reports")), node(nd), 3'600'000ms);
      bool feeding = report;
      std::vector<std::string> consumer_lines;
      const std::uint32_t others = pick(4);
      for (std::uint32_t j = 0; j < others; ++j) {
        const auto kind = static_cast<other_kind>(pick(static_cast<std::uint32_t>(other_kind::count)));
        const auto& remote = g.remote_nets();
        if (kind == other_kind::run_net &&
            std::none_of(remote.begin(), remote.end(), [&](const remote_net& r) { return r.node == nd; })) {
          REQUIRE(g.add_remote_net(sleep_net("inner"), node(nd)));
        }
        other_task o = make_other(kind, nd, "o" + std::to_string(j));
        feeding = feeding || o.feeds;
        if (o.line) lines.push_back(*o.line);
        REQUIRE(g.add(std::move(o.t), node(nd)));
      }
      const std::uint32_t takers = 1 + pick(2);
      for (std::uint32_t i = 0; i < takers; ++i) {
        const std::string name = "c" + std::to_string(i);
        net take(name);
        take.op("CreateQueue", {}, {"jobs"}, {{"capacity", i64{4}}}).op("Dequeue", {"jobs"}, {"job", "more"});
        REQUIRE(g.add(task(name, step(name).add_net(take)), node(nd)));
        consumers.emplace_back(nd + "/" + name, !feeding);
        lines.push_back("task \"" + nd + "/" + name + "\" (node \"" + nd + "\"): " + name + "/net \"" + name +
                        "\" op #1 (Dequeue): input #0 \"jobs\": waiting for an item: the queue is empty (0 of 4, "
                        "open)" +
                        (feeding ? "" : hint));
      }
    }
    std::sort(lines.begin(), lines.end());

    probed_run run;
    run_options o;
    o.policy = run_policy::gather;  // a task's own deadline does not end the run
    run.start(session, g, o);
    CHECK(where_once(run.probe, lines) == lines);
    const run_report r = run.cancel_and_end(pool);
    INFO("the run's failure: " << (r.failure ? r.failure->message : std::string("none")));
    for (const auto& c : consumers) {
      const std::string& name = c.first;
      const bool starved = c.second;
      INFO(name);
      auto t = std::find_if(r.tasks.begin(), r.tasks.end(), [&](const task_report& x) { return x.name == name; });
      REQUIRE(t != r.tasks.end());
      REQUIRE(t->failure);
      CHECK(t->failure->code == errc::cancelled);
      const std::string tail = "cancelled while waiting for an item: the queue is empty (0 of 4, open)";
      CHECK_THAT(t->failure->message, Catch::EndsWith(starved ? tail + hint : tail));
    }
  }
}

// A node whose only thread a task holds (an op that blocks) cannot answer
// on its strand; the probe names it rather than wait for it, and still
// answers for the other nodes.
TEST_CASE("a probe names a node whose thread a task holds, without waiting for it", "[probe]") {
  asio::thread_pool pool(2);
  local_session session(pool.get_executor());
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  const net hold = holding_net(entered, released);
  task_group g;
  REQUIRE(g.add(task("holder", step("h").add_net(hold)), node("busy")));
  REQUIRE(g.add(task("sleeper", step("s").add_net(sleep_net("nap"))), node("calm")));

  probed_run run;
  run_probe& probe = run.probe;
  run.start(session, g);
  entered.get_future().wait();
  const std::string& calm = calm_line;
  const std::string& busy = busy_line;
  // The answer comes while the op still holds its thread (it is released
  // only below), the silent node after the tasks.
  std::vector<std::string> got;
  for (int i = 0; i < 100; ++i) {
    auto answer = probe.async_where(asio::use_future);
    REQUIRE(answer.wait_for(30s) == std::future_status::ready);
    got = answer.get();
    if (got.size() == 2 && got[0] == calm) break;  // the sleeper reached its Sleep
    std::this_thread::sleep_for(10ms);
  }
  CHECK(got == std::vector<std::string>{calm, busy});
  // The answer is work on its handler's executor until given: an
  // io_context whose only work is that answer (a quarter of a second
  // away) runs until then.
  asio::io_context ctx;
  std::optional<std::vector<std::string>> on_ctx;
  probe.async_where(asio::bind_executor(ctx, [&](boost::system::error_code ec, std::vector<std::string> lines) {
    CHECK_FALSE(ec);
    on_ctx = std::move(lines);
  }));
  ctx.run();
  REQUIRE(on_ctx);
  CHECK(*on_ctx == std::vector<std::string>{calm, busy});

  release.set_value();
  // Once the op has returned, the node answers again: its task ran to its
  // end, and only the sleeper is left.
  CHECK(where_once(probe, {calm}) == std::vector<std::string>{calm});
  const run_report r = run.cancel_and_end(pool);
  REQUIRE(r.failure);
  CHECK(r.failure->code == errc::cancelled);
}

// --- local_session::async_describe: the live view, without a probe ---------

namespace {

// A run started without a probe, until the test cancels it from outside.
struct dsc_run {
  asio::cancellation_signal cancel;
  std::promise<run_report> ended;

  void start(local_session& s, const task_group& g, run_options o) {
    s.async_run(g, std::move(o),
                asio::bind_cancellation_slot(
                    cancel.slot(), [this](boost::system::error_code, run_report r) { ended.set_value(std::move(r)); }));
  }
  run_report cancel_and_end(asio::thread_pool& pool) {
    asio::post(pool, [this] { cancel.emit(asio::cancellation_type::terminal); });
    return ended.get_future().get();
  }
};

session_description dsc_describe(local_session& s) {
  auto answer = s.async_describe(asio::use_future);
  // It answers within about run_probe::answer_within, a held node or not.
  REQUIRE(answer.wait_for(30s) == std::future_status::ready);
  return answer.get();
}

std::string dsc_traceparent(const std::string& trace_id) { return "00-" + trace_id + "-00f067aa0ba902b7-01"; }

}  // namespace

TEST_CASE("async_describe shows every run in flight and queued, and where their tasks wait", "[probe]") {
  asio::thread_pool pool(2);
  local_session session(pool.get_executor());
  session.set_limits(session_limits{.max_runs_in_flight = 2});
  CHECK(dsc_describe(session).runs.empty());

  // A: a node whose thread a task holds, beside a sleeper.
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  const net hold = holding_net(entered, released);
  task_group held;
  held.name("held");
  REQUIRE(held.add(task("holder", step("h").add_net(hold)), node("busy")));
  REQUIRE(held.add(task("sleeper", step("s").add_net(sleep_net("nap"))), node("calm")));
  // B: a task waiting an hour to retry.
  net flaky("flaky");
  flaky.op("FailTimes", {}, {}, {{"times", i64{5}}, {"message", std::string("busy upstream")}});
  retry_policy p;
  p.max_attempts = 3;
  p.initial_backoff = std::chrono::hours(1);
  p.max_backoff = std::chrono::hours(1);
  task_group retrying;
  retrying.name("retrying");
  REQUIRE(retrying.add(task("t", step("w").add_net(flaky)).retry(p)));
  // C: queued behind them (two in flight at most), at priority 5.
  task_group later;
  later.name("later");
  REQUIRE(later.add(task("q", step("q").add_net(incr("inc", "n")))));

  const std::string a_id = "0af7651916cd43dd8448eb211c80319c";
  const std::string b_id = "4bf92f3577b34da6a3ce929d0e0e4736";
  const std::string c_id = "11112222333344445555666677778888";
  dsc_run a, b, c;
  run_options o;
  o.trace_parent = dsc_traceparent(a_id);
  a.start(session, held, o);
  entered.get_future().wait();
  o.trace_parent = dsc_traceparent(b_id);
  b.start(session, retrying, o);
  o.trace_parent = dsc_traceparent(c_id);
  o.priority = 5;
  c.start(session, later, o);

  const std::string& calm = calm_line;
  const std::string& busy = busy_line;
  const std::string retry_head = R"(task "local/t" (node "local"): w: waiting to retry (attempt 2 of 3, )";
  const std::string retry_tail =
      R"( ms left) after: w/net "flaky" op #0 (FailTimes): busy upstream (run 1 of the 5 that fail))";
  // The tasks take a moment to reach their waits.
  session_description d;
  for (int i = 0; i < 200; ++i) {
    d = dsc_describe(session);
    if (d.runs.size() == 3 && d.runs[0].waiting.size() == 2 && d.runs[0].waiting[0] == calm &&
        d.runs[1].waiting.size() == 1)
      break;
    std::this_thread::sleep_for(10ms);
  }
  CHECK_FALSE(d.closed);
  CHECK_FALSE(d.rank);
  REQUIRE(d.runs.size() == 3);
  // In flight, oldest first; then the queue.
  const run_description& ra = d.runs[0];
  CHECK(ra.trace_id == a_id);
  CHECK(ra.group == "held");
  CHECK(ra.phase == run_phase::running);
  CHECK(ra.priority == 0);
  CHECK(ra.waiting == std::vector<std::string>{calm, busy});
  const run_description& rb = d.runs[1];
  CHECK(rb.trace_id == b_id);
  CHECK(rb.group == "retrying");
  CHECK(rb.phase == run_phase::running);
  REQUIRE(rb.waiting.size() == 1);
  CHECK_THAT(rb.waiting[0], Catch::StartsWith(retry_head) && Catch::EndsWith(retry_tail));
  const run_description& rc = d.runs[2];
  CHECK(rc.trace_id == c_id);
  CHECK(rc.group == "later");
  CHECK(rc.phase == run_phase::queued);
  CHECK(rc.priority == 5);
  CHECK(rc.waiting.empty());
  // Ages: A began before B; C has waited since it arrived.
  CHECK(ra.age >= rb.age);
  CHECK(rc.age > std::chrono::microseconds{0});

  // The same as JSON.
  const boost::json::value j = boost::json::parse(to_json(d));
  CHECK(j.at("closed").as_bool() == false);
  CHECK_FALSE(j.as_object().contains("rank"));
  const boost::json::array& runs = j.at("runs").as_array();
  REQUIRE(runs.size() == 3);
  CHECK(runs[0].at("trace_id").as_string() == a_id);
  CHECK(runs[0].at("group").as_string() == "held");
  CHECK(runs[0].at("phase").as_string() == "running");
  CHECK(runs[0].at("waiting").as_array().size() == 2);
  CHECK(runs[0].at("waiting").as_array()[1].as_string() == busy);
  CHECK(runs[0].at("age_us").as_int64() == ra.age.count());
  CHECK(runs[2].at("phase").as_string() == "queued");
  CHECK(runs[2].at("priority").as_int64() == 5);

  // Ended: B cancelled while it waits to retry lets C in; A's node is
  // released and its run cancelled.
  CHECK(b.cancel_and_end(pool).failure->code == errc::cancelled);
  release.set_value();
  CHECK(a.cancel_and_end(pool).failure->code == errc::cancelled);
  CHECK(c.ended.get_future().get().ok());
  CHECK(dsc_describe(session).runs.empty());
  // A draining (here: closed) session says it takes no new run.
  session.close();
  CHECK(dsc_describe(session).closed);
}

TEST_CASE("async_describe completes on its handler's executor, with work counted there", "[probe]") {
  local_session session(1);
  asio::io_context ctx;
  std::optional<session_description> got;
  session.async_describe(asio::bind_executor(ctx, [&](boost::system::error_code ec, session_description d) {
    CHECK_FALSE(ec);
    got = std::move(d);
  }));
  ctx.run();  // returns once the answer has come: it was work on ctx
  REQUIRE(got);
  CHECK(got->runs.empty());
}
