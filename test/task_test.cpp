#include <taskgroup/task.hpp>

#include <taskgroup/session.hpp>
#include <taskgroup/task_group.hpp>

#include "support/steps.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

using namespace taskgroup;
using namespace taskgroup::test;

namespace {

net add(const std::string& name, const std::string& a, const std::string& b, const std::string& out) {
  net n(name);
  n.op("Add", {a, b}, {out});
  return n;
}

// Counts step nets in a tree (Caffe2's plan net count: "scenario 11" below).
std::size_t count_nets(const execution_step& s) {
  std::size_t n = s.nets().size();
  for (const auto& c : s.substeps()) n += count_nets(c);
  return n;
}

}  // namespace

TEST_CASE("scenario 31: defaults are local/task on node local with no outputs", "[task]") {
  task t;
  CHECK(t.name() == "local/task");
  CHECK(t.node_name() == "local");
  CHECK(t.output_names().empty());
  CHECK_FALSE(t.workspace_type());
  CHECK(t.num_instances() == 1);
  task_group g;
  CHECK_FALSE(g.workspace_type());
  CHECK(node().name() == "local");
  CHECK(cluster().empty());
}

TEST_CASE("a task is named after its step when it has no name", "[task]") {
  task t;
  t.step(step("train").add_net(fill_int("n", "x", 1))).node("n1");
  CHECK(t.name() == "n1/train");
  CHECK(task("reader").node("n2").name() == "n2/reader");
}

TEST_CASE("names are made unique within a group", "[task][task_group]") {
  task_group g;
  auto a = g.add(task()).value();
  auto b = g.add(task()).value();
  auto c = g.add(task()).value();
  auto other = g.add(task(), node("n1")).value();
  CHECK(a.name() == "local/task");
  CHECK(b.name() == "local/task:1");
  CHECK(c.name() == "local/task:2");
  CHECK(other.name() == "n1/task");
}

TEST_CASE("a task accepts one step only", "[task]") {
  task t("t");
  t.step(fill_int("a", "x", 1));
  t.step(fill_int("b", "y", 1));
  auto st = t.validate();
  REQUIRE_FALSE(st);
  CHECK(st.error().code == errc::invalid_task);
  CHECK_THAT(st.error().message, Catch::Contains("This Task already has an execution step."));
}

TEST_CASE("changing a used task throws at the call, naming it, and changes nothing", "[task]") {
  task_group g;
  task t("t", step("s").add_net(fill_int("a", "x", 1)));
  REQUIRE(g.add(t));
  const std::pair<const char*, void (*)(task&)> changes[] = {
      {"num_instances", [](task& x) { x.num_instances(3); }},
      {"node", [](task& x) { x.node(node("elsewhere")); }},
      {"workspace_type", [](task& x) { x.workspace_type(workspace_type::global); }},
      {"step", [](task& x) { x.step(step("other").add_net(fill_int("b", "y", 1))); }},
      {"report", [](task& x) { x.report(step("r").add_net(fill_int("r", "z", 1))); }},
      {"setup", [](task& x) { x.init(body(fill_int("i", "w", 1))); }},
      {"output", [](task& x) { (void)x.output<i64>("x"); }},
  };
  for (const auto& [what, change] : changes) {
    INFO(what);
    try {
      change(t);
      FAIL("no exception");
    } catch (const taskgroup::system_error& e) {
      CHECK(e.error().code == errc::invalid_task);
      CHECK(std::string(e.what()) ==
            std::string("task \"local/t\": Cannot modify task since it is already been used (") + what + ")");
    }
    CHECK(t.validate());
  }
  CHECK(t.num_instances() == 1);
  CHECK(t.node_name() == "local");
  CHECK(t.reports().empty());
  CHECK(t.output_names().empty());
}

TEST_CASE("a group whose task was changed after it ran goes on running", "[task][session]") {
  task_group g;
  task t("t", step("s").add_net(fill_int("a", "x", 1)));
  REQUIRE(g.add(t));
  local_session session(1);
  REQUIRE(test::run_sync(session, g));  // compiled and kept by the session
  CHECK_THROWS_AS(t.num_instances(2), taskgroup::system_error);
  for (int i = 0; i < 2; ++i) {
    auto r = test::run_sync(session, g);
    REQUIRE(r);
    CHECK(r.value().ok());
  }
  local_session fresh(1);
  REQUIRE(test::run_sync(fresh, g));
}

TEST_CASE("a task cannot join two groups", "[task][task_group]") {
  task_group g1, g2;
  task t("t");
  REQUIRE(g1.add(t));
  auto r = g2.add(t);
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "task \"local/t\" already belongs to a task group");
}

TEST_CASE("scenario 11: the composed step has init, instances and exit around the body", "[task]") {
  task t("my_task");
  t.node("trainer").num_instances(2);
  t.init(fill_int("task_init", "a", 1)).exit(fill_int("task_exit", "b", 1));
  t.instance_init(fill_int("inst_init", "c", 1)).instance_exit(fill_int("inst_exit", "d", 1));
  net copy("copy");
  copy.op("Copy", {"a"}, {"e"});
  t.step(loop("loop", 100, copy));
  task_group g;
  REQUIRE(g.add(t));
  auto s = t.get_step().value();
  CHECK(s.name() == "trainer/my_task");
  // Outside in: init, parallel (2 instances of an instance step in its own
  // workspace), exit.
  REQUIRE(s.substeps().size() == 3);
  CHECK(s.substeps()[0].name() == "trainer/my_task:init");
  CHECK(s.substeps()[1].name() == "trainer/my_task:parallel");
  CHECK(s.substeps()[1].concurrent_instances() == 2);
  // I, once: the instance step holding its setup around B (the user's
  // step), in its own workspace.
  REQUIRE(s.substeps()[1].substeps().size() == 1);
  const execution_step& instance = s.substeps()[1].substeps()[0];
  CHECK(instance.name() == "trainer/my_task:instance");
  CHECK(instance.create_workspace());
  REQUIRE(instance.substeps().size() == 3);
  CHECK(instance.substeps()[0].name() == "trainer/my_task:instance:init");
  CHECK(instance.substeps()[1].name() == "loop");
  CHECK_FALSE(instance.substeps()[1].create_workspace());  // the user's step is left as it was
  CHECK(instance.substeps()[2].name() == "trainer/my_task:instance:exit");
  CHECK(s.substeps()[2].name() == "trainer/my_task:exit");
  // 4 body nets (loop init, cond, copy, inc) + 4 setup nets; no dummy output.
  CHECK(count_nets(s) == 8);
  CHECK(t.get_step().value().same(s));  // cached
}

TEST_CASE("task outputs are typed and set by a run", "[task][session]") {
  task_group g(workspace_type::global);
  task t("t");
  t.step(step("s").nets({fill_int("a", "total", 41), incr("inc", "total")}));
  auto total = t.output<i64>("total");
  auto both = t.output<i64>(std::vector<std::string>{"total", "total"});
  auto wrong = t.output<std::string>("total");
  REQUIRE(g.add(t));
  auto before = total.get();
  REQUIRE_FALSE(before);
  CHECK(before.error().code == errc::output_not_set);
  CHECK_THAT(before.error().message, Catch::Contains("Output value not set yet."));
  local_session session(1);
  auto report = test::run_sync(session, g);
  REQUIRE(report);
  CHECK(total.get().value() == 42);
  CHECK(both.get().value() == std::vector<i64>{42, 42});
  CHECK(wrong.get().error().code == errc::type_mismatch);
  CHECK(report.value().tasks.at(0).outputs.size() == 4);
}

TEST_CASE("a task lists its declared outputs in order, with their types", "[task]") {
  task t("t");
  (void)t.output<i64>("a");
  (void)t.output<double>(std::vector<std::string>{"b", "c"});
  t.declare_output({"d"});
  t.declare_output({"e", "f"}, true);
  const std::vector<output_decl> outs = t.declared_outputs();
  REQUIRE(outs.size() == 4);
  CHECK(outs[0].blobs == std::vector<std::string>{"a"});
  CHECK_FALSE(outs[0].list);
  CHECK(outs[0].type == &typeid(i64));
  CHECK(outs[1].blobs == std::vector<std::string>{"b", "c"});
  CHECK(outs[1].list);
  CHECK(outs[1].type == &typeid(double));
  CHECK(outs[2].type == nullptr);
  CHECK_FALSE(outs[2].list);
  CHECK(outs[3].list);
  CHECK(outs[3].blobs == std::vector<std::string>{"e", "f"});
  CHECK(t.output_names() == std::vector<std::string>{"a", "b", "c", "d", "e", "f"});
}

TEST_CASE("scenario 6: task init runs before the body, task exit after", "[task][session]") {
  task t("t");
  t.init(fill_int("one", "one", 1));
  t.init(fill_int("three", "three", 3));
  t.exit(add("seven_1", "accum", "one", "seven_1"));
  t.step(step("body").nets({add("two", "one", "one", "two"), add("accum", "two", "three", "accum"),
                            add("six", "accum", "one", "six"), add("accum_inc", "accum", "one", "accum"),
                            add("seven_2", "accum", "one", "seven_2")}));
  auto six = t.output<i64>("six");
  auto seven_1 = t.output<i64>("seven_1");
  auto seven_2 = t.output<i64>("seven_2");
  task_group g;
  REQUIRE(g.add(t));
  local_session session(1);
  REQUIRE(test::run_sync(session, g));
  CHECK(six.get().value() == 6);
  CHECK(seven_2.get().value() == 7);
  CHECK(seven_1.get().value() == 7);
}

TEST_CASE("scenario 8: each instance instantiates its nets in its own workspace", "[task][session]") {
  operator_registry reg(operator_registry::global());
  auto constructed = std::make_shared<int>(0);
  auto calls = std::make_shared<int>(0);
  REQUIRE(reg.add(operator_schema("Counting")
                      .inputs(0)
                      .outputs(0)
                      .factory([constructed, calls](op_context&) -> result<std::unique_ptr<op_kernel>> {
                        ++*constructed;
                        return make_kernel([calls] {
                          ++*calls;
                          return ok();
                        });
                      })));
  net n("op");
  n.op("Counting", {}, {});
  task t("t");
  t.num_instances(64).step(loop("l", 4, n));
  task_group g;
  REQUIRE(g.add(t));
  local_session session(1);
  session.set_registry(reg);
  REQUIRE(test::run_sync(session, g));
  CHECK(*constructed == 64);
  CHECK(*calls == 256);
}

namespace {
struct counting_setup final : setup_object {
  explicit counting_setup(std::string blob) : blob_(std::move(blob)) {}
  body setup() override {
    net n("setup/" + blob_);
    n.op("Iter", {}, {blob_});
    return n;
  }
  body exit() override {
    net n("exit/" + blob_);
    n.op("Iter", {}, {blob_ + "_exit"});
    return n;
  }
  std::string blob_;
};
}  // namespace

TEST_CASE("a setup object runs once per run however many tasks carry it", "[task][session]") {
  auto obj = std::make_shared<counting_setup>("setups");
  task_group g(workspace_type::global);
  for (int i = 0; i < 3; ++i) {
    task t("t" + std::to_string(i));
    t.step(fill_int("work" + std::to_string(i), "w" + std::to_string(i), 1)).setup(obj);
    REQUIRE(g.add(t));
  }
  local_session session(1);
  REQUIRE(test::run_sync(session, g));
  auto ws = session.node_workspace("local");
  CHECK(ws->read<i64>("setups").value() == 1);
  CHECK(ws->read<i64>("setups_exit").value() == 1);
  REQUIRE(test::run_sync(session, g));  // once per run
  CHECK(ws->read<i64>("setups").value() == 2);
}

TEST_CASE("instance init and exit run once per instance in the instance's workspace", "[task][session]") {
  task t("t");
  t.init(step("init").nets({fill_int("c1", "seen", 0)}));
  t.instance_init(fill_int("mine", "mine", 5));
  t.instance_exit(add("collect", "seen", "mine", "seen"));
  t.num_instances(4).step(incr("inc", "mine"));
  auto seen = t.output<i64>("seen");
  task_group g;
  REQUIRE(g.add(t));
  local_session session(1);
  REQUIRE(test::run_sync(session, g));
  CHECK(seen.get().value() == 4 * 6);
  CHECK_FALSE(session.node_workspace("local")->has("mine"));
}

TEST_CASE("a task's composed step names each level once, in errors and events alike", "[task][session]") {
  // A report step and instance setup: B holds the report step itself (with
  // the interval) beside the user's step; I holds the setup around B.
  execution_step rep = step("rep").add_net(fill_int("rep_net", "r", 1));
  task t("t");
  t.report(rep, std::chrono::milliseconds(50));
  t.instance_exit(step("ie").add_net([] {
    net n("ie_net");
    n.op("Fail", {}, {}, {{"message", std::string("stop here")}});
    return n;
  }()));
  t.num_instances(2).step(fill_int("work", "x", 1));
  task_group g;
  REQUIRE(g.add(t));
  auto s = t.get_step().value();
  const execution_step& instance = s.substeps().at(0);  // X = local/t:parallel holds I
  CHECK(s.name() == "local/t:parallel");
  CHECK(instance.name() == "local/t:instance");
  const execution_step& body = instance.substeps().at(0);  // no instance init: B, then the exit
  CHECK(body.name() == "local/t:body");
  REQUIRE(body.substeps().size() == 2);
  CHECK(body.substeps()[0].name() == "rep");
  CHECK(body.substeps()[0].run_every() == std::chrono::milliseconds(50));
  CHECK(body.substeps()[0].substeps().empty());
  CHECK(body.substeps()[0].nets().size() == 1);
  CHECK_FALSE(rep.run_every());  // the user's step keeps no interval

  struct events final : run_observer {
    std::vector<std::string> steps;
    void step_begin(const event_source&, std::string_view step) override { steps.emplace_back(step); }
  } seen;
  local_session session(1);
  run_options o;
  o.observer = &seen;
  auto r = test::run_sync(session, g, o);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("local/t:parallel/instance 0/local/t:instance/local/t:instance:exit/ie/"
                                                "net \"ie_net\" op #0 (Fail): stop here"));
  CHECK(std::count(seen.steps.begin(), seen.steps.end(), "rep") ==
        std::count(seen.steps.begin(), seen.steps.end(), "local/t:body"));
}

TEST_CASE("task report steps run during each instance, before its exit", "[task][session]") {
  task t("t");
  net report("report");
  report.op("Iter", {}, {"reports"});
  t.init(fill_int("init", "reports", 0));
  t.report(step("r").add_net(report), std::chrono::seconds(10));
  t.instance_exit(step("exit").nets({[] {
    net n("copy");
    n.op("Copy", {"reports"}, {"reports_at_exit"});
    return n;
  }()}));
  t.num_instances(2).step(fill_int("work", "x", 1));
  auto at_exit = t.output<i64>("reports_at_exit");
  task_group g;
  REQUIRE(g.add(t));
  local_session session(1);
  REQUIRE(test::run_sync(session, g));
  CHECK(at_exit.get().value() >= 1);  // the final report ran before the instance exit
}

namespace {

struct step_ends final : run_observer {
  std::vector<std::string> lines;  // one thread: local_session(1)
  void step_end(const event_source&, std::string_view step, std::uint64_t iterations, const status&) override {
    lines.push_back(std::string(step) + " " + std::to_string(iterations));
  }
};

}  // namespace

TEST_CASE("a task's empty step is dropped: an empty stand-in named after the task runs once", "[task][session]") {
  for (const bool empty : {true, false}) {
    INFO((empty ? "empty" : "with a net"));
    execution_step s = step("s").iterations(3);
    if (!empty) s.add_net(fill_int("a", "x", 1));
    task_group g;
    REQUIRE(g.add(task("t", s)));
    local_session session(1);
    step_ends seen;
    run_options o;
    o.observer = &seen;
    auto r = test::run_sync(session, g, o);
    REQUIRE(r);
    CHECK(r.value().tasks.at(0).iterations == (empty ? 0u : 3u));
    CHECK(seen.lines == std::vector<std::string>{empty ? "local/t 1" : "s 3"});
  }
}
