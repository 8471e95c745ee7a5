// Remote nets (task_group::add_remote_net): nets a group carries for other
// nodes' workspaces, made there before its tasks start, run by name with
// RunNet by this group, its later runs and other groups; their errors; plans
// carry them.
#include <taskgroup/builtin_ops.hpp>
#include <taskgroup/plan.hpp>
#include <taskgroup/session.hpp>
#include <taskgroup/task_group.hpp>

#include "support/run.hpp"

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

using namespace taskgroup;
using namespace std::chrono_literals;
using i64 = std::int64_t;

namespace {

// A net that counts its runs in blob "hits" (Iter needs no input blob, so
// it binds in an empty workspace).
net counter_net(const std::string& name = "bump") {
  net n(name);
  n.op("Iter", {}, {"hits"});
  return n;
}

// A task on `on` that runs net `name` by name `times` times, then copies
// "hits" into output "total".
task caller(const std::string& task_name, const std::string& name, int times, node on,
            std::vector<task_output<i64>>* outs = nullptr) {
  net n(task_name + "/call");
  for (int i = 0; i < times; ++i) n.op("RunNet", {}, {}, {{"net", name}});
  n.op("Copy", {"hits"}, {"total"});
  task t(task_name, step(task_name).add_net(n));
  t.node(std::move(on));
  if (outs != nullptr) outs->push_back(t.output<i64>("total"));
  return t;
}

}  // namespace

TEST_CASE("add_remote_net records nets per node and refuses what cannot be", "[remote_net]") {
  task_group g;
  REQUIRE(g.add_remote_net(counter_net(), node("ps")));
  REQUIRE(g.add_remote_net(counter_net(), node("ps2")));  // one name on two nodes
  REQUIRE(g.add_remote_net(counter_net("other"), node("ps")));
  REQUIRE(g.remote_nets().size() == 3);
  CHECK(g.remote_nets()[0].node == "ps");
  CHECK(g.remote_nets()[1].node == "ps2");
  CHECK(g.remote_nets()[2].net.name() == "other");
  REQUIRE(g.add(task("t", step("s").add_net(counter_net("local_work")))));
  CHECK(g.used_nodes() == std::vector<std::string>{"local", "ps", "ps2"});

  auto twice = g.add_remote_net(counter_net(), node("ps"));
  REQUIRE_FALSE(twice);
  CHECK(twice.error().code == errc::invalid_task);
  CHECK(twice.error().message == "remote net \"bump\" for node \"ps\" added twice (a node holds one net of a name)");
  auto unnamed = g.add_remote_net(net(""), node("ps"));
  REQUIRE_FALSE(unnamed);
  CHECK(unnamed.error().message == "a remote net for node \"ps\" has no name");

  (void)g.tasks_by_node();  // uses the group
  auto late = g.add_remote_net(counter_net("late"), node("ps"));
  REQUIRE_FALSE(late);
  CHECK(late.error().message == "Cannot add remote net \"late\" for node \"ps\" to an already used TaskGroup.");
}

TEST_CASE("a remote net is made on its node, for this group, its later runs and other groups", "[remote_net]") {
  const auto type = GENERATE(workspace_type::private_, workspace_type::global);
  CAPTURE(type == workspace_type::global ? "global" : "private");
  local_session session(2);

  // Group A carries "bump" for node ps, where it has no task, and a task
  // elsewhere.
  task_group a(type);
  REQUIRE(a.add_remote_net(counter_net(), node("ps")));
  REQUIRE(a.add(task("w", step("w").add_net(counter_net("elsewhere"))), node("w")));
  REQUIRE(test::run_sync(session, a));
  auto ps = session.node_workspace("ps");
  net_instance* made = ps->find_net("bump");
  REQUIRE(made != nullptr);
  CHECK(ps->nets() == std::vector<std::string>{"bump"});
  CHECK(ps->read<i64>("hits").value() == 0);  // bound (Iter starts its count at 0), not run

  // Group B runs it by name from a task on ps, three times a run.
  std::vector<task_output<i64>> outs;
  task_group b(type);
  REQUIRE(b.add(caller("c", "bump", 3, node("ps"), &outs)));
  auto r1 = test::run_sync(session, b);
  REQUIRE(r1);
  CHECK(outs[0].get(r1.value()).value() == 3);
  auto r2 = test::run_sync(session, b);
  REQUIRE(r2);
  CHECK(outs[0].get(r2.value()).value() == 6);  // the node's net keeps its blob

  // A's later runs find their own net there: no clash, no new instance.
  REQUIRE(test::run_sync(session, a));
  REQUIRE(test::run_sync(session, a));
  CHECK(ps->find_net("bump") == made);
}

TEST_CASE("a group's tasks run its remote nets in the run that makes them", "[remote_net]") {
  const auto type = GENERATE(workspace_type::private_, workspace_type::global);
  CAPTURE(type == workspace_type::global ? "global" : "private");
  local_session session(2);
  std::vector<task_output<i64>> outs;
  task_group g(type);
  REQUIRE(g.add_remote_net(counter_net(), node("n1")));
  REQUIRE(g.add_remote_net(counter_net(), node("n2")));
  REQUIRE(g.add(caller("a", "bump", 2, node("n1"), &outs)));
  REQUIRE(g.add(caller("b", "bump", 5, node("n2"), &outs)));
  auto r = test::run_sync(session, g);
  REQUIRE(r);
  // Each node has its own instance, bound in its own workspace.
  CHECK(outs[0].get(r.value()).value() == 2);
  CHECK(outs[1].get(r.value()).value() == 5);
  CHECK(session.node_workspace("n1")->read<i64>("hits").value() == 2);
  CHECK(session.node_workspace("n2")->read<i64>("hits").value() == 5);
}

TEST_CASE("a remote net that cannot be made fails the run before any task starts", "[remote_net]") {
  local_session session(1);
  task_group first;
  REQUIRE(first.add_remote_net(counter_net(), node("ps")));
  REQUIRE(first.add(caller("c", "bump", 1, node("ps"))));
  REQUIRE(test::run_sync(session, first));

  SECTION("another net of that name on the node") {
    task_group g;
    net other("bump");
    other.op("ConstantFill", {}, {"hits"}, {{"value", i64{0}}});
    REQUIRE(g.add_remote_net(other, node("ps")));
    REQUIRE(g.add(caller("c", "bump", 1, node("ps"))));
    auto r = test::run_sync(session, g);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::net_exists);
    CHECK(r.error().message == "remote net \"bump\" for node \"ps\": the node already has another net of that name");
    // The node keeps its net, untouched, and no task ran.
    CHECK(session.node_workspace("ps")->read<i64>("hits").value() == 1);
    task_group again;
    REQUIRE(again.add(caller("c", "bump", 1, node("ps"))));
    REQUIRE(test::run_sync(session, again));
    CHECK(session.node_workspace("ps")->read<i64>("hits").value() == 2);
  }
  SECTION("a net the program made there itself") {
    REQUIRE(session.node_workspace("mine")->create_net(counter_net("own")));
    task_group g;
    REQUIRE(g.add_remote_net(counter_net("own"), node("mine")));
    auto r = test::run_sync(session, g);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::net_exists);
  }
  SECTION("an unknown operator") {
    task_group g;
    net bad("broken");
    bad.op("NoSuchOp", {}, {});
    REQUIRE(g.add_remote_net(bad, node("ps")));
    REQUIRE(g.add(caller("c", "bump", 1, node("ps"))));
    auto r = test::run_sync(session, g);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::unknown_operator);
    CHECK(r.error().message.rfind("remote net \"broken\" for node \"ps\": ", 0) == 0);
    CHECK(session.node_workspace("ps")->read<i64>("hits").value() == 1);  // the task never ran
  }
  SECTION("an input that does not exist on the node") {
    task_group g;
    net reads("reads");
    reads.op("Copy", {"absent"}, {"copy"});
    REQUIRE(g.add_remote_net(reads, node("ps")));
    auto r = test::run_sync(session, g);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("remote net \"reads\" for node \"ps\"") != std::string::npos);
    CHECK(r.error().message.find("\"absent\"") != std::string::npos);
    CHECK(session.node_workspace("ps")->find_net("reads") == nullptr);
  }
}

TEST_CASE("only_nodes makes only the listed nodes' remote nets", "[remote_net]") {
  local_session session(1);
  task_group g;
  REQUIRE(g.add_remote_net(counter_net(), node("a")));
  REQUIRE(g.add_remote_net(counter_net(), node("b")));
  REQUIRE(g.add(task("t", step("s").add_net(counter_net("work"))), node("c")));
  // A node with remote nets only may be listed.
  REQUIRE(test::run_sync(session, g, {.only_nodes = std::vector<std::string>{"a"}}));
  CHECK(session.node_workspace("a")->find_net("bump") != nullptr);
  CHECK(session.node_workspace("b")->find_net("bump") == nullptr);
  auto bad = test::run_sync(session, g, {.only_nodes = std::vector<std::string>{"z"}});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "run_options::only_nodes names node \"z\", which has no task");
}

TEST_CASE("tasks_by_node keeps the remote nets on their mapped nodes; to_task refuses them", "[remote_net]") {
  task_group g;
  REQUIRE(g.add_remote_net(counter_net(), node("ps")));
  REQUIRE(g.add(caller("c", "bump", 2, node("w"))));
  auto grouped = g.tasks_by_node([](std::string_view n) { return n == "ps" ? std::string("w") : std::string(n); });
  REQUIRE(grouped);
  REQUIRE(grouped.value().remote_nets().size() == 1);
  CHECK(grouped.value().remote_nets()[0].node == "w");
  CHECK(grouped.value().remote_nets()[0].net.same(g.remote_nets()[0].net));
  local_session session(1);
  REQUIRE(test::run_sync(session, grouped.value()));
  CHECK(session.node_workspace("w")->read<i64>("hits").value() == 2);

  task_group h;
  REQUIRE(h.add_remote_net(counter_net(), node("ps")));
  auto t = h.to_task(node("x"));
  REQUIRE_FALSE(t);
  CHECK(t.error().message ==
        "to_task: the group carries 1 remote net(s), which a task cannot carry (tasks_by_node "
        "keeps them)");
}

TEST_CASE("plans carry remote nets", "[remote_net][plan]") {
  task_group g(workspace_type::global);
  REQUIRE(g.add_remote_net(counter_net(), node("ps")));
  net fill("fill");
  fill.op("ConstantFill", {}, {"seven"}, {{"value", i64{7}}});
  REQUIRE(g.add_remote_net(fill, node("spare")));
  REQUIRE(g.add(caller("c", "bump", 2, node("ps"))));
  auto text = write_plan(g);
  REQUIRE(text);
  CHECK(text.value().find("\"remote_nets\"") != std::string::npos);
  auto back = read_plan(text.value());
  REQUIRE(back);
  REQUIRE(back.value().remote_nets().size() == 2);
  CHECK(back.value().remote_nets()[0].node == "ps");
  CHECK(back.value().remote_nets()[0].net.name() == "bump");
  CHECK(back.value().remote_nets()[1].node == "spare");
  CHECK(back.value().remote_nets()[1].net.ops().size() == 1);
  CHECK(write_plan(back.value()).value() == text.value());

  // Two different nets named alike cannot share a plan's "nets".
  task_group clash;
  REQUIRE(clash.add_remote_net(counter_net("x"), node("a")));
  net other("x");
  other.op("ConstantFill", {}, {"y"}, {{"value", i64{1}}});
  REQUIRE(clash.add_remote_net(other, node("b")));
  auto refused = write_plan(clash);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == errc::duplicate_net);
  CHECK(refused.error().message.rfind("remote net \"x\" for node \"b\": ", 0) == 0);
}

TEST_CASE("RunNet runs a net of the workspace or its nearest parent, waiting when it waits",
          "[remote_net][builtin_ops]") {
  boost::asio::io_context io;
  auto root = workspace::make("root");
  REQUIRE(root->create_net(counter_net()));
  net slow("slow");
  slow.op("Sleep", {}, {}, {{"ms", i64{2}}}).op("Iter", {}, {"slow_hits"});
  REQUIRE(root->create_net(slow));
  auto child = root->create_child("child");
  net outer("outer");
  outer.op("RunNet", {}, {}, {{"net", "bump"}}).op("RunNet", {}, {}, {{"net", "slow"}});
  auto inst = child->create_net(outer);
  REQUIRE(inst);
  REQUIRE(test::run(io, inst.value()->run()));
  REQUIRE(test::run(io, inst.value()->run()));
  // The nets ran where they are bound: in the parent.
  CHECK(root->read<i64>("hits").value() == 2);
  CHECK(root->read<i64>("slow_hits").value() == 2);
  CHECK(child->local_blobs().empty());

  // A net of the child's own of that name shadows the parent's.
  net mark("bump");
  mark.op("ConstantFill", {}, {"child_mark"}, {{"value", i64{5}}});
  REQUIRE(child->create_net(mark));
  REQUIRE(test::run(io, inst.value()->run()));
  CHECK(root->read<i64>("hits").value() == 2);
  CHECK(child->read<i64>("child_mark").value() == 5);
}

TEST_CASE("RunNet errors: no such net at bind or at run, a net that runs itself, a failing net",
          "[remote_net][builtin_ops]") {
  boost::asio::io_context io;
  auto ws = workspace::make("w");
  net calls_missing("calls_missing");
  calls_missing.op("RunNet", {}, {}, {{"net", "missing"}});
  auto bind = ws->create_net(calls_missing);
  REQUIRE_FALSE(bind);
  CHECK(bind.error().code == errc::bad_argument);
  CHECK(bind.error().message ==
        "net \"calls_missing\" op #0 (RunNet): no net \"missing\" in workspace \"w\" or its parents");

  net no_arg("no_arg");
  no_arg.op("RunNet", {}, {});
  auto missing_arg = ws->create_net(no_arg);
  REQUIRE_FALSE(missing_arg);
  CHECK(missing_arg.error().code == errc::bad_argument);

  SECTION("removed after binding") {
    REQUIRE(ws->create_net(counter_net()));
    net calls("calls");
    calls.op("RunNet", {}, {}, {{"net", "bump"}});
    auto inst = ws->create_net(calls);
    REQUIRE(inst);
    REQUIRE(ws->remove_net("bump"));
    auto st = test::run(io, inst.value()->run());
    REQUIRE_FALSE(st);
    CHECK(st.error().message == "net \"calls\" op #0 (RunNet): no net \"bump\" in workspace \"w\" or its parents");
  }
  SECTION("a net that runs itself, through another") {
    // a -> RunNet(b), b -> RunNet(a): made by overwriting a after b.
    REQUIRE(ws->create_net(counter_net("a")));
    net b("b");
    b.op("RunNet", {}, {}, {{"net", "a"}});
    REQUIRE(ws->create_net(b));
    net a("a");
    a.op("Iter", {}, {"depth"}).op("RunNet", {}, {}, {{"net", "b"}});
    REQUIRE(ws->create_net(a, /*overwrite=*/true));
    auto st = test::run(io, ws->find_net("b")->run());
    REQUIRE_FALSE(st);
    CHECK(st.error().code == errc::op_failed);
    CHECK(st.error().message.find("256 runs of this op in flight (taskgroup::max_run_net_in_flight): does net") !=
          std::string::npos);
    CHECK(ws->read<i64>("depth").value() == static_cast<i64>(max_run_net_in_flight));
    // Nothing stays in flight: a later run fails the same way.
    CHECK_FALSE(test::run(io, ws->find_net("b")->run()));
    CHECK(ws->read<i64>("depth").value() == 2 * static_cast<i64>(max_run_net_in_flight));
  }
  SECTION("the net's failure is the op's, under both prefixes") {
    net fails("fails");
    fails.op("Fail", {}, {}, {{"message", "no good"}});
    REQUIRE(ws->create_net(fails));
    net calls("calls");
    calls.op("RunNet", {}, {}, {{"net", "fails"}});
    auto inst = ws->create_net(calls);
    REQUIRE(inst);
    auto st = test::run(io, inst.value()->run());
    REQUIRE_FALSE(st);
    CHECK(st.error().code == errc::op_failed);
    CHECK(st.error().message == "net \"calls\" op #0 (RunNet): net \"fails\" op #0 (Fail): no good");
  }
}

TEST_CASE("RunNet holds the net it runs: removing it meanwhile is safe, cancelling reaches it",
          "[remote_net][builtin_ops]") {
  local_session session(1);
  auto ps = session.node_workspace("ps");
  net slow("slow");
  slow.op("Sleep", {}, {}, {{"ms", i64{60000}}});
  task_group g;
  REQUIRE(g.add_remote_net(slow, node("ps")));
  net calls("calls");
  calls.op("RunNet", {}, {}, {{"net", "slow"}});
  REQUIRE(g.add(task("t", step("s").add_net(calls)), node("ps")));
  // Removing the net while it runs leaves the run its own reference: a
  // second task removes it from the node's workspace (the root of its
  // own) once the first is waiting inside it.
  net remover("remover");
  remover.op("Sleep", {}, {}, {{"ms", i64{30}}}).lambda("remove", {}, {}, [](op_context& ctx) -> status {
    workspace* w = &ctx.ws();
    while (w->parent() != nullptr) w = w->parent();
    if (!w->remove_net("slow")) return fail(errc::op_failed, "net \"slow\" was not there");
    return ok();
  });
  REQUIRE(g.add(task("r", step("r").add_net(remover)), node("ps")));
  auto r = test::run_sync(session, g, {.timeout = 300ms});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::timeout);
  CAPTURE(r.error().message);
  CHECK(r.error().message.find("op #0 (RunNet): net \"slow\" op #0 (Sleep)") != std::string::npos);
  CHECK(ps->find_net("slow") == nullptr);
}

TEST_CASE("workspace::shared_net keeps an instance alive past remove_net and overwrite", "[remote_net][workspace]") {
  boost::asio::io_context io;
  auto ws = workspace::make("w");
  REQUIRE(ws->create_net(counter_net()));
  auto held = ws->shared_net("bump");
  REQUIRE(held != nullptr);
  CHECK(held.get() == ws->find_net("bump"));
  CHECK(ws->shared_net("none") == nullptr);
  REQUIRE(ws->remove_net("bump"));
  REQUIRE(test::run(io, held->run()));
  CHECK(ws->read<i64>("hits").value() == 1);
  REQUIRE(ws->create_net(counter_net()));
  auto second = ws->shared_net("bump");
  net replacement("bump");
  replacement.op("ConstantFill", {}, {"hits"}, {{"value", i64{40}}});
  REQUIRE(ws->create_net(replacement, /*overwrite=*/true));
  REQUIRE(test::run(io, second->run()));  // the replaced instance still runs
  CHECK(ws->read<i64>("hits").value() == 2);
  // A replacement that fails to bind leaves the old net in place.
  net broken("bump");
  broken.op("Copy", {"absent"}, {"x"});
  REQUIRE_FALSE(ws->create_net(broken, /*overwrite=*/true));
  REQUIRE(ws->find_net("bump") != nullptr);
  REQUIRE(test::run(io, ws->find_net("bump")->run()));
  CHECK(ws->read<i64>("hits").value() == 40);
}

namespace {

// An observer whose run_begin throws: the run must be refused, on every
// path that starts the nodes.
struct throwing_observer final : run_observer {
  void run_begin(const event_source& /*at*/,
                 const std::vector<std::pair<std::string, std::string>>& /*tasks*/) override {
    throw std::runtime_error("observer broke");
  }
};

}  // namespace

TEST_CASE("an observer that throws at run_begin refuses the run, with or without remote nets to make first",
          "[remote_net][observer]") {
  const bool remote = GENERATE(false, true);
  CAPTURE(remote);
  local_session session(2);
  std::vector<task_output<i64>> outs;
  task_group g;
  if (remote) {
    REQUIRE(g.add_remote_net(counter_net(), node("n1")));
    REQUIRE(g.add(caller("a", "bump", 2, node("n1"), &outs)));
  } else {
    net fill("fill");
    fill.op("ConstantFill", {}, {"total"}, {{"value", i64{2}}});
    task t("a", step("a").add_net(fill));
    t.node(node("n1"));
    outs.push_back(t.output<i64>("total"));
    REQUIRE(g.add(t));
  }
  throwing_observer observer;
  auto r = test::run_sync(session, g, {.observer = &observer});
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("observer broke"));
  // The session runs the group once the observer is gone; with the remote
  // net, its count of 2 says that no task ran in the refused run.
  auto again = test::run_sync(session, g);
  REQUIRE(again);
  CHECK(outs[0].get(again.value()).value() == 2);
}
