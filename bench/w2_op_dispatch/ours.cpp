// w2_op_dispatch / ours: taskgroup::net_instance::run_sync() of a bound net.
#include "w2_op_dispatch/w2_op_dispatch.hpp"

#include "common/registry.hpp"
#include "common/taskgroup_helpers.hpp"

#include <cstdint>

namespace {

using namespace tgbench::w2;

void run(benchmark::State& state) {
  auto ws = taskgroup::workspace::make("w2");
  ws->set("one", std::int64_t{1});
  ws->set("acc", std::int64_t{0});
  auto bound = ws->create_net(tgbench::add_chain_net("w2/net", "acc", "one", ops_per_net));
  if (!bound) {
    state.SkipWithError(bound.error().message.c_str());
    return;
  }
  taskgroup::net_instance* net = bound.value();
  const std::int64_t* acc = ws->get<std::int64_t>("acc").value();
  if (!tgbench::check(state, net->run_sync())) return;  // warm-up

  for (auto _ : state) {
    for (std::size_t r = 0; r < runs_per_iteration; ++r) {
      if (auto st = net->run_sync(); !st) [[unlikely]] {
        tgbench::check(state, st);
        return;
      }
    }
  }
  const auto expected =
      static_cast<std::int64_t>(ops_per_net * (1 + static_cast<std::size_t>(state.iterations()) * runs_per_iteration));
  if (*acc != expected) state.SkipWithError("w2 ours: wrong sum");
}

const tgbench::add_contender reg{{
    .workload = "w2_op_dispatch",
    .name = tgbench::ours,
    .what = "taskgroup net_instance::run_sync() of the bound net (built-in Add kernels)",
    .units_per_iteration = static_cast<double>(ops_per_net * runs_per_iteration),
    .fn = run,
}};

}  // namespace
