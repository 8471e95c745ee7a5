// taskgroup command: a run as a Chrome trace-event file (opens in Perfetto
// and chrome://tracing).
//
// Layout of the file, `{"traceEvents": [...], "displayTimeUnit": "ms"}`:
// - a process per node: pid = the node's index in the run (1, 2, ... in
//   the order the run lists them), named by a `process_name` metadata event;
// - a thread per task, named after the task's full name (`thread_name`),
//   and a thread "node" for the node's own work (local init and exit, group
//   report steps); concurrent work inside one task (instances, concurrent
//   substeps) that does not nest goes to extra threads named
//   `<task> #2`, `#3`, ...;
// - complete events ("ph": "X", ts and dur in microseconds since the run
//   began) with "cat" = "task", "step" (args: iterations), "net" or
//   "report"; failed spans carry args.error;
// - W3C trace context ids: "otherData" names the run's trace
//   ({"trace_id": 32 hex, "run_span_id": 16 hex}, as in its report and
//   its traceparent), and every span has args.span_id (16 hex, fresh) and
//   args.parent_span_id: a task's (and the node's own work's) the run's
//   span, the other spans of a task that task's span.
//
// The observer only sees names, so begin and end events of concurrent
// spans with the same name on the same task are paired last-in first-out
// (which keeps them nested); their exact boundaries may be swapped.
// After `max_spans` spans further ones are counted, not kept
// ("otherData": {"dropped_spans": n}).
//
// Threading: thread-safe (one mutex); callbacks are cheap (a clock read and
// an append).
#pragma once

#include <taskgroup/run_observer.hpp>
#include <taskgroup/run_report.hpp>
#include <taskgroup/trace_context.hpp>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace taskgroup::cli {

class trace_recorder final : public run_observer {
 public:
  explicit trace_recorder(std::size_t max_spans = 2'000'000);

  void run_begin(const event_source& at, const std::vector<std::pair<std::string, std::string>>& tasks) override;
  void task_begin(const event_source& at) override;
  void task_end(const event_source& at, const task_report& report) override;
  void step_begin(const event_source& at, std::string_view step) override;
  void step_end(const event_source& at, std::string_view step, std::uint64_t iterations, const status& result) override;
  void net_begin(const event_source& at, std::string_view net) override;
  void net_end(const event_source& at, std::string_view net, const status& result) override;
  void report_begin(const event_source& at, std::string_view step) override;
  void report_end(const event_source& at, std::string_view step, const status& result) override;
  /// A wait before a retry: a span of category "retry" over the planned
  /// wait, named after the attempt it leads to, with the error it follows.
  void retry_wait(const event_source& at, std::string_view step, int next_attempt, int max_attempts,
                  std::chrono::microseconds wait, const error& after) override;

  /// The trace so far, of the run whose trace context is `run` (its
  /// trace id, and as parent id the run's own span id:
  /// `run_report::trace`). Spans still open are closed at the current time
  /// with args.unfinished = true.
  [[nodiscard]] boost::json::value to_json(const trace_context& run);

 private:
  using clock = std::chrono::steady_clock;
  enum class kind : std::uint8_t { task, step, net, report, retry };
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
    std::string span_id;  // given as the file is written
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
  std::vector<span> spans_locked(std::int64_t now) const;
  // `s` as a complete event ("ph": "X") on thread `tid` of its node.
  // `parent`: its parent span's id.
  boost::json::object span_event_locked(const span& s, std::int64_t tid, const std::string& parent);

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
};

}  // namespace taskgroup::cli
