#include "step/retry.hpp"

#include <functional>
#include <thread>
#include <utility>

namespace taskgroup::detail {

namespace {

std::string millis_text(std::chrono::steady_clock::duration d) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  return std::to_string(ms < 0 ? 0 : ms) + " ms";
}

}  // namespace

retry_decision decide_retry(const retry_policy& policy, int attempt, const error& failure, bool stopping,
                            const std::optional<std::chrono::steady_clock::time_point>& deadline) {
  if (attempt >= policy.max_attempts || stopping || failure.is_cancelled()) return {};
  if (failure.code.category() != error_category() || !policy.retries_on(static_cast<errc>(failure.code.value())))
    return {};
  const std::chrono::microseconds wait = policy.wait_before(attempt, jitter_bits());
  if (deadline && std::chrono::steady_clock::now() + wait >= *deadline) {
    return {retry_decision::kind::past_deadline, wait};
  }
  return {retry_decision::kind::wait, wait};
}

error past_deadline(const error& failure, int attempt, const retry_policy& policy, std::chrono::microseconds wait) {
  return {failure.code, failure.message + " (not retried: attempt " + std::to_string(attempt + 1) + " of " +
                            std::to_string(policy.max_attempts) + ", after a wait of " + millis_text(wait) +
                            ", would start after the run's deadline)"};
}

std::string waiting_to_retry(int next_attempt, int max_attempts, std::chrono::steady_clock::duration left,
                             const error& after) {
  return "waiting to retry (attempt " + std::to_string(next_attempt) + " of " + std::to_string(max_attempts) + ", " +
         millis_text(left) + " left) after: " + after.message;
}

error cancelled_waiting(int next_attempt, int max_attempts, std::chrono::steady_clock::duration left,
                        const error& after) {
  return {errc::cancelled, "cancelled: " + waiting_to_retry(next_attempt, max_attempts, left, after)};
}

void attempt_log::add(error e) {
  if (errors_.size() == 1 + kept_last) errors_.erase(errors_.begin() + 1);
  errors_.push_back(std::move(e));
}

std::uint64_t jitter_bits() noexcept {
  // splitmix64 over a per-thread state, seeded from the clock and the
  // thread (jitter spreads retries; it need not be unpredictable).
  thread_local std::uint64_t state =
      static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
      (static_cast<std::uint64_t>(std::hash<std::thread::id>()(std::this_thread::get_id())) << 17);
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace taskgroup::detail
