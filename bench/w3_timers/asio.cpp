// w3_timers / asio: 10,000 x co_spawn(deferred) of an awaitable<void> that
// waits on its own 1 ms steady_timer, into a ranged
// experimental::make_parallel_group, wait_for_all, awaited from a coroutine
// on a 1-thread io_context.
#include "w3_timers/w3_timers.hpp"

#include "common/registry.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <exception>
#include <vector>

namespace {

namespace asio = boost::asio;
using namespace tgbench::w3;

asio::awaitable<void> sleeper(std::size_t* count) {
  asio::steady_timer timer(co_await asio::this_coro::executor, wait);
  co_await timer.async_wait(asio::use_awaitable);
  ++*count;
}

asio::awaitable<void> spawn_join(std::size_t* count) {
  auto ex = co_await asio::this_coro::executor;
  using op_t = decltype(asio::co_spawn(ex, sleeper(nullptr), asio::deferred));
  std::vector<op_t> ops;
  ops.reserve(tasks);
  for (std::size_t i = 0; i < tasks; ++i) ops.push_back(asio::co_spawn(ex, sleeper(count), asio::deferred));
  auto [order, errors] = co_await asio::experimental::make_parallel_group(std::move(ops))
                             .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

void run(benchmark::State& state) {
  asio::io_context io(1);
  std::size_t count = 0;
  auto once = [&] {
    asio::co_spawn(io, spawn_join(&count), asio::detached);
    io.run();
    io.restart();
  };
  once();  // warm-up
  for (auto _ : state) once();
  if (count != tasks * (1 + static_cast<std::size_t>(state.iterations()))) state.SkipWithError("w3 asio: wrong count");
}

const tgbench::add_contender reg{{
    .workload = "w3_timers",
    .name = "asio",
    .what = "10,000 x co_spawn(deferred) of a 1 ms steady_timer wait + ranged parallel_group, wait_for_all",
    .units_per_iteration = 1.0,
    .fn = run,
}};

}  // namespace
