// Internal: one run of a group on a local session: its node parts, its
// tasks' records, and the run as a whole on the session's coordinator
// strand (the local session's begin, in session.cpp, checks it first).
#pragma once

#include <taskgroup/detail/run_completion.hpp>
#include <taskgroup/run_report.hpp>
#include <taskgroup/session.hpp>
#include <taskgroup/session_description.hpp>

#include "detail/join.hpp"
#include "ops/run_scope.hpp"
#include "session/admission.hpp"
#include "session/compiled.hpp"
#include "session/metrics_book.hpp"
#include "session/node_run.hpp"
#include "session/records.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/container/small_vector.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace taskgroup::detail {

/// A run's node parts, indexed as its group's nodes: a group of one node
/// keeps its part inside the run (no allocation of its own).
class node_runs {
 public:
  /// `n` parts, each made new. Once.
  void make(std::size_t n) {
    if (n == 1) {
      data_ = &one_.emplace();
    } else {
      many_ = std::make_unique<node_run[]>(n);
      data_ = many_.get();
    }
  }
  node_run& operator[](std::size_t i) noexcept { return data_[i]; }
  const node_run& operator[](std::size_t i) const noexcept { return data_[i]; }

 private:
  std::optional<node_run> one_;
  std::unique_ptr<node_run[]> many_;
  node_run* data_ = nullptr;
};

/// One run. Its nodes are the children of its join (join_core, as a
/// node's tasks and a concurrent step's iterations are), awaited by a
/// callback: the first failure (under run_policy::join) stops the other
/// nodes, the run's deadline and a cancellation from outside stop them
/// all, and the run ends (`round_ended`) once every node has.
///
/// Owned by what waits: the handlers queued for it, the operations of its
/// waiting tasks; an io_context destroyed with any of them pending frees
/// it, the caller's handler uncalled. What is marked "coordinator" is
/// touched on the session's coordinator strand only; each node part on its
/// node's strand.
struct run_state final : join_core<run_state> {
  // The group and options as given (the group's handle is not made anew:
  // a default task_group allocates).
  run_state(task_group g, run_options o)
      : join_core(join_mode::fail_fast), source(std::move(g)), options(std::move(o)) {}

  std::shared_ptr<const compiled_group> group;
  task_group source;  ///< the group as given
  run_options options;
  /// `options.observer`, asked once what it wants when the run starts.
  observation observed;
  const operator_registry* registry = nullptr;
  /// Aligned with group->tasks (one task's inside the run).
  boost::container::small_vector<task_record, 1> records;
  /// Aligned with group->nodes; `node` is null for one that does not take
  /// part (run_options::only_nodes).
  node_runs nodes;
  /// The nodes that take part, in group order: the compiled group's list
  /// of all, or `only`'s (run_options::only_nodes).
  std::span<const std::size_t> active;
  std::vector<std::size_t> only;
  /// The run's coordinator: the strand where the run as a whole begins, is
  /// joined and ends. The session's coordinator strand, or for a group of
  /// one node seen before (compiled_group::only_node()) that node's strand,
  /// `coord_node`: the run then starts its node and hears of its end
  /// inline, as one hop of Asio's own would. Not a copy: the session's
  /// (held through `session_coord`) or its node's, which the session keeps.
  const boost::asio::any_io_executor* coord = nullptr;
  const node_state* coord_node = nullptr;
  /// The session's coordinator strand, where run_probe asks (never a node
  /// strand, which a task may hold), sharing the ownership of the
  /// session's state, which owns the nodes' strands (held as long as the
  /// run is: a probe holds the run only while it asks).
  std::shared_ptr<const boost::asio::any_io_executor> session_coord;
  /// Every node of `group` had been placed on the session's nodes when
  /// the run was initiated (compiled_group::all_placed).
  bool placed = false;
  /// Its place in the session's admission: in flight, queued or neither.
  admission_ticket ticket;
  /// What its kernels see of it (op_context::run): its identity and its
  /// deadline, once armed.
  run_scope scope;
  /// The session's metrics, which count the run as it ends (held through
  /// `session_coord`, as the session's state is).
  metrics_book* metrics = nullptr;
  /// The admission let it begin (the session's begin saw it counted in
  /// flight): its latency and queue wait are counted.
  bool admitted = false;

  // --- the run as a whole, on the coordinator ------------------------------
  run_completion_ptr done;  ///< the caller's handler
  /// The report, made as the run ends, moved out by the caller's handler.
  run_report report;
  /// When the session took it; unset in a run that no session took (an
  /// MPI worker's part): read it through `arrival()`.
  std::chrono::system_clock::time_point arrived{};
  std::chrono::system_clock::time_point started{};
  /// `run_report::arrived`: `arrived`, or `started` in a run that no
  /// session took.
  [[nodiscard]] std::chrono::system_clock::time_point arrival() const noexcept {
    return arrived == std::chrono::system_clock::time_point{} ? started : arrived;
  }
  /// `started` was read in the handler now running (begin's, until it
  /// starts the nodes).
  bool started_fresh = false;
  /// Nodes started and not ended, and one more while start_nodes starts
  /// them. Counted down where each node ends, on its strand: a node that
  /// succeeds and is not the last never goes to the coordinator (its end
  /// changes nothing there), and the last one's end (or a failure, which
  /// the join must see) does, so that the run ends there.
  std::atomic<std::size_t> running{0};
  std::optional<boost::asio::steady_timer> deadline;  ///< run_options::timeout
  std::optional<error> expired;                       ///< the deadline's error, once it fired
  std::optional<error> trace_fault;                   ///< a malformed trace_parent (join_trace)
  bool cancelled_outside = false;                     ///< terminal or partial cancellation from the caller
  bool nodes_started = false;
  /// Set by the caller's cancellation slot as it is emitted, on the
  /// emitting thread: the cancellation reaches the coordinator after the
  /// run's begin (posted first), which must then start no node.
  std::atomic<bool> cancel_asked{false};
  /// Once its nodes start: `started` (system_clock ticks since the epoch),
  /// published so that `async_describe`, on another thread, may then read
  /// what the nodes were laid out with and ask them where their tasks
  /// stand; 0 before.
  std::atomic<std::int64_t> in_view_since{0};

  /// Node i's part has ended with `st` (on its strand): the join is told,
  /// on the coordinator.
  void node_ended(std::size_t i, status st);

  // join_core's hooks, on the coordinator.
  void cancel_running() noexcept;
  void round_ended(status st);

 private:
  friend void start_nodes(const std::shared_ptr<run_state>& rs);
};

/// Gives `rs` its trace context as it arrives (run_scope::trace):
/// `run_trace(options.trace_parent)`, or a fresh trace when that is
/// malformed (`trace_fault` then holds why: the session's begin refuses
/// the run); its report's `trace` and `trace_id` (what
/// its events carry); and its group's name. Errors: out of memory (thrown).
void join_trace(run_state& rs);

/// Where task `ct` of `rs` does what its observer is told.
inline event_source source_of(const run_state& rs, const compiled_task& ct) noexcept {
  return {*ct.name, *ct.node, rs.report.trace_id};
}

/// Sizes `rs`'s records and node parts for its compiled group (the
/// session places the active ones on its nodes: node_run::node).
void lay_out(run_state& rs);

/// Starts every node of the checked, laid-out run `rs` (its probe
/// attached, its observer told, its deadline armed); the run ends once they
/// all have. On the coordinator.
void start_nodes(const std::shared_ptr<run_state>& rs);

/// Ends `rs` before it started anything: every task not run, the run failed
/// with `e`; a run that never began (`started` unset) starts and ends now.
/// On the coordinator.
void refuse_run(const std::shared_ptr<run_state>& rs, const error& e);

/// Terminal or partial cancellation from the caller: every node is asked to
/// stop (or, not started yet, never starts). On the coordinator.
void cancel_run(const std::shared_ptr<run_state>& rs);

/// Connects the caller's cancellation slot (rs->done) to `cancel_run`,
/// through the coordinator; total cancellation is ignored. At initiation.
void follow_cancellation(const std::shared_ptr<run_state>& rs);

// --- tasks ------------------------------------------------------------------

/// The workspace task k runs in: the run's on its node, or a child of it
/// for a PRIVATE task (destroyed when the task ends), `*spare` when given
/// and not empty (an emptied child of the same workspace, see
/// workspace_reuse.hpp).
std::shared_ptr<workspace> task_workspace(const run_state& rs, std::size_t k,
                                          std::shared_ptr<workspace>* spare = nullptr);

/// Fills a task's record from its end (at `finished`).
status end_task(run_state& rs, std::size_t k, const status& st, const step_stats& stats,
                std::chrono::system_clock::time_point finished = std::chrono::system_clock::now());

/// A task that never started because the run was cancelled (or another
/// task failed) first: reported as a task cancelled at its first step.
void cancel_unstarted(run_state& rs, std::size_t k);

// --- data in and out ----------------------------------------------------------

/// Checks `given` against the inputs `g` declares (taskgroup::check_feeds;
/// only the required inputs of the active nodes must be fed) and files each
/// feed under its node part.
status check_feeds(const task_group& g, const feeds& given, run_state& rs);

/// Strict codecs, at the end of a run: every fetched output goes through
/// its codec, as it would travel to another process; a failure fails the
/// task. Returns the first such failure in task order.
status round_trip_outputs(run_state& rs, const codec_registry& codecs);

/// Fills the output handles of the tasks of the `active` nodes from the
/// run's report (on the coordinator, where every run of a session ends).
void publish_outputs(const compiled_group& cg, const run_report& report, std::span<const std::size_t> active);

/// Makes the remote nets of `g` (task_group::add_remote_net) on their nodes,
/// each on its node's strand: `on[j]` is the node of `g.remote_nets()[j]`,
/// null for one this run leaves out (run_options::only_nodes). A net this
/// group made there before is kept. Errors, naming the net and the node:
/// another net of that name there (errc::net_exists), the net's binding
/// errors. (By value: the caller does not wait for it in a frame of its
/// own.)
boost::asio::awaitable<status> make_remote_nets(boost::asio::any_io_executor coord, task_group g,
                                                std::vector<node_state*> on, const operator_registry& registry);

// --- run_probe ----------------------------------------------------------------

/// run_probe's link to the run it follows (run_options::probe).
struct probe_access {
  /// From the run's start. Errors: errc::invalid_task when the probe
  /// follows another run in flight.
  static status attach(run_probe& p, const std::shared_ptr<run_state>& rs);
  /// At its end: the probe no longer follows `rs`, and holds nothing of it.
  static void detach(run_probe& p, const run_state& rs);
};

/// Where every task of `rs` that has begun and not ended stands, in task
/// order (the lines of run_probe::async_where), asked of each node on its
/// strand at once; a node that has not answered within
/// run_probe::answer_within (a task holds its thread) gets a line saying
/// so instead. Run on the session's coordinator, for a run whose nodes
/// have started (`in_view_since`).
boost::asio::awaitable<std::vector<std::string>> where_tasks(std::shared_ptr<run_state> rs);

/// The description of the runs `seen` (admission::view) for
/// local_session::async_describe, each run in flight asked where its
/// tasks stand (where_tasks), all at once. Run on the session's
/// coordinator; completes within about run_probe::answer_within. Errors:
/// throws `std::bad_alloc`.
boost::asio::awaitable<session_description> describe_runs(std::vector<admission::seen_run> seen, bool closed);

/// Where each task of node i that has begun and not ended stands, as
/// (task, `path/net "x" op #i (Type): what it waits for`), on the node's
/// strand: each waiting net run of a coroutine task, each waiting
/// frame-free run, and "<root>: running, not waiting on an op" for the
/// others (run_probe).
void describe_node(const run_state& rs, std::size_t i, std::vector<std::pair<std::size_t, std::string>>& out);

}  // namespace taskgroup::detail
