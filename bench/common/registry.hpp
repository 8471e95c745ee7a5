// taskgroup_bench: the registry of workloads and contenders.
//
// A workload (one folder under bench/) registers its description and its
// targets from `workload.cpp`; each contender (one file per contender:
// ours.cpp, virtual_loop.cpp, asio.cpp, ...) registers a Google Benchmark
// function. The driver (bench/main.cpp) reads the registry, turns every
// contender into a benchmark, collects the medians and checks the targets.
//
// Adding a workload = adding a folder with a workload.cpp and one file per
// contender, and listing the files in bench/meson.build.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tgbench {

/// The name every workload gives to the library's own contender.
inline constexpr const char* ours = "ours";

/// What a target compares. `value` is ours (in the workload's unit) and
/// `other` the named baseline.
enum class target_kind {
  max_value,       ///< ours <= limit
  min_value,       ///< ours >= limit
  max_difference,  ///< ours - other <= limit
  max_ratio,       ///< ours / other <= limit
  min_inverse,     ///< other / ours >= limit
};

struct target {
  target_kind kind;
  std::string baseline;  ///< contender name; empty for max_value
  double limit;
};

struct workload {
  std::string id;        ///< folder-like id, what --filter matches: "w2_op_dispatch"
  std::string title;     ///< one line: what runs
  std::string unit;      ///< "ns/op", "us/iter", ...
  double unit_ns = 1.0;  ///< nanoseconds in one unit (1000 for microseconds)
  /// Baselines in display order (the ratio ours/baseline is printed for each).
  std::vector<std::string> baselines;
  std::vector<target> targets;
  int order = 0;  ///< display order among workloads
  /// When set, the figure is this Google Benchmark user counter (already in
  /// `unit`, e.g. bytes per task), not the real time per iteration; the
  /// driver then ignores `unit_ns` and `units_per_iteration`.
  std::string counter{};
  /// When set, its contenders run one repetition each in turn (A, B, A,
  /// B, ...) in the same process, so that the machine's drift over the
  /// run touches them alike; the figure is still the median of each one's
  /// repetitions. For targets on a small difference between contenders.
  bool alternate = false;
};

struct contender {
  std::string workload;  ///< workload id
  std::string name;      ///< "ours", "virtual_loop", "asio", "tbb", "threads"
  std::string what;      ///< one line: what this contender runs
  /// Workload units (ops, loop iterations) done by one benchmark iteration:
  /// the figure is the time per benchmark iteration divided by this.
  double units_per_iteration = 1.0;
  std::function<void(benchmark::State&)> fn;
  /// Fixed benchmark iterations per repetition (0: as many as the minimum
  /// time needs). For contenders whose one iteration is long or a process.
  std::int64_t iterations = 0;
};

/// A measurement run in a fresh process (`taskgroup_bench --probe NAME`
/// prints what `fn` returns), so that the allocator's cached memory and the
/// peak RSS of earlier benchmarks do not leak into it. See run_probe().
struct probe {
  std::string name;
  std::function<double()> fn;
};

class registry {
 public:
  static registry& get();
  void add(workload w);
  void add(contender c);
  void add(probe p);
  [[nodiscard]] const std::vector<workload>& workloads() const noexcept { return workloads_; }
  [[nodiscard]] const std::vector<contender>& contenders() const noexcept { return contenders_; }
  [[nodiscard]] const probe* find_probe(const std::string& name) const noexcept;

 private:
  std::vector<workload> workloads_;
  std::vector<contender> contenders_;
  std::vector<probe> probes_;
};

/// Static registration helpers: `const tgbench::add_workload reg{{...}};`
struct add_workload {
  explicit add_workload(workload w) { registry::get().add(std::move(w)); }
};
struct add_contender {
  explicit add_contender(contender c) { registry::get().add(std::move(c)); }
};
struct add_probe {
  explicit add_probe(probe p) { registry::get().add(std::move(p)); }
};

/// Runs the registered probe `name` in a child process (this executable,
/// `--probe NAME`) and returns the number it printed; NaN (and `error`
/// set) when the child failed.
double run_probe(const std::string& name, std::string& error);

}  // namespace tgbench
