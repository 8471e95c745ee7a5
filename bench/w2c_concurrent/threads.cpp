// w2c_concurrent, w2c_sched / threads: a Caffe2-shaped executor (pytorch
// caffe2/core/plan_executor.cc, ExecuteStepRecursive with
// concurrent_substeps): on every iteration one new std::thread per
// substep; each worker takes a substep index from an atomic counter, runs
// it, bumps a done count under a mutex and notifies a condition variable;
// the parent waits for all, then joins every thread.
#include "w2c_concurrent/w2c_concurrent.hpp"

#include "common/registry.hpp"
#include "common/virtual_ops.hpp"

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace {

using namespace tgbench::w2c;

void run_iteration(std::array<tgbench::vnet, substeps>& nets) {
  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  std::condition_variable cv;
  std::size_t done = 0;
  std::vector<std::thread> threads;
  threads.reserve(substeps);
  for (std::size_t t = 0; t < substeps; ++t) {
    threads.emplace_back([&] {
      const std::size_t idx = next.fetch_add(1) % substeps;
      nets[idx].run();
      {
        std::lock_guard<std::mutex> lock(mutex);
        ++done;
      }
      cv.notify_one();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return done == substeps; });
  }
  for (auto& t : threads) t.join();
}

void run(benchmark::State& state, std::size_t ops) {
  std::array<tgbench::counter, substeps> counters{};
  std::array<tgbench::vnet, substeps> nets;
  for (std::size_t k = 0; k < substeps; ++k) nets[k] = tgbench::add_chain(counters[k], ops);
  auto once = [&] {
    for (std::size_t i = 0; i < iterations; ++i) run_iteration(nets);
  };
  run_iteration(nets);  // warm-up
  for (auto _ : state) once();
  const auto expected =
      static_cast<std::int64_t>(ops * (1 + iterations * static_cast<std::size_t>(state.iterations())));
  for (const auto& c : counters) {
    if (c.acc != expected) state.SkipWithError("w2c threads: wrong sum");
  }
}

const tgbench::add_contender reg{{
    .workload = "w2c_concurrent",
    .name = "threads",
    .what = "Caffe2 plan_executor shape: per iteration a new std::thread per substep, cv barrier, join",
    .units_per_iteration = static_cast<double>(iterations),
    .fn = [](benchmark::State& state) { run(state, ops_per_net); },
}};

const tgbench::add_contender reg_sched{{
    .workload = "w2c_sched",
    .name = "threads",
    .what = "Caffe2 plan_executor shape: per iteration a new std::thread per substep, cv barrier, join",
    .units_per_iteration = static_cast<double>(iterations),
    .fn = [](benchmark::State& state) { run(state, sched_ops_per_net); },
}};

}  // namespace
