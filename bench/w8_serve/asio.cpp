// w8_serve / asio and w8_empty_run / asio: the same work hand-written in
// plain Asio.
//
// w8_serve: an asio::thread_pool of 2 threads and 4 strands over it (one
// per node), shared by every run. A run is a coroutine co_spawned on the
// pool with its own state (the 4 fed values and the 16 results, its
// "workspaces"); it co_spawns the 16 task coroutines (task k on strand
// k % 4, computing the same sum into its result) into a ranged
// experimental::make_parallel_group and awaits wait_for_all. One benchmark
// iteration = 64 such runs started at once, the benchmark thread waiting
// until all completed, then every result compared with the expected value.
//
// w8_empty_run (informational): on a 1-thread io_context, a coroutine
// awaiting 100 times `co_spawn(strand, empty coroutine, use_awaitable)`,
// one after another: one hop to a node's strand and back per run.
#include "w8_serve/w8_serve.hpp"

#include "common/registry.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

namespace {

namespace asio = boost::asio;
using i64 = std::int64_t;
using namespace tgbench::w8;
using strand_t = asio::strand<asio::thread_pool::executor_type>;

struct run_state {
  std::array<i64, nodes> n{};       // the run's feeds, one per node
  std::array<i64, tasks> values{};  // the run's outputs
  std::exception_ptr error;
};

asio::awaitable<void> task_body(run_state* s, int k) {
  s->values[static_cast<std::size_t>(k)] = task_sum(s->n[static_cast<std::size_t>(k % nodes)], k);
  co_return;
}

asio::awaitable<void> one_run(std::array<strand_t, nodes>* strands, run_state* s) {
  using op_t = decltype(asio::co_spawn((*strands)[0], task_body(s, 0), asio::deferred));
  std::vector<op_t> ops;
  ops.reserve(tasks);
  for (int k = 0; k < tasks; ++k) {
    ops.push_back(asio::co_spawn((*strands)[static_cast<std::size_t>(k % nodes)], task_body(s, k), asio::deferred));
  }
  auto [order, errors] = co_await asio::experimental::make_parallel_group(std::move(ops))
                             .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

bool batch(benchmark::State& state, asio::thread_pool& pool, std::array<strand_t, nodes>& strands, std::uint64_t seq) {
  std::vector<run_state> runs(runs_in_flight);
  countdown left;
  left.arm(runs_in_flight);
  for (std::size_t r = 0; r < runs_in_flight; ++r) {
    for (int j = 0; j < nodes; ++j) runs[r].n[static_cast<std::size_t>(j)] = fed_n(seq + r, j);
    asio::co_spawn(pool, one_run(&strands, &runs[r]), [&runs, &left, r](std::exception_ptr e) {
      runs[r].error = e;
      left.done();
    });
  }
  left.wait();
  for (std::size_t r = 0; r < runs_in_flight; ++r) {
    if (runs[r].error) [[unlikely]] {
      state.SkipWithError(("w8_serve asio: run " + std::to_string(r) + " threw").c_str());
      return false;
    }
    for (int k = 0; k < tasks; ++k) {
      const i64 got = runs[r].values[static_cast<std::size_t>(k)];
      const i64 want = expected(seq + r, k);
      if (got != want) [[unlikely]] {
        state.SkipWithError(("w8_serve asio: run " + std::to_string(r) + " task t" + std::to_string(k) + ": expected " +
                             std::to_string(want) + ", got " + std::to_string(got))
                                .c_str());
        return false;
      }
    }
  }
  return true;
}

void serve(benchmark::State& state) {
  asio::thread_pool pool(2);
  std::array<strand_t, nodes> strands{asio::make_strand(pool.get_executor()), asio::make_strand(pool.get_executor()),
                                      asio::make_strand(pool.get_executor()), asio::make_strand(pool.get_executor())};
  std::uint64_t seq = 0;
  if (!batch(state, pool, strands, seq)) return;  // warm-up
  seq += runs_in_flight;
  const double cpu_start = process_cpu_us();
  for (auto _ : state) {
    if (!batch(state, pool, strands, seq)) return;
    seq += runs_in_flight;
  }
  const double runs = static_cast<double>(state.iterations()) * static_cast<double>(runs_in_flight);
  state.counters[cpu_counter] = (process_cpu_us() - cpu_start) / runs;
  pool.join();
}

asio::awaitable<void> empty_task(std::size_t* count) {
  ++*count;
  co_return;
}

asio::awaitable<void> sequence(asio::strand<asio::io_context::executor_type> node, std::size_t* count) {
  for (std::size_t i = 0; i < empty_runs; ++i) co_await asio::co_spawn(node, empty_task(count), asio::use_awaitable);
}

void empty_run(benchmark::State& state) {
  asio::io_context io(1);
  auto node = asio::make_strand(io.get_executor());
  std::size_t count = 0;
  auto once = [&] {
    asio::co_spawn(io, sequence(node, &count), asio::detached);
    io.run();
    io.restart();
  };
  once();  // warm-up
  for (auto _ : state) once();
  if (count != empty_runs * (1 + static_cast<std::size_t>(state.iterations()))) {
    state.SkipWithError("w8_empty_run asio: wrong count");
  }
}

const tgbench::add_contender serve_reg{{
    .workload = "w8_serve",
    .name = "asio",
    .what = "64 runs in flight on thread_pool(2), each 16 co_spawns on 4 strands + ranged parallel group",
    .fn = serve,
}};

const tgbench::add_contender empty_reg{{
    .workload = "w8_empty_run",
    .name = "asio",
    .what = "co_await co_spawn(strand, empty coroutine, use_awaitable) x 100 on a 1-thread io_context",
    .units_per_iteration = static_cast<double>(empty_runs),
    .fn = empty_run,
}};

}  // namespace
