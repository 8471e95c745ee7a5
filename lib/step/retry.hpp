// Internal: the retry rule (docs/under-load.md, "Retries"), once for a
// task's attempts (the session) and a step's (the coroutine driver):
// whether a failed attempt runs again, after what wait, and how a task
// waiting to retry, or one that was not, is described.
#pragma once

#include <taskgroup/error.hpp>
#include <taskgroup/retry_policy.hpp>
#include <taskgroup/run_context.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace taskgroup::detail {

/// What follows a failed attempt.
struct retry_decision {
  enum class kind : std::uint8_t {
    end,            ///< the failure stands (not retryable, attempts spent, the run stopping)
    wait,           ///< wait `wait`, then attempt again
    past_deadline,  ///< retryable, but the wait would end after the run's deadline: ends with `message`
  };
  kind what = kind::end;
  std::chrono::microseconds wait{0};
};

/// Attempt `attempt` (1-based) of a task or step with `policy` failed with
/// `failure`; `stopping`: the run (or the task's node) is being stopped.
/// `deadline` is the run's, if any.
retry_decision decide_retry(const retry_policy& policy, int attempt, const error& failure, bool stopping,
                            const std::optional<std::chrono::steady_clock::time_point>& deadline);

/// The failure of an attempt not retried because its wait would pass the
/// run's deadline: `failure`, saying so.
error past_deadline(const error& failure, int attempt, const retry_policy& policy, std::chrono::microseconds wait);

/// A task or step waiting to retry, for hang diagnosis: `waiting to retry
/// (attempt 2 of 5, 40 ms left) after: <error>`.
std::string waiting_to_retry(int next_attempt, int max_attempts, std::chrono::steady_clock::duration left,
                             const error& after);

/// How a wait to retry ends when the run stops meanwhile (`left` before
/// it was due): `cancelled: waiting to retry (...) after: <error>`; the
/// caller names where.
error cancelled_waiting(int next_attempt, int max_attempts, std::chrono::steady_clock::duration left,
                        const error& after);

/// A step waiting to retry, in view of run_probe (wait_site::retry).
struct retry_wait {
  int next_attempt = 2;
  int max_attempts = 2;
  std::chrono::steady_clock::time_point due{};
  const error* after = nullptr;
};

/// The failures of a task's failed attempts, as the report keeps them: the
/// first and the last `kept_last`, in order (`task_retries::failures`).
class attempt_log {
 public:
  static constexpr std::size_t kept_last = 4;
  void add(error e);
  [[nodiscard]] std::vector<error> take() noexcept { return std::move(errors_); }
  [[nodiscard]] bool empty() const noexcept { return errors_.empty(); }

 private:
  std::vector<error> errors_;  // the first, then up to kept_last more (the latest)
};

/// 64 random bits for jitter (a per-thread generator: no lock).
std::uint64_t jitter_bits() noexcept;

}  // namespace taskgroup::detail
