// Internal: where a session counts its runs (session_metrics): per group
// label, in shards that the threads ending runs add to without a lock.
// Exported (TASKGROUP_API) only because the MPI library, which links the
// core library's public face, counts its runs in one too; no public header
// declares them.
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/duration_histogram.hpp>
#include <taskgroup/run_report.hpp>
#include <taskgroup/session_metrics.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace taskgroup::detail {

struct run_scope;

/// What one run adds to its label's counts, gathered as it ends.
struct run_tally {
  run_outcome outcome = run_outcome::succeeded;
  /// Admitted (not refused at arrival nor shed from the queue): its
  /// latency and queue wait are counted.
  bool admitted = false;
  std::chrono::nanoseconds latency{0};
  std::chrono::nanoseconds queue_wait{0};
  std::array<std::uint64_t, task_status_count> tasks{};
  duration_histogram task_duration;
  std::uint64_t retried = 0;
};

/// The counts of one group label. Each thread adds to one of `shards`
/// (chosen once per thread), with relaxed atomic adds on cache lines of
/// its own: threads ending runs at once do not share a line unless more
/// threads than shards do. A snapshot adds the shards up.
class TASKGROUP_API metrics_series {
 public:
  static constexpr std::size_t shards = 8;
  explicit metrics_series(std::string label) : label_(std::move(label)) {}

  /// Adds `t`, and the offloads of `scope` (null: none). Thread-safe.
  void add(const run_tally& t, const run_scope* scope) noexcept;
  /// Adds the shards up. Thread-safe (a snapshot, not atomic across its
  /// counts).
  [[nodiscard]] group_metrics read() const;
  [[nodiscard]] const std::string& label() const noexcept { return label_; }

 private:
  struct histogram_cells {
    std::array<std::atomic<std::uint64_t>, duration_histogram::bucket_count> counts{};
    std::atomic<std::int64_t> sum_ns{0};
    void add(const duration_histogram& h) noexcept;
    void add(std::chrono::nanoseconds d) noexcept;
    void read_into(duration_histogram& h) const noexcept;
  };
  struct alignas(64) shard {
    std::array<std::atomic<std::uint64_t>, run_outcome_count> runs{};
    std::array<std::atomic<std::uint64_t>, task_status_count> tasks{};
    std::atomic<std::uint64_t> retried{0};
    std::atomic<std::uint64_t> offloaded{0};
    histogram_cells latency, queue_wait, task_duration, offload_wait;
  };
  std::string label_;
  std::array<shard, shards> shards_;
};

/// A session's metrics: one series per group label, made at the first run
/// of its name, kept for the session's life.
class TASKGROUP_API metrics_book {
 public:
  metrics_book();
  /// The series of the groups named `name` ("" for unnamed ones; the
  /// shared "other" once `session_metrics::max_group_labels` names have
  /// their own). Errors: throws `std::bad_alloc`. Thread-safe (its own
  /// lock: called when a group is compiled, and for a run refused before).
  metrics_series& series_for(const std::string& name);
  /// Every series' counts, in the order they were made. Thread-safe.
  [[nodiscard]] std::vector<group_metrics> read() const;

  /// Whether ended runs are counted (local_session::enable_metrics).
  std::atomic<bool> enabled{true};

 private:
  mutable std::mutex lock_;
  std::deque<metrics_series> series_;  // stable addresses, in order of making
  std::unordered_map<std::string, metrics_series*> by_name_;
  metrics_series* other_ = nullptr;
};

}  // namespace taskgroup::detail
