// trace_recorder's file: the recorded spans as Chrome trace-event JSON
// with the run's W3C ids (include/taskgroup/trace_recorder.hpp says the
// layout).
#include "session/trace_state.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

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

void trace_recorder::state::compute_metadata_locked(std::int64_t pid, json::array& events) const {
  if (compute_threads_.empty()) return;
  events.emplace_back(tr_metadata("process_name", pid, 0, json::object{{"name", "compute"}}));
  events.emplace_back(tr_metadata("process_sort_index", pid, 0, json::object{{"sort_index", pid}}));
  for (std::size_t c = 1; c <= compute_threads_.size(); ++c) {
    const auto tid = static_cast<std::int64_t>(c);
    const std::string name = "compute thread " + std::to_string(c);
    events.emplace_back(tr_metadata("thread_name", pid, tid, json::object{{"name", name}}));
    events.emplace_back(tr_metadata("thread_sort_index", pid, tid, json::object{{"sort_index", tid}}));
  }
}

json::object trace_recorder::state::other_data_locked(const trace_context& run) const {
  json::object other{{"trace_id", run.trace_id_hex()}, {"run_span_id", run.parent_id_hex()}};
  if (dropped_ > 0) other["dropped_spans"] = static_cast<std::int64_t>(dropped_);
  other["origin_unix_ns"] = origin_unix_ns_;
  if (rank_ >= 0) other["rank"] = rank_;
  if (!clocks_.empty()) {
    json::array clocks;
    for (const clock_note& c : clocks_) {
      clocks.emplace_back(
          json::object{{"rank", c.rank}, {"offset_ns", c.offset_ns}, {"round_trip_ns", c.round_trip_ns}});
    }
    other["rank_clocks"] = std::move(clocks);
  }
  return other;
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

  // The compute threads: a process after the nodes.
  const auto compute_pid = static_cast<std::int64_t>(nodes_.size() + 1);
  compute_metadata_locked(compute_pid, events);
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
  json::object other = other_data_locked(run);
  out["otherData"] = std::move(other);
  return out;
}

}  // namespace taskgroup
