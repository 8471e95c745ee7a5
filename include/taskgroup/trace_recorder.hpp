// taskgroup: a run as a Chrome trace-event file (open it in Perfetto or
// chrome://tracing), named by the run's W3C trace: what `taskgroup run
// --trace` writes, and what a server attaches to the runs it samples
// (docs/observing.md, "Trace files").
//
// Layout of the file, `{"traceEvents": [...], "displayTimeUnit": "ms",
// "otherData": {...}}`:
// - a process per node: pid = the node's index in the run (1, 2, ... in
//   the order the run lists them), named by a `process_name` metadata event;
// - a thread per task, named after the task's full name (`thread_name`),
//   and a thread "node" for the node's own work (local init and exit, group
//   report steps); concurrent work inside one task (instances, concurrent
//   substeps) that does not nest goes to extra threads named
//   `<task> #2`, `#3`, ...;
// - after the nodes, a process "compute" with a thread per compute thread
//   that ran an offloaded op of the run ("compute thread 1", ... in order
//   of first use), holding the offloaded ops' spans;
// - complete events ("ph": "X", ts and dur in microseconds since the
//   recorder was made) with "cat" = "task", "step" (args: iterations),
//   "net", "report", "retry" (the wait before a retry, over its planned
//   length) or "offload" (an offloaded op on its compute thread, named
//   after the op's type; args.task and args.node name the task that ran
//   it); failed spans carry args.error;
// - W3C trace context ids: "otherData" names the run's trace
//   ({"trace_id": 32 hex, "run_span_id": 16 hex}, as in its report and its
//   traceparent), and every span has args.span_id (16 hex, fresh) and
//   args.parent_span_id: a task's (and the node's own work's) the run's
//   span, the other spans of a task (its offloaded ops' included) that
//   task's span;
// - for merging the files of an MPI run's ranks (`merge_traces`):
//   "otherData" also holds "origin_unix_ns" (the system clock, in
//   nanoseconds since the epoch, at ts 0), "rank" (when `set_rank` was
//   called) and, on rank 0, "rank_clocks": [{"rank", "offset_ns",
//   "round_trip_ns"}] (each rank's clock against this one's,
//   `run_observer::rank_clock`).
//
// The observer only sees names, so begin and end events of concurrent
// spans with the same name on the same task are paired last-in first-out
// (which keeps them nested); their exact boundaries may be swapped. After
// `max_spans` spans further ones are counted, not kept ("otherData":
// {"dropped_spans": n}).
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/error.hpp>

#include <taskgroup/run_observer.hpp>
#include <taskgroup/run_report.hpp>
#include <taskgroup/trace_context.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace taskgroup {

/// Records what one run does, for a trace file: give it to the run as its
/// observer (`run_options::observer`; every kind of event), and once the
/// run has ended write `to_json(report.trace)`. A server samples by giving
/// a recorder to one run in N only: a run without an observer keeps every
/// fast path. One recorder follows one run.
///
/// Threading: thread-safe (one mutex); each event costs a clock read and
/// an append under it.
class TASKGROUP_API trace_recorder final : public run_observer {
 public:
  /// Keeps at most `max_spans` spans (task spans always), counting the
  /// others.
  explicit trace_recorder(std::size_t max_spans = 2'000'000);
  ~trace_recorder() override;
  trace_recorder(const trace_recorder&) = delete;
  trace_recorder& operator=(const trace_recorder&) = delete;

  void run_begin(const event_source& at, const std::vector<std::pair<std::string, std::string>>& tasks) override;
  void task_begin(const event_source& at) override;
  void task_end(const event_source& at, const task_report& report) override;
  void step_begin(const event_source& at, std::string_view step) override;
  void step_end(const event_source& at, std::string_view step, std::uint64_t iterations, const status& result) override;
  void net_begin(const event_source& at, std::string_view net) override;
  void net_end(const event_source& at, std::string_view net, const status& result) override;
  void report_begin(const event_source& at, std::string_view step) override;
  void report_end(const event_source& at, std::string_view step, const status& result) override;
  void retry_wait(const event_source& at, std::string_view step, int next_attempt, int max_attempts,
                  std::chrono::microseconds wait, const error& after) override;
  void offload_begin(const event_source& at, std::string_view op) override;
  void offload_end(const event_source& at, std::string_view op, const status& result) override;
  void rank_clock(const event_source& at, int rank, std::chrono::nanoseconds offset,
                  std::chrono::nanoseconds round_trip) override;

  /// Names the MPI rank whose part of the run this recorder follows
  /// ("otherData": {"rank": r}), for `merge_traces`. Thread-safe.
  void set_rank(int rank);

  /// The trace so far as JSON text, of the run whose trace context is
  /// `run` (`run_report::trace`: its trace id, and as parent id the run's
  /// own span). Spans still open (a run cut short) are closed at the
  /// current time with args.unfinished = true. Errors: throws
  /// `std::bad_alloc`.
  [[nodiscard]] std::string to_json(const trace_context& run) const;

 private:
  struct state;
  std::unique_ptr<state> s_;
};

/// One trace file to merge: its name (for errors) and its JSON text.
struct trace_file {
  std::string name;
  std::string json;
};

/// Merges the trace files that the ranks of one MPI run wrote (each a
/// `trace_recorder`'s, `set_rank` naming its rank; `taskgroup run --trace`
/// under MPI writes one per rank) into one file on rank 0's clock: each
/// rank's spans are moved by the difference of the files' origins and by
/// that rank's clock offset as rank 0 estimated it ("rank_clocks"; 0 when
/// it has none, and the merged file says so). Every node keeps its
/// process, renamed "<node> (rank r)", and so does each rank's "compute";
/// rank 0's record of another rank's tasks (which rank 0 only sees end)
/// gives way to that rank's own. The merged "otherData" holds the run's
/// trace id, rank 0's run span and "ranks": [{"rank", "offset_ns",
/// "round_trip_ns", "estimated"}]; times are moved up when one would be
/// below 0 (a rank that began recording before rank 0).
///
/// Errors (`errc::bad_argument`, naming the file): a text that is not a
/// trace file (not JSON, no "traceEvents" array, an event without an
/// integer "pid", no "otherData" with "trace_id" and "origin_unix_ns"), a
/// file of another trace than the first one's, two files of one rank, no
/// file of rank 0 (a file without "rank" counts as rank 0's), no file at
/// all. Threading: free.
[[nodiscard]] TASKGROUP_API result<std::string> merge_traces(const std::vector<trace_file>& files);

}  // namespace taskgroup
