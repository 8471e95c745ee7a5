// taskgroup: the local session, which runs task groups in this process.
//
// A session gives every node one workspace and one strand over its
// executor: nodes share nothing, and different nodes run in parallel on
// the executor's threads. Node workspaces live as long as the session.
// Each run has a workspace of its own on each of its nodes, a child of the
// node workspace (so it sees what the node keeps), made when the node
// starts and dropped with the run: its feeds, its declared outputs, and
// what its tasks create live there, never seen by another run. PRIVATE
// tasks run in a child of the run's workspace, dropped when the task
// ends. A blob the node workspace already has (state the node keeps
// across runs) is read and written in place, by every run on the node, on
// purpose, even when it is a declared output (the run's report still gets
// its own copy of the value, taken when the run's part on the node ends:
// runs that overlap there see each other's writes, so a per-run output
// wants a name the node does not keep); a feed always shadows it. A node
// with a GLOBAL task is the exception: there the run's workspace is the
// node workspace itself (GLOBAL blobs accumulate across runs), and runs of
// groups with GLOBAL tasks on that node take turns, in arrival order. A
// group is compiled on its first run and the compilation is reused; the
// group is frozen from then on.
//
// A run, per node: (its turn, for a GLOBAL node) -> its workspace, with
// every declared output blob made in it before any task starts (so a
// PRIVATE task writes through to it; an output of a multi-instance task is
// one blob shared by the instances) and the feeds copied in -> local init
// -> the node's tasks concurrently, with its group report steps -> a final
// run of each report step -> outputs copied into the run's report ->
// local exit. Local setup or a report step on a node with no task is an
// error. The run's own work (its checks, each node's stages, the join of
// the tasks, the deadline) continues by callbacks on the session's
// coordinator strand and the nodes' strands: a coroutine frame is made only
// for a node with report steps or remote nets and for a task that needs one.
//
// How a node runs its tasks: a task whose step tree is small and plain (at
// most 256 net runs and substep executions, no deadline, report step,
// concurrency or nested own workspace), whose asynchronous ops all have a
// callback form (`op_kernel::start`, e.g. Sleep), runs on the node's strand
// as a plain state machine, with no coroutine of its own (observed or not:
// a run observer gets the same events from either driver): synchronous nets are called inline, and at an
// asynchronous op the task waits holding only its state, its workspace and
// the op's pending operation, resuming from its completion. Such tasks
// start one after another, in group order, before the node's other tasks
// start (the node yields to its strand every 256 of them, so cancellation
// and other work get in); a task that never waits runs to its end right
// there. The other tasks are coroutines started together. The order among
// the tasks of a group is otherwise unspecified. Under the join policy the
// first failure cancels every task not yet ended, including those not yet
// started (reported `cancelled`); a waiting task is cancelled through its
// op's cancellation slot.
//
// Errors name the node, the task, the step path, the net and the op:
// `task "n1/train" (node "n1"): train/net "read" op #1 (Dequeue): ...`.
//
// Threading: thread-safe. Runs may overlap, of different groups or of one
// (see `async_run`); tasks on one node are serialised by its strand.
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/async.hpp>
#include <taskgroup/detail/run_completion.hpp>
#include <taskgroup/detail/throwing_tokens.hpp>
#include <taskgroup/error.hpp>
#include <taskgroup/operator.hpp>
#include <taskgroup/run_observer.hpp>
#include <taskgroup/run_options.hpp>
#include <taskgroup/run_probe.hpp>
#include <taskgroup/run_report.hpp>
#include <taskgroup/session_description.hpp>
#include <taskgroup/session_limits.hpp>
#include <taskgroup/session_metrics.hpp>
#include <taskgroup/task_group.hpp>
#include <taskgroup/workspace.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/strand.hpp>

#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace taskgroup {

namespace detail {
struct run_state;
}

/// Runs task groups in this process (Caffe2 LocalSession, nodes kept
/// isolated).
class TASKGROUP_API local_session {
 public:
  /// A session on `ex` (e.g. an io_context's executor or a thread pool's).
  ///
  /// Lifetime: the session and `ex`'s execution context (the io_context,
  /// the pool) may be destroyed in either order. The session first: the
  /// context may then be run (queued runs complete with
  /// `errc::session_closed`, runs in flight go on to their end) or
  /// destroyed (queued and in-flight runs are dropped without completing,
  /// as every handler of a destroyed context is). The context first: its
  /// runs, queued or in flight, are dropped the same way; the session's
  /// strands belong to the context's strand service, so the session lets
  /// them go then and is closed. It keeps its node workspaces; a later run
  /// completes with `errc::session_closed` on its handler's associated
  /// executor (`asio::system_executor` for a handler without one);
  /// `get_executor` and new `node_strand`s are then over
  /// `asio::system_executor`. A strand handed out before belongs to the
  /// context: drop it with the context. As with any Asio object, work that
  /// will complete on the context from elsewhere (an offloaded kernel
  /// running on the compute executor) must have ended before the context
  /// is destroyed.
  explicit local_session(boost::asio::any_io_executor ex);
  /// A session on `ctx`'s executor (an `io_context`, a `thread_pool`), as
  /// Asio's I/O objects are made: the same as
  /// `local_session(ctx.get_executor())`.
  template <class ExecutionContext>
  requires std::is_convertible_v<ExecutionContext&, boost::asio::execution_context&>
  explicit local_session(ExecutionContext& ctx) : local_session(boost::asio::any_io_executor(ctx.get_executor())) {}
  /// A session owning a thread pool of `threads` threads (>= 1).
  explicit local_session(std::size_t threads);
  /// The same three, admitting runs within `limits` (see session_limits).
  /// Errors: throws `taskgroup::system_error` (`errc::invalid_task`) naming
  /// the field when `limits` does not hold (check_limits).
  local_session(boost::asio::any_io_executor ex, const session_limits& limits);
  template <class ExecutionContext>
  requires std::is_convertible_v<ExecutionContext&, boost::asio::execution_context&> local_session(
      ExecutionContext& ctx, const session_limits& limits)
      : local_session(boost::asio::any_io_executor(ctx.get_executor()), limits) {}
  local_session(std::size_t threads, const session_limits& limits);
  /// Closes the session; with an owned pool, waits for runs in flight.
  /// Destroyed on a thread of its owned pool (e.g. from a run's
  /// completion handler), it cannot wait for that thread: it returns at
  /// once, and a thread of its own joins the pool once the runs in flight
  /// and the calling handler have ended.
  /// On an executor of its caller's: runs queued but not started (e.g.
  /// `async_run` called, the io_context not yet run) complete with
  /// `errc::session_closed` when the executor runs them; runs in flight go
  /// on to their end. Neither touches the destroyed object: they hold the
  /// session's state, which lives until the last of them ends. The
  /// executor's context may already be gone (see the constructor).
  ~local_session();
  local_session(const local_session&) = delete;
  local_session& operator=(const local_session&) = delete;

  /// The type of `get_executor()`, as on Asio's I/O objects.
  using executor_type = boost::asio::any_io_executor;

  /// Runs `group`: an Asio asynchronous operation, for any completion
  /// token (a callback, `use_awaitable`, `use_future`, `deferred`,
  /// `as_tuple(...)`, `redirect_error(...)`, `bind_executor`,
  /// `bind_allocator`, `bind_cancellation_slot`, ...; without one,
  /// `default_completion_token_t`: `co_await session.async_run(group)`
  /// works). Completes with `void(boost::system::error_code, run_report)`:
  /// the code is that of `report.failure` (none on success), and the
  /// report is always there, saying which tasks succeeded, failed, were
  /// cancelled or never ran, each with its message. `use_awaitable` and
  /// `use_future` throw `taskgroup::system_error` (a
  /// `boost::system::system_error`) whose `what()` is the run's message;
  /// the report itself is then lost: `as_tuple` or `redirect_error` keep
  /// it. The handler is called on its associated executor (by default the
  /// session's coordinator strand), never inside this call; the state of
  /// the operation is allocated with its associated allocator.
  ///
  /// Under `run_policy::join` the run fails with the first task failure
  /// (every other task cancelled and unwound first); under `gather` only
  /// with its own ends. Errors: `errc::session_closed`, the group's compile
  /// errors (`errc::invalid_task`, `errc::invalid_step`, ...; also a
  /// `options.probe` already following a run), `errc::invalid_feed` (feeds
  /// that do not match the group's inputs: nothing has run), the first
  /// task failure, `errc::timeout` when `options.timeout` expires,
  /// `errc::cancelled` when cancelled (`ec == std::errc::timed_out`, `ec ==
  /// std::errc::operation_canceled` hold for them: error.hpp).
  ///
  /// Runs of one group may overlap, each isolated from the others: it has
  /// its own workspace on each node (a child of the node workspace, whose
  /// blobs it sees), its own feeds and its own outputs (`report`,
  /// `task_output::get(report)`). A node with a GLOBAL task is the
  /// exception: its tasks run in the node workspace itself, so runs of
  /// groups with GLOBAL tasks there take turns on it, in arrival order (a
  /// later run waits, cancellably, until the earlier ones have ended there).
  ///
  /// Admission (session_limits): a run that cannot start at once waits in
  /// the session's queue, highest `options.priority` first, and its
  /// `options.timeout` counts from its arrival; a shed run completes with
  /// `errc::overloaded` (`ec == std::errc::resource_unavailable_try_again`)
  /// and a report in which no task ran.
  ///
  /// Cancellation: through the token's cancellation slot. A run waiting
  /// for admission that is cancelled (any type: nothing of it has run)
  /// leaves the queue at once and completes with `errc::cancelled`, no
  /// task run. Terminal and partial cancellation cancel every task on
  /// every node (the run
  /// completes with `errc::cancelled` once all have unwound; the report
  /// says what ran). Total cancellation of a run that has begun is not
  /// supported: it has had effects (blobs written), so it is ignored. An
  /// allocation failure while the run starts completes it with an error, or
  /// its `std::bad_alloc` leaves the event loop's `run()` and the run
  /// completes when the loop runs again (docs/errors.md, "Memory
  /// exhaustion").
  ///
  /// Threading: thread-safe. The initiation holds the session's state,
  /// not `this`: a run queued when the session is destroyed starts later
  /// and fails cleanly.
  template <class CompletionToken = default_completion_token_t>
  auto async_run(task_group group, run_options options, CompletionToken&& token = default_completion_token_t()) {
    auto init = [state = impl_](auto handler, task_group g, run_options o) {
      start_run(state, std::move(g), std::move(o),
                detail::make_run_completion(std::move(handler), coordinator(*state)));
    };
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, run_report)>(
        std::move(init), token, std::move(group), std::move(options));
  }
  /// The same with default options.
  template <class CompletionToken = default_completion_token_t>
  requires(!std::is_same_v<std::decay_t<CompletionToken>, run_options>) auto async_run(
      task_group group, CompletionToken&& token = default_completion_token_t()) {
    return async_run(std::move(group), run_options{}, std::forward<CompletionToken>(token));
  }

  /// Runs `group` and blocks the calling thread until it ends, for
  /// programs without an event loop of their own (Asio's synchronous
  /// form): returns the report; on failure throws `taskgroup::system_error`
  /// whose `what()` is the run's message (`report.failure`). The session's
  /// executor must be run by other threads (an owned pool is). Errors:
  /// those of `async_run`; `errc::invalid_task` when called from the
  /// session's own coordinator or from one of its node strands (inside an
  /// op, say: it would block that strand, and deadlock when the run needs
  /// it).
  run_report run(task_group group, run_options options = {});
  /// The same, keeping the report on failure: sets `ec` to the run's code
  /// (cleared on success) and returns the report, `report.failure` saying
  /// why it failed.
  run_report run(task_group group, run_options options, boost::system::error_code& ec);

  /// The workspace of node `name` (made on first use). Strand-bound: touch
  /// it only on `node_strand(name)` or while no run is in flight.
  std::shared_ptr<workspace> node_workspace(const std::string& name);
  /// The strand of node `name` (made on first use).
  boost::asio::strand<boost::asio::any_io_executor> node_strand(const std::string& name);
  /// Nodes known to the session, in order of first use.
  [[nodiscard]] std::vector<std::string> nodes() const;

  /// Operator registry used by later runs (default: the global one).
  void set_registry(const operator_registry& registry);

  /// The executor that runs offloaded kernels (`operator_schema::offload`)
  /// on every node of this session, e.g. an `asio::thread_pool`'s; by
  /// default `default_compute_executor()` (one thread per core). The
  /// session's own executor works too, but then CPU-bound kernels share
  /// its threads again. It must run until the runs using it have ended.
  /// Threading: thread-safe; call it while no run is in flight.
  void set_compute_executor(boost::asio::any_io_executor ex);

  /// Closes the session: later runs fail with `errc::session_closed`
  /// ("Session is closed."), and so do the runs waiting for admission.
  /// Idempotent. Runs in flight go on. Destroying the executor's context
  /// closes the session too.
  void close();
  /// True once the session takes no new run: closed, or draining
  /// (`async_drain`).
  [[nodiscard]] bool closed() const noexcept;

  /// Replaces the admission limits (see session_limits); they apply to
  /// the runs that arrive after it, and a higher `max_runs_in_flight` (or
  /// `priority_headroom`) admits the queued runs that now fit. Lowering
  /// `max_queued` below the queue's length sheds none of the runs already
  /// queued. Errors: throws `taskgroup::system_error` (`errc::invalid_task`)
  /// naming the field when `limits` does not hold (check_limits).
  /// Threading: thread-safe.
  void set_limits(const session_limits& limits);
  /// The admission limits in force. Threading: thread-safe.
  [[nodiscard]] session_limits limits() const;
  /// Runs in flight and queued now, and runs shed so far. Threading:
  /// thread-safe.
  [[nodiscard]] session_load load() const;

  /// A snapshot of what the session has counted (session_metrics): runs,
  /// tasks, retries and offloaded ops per group label, the latency
  /// histograms, and the runs in flight and queued now. A run's counts are
  /// added as it ends, before its handler is called. Counting takes no lock
  /// and writes no shared cache line per task (docs/observing.md).
  /// Errors: throws `std::bad_alloc`. Threading: thread-safe.
  [[nodiscard]] session_metrics metrics() const;
  /// Turns counting on (the default) or off for the runs that end from now
  /// on; `metrics()` still answers, with the counts so far. Meant for
  /// measuring what counting costs. Threading: thread-safe.
  void enable_metrics(bool on) noexcept;

  /// Drains the session: stops admitting for good (a run that arrives
  /// completes with `errc::session_closed` at once, as after `close()`),
  /// lets the runs in flight and those queued run to their ends, and
  /// completes when none is left. An Asio asynchronous operation for any
  /// completion token, completing with `void(boost::system::error_code)`:
  /// success, or `errc::cancelled` when a drain was cancelled. The handler
  /// is called on its associated executor (by default the session's
  /// coordinator strand), never inside this call.
  ///
  /// Cancellation (of any type, e.g. a drain raced against a timer in a
  /// parallel group): every queued run
  /// completes with `errc::cancelled`, every run in flight is cancelled
  /// (as by its own cancellation slot), and the drain completes with
  /// `errc::cancelled` once they have all ended.
  ///
  /// Threading: thread-safe. Several drains may wait at once; each
  /// completes when nothing is left.
  template <class CompletionToken = default_completion_token_t>
  auto async_drain(CompletionToken&& token = default_completion_token_t()) {
    auto init = [state = impl_](auto handler) {
      start_drain(*state, boost::asio::any_completion_handler<void(boost::system::error_code)>(std::move(handler)));
    };
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(std::move(init), token);
  }

  /// A live view of the session: every run in flight or queued, without
  /// any probe given in advance (session_description): each run's trace
  /// id, group name, phase (queued or running), priority and age, and for
  /// a run in flight one line per place where a task of it waits, in the
  /// words of `run_probe::async_where` (the op, its input, what it waits
  /// for, `waiting to retry ...`); and whether the session takes new runs.
  /// An Asio asynchronous operation for any completion token, completing
  /// with `void(boost::system::error_code, session_description)`: the code
  /// is empty, or, with an empty description, the error that kept it from
  /// being made (out of memory). The nodes of
  /// every run are asked at once, each on its strand; a node whose thread
  /// a task holds gets a line saying so after `run_probe::answer_within`,
  /// so the operation completes within about that time whatever the runs
  /// do. Its lines show op arguments and blob names: do not serve it on a
  /// public endpoint. Completes on the token's associated executor (by
  /// default the session's coordinator strand), never inside this call,
  /// with work counted on it until then. Costs the runs nothing when not
  /// asked (admission already keeps the runs in flight and queued).
  /// Cancellation: not supported (it ends within `answer_within`).
  /// Threading: thread-safe.
  template <class CompletionToken = default_completion_token_t>
  auto async_describe(CompletionToken&& token = default_completion_token_t()) {
    auto init = [state = impl_](auto handler) { start_describe(state, describe_handler(std::move(handler))); };
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, session_description)>(
        std::move(init), token);
  }

  [[nodiscard]] boost::asio::any_io_executor get_executor() const;

 private:
  struct impl;
  using describe_handler = boost::asio::any_completion_handler<void(boost::system::error_code, session_description)>;
  static void start_describe(const std::shared_ptr<impl>& state, describe_handler handler);
  // The session's coordinator strand: where a run is compiled, started
  // and ended, and where a handler without an executor of its own is
  // called.
  [[nodiscard]] static const boost::asio::any_io_executor& coordinator(const impl& state) noexcept;
  // Starts a run for `done` (lib/session/run.cpp): queued on the
  // coordinator, never run inside the initiating call.
  static void start_run(std::shared_ptr<impl> state, task_group group, run_options options,
                        detail::run_completion_ptr done);
  static void begin(impl& state, const std::shared_ptr<detail::run_state>& rs);
  static void start_drain(impl& state, boost::asio::any_completion_handler<void(boost::system::error_code)> done);
  std::shared_ptr<impl> impl_;
};

/// The check that strict codec mode (`run_options::strict_codecs`) makes at
/// the start of a run: every typed output (`task::output<T>`) of `group`
/// has a codec in `codecs`. Errors: `errc::not_serializable` naming the
/// task, the output and the type. Thread-safe (reads only).
TASKGROUP_API status check_output_codecs(const task_group& group, const codec_registry& codecs);

/// The check a run makes of its feeds (`run_options::feeds`) before it
/// starts anything: each names an input `group` declares, on a node with a
/// task, holds a value of the input's type when it is typed, and is fed
/// once; every required input is fed (a run with `run_options::only_nodes`
/// asks this only of the nodes that run). Errors: `errc::invalid_feed`
/// naming the feed (its node and blob) and what is wrong, or the required
/// input not fed. Thread-safe (reads only).
TASKGROUP_API status check_feeds(const task_group& group, const feeds& given);

}  // namespace taskgroup
