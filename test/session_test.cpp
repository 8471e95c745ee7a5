#include <taskgroup/session.hpp>

#include <taskgroup/task_group.hpp>

#include "detail/test_hooks.hpp"
#include "support/checks.hpp"
#include "support/run.hpp"
#include "support/steps.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace taskgroup;
using namespace taskgroup::test;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

// A group with a task that never ends by itself (cancellation tests).
task_group stuck_group(const std::shared_ptr<stuck_counters>& c) {
  task_group g;
  (void)g.add(task("stuck", step("stuck").add_net(stuck("stuck", c))), node("n1"));
  (void)g.add(task("other", step("other").add_net(stuck("stuck2", c))), node("n2"));
  return g;
}

}  // namespace

TEST_CASE("nodes are isolated: a blob written on n1 is invisible on n2", "[session]") {
  task_group g(workspace_type::global);
  REQUIRE(g.add(task("w", step("w").add_net(fill_int("w", "secret", 1))), node("n1")));
  net reader("reader");
  reader.op("Copy", {"secret"}, {"copy"});
  REQUIRE(g.add(task("r", step("r").add_net(reader)), node("n2")));
  local_session session(1);
  auto r = test::run_sync(session, g);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::blob_not_found);
  CHECK_THAT(r.error().message,
             Catch::Contains("task \"n2/r\" (node \"n2\")") && Catch::Contains("input blob \"secret\" does not exist"));
  CHECK(session.node_workspace("n1")->has("secret"));
  CHECK_FALSE(session.node_workspace("n2")->has("secret"));
}

TEST_CASE("tasks of one node share its workspace", "[session]") {
  task_group g(workspace_type::global);
  REQUIRE(g.add(task("w", step("w").add_net(fill_int("w", "shared", 5)))));
  local_session session(1);
  REQUIRE(test::run_sync(session, g));
  task_group g2(workspace_type::global);
  net reader("reader");
  reader.op("Copy", {"shared"}, {"copy"});
  REQUIRE(g2.add(task("r", step("r").add_net(reader))));
  REQUIRE(test::run_sync(session, g2));
  CHECK(session.node_workspace("local")->read<i64>("copy").value() == 5);
}

TEST_CASE("PRIVATE tasks of one node never see one another's blobs or nets, run after run", "[session]") {
  // Tasks alternate: a writer makes "mine" (and binds a net of its own),
  // the next task's net reads "mine", which must not exist for it: each
  // PRIVATE task starts in an empty workspace of its own, whichever task
  // ran on the node before it.
  task_group g;
  net shared_writer = fill_int("write", "mine", 7);
  net reader("read");
  reader.op("Copy", {"mine"}, {"copy"});
  constexpr int pairs = 300;
  for (int i = 0; i < pairs; ++i) {
    // Every writer shares one net object (one instance per workspace).
    REQUIRE(g.add(task("w" + std::to_string(i), step("w").add_net(shared_writer)), node("n")));
    REQUIRE(g.add(task("r" + std::to_string(i), step("r").add_net(reader)), node("n")));
  }
  local_session session(1);
  for (int run = 0; run < 3; ++run) {
    auto r = test::run_sync(session, g, run_options{.policy = run_policy::gather});
    REQUIRE(r);
    REQUIRE(r.value().tasks.size() == 2 * pairs);
    for (int i = 0; i < 2 * pairs; ++i) {
      const task_report& t = r.value().tasks[static_cast<std::size_t>(i)];
      INFO("run " << run << " task " << t.name);
      if (i % 2 == 0) {
        CHECK(t.status == task_status::succeeded);
      } else {
        CHECK(t.status == task_status::failed);
        REQUIRE(t.failure);
        CHECK(t.failure->code == errc::blob_not_found);
        // The error names this task, not one whose workspace came before.
        CHECK_THAT(t.failure->message, Catch::Contains("task \"" + t.name + "\""));
      }
    }
  }
  CHECK_FALSE(session.node_workspace("n")->has("mine"));
}

TEST_CASE("scenario 27: reruns of a GLOBAL group accumulate", "[session][scenario]") {
  task_group g(workspace_type::global);
  task t("reader");
  t.step(loop("read", 100, incr("count", "records")));
  t.init(step("init").add_net([] {
    net n("maybe_init");
    n.op("ConstantFill", {}, {"zero"}, {{"value", std::int64_t{0}}});
    return n;
  }()));
  auto records = t.output<i64>("records");
  REQUIRE(g.add(t));
  local_session session(1);
  session.node_workspace("local")->set("records", std::int64_t{0});
  REQUIRE(test::run_sync(session, g));
  CHECK(records.get().value() == 100);
  REQUIRE(test::run_sync(session, g));
  CHECK(records.get().value() == 200);
}

TEST_CASE("reruns of a PRIVATE group start fresh; its blobs vanish, outputs survive in the handles", "[session]") {
  task_group g(workspace_type::private_);
  task t("t");
  net work("work");
  work.op("Iter", {}, {"scratch"}).op("Copy", {"scratch"}, {"result"});
  t.step(work);
  auto result = t.output<i64>("result");
  REQUIRE(g.add(t));
  local_session session(1);
  REQUIRE(test::run_sync(session, g));
  CHECK(result.get().value() == 1);
  REQUIRE(test::run_sync(session, g));
  CHECK(result.get().value() == 1);
  // Outputs, too, live in the run's workspace: the values are in the
  // report and the handle, the node workspace has neither blob.
  auto ws = session.node_workspace("local");
  CHECK_FALSE(ws->has("scratch"));
  CHECK_FALSE(ws->has("result"));
}

TEST_CASE("scenario 28: a PRIVATE group writes blobs that exist in the node workspace", "[session][scenario]") {
  local_session session(1);
  auto ws = session.node_workspace("local");
  ws->set("dst", std::vector<i64>{});
  task_group g(workspace_type::private_);
  for (i64 v : {2, 4, 12}) {
    net n("put" + std::to_string(v));
    n.op("ConstantFill", {}, {"v"}, {{"value", v}}).op("Append", {"dst", "v"}, {"dst"});
    REQUIRE(g.add(task("pipe" + std::to_string(v), step("p").add_net(n))));
  }
  REQUIRE(test::run_sync(session, g));
  auto dst = ws->read<std::vector<i64>>("dst").value();
  std::sort(dst.begin(), dst.end());
  CHECK(dst == std::vector<i64>{2, 4, 12});
  CHECK_FALSE(ws->has("v"));
}

TEST_CASE("scenario 4: a net added twice runs twice", "[session][scenario]") {
  task_group g;
  task t("t");
  net inc = incr("inc", "total");
  t.init(fill_int("zero", "total", 0));
  t.step(step("body").substeps({step("a").add_net(inc), step("b").add_net(inc)}));
  auto total = t.output<i64>("total");
  REQUIRE(g.add(t));
  local_session session(1);
  REQUIRE(test::run_sync(session, g));
  CHECK(total.get().value() == 2);
}

TEST_CASE("scenario 26: instances share the node's counters and keep their own", "[session][scenario]") {
  for (auto [records, instances] : {std::pair<i64, i64>{100, 8}, {25, 6}}) {
    task_group g;
    task t("pipe");
    net fill_queue("fill_queue");
    fill_queue.op("CreateQueue", {}, {"q"}, {{"capacity", records}})
        .op("ConstantFill", {}, {"c1"}, {{"value", i64{0}}})
        .op("ConstantFill", {}, {"c2"}, {{"value", i64{0}}})
        .op("ConstantFill", {}, {"c3"}, {{"value", i64{0}}})
        .op("ConstantFill", {}, {"one"}, {{"value", i64{1}}})
        .op("ConstantFill", {}, {"rec"}, {{"value", i64{0}}});
    for (i64 i = 0; i < records; ++i) fill_queue.op("Enqueue", {"q", "rec"}, {});
    fill_queue.op("CloseQueue", {"q"}, {});
    t.init(fill_queue);
    t.instance_init(fill_int("counter_init", "task_counter", 0));
    net take("take");
    take.op("Dequeue", {"q"}, {"item", "ok"}).op("Not", {"ok"}, {"done"});
    net count("count");
    count.op("Add", {"c1", "one"}, {"c1"}).op("Add", {"task_counter", "one"}, {"task_counter"});
    t.step(loop("drain", {take, stop_if("done"), count}));
    net tally("tally");
    tally.op("Add", {"c2", "task_counter"}, {"c2"}).op("Add", {"c3", "one"}, {"c3"});
    t.instance_exit(tally);
    t.num_instances(instances);
    auto c1 = t.output<i64>("c1");
    auto c2 = t.output<i64>("c2");
    auto c3 = t.output<i64>("c3");
    REQUIRE(g.add(t));
    local_session session(1);
    REQUIRE(test::run_sync(session, g));
    CHECK(c1.get().value() == records);
    CHECK(c2.get().value() == records);
    CHECK(c3.get().value() == instances);
  }
}

TEST_CASE("scenario 29: a producer and three consumers through the queue", "[session][scenario]") {
  task_group g(workspace_type::global);
  local_session session(1);
  auto ws = session.node_workspace("local");
  net init("init");
  init.op("CreateQueue", {}, {"q"}, {{"capacity", i64{4}}}).op("ConstantFill", {}, {"sum"}, {{"value", i64{0}}});
  g.local_init(node(), init);
  net produce("produce");
  produce.op("ConstantFill", {}, {"item"}, {{"value", i64{0}}}).op("ConstantFill", {}, {"one"}, {{"value", i64{1}}});
  for (int i = 0; i < 100; ++i) produce.op("Add", {"item", "one"}, {"item"}).op("Enqueue", {"q", "item"}, {});
  produce.op("CloseQueue", {"q"}, {});
  REQUIRE(g.add(task("producer", step("produce").add_net(produce))));
  for (int c = 0; c < 3; ++c) {
    const std::string id = std::to_string(c);
    net take("take" + id);
    take.op("Dequeue", {"q"}, {"got" + id, "ok" + id}).op("Not", {"ok" + id}, {"stop" + id});
    net sum("sum" + id);
    sum.op("Add", {"sum", "got" + id}, {"sum"});
    REQUIRE(g.add(task("consumer" + id, loop("consume" + id, {take, stop_if("stop" + id), sum}))));
  }
  auto report = test::run_sync(session, g);
  REQUIRE(report);
  CHECK(report.value().ok());
  CHECK(ws->read<i64>("sum").value() == 5050);
}

TEST_CASE("1,000 tasks on 10 nodes all run, each node in its own workspace", "[session]") {
  task_group g(workspace_type::global);
  for (int i = 0; i < 1000; ++i) {
    REQUIRE(g.add(task("t", step("s").add_net(incr("inc" + std::to_string(i % 10), "count"))),
                  node("n" + std::to_string(i % 10))));
  }
  local_session session(2);
  auto report = test::run_sync(session, g);
  REQUIRE(report);
  CHECK(report.value().tasks.size() == 1000);
  CHECK(report.value().ok());
  for (int n = 0; n < 10; ++n)
    CHECK(session.node_workspace("n" + std::to_string(n))->read<i64>("count").value() == 100);
  CHECK(report.value().tasks[999].name == "n9/t:99");
}

TEST_CASE("a failing task among 1,000 ends the run with its error and nothing keeps running", "[session]") {
  auto c = std::make_shared<stuck_counters>();
  task_group g;
  for (int i = 0; i < 1000; ++i) {
    auto s = i == 500 ? step("s").nets({fill_int("x", "x", 1), failing("bad", "broken record")})
                      : step("s").add_net(stuck("wait", c));
    REQUIRE(g.add(task("t" + std::to_string(i), s), node("n" + std::to_string(i % 4))));
  }
  local_session session(2);
  auto r = test::run_sync(session, g);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::op_failed);
  CHECK(r.error().message == "task \"n0/t500\" (node \"n0\"): s/net \"bad\" op #0 (Fail): broken record");
  CHECK(c->cancelled == c->started);
  CHECK(c->finished == 0);
}

TEST_CASE("the gather policy lets every task finish and reports each", "[session]") {
  task_group g(workspace_type::global);
  REQUIRE(g.add(task("good", step("g").nets({[] {
                                               net n("sleep");
                                               n.op("Sleep", {}, {}, {{"ms", std::int64_t{5}}});
                                               return n;
                                             }(),
                                             fill_int("done", "done", 1)}))));
  REQUIRE(g.add(task("bad", step("b").add_net(failing("bad", "nope")))));
  local_session session(1);
  run_options o;
  o.policy = run_policy::gather;
  auto r = test::run_sync(session, g, o);
  REQUIRE(r);
  const run_report& rep = r.value();
  CHECK_FALSE(rep.ok());
  CHECK(rep.find("local/good")->status == task_status::succeeded);
  CHECK(rep.find("local/bad")->status == task_status::failed);
  CHECK_THAT(rep.find("local/bad")->failure->message, Catch::Contains("nope"));
  CHECK(rep.first_failure()->message == rep.find("local/bad")->failure->message);
  CHECK(session.node_workspace("local")->read<i64>("done").value() == 1);
  CHECK(rep.find("local/good")->finished >= rep.find("local/good")->started);
}

TEST_CASE("the run report gives status, times, iterations and outputs per task", "[session]") {
  task_group g;
  task t("t", step("s").add_net(incr("inc", "n")).iterations(7));
  t.init(fill_int("zero", "n", 0));
  (void)t.output<i64>("n");
  REQUIRE(g.add(t));
  local_session session(1);
  auto r = test::run_sync(session, g).value();
  REQUIRE(r.tasks.size() == 1);
  const auto& tr = r.tasks[0];
  CHECK(tr.name == "local/t");
  CHECK(tr.node == "local");
  CHECK(tr.status == task_status::succeeded);
  CHECK(tr.iterations == 7);
  REQUIRE(tr.outputs.size() == 1);
  CHECK(tr.outputs[0].first == "n");
  CHECK(tr.outputs[0].second->as<i64>() == 7);
  CHECK(r.finished >= r.started);
  CHECK(to_string(task_status::cancelled) == "cancelled");
}

TEST_CASE("a run deadline cancels every task and fails with a timeout", "[session][cancel]") {
  auto c = std::make_shared<stuck_counters>();
  local_session session(1);
  run_options o;
  o.timeout = 20ms;
  o.trace_parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  auto r = test::run_sync(session, stuck_group(c), o);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::timeout);
  // Its trace, then where each task still running then waited: its step,
  // net and op.
  CHECK(r.error().message ==
        "run timed out after 20 ms (trace 4bf92f3577b34da6a3ce929d0e0e4736); still running then: "
        "task \"n1/stuck\" (node \"n1\"): stuck/net \"stuck\" op #0 (Stuck): stuck op cancelled; "
        "task \"n2/other\" (node \"n2\"): other/net \"stuck2\" op #0 (Stuck): stuck op cancelled");
  CHECK(c->cancelled == 2);
}

TEST_CASE("group.async_run() runs on the awaiting coroutine's executor beside other work", "[session]") {
  asio::io_context io;
  task_group g(workspace_type::global);
  task t("t", step("s").nets({[] {
                                net n("sleep");
                                n.op("Sleep", {}, {}, {{"ms", std::int64_t{20}}});
                                return n;
                              }(),
                              fill_int("v", "v", 3)}));
  auto v = t.output<i64>("v");
  REQUIRE(g.add(t));
  int ticks = 0;
  bool done = false;
  asio::steady_timer ticker(io);
  std::function<void()> tick = [&] {
    ticker.expires_after(1ms);
    ticker.async_wait([&](boost::system::error_code ec) {
      if (ec || done) return;
      ++ticks;
      tick();
    });
  };
  tick();
  std::optional<run_report> got;
  asio::co_spawn(io, g.async_run(), [&](std::exception_ptr e, run_report r) {
    REQUIRE_FALSE(e);
    got.emplace(std::move(r));
    done = true;
    ticker.cancel();
  });
  io.run();
  REQUIRE(got);
  CHECK(got->ok());
  CHECK(v.get().value() == 3);
  CHECK(ticks >= 2);
}

TEST_CASE("a closed session refuses to run", "[session]") {
  local_session session(1);
  session.close();
  CHECK(session.closed());
  auto r = test::run_sync(session, task_group());
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::session_closed);
  CHECK(r.error().message == "Session is closed.");
}

TEST_CASE("a group is compiled once per session and reused", "[session]") {
  int constructed = 0;
  operator_registry reg(operator_registry::global());
  REQUIRE(reg.add(
      operator_schema("Probe").inputs(0).outputs(0).factory([&](op_context&) -> result<std::unique_ptr<op_kernel>> {
        ++constructed;
        return make_kernel([] { return ok(); });
      })));
  net n("probe");
  n.op("Probe", {}, {});
  task_group g(workspace_type::global);
  REQUIRE(g.add(task("t", step("s").add_net(n))));
  local_session session(1);
  session.set_registry(reg);
  REQUIRE(test::run_sync(session, g));
  REQUIRE(test::run_sync(session, g));
  CHECK(constructed == 1);  // one node workspace, one net instance, one compile
  CHECK(session.nodes() == std::vector<std::string>{"local"});
}

TEST_CASE("a blocking run works while another thread runs the session's executor", "[session]") {
  asio::io_context io;
  auto guard = asio::make_work_guard(io);
  local_session session(io.get_executor());
  std::thread loop([&] { io.run(); });
  task_group g(workspace_type::global);
  REQUIRE(g.add(task("t", step("s").add_net(fill_int("v", "v", 9)))));
  auto r = test::run_sync(session, g);
  guard.reset();
  loop.join();
  REQUIRE(r);
  CHECK(r.value().ok());
}

TEST_CASE("a blocking run from the session's own coordinator is refused, its report kept", "[session]") {
  asio::io_context io;
  local_session session(io.get_executor());
  std::optional<result<run_report>> inner;
  // An unbound completion handler of async_run runs on the coordinator.
  session.async_run(task_group(), {}, [&](boost::system::error_code, run_report) {
    inner.emplace(test::run_sync(session, task_group()));
  });
  io.run();
  REQUIRE(inner);
  REQUIRE_FALSE(*inner);
  CHECK(inner->error().message ==
        "local_session::run called from the session's own coordinator would block it until the run ends, and "
        "deadlock when the run needs it: use async_run there");
}

TEST_CASE("a blocking run from inside an op, on its node's strand, is refused naming the node", "[session]") {
  local_session session(2);
  auto inner = std::make_shared<std::optional<result<run_report>>>();
  task_group other;
  REQUIRE(other.add(task("t", step("t").add_net(net("t"))), node("n1")));
  net n("nested");
  n.lambda("Nested", {}, {}, [&session, inner, other](op_context&) {
    inner->emplace(test::run_sync(session, other));
    return ok();
  });
  task_group g;
  REQUIRE(g.add(task("outer", step("outer").add_net(n)), node("n1")));
  REQUIRE(test::run_sync(session, g));
  REQUIRE(*inner);
  REQUIRE_FALSE(**inner);
  CHECK((*inner)->error().code == errc::invalid_task);
  CHECK_THAT((*inner)->error().message,
             Catch::StartsWith("local_session::run called from node \"n1\"'s strand would block it"));
}

TEST_CASE("under gather a task's own step timeout is that task's failure, not the run's", "[session][cancel]") {
  auto c = std::make_shared<stuck_counters>();
  task_group g(workspace_type::global);
  REQUIRE(g.add(task("fetch", step("fetch").add_net(stuck("wait", c)).timeout(10ms))));
  REQUIRE(g.add(task("quick", step("quick").add_net(fill_int("q", "q", 1)))));
  local_session session(1);
  run_options o;
  o.policy = run_policy::gather;
  auto r = test::run_sync(session, g, o);
  REQUIRE(r);
  CHECK(r.value().find("local/fetch")->status == task_status::failed);
  CHECK(r.value().find("local/fetch")->failure->code == errc::timeout);
  CHECK(r.value().find("local/quick")->status == task_status::succeeded);
}

// --- tasks that run to their end without suspending --------------------------

namespace {

// An observer that records nothing: a run observed by it must run as an
// unobserved one does (the same driver, the same outcome).
class noop_observer final : public run_observer {};

// What a run left behind, to compare the inline and the coroutine paths.
struct driver_outcome {
  bool ok = false;
  std::string error;
  std::vector<std::string> tasks;  // name, status, iterations, failure
  std::vector<std::string> blobs;  // the node workspace's int64 blobs
};

// `coroutine_only`: every task on the coroutine driver (the test hook);
// else each on the driver its tree allows.
driver_outcome drive_outcome(const task_group& g, run_policy policy, bool coroutine_only, bool observed = false) {
  local_session session(1);
  noop_observer observer;
  run_options o;
  o.policy = policy;
  if (observed) o.observer = &observer;
  detail::test_driver_hooks().coroutine_only = coroutine_only;
  auto r = test::run_sync(session, g, o);
  detail::test_driver_hooks().coroutine_only = false;
  driver_outcome out;
  out.ok = static_cast<bool>(r);
  if (!r) out.error = r.error().message;
  if (r) {
    for (const auto& t : r.value().tasks) {
      out.tasks.push_back(t.name + " " + std::string(to_string(t.status)) + " " + std::to_string(t.iterations) + " " +
                          (t.failure ? t.failure->message : std::string()));
    }
  }
  auto ws = session.node_workspace("local");
  for (const auto& name : ws->local_blobs()) {
    if (auto v = ws->read<i64>(name)) out.blobs.push_back(name + "=" + std::to_string(v.value()));
  }
  return out;
}

// A net that sets `stop` once `blob` >= `limit`.
net stop_when(const std::string& blob, i64 limit) {
  net n("check");
  n.op("ConstantFill", {}, {"limit"}, {{"value", limit}});
  n.op("GE", {blob, "limit"}, {"stop"});
  return n;
}

// Runs `g` on the drivers its trees allow (tasks that allow it run without
// coroutine frames), the same with an observer, and on the coroutine
// driver alone, under both policies, and checks that the outcomes match.
void check_same_outcomes(const task_group& g) {
  for (run_policy policy : {run_policy::join, run_policy::gather}) {
    const driver_outcome frame_free = drive_outcome(g, policy, false);
    const driver_outcome observed = drive_outcome(g, policy, false, true);
    const driver_outcome coroutine = drive_outcome(g, policy, true);
    INFO("policy " << (policy == run_policy::join ? "join" : "gather"));
    CHECK(observed.ok == frame_free.ok);
    CHECK(observed.error == frame_free.error);
    CHECK(observed.tasks == frame_free.tasks);
    CHECK(observed.blobs == frame_free.blobs);
    CHECK(frame_free.ok == coroutine.ok);
    CHECK(frame_free.error == coroutine.error);
    CHECK(frame_free.tasks == coroutine.tasks);
    // After a failure under join, a task the coroutine runner had already
    // started may have run before the cancellation reached it; without a
    // coroutine, the tasks after the failure never start.
    if (frame_free.ok || policy == run_policy::gather) CHECK(frame_free.blobs == coroutine.blobs);
  }
}

}  // namespace

TEST_CASE("tasks run without suspending behave as the coroutine runner does", "[session][inline]") {
  // Each group is run twice: without an observer (tasks whose trees cannot
  // suspend run inline) and with one (every task a coroutine).
  task_group g(workspace_type::global);
  SECTION("counted loops, nested substeps, iteration counts") {
    REQUIRE(g.add(task("a", step("a").add_net(incr("inc", "a")).iterations(5))));
    REQUIRE(g.add(task("b", step("b")
                                .add_substep(step("b1").add_net(incr("inc", "b")).iterations(3))
                                .add_substep(step("b2").nets({incr("inc2", "b"), incr("inc3", "bb")}))
                                .iterations(4))));
    REQUIRE(g.add(task("none", step("none").add_net(incr("inc", "none")).iterations(0))));
  }
  SECTION("a stop blob ends only its own step, once") {
    REQUIRE(g.add(task("s", step("s")
                                .add_substep(step("inner")
                                                 .nets({incr("inc", "s"), stop_when("s", 1), incr("after", "s")})
                                                 .should_stop_blob("stop")
                                                 .only_once(true))
                                .add_substep(step("next").add_net(incr("next", "n"))))));
  }
  SECTION("failures name the step path, the net and the op") {
    REQUIRE(g.add(task("ok", step("ok").add_net(incr("inc", "ok")))));
    REQUIRE(g.add(task("bad", step("outer")
                                  .add_substep(step("first").add_net(incr("inc", "bad")))
                                  .add_substep(step("second").add_net(failing("broken", "no good")))
                                  .iterations(2))));
    REQUIRE(g.add(task("later", step("later").add_net(incr("inc", "later")))));
  }
  SECTION("a stop blob of the wrong type") {
    net str("str");
    str.op("ConstantFill", {}, {"stop"}, {{"value", std::string("yes")}});
    REQUIRE(g.add(task("t", step("t").nets({str}).should_stop_blob("stop").only_once(true))));
  }
  SECTION("a step with its own workspace") {
    REQUIRE(g.add(task("t", step("t").add_net(incr("inc", "x")).iterations(2).create_workspace(true))));
  }
  check_same_outcomes(g);
}

TEST_CASE("counted and stopped iterations of an inline task", "[session][inline]") {
  task_group g(workspace_type::global);
  REQUIRE(g.add(task("b", step("b")
                              .add_substep(step("b1").add_net(incr("inc", "b")).iterations(3))
                              .add_substep(step("b2").nets({incr("inc2", "b"), incr("inc3", "bb")}))
                              .iterations(4))));
  auto out = drive_outcome(g, run_policy::join, false);
  REQUIRE(out.ok);
  CHECK(out.tasks == std::vector<std::string>{"local/b succeeded 4 "});
  CHECK(out.blobs == std::vector<std::string>{"b=16", "bb=4"});
}

TEST_CASE("tasks that cannot suspend run to their end before the node's suspending tasks start", "[session][inline]") {
  // The order among tasks of a group is not specified; this pins what the
  // session does, so that a change of it is a decision.
  auto log = std::make_shared<std::vector<std::string>>();
  auto record = [log](const std::string& what, bool async) {
    net n("record");
    if (async) {
      n.lambda("log", {}, {}, [log, what](op_context&) -> asio::awaitable<status> {
        log->push_back(what);
        co_return ok();
      });
    } else {
      n.lambda("log", {}, {}, [log, what](op_context&) {
        log->push_back(what);
        return ok();
      });
    }
    return n;
  };
  task_group g;
  REQUIRE(g.add(task("first", step("first").add_net(record("suspending", true)))));
  REQUIRE(g.add(task("second", step("second").add_net(record("inline", false)))));
  local_session session(1);
  REQUIRE(test::run_sync(session, g));
  CHECK(*log == std::vector<std::string>{"inline", "suspending"});
  // An observer does not change which driver runs a task: the same order.
  log->clear();
  noop_observer observer;
  run_options o;
  o.observer = &observer;
  REQUIRE(test::run_sync(session, g, o));
  CHECK(*log == std::vector<std::string>{"inline", "suspending"});
  // On the coroutine driver alone, tasks start in group order.
  log->clear();
  detail::test_driver_hooks().coroutine_only = true;
  auto forced = test::run_sync(session, g);
  detail::test_driver_hooks().coroutine_only = false;
  REQUIRE(forced);
  CHECK(*log == std::vector<std::string>{"suspending", "inline"});
}

TEST_CASE("a failing inline task cancels the tasks of its node that have not run", "[session][inline]") {
  auto c = std::make_shared<stuck_counters>();
  task_group g(workspace_type::global);
  REQUIRE(g.add(task("before", step("before").add_net(incr("inc", "before")))));
  REQUIRE(g.add(task("waits", step("waits").add_net(stuck("wait", c)))));
  REQUIRE(g.add(task("fails", step("fails").add_net(failing("bad", "inline failure")))));
  REQUIRE(g.add(task("after", step("after").add_net(incr("inc", "after")))));
  REQUIRE(g.add(task("elsewhere", step("elsewhere").add_net(stuck("wait", c))), node("n2")));
  local_session session(2);

  SECTION("join: the run fails with that task's error; the others never start or are cancelled") {
    auto r = test::run_sync(session, g);
    REQUIRE_FALSE(r);
    CHECK(r.error().message == "task \"local/fails\" (node \"local\"): fails/net \"bad\" op #0 (Fail): inline failure");
    auto ws = session.node_workspace("local");
    CHECK(ws->read<i64>("before").value() == 1);
    CHECK_FALSE(ws->has("after"));
    CHECK(c->finished == 0);
    CHECK(c->cancelled == c->started);
  }
  SECTION("join: the report says which tasks began") {
    std::promise<run_report> got;
    session.async_run(g, run_options{}, [&](boost::system::error_code, run_report r) { got.set_value(std::move(r)); });
    const run_report r = got.get_future().get();
    auto began = [&](const std::string& name) {
      const task_report* t = r.find(name);
      REQUIRE(t != nullptr);
      return std::pair(t->status, t->began);
    };
    CHECK(began("local/before") == std::pair(task_status::succeeded, true));
    CHECK(began("local/fails") == std::pair(task_status::failed, true));
    // The inline failure came before these began.
    CHECK(began("local/after") == std::pair(task_status::cancelled, false));
    CHECK(r.find("local/after")->failure->message == "task \"local/after\" (node \"local\"): after: cancelled");
    // Queued behind the node's inline tasks, it had not begun either.
    CHECK(began("local/waits") == std::pair(task_status::cancelled, false));
    // A task left out did not begin; one cancelled while it waited had.
    run_options only;
    only.only_nodes = std::vector<std::string>{"n2"};
    only.timeout = 300ms;  // time for the task to begin, even under load
    std::promise<run_report> again;
    session.async_run(g, only, [&](boost::system::error_code, run_report r2) { again.set_value(std::move(r2)); });
    const run_report r2 = again.get_future().get();
    CHECK(r2.find("local/before")->status == task_status::not_run);
    CHECK_FALSE(r2.find("local/before")->began);
    CHECK(r2.find("n2/elsewhere")->status == task_status::cancelled);
    CHECK(r2.find("n2/elsewhere")->began);
  }
  SECTION("gather: every task runs; the report says which was cancelled by whom") {
    run_options o;
    o.policy = run_policy::gather;
    o.timeout = 200ms;  // the stuck tasks would wait an hour
    auto r = test::run_sync(session, g, o);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::timeout);
    CHECK(session.node_workspace("local")->read<i64>("after").value() == 1);
  }
}

TEST_CASE("an inline task that fails under gather is reported, the others succeed", "[session][inline]") {
  task_group g(workspace_type::global);
  REQUIRE(g.add(task("a", step("a").add_net(incr("inc", "a")))));
  REQUIRE(g.add(task("bad", step("bad").add_net(failing("bad", "nope")))));
  REQUIRE(g.add(task("c", step("c").add_net(incr("inc", "c")))));
  local_session session(1);
  run_options o;
  o.policy = run_policy::gather;
  auto r = test::run_sync(session, g, o);
  REQUIRE(r);
  CHECK(r.value().find("local/a")->status == task_status::succeeded);
  CHECK(r.value().find("local/bad")->status == task_status::failed);
  CHECK(r.value().find("local/c")->status == task_status::succeeded);
  CHECK(r.value().find("local/c")->started >= r.value().find("local/bad")->finished);
}

TEST_CASE("a node of many inline tasks yields to its strand, and cancellation stops it between tasks",
          "[session][inline][cancel]") {
  constexpr int n = 4000;
  task_group g(workspace_type::global);
  for (int i = 0; i < n; ++i) REQUIRE(g.add(task("t" + std::to_string(i), step("s").add_net(incr("inc", "count")))));
  asio::io_context io;
  local_session session(io.get_executor());
  asio::cancellation_signal sig;
  std::optional<result<run_report>> got;
  session.async_run(g, {}, asio::bind_cancellation_slot(sig.slot(), test::as_result([&](result<run_report> r) {
                                                          got.emplace(std::move(r));
                                                        })));
  // Other work of the same io_context gets turns while the node runs its
  // tasks (it yields every 256 tasks), and cancels the run once 512 have
  // run.
  auto ws = session.node_workspace("local");
  int turns = 0;
  std::function<void()> tick = [&] {
    if (got) return;
    ++turns;
    if (blob* count = ws->find("count"); count != nullptr && count->has_value() && count->as<i64>() >= 512) {
      sig.emit(asio::cancellation_type::terminal);
      return;
    }
    asio::post(io, tick);
  };
  asio::post(io, tick);
  io.run();
  REQUIRE(got);
  REQUIRE_FALSE(*got);
  CHECK(got->error().code == errc::cancelled);
  const i64 ran = ws->read<i64>("count").value();
  CHECK(turns >= 2);
  CHECK(ran >= 512);
  CHECK(ran < n);
  // The session is usable afterwards: a rerun runs every task.
  io.restart();
  std::optional<result<run_report>> again;
  session.async_run(g, {}, test::as_result([&](result<run_report> r) { again.emplace(std::move(r)); }));
  io.run();
  REQUIRE(again);
  REQUIRE(*again);
  CHECK(again->value().ok());
  CHECK(ws->read<i64>("count").value() == ran + n);
}

// --- tasks that wait without coroutine frames ----------------------------------

namespace {

// A net that sleeps `ms` between two increments of `blob`.
net sleepy(const std::string& name, const std::string& blob, i64 ms) {
  net n(name);
  n.op("Iter", {}, {blob}).op("Sleep", {}, {}, {{"ms", ms}}).op("Iter", {}, {blob});
  return n;
}

// An asynchronous kernel with a callback form that ends at once (inside
// start), later (through its executor), after a 1 ms or an hour-long
// `sleep_for`, or drops its completion.
enum class ending { at_once, posted, napped, hour, dropped };

net callback_op(const std::string& name, ending how, std::shared_ptr<int> runs) {
  operator_schema schema("CallbackOp");
  schema.factory(
      [how, runs](op_context&) -> result<std::unique_ptr<op_kernel>> {
        class kernel final : public op_kernel {
         public:
          kernel(ending h, std::shared_ptr<int> r) : op_kernel(callback_form), how_(h), runs_(std::move(r)) {}
          void start(const asio::any_io_executor& ex, op_completion done) noexcept override {
            ++*runs_;
            switch (how_) {
              case ending::at_once: done(ok()); break;
              case ending::posted: asio::post(ex, [d = std::move(done)]() mutable { d(ok()); }); break;
              case ending::napped: sleep_for(ex, 1ms, std::move(done)); break;
              case ending::hour: sleep_for(ex, 1h, std::move(done)); break;
              case ending::dropped: break;
            }
          }

         private:
          ending how_;
          std::shared_ptr<int> runs_;
        };
        return std::unique_ptr<op_kernel>(std::make_unique<kernel>(how, runs));
      },
      true);
  net n(name);
  op_def def{"CallbackOp", {}, {}, {}, std::make_shared<const operator_schema>(std::move(schema))};
  n.add(std::move(def));
  return n;
}

}  // namespace

TEST_CASE("tasks that wait on callback-form ops behave as the coroutine runner does", "[session][frame-free]") {
  // Each group runs without an observer (such tasks wait without coroutine
  // frames) and with one (every task a coroutine); the outcomes match.
  task_group g(workspace_type::global);
  SECTION("loops and nested substeps around sleeps") {
    REQUIRE(g.add(task("a", step("a").add_net(sleepy("nap", "a", 1)).iterations(3))));
    REQUIRE(g.add(task("b", step("b")
                                .add_substep(step("b1").add_net(sleepy("nap", "b", 0)).iterations(2))
                                .add_substep(step("b2").nets({incr("inc", "bb"), sleepy("nap2", "bb", 0)}))
                                .iterations(3))));
    REQUIRE(g.add(task("plain", step("plain").add_net(incr("inc", "plain")).iterations(2))));
  }
  SECTION("a stop blob after a sleep ends its own step only") {
    REQUIRE(g.add(task("s", step("s")
                                .add_substep(step("inner")
                                                 .nets({sleepy("nap", "s", 0), stop_when("s", 2), incr("after", "s")})
                                                 .should_stop_blob("stop")
                                                 .only_once(true))
                                .add_substep(step("next").add_net(sleepy("nap", "n", 0))))));
  }
  SECTION("a failure after a sleep names the path, the net and the op") {
    net late("late");
    late.op("Sleep", {}, {}, {{"ms", i64{1}}}).op("Fail", {}, {}, {{"message", std::string("after the nap")}});
    REQUIRE(g.add(task("ok", step("ok").add_net(sleepy("nap", "ok", 0)))));
    REQUIRE(g.add(task("bad", step("outer")
                                  .add_substep(step("first").add_net(sleepy("nap", "bad", 0)))
                                  .add_substep(step("second").add_net(late)))));
  }
  SECTION("a root step with its own workspace") {
    REQUIRE(g.add(task("t", step("t").add_net(sleepy("nap", "x", 0)).iterations(2).create_workspace(true))));
  }
  SECTION("ops with a callback form that end at once or through the executor") {
    auto runs = std::make_shared<int>(0);
    REQUIRE(g.add(task("now", step("now").add_net(callback_op("now", ending::at_once, runs)).iterations(3))));
    REQUIRE(g.add(task("later", step("later").add_net(callback_op("later", ending::posted, runs)).iterations(3))));
  }
  SECTION("a user's op that waits with sleep_for, beside Sleep") {
    auto runs = std::make_shared<int>(0);
    for (int i = 0; i < 20; ++i) {
      const std::string name = "n" + std::to_string(i);
      REQUIRE(g.add(task(name, step(name).nets({callback_op("nap", ending::napped, runs), sleepy("sleep", "s", 0),
                                                incr("count", "naps")}))));
    }
  }
  check_same_outcomes(g);
}

TEST_CASE("sleep_for in a user's op: many waits end, and cancellation ends a wait at once", "[session][frame-free]") {
  SECTION("a group of waiting tasks, frame-free") {
    auto runs = std::make_shared<int>(0);
    task_group g(workspace_type::global);
    for (int i = 0; i < 200; ++i) {
      const std::string name = "t" + std::to_string(i);
      REQUIRE(g.add(task(name, step(name).nets({callback_op("nap", ending::napped, runs), incr("count", "done")}))));
    }
    local_session session(1);
    auto r = test::run_sync(session, g);
    REQUIRE(r);
    CHECK(*runs == 200);
    CHECK(session.node_workspace("local")->read<i64>("done").value() == 200);
  }
  SECTION("cancelled from outside: the op's error, and nothing left waiting") {
    auto runs = std::make_shared<int>(0);
    auto ws = workspace::make("w");
    net n = callback_op("hour", ending::hour, runs);
    auto inst = ws->instance_of(n, operator_registry::global());
    REQUIRE(inst);
    asio::io_context io;
    asio::cancellation_signal sig;
    std::optional<status> st;
    asio::co_spawn(
        io, [&]() -> asio::awaitable<void> { st = co_await inst.value()->run(); },
        asio::bind_cancellation_slot(sig.slot(), [](std::exception_ptr e) {
          if (e) std::rethrow_exception(e);
        }));
    asio::post(io, [&] { asio::post(io, [&] { sig.emit(asio::cancellation_type::terminal); }); });
    io.run();  // returns: the hour-long wait is gone, its timer too
    REQUIRE(st.has_value());
    REQUIRE_FALSE(*st);
    CHECK(st->error().code == errc::cancelled);
    CHECK(test::sleep_left_ms(*st, "net \"hour\" op #0 (CallbackOp): ", 3'600'000) > 3'500'000);
    CHECK(*runs == 1);
  }
}

TEST_CASE("a task that waits on a callback-form op starts with the node's inline tasks", "[session][frame-free]") {
  // Proof of the path taken: the frame-free task's first op runs before
  // the coroutine task (added first) starts, with or without an observer;
  // on the coroutine driver alone, tasks start in group order.
  auto log = std::make_shared<std::vector<std::string>>();
  auto record = [log](const std::string& what) {
    return [log, what](op_context&) {
      log->push_back(what);
      return ok();
    };
  };
  net coro("coro");
  coro.lambda("log", {}, {}, [log](op_context&) -> asio::awaitable<status> {
    log->push_back("coroutine");
    co_return ok();
  });
  net waits("waits");
  waits.lambda("log", {}, {}, record("before the sleep")).op("Sleep", {}, {}, {{"ms", i64{1}}});
  waits.lambda("log", {}, {}, record("after the sleep"));
  task_group g;
  REQUIRE(g.add(task("first", step("first").add_net(coro))));
  REQUIRE(g.add(task("second", step("second").add_net(waits))));
  local_session session(1);
  REQUIRE(test::run_sync(session, g));
  REQUIRE(log->size() == 3);
  CHECK(log->front() == "before the sleep");
  CHECK(log->back() == "after the sleep");
  log->clear();
  noop_observer observer;
  run_options o;
  o.observer = &observer;
  REQUIRE(test::run_sync(session, g, o));
  REQUIRE(log->size() == 3);
  CHECK(log->front() == "before the sleep");
  CHECK(log->back() == "after the sleep");
  log->clear();
  detail::test_driver_hooks().coroutine_only = true;
  auto forced = test::run_sync(session, g);
  detail::test_driver_hooks().coroutine_only = false;
  REQUIRE(forced);
  CHECK(*log == std::vector<std::string>{"coroutine", "before the sleep", "after the sleep"});
}

TEST_CASE("a task resumes on its node's strand after Sleep, whatever runs the strand", "[session][frame-free]") {
  // Sleep waits on the io_context's own timer when the node's strand wraps
  // an io_context, and on the strand's inner executor otherwise; either
  // way the op after it runs on the node's strand, never beside another
  // task of that node. Several threads run the executor; both runners.
  constexpr int nodes = 3;
  constexpr int per_node = 40;
  auto check = [&](local_session& session, const std::function<void(task_group&, run_options)>& run) {
    for (bool coroutine_only : {false, true}) {
      INFO((coroutine_only ? "coroutine" : "frame-free"));
      auto off_strand = std::make_shared<std::atomic<int>>(0);
      auto counts = std::make_shared<std::vector<int>>(nodes, 0);  // per node, touched on its strand only
      task_group g;
      for (int k = 0; k < nodes; ++k) {
        const std::string where = "n" + std::to_string(k);
        for (int i = 0; i < per_node; ++i) {
          net n("nap");
          n.op("Sleep", {}, {}, {{"ms", i64{1}}});
          n.lambda("Count", {}, {}, [&session, off_strand, counts, where, k](op_context&) {
            if (!session.node_strand(where).running_in_this_thread()) ++*off_strand;
            ++(*counts)[static_cast<std::size_t>(k)];
            return ok();
          });
          REQUIRE(g.add(task("t" + std::to_string(i), step("s").add_net(n)), node(where)));
        }
      }
      detail::test_driver_hooks().coroutine_only = coroutine_only;
      run(g, run_options{});
      detail::test_driver_hooks().coroutine_only = false;
      CHECK(off_strand->load() == 0);
      CHECK(*counts == std::vector<int>(nodes, per_node));
    }
  };
  SECTION("a strand over an io_context run by three threads") {
    asio::io_context io(3);
    local_session session(io.get_executor());
    check(session, [&](task_group& g, run_options o) {
      std::optional<result<run_report>> got;
      session.async_run(g, o, test::as_result([&](result<run_report> r) { got.emplace(std::move(r)); }));
      std::vector<std::thread> threads;
      for (int i = 0; i < 3; ++i) threads.emplace_back([&] { io.run(); });
      for (auto& t : threads) t.join();
      io.restart();
      REQUIRE(got);
      REQUIRE(*got);
      CHECK(got->value().ok());
    });
  }
  SECTION("a strand over a thread pool") {
    local_session session(3);
    check(session, [&](task_group& g, run_options o) {
      auto r = test::run_sync(session, g, o);
      REQUIRE(r);
      CHECK(r.value().ok());
    });
  }
}

TEST_CASE("a callback-form op that drops its completion is the op's error", "[session][frame-free]") {
  auto runs = std::make_shared<int>(0);
  task_group g;
  REQUIRE(g.add(task("t", step("t").add_net(callback_op("drops", ending::dropped, runs)))));
  for (bool coroutine_only : {false, true}) {
    INFO((coroutine_only ? "coroutine" : "frame-free"));
    const driver_outcome out = drive_outcome(g, run_policy::join, coroutine_only);
    CHECK_FALSE(out.ok);
    CHECK(out.error ==
          "task \"local/t\" (node \"local\"): t/net \"drops\" op #0 (CallbackOp): asynchronous operator dropped its "
          "completion");
  }
  CHECK(*runs == 2);
}

TEST_CASE("runs of one callback-form kernel may overlap", "[session][frame-free]") {
  // GLOBAL tasks sharing a net share its instance in the node workspace;
  // concurrent instances of a step without their own workspace too.
  net nap("nap");
  nap.op("Sleep", {}, {}, {{"ms", i64{2}}}).op("Iter", {}, {"naps"});
  task_group g(workspace_type::global);
  REQUIRE(g.add(task("a", step("a").add_net(nap))));
  REQUIRE(g.add(task("b", step("b").add_net(nap))));
  REQUIRE(g.add(task("c", step("c").add_net(nap).concurrent_instances(3))));
  for (bool coroutine_only : {false, true}) {
    INFO((coroutine_only ? "coroutine" : "frame-free"));
    const driver_outcome out = drive_outcome(g, run_policy::join, coroutine_only);
    CHECK(out.ok);
    CHECK(out.blobs == std::vector<std::string>{"naps=5"});
  }
}

TEST_CASE("waiting frame-free tasks are cancelled by a failure, a deadline and from outside",
          "[session][frame-free][cancel]") {
  auto c = std::make_shared<stuck_counters>();
  net hour("hour");
  hour.op("Sleep", {}, {}, {{"ms", i64{3'600'000}}});
  net late("late");
  late.op("Sleep", {}, {}, {{"ms", i64{5}}}).op("Fail", {}, {}, {{"message", std::string("woke up failing")}});
  task_group g;
  for (int i = 0; i < 50; ++i) REQUIRE(g.add(task("w" + std::to_string(i), step("w").add_net(hour))));
  REQUIRE(g.add(task("stuck", step("stuck").add_net(stuck("stuck", c)))));
  REQUIRE(g.add(task("far", step("far").add_net(hour)), node("n2")));

  SECTION("a frame-free task that fails after its wait cancels every other task") {
    REQUIRE(g.add(task("late", step("late").add_net(late))));
    local_session session(2);
    auto r = test::run_sync(session, g);
    REQUIRE_FALSE(r);
    CHECK(r.error().message == "task \"local/late\" (node \"local\"): late/net \"late\" op #1 (Fail): woke up failing");
    CHECK(c->cancelled == 1);
    run_options o;
    o.policy = run_policy::gather;
    o.timeout = 50ms;
    auto gathered = test::run_sync(session, g, o);  // gather: the others would wait an hour
    REQUIRE_FALSE(gathered);
    CHECK(gathered.error().code == errc::timeout);
  }
  SECTION("a run deadline") {
    local_session session(2);
    run_options o;
    o.timeout = 10ms;
    auto r = test::run_sync(session, g, o);
    REQUIRE_FALSE(r);
    // Up to 52 tasks still waiting: the first 8 are named (each with its
    // Sleep), then how many more (those that had not started are not).
    CHECK_THAT(r.error().message, Catch::StartsWith("run timed out after 10 ms (trace ") &&
                                      Catch::Contains("); still running then: task \"local/w0\" (node \"local\"): "
                                                      "w/net \"hour\" op #0 (Sleep): wait cancelled 3599") &&
                                      Catch::Contains(" ms before it was due; task \"local/w1\"") &&
                                      Catch::Contains("; and ") && Catch::EndsWith(" more"));
    CHECK(std::count(r.error().message.begin(), r.error().message.end(), ';') == 9);
  }
  SECTION("from outside, under gather, with the report of every task") {
    asio::io_context io;
    local_session session(io.get_executor());
    asio::cancellation_signal sig;
    std::optional<result<run_report>> got;
    run_options o;
    o.policy = run_policy::gather;
    session.async_run(g, o, asio::bind_cancellation_slot(sig.slot(), test::as_result([&](result<run_report> r) {
                                                           got.emplace(std::move(r));
                                                         })));
    asio::steady_timer t(io, 5ms);
    t.async_wait([&](boost::system::error_code) { sig.emit(asio::cancellation_type::terminal); });
    io.run();  // returns only once nothing waits any more
    REQUIRE(got);
    REQUIRE_FALSE(*got);
    CHECK(got->error().code == errc::cancelled);
    CHECK(c->cancelled == 1);
    // The session runs the group again afterwards.
    io.restart();
    std::optional<result<run_report>> again;
    run_options brief;
    brief.timeout = 5ms;
    session.async_run(g, brief, test::as_result([&](result<run_report> r) { again.emplace(std::move(r)); }));
    io.run();
    REQUIRE(again);
    REQUIRE_FALSE(*again);
    CHECK(again->error().code == errc::timeout);
  }
}

TEST_CASE("a run with frame-free tasks waiting reports each task", "[session][frame-free]") {
  task_group g;
  for (int i = 0; i < 300; ++i) REQUIRE(g.add(task("t" + std::to_string(i), step("s").add_net(sleepy("nap", "n", 1)))));
  local_session session(1);
  auto r = test::run_sync(session, g);
  REQUIRE(r);
  REQUIRE(r.value().tasks.size() == 300);
  for (const auto& t : r.value().tasks) {
    CHECK(t.status == task_status::succeeded);
    CHECK(t.iterations == 1);
    CHECK(t.finished - t.started >= 1ms);
  }
}

TEST_CASE("abandoning the event loop with frame-free tasks waiting tears the run down cleanly",
          "[session][frame-free][cancel]") {
  // Run k handlers, then destroy the io_context wherever the run is:
  // frame-free tasks waiting, coroutine tasks, a node yielding.
  auto c = std::make_shared<stuck_counters>();
  task_group g;
  for (int i = 0; i < 300; ++i) REQUIRE(g.add(task("t" + std::to_string(i), step("s").add_net(sleepy("nap", "n", 0)))));
  REQUIRE(g.add(task("stuck", step("stuck").add_net(stuck("stuck", c)))));
  REQUIRE(g.add(task("far", step("far").add_net(sleepy("nap", "n", 0)).iterations(3)), node("n2")));
  // The sanitizer builds check for leaks and use after free; here, that
  // the run never completed and let go of every workspace it held.
  for (std::size_t k = 0; k < 40; ++k) {
    bool completed = false;
    std::shared_ptr<workspace> n1, n2;
    {
      asio::io_context io;
      local_session session(io.get_executor());
      n1 = session.node_workspace("local");
      n2 = session.node_workspace("n2");
      session.async_run(g, {}, [&](boost::system::error_code, run_report) { completed = true; });
      // At most k*3 handlers: fewer once only the stuck task's hour-long
      // timer is left (the run cannot go further).
      for (std::size_t i = 0; i < k * 3; ++i) {
        if (io.poll_one() == 0 && io.run_one_for(5ms) == 0) break;
      }
    }
    CHECK_FALSE(completed);
    CHECK(n1.use_count() == 1);
    CHECK(n2.use_count() == 1);
  }
  CHECK(c->finished == 0);
}

TEST_CASE("a session destroyed with runs queued completes them with session_closed", "[session][lifetime]") {
  asio::io_context io;
  task_group g;
  REQUIRE(g.add(task("t", step("s").add_net(sleepy("nap", "n", 0)))));
  auto session = std::make_unique<local_session>(io.get_executor());
  std::optional<result<run_report>> by_callback;
  session->async_run(g, {}, test::as_result([&](result<run_report> r) { by_callback.emplace(std::move(r)); }));
  std::future<run_report> by_future = session->async_run(g, {}, asio::use_future);
  session.reset();  // neither run has started: the io_context has not run
  io.run();
  REQUIRE(by_callback);
  REQUIRE_FALSE(*by_callback);
  CHECK(by_callback->error().code == errc::session_closed);
  CHECK(by_callback->error().message == "Session is closed.");
  try {
    (void)by_future.get();
    FAIL("use_future should throw");
  } catch (const boost::system::system_error& e) {
    CHECK(e.code() == errc::session_closed);
  }
}

TEST_CASE("a run in flight when its session is destroyed goes on to its end", "[session][lifetime]") {
  asio::io_context io;
  task_group g(workspace_type::global);  // the Iter counter is in the node workspace
  REQUIRE(g.add(task("t", step("s").add_net(sleepy("nap", "n", 1)).iterations(3)), node("n1")));
  auto session = std::make_unique<local_session>(io.get_executor());
  auto ws = session->node_workspace("n1");
  std::optional<result<run_report>> got;
  session->async_run(g, {}, test::as_result([&](result<run_report> r) { got.emplace(std::move(r)); }));
  // Single-threaded: the node workspace may be read between handlers.
  while (!ws->has("n")) REQUIRE(io.run_one() == 1);
  session.reset();
  io.run();
  REQUIRE(got);
  REQUIRE(*got);
  REQUIRE(got->value().tasks.size() == 1);
  CHECK(got->value().tasks[0].iterations == 3);
}

TEST_CASE("the io_context is destroyed after its session, with runs queued or in flight", "[session][lifetime]") {
  // The documented order (session first): whatever the run's state, the
  // io_context's destruction drops it without touching the session.
  task_group g;
  REQUIRE(g.add(task("t", step("s").add_net(sleepy("nap", "n", 1)).iterations(3)), node("n1")));
  for (int handlers : {0, 1, 4}) {
    bool completed = false;
    {
      asio::io_context io;
      {
        local_session session(io.get_executor());
        session.async_run(g, {}, [&](boost::system::error_code, run_report) { completed = true; });
        for (int i = 0; i < handlers; ++i) REQUIRE(io.run_one() == 1);
      }
    }
    CHECK_FALSE(completed);
  }
}

namespace {

// A group whose runs wait on two nodes: a frame-free task on its Sleeps,
// a coroutine task on an hour-long timer.
task_group stuck_counting_group(const std::shared_ptr<stuck_counters>& c) {
  task_group g;
  REQUIRE(g.add(task("nap", step("s").add_net(sleepy("nap", "n", 1)).iterations(3)), node("n1")));
  REQUIRE(g.add(task("stuck", step("stuck").add_net(stuck("stuck", c))), node("n2")));
  return g;
}

}  // namespace

TEST_CASE("the io_context may be destroyed before its session, with runs queued or in flight", "[session][lifetime]") {
  // The session's strands belong to the io_context's strand service: the
  // session lets them go when the context is destroyed, and is closed.
  // Under ASan, a strand released after its service is a use after free.
  const int handlers = GENERATE(0, 1, 4, 1000);  // 1000: while any is ready
  INFO(handlers << " handlers run before the io_context is destroyed");
  auto c = std::make_shared<stuck_counters>();
  const task_group g = stuck_counting_group(c);
  // A GLOBAL group's first run holds its node for ever: the second waits
  // for its turn there.
  task_group global(workspace_type::global);
  REQUIRE(global.add(task("t", step("s").add_net(stuck("held", c))), node("n1")));
  bool completed = false;
  std::unique_ptr<local_session> session;
  {
    auto io = std::make_unique<asio::io_context>();
    session = std::make_unique<local_session>(io->get_executor());
    (void)session->node_strand("n1");  // a node made before any run
    auto done = [&](boost::system::error_code, run_report) { completed = true; };
    session->async_run(g, {}, done);
    session->async_run(global, {}, done);
    session->async_run(global, {}, done);  // waits for its turn on n1
    for (int i = 0; i < handlers && io->poll_one() == 1; ++i) {
    }
    CHECK_FALSE(session->closed());
    io.reset();  // queued and in-flight runs are dropped without completing
  }
  CHECK_FALSE(completed);
  CHECK(c->finished == 0);
  CHECK(session->closed());
  // Its node workspaces stay (no run is in flight any more).
  CHECK(session->node_workspace("n1"));

  // A later run completes with session_closed: on its handler's executor,
  SECTION("a later run through a callback bound to another io_context") {
    asio::io_context other;
    std::optional<result<run_report>> got;
    session->async_run(g, {},
                       asio::bind_executor(other, test::as_result([&](result<run_report> r) { got = std::move(r); })));
    other.run();
    REQUIRE(got);
    REQUIRE_FALSE(*got);
    CHECK(got->error().code == errc::session_closed);
    CHECK(got->error().message == "Session is closed.");
  }
  // or on the system executor when it has none.
  SECTION("a later run through use_future, and a blocking run") {
    std::future<run_report> f = session->async_run(g, {}, asio::use_future);
    try {
      (void)f.get();
      FAIL("use_future should throw");
    } catch (const boost::system::system_error& e) {
      CHECK(e.code() == errc::session_closed);
    }
    auto r = test::run_sync(*session, g);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::session_closed);
  }
  // A node's strand runs on the system executor now, old and new nodes alike.
  SECTION("node strands after the context is gone") {
    for (const char* name : {"n1", "n2", "new"}) {
      INFO("node " << name);
      std::promise<bool> on_strand;
      auto strand = session->node_strand(name);
      asio::post(strand, [&] { on_strand.set_value(strand.running_in_this_thread()); });
      CHECK(on_strand.get_future().get());
    }
  }
  session.reset();  // after its context: nothing of the context is touched
  CHECK_FALSE(completed);
}

TEST_CASE("a session owning its pool may be destroyed from a run's completion handler", "[session][lifetime]") {
  // Joining the pool there would wait for the calling thread itself.
  task_group g;
  REQUIRE(g.add(task("t", step("s").add_net(sleepy("nap", "n", 1))), node("n1")));
  auto* session = new local_session(2);  // NOLINT(cppcoreguidelines-owning-memory): deleted by its own handler
  std::promise<boost::system::error_code> deleted;
  session->async_run(g, {}, [&](boost::system::error_code ec, run_report) {
    delete session;  // NOLINT(cppcoreguidelines-owning-memory)
    deleted.set_value(ec);
  });
  auto done = deleted.get_future();
  REQUIRE(done.wait_for(30s) == std::future_status::ready);
  CHECK_FALSE(done.get());
}

TEST_CASE("a thread pool may be destroyed before a session on its executor, with a run in flight",
          "[session][lifetime]") {
  auto c = std::make_shared<stuck_counters>();
  const task_group g = stuck_counting_group(c);
  std::unique_ptr<local_session> session;
  std::atomic<bool> completed{false};
  {
    asio::thread_pool pool(2);
    session = std::make_unique<local_session>(pool.get_executor());
    session->async_run(g, {}, [&](boost::system::error_code, run_report) { completed = true; });
    while (c->started == 0) std::this_thread::yield();  // the stuck task waits on its timer
  }                                                     // stops and joins the pool, then destroys its handlers
  CHECK_FALSE(completed);
  CHECK(session->closed());
  CHECK(test::run_sync(*session, g).error().code == errc::session_closed);
  session.reset();
}

TEST_CASE("a task that fails at once ends its node's report steps and the run, under either policy",
          "[session][cancel]") {
  // The task failed inline while the join of the tasks and the report
  // steps was still spawning them: the report step, spawned after the
  // cancellation, waited out its hour-long interval.
  using namespace std::chrono_literals;
  const auto policy = GENERATE(run_policy::join, run_policy::gather);
  const bool task_level = GENERATE(false, true);  // the task's own report step, or the group's
  INFO((policy == run_policy::join ? "join" : "gather") << (task_level ? ", task report" : ", group report"));
  task_group g;
  task t("t", step("s").add_net(failing("bad", "boom")));
  if (task_level) t.report(step("r").add_net(incr("tick", "ticks")), 1h);
  REQUIRE(g.add(t, node("n0")));
  if (!task_level) g.report_step(step("r").add_net(incr("tick", "ticks")), node("n0"), 1h);
  local_session session(1);
  auto r = test::run_sync(session, g, {.policy = policy, .timeout = 60s});  // the guard: a timeout is the bug
  if (policy == run_policy::join) {
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::op_failed);
    CHECK_THAT(r.error().message, Catch::Contains("boom"));
  } else {
    REQUIRE(r);
    REQUIRE(r.value().tasks.size() == 1);
    CHECK(r.value().tasks[0].status == task_status::failed);
  }
}
