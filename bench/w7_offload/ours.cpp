// Workload 7o, ours: the offloaded group, the heartbeat beside it, the
// trivial offloaded op.
#include "w7_offload/w7_offload.hpp"

#include "common/registry.hpp"
#include "common/taskgroup_helpers.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

namespace asio = boost::asio;

namespace {

// The group on local_session(1) with a compute pool of `threads`.
void parallel_on(benchmark::State& state, std::size_t threads) {
  asio::thread_pool compute(threads);
  taskgroup::local_session session(1);
  session.set_compute_executor(compute.get_executor());
  const taskgroup::task_group g = w7_offload::burn_group(false, 1);
  for (auto _ : state) {
    taskgroup::run_options o;
    o.feeds = w7_offload::burn_feeds(1);
    auto r = tgbench::run_sync(session, g, std::move(o));
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
  }
}

// A 1 ms heartbeat on `io` until `done`, its lateness (ms) per beat.
asio::awaitable<void> beat(std::atomic<bool>& done, std::vector<double>& late) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  while (!done.load()) {
    const auto due = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
    t.expires_at(due);
    co_await t.async_wait(asio::use_awaitable);
    late.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - due).count());
  }
}

}  // namespace

namespace w7_offload {

// The group on a session over `io` (2 threads) with the heartbeat beside
// it; the p99 lateness over every beat of every iteration.
void heartbeat_with(benchmark::State& state, bool on_strand) {
  asio::io_context io(2);
  auto guard = asio::make_work_guard(io);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) threads.emplace_back([&io] { io.run(); });
  taskgroup::local_session session(io.get_executor());  // the default compute executor
  const taskgroup::task_group g = burn_group(on_strand, 2);
  std::vector<double> late;
  for (auto _ : state) {
    std::atomic<bool> done{false};
    std::vector<double> these;
    std::promise<void> ended;
    asio::co_spawn(io, beat(done, these), [&ended](std::exception_ptr) { ended.set_value(); });
    taskgroup::run_options o;
    o.feeds = burn_feeds(2);
    auto r = tgbench::run_sync(session, g, std::move(o));
    done = true;
    ended.get_future().wait();
    if (!r) {
      state.SkipWithError(r.error().message.c_str());
      break;
    }
    late.insert(late.end(), these.begin(), these.end());
  }
  guard.reset();
  for (auto& t : threads) t.join();
  if (late.empty()) return;
  std::sort(late.begin(), late.end());
  state.counters["p99_late_ms"] = late[std::min(late.size() - 1, late.size() * 99 / 100)];
}

}  // namespace w7_offload

namespace {

const tgbench::add_contender parallel_ours{{
    .workload = "w7_offload_parallel",
    .name = tgbench::ours,
    .what = "local_session(1), set_compute_executor(thread_pool(2))",
    .fn = [](benchmark::State& s) { parallel_on(s, 2); },
    .iterations = 3,
}};

const tgbench::add_contender parallel_one{{
    .workload = "w7_offload_parallel",
    .name = "one_thread",
    .what = "the same with thread_pool(1)",
    .fn = [](benchmark::State& s) { parallel_on(s, 1); },
    .iterations = 3,
}};

const tgbench::add_contender heartbeat_ours{{
    .workload = "w7_offload_heartbeat",
    .name = tgbench::ours,
    .what = "Hash offloaded to the default compute executor (one thread per core, nice +10), heartbeat on the "
            "session's io_context (2 threads)",
    .fn = [](benchmark::State& s) { w7_offload::heartbeat_with(s, false); },
    .iterations = 3,
}};

const tgbench::add_contender heartbeat_strand{{
    .workload = "w7_offload_heartbeat",
    .name = "on_strand",
    .what = "the same loop as a synchronous op on the node strand",
    .fn = [](benchmark::State& s) { w7_offload::heartbeat_with(s, true); },
    .iterations = 3,
}};

constexpr std::int64_t trivial_runs = 1000;

const tgbench::add_contender op_ours{{
    .workload = "w7_offload_op",
    .name = tgbench::ours,
    .what = "an offloaded ConstantFill in a loop step, local_session(1), compute thread_pool(1)",
    .units_per_iteration = static_cast<double>(trivial_runs),
    .fn =
        [](benchmark::State& state) {
          asio::thread_pool compute(1);
          taskgroup::local_session session(1);
          session.set_compute_executor(compute.get_executor());
          const taskgroup::task_group g = w7_offload::trivial_group(trivial_runs);
          for (auto _ : state) {
            auto r = tgbench::run_sync(session, g);
            if (!r) {
              state.SkipWithError(r.error().message.c_str());
              return;
            }
          }
        },
}};

}  // namespace
