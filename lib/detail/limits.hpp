// Internal: the range checks of durations and instance counts, shared by
// steps, tasks, groups, sessions and the plan reader (one rule, one place).
#pragma once

#include <taskgroup/execution_step.hpp>

#include <cstdint>
#include <string>

namespace taskgroup::detail {

/// What is wrong with a duration of `ms` milliseconds, e.g. "must be > 0 ms,
/// got 0" or "must be at most 1099511627776 ms (taskgroup::max_duration,
/// about 34.8 years), got 10000000000000"; empty when it is in
/// (0, max_duration]. Callers prefix the field's name and place.
inline std::string duration_fault(std::int64_t ms) {
  if (ms <= 0) return "must be > 0 ms, got " + std::to_string(ms);
  if (ms > max_duration.count()) {
    return "must be at most " + std::to_string(max_duration.count()) +
           " ms (taskgroup::max_duration, about 34.8 years), got " + std::to_string(ms);
  }
  return {};
}

/// What is wrong with an instance count `n`; empty when it is in
/// [1, max_instances].
inline std::string instances_fault(std::int64_t n) {
  if (n < 1) return "must be >= 1, got " + std::to_string(n);
  if (n > max_instances) {
    return "must be at most " + std::to_string(max_instances) + " (taskgroup::max_instances), got " + std::to_string(n);
  }
  return {};
}

}  // namespace taskgroup::detail
