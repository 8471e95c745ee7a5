// w2c_concurrent, w2c_sched / ours: co_await taskgroup::run_step(step, ws)
// on a single-threaded io_context, where step = concurrent_substeps() over
// 4 substeps (each one net of 1,000 Add ops, or 1 for w2c_sched) with
// iterations(1000).
#include "w2c_concurrent/w2c_concurrent.hpp"

#include "common/registry.hpp"
#include "common/taskgroup_helpers.hpp"

#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace {

using namespace tgbench::w2c;

void run(benchmark::State& state, std::size_t ops) {
  auto ws = taskgroup::workspace::make("w2c");
  ws->set("one", std::int64_t{1});
  std::vector<taskgroup::execution_step> subs;
  for (std::size_t k = 0; k < substeps; ++k) {
    const std::string acc = "acc" + std::to_string(k);
    ws->set(acc, std::int64_t{0});
    subs.push_back(taskgroup::step("sub" + std::to_string(k))
                       .add_net(tgbench::add_chain_net("sub" + std::to_string(k) + "/net", acc, "one", ops)));
  }
  auto top = taskgroup::step("w2c").concurrent_substeps(true).iterations(static_cast<std::int64_t>(iterations));
  top.substeps(std::move(subs));

  boost::asio::io_context io(1);
  if (!tgbench::check(state, tgbench::run_step_on(io, top, ws))) return;  // warm-up, binds the nets

  for (auto _ : state) {
    if (auto st = tgbench::run_step_on(io, top, ws); !st) [[unlikely]] {
      tgbench::check(state, st);
      return;
    }
  }
  const auto expected =
      static_cast<std::int64_t>(ops * iterations * (1 + static_cast<std::size_t>(state.iterations())));
  for (std::size_t k = 0; k < substeps; ++k) {
    if (ws->read<std::int64_t>("acc" + std::to_string(k)).value() != expected) {
      state.SkipWithError("w2c ours: wrong sum");
    }
  }
}

const tgbench::add_contender reg{{
    .workload = "w2c_concurrent",
    .name = tgbench::ours,
    .what = "co_await run_step(step, ws): concurrent_substeps(), 4 substeps, iterations(1000)",
    .units_per_iteration = static_cast<double>(iterations),
    .fn = [](benchmark::State& state) { run(state, ops_per_net); },
}};

const tgbench::add_contender reg_sched{{
    .workload = "w2c_sched",
    .name = tgbench::ours,
    .what = "co_await run_step(step, ws): concurrent_substeps(), 4 substeps of a 1-op net, iterations(1000)",
    .units_per_iteration = static_cast<double>(iterations),
    .fn = [](benchmark::State& state) { run(state, sched_ops_per_net); },
}};

}  // namespace
