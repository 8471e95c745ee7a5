// trace_recorder: a run's events as a Chrome trace-event file with the
// run's W3C ids (include/taskgroup/trace_recorder.hpp says the layout).
#include <taskgroup/trace_recorder.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>

namespace taskgroup {

namespace json = boost::json;

namespace {

const char* tr_category(int k) {
  switch (k) {
    case 0: return "task";
    case 1: return "step";
    case 2: return "net";
    case 3: return "report";
    case 4: return "retry";
    default: return "offload";
  }
}

double tr_micros(std::int64_t ns) { return static_cast<double>(ns) / 1000.0; }

json::object tr_metadata(const char* name, std::int64_t pid, std::int64_t tid, json::object args) {
  return json::object{{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

}  // namespace

// What a recorder keeps: its spans, tracks and nodes, under one mutex.
struct trace_recorder::state {
  explicit state(std::size_t max_spans);

  void run_begin(const event_source& at, const std::vector<std::pair<std::string, std::string>>& tasks);
  void task_begin(const event_source& at);
  void task_end(const event_source& at, const task_report& report);
  void step_begin(const event_source& at, std::string_view step);
  void step_end(const event_source& at, std::string_view step, std::uint64_t iterations, const status& result);
  void net_begin(const event_source& at, std::string_view net);
  void net_end(const event_source& at, std::string_view net, const status& result);
  void report_begin(const event_source& at, std::string_view step);
  void report_end(const event_source& at, std::string_view step, const status& result);
  /// A wait before a retry: a span of category "retry" over the planned
  /// wait, named after the attempt it leads to, with the error it follows.
  void retry_wait(const event_source& at, std::string_view step, int next_attempt, int max_attempts,
                  std::chrono::microseconds wait, const error& after);
  /// An offloaded op on this (compute) thread: a span of category
  /// "offload" on the thread's track of the "compute" process, linked to
  /// the task (`at`) that ran it.
  void offload_begin(const event_source& at, std::string_view op);
  void offload_end(const event_source& at, std::string_view op, const status& result);

  /// The trace so far, of the run whose trace context is `run` (its
  /// trace id, and as parent id the run's own span id:
  /// `run_report::trace`). Spans still open are closed at the current time
  /// with args.unfinished = true.
  boost::json::value to_json(const trace_context& run);

  using clock = std::chrono::steady_clock;
  enum class kind : std::uint8_t { task, step, net, report, retry, offload };
  struct span {
    span(std::size_t t, kind kd, std::string n, std::int64_t b, std::int64_t e)
        : track(t), k(kd), name(std::move(n)), begin_ns(b), end_ns(e) {}
    std::size_t track;
    kind k;
    std::string name;
    std::int64_t begin_ns;
    std::int64_t end_ns;
    std::int64_t iterations = -1;  // steps only
    std::string error;
    bool unfinished = false;
    std::size_t compute = 0;  // offload spans: 1 + the compute thread's index
    std::string span_id;      // given as the file is written
  };
  struct track {
    std::string node;
    std::string task;  // empty: the node's own work
  };

  std::int64_t now_ns() const;
  std::size_t track_locked(std::string_view node, std::string_view task);
  std::size_t node_index_locked(std::string_view node);
  void begin(kind k, std::string_view task, std::string_view node, std::string_view name);
  void end(kind k, std::string_view task, std::string_view node, std::string_view name, const status* result,
           std::int64_t iterations);
  // Every span so far, the open ones closed at `now` (args.unfinished), by
  // start time.
  std::vector<span> spans_locked(std::int64_t now);
  // The compute thread `id`'s number (1, 2, ... in order of first use).
  std::size_t compute_thread_locked(std::thread::id id);
  // Lanes per track: each lane is a stack of open end times; a span goes
  // to the first lane where it nests, so every thread of the file nests
  // properly even when a task runs work concurrently. Fills `lanes` (per
  // track) and returns each span's lane.
  static std::vector<std::size_t> lanes_locked(const std::vector<span>& spans,
                                               std::vector<std::vector<std::vector<std::int64_t>>>& lanes);
  // `s` as a complete event ("ph": "X") on thread `tid` of process `pid`.
  // `parent`: its parent span's id.
  boost::json::object span_event_locked(const span& s, std::int64_t pid, std::int64_t tid, const std::string& parent);

  std::mutex mutex_;  // guards what follows
  clock::time_point origin_ = clock::now();
  std::size_t max_spans_;
  std::size_t dropped_ = 0;
  std::vector<std::string> nodes_;  // index + 1 = pid
  std::vector<track> tracks_;
  std::vector<span> spans_;
  // Open spans per (track, kind, name): begin times, paired LIFO.
  std::map<std::tuple<std::size_t, kind, std::string>, std::vector<std::int64_t>> open_;
  std::map<std::pair<std::string, std::string>, std::size_t, std::less<>> track_index_;
  // The compute threads that ran offloaded ops, in order of first use, and
  // the offloaded ops open on each (begin and end come on one thread).
  struct open_offload {
    std::size_t track;
    std::string op;
    std::int64_t begin_ns;
  };
  std::vector<std::thread::id> compute_threads_;
  std::map<std::thread::id, std::vector<open_offload>> open_offloads_;
};

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

std::vector<trace_recorder::state::span> trace_recorder::state::spans_locked(std::int64_t now) {
  std::vector<span> spans = spans_;
  // Close what is still open (a run cut short by a signal).
  for (const auto& [key, begins] : open_) {
    for (std::int64_t b : begins) {
      span s{std::get<0>(key), std::get<1>(key), std::get<2>(key), b, now};
      s.unfinished = true;
      spans.push_back(std::move(s));
    }
  }
  for (const auto& [thread, open] : open_offloads_) {
    for (const open_offload& o : open) {
      span s{o.track, kind::offload, o.op, o.begin_ns, now};
      s.unfinished = true;
      s.compute = compute_thread_locked(thread);
      spans.push_back(std::move(s));
    }
  }
  // Longest first among equal starts, so that parents precede children.
  std::stable_sort(spans.begin(), spans.end(), [](const span& a, const span& b) {
    if (a.begin_ns != b.begin_ns) return a.begin_ns < b.begin_ns;
    return a.end_ns > b.end_ns;
  });
  return spans;
}

json::object trace_recorder::state::span_event_locked(const span& s, std::int64_t pid, std::int64_t tid,
                                                      const std::string& parent) {
  const track& tr = tracks_[s.track];
  json::object e;
  e["name"] = s.name;
  e["cat"] = tr_category(static_cast<int>(s.k));
  e["ph"] = "X";
  e["ts"] = tr_micros(s.begin_ns);
  e["dur"] = tr_micros(s.end_ns - s.begin_ns);
  e["pid"] = pid;
  e["tid"] = tid;
  json::object args;
  if (!tr.task.empty()) args["task"] = tr.task;
  args["node"] = tr.node;
  if (s.k == kind::step && s.iterations >= 0) args["iterations"] = s.iterations;
  if (!s.error.empty()) args["error"] = s.error;
  if (s.unfinished) args["unfinished"] = true;
  args["span_id"] = s.span_id;
  args["parent_span_id"] = parent;
  e["args"] = std::move(args);
  return e;
}

std::vector<std::size_t> trace_recorder::state::lanes_locked(
    const std::vector<span>& spans, std::vector<std::vector<std::vector<std::int64_t>>>& lanes) {
  std::vector<std::size_t> lane_of(spans.size());
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const span& s = spans[i];
    if (s.k == kind::offload) continue;  // on its compute thread's track
    auto& ls = lanes[s.track];
    std::size_t chosen = ls.size();
    for (std::size_t l = 0; l < ls.size(); ++l) {
      auto& stack = ls[l];
      while (!stack.empty() && stack.back() <= s.begin_ns) stack.pop_back();
      if (stack.empty() || stack.back() >= s.end_ns) {
        chosen = l;
        break;
      }
    }
    if (chosen == ls.size()) ls.emplace_back();
    ls[chosen].push_back(s.end_ns);
    lane_of[i] = chosen;
  }
  return lane_of;
}

json::value trace_recorder::state::to_json(const trace_context& run) {
  std::lock_guard lock(mutex_);
  std::vector<span> spans = spans_locked(now_ns());
  // Span ids; a task's span is the parent of the other spans on its track.
  const std::string run_span = run.parent_id_hex();
  std::vector<std::string> task_span(tracks_.size());
  for (span& s : spans) {
    const auto id = trace_context::fresh_span_id();
    s.span_id = to_hex(id.data(), id.size());
    if (s.k == kind::task && task_span[s.track].empty()) task_span[s.track] = s.span_id;
  }
  auto parent_of = [&](const span& s) -> const std::string& {
    return s.k == kind::task || task_span[s.track].empty() ? run_span : task_span[s.track];
  };
  std::vector<std::vector<std::vector<std::int64_t>>> lanes(tracks_.size());
  const std::vector<std::size_t> lane_of = lanes_locked(spans, lanes);

  // Thread ids: per process, "node" is 1, then each task's lanes in order.
  json::array events;
  std::vector<std::int64_t> next_tid(nodes_.size(), 2);
  std::vector<std::vector<std::int64_t>> tid_of(tracks_.size());
  for (std::size_t n = 0; n < nodes_.size(); ++n) {
    const auto pid = static_cast<std::int64_t>(n + 1);
    events.emplace_back(tr_metadata("process_name", pid, 0, json::object{{"name", nodes_[n]}}));
    events.emplace_back(tr_metadata("process_sort_index", pid, 0, json::object{{"sort_index", pid}}));
    events.emplace_back(tr_metadata("thread_name", pid, 1, json::object{{"name", "node"}}));
    events.emplace_back(tr_metadata("thread_sort_index", pid, 1, json::object{{"sort_index", 1}}));
  }
  for (std::size_t t = 0; t < tracks_.size(); ++t) {
    const std::size_t n = node_index_locked(tracks_[t].node);
    const auto pid = static_cast<std::int64_t>(n + 1);
    if (tracks_[t].task.empty()) {
      tid_of[t].assign(std::max<std::size_t>(lanes[t].size(), 1), 1);
      for (std::size_t l = 1; l < lanes[t].size(); ++l) {
        tid_of[t][l] = next_tid[n]++;
        const std::string name = "node #" + std::to_string(l + 1);
        events.emplace_back(tr_metadata("thread_name", pid, tid_of[t][l], json::object{{"name", name}}));
        events.emplace_back(
            tr_metadata("thread_sort_index", pid, tid_of[t][l], json::object{{"sort_index", tid_of[t][l]}}));
      }
      continue;
    }
    const std::size_t count = std::max<std::size_t>(lanes[t].size(), 1);
    for (std::size_t l = 0; l < count; ++l) {
      const std::int64_t tid = next_tid[n]++;
      tid_of[t].push_back(tid);
      const std::string name = l == 0 ? tracks_[t].task : tracks_[t].task + " #" + std::to_string(l + 1);
      events.emplace_back(tr_metadata("thread_name", pid, tid, json::object{{"name", name}}));
      events.emplace_back(tr_metadata("thread_sort_index", pid, tid, json::object{{"sort_index", tid}}));
    }
  }

  // The compute threads: a process after the nodes, a thread each.
  const auto compute_pid = static_cast<std::int64_t>(nodes_.size() + 1);
  if (!compute_threads_.empty()) {
    events.emplace_back(tr_metadata("process_name", compute_pid, 0, json::object{{"name", "compute"}}));
    events.emplace_back(tr_metadata("process_sort_index", compute_pid, 0, json::object{{"sort_index", compute_pid}}));
    for (std::size_t c = 1; c <= compute_threads_.size(); ++c) {
      const auto tid = static_cast<std::int64_t>(c);
      const std::string name = "compute thread " + std::to_string(c);
      events.emplace_back(tr_metadata("thread_name", compute_pid, tid, json::object{{"name", name}}));
      events.emplace_back(tr_metadata("thread_sort_index", compute_pid, tid, json::object{{"sort_index", tid}}));
    }
  }
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const span& s = spans[i];
    if (s.k == kind::offload) {
      events.emplace_back(span_event_locked(s, compute_pid, static_cast<std::int64_t>(s.compute), parent_of(s)));
      continue;
    }
    const auto pid = static_cast<std::int64_t>(node_index_locked(tracks_[s.track].node) + 1);
    events.emplace_back(span_event_locked(s, pid, tid_of[s.track][lane_of[i]], parent_of(s)));
  }

  json::object out{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  json::object other{{"trace_id", run.trace_id_hex()}, {"run_span_id", run_span}};
  if (dropped_ > 0) other["dropped_spans"] = static_cast<std::int64_t>(dropped_);
  out["otherData"] = std::move(other);
  return out;
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
std::string trace_recorder::to_json(const trace_context& run) const { return json::serialize(s_->to_json(run)); }

}  // namespace taskgroup
