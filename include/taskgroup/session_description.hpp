// taskgroup: a live view of a session's runs (`local_session::
// async_describe`, `mpi_session::async_describe`): every run in flight or
// queued, its trace, group, age and, for a run in flight, where each of its
// running tasks waits; and its rendering as JSON (docs/observing.md).
//
// Threading: value types and reentrant functions.
#pragma once

#include <taskgroup/export.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace taskgroup {

/// Where a run stands in its session.
enum class run_phase : std::uint8_t {
  queued,   ///< waiting for admission (session_limits)
  running,  ///< admitted: its tasks run, or are about to
};

/// `queued` or `running`.
TASKGROUP_API std::string_view to_string(run_phase p) noexcept;

/// One run of a session, as `async_describe` saw it.
struct run_description {
  /// Its trace id (`run_report::trace_id`: 32 lowercase hex digits).
  std::string trace_id;
  /// Its group's name (`task_group::name`; empty when unnamed).
  std::string group;
  run_phase phase = run_phase::running;
  /// Its priority (`run_options::priority`).
  int priority = 0;
  /// How long it has been queued (a queued run) or running (a run in
  /// flight, from when it began; zero for one admitted that has not begun
  /// yet).
  std::chrono::microseconds age{0};
  /// For a run in flight: one line per place where a task of it that has
  /// begun and not ended waits, in task order, in the words of a run's
  /// error (those of `run_probe::async_where`: the op, its input and what
  /// it waits for, `waiting to retry (attempt 2 of 3, 40 ms left) after:
  /// ...`), then one line per node that did not answer within
  /// `run_probe::answer_within` (a task holds its thread). Empty for a
  /// queued run and for one with no task running.
  std::vector<std::string> waiting;
};

/// Every run of a session in flight or queued when it was asked.
struct session_description {
  /// The session takes no new run: closed, or draining (`async_drain`).
  bool closed = false;
  /// Under MPI, the rank that answered (`mpi_session::rank`); unset for a
  /// local session.
  std::optional<int> rank;
  /// The runs in flight, oldest first, then the queued ones in the order
  /// admission takes them (higher priority first, then arrival).
  std::vector<run_description> runs;
};

/// `d` as one JSON object: `{"closed": false, "runs": [{"trace_id": ...,
/// "group": ..., "phase": "running", "priority": 0, "age_us": 1234,
/// "waiting": ["task ..."]}, ...]}`, with `"rank"` under MPI. Errors:
/// throws `std::bad_alloc`.
TASKGROUP_API std::string to_json(const session_description& d);

}  // namespace taskgroup
