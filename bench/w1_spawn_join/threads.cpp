// w1_spawn_join_{10k,100k} / threads: a std::thread per task. Threads are
// started in waves of at most 1,000 (all started, then all joined), since
// 100,000 live threads exceed this machine's map count.
#include "w1_spawn_join/w1_spawn_join.hpp"

#include "common/registry.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace {

using namespace tgbench::w1;

void run(benchmark::State& state, std::size_t n) {
  std::atomic<std::size_t> count{0};
  std::vector<std::thread> threads;
  threads.reserve(thread_wave);
  auto once = [&](std::size_t total) {
    for (std::size_t done = 0; done < total;) {
      const std::size_t wave = std::min(thread_wave, total - done);
      for (std::size_t i = 0; i < wave; ++i) {
        threads.emplace_back([&count] { count.fetch_add(1, std::memory_order_relaxed); });
      }
      for (auto& t : threads) t.join();
      threads.clear();
      done += wave;
    }
  };
  once(thread_wave);  // warm-up
  for (auto _ : state) once(n);
  if (count.load() != thread_wave + n * static_cast<std::size_t>(state.iterations())) {
    state.SkipWithError("w1 threads: wrong count");
  }
}

const tgbench::add_contender small{{
    .workload = "w1_spawn_join_10k",
    .name = "threads",
    .what = "a std::thread per task (waves of <= 1,000 live threads), join",
    .units_per_iteration = static_cast<double>(small_n),
    .fn = [](benchmark::State& state) { run(state, small_n); },
}};

const tgbench::add_contender large{{
    .workload = "w1_spawn_join_100k",
    .name = "threads",
    .what = "a std::thread per task (waves of <= 1,000 live threads), join",
    .units_per_iteration = static_cast<double>(large_n),
    .fn = [](benchmark::State& state) { run(state, large_n); },
}};

}  // namespace
