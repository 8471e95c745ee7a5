#include <taskgroup/operator.hpp>
#include <taskgroup/run_context.hpp>

#include "ops/run_scope.hpp"

#include <atomic>
#include <memory>
#include <new>

namespace taskgroup {

namespace detail {

constinit thread_local const run_context* current_run [[gnu::tls_model("initial-exec")]] = nullptr;

std::uint64_t run_scope::identity() const noexcept {
  std::uint64_t mine = id.load(std::memory_order_relaxed);
  if (mine != 0) return mine;
  static std::atomic<std::uint64_t> last{0};
  const std::uint64_t fresh = last.fetch_add(1, std::memory_order_relaxed) + 1;
  // Two first readers at once: one number wins, the other is dropped.
  return id.compare_exchange_strong(mine, fresh, std::memory_order_relaxed) ? fresh : mine;
}

run_scope::~run_scope() {
  delete counts.load(std::memory_order_acquire);
  delete offload_tally.load(std::memory_order_acquire);
}

void run_scope::offloaded(std::chrono::nanoseconds waited) const noexcept {
  offloads* t = offload_tally.load(std::memory_order_acquire);
  if (t == nullptr) {
    auto made = std::unique_ptr<offloads>(new (std::nothrow) offloads);
    if (!made) return;
    offloads* expected = nullptr;
    // Two first offloads at once: one tally wins, the other is dropped.
    t = offload_tally.compare_exchange_strong(expected, made.get(), std::memory_order_acq_rel) ? made.release()
                                                                                               : expected;
  }
  if (waited.count() < 0) waited = std::chrono::nanoseconds(0);
  t->sum_ns.fetch_add(waited.count(), std::memory_order_relaxed);
  t->buckets[duration_histogram::bucket_of(waited)].fetch_add(1, std::memory_order_relaxed);
}

duration_histogram run_scope::offload_waits() const noexcept {
  duration_histogram h;
  const offloads* t = offload_tally.load(std::memory_order_acquire);
  if (t == nullptr) return h;
  for (std::size_t i = 0; i < h.counts.size(); ++i) h.counts[i] = t->buckets[i].load(std::memory_order_relaxed);
  h.sum = std::chrono::nanoseconds(t->sum_ns.load(std::memory_order_relaxed));
  return h;
}

run_scope::counters& run_scope::counting() const {
  if (counters* c = counts.load(std::memory_order_acquire)) return *c;
  auto made = std::make_unique<counters>();
  counters* expected = nullptr;
  // Two first counters at once: one block wins, the other is dropped.
  if (counts.compare_exchange_strong(expected, made.get(), std::memory_order_acq_rel)) return *made.release();
  return *expected;
}

namespace {
// The counters of calls made outside any run.
run_scope& no_run() {
  static run_scope none;
  return none;
}
}  // namespace

}  // namespace detail

std::uint64_t run_context::id() const noexcept { return run_ != nullptr ? run_->identity() : 0; }

std::optional<run_context::clock::time_point> run_context::deadline() const noexcept {
  if (run_ == nullptr) return std::nullopt;
  return run_->deadline;
}

const trace_context& run_context::trace() const noexcept {
  static const trace_context none;
  return run_ != nullptr ? run_->trace : none;
}

std::string_view run_context::group_name() const noexcept { return run_ != nullptr ? run_->group : std::string_view(); }

std::uint64_t run_context::count(const void* key) const {
  detail::run_scope::counters& c = (run_ != nullptr ? *run_ : detail::no_run()).counting();
  const std::lock_guard<std::mutex> hold(c.lock);
  return ++c.counts[key];
}

const run_context& op_context::run() const noexcept {
  static const run_context none;
  const run_context* c = detail::current_run;
  return c != nullptr ? *c : none;
}

}  // namespace taskgroup
