// The documented limits of durations and instance counts in C++: steps,
// tasks, group report steps and run options refuse values beyond them with
// an error naming the field, the step or task, and the limit.
#include <taskgroup/session.hpp>
#include <taskgroup/task_group.hpp>

#include "support/steps.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <string>

using namespace taskgroup;
using namespace taskgroup::test;
using namespace std::chrono_literals;

namespace {

const std::chrono::milliseconds too_long{10'000'000'000'000};  // 1e13 ms, past steady_clock's range from now
const std::chrono::milliseconds huge{std::int64_t{1} << 62};

std::string step_error(const execution_step& s) {
  auto st = s.validate();
  REQUIRE_FALSE(st);
  CHECK(st.error().code == errc::invalid_step);
  return st.error().message;
}

}  // namespace

TEST_CASE("max_duration is 2^40 ms, about 34.8 years", "[step]") {
  CHECK(max_duration.count() == 1099511627776);
  CHECK(max_instances == 65536);
  CHECK(max_step_depth == 1000);
}

TEST_CASE("a step timeout or run_every beyond max_duration is refused, naming the step and the limit", "[step]") {
  CHECK(step_error(step("slow").add_net(fill_int("a", "x", 1)).timeout(too_long)) ==
        "step \"slow\": timeout must be at most 1099511627776 ms (taskgroup::max_duration, about 34.8 years), "
        "got 10000000000000");
  auto reporter = step("tick").add_net(fill_int("t", "y", 1)).run_every(huge);
  CHECK(step_error(step("outer").add_substep(step("work").add_net(fill_int("w", "z", 1))).add_substep(reporter)) ==
        "step \"outer/tick\": run_every_ms must be at most 1099511627776 ms (taskgroup::max_duration, about 34.8 "
        "years), got 4611686018427387904");
  CHECK(step("edge").add_net(fill_int("a", "x", 1)).timeout(max_duration).validate());
  CHECK(step("edge").add_net(fill_int("a", "x", 1)).run_every(max_duration).validate());
  CHECK_THAT(step_error(step("zero").add_net(fill_int("a", "x", 1)).timeout(0ms)),
             Catch::Contains("timeout must be > 0 ms, got 0"));
}

TEST_CASE("a step timeout beyond max_duration never runs (it used to fire at once)", "[step]") {
  task_group g;
  REQUIRE(g.add(task("t", step("slow").add_net(fill_int("a", "x", 1)).timeout(too_long))));
  local_session session(1);
  auto r = test::run_sync(session, g);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::invalid_step);
  CHECK_THAT(r.error().message, Catch::Contains("taskgroup::max_duration"));
}

TEST_CASE("num_concurrent_instances beyond max_instances is refused, naming the step and the limit", "[step]") {
  CHECK(step_error(step("wide").add_net(fill_int("a", "x", 1)).concurrent_instances(1'000'000)) ==
        "step \"wide\": num_concurrent_instances must be at most 65536 (taskgroup::max_instances), got 1000000");
  CHECK(step_error(step("wide").add_net(fill_int("a", "x", 1)).concurrent_instances(std::int64_t{1} << 62)) ==
        "step \"wide\": num_concurrent_instances must be at most 65536 (taskgroup::max_instances), got "
        "4611686018427387904");
  CHECK(step("edge").add_net(fill_int("a", "x", 1)).concurrent_instances(max_instances).validate());
}

TEST_CASE("a task's num_instances beyond max_instances is refused, naming the task and the limit", "[task]") {
  task_group g;
  task t("many", step("s").add_net(fill_int("a", "x", 1)));
  t.num_instances(100'000'000);
  auto added = g.add(t);
  REQUIRE_FALSE(added);
  CHECK(added.error().code == errc::invalid_task);
  CHECK(added.error().message ==
        "task \"local/many\": num_instances must be at most 65536 (taskgroup::max_instances), got 100000000");
  task ok_task("edge", step("s").add_net(fill_int("b", "x", 1)));
  ok_task.num_instances(max_instances);
  CHECK(ok_task.validate());
}

TEST_CASE("a task report interval beyond max_duration is refused, naming the task, report step and limit", "[task]") {
  task_group g;
  task t("t", step("s").add_net(fill_int("a", "x", 1)));
  t.report(step("show").add_net(fill_int("r", "y", 1)), huge);
  auto added = g.add(t);
  REQUIRE_FALSE(added);
  CHECK(added.error().code == errc::invalid_task);
  CHECK(added.error().message ==
        "task \"local/t\": report step \"show\": interval must be at most 1099511627776 ms "
        "(taskgroup::max_duration, about 34.8 years), got 4611686018427387904");
  task z("z", step("s").add_net(fill_int("b", "x", 1)));
  z.report(step("show").add_net(fill_int("r2", "y", 1)), 0ms);
  CHECK_THAT(z.validate().error().message, Catch::Contains("interval must be > 0 ms, got 0"));
}

TEST_CASE("a group report step interval beyond max_duration fails the run at its start", "[task_group]") {
  task_group g;
  REQUIRE(g.add(task("t", step("s").add_net(fill_int("a", "x", 1)))));
  g.report_step(step("show").add_net(incr("tick", "ticks")), node(), huge);
  local_session session(1);
  auto r = test::run_sync(session, g);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::invalid_task);
  CHECK(r.error().message ==
        "report step \"show\" on node \"local\": interval must be at most 1099511627776 ms "
        "(taskgroup::max_duration, about 34.8 years), got 4611686018427387904");
  CHECK_FALSE(session.node_workspace("local")->has("ticks"));
  // tasks_by_node builds the report step into a tree: it refuses it too.
  task_group h;
  REQUIRE(h.add(task("t", step("s").add_net(fill_int("b", "x", 1)))));
  h.report_step(step("show").add_net(incr("tock", "ticks")), node(), huge);
  auto grouped = h.tasks_by_node();
  REQUIRE_FALSE(grouped);
  CHECK_THAT(grouped.error().message, Catch::Contains("taskgroup::max_duration"));
}

TEST_CASE("run_options::timeout out of [0, max_duration] fails the run at its start", "[session]") {
  task_group g;
  REQUIRE(g.add(task("t", step("s").add_net(fill_int("a", "x", 1)))));
  local_session session(1);
  run_options o;
  o.timeout = too_long;
  auto r = test::run_sync(session, g, o);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::invalid_task);
  CHECK(r.error().message ==
        "run_options::timeout must be at most 1099511627776 ms (taskgroup::max_duration, about 34.8 years), got "
        "10000000000000");
  CHECK_FALSE(session.node_workspace("local")->has("x"));
  o.timeout = -std::chrono::milliseconds(1);
  r = test::run_sync(session, g, o);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::invalid_task);
  CHECK(r.error().message == "run_options::timeout must be >= 0 ms, got -1");
  CHECK_FALSE(session.node_workspace("local")->has("x"));
  o.timeout = max_duration;
  CHECK(test::run_sync(session, g, o));
  // 0 expires at once.
  o.timeout = std::chrono::milliseconds(0);
  r = test::run_sync(session, g, o);
  CHECK((r || r.error().code == errc::timeout));
}
