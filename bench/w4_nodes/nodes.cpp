// Workload 4 (nodes in parallel): 8 tasks of about 50 ms of arithmetic
// each, on 4 nodes (2 per node), tasks that never wait. Ours on a session
// pool of 2 threads against the same group on 1 thread, in the same run:
// different nodes run in parallel, so 2 threads should take about half the
// time. Target: 1 thread / 2 threads >= 1.8.
#include "common/registry.hpp"
#include "common/taskgroup_helpers.hpp"

#include <taskgroup/taskgroup.hpp>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

namespace {

// Iterations of the arithmetic loop for about 50 ms on this kind of
// machine (an xorshift step per iteration: a chain the compiler cannot
// fold).
constexpr std::int64_t spins = 90'000'000;

taskgroup::task_group group() {
  taskgroup::task_group g;
  for (int i = 0; i < 8; ++i) {
    taskgroup::net n("burn");
    n.lambda("Burn", {}, {}, [](taskgroup::op_context&) -> taskgroup::status {
      std::uint64_t x = 88172645463325252ULL;
      for (std::int64_t k = 0; k < spins; ++k) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
      }
      benchmark::DoNotOptimize(x);
      return taskgroup::ok();
    });
    (void)g.add(taskgroup::task("t" + std::to_string(i), taskgroup::step("burn").add_net(n)),
                taskgroup::node("n" + std::to_string(i % 4)));
  }
  return g;
}

void run_on(benchmark::State& state, std::size_t threads) {
  taskgroup::local_session session(threads);
  const taskgroup::task_group g = group();
  for (auto _ : state) {
    auto r = tgbench::run_sync(session, g);
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
  }
}

const tgbench::add_workload reg{{
    .id = "w4_nodes_parallel",
    .title = "8 tasks of ~50 ms of arithmetic on 4 nodes, local_session(2) against local_session(1)",
    .unit = "ms/run",
    .unit_ns = 1e6,
    .baselines = {"one_thread"},
    .targets = {{tgbench::target_kind::min_inverse, "one_thread", 1.8}},
    .order = 40,
}};

const tgbench::add_contender ours{{
    .workload = "w4_nodes_parallel",
    .name = tgbench::ours,
    .what = "tgbench::run_sync(session, group) on local_session(2)",
    .fn = [](benchmark::State& s) { run_on(s, 2); },
    .iterations = 3,
}};

const tgbench::add_contender one_thread{{
    .workload = "w4_nodes_parallel",
    .name = "one_thread",
    .what = "the same group on local_session(1)",
    .fn = [](benchmark::State& s) { run_on(s, 1); },
    .iterations = 3,
}};

}  // namespace
