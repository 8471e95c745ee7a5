// w3_timers / threads: 10,000 std::threads, each sleep_for(1 ms), all
// started, then all joined.
#include "w3_timers/w3_timers.hpp"

#include "common/registry.hpp"

#include <atomic>
#include <thread>
#include <vector>

namespace {

using namespace tgbench::w3;

void run(benchmark::State& state) {
  std::atomic<std::size_t> count{0};
  std::vector<std::thread> threads;
  threads.reserve(tasks);
  auto once = [&](std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      threads.emplace_back([&count] {
        std::this_thread::sleep_for(wait);
        count.fetch_add(1, std::memory_order_relaxed);
      });
    }
    for (auto& t : threads) t.join();
    threads.clear();
  };
  once(100);  // warm-up
  for (auto _ : state) once(tasks);
  if (count.load() != 100 + tasks * static_cast<std::size_t>(state.iterations())) {
    state.SkipWithError("w3 threads: wrong count");
  }
}

const tgbench::add_contender reg{{
    .workload = "w3_timers",
    .name = "threads",
    .what = "10,000 x std::thread running sleep_for(1 ms), then join all",
    .units_per_iteration = 1.0,
    .fn = run,
}};

}  // namespace
