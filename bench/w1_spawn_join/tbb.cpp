// w1_spawn_join_{10k,100k} / tbb: a tbb::task_group, run() x N trivial
// tasks, wait() (default arena: one worker per CPU).
#include "w1_spawn_join/w1_spawn_join.hpp"

#include "common/registry.hpp"

#include <oneapi/tbb/task_group.h>

#include <atomic>
#include <cstdint>

namespace {

using namespace tgbench::w1;

void run(benchmark::State& state, std::size_t n) {
  std::atomic<std::size_t> count{0};
  auto once = [&] {
    tbb::task_group group;
    for (std::size_t i = 0; i < n; ++i) group.run([&count] { count.fetch_add(1, std::memory_order_relaxed); });
    group.wait();
  };
  once();  // warm-up (starts the workers)
  for (auto _ : state) once();
  if (count.load() != n * (1 + static_cast<std::size_t>(state.iterations()))) {
    state.SkipWithError("w1 tbb: wrong count");
  }
}

const tgbench::add_contender small{{
    .workload = "w1_spawn_join_10k",
    .name = "tbb",
    .what = "tbb::task_group, run() x 10,000, wait() (default arena)",
    .units_per_iteration = static_cast<double>(small_n),
    .fn = [](benchmark::State& state) { run(state, small_n); },
}};

const tgbench::add_contender large{{
    .workload = "w1_spawn_join_100k",
    .name = "tbb",
    .what = "tbb::task_group, run() x 100,000, wait() (default arena)",
    .units_per_iteration = static_cast<double>(large_n),
    .fn = [](benchmark::State& state) { run(state, large_n); },
}};

}  // namespace
