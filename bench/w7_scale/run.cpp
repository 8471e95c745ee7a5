// Workload 7: `taskgroup run` at scale, linear in the
// nodes, and its memory per task beyond the plan text.
//
// What one run is: what `taskgroup run PLAN --threads 2` does with the
// plan (read_plan_file, then a run on local_session(2)), on the plans of
// the check rows (w7_scale/plans.hpp):
// - w7_run_nodes: 10^5 nodes, one task each; baseline 10^4 nodes. Per
//   node. Targets: ours / nodes_10k <= 1.5 (linear), and 3 s
//   for 10^5 nodes (30,000 ns/node).
// - w7_run_memory: the peak RSS growth of reading and running the
//   200,000-task plan less the plan text's size, per task, in a fresh
//   process. Target: 2 KB per task (2,048 B/task).
#include "w7_scale/plans.hpp"

#include "common/memory.hpp"
#include "common/registry.hpp"
#include "common/taskgroup_helpers.hpp"
#include "w1_memory/probe.hpp"

#include <taskgroup/plan.hpp>
#include <taskgroup/session.hpp>

#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>

namespace {

using tgbench::w7::nodes_n;
using tgbench::w7::plan_file;
using tgbench::w7::tasks_n;

// One `taskgroup run`; an error (empty = none) when it fails or its
// report does not hold `tasks` tasks that succeeded.
std::string run_once(const std::filesystem::path& path, std::size_t tasks) {
  auto g = taskgroup::read_plan_file(path);
  if (!g) return g.error().message;
  taskgroup::local_session session(2);
  auto r = tgbench::run_sync(session, g.value());
  if (!r) return r.error().message;
  if (r.value().tasks.size() != tasks || !r.value().ok()) {
    return "the report does not hold " + std::to_string(tasks) + " tasks that succeeded";
  }
  return {};
}

void run_nodes(benchmark::State& state, std::size_t n) {
  const plan_file file("run_nodes_" + std::to_string(n));
  tgbench::w7::write_nodes_plan(file.path(), n);
  for (auto _ : state) {
    if (auto error = run_once(file.path(), n); !error.empty()) {
      state.SkipWithError(error.c_str());
      return;
    }
  }
}

double memory_probe() {
  const plan_file file("run_memory");
  tgbench::w7::write_tasks_plan(file.path(), tasks_n);
  const auto text = static_cast<double>(std::filesystem::file_size(file.path()));
  const tgbench::rss_meter meter;
  if (auto error = run_once(file.path(), tasks_n); !error.empty()) {
    std::printf("%s\n", error.c_str());
    return std::numeric_limits<double>::quiet_NaN();
  }
  return (meter.growth() - text) / static_cast<double>(tasks_n);
}

const tgbench::add_workload reg_nodes{{
    .id = "w7_run_nodes",
    .title = "taskgroup run of a plan of 100,000 nodes, one task each, on 2 threads, against 10,000 nodes (per node)",
    .unit = "ns/node",
    .unit_ns = 1.0,
    .baselines = {"nodes_10k"},
    .targets = {{tgbench::target_kind::max_ratio, "nodes_10k", 1.5}, {tgbench::target_kind::max_value, "", 30'000}},
    .order = 73,
}};

const tgbench::add_contender nodes_ours{{
    .workload = "w7_run_nodes",
    .name = tgbench::ours,
    .what = "read_plan_file + local_session(2).run, 100,000 nodes",
    .units_per_iteration = static_cast<double>(nodes_n),
    .fn = [](benchmark::State& s) { run_nodes(s, nodes_n); },
    .iterations = 1,
}};

const tgbench::add_contender nodes_10k{{
    .workload = "w7_run_nodes",
    .name = "nodes_10k",
    .what = "the same with 10,000 nodes",
    .units_per_iteration = static_cast<double>(nodes_n / 10),
    .fn = [](benchmark::State& s) { run_nodes(s, nodes_n / 10); },
    .iterations = 3,
}};

const tgbench::add_workload reg_memory{{
    .id = "w7_run_memory",
    .title = "peak RSS growth of taskgroup run of a 200,000-task plan beyond the plan text, per task (fresh process)",
    .unit = "B/task",
    .unit_ns = 1.0,
    .baselines = {},
    .targets = {{tgbench::target_kind::max_value, "", 2'048}},
    .order = 74,
    .counter = "bytes_per_task",
}};

const tgbench::add_probe reg_probe{{.name = "w7_run_memory/ours", .fn = memory_probe}};

const tgbench::add_contender memory_ours{{
    .workload = "w7_run_memory",
    .name = tgbench::ours,
    .what = "read_plan_file + local_session(2).run of 200,000 tasks, in a child process",
    .fn = [](benchmark::State& s) { tgbench::w1m::run_probe_benchmark(s, "w7_run_memory/ours"); },
    .iterations = 1,
}};

}  // namespace
