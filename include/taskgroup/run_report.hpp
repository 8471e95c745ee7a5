// taskgroup: what a run of a task group reports.
//
// Threading: value types (reentrant).
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/blob.hpp>
#include <taskgroup/error.hpp>
#include <taskgroup/trace_context.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace taskgroup {

class task_group;

/// How a task ended.
enum class task_status { succeeded, failed, cancelled, not_run };

/// `succeeded`, `failed`, `cancelled`, `not run`.
TASKGROUP_API std::string_view to_string(task_status s) noexcept;

/// One task's part of a run.
struct TASKGROUP_API task_report {
  std::string name;  ///< full name `<node>/<task>`
  std::string node;
  task_status status = task_status::not_run;
  std::optional<error> failure;  ///< set when failed or cancelled
  std::chrono::system_clock::time_point started{};
  std::chrono::system_clock::time_point finished{};
  /// Iterations run by the task's own step (summed over instances); 0
  /// for a step with neither nets nor substeps, which is dropped as Caffe2
  /// drops empty steps (the observer then sees the task's empty stand-in
  /// step, named after the task, end after its one iteration).
  std::uint64_t iterations = 0;
  /// Whether the task began: false for a task not run and for one
  /// cancelled before it began (its `failure` is then "<step>: cancelled").
  bool began = false;
  /// Attempts of the task's work that ran (`task::retry`): 0 for a task
  /// not run or cancelled before it began, else 1 + its retries. What its
  /// failed attempts said: `run_report::attempt_failures`.
  int attempts = 0;
  /// Declared outputs after the run: blob name and a copy of its value
  /// (this run's own: never shared with another run; an output named as a
  /// blob that its node keeps is that shared blob, copied when the run's
  /// part on the node ended).
  std::vector<std::pair<std::string, std::shared_ptr<const blob>>> outputs;
  /// Declared outputs of a task that succeeded but could not be fetched:
  /// blob name and why (e.g. "blob "x" has no value in node "n1"").
  std::vector<std::pair<std::string, error>> output_errors;

  [[nodiscard]] std::chrono::nanoseconds duration() const noexcept { return finished - started; }
};

/// The failed attempts of one task that retried (`run_report::retries`).
struct TASKGROUP_API task_retries {
  std::size_t task = 0;  ///< its index in `run_report::tasks`
  /// What each failed attempt that was followed by a wait to retry said,
  /// in order: the first and the latest 4 (the ones between are dropped).
  /// An attempt that was not retried ends the task: its failure is the
  /// task's `failure`.
  std::vector<error> failures;
};

/// The report of one run of a task group.
struct TASKGROUP_API run_report {
  std::vector<task_report> tasks;  ///< in the group's task order
  /// When the session took the run (`async_run` or `run` called).
  /// `started - arrived` is the run's wait before it began: for admission
  /// (`session_limits`) and for the session's coordinator, which under
  /// load serves the runs' nodes too. An `mpi_session` run and a report
  /// made otherwise: `started`.
  std::chrono::system_clock::time_point arrived{};
  /// When the run began (its group checked, its nodes about to start) and
  /// when it ended.
  std::chrono::system_clock::time_point started{};
  std::chrono::system_clock::time_point finished{};
  /// Why the run failed, when it did: the error of `local_session::run`,
  /// whose code `async_run` completes with. A failed run's report still
  /// lists every task with its status (`not_run` for a run refused before
  /// it started).
  std::optional<error> failure;
  /// The group that ran, as an identity only (it keeps nothing alive): set
  /// by the sessions, empty in a report made otherwise. `task_output::get`
  /// reads only reports of its own task's group; see also `of`.
  std::weak_ptr<const void> group;
  /// The tasks that retried a failed attempt, in task order (none when no
  /// task retried): kept apart from `tasks` so that a task report stays
  /// as small as without retries.
  std::vector<task_retries> retries;
  /// The run's trace id (W3C trace context): 32 lowercase hex digits, from
  /// `run_options::trace_parent` or fresh; empty in a report made
  /// otherwise (and in one of a blocking `run` refused before it
  /// started). A log line that carries it leads to the run's trace.
  std::string trace_id;
  /// The run's trace context in full: `trace.trace_id` as above,
  /// `trace.parent_id` the run's own span id (what a `traceresponse` names),
  /// `trace.flags` those given (0 for a fresh trace).
  trace_context trace;

  /// True when this is the report of a run of `g` (a handle on the same
  /// group, `task_group::same`).
  [[nodiscard]] bool of(const task_group& g) const noexcept;
  /// True when every task succeeded.
  [[nodiscard]] bool ok() const noexcept;
  /// The report of task `name` (full name), or null.
  [[nodiscard]] const task_report* find(std::string_view name) const noexcept;
  /// What the failed attempts of task `k` (its index in `tasks`) said
  /// before each wait to retry (`task_retries::failures`); empty when it
  /// did not retry.
  [[nodiscard]] const std::vector<error>& attempt_failures(std::size_t k) const noexcept;
  /// The first failure in task order, if any.
  [[nodiscard]] std::optional<error> first_failure() const;
};

}  // namespace taskgroup
