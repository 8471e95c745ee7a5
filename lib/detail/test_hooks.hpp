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
};

/// The process's hooks. Threading: atomics, safe from any thread.
driver_hooks& test_driver_hooks() noexcept;

}  // namespace taskgroup::detail
