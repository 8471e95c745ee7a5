// Internal: what sessions and plans reach inside tasks and groups, apart
// from their public API. The declared outputs' state (filled by each run,
// read by `task_output`), a task's fixed full name and claimed local
// setup work, a group's identity and local work. Exported (TASKGROUP_API)
// only because the MPI library, which links the core library's public
// face, uses them; no public header declares them.
#pragma once

#include <taskgroup/task.hpp>
#include <taskgroup/task_group.hpp>

#include <memory>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

namespace taskgroup::detail {

/// A declared output of a task and what the last run of its group to
/// complete left in it (`task_output::get()`).
// The flags are kept together: a plan holds an output or more per task.
struct TASKGROUP_API output_state {
  std::string task;
  std::weak_ptr<const void> group;  // the identity of the task's group: only its reports hold this output
  std::vector<std::string> blobs;
  // The C++ type of each blob when declared with one (output<T>), so that
  // sessions can check at the start of a run that the type can travel.
  const std::type_info* type = nullptr;
  std::unique_ptr<const error> failure;  // why the last run could not fetch it (apart: rare)
  std::vector<std::shared_ptr<const blob>> values;
  bool list = false;
  bool set = false;
  // Set by the MPI session on its workers while it runs the task: the run
  // fetches the value as the node workspace's own blob instead of a copy
  // (unless the node has exit work, which runs after the fetch); the MPI
  // session sends it from there, then takes the copies it keeps.
  bool borrow = false;
};

// The values of output `s` in `r`, the report of its task in one run
// (null: the run did not report the task). Errors: `errc::output_not_set`
// "task T output B: the task did not succeed" (or "... was not in the
// run"), or the fetch error `r` holds for the blob.
TASKGROUP_API result<std::vector<std::shared_ptr<const blob>>> output_values(const output_state& s,
                                                                             const task_report* r);
// Fills `s` (its last run) from `r`, the report of its task in that run.
// Every session does it this way, on one strand per group of runs.
TASKGROUP_API void set_output(output_state& s, const task_report& r);

struct TASKGROUP_API task_access {
  /// The task's declared outputs, in declaration order.
  static const std::vector<std::shared_ptr<output_state>>& outputs(const task& t) noexcept;
  /// Called by task_group::add: fixes the unique full name and the group
  /// (`group`, its identity) of the task and its outputs, marks the task
  /// used.
  static void set_full_name(const task& t, std::string full, std::weak_ptr<const void> group);
  /// The full name fixed by `set_full_name` (which must have been called):
  /// it does not change afterwards, and lives as long as the task's state.
  static const std::string& full_name(const task& t) noexcept;
  /// The node-local init and exit work of setup objects attached with
  /// `setup_scope::local` and claimed by this task (after `get_step`).
  static std::vector<std::pair<body, body>> local_work(const task& t);
};

struct TASKGROUP_API group_access {
  /// The group's shared state: its identity (what a session caches the
  /// compiled group under) and, weakly held, whether it still lives.
  static std::shared_ptr<const void> identity(const task_group& g) noexcept;
  /// The same as a key (no reference taken) and as a weak reference.
  static const void* key(const task_group& g) noexcept;
  static std::weak_ptr<const void> weak_identity(const task_group& g) noexcept;
  /// Local init/exit work of node `name`, claiming setup objects.
  static std::pair<std::vector<body>, std::vector<body>> local_work(const task_group& g, const std::string& name);
  /// Marks the group used (sessions do it when they compile it).
  static void mark_used(const task_group& g) noexcept;
  /// A group report step's faults: on a node with no task of the group,
  /// an interval outside (0, max_duration] (`errc::invalid_task`, naming
  /// the step and its node).
  static status check_report(const group_report_step& r, bool node_has_task);
  /// Whether `r` is the report of a run of the group whose identity is
  /// `group` (false for an empty `group`).
  static bool ran(const run_report& r, const std::weak_ptr<const void>& group) noexcept;
  /// The first fault of the group's tasks (`task::validate`), with context
  /// "task group".
  static status check(const task_group& g);
};

}  // namespace taskgroup::detail
