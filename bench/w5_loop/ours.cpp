// w5_loop / ours: co_await taskgroup::run_step(step, ws) of a loop step on a
// single-threaded io_context; the counted form and the stop-blob form.
#include "w5_loop/w5_loop.hpp"

#include "common/registry.hpp"
#include "common/taskgroup_helpers.hpp"

#include <boost/asio/io_context.hpp>

#include <cstdint>

namespace {

using tgbench::w5::iterations;

void counted(benchmark::State& state) {
  auto ws = taskgroup::workspace::make("w5");
  ws->set("one", std::int64_t{1});
  ws->set("acc", std::int64_t{0});
  auto loop = taskgroup::step("w5").iterations(iterations).add_net(tgbench::add_chain_net("w5/body", "acc", "one", 1));
  boost::asio::io_context io(1);
  if (!tgbench::check(state, tgbench::run_step_on(io, loop, ws))) return;  // warm-up, binds the net
  for (auto _ : state) {
    if (auto st = tgbench::run_step_on(io, loop, ws); !st) [[unlikely]] {
      tgbench::check(state, st);
      return;
    }
  }
  if (ws->read<std::int64_t>("acc").value() != iterations * (1 + state.iterations())) {
    state.SkipWithError("w5 ours: wrong count");
  }
}

void stop_blob(benchmark::State& state) {
  auto ws = taskgroup::workspace::make("w5s");
  ws->set("one", std::int64_t{1});
  ws->set("iter", std::int64_t{0});
  ws->set("limit", iterations);
  ws->set("stop", false);
  taskgroup::net cond("w5s/cond");
  cond.op("GE", {"iter", "limit"}, {"stop"});
  taskgroup::net body("w5s/body");
  body.op("Add", {"iter", "one"}, {"iter"});
  auto loop = taskgroup::step("w5s").should_stop_blob("stop").nets({cond, body});
  boost::asio::io_context io(1);
  auto once = [&] {
    // `set` assigns in place: the bound kernels keep their blobs.
    ws->set("iter", std::int64_t{0});
    ws->set("stop", false);
    return tgbench::run_step_on(io, loop, ws);
  };
  if (!tgbench::check(state, once())) return;  // warm-up, binds the nets
  for (auto _ : state) {
    if (auto st = once(); !st) [[unlikely]] {
      tgbench::check(state, st);
      return;
    }
  }
  if (ws->read<std::int64_t>("iter").value() != iterations) state.SkipWithError("w5 stop ours: wrong count");
}

const tgbench::add_contender reg_counted{{
    .workload = "w5_loop",
    .name = tgbench::ours,
    .what = "co_await run_step(step(...).iterations(1000000).add_net(Add), ws)",
    .units_per_iteration = static_cast<double>(iterations),
    .fn = counted,
}};

const tgbench::add_contender reg_stop{{
    .workload = "w5_loop_stop",
    .name = tgbench::ours,
    .what = "co_await run_step(step(...).should_stop_blob(\"stop\").nets({GE, Add}), ws)",
    .units_per_iteration = static_cast<double>(iterations),
    .fn = stop_blob,
}};

}  // namespace
