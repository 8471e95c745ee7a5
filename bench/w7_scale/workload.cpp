// Workload 7: `taskgroup check` at scale, linear in the
// nodes and the tasks of a plan.
//
// What one check is: what `taskgroup check PLAN` does (read_plan_file, then
// the command's validate_group and summarize_group, tools/check.cpp). The
// plans are generated here into a temporary file before timing:
// - w7_check_nodes: 10^5 nodes, one task each (a step running one shared
//   one-op net); baseline the same shape with 10^4 nodes. Per node, so a
//   ratio near 1 means linear. Targets: ours / nodes_10k <= 1.5, and
//   2 s for 10^5 nodes (20,000 ns/node).
// - w7_check_tasks: 200,000 tasks on one node, each with its own step, net
//   (ConstantFill of 3 values) and output; baseline 20,000 such tasks.
//   Targets: ours / tasks_20k <= 1.5, and 1.5 s (7,500 ns/task).
// - w7_check_memory: the peak RSS growth of checking the 200,000-task plan
//   (text, document and group), per task, in a fresh process. Target:
//   300 MB (1,500 B/task).
#include "check.hpp"
#include "w7_scale/plans.hpp"

#include "common/memory.hpp"
#include "common/registry.hpp"
#include "w1_memory/probe.hpp"

#include <taskgroup/plan.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>

namespace {

using tgbench::w7::nodes_n;
using tgbench::w7::plan_file;
using tgbench::w7::tasks_n;
using tgbench::w7::write_nodes_plan;
using tgbench::w7::write_tasks_plan;

// One `taskgroup check`; an error (empty = none) when it fails or its
// summary does not count `tasks` tasks.
std::string check_once(const std::filesystem::path& path, std::size_t tasks) {
  auto g = taskgroup::read_plan_file(path);
  if (!g) return g.error().message;
  if (auto st = taskgroup::cli::validate_group(g.value()); !st) return st.error().message;
  const std::string summary = taskgroup::cli::summarize_group(g.value(), path.string());
  if (summary.find(", " + std::to_string(tasks) + " tasks, ") == std::string::npos) {
    return "the summary does not count " + std::to_string(tasks) + " tasks";
  }
  return {};
}

void check_benchmark(benchmark::State& state, bool nodes, std::size_t n) {
  const plan_file file(std::string(nodes ? "nodes_" : "tasks_") + std::to_string(n));
  if (nodes) {
    write_nodes_plan(file.path(), n);
  } else {
    write_tasks_plan(file.path(), n);
  }
  for (auto _ : state) {
    if (auto error = check_once(file.path(), n); !error.empty()) {
      state.SkipWithError(error.c_str());
      return;
    }
  }
}

double memory_probe() {
  const plan_file file("memory");
  write_tasks_plan(file.path(), tasks_n);
  const tgbench::rss_meter meter;
  if (auto error = check_once(file.path(), tasks_n); !error.empty()) {
    std::printf("%s\n", error.c_str());
    return std::numeric_limits<double>::quiet_NaN();
  }
  return meter.growth() / static_cast<double>(tasks_n);
}

const tgbench::add_workload reg_nodes{{
    .id = "w7_check_nodes",
    .title = "taskgroup check of a plan of 100,000 nodes, one task each, against 10,000 nodes (per node)",
    .unit = "ns/node",
    .unit_ns = 1.0,
    .baselines = {"nodes_10k"},
    .targets = {{tgbench::target_kind::max_ratio, "nodes_10k", 1.5}, {tgbench::target_kind::max_value, "", 20'000}},
    .order = 70,
}};

const tgbench::add_contender nodes_ours{{
    .workload = "w7_check_nodes",
    .name = tgbench::ours,
    .what = "read_plan_file + validate_group + summarize_group, 100,000 nodes",
    .units_per_iteration = static_cast<double>(nodes_n),
    .fn = [](benchmark::State& s) { check_benchmark(s, true, nodes_n); },
    .iterations = 1,
}};

const tgbench::add_contender nodes_10k{{
    .workload = "w7_check_nodes",
    .name = "nodes_10k",
    .what = "the same with 10,000 nodes",
    .units_per_iteration = static_cast<double>(nodes_n / 10),
    .fn = [](benchmark::State& s) { check_benchmark(s, true, nodes_n / 10); },
    .iterations = 3,
}};

const tgbench::add_workload reg_tasks{{
    .id = "w7_check_tasks",
    .title = "taskgroup check of a plan of 200,000 tasks (a step, net and output each), against 20,000 (per task)",
    .unit = "ns/task",
    .unit_ns = 1.0,
    .baselines = {"tasks_20k"},
    .targets = {{tgbench::target_kind::max_ratio, "tasks_20k", 1.5}, {tgbench::target_kind::max_value, "", 7'500}},
    .order = 71,
}};

const tgbench::add_contender tasks_ours{{
    .workload = "w7_check_tasks",
    .name = tgbench::ours,
    .what = "read_plan_file + validate_group + summarize_group, 200,000 tasks",
    .units_per_iteration = static_cast<double>(tasks_n),
    .fn = [](benchmark::State& s) { check_benchmark(s, false, tasks_n); },
    .iterations = 1,
}};

const tgbench::add_contender tasks_20k{{
    .workload = "w7_check_tasks",
    .name = "tasks_20k",
    .what = "the same with 20,000 tasks",
    .units_per_iteration = static_cast<double>(tasks_n / 10),
    .fn = [](benchmark::State& s) { check_benchmark(s, false, tasks_n / 10); },
    .iterations = 3,
}};

const tgbench::add_workload reg_memory{{
    .id = "w7_check_memory",
    .title = "peak RSS growth of taskgroup check of a 200,000-task plan, per task (fresh process)",
    .unit = "B/task",
    .unit_ns = 1.0,
    .baselines = {},
    .targets = {{tgbench::target_kind::max_value, "", 1'500}},
    .order = 72,
    .counter = "bytes_per_task",
}};

const tgbench::add_probe reg_probe{{.name = "w7_check_memory/ours", .fn = memory_probe}};

const tgbench::add_contender memory_ours{{
    .workload = "w7_check_memory",
    .name = tgbench::ours,
    .what = "read_plan_file + validate_group + summarize_group of 200,000 tasks, in a child process",
    .fn = [](benchmark::State& s) { tgbench::w1m::run_probe_benchmark(s, "w7_check_memory/ours"); },
    .iterations = 1,
}};

}  // namespace
