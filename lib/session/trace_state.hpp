// Internal: what a trace_recorder keeps (trace_recorder.cpp records the
// events, trace_file.cpp writes them as the file).
#pragma once

#include <taskgroup/trace_recorder.hpp>

#include <boost/json.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace taskgroup {

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
  void rank_clock(int rank, std::chrono::nanoseconds offset, std::chrono::nanoseconds round_trip);

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
  // The "compute" process (`pid`) and its threads' metadata events.
  void compute_metadata_locked(std::int64_t pid, boost::json::array& events) const;
  // What "otherData" says of the run's trace (`run`) and of this recorder.
  boost::json::object other_data_locked(const trace_context& run) const;
  // `s` as a complete event ("ph": "X") on thread `tid` of process `pid`.
  // `parent`: its parent span's id.
  boost::json::object span_event_locked(const span& s, std::int64_t pid, std::int64_t tid, const std::string& parent);

  std::mutex mutex_;  // guards what follows
  clock::time_point origin_ = clock::now();
  // The system clock at origin_: a span's wall time is origin_unix_ns_ +
  // its ts, so that ranks' files merge.
  std::int64_t origin_unix_ns_ =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  int rank_ = -1;  // set_rank's, -1: none
  struct clock_note {
    int rank;
    std::int64_t offset_ns;
    std::int64_t round_trip_ns;
  };
  std::vector<clock_note> clocks_;
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

}  // namespace taskgroup
