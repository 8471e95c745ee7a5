// Internal: the yield rule, one place for every loop that runs work
// inline on a strand (a step's iterations, a node's tasks started in a
// row).
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>

namespace taskgroup::detail {

/// The yield rule: a long loop lets other work of its strand (and
/// cancellation) in once every `every` iteration starts, when at least
/// `slice` has passed since its last yield (the first yield comes at the
/// first count). One clock serves a whole step subtree run without
/// suspending, so nested short loops count together, and a node's tasks
/// started in a row (a count per task, `run_step_options`' defaults).
/// The time is read only when a count comes due: a yield costs a post
/// through the strand, some hundred nanoseconds, which every 256
/// iterations of a one-op net had been a third of the loop's time.
struct yield_clock {
  std::uint32_t every = std::numeric_limits<std::uint32_t>::max();
  std::uint32_t since = 0;
  std::chrono::steady_clock::duration slice{};   ///< zero: the count alone
  std::chrono::steady_clock::time_point last{};  ///< the last yield; unset before the first
  /// Counts an iteration start; true when a yield is due before it.
  /// After a false one, `came_due()` says whether its count came due
  /// within the slice (the loop goes on without a yield).
  bool tick() noexcept {
    if (++since != every) return false;
    since = 0;
    if (slice <= std::chrono::steady_clock::duration::zero()) return true;
    const auto now = std::chrono::steady_clock::now();
    if (last != std::chrono::steady_clock::time_point{} && now - last < slice) return false;
    last = now;
    return true;
  }
  /// The last tick's count came due (a yield, or the slice not passed).
  [[nodiscard]] bool came_due() const noexcept { return since == 0; }
  /// How many of the next ticks are known to say false.
  [[nodiscard]] std::uint64_t quiet_ticks() const noexcept { return since < every ? every - 1 - since : 0; }
  /// `n` ticks at most `quiet_ticks()`, in one go.
  void skip(std::uint32_t n) noexcept { since += n; }
};

}  // namespace taskgroup::detail
