// A GLOBAL group run again on the same session: the documented consumer
// pattern (docs/plan-format.md, "Steps") resets its stop blob on entry,
// so a second and third run consume everything as the first did.
#include <taskgroup/plan.hpp>
#include <taskgroup/session.hpp>

#include <catch2/catch.hpp>

#include "support/run.hpp"

#include <chrono>
#include <cstdint>
#include <string>

using namespace taskgroup;

namespace {

// One producer and one consumer in the node workspace (a GLOBAL group, one
// instance each: every blob the consumer writes stays in the node
// workspace between runs, its stop blob `drained` included).
std::string consumer_plan(bool reset_on_entry) {
  const std::string consume =
      reset_on_entry
          ? R"({"name": "consume", "substeps": [
                 {"name": "init", "nets": ["not_drained"]},
                 {"name": "loop", "nets": ["take", "check_drained", "accumulate"], "should_stop_blob": "drained"}]})"
          : R"({"name": "consume", "nets": ["take", "check_drained", "accumulate"], "should_stop_blob": "drained"})";
  return R"({
  "taskgroup_plan": 1,
  "workspace_type": "global",
  "tasks": [
    {"name": "produce", "step": {"name": "produce", "nets": ["produce_one"], "num_iter": 10},
     "exit": [{"net": "close_queue"}]},
    {"name": "consume", "step": )" +
         consume + R"(, "outputs": ["total"]}
  ],
  "local_init": [{"node": "local", "body": [{"net": "setup"}]}],
  "nets": [
    {"name": "setup", "ops": [
      {"type": "CreateQueue", "inputs": [], "outputs": ["queue"], "args": {"capacity": 2}},
      {"type": "ConstantFill", "inputs": [], "outputs": ["total"], "args": {"value": 0}},
      {"type": "ConstantFill", "inputs": [], "outputs": ["item"], "args": {"value": 0}}]},
    {"name": "produce_one", "ops": [
      {"type": "Iter", "inputs": [], "outputs": ["item"]},
      {"type": "Enqueue", "inputs": ["queue", "item"], "outputs": []}]},
    {"name": "close_queue", "ops": [{"type": "CloseQueue", "inputs": ["queue"], "outputs": []}]},
    {"name": "not_drained", "ops": [{"type": "ConstantFill", "inputs": [], "outputs": ["drained"], "args": {"value": false}}]},
    {"name": "take", "ops": [{"type": "Dequeue", "inputs": ["queue"], "outputs": ["value", "ok"]}]},
    {"name": "check_drained", "ops": [{"type": "Not", "inputs": ["ok"], "outputs": ["drained"]}]},
    {"name": "accumulate", "ops": [{"type": "Add", "inputs": ["total", "value"], "outputs": ["total"]}]}
  ]
})";
}

}  // namespace

TEST_CASE("the consumer pattern resets its stop blob and is safe on rerun", "[plan][rerun]") {
  auto group = read_plan(std::string_view(consumer_plan(true)));
  REQUIRE(group);
  local_session session(2);
  run_options o;
  o.timeout = std::chrono::seconds(20);  // a consumer stopped early leaves the producer blocked on a full queue
  for (int run = 1; run <= 3; ++run) {
    INFO("run " << run);
    auto r = test::run_sync(session, group.value(), o);
    REQUIRE(r);
    // local_init resets `item` and `total`: every run consumes 1 .. 10.
    CHECK(session.node_workspace("local")->read<std::int64_t>("total").value() == 55);
  }
}

TEST_CASE("without the reset, a stale stop blob ends the consumer after one item", "[plan][rerun]") {
  // What the reset is for: the second run's consumer sees `drained` still
  // true after its first net and stops; the producer then blocks on the
  // full queue until the run's deadline.
  auto group = read_plan(std::string_view(consumer_plan(false)));
  REQUIRE(group);
  local_session session(2);
  run_options o;
  o.timeout = std::chrono::milliseconds(500);
  REQUIRE(test::run_sync(session, group.value(), o));
  auto second = test::run_sync(session, group.value(), o);
  REQUIRE_FALSE(second);
  CHECK(second.error().code == errc::timeout);
}
