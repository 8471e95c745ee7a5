// Workload 8: serving. Shared by the contenders: the shape of
// the served group (16 tasks on 4 nodes, as examples/06_http_server.cpp),
// the arithmetic each task does, what each run is fed and must return, a
// countdown the benchmark thread waits on while a batch of runs is in
// flight, and the process CPU clock the figure is taken with.
#pragma once

#include <time.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace tgbench::w8 {

inline constexpr int tasks = 16;
inline constexpr int nodes = 4;
/// Runs started at once per benchmark iteration (all in flight together).
inline constexpr std::size_t runs_in_flight = 64;
/// Sequential empty runs per benchmark iteration of w8_empty_run.
inline constexpr std::size_t empty_runs = 100;

/// The input fed to node `node` for the run numbered `seq`: distinct for
/// the 64 runs of a batch, and the same total work in every batch.
inline std::int64_t fed_n(std::uint64_t seq, int node) {
  return 32 + static_cast<std::int64_t>(seq % runs_in_flight) + node;
}

/// What task k computes from its node's input (the HTTP example's Sum):
/// the sum of i * (k + 1) for i = 1..n.
inline std::int64_t task_sum(std::int64_t n, int k) {
  std::int64_t s = 0;
  for (std::int64_t i = 1; i <= n; ++i) s += i * (k + 1);
  return s;
}

/// The value task k of run `seq` must return, in closed form (so that a
/// contender cannot pass by computing the wrong sum the same way).
inline std::int64_t expected(std::uint64_t seq, int k) {
  const std::int64_t n = fed_n(seq, k % nodes);
  return (k + 1) * n * (n + 1) / 2;
}

/// A countdown of the runs of one batch, completed from the pool's threads.
class countdown {
 public:
  void arm(std::size_t n) {
    std::lock_guard lock(mutex_);
    left_ = n;
  }
  void done() {
    std::lock_guard lock(mutex_);
    if (--left_ == 0) cv_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return left_ == 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::size_t left_ = 0;
};

/// CPU time of the whole process (every thread), in microseconds.
inline double process_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

/// The counter w8_serve's figure is read from: process CPU µs per run.
inline constexpr const char* cpu_counter = "cpu_us_per_run";

}  // namespace tgbench::w8
