// Internal: hooks for the library's own tests (not installed, not part of
// the public API). Tests reach them through the library's internal include
// folder; programs never should.
#pragma once

#include <atomic>
#include <cstdint>

namespace taskgroup::detail {

/// Which step driver runs a session's tasks. The session picks the driver
/// from each task's tree; these hooks let a test force the coroutine
/// driver and count which driver started each task.
struct driver_hooks {
  /// True: the frame-free driver declines every task, so each runs on the
  /// coroutine driver (the property tests run every tree both ways).
  std::atomic<bool> coroutine_only{false};
  /// True: the counters below count the tasks each driver starts.
  std::atomic<bool> counting{false};
  std::atomic<std::uint64_t> frame_free_tasks{0};
  std::atomic<std::uint64_t> coroutine_tasks{0};
  /// True counting: the synchronous loops of net steps entered (each
  /// entry, and each resumption after a yield), by kind: the fast loop of
  /// one-op nets (their ops' fast paths called directly), the loop over
  /// nets of several ops, and the loop that tells an observer of each net.
  std::atomic<std::uint64_t> one_op_loops{0};
  std::atomic<std::uint64_t> net_loops{0};
  std::atomic<std::uint64_t> observed_loops{0};
};

/// The process's hooks. Threading: atomics, safe from any thread.
driver_hooks& test_driver_hooks() noexcept;

/// What the step builders did on one thread: adding a substep must cost
/// the same at any depth, so it freezes the child alone (its own substeps
/// were frozen when they were added) and never walks or copies its
/// subtree. A test counts the steps `execution_step::freeze` marks.
struct step_hooks {
  std::uint64_t frozen = 0;  // steps marked frozen by freeze() on this thread
};

/// This thread's step hooks (other threads' builders never disturb them).
step_hooks& test_step_hooks() noexcept;

}  // namespace taskgroup::detail
