// Internal: what a run shares with its kernels (`run_context`), and how
// the drivers tell a kernel call which run it serves: the context of the
// calls made now on this thread, set around each stretch of kernel calls
// (never across a suspension), so that the op path pays nothing.
#pragma once

#include <taskgroup/duration_histogram.hpp>
#include <taskgroup/run_context.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>

namespace taskgroup::detail {

/// One run's: made by its session for the run, alive until it has ended.
struct run_scope {
  run_scope() = default;
  ~run_scope();
  run_scope(const run_scope&) = delete;
  run_scope& operator=(const run_scope&) = delete;

  /// Its identity: taken from the process-wide sequence when first asked
  /// for (never 0), so that a run no op asks about pays no shared write.
  [[nodiscard]] std::uint64_t identity() const noexcept;

  mutable std::atomic<std::uint64_t> id{0};  // 0 until identity() is first asked
  std::optional<std::chrono::steady_clock::time_point> deadline;
  /// The run's trace context (run_context::trace), set as it arrives.
  trace_context trace;
  /// Its group's name (the run holds the group).
  std::string_view group;
  /// The context of the tasks and steps that do not retry.
  run_context first{this};

  // run_context::count's, made at the first count (most runs never count:
  // a run carries a pointer).
  struct counters {
    std::mutex lock;
    std::map<const void*, std::uint64_t> counts;
  };
  [[nodiscard]] counters& counting() const;
  mutable std::atomic<counters*> counts{nullptr};

  // What the session's metrics take from the run at its end: its
  // offloaded ops (made at the first: most runs offload nothing) and its
  // steps' retries. Written from the threads of its calls.
  struct offloads {
    std::atomic<std::int64_t> sum_ns{0};
    std::array<std::atomic<std::uint64_t>, duration_histogram::bucket_count> buckets{};
  };
  /// An op of the run was offloaded and waited `waited` for a compute
  /// thread. Lost, uncounted, when the tally cannot be made (out of
  /// memory). Thread-safe.
  void offloaded(std::chrono::nanoseconds waited) const noexcept;
  /// The offloaded ops' wait, as counted so far (empty when none was).
  [[nodiscard]] duration_histogram offload_waits() const noexcept;
  mutable std::atomic<offloads*> offload_tally{nullptr};
  /// Attempts of the run's steps that were retried (`execution_step::retry`).
  mutable std::atomic<std::uint32_t> step_retries{0};
};

/// The context of the kernel calls made now on this thread (null: none).
/// Constant-initialized and in the initial-exec model: each read or write
/// is one instruction off the thread pointer, with no wrapper call and no
/// __tls_get_addr (the library's one pointer of static TLS).
extern constinit thread_local const run_context* current_run [[gnu::tls_model("initial-exec")]];

/// Makes `ctx` the context of the kernel calls made on this thread until
/// it goes (then the one before it again).
class run_context_scope {
 public:
  explicit run_context_scope(const run_context* ctx) noexcept : before_(current_run) { current_run = ctx; }
  ~run_context_scope() { current_run = before_; }
  run_context_scope(const run_context_scope&) = delete;
  run_context_scope& operator=(const run_context_scope&) = delete;

 private:
  const run_context* before_;
};

/// Calls `f()` with `ctx` as the context of the kernel calls it makes. A
/// stretch whose caller has set the same context already (a host sets its
/// run's once for all the tasks it starts in a row) costs one read.
template <class F>
decltype(auto) in_run(const run_context* ctx, F&& f) {
  if (current_run == ctx) return f();
  const run_context_scope scope(ctx);
  return f();
}

}  // namespace taskgroup::detail
