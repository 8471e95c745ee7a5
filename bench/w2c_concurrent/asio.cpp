// w2c_concurrent, w2c_sched / asio: the raw Asio floor. Per iteration,
// co_spawn the 4 substeps (each an awaitable<void> running 1,000 or 1
// virtual-call ops) as deferred operations into a ranged parallel_group and
// await wait_for_all(); all on a single-threaded io_context.
#include "w2c_concurrent/w2c_concurrent.hpp"

#include "common/registry.hpp"
#include "common/virtual_ops.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace {

namespace asio = boost::asio;
using namespace tgbench::w2c;

asio::awaitable<void> substep(tgbench::vnet* net) {
  net->run();
  co_return;
}

asio::awaitable<void> loop(std::array<tgbench::vnet, substeps>* nets, std::size_t n) {
  auto ex = co_await asio::this_coro::executor;
  using op_t = decltype(asio::co_spawn(ex, substep(nullptr), asio::deferred));
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<op_t> ops;
    ops.reserve(substeps);
    for (auto& net : *nets) ops.push_back(asio::co_spawn(ex, substep(&net), asio::deferred));
    auto [order, errors] = co_await asio::experimental::make_parallel_group(std::move(ops))
                               .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
    for (const auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
  }
}

void run(benchmark::State& state, std::size_t ops) {
  std::array<tgbench::counter, substeps> counters{};
  std::array<tgbench::vnet, substeps> nets;
  for (std::size_t k = 0; k < substeps; ++k) nets[k] = tgbench::add_chain(counters[k], ops);
  asio::io_context io(1);
  auto once = [&] {
    asio::co_spawn(io, loop(&nets, iterations), asio::detached);
    io.run();
    io.restart();
  };
  once();  // warm-up
  for (auto _ : state) once();
  const auto expected =
      static_cast<std::int64_t>(ops * iterations * (1 + static_cast<std::size_t>(state.iterations())));
  for (const auto& c : counters) {
    if (c.acc != expected) state.SkipWithError("w2c asio: wrong sum");
  }
}

const tgbench::add_contender reg{{
    .workload = "w2c_concurrent",
    .name = "asio",
    .what = "per iteration: 4 x co_spawn(deferred) + ranged make_parallel_group, wait_for_all, use_awaitable",
    .units_per_iteration = static_cast<double>(iterations),
    .fn = [](benchmark::State& state) { run(state, ops_per_net); },
}};

const tgbench::add_contender reg_sched{{
    .workload = "w2c_sched",
    .name = "asio",
    .what = "per iteration: 4 x co_spawn(deferred) + ranged make_parallel_group, wait_for_all, use_awaitable",
    .units_per_iteration = static_cast<double>(iterations),
    .fn = [](benchmark::State& state) { run(state, sched_ops_per_net); },
}};

}  // namespace
