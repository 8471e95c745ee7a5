// w1_memory / asio: 100,000 x co_spawn(deferred) of an awaitable<void>
// waiting on its own 1 h steady_timer, into a ranged parallel_group
// (wait_for_all) awaited from a coroutine on a 1-thread io_context; polled
// until every coroutine waits; the figure is the peak RSS growth from just
// before the parent coroutine was spawned, divided by 100,000. The wait is
// then cancelled through the parent's cancellation slot.
#include "w1_memory/probe.hpp"
#include "w1_spawn_join/w1_spawn_join.hpp"

#include "common/memory.hpp"
#include "common/registry.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <limits>
#include <vector>

namespace {

namespace asio = boost::asio;
using tgbench::w1::memory_n;

asio::awaitable<void> sleeper() {
  asio::steady_timer timer(co_await asio::this_coro::executor,
                           std::chrono::milliseconds(static_cast<long>(tgbench::w1m::long_wait_ms)));
  co_await timer.async_wait(asio::use_awaitable);
}

asio::awaitable<void> spawn_join() {
  auto ex = co_await asio::this_coro::executor;
  using op_t = decltype(asio::co_spawn(ex, sleeper(), asio::deferred));
  std::vector<op_t> ops;
  ops.reserve(memory_n);
  for (std::size_t i = 0; i < memory_n; ++i) ops.push_back(asio::co_spawn(ex, sleeper(), asio::deferred));
  co_await asio::experimental::make_parallel_group(std::move(ops))
      .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
}

double probe() {
  asio::io_context io(1);
  asio::cancellation_signal cancel;
  bool done = false;
  const tgbench::rss_meter meter;
  asio::co_spawn(io, spawn_join(),
                 asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr) { done = true; }));
  while (io.poll() > 0) {
  }
  const double per_task = meter.growth() / static_cast<double>(memory_n);
  if (done) {
    std::printf("the wait ended before it was cancelled\n");
    return std::numeric_limits<double>::quiet_NaN();
  }
  cancel.emit(asio::cancellation_type::terminal);
  io.run();
  return per_task;
}

const tgbench::add_probe reg_probe{{.name = "w1_memory/asio", .fn = probe}};

const tgbench::add_contender reg{{
    .workload = "w1_memory",
    .name = "asio",
    .what = "100,000 x co_spawn(deferred) of a 1 h steady_timer wait + ranged parallel_group, polled until all wait",
    .fn = [](benchmark::State& state) { tgbench::w1m::run_probe_benchmark(state, "w1_memory/asio"); },
    .iterations = 1,
}};

}  // namespace
