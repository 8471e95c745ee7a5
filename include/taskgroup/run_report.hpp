// taskgroup: what a session run reports, and how it runs.
//
// Threading: value types (reentrant).
#pragma once

#include <taskgroup/blob.hpp>
#include <taskgroup/error.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace taskgroup {

/// What happens to the other tasks when one fails.
enum class run_policy {
  /// The first failure cancels every task on every node; the run completes
  /// with that error once all have unwound (the default).
  join,
  /// Every task runs to its end; the report holds each task's result and
  /// the run succeeds (check `run_report::ok()`).
  gather,
};

struct task_report;
class codec_registry;

/// Receives what happens during a run: tasks beginning and ending, and,
/// with their task and node, step executions, net runs and report-step
/// runs (for traces and progress displays). `task` is empty for work that
/// belongs to a node rather than a task (local init/exit, group report
/// steps). Called inline on the node strands, so possibly from several
/// threads at once: an observer must be thread-safe and cheap.
class run_observer {
 public:
  virtual ~run_observer() = default;
  /// The run starts: every task's name and node, in group order.
  virtual void run_begin(const std::vector<std::pair<std::string, std::string>>& /*tasks*/) {}
  virtual void task_begin(std::string_view /*task*/, std::string_view /*node*/) {}
  virtual void task_end(const task_report& /*report*/) {}
  virtual void step_begin(std::string_view /*task*/, std::string_view /*node*/, std::string_view /*step*/) {}
  virtual void step_end(std::string_view /*task*/, std::string_view /*node*/, std::string_view /*step*/,
                        std::uint64_t /*iterations*/, const status& /*result*/) {}
  virtual void net_begin(std::string_view /*task*/, std::string_view /*node*/, std::string_view /*net*/) {}
  virtual void net_end(std::string_view /*task*/, std::string_view /*node*/, std::string_view /*net*/,
                       const status& /*result*/) {}
  virtual void report_begin(std::string_view /*task*/, std::string_view /*node*/, std::string_view /*step*/) {}
  virtual void report_end(std::string_view /*task*/, std::string_view /*node*/, std::string_view /*step*/,
                          const status& /*result*/) {}
};

/// Options of one run.
struct run_options {
  run_policy policy = run_policy::join;
  /// A deadline for the whole run: on expiry every task is cancelled and
  /// the run fails with `errc::timeout`. At most `taskgroup::max_duration`
  /// (execution_step.hpp): a longer one fails the run at its start with
  /// `errc::invalid_task` naming the limit.
  std::optional<std::chrono::milliseconds> timeout{};
  /// Told of the run's progress when not null (see run_observer).
  run_observer* observer = nullptr;
  /// Strict codec mode, when not null: the run fails at its start with
  /// `errc::not_serializable` when a typed output (`task::output<T>`) has
  /// no codec in this registry, and every output value is encoded and
  /// decoded through it when fetched (a failure fails the task), so that a
  /// group whose outputs could not travel to another process fails here
  /// too. The MPI session always works this way.
  const codec_registry* strict_codecs = nullptr;
  /// When set, only these nodes run; tasks of the others are reported as
  /// `task_status::not_run` and their outputs are left alone. Errors:
  /// `errc::invalid_task` naming a node the group does not use. (The MPI
  /// session runs each rank's own nodes this way.)
  std::optional<std::vector<std::string>> only_nodes{};
};

/// How a task ended.
enum class task_status { succeeded, failed, cancelled, not_run };

/// `succeeded`, `failed`, `cancelled`, `not run`.
std::string_view to_string(task_status s) noexcept;

/// One task's part of a run.
struct task_report {
  std::string name;  ///< full name `<node>/<task>`
  std::string node;
  task_status status = task_status::not_run;
  std::optional<error> failure;  ///< set when failed or cancelled
  std::chrono::system_clock::time_point started{};
  std::chrono::system_clock::time_point finished{};
  /// Iterations run by the task's own step (summed over instances).
  std::uint64_t iterations = 0;
  /// Declared outputs after the run: blob name and a copy of its value.
  std::vector<std::pair<std::string, std::shared_ptr<const blob>>> outputs;

  [[nodiscard]] std::chrono::nanoseconds duration() const noexcept { return finished - started; }
};

/// The report of one run of a task group.
struct run_report {
  std::vector<task_report> tasks;  ///< in the group's task order
  std::chrono::system_clock::time_point started{};
  std::chrono::system_clock::time_point finished{};

  /// True when every task succeeded.
  [[nodiscard]] bool ok() const noexcept;
  /// The report of task `name` (full name), or null.
  [[nodiscard]] const task_report* find(std::string_view name) const noexcept;
  /// The first failure in task order, if any.
  [[nodiscard]] std::optional<error> first_failure() const;
};

}  // namespace taskgroup
