// Workload 1m: a contender that runs a memory probe in a child process.
#pragma once

#include "common/registry.hpp"

#include <cmath>
#include <string>

namespace tgbench::w1m {

inline constexpr double long_wait_ms = 3'600'000;  // 1 h: never expires during a probe

/// The Google Benchmark body of a memory contender: one probe process per
/// benchmark iteration, its figure reported as the `bytes_per_task` counter.
inline void run_probe_benchmark(benchmark::State& state, const std::string& probe) {
  double sum = 0;
  for (auto _ : state) {
    std::string error;
    const double v = run_probe(probe, error);
    if (std::isnan(v)) {
      state.SkipWithError(error.c_str());
      return;
    }
    sum += v;
  }
  state.counters["bytes_per_task"] = benchmark::Counter(sum, benchmark::Counter::kAvgIterations);
}

}  // namespace tgbench::w1m
