// trace_recorder: a run's events, recorded as they come (trace_file.cpp
// writes them as a Chrome trace-event file; include/taskgroup/trace_recorder.hpp
// says its layout).
#include <taskgroup/trace_recorder.hpp>

#include "session/trace_state.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>

namespace taskgroup {

namespace json = boost::json;

trace_recorder::state::state(std::size_t max_spans) : max_spans_(max_spans) {}

std::int64_t trace_recorder::state::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - origin_).count();
}

std::size_t trace_recorder::state::node_index_locked(std::string_view node) {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i] == node) return i;
  }
  nodes_.emplace_back(node);
  return nodes_.size() - 1;
}

std::size_t trace_recorder::state::track_locked(std::string_view node, std::string_view task) {
  auto key = std::make_pair(std::string(node), std::string(task));
  auto it = track_index_.find(key);
  if (it != track_index_.end()) return it->second;
  (void)node_index_locked(node);
  tracks_.push_back(track{key.first, key.second});
  track_index_.emplace(std::move(key), tracks_.size() - 1);
  return tracks_.size() - 1;
}

void trace_recorder::state::run_begin(const event_source& /*at*/,
                                      const std::vector<std::pair<std::string, std::string>>& tasks) {
  std::lock_guard lock(mutex_);
  // Nodes (processes) and tasks (threads) in the run's order, so that pids
  // and thread order do not depend on which thread reports first.
  for (const auto& [task, node] : tasks) (void)track_locked(node, task);
}

void trace_recorder::state::begin(kind k, std::string_view task, std::string_view node, std::string_view name) {
  const std::int64_t t = now_ns();
  std::lock_guard lock(mutex_);
  const std::size_t tr = track_locked(node, task);
  open_[std::make_tuple(tr, k, std::string(name))].push_back(t);
}

void trace_recorder::state::end(kind k, std::string_view task, std::string_view node, std::string_view name,
                                const status* result, std::int64_t iterations) {
  const std::int64_t t = now_ns();
  std::lock_guard lock(mutex_);
  const std::size_t tr = track_locked(node, task);
  auto it = open_.find(std::make_tuple(tr, k, std::string(name)));
  if (it == open_.end() || it->second.empty()) return;  // an end without a begin: ignored
  const std::int64_t start = it->second.back();
  it->second.pop_back();
  if (it->second.empty()) open_.erase(it);
  if (spans_.size() >= max_spans_) {
    ++dropped_;
    return;
  }
  span s{tr, k, std::string(name), start, t};
  s.iterations = iterations;
  if (result != nullptr && !*result) s.error = result->error().message;
  spans_.push_back(std::move(s));
}

void trace_recorder::state::task_begin(const event_source& at) { begin(kind::task, at.task, at.node, at.task); }

void trace_recorder::state::task_end(const event_source& /*at*/, const task_report& report) {
  const std::int64_t t = now_ns();
  std::lock_guard lock(mutex_);
  const std::size_t tr = track_locked(report.node, report.name);
  auto it = open_.find(std::make_tuple(tr, kind::task, report.name));
  if (it == open_.end() || it->second.empty()) return;
  const std::int64_t start = it->second.back();
  it->second.pop_back();
  if (it->second.empty()) open_.erase(it);
  // Task spans are kept even past the limit: there are few of them.
  span s{tr, kind::task, report.name, start, t};
  if (report.failure) s.error = report.failure->message;
  spans_.push_back(std::move(s));
}

void trace_recorder::state::step_begin(const event_source& at, std::string_view step) {
  begin(kind::step, at.task, at.node, step);
}
void trace_recorder::state::step_end(const event_source& at, std::string_view step, std::uint64_t iterations,
                                     const status& result) {
  end(kind::step, at.task, at.node, step, &result, static_cast<std::int64_t>(iterations));
}
void trace_recorder::state::net_begin(const event_source& at, std::string_view net) {
  begin(kind::net, at.task, at.node, net);
}
void trace_recorder::state::net_end(const event_source& at, std::string_view net, const status& result) {
  end(kind::net, at.task, at.node, net, &result, -1);
}
void trace_recorder::state::report_begin(const event_source& at, std::string_view step) {
  begin(kind::report, at.task, at.node, step);
}
void trace_recorder::state::report_end(const event_source& at, std::string_view step, const status& result) {
  end(kind::report, at.task, at.node, step, &result, -1);
}

void trace_recorder::state::retry_wait(const event_source& at, std::string_view step, int next_attempt,
                                       int max_attempts, std::chrono::microseconds wait, const error& after) {
  const std::int64_t t = now_ns();
  std::lock_guard lock(mutex_);
  const std::size_t tr = track_locked(at.node, at.task);
  if (spans_.size() >= max_spans_) {
    ++dropped_;
    return;
  }
  std::string name = "retry ";
  name += step.empty() ? std::string_view(at.task) : step;
  name += " (attempt " + std::to_string(next_attempt) + " of " + std::to_string(max_attempts) + ")";
  span s{tr, kind::retry, std::move(name), t, t + std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count()};
  s.error = after.message;
  spans_.push_back(std::move(s));
}

void trace_recorder::state::offload_begin(const event_source& at, std::string_view op) {
  const std::int64_t t = now_ns();
  std::lock_guard lock(mutex_);
  const std::size_t tr = track_locked(at.node, at.task);
  open_offloads_[std::this_thread::get_id()].push_back(open_offload{tr, std::string(op), t});
}

void trace_recorder::state::offload_end(const event_source& /*at*/, std::string_view /*op*/, const status& result) {
  const std::int64_t t = now_ns();
  const std::thread::id self = std::this_thread::get_id();
  std::lock_guard lock(mutex_);
  auto it = open_offloads_.find(self);
  if (it == open_offloads_.end() || it->second.empty()) return;  // an end without a begin: ignored
  open_offload o = std::move(it->second.back());
  it->second.pop_back();
  if (it->second.empty()) open_offloads_.erase(it);
  if (spans_.size() >= max_spans_) {
    ++dropped_;
    return;
  }
  span s{o.track, kind::offload, std::move(o.op), o.begin_ns, t};
  s.compute = compute_thread_locked(self);
  if (!result) s.error = result.error().message;
  spans_.push_back(std::move(s));
}

std::size_t trace_recorder::state::compute_thread_locked(std::thread::id id) {
  auto at = std::find(compute_threads_.begin(), compute_threads_.end(), id);
  if (at == compute_threads_.end()) at = compute_threads_.insert(at, id);
  return static_cast<std::size_t>(at - compute_threads_.begin()) + 1;
}

void trace_recorder::state::rank_clock(int rank, std::chrono::nanoseconds offset, std::chrono::nanoseconds round_trip) {
  std::lock_guard lock(mutex_);
  clocks_.push_back(clock_note{rank, offset.count(), round_trip.count()});
}

trace_recorder::trace_recorder(std::size_t max_spans) : s_(std::make_unique<state>(max_spans)) {}
trace_recorder::~trace_recorder() = default;

void trace_recorder::run_begin(const event_source& at, const std::vector<std::pair<std::string, std::string>>& tasks) {
  s_->run_begin(at, tasks);
}
void trace_recorder::task_begin(const event_source& at) { s_->task_begin(at); }
void trace_recorder::task_end(const event_source& at, const task_report& report) { s_->task_end(at, report); }
void trace_recorder::step_begin(const event_source& at, std::string_view step) { s_->step_begin(at, step); }
void trace_recorder::step_end(const event_source& at, std::string_view step, std::uint64_t iterations,
                              const status& result) {
  s_->step_end(at, step, iterations, result);
}
void trace_recorder::net_begin(const event_source& at, std::string_view net) { s_->net_begin(at, net); }
void trace_recorder::net_end(const event_source& at, std::string_view net, const status& result) {
  s_->net_end(at, net, result);
}
void trace_recorder::report_begin(const event_source& at, std::string_view step) { s_->report_begin(at, step); }
void trace_recorder::report_end(const event_source& at, std::string_view step, const status& result) {
  s_->report_end(at, step, result);
}
void trace_recorder::retry_wait(const event_source& at, std::string_view step, int next_attempt, int max_attempts,
                                std::chrono::microseconds wait, const error& after) {
  s_->retry_wait(at, step, next_attempt, max_attempts, wait, after);
}
void trace_recorder::offload_begin(const event_source& at, std::string_view op) { s_->offload_begin(at, op); }
void trace_recorder::offload_end(const event_source& at, std::string_view op, const status& result) {
  s_->offload_end(at, op, result);
}
void trace_recorder::rank_clock(const event_source& /*at*/, int rank, std::chrono::nanoseconds offset,
                                std::chrono::nanoseconds round_trip) {
  s_->rank_clock(rank, offset, round_trip);
}
void trace_recorder::set_rank(int rank) {
  std::lock_guard lock(s_->mutex_);
  s_->rank_ = rank;
}
std::string trace_recorder::to_json(const trace_context& run) const { return json::serialize(s_->to_json(run)); }

}  // namespace taskgroup
