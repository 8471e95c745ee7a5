#include <taskgroup/execution_step.hpp>
#include <taskgroup/retry_policy.hpp>

#include "model/limits.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace taskgroup {

bool retryable(errc c) noexcept {
  switch (c) {
    // The run was stopped, or the work is malformed, or the session
    // refused it: running it again cannot change that.
    case errc::cancelled:
    case errc::invalid_step:
    case errc::invalid_task:
    case errc::invalid_plan:
    case errc::invalid_feed:
    case errc::session_closed:
    case errc::session_busy:
    case errc::overloaded:
    case errc::group_mismatch:
    case errc::no_result: return false;
    default: return !name_of(c).empty();
  }
}

bool retry_policy::retries_on(errc c) const noexcept {
  return retryable(c) && std::find(retry_on.begin(), retry_on.end(), c) != retry_on.end();
}

std::chrono::milliseconds retry_policy::backoff(int attempt) const noexcept {
  // In double: initial * multiplier^(attempt-1) may pass any integer
  // before the cap applies.
  const double cap = static_cast<double>(max_backoff.count());
  double b = static_cast<double>(initial_backoff.count());
  for (int a = 1; a < attempt && b < cap; ++a) b *= multiplier;
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::min(b, cap)));
}

std::chrono::microseconds retry_policy::wait_before(int attempt, std::uint64_t random) const noexcept {
  const std::chrono::microseconds full = backoff(attempt);
  if (!jitter || full.count() == 0) return full;
  // Uniform in [0, full] (the modulo bias is below 2^-20 for any backoff
  // within max_duration).
  return std::chrono::microseconds(static_cast<std::int64_t>(random % (static_cast<std::uint64_t>(full.count()) + 1)));
}

std::string retry_policy::fault() const {
  if (max_attempts < 1 || max_attempts > max_attempts_limit) {
    return "max_attempts must be in [1, " + std::to_string(max_attempts_limit) + "], got " +
           std::to_string(max_attempts);
  }
  if (std::string f = detail::duration_fault(initial_backoff, true); !f.empty()) return "initial_backoff " + f;
  if (std::string f = detail::duration_fault(max_backoff, true); !f.empty()) return "max_backoff " + f;
  if (!std::isfinite(multiplier) || multiplier < 1.0) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", multiplier);
    return std::string("multiplier must be finite and >= 1, got ") + text;
  }
  for (const errc c : retry_on) {
    if (name_of(c).empty()) return "retry_on holds " + std::to_string(static_cast<int>(c)) + ", which is no errc";
    if (!retryable(c)) return "retry_on must not hold " + std::string(name_of(c)) + ": it is never retried";
  }
  return {};
}

}  // namespace taskgroup
