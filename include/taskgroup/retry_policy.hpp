// taskgroup: retry policies of tasks and steps (docs/under-load.md,
// "Retries").
//
// A policy set on a task (`task::retry`) retries the task's whole composed
// work; one set on a step (`execution_step::retry`) retries that step's
// subtree. An attempt that fails with a code in `retry_on` is run again
// after a wait, up to `max_attempts` attempts in all, unless the run was
// cancelled or the wait would end after the run's deadline.
//
// Threading: a value type (reentrant).
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/error.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace taskgroup {

/// How a failed attempt of a task or a step is run again.
///
/// The wait before attempt `a + 1` (after `a` failed attempts) is
/// `min(max_backoff, initial_backoff * multiplier^(a-1))`, or, with
/// `jitter`, uniform in [0, that] ("full jitter": retries of many runs
/// that failed together spread out instead of returning together).
struct TASKGROUP_API retry_policy {
  /// Attempts in all, the first included: 1 (the default) never retries.
  /// In [1, `max_attempts_limit`].
  int max_attempts = 1;
  /// The backoff before the second attempt. In [0, `max_duration`].
  std::chrono::milliseconds initial_backoff{10};
  /// What each further backoff is multiplied by: finite, >= 1.
  double multiplier = 2.0;
  /// The longest backoff. In [0, `max_duration`].
  std::chrono::milliseconds max_backoff{1000};
  /// Full jitter: each wait uniform in [0, backoff].
  bool jitter = true;
  /// The codes of failures that are retried. Never `cancelled`, the
  /// `invalid_*` codes, `session_closed`, `session_busy`, `overloaded`,
  /// `group_mismatch` or `no_result` (a policy naming one is refused):
  /// those say the work cannot succeed by running it again.
  std::vector<errc> retry_on{errc::op_failed, errc::timeout};

  /// The most attempts a policy may ask for.
  static constexpr int max_attempts_limit = 1000;

  /// True when the policy runs more than one attempt.
  [[nodiscard]] bool retries() const noexcept { return max_attempts > 1; }
  /// True when a failure with code `c` may be retried by this policy.
  [[nodiscard]] bool retries_on(errc c) const noexcept;
  /// The backoff before attempt `attempt + 1` after `attempt` (>= 1)
  /// failed attempts, before jitter.
  [[nodiscard]] std::chrono::milliseconds backoff(int attempt) const noexcept;
  /// The wait before attempt `attempt + 1`: `backoff(attempt)`, or with
  /// `jitter` a uniform draw in [0, backoff(attempt)] from `random` (any
  /// 64 random bits). In microseconds, so that a short backoff still
  /// spreads.
  [[nodiscard]] std::chrono::microseconds wait_before(int attempt, std::uint64_t random) const noexcept;

  /// What is wrong with the policy, naming the field and its limit (e.g.
  /// `max_attempts must be in [1, 1000], got 0`); empty when it is valid.
  [[nodiscard]] std::string fault() const;

  friend bool operator==(const retry_policy&, const retry_policy&) = default;
};

/// True when code `c` may appear in `retry_policy::retry_on`.
TASKGROUP_API bool retryable(errc c) noexcept;

}  // namespace taskgroup
