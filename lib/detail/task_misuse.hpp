// Internal: a counter of task misuses, so that sessions re-check a cached
// group's tasks only when some task may have changed since the last check.
#pragma once

#include <cstdint>

namespace taskgroup::detail {

/// Bumped whenever a task records a misuse (a builder call on a used task,
/// a second step). A session that checked a group's tasks at one value need
/// not check them again while it is unchanged. Thread-safe.
std::uint64_t task_misuse_epoch() noexcept;

}  // namespace taskgroup::detail
