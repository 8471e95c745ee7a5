#include "session/metrics_book.hpp"

#include "ops/run_scope.hpp"

#include <memory>

namespace taskgroup::detail {

namespace {

constexpr auto relaxed = std::memory_order_relaxed;

// The shard of the calling thread: handed out in turn at a thread's first
// count, the same for every series.
std::size_t my_shard() noexcept {
  constinit thread_local std::size_t mine [[gnu::tls_model("initial-exec")]] = metrics_series::shards;
  if (mine == metrics_series::shards) [[unlikely]] {
    static std::atomic<std::size_t> next{0};
    mine = next.fetch_add(1, relaxed) % metrics_series::shards;
  }
  return mine;
}

}  // namespace

void metrics_series::histogram_cells::add(const duration_histogram& h) noexcept {
  for (std::size_t i = 0; i < h.counts.size(); ++i) {
    if (h.counts[i] != 0) counts[i].fetch_add(h.counts[i], relaxed);
  }
  if (h.sum.count() != 0) sum_ns.fetch_add(h.sum.count(), relaxed);
}

void metrics_series::histogram_cells::add(std::chrono::nanoseconds d) noexcept {
  if (d.count() < 0) d = std::chrono::nanoseconds(0);
  counts[duration_histogram::bucket_of(d)].fetch_add(1, relaxed);
  sum_ns.fetch_add(d.count(), relaxed);
}

void metrics_series::histogram_cells::read_into(duration_histogram& h) const noexcept {
  for (std::size_t i = 0; i < h.counts.size(); ++i) h.counts[i] += counts[i].load(relaxed);
  h.sum += std::chrono::nanoseconds(sum_ns.load(relaxed));
}

void metrics_series::add(const run_tally& t, const run_scope* scope) noexcept {
  shard& s = shards_[my_shard()];
  s.runs[static_cast<std::size_t>(t.outcome)].fetch_add(1, relaxed);
  for (std::size_t i = 0; i < t.tasks.size(); ++i) {
    if (t.tasks[i] != 0) s.tasks[i].fetch_add(t.tasks[i], relaxed);
  }
  if (t.admitted) {
    s.latency.add(t.latency);
    s.queue_wait.add(t.queue_wait);
  }
  s.task_duration.add(t.task_duration);
  std::uint64_t retried = t.retried;
  if (scope != nullptr) {
    retried += scope->step_retries.load(relaxed);
    if (scope->offload_tally.load(std::memory_order_acquire) != nullptr) [[unlikely]] {
      const duration_histogram waits = scope->offload_waits();
      s.offloaded.fetch_add(waits.count(), relaxed);
      s.offload_wait.add(waits);
    }
  }
  if (retried != 0) s.retried.fetch_add(retried, relaxed);
}

group_metrics metrics_series::read() const {
  group_metrics m;
  m.group = label_;
  for (const shard& s : shards_) {
    for (std::size_t i = 0; i < m.runs.size(); ++i) m.runs[i] += s.runs[i].load(relaxed);
    for (std::size_t i = 0; i < m.tasks.size(); ++i) m.tasks[i] += s.tasks[i].load(relaxed);
    m.attempts_retried += s.retried.load(relaxed);
    m.offloaded_ops += s.offloaded.load(relaxed);
    s.latency.read_into(m.run_latency);
    s.queue_wait.read_into(m.queue_wait);
    s.task_duration.read_into(m.task_duration);
    s.offload_wait.read_into(m.offload_wait);
  }
  return m;
}

metrics_book::metrics_book() { series_for(std::string()); }

metrics_series& metrics_book::series_for(const std::string& name) {
  const std::lock_guard hold(lock_);
  if (auto it = by_name_.find(name); it != by_name_.end()) return *it->second;
  // The unnamed groups' label is not one of the named ones counted.
  if (!name.empty() && by_name_.size() > session_metrics::max_group_labels) {
    if (other_ == nullptr) {
      // A group named "other" shares its label with the names past the limit.
      auto named = by_name_.find("other");
      other_ = named != by_name_.end() ? named->second : &series_.emplace_back("other");
    }
    return *other_;
  }
  metrics_series& made = series_.emplace_back(name);
  try {
    by_name_.emplace(name, &made);
  } catch (...) {
    series_.pop_back();
    throw;
  }
  return made;
}

std::vector<group_metrics> metrics_book::read() const {
  std::vector<const metrics_series*> all;
  {
    const std::lock_guard hold(lock_);
    all.reserve(series_.size());
    for (const metrics_series& s : series_) all.push_back(&s);
  }
  // Series are never dropped: read without the lock.
  std::vector<group_metrics> out;
  out.reserve(all.size());
  for (const metrics_series* s : all) out.push_back(s->read());
  return out;
}

}  // namespace taskgroup::detail
