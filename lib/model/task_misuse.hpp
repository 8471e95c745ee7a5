// Internal: a counter of task and group misuses, so that sessions re-check
// a cached group only when it or one of its tasks may have changed since
// the last check.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace taskgroup::detail {

/// Bumped whenever a task or a group records a misuse (a builder call on a
/// used task or group, a second step). A session that checked a group's tasks at one value need
/// not check them again while it is unchanged. Thread-safe.
std::uint64_t task_misuse_epoch() noexcept;

/// Records `what` in `slot` (a task's or a group's first misuse, reported
/// when it is next checked) and bumps the epoch.
void record_misuse(std::optional<std::string>& slot, std::string what);

}  // namespace taskgroup::detail
