// taskgroup: observing runs. One interface receives the events of a
// session's runs (`run_options::observer`) and of a step tree run alone
// (`run_step_options::observer`): tasks beginning and ending, step
// executions, net runs, report-step runs.
//
// An observer says once what it wants (`interests`, read when a run
// starts), and a run emits only those events: an observer that asks for
// task events only (a progress display) leaves every fast path of an
// unobserved run in place, the synchronous loop of one-op nets included.
// Asking for net events costs a call per net run.
//
// Threading: the events are called inline on the node strands that run
// the work, and an offloaded op's on the compute thread that runs it, so
// possibly from several threads at once for one run: an observer must be
// thread-safe and cheap.
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/error.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace taskgroup {

struct task_report;

/// The kinds of events an observer asks for: a mask (`observe::tasks |
/// observe::nets`).
enum class observe : std::uint8_t {
  none = 0,
  tasks = 1U << 0U,     ///< run_begin, task_begin, task_end, a task's retry_wait, rank_clock
  steps = 1U << 1U,     ///< step_begin, step_end, a step's retry_wait
  nets = 1U << 2U,      ///< net_begin, net_end
  reports = 1U << 3U,   ///< report_begin, report_end
  offloads = 1U << 4U,  ///< offload_begin, offload_end (on the compute threads)
  all = tasks | steps | nets | reports | offloads,
};

[[nodiscard]] constexpr observe operator|(observe a, observe b) noexcept {
  return static_cast<observe>(static_cast<std::uint8_t>(a) | static_cast<std::uint8_t>(b));
}
[[nodiscard]] constexpr observe operator&(observe a, observe b) noexcept {
  return static_cast<observe>(static_cast<std::uint8_t>(a) & static_cast<std::uint8_t>(b));
}
/// True when mask `m` holds some kind of `kinds`.
[[nodiscard]] constexpr bool wants(observe m, observe kinds) noexcept { return (m & kinds) != observe::none; }

/// Where an event happens.
struct event_source {
  /// The task's full name (`<node>/<task>`); empty for work that belongs to
  /// a node rather than a task (local init and exit, group report steps)
  /// and for a step tree run alone.
  std::string_view task;
  /// The node; empty for a step tree run alone.
  std::string_view node;
  /// The run's trace id (`run_report::trace_id`: 32 lowercase hex digits),
  /// the same in every event of a run, so that what an observer logs
  /// leads to the run's trace; empty for a step tree run alone.
  std::string_view trace_id;
};

/// Receives what happens during a run. Every event has a default that
/// does nothing: override those asked for in `interests`. Every event
/// says where it happens (`event_source`), the run's trace id included.
///
/// Order: a task's `task_begin` comes before every event of its work and
/// its `task_end` after them. A step execution begins once its nets are
/// bound (in its own workspace, for `create_workspace`): a step whose
/// binding fails fails with no event. It ends with its status (a
/// deadline's `errc::timeout` included) after every event of its subtree.
/// Every net run is told, in the order the nets run; a failing net's end
/// carries the op's error without the step path. The events and their
/// order do not depend on which driver runs the tree.
class TASKGROUP_API run_observer {
 public:
  virtual ~run_observer() = default;

  /// The events this observer receives: read once when a run (or a
  /// `run_step`) starts. Default: every kind.
  [[nodiscard]] virtual observe interests() const noexcept { return observe::all; }

  /// The run starts (`at`: its trace id, no task or node): every task's
  /// full name and node, in group order (`observe::tasks`).
  virtual void run_begin(const event_source& /*at*/,
                         const std::vector<std::pair<std::string, std::string>>& /*tasks*/) {}
  /// A task begins (`observe::tasks`).
  virtual void task_begin(const event_source& /*at*/) {}
  /// A task has ended: its report, without outputs (`observe::tasks`).
  virtual void task_end(const event_source& /*at*/, const task_report& /*report*/) {}
  /// A step execution begins (`observe::steps`).
  virtual void step_begin(const event_source& /*at*/, std::string_view /*step*/) {}
  /// A step execution has ended with `result`; `iterations`: the
  /// iterations it started (`observe::steps`).
  virtual void step_end(const event_source& /*at*/, std::string_view /*step*/, std::uint64_t /*iterations*/,
                        const status& /*result*/) {}
  /// A net run begins (`observe::nets`).
  virtual void net_begin(const event_source& /*at*/, std::string_view /*net*/) {}
  /// A net run has ended with `result` (`observe::nets`).
  virtual void net_end(const event_source& /*at*/, std::string_view /*net*/, const status& /*result*/) {}
  /// A run of a report step begins (`observe::reports`).
  virtual void report_begin(const event_source& /*at*/, std::string_view /*step*/) {}
  /// A run of a report step has ended with `result` (`observe::reports`).
  virtual void report_end(const event_source& /*at*/, std::string_view /*step*/, const status& /*result*/) {}
  /// An offloaded op (`operator_schema::offload`) of type `op` starts on a
  /// compute thread, called there (`observe::offloads`). `at` is the task
  /// whose net runs the op (its node alone for a node's own work), so
  /// that a trace links the compute thread's span to the task. An
  /// exception from it fails the op, which then does not run.
  virtual void offload_begin(const event_source& /*at*/, std::string_view /*op*/) {}
  /// The offloaded op has run on the compute thread with `result`, called
  /// there before its outputs go back to the node (`observe::offloads`).
  /// An exception from it fails the op.
  virtual void offload_end(const event_source& /*at*/, std::string_view /*op*/, const status& /*result*/) {}
  /// Under MPI, on rank 0, as rank `rank`'s part of the run has reported
  /// (`observe::tasks`): that rank's system clock is estimated to be
  /// `offset` ahead of this process's, give or take half of `round_trip`
  /// (the run's START and that rank's STATUS, timed at both ends, as NTP
  /// estimates it). A trace file keeps it, so that the ranks' files merge
  /// onto one clock (`merge_traces`).
  virtual void rank_clock(const event_source& /*at*/, int /*rank*/, std::chrono::nanoseconds /*offset*/,
                          std::chrono::nanoseconds /*round_trip*/) {}
  /// Attempt `next_attempt - 1` of a task (`step` empty, `observe::tasks`)
  /// or of step `step` (`observe::steps`) with a retry policy failed with
  /// `after`; attempt `next_attempt` of `max_attempts` starts after a wait
  /// of `wait` (unless the run stops meanwhile). A task's attempts each
  /// run between its one `task_begin` and its one `task_end`; a step's
  /// attempts are each an execution, with its begin and end.
  virtual void retry_wait(const event_source& /*at*/, std::string_view /*step*/, int /*next_attempt*/,
                          int /*max_attempts*/, std::chrono::microseconds /*wait*/, const error& /*after*/) {}
};

}  // namespace taskgroup
