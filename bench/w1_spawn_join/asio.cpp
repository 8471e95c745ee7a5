// w1_spawn_join_{10k,100k} / asio: the raw Asio floor. N x co_spawn(ex,
// trivial awaitable<void>, deferred) into a ranged
// experimental::make_parallel_group, async_wait(wait_for_all(),
// use_awaitable), awaited from a coroutine on a 1-thread io_context.
#include "w1_spawn_join/w1_spawn_join.hpp"

#include "common/registry.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdint>
#include <exception>
#include <vector>

namespace {

namespace asio = boost::asio;
using namespace tgbench::w1;

asio::awaitable<void> trivial(std::size_t* count) {
  ++*count;
  co_return;
}

asio::awaitable<void> spawn_join(std::size_t n, std::size_t* count) {
  auto ex = co_await asio::this_coro::executor;
  using op_t = decltype(asio::co_spawn(ex, trivial(nullptr), asio::deferred));
  std::vector<op_t> ops;
  ops.reserve(n);
  for (std::size_t i = 0; i < n; ++i) ops.push_back(asio::co_spawn(ex, trivial(count), asio::deferred));
  auto [order, errors] = co_await asio::experimental::make_parallel_group(std::move(ops))
                             .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

void run(benchmark::State& state, std::size_t n) {
  asio::io_context io(1);
  std::size_t count = 0;
  auto once = [&] {
    asio::co_spawn(io, spawn_join(n, &count), asio::detached);
    io.run();
    io.restart();
  };
  once();  // warm-up
  for (auto _ : state) once();
  if (count != n * (1 + static_cast<std::size_t>(state.iterations()))) state.SkipWithError("w1 asio: wrong count");
}

const tgbench::add_contender small{{
    .workload = "w1_spawn_join_10k",
    .name = "asio",
    .what = "10,000 x co_spawn(deferred) + ranged make_parallel_group, wait_for_all, use_awaitable",
    .units_per_iteration = static_cast<double>(small_n),
    .fn = [](benchmark::State& state) { run(state, small_n); },
}};

const tgbench::add_contender large{{
    .workload = "w1_spawn_join_100k",
    .name = "asio",
    .what = "100,000 x co_spawn(deferred) + ranged make_parallel_group, wait_for_all, use_awaitable",
    .units_per_iteration = static_cast<double>(large_n),
    .fn = [](benchmark::State& state) { run(state, large_n); },
}};

}  // namespace
