// taskgroup: what a session has counted of its runs (`local_session::
// metrics`, `mpi_session::metrics`), and its renderings for a scraper:
// Prometheus' text exposition format and JSON (docs/observing.md).
//
// Threading: value types and reentrant functions.
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/duration_histogram.hpp>
#include <taskgroup/run_report.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace taskgroup {

/// How a run ended, as the metrics count it: by the code of its
/// `run_report::failure`.
enum class run_outcome : std::uint8_t {
  succeeded,   ///< no failure
  failed,      ///< any other code (a task's failure, invalid group or feeds, a closed session)
  cancelled,   ///< `errc::cancelled`
  timed_out,   ///< `errc::timeout` (the run's deadline, or under `run_policy::join` a step's timeout)
  overloaded,  ///< `errc::overloaded`: shed by admission (session_limits), no task ran
};
inline constexpr std::size_t run_outcome_count = 5;

/// `succeeded`, `failed`, `cancelled`, `timed_out`, `overloaded`: the
/// `outcome` label's values.
TASKGROUP_API std::string_view to_string(run_outcome o) noexcept;
/// The outcome of a run that ended with `report`.
TASKGROUP_API run_outcome outcome_of(const run_report& report) noexcept;

inline constexpr std::size_t task_status_count = 4;

/// The counts of the runs of one group label (see session_metrics).
struct TASKGROUP_API group_metrics {
  /// The label: the group's name (`task_group::name`), `""` for unnamed
  /// groups, `"other"` for names past the first `max_group_labels`.
  std::string group;
  /// Runs ended, by `run_outcome` (index: the enum's value).
  std::array<std::uint64_t, run_outcome_count> runs{};
  /// Tasks of the ended runs, by `task_status` (index: the enum's value;
  /// a run refused before it started counts each task `not_run`).
  std::array<std::uint64_t, task_status_count> tasks{};
  /// Attempts that ran again after a failed one: tasks' (`task::retry`)
  /// and steps' (`execution_step::retry`).
  std::uint64_t attempts_retried = 0;
  /// Ops that ran offloaded on the compute executor
  /// (`operator_schema::offload`).
  std::uint64_t offloaded_ops = 0;
  /// Runs admitted (not refused at arrival, nor shed from the queue), from
  /// their arrival (`async_run`) to their completion.
  duration_histogram run_latency;
  /// The same runs' wait for admission: 0 for a run admitted at once.
  duration_histogram queue_wait;
  /// Tasks that began, from their start to their end (all attempts).
  duration_histogram task_duration;
  /// Offloaded ops, from their hand-off to the compute executor to the
  /// start of their kernel there.
  duration_histogram offload_wait;

  [[nodiscard]] std::uint64_t runs_of(run_outcome o) const noexcept { return runs[static_cast<std::size_t>(o)]; }
  [[nodiscard]] std::uint64_t tasks_of(task_status s) const noexcept { return tasks[static_cast<std::size_t>(s)]; }
  /// Every run ended, whatever its outcome.
  [[nodiscard]] std::uint64_t runs_ended() const noexcept;

  friend bool operator==(const group_metrics&, const group_metrics&) = default;
};

/// A snapshot of a session's metrics: counters and histograms since the
/// session was made, per group label, and the gauges of now. Counting is
/// per run: a run's counts, its tasks' included, are added when it ends
/// (a run in flight is in the gauges only).
struct TASKGROUP_API session_metrics {
  /// At most this many group names get a label of their own (the unnamed
  /// groups' `""` aside); the runs of later names count under `"other"`,
  /// so that naming groups per request cannot grow the set without bound.
  static constexpr std::size_t max_group_labels = 256;

  /// One entry per label that has counted a run, in the order of their
  /// first run.
  std::vector<group_metrics> groups;
  /// Runs admitted and not ended, now.
  std::uint64_t runs_in_flight = 0;
  /// Runs waiting for admission, now.
  std::uint64_t runs_queued = 0;
  /// Whether the session counts (`local_session::enable_metrics`).
  bool enabled = true;
  /// The MPI rank whose counts these are (`mpi_session::metrics`): labels
  /// every series `rank="<r>"` in `to_prometheus`. Unset for a local
  /// session.
  std::optional<int> rank;

  /// The entry of `label`, or null.
  [[nodiscard]] const group_metrics* find(std::string_view label) const noexcept;
  /// Every label's counts added up (its label empty).
  [[nodiscard]] group_metrics total() const;

  friend bool operator==(const session_metrics&, const session_metrics&) = default;
};

/// `m` in Prometheus' text exposition format, version 0.0.4 (the
/// `Content-Type` is `text/plain; version=0.0.4`): for each metric a
/// `# HELP` and a `# TYPE` line, then its samples. Every name begins with
/// `taskgroup_`; durations are in seconds. Counters (`_total`):
/// `runs_total{group,outcome}`, `tasks_total{group,outcome}` (outcome one
/// of `succeeded`, `failed`, `cancelled`, `not_run`),
/// `attempts_retried_total{group}`, `offloaded_ops_total{group}`; gauges
/// `runs_in_flight`, `runs_queued`; histograms (`_bucket{le}`, `_sum`,
/// `_count`) `run_latency_seconds{group}`, `queue_wait_seconds{group}`,
/// `task_duration_seconds{group}`, `offload_wait_seconds{group}`. Label
/// values are escaped (`\\`, `\"`, `\n`). With `m.rank` set, every sample
/// also carries `rank="<r>"`. Errors: throws `std::bad_alloc`.
TASKGROUP_API std::string to_prometheus(const session_metrics& m);

/// `m` as a JSON object: `{"enabled", "runs_in_flight", "runs_queued",
/// ["rank",] "groups": [{"group", "runs": {outcome: n}, "tasks": {status:
/// n}, "attempts_retried", "offloaded_ops", "run_latency": {"count",
/// "sum_seconds", "buckets": [{"le_seconds", "count"}]}, ...}]}` (bucket
/// counts not cumulative; the last bucket's `le_seconds` is `"+Inf"`).
/// Errors: throws `std::bad_alloc`.
TASKGROUP_API std::string to_json(const session_metrics& m);

}  // namespace taskgroup
