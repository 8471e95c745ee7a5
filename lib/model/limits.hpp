// Internal: the range checks of durations, instance counts and group
// names, shared by steps, tasks, groups, sessions, the MPI session and the
// plan reader and writer (one rule, one place).
#pragma once

#include <taskgroup/execution_step.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <ratio>
#include <string>
#include <string_view>
#include <type_traits>

namespace taskgroup::detail {

/// Levels of steps a session composes around the trees it is given (a
/// task's setup, instances, body beside its report steps; a node's setup):
/// not counted against `max_step_depth`, which bounds what users build.
inline constexpr std::size_t composed_levels = 16;

/// Validates trees composed around users' trees (`task::get_step`, a
/// node's setup): `execution_step::validate` with room for the levels
/// composed.
struct step_validation {
  /// `deepest`, when given, gets the tree's depth: above `max_step_depth`,
  /// a tree given by the user may be too deep (check it alone).
  [[nodiscard]] static status composed(const execution_step& s, std::size_t* deepest = nullptr) {
    return s.validate_within(max_step_depth + composed_levels, deepest);
  }
  /// A step made to hold bodies given by the user (`append_body`): its
  /// own level does not count.
  [[nodiscard]] static status holding_bodies(const execution_step& s) { return s.validate_within(max_step_depth + 1); }
};

/// What is wrong with duration `d` (in milliseconds or microseconds), e.g.
/// "must be > 0 ms, got 0" or "must be at most 1099511627776 ms
/// (taskgroup::max_duration, about 34.8 years), got 10000000000000"; empty
/// when it is in (0, max_duration], or [0, max_duration] with `zero_ok`.
/// Callers prefix the field's name and place.
template <class Period>
std::string duration_fault(std::chrono::duration<std::int64_t, Period> d, bool zero_ok = false) {
  static_assert(std::is_same_v<Period, std::milli> || std::is_same_v<Period, std::micro>);
  const char* unit = std::is_same_v<Period, std::milli> ? " ms" : " us";
  const std::int64_t v = d.count();
  if (v < 0 || (v == 0 && !zero_ok))
    return std::string("must be ") + (zero_ok ? ">= 0" : "> 0") + unit + ", got " + std::to_string(v);
  const std::int64_t most =
      std::chrono::duration_cast<std::chrono::duration<std::int64_t, Period>>(max_duration).count();
  if (v > most) {
    return "must be at most " + std::to_string(most) + unit + " (taskgroup::max_duration, about 34.8 years), got " +
           std::to_string(v);
  }
  return {};
}

/// The same for a duration of `ms` milliseconds, in (0, max_duration].
inline std::string duration_fault(std::int64_t ms) { return duration_fault(std::chrono::milliseconds(ms)); }

/// What is wrong with a run's deadline (`run_options::timeout`): empty
/// when there is none or it is in [0, max_duration] (0 expires at once).
inline std::string run_timeout_fault(const std::optional<std::chrono::milliseconds>& t) {
  return t ? duration_fault(*t, true) : std::string();
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

/// What is wrong with `n` instances (a step's count) run by each of `above`
/// (the product of the counts above it: its task's num_instances and its
/// ancestors' concurrent_instances), both in [1, max_instances], e.g.
/// "makes 300 x 300 = 90000 instances at once, more than 65536
/// (taskgroup::max_instances, which bounds the product of the instance
/// counts along a path)"; empty when the product is at most max_instances.
inline std::string instance_product_fault(std::int64_t above, std::int64_t n) {
  const std::int64_t total = above * n;  // at most 2^32: no overflow
  if (total <= max_instances) return {};
  return "makes " + std::to_string(above) + " x " + std::to_string(n) + " = " + std::to_string(total) +
         " instances at once, more than " + std::to_string(max_instances) +
         " (taskgroup::max_instances, which bounds the product of the instance counts along a path)";
}

/// Offset of the first byte of `t` that does not start a valid UTF-8
/// sequence (overlong forms, surrogates and code points past U+10FFFF
/// included), or npos. (Group names here, plan text in lib/plan.)
std::size_t invalid_utf8_at(std::string_view t);

/// What is wrong with group name `name` (`task_group::name`), e.g. "must
/// be at most 200 bytes (taskgroup::max_group_name_size), got 201", "must
/// hold no control characters, got "a\u0001b"" or "must be valid UTF-8,
/// got byte 0xFF at offset 3"; empty when it is at most
/// `max_group_name_size` bytes of printable UTF-8. Callers prefix the
/// field's name and place.
std::string group_name_fault(std::string_view name);

/// The first step of `root`'s tree (depth first, a step before its
/// substeps) whose instances, run under `outer` instances of the tree (a
/// task's num_instances), pass max_instances: its path from `root`, the
/// product of `outer` and the counts above it, and its own count. Steps
/// whose own count is out of range, and their subtrees, are left to
/// `execution_step::validate`. Iterative: safe at any depth.
struct instance_excess {
  std::string path;
  std::int64_t above = 1;
  std::int64_t count = 1;
};
std::optional<instance_excess> first_instance_excess(const execution_step& root, std::int64_t outer);

}  // namespace taskgroup::detail
