// w2_op_dispatch / virtual_loop: the same adds as a loop of virtual calls
// over ops holding pre-resolved int64_t pointers (Caffe2 SimpleNet::Run).
#include "w2_op_dispatch/w2_op_dispatch.hpp"

#include "common/registry.hpp"
#include "common/virtual_ops.hpp"

#include <cstdint>

namespace {

using namespace tgbench::w2;

void run(benchmark::State& state) {
  tgbench::counter c;
  tgbench::vnet net = tgbench::add_chain(c, ops_per_net);
  net.run();  // warm-up
  for (auto _ : state) {
    for (std::size_t r = 0; r < runs_per_iteration; ++r) {
      net.run();
      benchmark::ClobberMemory();
    }
  }
  benchmark::DoNotOptimize(c.acc);
  const auto expected =
      static_cast<std::int64_t>(ops_per_net * (1 + static_cast<std::size_t>(state.iterations()) * runs_per_iteration));
  if (c.acc != expected) state.SkipWithError("w2 virtual_loop: wrong sum");
}

const tgbench::add_contender reg{{
    .workload = "w2_op_dispatch",
    .name = "virtual_loop",
    .what = "loop of virtual run() calls, ops holding int64_t* (built once)",
    .units_per_iteration = static_cast<double>(ops_per_net * runs_per_iteration),
    .fn = run,
}};

}  // namespace
