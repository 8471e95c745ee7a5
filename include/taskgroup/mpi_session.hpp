// taskgroup: the MPI session, which runs one task group across the ranks
// of an MPI job (`mpirun -np N program`), with the interface of the local
// session.
//
// Every rank runs the same program (or the same plan file) and builds the
// same group. Nodes go to ranks in order of first use modulo the job size,
// unless `mpi_options::placement` names a rank for a node; each rank runs
// only its own nodes, each with its own workspace and strand, through a
// local session. Rank 0 is the client: its `run` completes with the report
// of every task on every rank, and the output handles of every task are set
// there. On other ranks `run` completes when the run is over, with the
// run's error or with a report of every task's status and failure (the
// outputs of their own tasks only: copies, taken once they were sent).
//
// A run: rank 0 sends every rank the run's start, with a description of
// its group (a rank whose group differs fails the run with
// `errc::group_mismatch` naming the rank and the first difference); each
// rank answers once its tasks end, with their reports and outputs; rank 0
// then tells every rank how the run ended (cancelled with its first error,
// or done). The messages, their encodings, and how they are polled with no
// thread spinning: docs/mpi-protocol.md.
//
// Output types are checked as in strict codec mode (run_options::
// strict_codecs): a typed output whose type has no codec fails the run at
// its start; an untyped output fails its task when its value cannot be
// encoded.
//
// Errors: a failure on rank R completes `run` on every rank with
// `rank R: task "<node>/<task>" (node "<node>"): <step path>/...: message`.
// A rank that stops answering during a run (stopped, hung, partitioned) is
// found by a heartbeat within `mpi_options::lost_after` (8 s by default):
// the run fails on every live rank with an error naming it. A rank that
// does not answer within `grace` after rank 0 cancelled the run (or, on a
// worker, no word from rank 0 within the deadline plus `grace`) is taken
// as lost: the job is ended with `MPI_Abort`, since MPI (Open MPI 4)
// cannot continue without it. A rank that dies ends the whole job (mpirun
// kills every rank). Launch with `mpirun --timeout` as a last guard.
//
// Threading: a session and its runs are bound to the session's strand; call
// `async_run` from any thread. The blocking `run` runs the protocol (and so
// its MPI calls) on the calling thread instead; the tasks run on the
// executor either way. One run at a time: a second concurrent run (of any
// form) fails with `errc::session_busy`. Outputs are sent from the node
// workspaces: leave those alone while a run is in flight (as with any
// workspace: touch it only on its node strand or between runs). Construct
// and destroy sessions in the same order on every rank (the communicator
// is duplicated and freed collectively). MPI must be initialized with at
// least MPI_THREAD_SERIALIZED when the executor has several threads, or
// when both the blocking `run` and `async_run` are used (`mpi_environment`
// asks for it). Below that level only the thread that initialized MPI may
// make the session's MPI calls: construct the session there, and use
// either the blocking `run` there or the executor's one thread; otherwise the session
// or the run fails with `errc::mpi_failed` saying so, before any message.
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/async.hpp>
#include <taskgroup/codec.hpp>
#include <taskgroup/detail/run_completion.hpp>
#include <taskgroup/error.hpp>
#include <taskgroup/run_options.hpp>
#include <taskgroup/run_report.hpp>
#include <taskgroup/session.hpp>
#include <taskgroup/session_description.hpp>
#include <taskgroup/session_metrics.hpp>
#include <taskgroup/task_group.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <type_traits>

namespace taskgroup {

/// MPI for the lifetime of this object: initializes MPI asking for
/// MPI_THREAD_SERIALIZED (unless something else already did) and finalizes
/// it on destruction (only if this object initialized it). Construct one
/// in `main` before any mpi_session, destroy it after the last.
///
/// Threading: construct and destroy on the main thread.
class TASKGROUP_API mpi_environment {
 public:
  mpi_environment();
  mpi_environment(int& argc, char**& argv);
  ~mpi_environment();
  mpi_environment(const mpi_environment&) = delete;
  mpi_environment& operator=(const mpi_environment&) = delete;

  /// This process's rank in MPI_COMM_WORLD.
  [[nodiscard]] int rank() const noexcept;
  /// The number of processes in MPI_COMM_WORLD.
  [[nodiscard]] int size() const noexcept;
  /// The thread level MPI provides (MPI_THREAD_SINGLE ... MULTIPLE).
  [[nodiscard]] int thread_level() const noexcept { return provided_; }

  /// True when this process was started by an MPI launcher (mpirun,
  /// mpiexec, srun with PMI/PMIx), judged from the environment.
  static bool launched_by_mpi() noexcept;

 private:
  bool owner_ = false;
  int provided_ = 0;
};

/// Options of an MPI session. Give every rank the same options.
///
/// Limits: every duration is at most `taskgroup::max_duration` (2^40 ms,
/// about 34.8 years; in microseconds for the `poll_*` options);
/// `poll_min`, `poll_max`, `grace` and `heartbeat` are above 0; `poll_spin`
/// and `lost_after` may be 0; `poll_max` is at least `poll_min`. A session
/// made with an option out of its range refuses every run (on that rank,
/// before any message) with `errc::invalid_task` naming the option and the
/// limit: "mpi_options::lost_after must be at most 1099511627776 ms
/// (taskgroup::max_duration, about 34.8 years), got ...".
struct TASKGROUP_API mpi_options {
  /// The communicator whose ranks run the group; the session works on a
  /// duplicate of it (so its messages never mix with the program's own).
  MPI_Comm comm = MPI_COMM_WORLD;
  /// Explicit node -> rank placement; other nodes go to ranks in order of
  /// first use modulo the job size.
  std::map<std::string, int> placement;
  /// Polling of pending MPI requests: for `poll_spin` after any progress
  /// the session polls whenever the executor has nothing else to run (so a
  /// short exchange takes microseconds; 0: never); then it sleeps between
  /// polls, from `poll_min` doubling up to `poll_max` while idle.
  std::chrono::microseconds poll_spin{200};
  std::chrono::microseconds poll_min{20};
  std::chrono::microseconds poll_max{2000};
  /// How long ranks get to answer once a run is cancelled or past its
  /// deadline before the job is aborted (`MPI_Abort`).
  std::chrono::milliseconds grace{5000};
  /// Liveness during a run: a rank that rank 0 has not heard from (a
  /// heartbeat or any message of the run) for `lost_after`, while it waits
  /// for that rank's STATUS, is lost: the run fails on every live rank
  /// with `errc::mpi_failed`, "rank R: lost: no heartbeat or message from
  /// it for N ms (mpi_options::lost_after); ...". Likewise a rank that has
  /// not heard from rank 0 for `lost_after` while it waits for rank 0's
  /// CTRL fails its run with "rank 0: lost: ...". A stopped (SIGSTOP),
  /// hung or partitioned rank is so detected within `lost_after` plus
  /// `poll_max`; a rank that dies usually ends the job first (mpirun kills
  /// every rank). Each side sends a heartbeat every `heartbeat` (at most
  /// half of `lost_after`) from the run's polling loop, which wakes at
  /// least every `poll_max` anyway: no thread and no busy loop. A
  /// `lost_after` of 0 turns liveness off. Between runs nothing is
  /// watched. A rank whose event loop is held longer than `lost_after`
  /// (an op that blocks the session's only thread) looks lost too. After
  /// a run that lost a rank the job cannot go on (MPI has no recovery from
  /// it): end the program or the job.
  std::chrono::milliseconds lost_after{8000};
  std::chrono::milliseconds heartbeat{1000};
  /// Codecs for outputs (default: the global registry).
  const codec_registry* codecs = nullptr;
};

/// Runs task groups across the ranks of an MPI job.
class TASKGROUP_API mpi_session {
 public:
  /// A session on `ex`; nodes run on strands of `ex`.
  explicit mpi_session(boost::asio::any_io_executor ex, mpi_options options = {});
  /// A session on `ctx`'s executor (an `io_context`, a `thread_pool`), as
  /// Asio's I/O objects are made.
  template <class ExecutionContext>
  requires std::is_convertible_v<ExecutionContext&, boost::asio::execution_context&>
  explicit mpi_session(ExecutionContext& ctx, mpi_options options = {})
      : mpi_session(boost::asio::any_io_executor(ctx.get_executor()), std::move(options)) {}
  /// A session owning a thread pool of `threads` threads (>= 1).
  explicit mpi_session(std::size_t threads, mpi_options options = {});
  /// With an owned pool, waits for runs in flight; with an executor of
  /// the caller's, no run may be in flight, and runs queued but not
  /// started (`async_run` called, the executor not yet run) complete with
  /// `errc::session_closed` when the executor runs them, without touching
  /// the destroyed object or MPI (they hold the session's state). The
  /// executor's context must outlive them. Frees the duplicated
  /// communicator (destroy sessions in the same order on every rank).
  ~mpi_session();
  mpi_session(const mpi_session&) = delete;
  mpi_session& operator=(const mpi_session&) = delete;

  /// This process's rank in the session's communicator.
  [[nodiscard]] int rank() const noexcept;
  /// The number of ranks.
  [[nodiscard]] int size() const noexcept;
  /// True on rank 0, the client.
  [[nodiscard]] bool is_client() const noexcept { return rank() == 0; }

  /// Where the nodes of `group` run: node name -> rank, for every node the
  /// group uses. Errors: `errc::invalid_task` when the placement names a
  /// rank outside the job.
  [[nodiscard]] result<std::map<std::string, int>> placement(const task_group& group) const;

  /// Runs `group` on every rank; every rank must call it for the same
  /// group: the token form, for any completion token, as
  /// `local_session::async_run`. Completes with
  /// `void(boost::system::error_code, run_report)`: the code is that of
  /// `report.failure` (empty on success) and the report is always there.
  /// On rank 0 it holds every task's report (outputs decoded from the
  /// ranks that ran them; a large value may be received into the object
  /// of the last run's value when the handle alone held it, so keep the
  /// report, not a raw pointer, to keep a value). Elsewhere it holds the
  /// reports of this rank's tasks, every other task's status and failure
  /// when the run succeeded (a failed run is called off before the others
  /// end), and copies of the outputs of this rank's tasks (a value whose
  /// type cannot be copied reaches rank 0 but leaves this rank's handle
  /// with the copy's error). A run that fails before any task ran lists
  /// every task as not run.
  ///
  /// Feeds: rank 0's `options.feeds` are the run's; those given on another
  /// rank are not read. Rank 0 checks them as a local run does
  /// (`taskgroup::check_feeds`), encodes each value with the session's
  /// codec registry (`mpi_options::codecs`) and sends every rank the feeds
  /// of its nodes in its START; that rank decodes them for its own run.
  /// Rank 0's own feeds go through the codecs too, so a feed fails the same
  /// way wherever its node is placed. A feed rank 0 refuses
  /// (`errc::invalid_feed`, the local session's message) or whose value's
  /// type has no codec (`errc::not_serializable`, `feed "<node>/<blob>": no
  /// codec for type T`) fails the run on every rank before anything runs;
  /// a feed a rank cannot decode fails the run on every rank with that
  /// rank's error (`rank R: feed "<node>/<blob>": ...`), as a group
  /// mismatch does.
  ///
  /// Errors: `errc::mpi_failed` when MPI is unusable (not initialized, too
  /// low a thread level for a multi-threaded executor),
  /// `errc::group_mismatch` when ranks built different groups or runs,
  /// `errc::invalid_feed` and `errc::not_serializable` for feeds (above),
  /// `errc::session_busy` (`device_or_resource_busy`) when a run is
  /// already in flight,
  /// `options.timeout` is above `taskgroup::max_duration` (on every rank:
  /// rank 0's START carries the refusal) or the session's `mpi_options`
  /// are out of range (see mpi_options), `errc::session_closed` for a
  /// run queued when the session was destroyed, the errors of
  /// `local_session::async_run` (with the rank they came from),
  /// `errc::timeout` when `options.timeout` expires, `errc::cancelled`
  /// when cancelled. On rank 0 the error of a run that its deadline or a
  /// cancellation from outside ended then lists where the tasks of every
  /// rank still running waited, as on the local session (a worker's task
  /// with its rank: `rank 1: task "n/t" (node "n"): ...`); the other ranks
  /// end with rank 0's error alone.
  ///
  /// Cancellation: through the token's cancellation slot. Terminal and
  /// partial cancellation on rank 0 cancel every task on every rank; on
  /// another rank they cancel that rank's tasks, which fails the run
  /// everywhere with `rank R: ... cancelled`. Total cancellation is
  /// ignored, as on the local session.
  ///
  /// The initiation holds the session's state, not `this`: a run queued
  /// when the session is destroyed starts later and fails cleanly.
  template <class CompletionToken = default_completion_token_t>
  auto async_run(task_group group, run_options options, CompletionToken&& token = default_completion_token_t()) {
    auto init = [state = impl_](auto handler, task_group g, run_options o) {
      auto ex = strand_of(*state);
      auto cancel = relay_cancellation(boost::asio::get_associated_cancellation_slot(handler), *state);
      detail::spawn_run(ex, run_on_strand(state, std::move(g), std::move(o)), std::move(cancel), std::move(handler),
                        "unexpected exception in the MPI session");
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

  /// Runs `group` and blocks until it ends, with the run's protocol on the
  /// calling thread (no hand-off to the executor's threads at either end)
  /// and its tasks on the executor, which other threads must run (an owned
  /// pool does): returns the report; on failure throws
  /// `taskgroup::system_error` whose `what()` is the run's message. Errors:
  /// those of `async_run`; `errc::invalid_task` when called on the
  /// session's strand (it would never end); `errc::session_busy` while
  /// another run is in flight.
  run_report run(task_group group, run_options options = {});
  /// The same, keeping the report on failure: sets `ec` to the run's code
  /// (cleared on success) and returns the report.
  run_report run(task_group group, run_options options, boost::system::error_code& ec);

  /// The type of `get_executor()`, as on Asio's I/O objects.
  using executor_type = boost::asio::any_io_executor;
  /// The executor the session was made on (its owned pool's), which runs
  /// the nodes' strands. Thread-safe.
  [[nodiscard]] executor_type get_executor() const;

  /// What this rank has counted (session_metrics, with `rank` set): on
  /// rank 0 the runs it coordinated, by group label and outcome, with
  /// their latency (the whole run across the ranks; no queue: an MPI
  /// session has no admission, so `queue_wait` counts 0 for each); on
  /// every rank the tasks of its own nodes, their durations, retries and
  /// offloaded ops (the other ranks count no run). The gauges are this
  /// rank's parts of runs in flight. `to_prometheus` labels every sample
  /// `rank="<r>"`, so the ranks' scrapes add up. Errors: throws
  /// `std::bad_alloc`. Threading: thread-safe.
  [[nodiscard]] session_metrics metrics() const;
  /// Turns counting on or off on this rank (see
  /// `local_session::enable_metrics`). Threading: thread-safe.
  void enable_metrics(bool on) noexcept;

  /// This rank's live view (`local_session::async_describe` of the local
  /// session that runs its nodes, with `rank` set): its parts of the runs
  /// in flight, each with the run's trace id (the same on every rank) and
  /// where this rank's tasks wait. Completes with `void(boost::system::
  /// error_code, session_description)` on the token's associated executor,
  /// by default the session's executor (`get_executor()`). Cancellation:
  /// not supported (it ends within `run_probe::answer_within`).
  /// Threading: thread-safe (no MPI call).
  template <class CompletionToken = default_completion_token_t>
  auto async_describe(CompletionToken&& token = default_completion_token_t()) {
    auto init = [this](auto handler) { start_describe(describe_handler(std::move(handler))); };
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, session_description)>(
        std::move(init), token);
  }

  /// The local session that runs this rank's nodes (its node workspaces).
  [[nodiscard]] local_session& local() noexcept;

 private:
  struct impl;
  using describe_handler = boost::asio::any_completion_handler<void(boost::system::error_code, session_description)>;
  void start_describe(describe_handler handler);
  [[nodiscard]] static boost::asio::any_io_executor strand_of(const impl& state);
  // A signal whose emissions reach the run on the session's strand,
  // kept alive by the completion handler.
  static std::shared_ptr<boost::asio::cancellation_signal> relay_cancellation(boost::asio::cancellation_slot from,
                                                                              const impl& state);
  static boost::asio::awaitable<run_report> run_on_strand(std::shared_ptr<impl> state, task_group group,
                                                          run_options options);
  std::unique_ptr<boost::asio::thread_pool> pool_;  // when the session owns its threads
  std::unique_ptr<local_session> local_;
  std::shared_ptr<impl> impl_;
};

}  // namespace taskgroup
