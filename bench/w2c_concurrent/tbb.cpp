// w2c_concurrent, w2c_sched / tbb: per iteration, a tbb::task_group runs
// the 4 substeps (1,000 or 1 virtual-call ops each) and waits; oneTBB's
// default arena (one worker per CPU).
#include "w2c_concurrent/w2c_concurrent.hpp"

#include "common/registry.hpp"
#include "common/virtual_ops.hpp"

#include <oneapi/tbb/task_group.h>

#include <array>
#include <cstdint>

namespace {

using namespace tgbench::w2c;

void run(benchmark::State& state, std::size_t ops) {
  std::array<tgbench::counter, substeps> counters{};
  std::array<tgbench::vnet, substeps> nets;
  for (std::size_t k = 0; k < substeps; ++k) nets[k] = tgbench::add_chain(counters[k], ops);
  auto once = [&] {
    for (std::size_t i = 0; i < iterations; ++i) {
      tbb::task_group group;
      for (auto& net : nets) group.run([&net] { net.run(); });
      group.wait();
    }
  };
  once();  // warm-up (starts the workers)
  for (auto _ : state) once();
  const auto expected =
      static_cast<std::int64_t>(ops * iterations * (1 + static_cast<std::size_t>(state.iterations())));
  for (const auto& c : counters) {
    if (c.acc != expected) state.SkipWithError("w2c tbb: wrong sum");
  }
}

const tgbench::add_contender reg{{
    .workload = "w2c_concurrent",
    .name = "tbb",
    .what = "per iteration: tbb::task_group, run() x 4, wait() (default arena)",
    .units_per_iteration = static_cast<double>(iterations),
    .fn = [](benchmark::State& state) { run(state, ops_per_net); },
}};

const tgbench::add_contender reg_sched{{
    .workload = "w2c_sched",
    .name = "tbb",
    .what = "per iteration: tbb::task_group, run() x 4, wait() (default arena)",
    .units_per_iteration = static_cast<double>(iterations),
    .fn = [](benchmark::State& state) { run(state, sched_ops_per_net); },
}};

}  // namespace
