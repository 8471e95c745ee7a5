// Plan text is read in two passes (plan_detail::outline): checked whole,
// then member by member, the long arrays element by element, never whole
// in memory. These tests hold that reader to the document reader, which
// reads the same text parsed whole: the same group (written back the
// same) or the same error, on generated plans, on plans whose members
// come in any order, and on the faults of plan_test.cpp.
#include "model/generate.hpp"
#include "plan/internal.hpp"

#include <taskgroup/plan.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

using namespace taskgroup;

namespace {

// The group read from `text` as a document, or its error (the reader
// before plans were streamed).
result<task_group> read_as_document(std::string_view text) {
  TASKGROUP_TRY(const auto doc, plan_detail::parse_text(text));
  return read_plan(doc.v);
}

// What a read gave, comparable: the group written back, or the error.
std::string outcome(const result<task_group>& g) {
  if (!g) return "error: " + g.error().message;
  auto text = write_plan(g.value());
  return text ? text.value() : "unwritable: " + text.error().message;
}

// Both readers agree on `text`; `where` names the case on failure.
void check_same(const std::string& text, const std::string& where) {
  INFO(where << "\n" << text);
  CHECK(outcome(read_plan(text)) == outcome(read_as_document(text)));
}

// `text` (an object written by write_plan, one member per line at depth
// one) with its top-level members in the order `rng` draws: the two-pass
// reader reads each where it is.
std::string shuffled_members(const std::string& text, std::mt19937_64& rng) {
  const auto v = plan_detail::parse_text(text);
  REQUIRE(v);
  std::vector<std::string> members;
  for (const auto& kv : v.value().v.get_object()) {
    members.push_back(boost::json::serialize(boost::json::string(kv.key())) + ": " +
                      boost::json::serialize(kv.value()));
  }
  std::shuffle(members.begin(), members.end(), rng);
  std::string out = "{";
  for (std::size_t i = 0; i < members.size(); ++i) out += (i ? ",\n " : "") + members[i];
  return out + "}";
}

}  // namespace

TEST_CASE("a plan streamed from text reads as the same plan parsed whole, on generated plans", "[plan]") {
  std::mt19937_64 rng(7);
  int written = 0;
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    auto text = write_plan(model::build(model::generate(seed)));
    if (!text) continue;  // inline operators: not a plan
    ++written;
    const std::string where = "seed " + std::to_string(seed);
    check_same(text.value(), where);
    check_same(shuffled_members(text.value(), rng), where + ", members shuffled");
  }
  // The generator's groups are mostly of registered operators.
  CHECK(written > 100);
}

TEST_CASE("a plan streamed from text reads its members wherever they are", "[plan]") {
  const std::string nets =
      R"("nets": [{"name": "a", "ops": [{"type": "ConstantFill", "outputs": ["x"], "args": {"value": 1}}]}])";
  const std::string tasks = R"("tasks": [{"name": "t", "step": {"nets": ["a"]}, "outputs": ["x"]}])";
  const std::string version = R"("taskgroup_plan": 1)";
  const std::string nodes = R"("nodes": [{"name": "local", "options": {"k": 1}}])";
  const std::vector<std::string> orders = {
      "{" + version + ", " + nets + ", " + tasks + "}",
      "{" + tasks + ", " + nets + ", " + version + "}",  // a task names a net not read yet
      "{" + tasks + ", " + nodes + ", " + version + ", " + nets + "}",
      // An escaped top-level key is not a view of the text: read whole.
      "{\"\\u0074asks\"" + tasks.substr(7) + ", " + version + ", " + nets + "}",
      // Blanks around the keys' colons.
      "{\n  \"taskgroup_plan\" \t:\r\n 1 , \"tasks\"  :  " + tasks.substr(9) + ",\"nets\":" + nets.substr(7) + "}",
  };
  for (const auto& text : orders) {
    check_same(text, "members in another order");
    auto g = read_plan(text);
    REQUIRE(g);
    CHECK(g.value().tasks().size() == 1);
    CHECK(g.value().tasks()[0].name() == "local/t");
  }
}

TEST_CASE("a plan streamed from text fails as the plan parsed whole does", "[plan]") {
  const std::string head =
      R"({"taskgroup_plan": 1, "nets": [{"name": "a", "ops": [{"type": "ConstantFill", "outputs": ["x"], "args": {"value": 1}}]}], )";
  const std::vector<std::string> faults = {
      head + R"("tasks": [{"name": "t", "step": {"nets": ["a"], "substeps": []}}]})",
      head + R"("tasks": [{}, {}, {"step": {"substeps": [{"nets": ["a"], "substeps": [{"nets": ["a"]}]}]}}]})",
      head + R"("tasks": [{"step": {"nets": ["a", "b"]}}]})",
      head + R"("tasks": [{"stpe": {}}]})",
      head + R"("tasks": [{"num_instances": "two"}]})",
      head + R"("tasks": [1, "two", null, [3]]})",
      head + R"("tasks": "all"})",
      head + R"("tasks": [{"workspace_type": "global"}, {"workspace_type": "private"}]})",
      head + R"("tasks": [{"step": {"nets": ["a"]}}], "local_init": [{"node": "n9", "body": [{"net": "a"}]}]})",
      head + R"("tasks": [], "colour": 1})",
      head + R"("tasks": [], "tasks": []})",
      R"({"taskgroup_plan": 1, "nets": [{"name": "a"}, {"name": "a"}]})",
      R"({"taskgroup_plan": 1, "nets": [{"name": "a", "ops": [{"type": "Ad"}]}]})",
      R"({"taskgroup_plan": 1, "nets": {"name": "a"}})",
      R"({"taskgroup_plan": 1, "nets": [{"name": "a", "ops": [{"type": "Sleep", "args": {"ms": 1e999}}]}]})",
      R"({"tasks": []})",
      R"({"taskgroup_plan": 9, "tasks": [{"stpe": 1}]})",
      R"({"tasks": [{"stpe": 1}], "taskgroup_plan": 9})",
      R"({"taskgroup_plan": "1"})",
      R"([1, 2])",
      R"("plan")",
      R"({"taskgroup_plan": 1, "tasks": [)",
      R"({"taskgroup_plan": 1} {})",
      "",
  };
  for (const auto& text : faults) {
    check_same(text, "a fault");
    CHECK_FALSE(read_plan(text));
  }
}

TEST_CASE("a long array is read element by element, each element's values dropped before the next", "[plan]") {
  std::string text = R"({"taskgroup_plan": 1, "tasks": [)";
  for (int i = 0; i < 2000; ++i) {
    text += (i ? "," : "") + std::string(R"({"name": "t)") + std::to_string(i) +
            R"(", "step": {"name": "s", "nets": ["n"]}})";
  }
  text +=
      R"(], "nets": [{"name": "n", "ops": [{"type": "ConstantFill", "outputs": ["x"], "args": {"value": [1, 2, 3]}}]}]})";
  const auto found = plan_detail::outline_text(text);
  REQUIRE(found);
  REQUIRE(found.value());
  std::size_t tasks_at = 0;
  for (const auto& [k, at] : found.value()->members) {
    if (k == "tasks") tasks_at = at;
  }
  REQUIRE(text[tasks_at] == '[');
  std::size_t seen = 0;
  const auto st = plan_detail::each_element(text, tasks_at, [&](const boost::json::value& e, std::size_t i) -> status {
    CHECK(i == seen++);
    CHECK(e.at("name").as_string() == "t" + std::to_string(i));
    return ok();
  });
  CHECK(st);
  CHECK(seen == 2000);
  // The first error of the callback stops the walk and is returned.
  seen = 0;
  const auto stopped =
      plan_detail::each_element(text, tasks_at, [&](const boost::json::value&, std::size_t i) -> status {
        ++seen;
        if (i == 41) return fail(errc::invalid_plan, "stop at 41");
        return ok();
      });
  REQUIRE_FALSE(stopped);
  CHECK(stopped.error().message == "stop at 41");
  CHECK(seen == 42);
}
