// taskgroup: the run a kernel runs for (`op_context::run`).
//
// Ops are bound once and may serve many runs: a net bound in a node's
// workspace is shared by the runs that overlap there, and a cached
// instance serves the next run. What belongs to one run reaches a kernel
// each time it runs, through `op_context::run()`: the run's identity, its
// deadline, the attempt of the enclosing retried task or step, and
// counters that belong to the run (not to a workspace a retry replaces).
//
// Threading: a run's context is made by its session and read by its
// kernels; `count` is thread-safe, the rest is immutable.
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/trace_context.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace taskgroup {

namespace detail {
struct run_scope;
struct observation;
}  // namespace detail

/// What a kernel knows of the run it runs for.
///
/// Valid during the kernel's `run()`, during its `start()` (for the whole
/// of a callback-form op's run: the run outlives its pending ops), and in
/// `run_async` until its first suspension: copy the values an
/// asynchronous kernel needs later (they are plain values). An op run
/// outside any session's run (a net run directly, `net_instance::run`)
/// sees a context with `id() == 0`, no deadline and attempt 1 of 1.
/// Not copyable: read what you need.
class TASKGROUP_API run_context {
 public:
  using clock = std::chrono::steady_clock;

  /// A context of attempt `attempt` of `max_attempts` within the run
  /// `run` (null: no run). Made by the sessions and the step drivers.
  /// `offloads`: where its offloaded ops are told to the run's observer
  /// (`observe::offloads`), null when not asked.
  explicit run_context(const detail::run_scope* run = nullptr, int attempt = 1, int max_attempts = 1,
                       const detail::observation* offloads = nullptr) noexcept
      : run_(run), offloads_(offloads), attempt_(attempt), max_attempts_(max_attempts) {}
  run_context(const run_context&) = delete;
  run_context& operator=(const run_context&) = delete;

  /// The run's identity: unique among the runs of this process; 0 outside
  /// a run.
  [[nodiscard]] std::uint64_t id() const noexcept;
  /// When the run's own deadline (`run_options::timeout`) expires, if it
  /// has one. An I/O op bounds its own wait by it.
  [[nodiscard]] std::optional<clock::time_point> deadline() const noexcept;
  /// The attempt now running of the innermost enclosing task or step with
  /// a retry policy (`retry_policy`): 1 for the first, and 1 when none
  /// retries.
  [[nodiscard]] int attempt() const noexcept { return attempt_; }
  /// That policy's `max_attempts` (1 when none retries).
  [[nodiscard]] int max_attempts() const noexcept { return max_attempts_; }
  /// The run's trace context (W3C trace context): its trace id, taken from
  /// `run_options::trace_parent` or fresh, and as `parent_id` the run's own
  /// span id. An I/O op forwards `trace().traceparent()` as the
  /// `traceparent` header of the request it makes, so that the service's
  /// spans are children of the run. All zero outside a run (`valid()`
  /// false).
  [[nodiscard]] const trace_context& trace() const noexcept;
  /// The name of the run's group (`task_group::name`): empty for an
  /// unnamed group and outside a run. Valid while the run is.
  [[nodiscard]] std::string_view group_name() const noexcept;
  /// Counts one more event of `key` (any address that names it, e.g. the
  /// op's `op_def`) in this run, across every attempt and task of the run,
  /// and returns the count (1 the first time). Outside a run, counts in a
  /// process-wide table. Errors: throws `std::bad_alloc`. Thread-safe.
  std::uint64_t count(const void* key) const;

  /// The run of this context (null outside a run): for the library.
  [[nodiscard]] const detail::run_scope* scope() const noexcept { return run_; }
  /// Where its offloaded ops are told (null: nowhere): for the library.
  [[nodiscard]] const detail::observation* offloads_told() const noexcept { return offloads_; }

 private:
  const detail::run_scope* run_;
  const detail::observation* offloads_;
  int attempt_;
  int max_attempts_;
};

}  // namespace taskgroup
