// Instance counts multiply along a path: a task's num_instances times the
// concurrent_instances of every step from its root to a step is bounded by
// max_instances, in C++ (steps, tasks) and in plans alike. Generated trees
// are checked against a plain recursive model of the rule.
#include <taskgroup/plan.hpp>
#include <taskgroup/task_group.hpp>

#include "support/steps.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace taskgroup;
using namespace taskgroup::test;

namespace {

const std::string limit_words =
    " instances at once, more than 65536 (taskgroup::max_instances, which bounds the product of the instance counts "
    "along a path)";

// A generated step: its count and children (a leaf runs a net of its own).
struct spec {
  std::string name;
  std::int64_t count = 1;
  std::vector<spec> children;
};

spec generate(std::mt19937& rng, int depth, int& ids) {
  static const std::int64_t counts[] = {1, 1, 1, 2, 3, 16, 255, 256, 257, 4096, 65536};
  spec s;
  s.name = "s" + std::to_string(ids++);
  s.count = counts[std::uniform_int_distribution<std::size_t>(0, std::size(counts) - 1)(rng)];
  const int width = depth >= 4 ? 0 : std::uniform_int_distribution<int>(0, 3)(rng);
  for (int i = 0; i < width; ++i) s.children.push_back(generate(rng, depth + 1, ids));
  return s;
}

execution_step build(const spec& s) {
  execution_step out = step(s.name).concurrent_instances(s.count);
  if (s.children.empty()) out.add_net(fill_int("net_" + s.name, "x", 1));
  for (const spec& c : s.children) out.add_substep(build(c));
  return out;
}

// The model: the first step, depth first (a step before its children),
// where `above` times its count passes max_instances.
struct excess {
  std::string names;    // "s0/s3"
  std::string pointer;  // "/substeps/1" below the root's own pointer
  std::int64_t above = 1;
  std::int64_t count = 1;
};

std::optional<excess> first_excess(const spec& s, std::int64_t above, const std::string& names,
                                   const std::string& pointer) {
  const std::string here = names.empty() ? s.name : names + "/" + s.name;
  if (above * s.count > max_instances) return excess{here, pointer, above, s.count};
  for (std::size_t i = 0; i < s.children.size(); ++i) {
    if (auto e = first_excess(s.children[i], above * s.count, here, pointer + "/substeps/" + std::to_string(i)))
      return e;
  }
  return std::nullopt;
}

std::string fault_words(const excess& e) {
  return "num_concurrent_instances " + std::to_string(e.count) + " makes " + std::to_string(e.above) + " x " +
         std::to_string(e.count) + " = " + std::to_string(e.above * e.count) + limit_words;
}

std::string step_json(const spec& s) {
  std::string out = R"({"name": ")" + s.name + "\"";
  if (s.count != 1) out += ", \"num_concurrent_instances\": " + std::to_string(s.count);
  if (s.children.empty()) {
    out += R"(, "nets": ["net_)" + s.name + "\"]";
  } else {
    out += ", \"substeps\": [";
    for (std::size_t i = 0; i < s.children.size(); ++i) out += (i == 0 ? "" : ", ") + step_json(s.children[i]);
    out += "]";
  }
  return out + "}";
}

void net_list(const spec& s, std::string& out) {
  if (s.children.empty()) {
    out += std::string(out.empty() ? "" : ", ") + R"({"name": "net_)" + s.name +
           R"(", "ops": [{"type": "ConstantFill", "outputs": ["x"], "args": {"value": 1}}]})";
  }
  for (const spec& c : s.children) net_list(c, out);
}

std::string plan_json(const spec& s, std::int64_t instances) {
  std::string nets;
  net_list(s, nets);
  return R"({"taskgroup_plan": 1, "nets": [)" + nets + R"(], "tasks": [{"name": "t", "num_instances": )" +
         std::to_string(instances) + ", \"step\": " + step_json(s) + "}]}";
}

}  // namespace

TEST_CASE("instance counts multiply along a path: generated trees against the model in C++ and in plans",
          "[step][task][plan]") {
  std::mt19937 rng(20261101);
  int refused_step = 0, refused_task = 0, accepted = 0;
  for (int k = 0; k < 400; ++k) {
    int ids = 0;
    const spec tree = generate(rng, 1, ids);
    static const std::int64_t task_counts[] = {1, 1, 2, 16, 256, 65536};
    const std::int64_t instances = task_counts[static_cast<std::size_t>(k) % std::size(task_counts)];
    INFO("tree " << k << ", num_instances " << instances << ": " << step_json(tree));
    const execution_step s = build(tree);

    // The tree alone.
    const auto alone = first_excess(tree, 1, "", "");
    const status st = s.validate();
    if (alone) {
      REQUIRE_FALSE(st);
      CHECK(st.error().code == errc::invalid_step);
      CHECK(st.error().message == "step \"" + alone->names + "\": " + fault_words(*alone));
      ++refused_step;
    } else {
      CHECK(st);
    }

    // The task: its num_instances run the whole tree.
    const auto in_task = first_excess(tree, instances, "", "");
    task t("t", s);
    t.num_instances(instances);
    const status tv = t.validate();
    if (in_task && instances > 1) {
      REQUIRE_FALSE(tv);
      CHECK(tv.error().code == errc::invalid_task);
      CHECK(tv.error().message == "task \"local/t\" (num_instances " + std::to_string(instances) + "): step \"" +
                                      in_task->names + "\": " + fault_words(*in_task));
      task_group g;
      CHECK_FALSE(g.add(t));
      ++refused_task;
    } else {
      // With one instance the tree's own check decides, when the task's
      // step is composed (as every run and `taskgroup check` do).
      CHECK(tv);
      CHECK(static_cast<bool>(t.get_step()) == !in_task);
      if (!in_task) ++accepted;
    }

    // The same plan: refused at the step's key, or read and accepted.
    auto read = read_plan(plan_json(tree, instances));
    if (in_task) {
      REQUIRE_FALSE(read);
      CHECK(read.error().code == errc::invalid_plan);
      CHECK(read.error().message == "/tasks/0/step" + in_task->pointer +
                                        "/num_concurrent_instances: " + std::to_string(in_task->count) + " makes " +
                                        std::to_string(in_task->above) + " x " + std::to_string(in_task->count) +
                                        " = " + std::to_string(in_task->above * in_task->count) + limit_words);
    } else {
      REQUIRE(read);
      CHECK(read.value().tasks().front().get_step());
    }
  }
  // The generator reaches every outcome.
  CHECK(refused_step > 20);
  CHECK(refused_task > 20);
  CHECK(accepted > 20);
}

TEST_CASE("the product may reach max_instances exactly", "[step][task][plan]") {
  const execution_step edge = step("outer").concurrent_instances(256).add_substep(
      step("inner").concurrent_instances(256).add_net(fill_int("leaf", "x", 1)));
  CHECK(edge.validate());
  const execution_step past = step("outer").concurrent_instances(256).add_substep(
      step("inner").concurrent_instances(257).add_net(fill_int("leaf", "x", 1)));
  CHECK(past.validate().error().message ==
        "step \"outer/inner\": num_concurrent_instances 257 makes 256 x 257 = 65792" + limit_words);
  task t("t", step("s").concurrent_instances(16).add_net(fill_int("a", "x", 1)));
  t.num_instances(4096);
  CHECK(t.validate());
  t.num_instances(4097);
  CHECK(t.validate().error().message ==
        "task \"local/t\" (num_instances 4097): step \"s\": num_concurrent_instances 16 makes 4097 x 16 = 65552" +
            limit_words);
}

TEST_CASE("report steps and instance work run in every instance: their counts multiply too", "[task][plan]") {
  SECTION("a report step, in C++") {
    task t("t", step("s").add_net(fill_int("a", "x", 1)));
    t.num_instances(2);
    t.report(step("show").concurrent_instances(65536).add_net(fill_int("r", "y", 1)));
    task_group g;
    auto added = g.add(t);
    REQUIRE_FALSE(added);
    CHECK(added.error().message ==
          "task \"local/t\" (num_instances 2): report step \"show\": num_concurrent_instances "
          "65536 makes 2 x 65536 = 131072" +
              limit_words);
  }
  SECTION("instance init work, in C++: refused when the task's tree is composed") {
    task t("t", step("s").add_net(fill_int("a", "x", 1)));
    t.num_instances(3);
    t.instance_init(step("warm").concurrent_instances(30000).add_net(fill_int("w", "y", 1)));
    CHECK(t.validate());
    auto composed = t.get_step();
    REQUIRE_FALSE(composed);
    CHECK(composed.error().code == errc::invalid_step);
    CHECK_THAT(composed.error().message, Catch::StartsWith("step \"local/t:parallel/") &&
                                             Catch::EndsWith("/warm\": num_concurrent_instances 30000 makes 3 x 30000 "
                                                             "= 90000" +
                                                             limit_words));
    // Task init work runs once: its count is not multiplied.
    task once("once", step("s").add_net(fill_int("b", "x", 1)));
    once.num_instances(3);
    once.init(step("warm").concurrent_instances(30000).add_net(fill_int("w2", "y", 1)));
    CHECK(once.get_step());
  }
  SECTION("in plans, at the step's key") {
    const std::string nets = R"("nets": [{"name": "a", "ops": []}, {"name": "w", "ops": []}], )";
    auto report = read_plan(R"({"taskgroup_plan": 1, )" + nets +
                            R"("tasks": [{"name": "t", "num_instances": 2, "step": {"nets": ["a"]},
                                "reports": [{"step": {"name": "show", "nets": ["w"], "num_concurrent_instances": 65536}}]}]})");
    REQUIRE_FALSE(report);
    CHECK(report.error().message ==
          "/tasks/0/reports/0/step/num_concurrent_instances: 65536 makes 2 x 65536 = 131072" + limit_words);
    auto inst = read_plan(R"({"taskgroup_plan": 1, )" + nets +
                          R"("tasks": [{"name": "t", "num_instances": 3, "step": {"nets": ["a"]},
                              "instance_init": [{"name": "warm", "substeps": [{"nets": ["w"], "num_concurrent_instances": 30000}]}]}]})");
    REQUIRE_FALSE(inst);
    CHECK(inst.error().message ==
          "/tasks/0/instance_init/0/substeps/0/num_concurrent_instances: 30000 makes 3 x 30000 = 90000" + limit_words);
    // Task init work runs once.
    CHECK(read_plan(R"({"taskgroup_plan": 1, )" + nets +
                    R"("tasks": [{"name": "t", "num_instances": 3, "step": {"nets": ["a"]},
                        "init": [{"nets": ["w"], "num_concurrent_instances": 30000}]}]})"));
  }
}
