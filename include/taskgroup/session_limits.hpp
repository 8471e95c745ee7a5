// taskgroup: admission control of a local session: how many runs it keeps
// in flight, how many wait for a place and for how long, and what it
// carries now (docs/under-load.md).
//
// Threading: value types (reentrant).
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/error.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace taskgroup {

/// The bounds a `local_session` admits runs within. Each is optional;
/// unset is unbounded, and a session without limits (the default) admits
/// every run at once.
///
/// A run arrives when `async_run` is called. It is admitted at once while
/// fewer than `max_runs_in_flight` runs are in flight (admitted and not
/// ended), or, when its `run_options::priority` is above 0, fewer than
/// `max_runs_in_flight + priority_headroom`; otherwise it waits in the
/// session's queue, which admits the highest priority first and, within
/// one priority, in arrival order, as runs in flight end. A run that
/// finds the queue full (`max_queued` runs waiting) is shed, unless its
/// priority is above that of the last run in the queue (the lowest,
/// latest): that one is shed instead and the newcomer queued. A run that
/// has waited `max_queue_wait` is shed. A shed run completes with
/// `errc::overloaded`, every task reported not run; it never touched a
/// workspace.
struct TASKGROUP_API session_limits {
  /// Runs in flight at most: at least 1.
  std::optional<std::size_t> max_runs_in_flight{};
  /// Runs waiting for admission at most; 0 sheds every run that cannot
  /// start at once. Meaningful with `max_runs_in_flight` (without it no
  /// run waits).
  std::optional<std::size_t> max_queued{};
  /// How long a run may wait for admission: from 0 to
  /// `taskgroup::max_duration` (execution_step.hpp). In microseconds, so
  /// that a session whose runs take less than a millisecond can bound the
  /// wait to about a run's time (a `std::chrono::milliseconds` converts).
  std::optional<std::chrono::microseconds> max_queue_wait{};
  /// Places in flight beyond `max_runs_in_flight` that only runs of
  /// priority above 0 take (0, the default: none). A health check or a
  /// control request then starts at once while the traffic holds every
  /// regular place, rather than after one of those runs ends; it still
  /// shares the node strands with them. Meaningful with
  /// `max_runs_in_flight`; the sum of the two must fit a `std::size_t`.
  std::size_t priority_headroom = 0;
};

/// What a `local_session` carries at one moment.
struct session_load {
  /// Runs admitted and not yet ended.
  std::size_t in_flight = 0;
  /// Runs waiting for admission.
  std::size_t queued = 0;
  /// Runs shed since the session was made (`errc::overloaded`).
  std::uint64_t shed = 0;
};

/// Empty when `limits` holds, else what is wrong, naming the field and its
/// bound ("max_runs_in_flight must be at least 1"). Reentrant.
TASKGROUP_API status check_limits(const session_limits& limits);

}  // namespace taskgroup
