// Internal: the step runner's entry points for sessions.
#pragma once

#include <taskgroup/execution_step.hpp>
#include <taskgroup/operator.hpp>
#include <taskgroup/run_observer.hpp>
#include <taskgroup/step_runner.hpp>
#include <taskgroup/workspace.hpp>

#include "detail/observation.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/intrusive/list.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace taskgroup::detail {

/// A validated snapshot of a step tree, compiled once and run many times.
struct compiled_step;

/// Compiles `s`, validated by the caller (`execution_step::validate`, or
/// `step_validation::composed` for a tree composed around users' trees);
/// `counted` (if given) is the step whose iterations go to
/// `step_stats::iterations`. Errors: out of memory only.
result<std::shared_ptr<const compiled_step>> compile_step(const execution_step& s,
                                                          const execution_step* counted = nullptr);

/// Compiles `s`, validated as for `compile_step`, into `out` (which must
/// not be running).
status compile_into(compiled_step& out, const execution_step& s, const execution_step* counted = nullptr);

/// `n` empty trees in one allocation, for `compile_into` (a group's tasks:
/// one block in place of one per task). An empty tree must not be run.
std::shared_ptr<compiled_step[]> make_compiled_steps(std::size_t n);

/// The k-th tree of `steps` (from `make_compiled_steps`).
compiled_step& compiled_at(compiled_step* steps, std::size_t k) noexcept;

struct step_path;

/// A net run of a coroutine-driven task that waits, for hang diagnosis
/// (run_probe): linked into its node's list while it waits, on the frame
/// that awaits it (unlinked when either goes, in any order).
struct retry_wait;
struct wait_site : boost::intrusive::list_base_hook<boost::intrusive::link_mode<boost::intrusive::auto_unlink>> {
  std::uint32_t task = 0;
  std::uint32_t op = 0;  // the op it waits on (kept by run_net_at)
  const step_path* path = nullptr;
  const net_instance* inst = nullptr;
  const retry_wait* retry = nullptr;  // set instead of `inst` for a step waiting to retry
};
using wait_sites = boost::intrusive::list<wait_site, boost::intrusive::constant_time_size<false>>;

/// Where a wait site stands: `path/net "x" op #i (Type): what it waits for`,
/// with what a starved wait adds (see `site_registry::feeders`).
std::string where(const wait_site& s, const std::uint32_t* feeders);

/// Where the coroutine driver files a task's waiting net runs: `sites`
/// (touched on the node's strand only; none when null), as task `task`.
struct site_registry {
  wait_sites* sites = nullptr;
  std::uint32_t task = 0;
  // The node's tasks left that may feed a queue (node_watch::feeders): a
  // cancelled wait says when none is (ops/queues.hpp).
  const std::uint32_t* feeders = nullptr;
};

/// Runs a compiled tree in `ws` (on the strand owning `ws`), filing its
/// waiting net runs in `sites`, telling `observed` (which must outlive the
/// run) of what it asked for, its kernels serving `run` (null: none; it
/// must outlive the run); `options.observer` is not read.
boost::asio::awaitable<status> run_compiled(std::shared_ptr<const compiled_step> s, std::shared_ptr<workspace> ws,
                                            run_step_options options, const observation& observed,
                                            site_registry sites = {}, const run_context* run = nullptr);

/// True when `s`'s structure allows a `frame_free_run`: a bounded number
/// of iterations (at most `run_step_options::yield_every` net runs and
/// child executions), no deadline, report step, concurrency or nested own
/// workspace. Its nets may still turn out to need the coroutine runner
/// when bound (an asynchronous kernel without a callback form).
bool may_run_inline(const compiled_step& s) noexcept;

/// The name of the tree's root step (the first component of its paths).
std::string_view root_name(const compiled_step& s) noexcept;

class frame_free_run;

/// The owner of frame-free runs (the session's tasks of one node). Called
/// on the strand that runs them. It must outlive its waiting runs: a run
/// touches nothing after telling the host of its end, so the host may go
/// in that call.
class task_host {
 public:
  /// A run that waited has ended: its `result()` and `stats()` are final.
  /// The host may destroy or reuse `r` (the run touches nothing after).
  virtual void run_ended(frame_free_run& r) noexcept = 0;
  /// `r` has decided to run (it will not decline): called before any of its
  /// observer events.
  virtual void run_begins(frame_free_run& r) noexcept = 0;
  /// The pending operation of a waiting run was destroyed without
  /// completing (its io_context is being destroyed): the run never ends.
  /// The host may destroy `r`.
  virtual void run_abandoned(frame_free_run& r) noexcept = 0;
  /// True once the host has asked its runs to stop: a run checks it before
  /// each iteration and each asynchronous op, and then ends cancelled.
  [[nodiscard]] bool stopping() const noexcept { return stopping_; }
  /// The same flag, for the step machine's stop query.
  [[nodiscard]] const bool* stopping_flag() const noexcept { return &stopping_; }
  /// The run its task `task`'s kernels serve (`op_context::run`): the
  /// task's own context, when the host keeps one for it, else the
  /// ambient one, which the host makes current around `start` (set once
  /// for all the tasks it starts in a row, it costs a task nothing; a
  /// waiting task holds no pointer for it).
  [[nodiscard]] const run_context* run_of(std::uint32_t task) const noexcept {
    if (const run_context* own = own_run(task)) return own;
    return ambient_run_;
  }
  /// The task's own context, or null when it serves the ambient one.
  [[nodiscard]] const run_context* own_run(std::uint32_t task) const noexcept {
    return task_runs_ != nullptr ? task_runs_[task] : nullptr;
  }
  /// The registry its runs bind their nets with.
  [[nodiscard]] const operator_registry& registry() const noexcept { return registry_; }
  /// Where its runs' asynchronous ops complete: it must run on the strand
  /// owning the runs' workspaces. Held for the host, not by each run (a
  /// waiting task holds its run).
  [[nodiscard]] const boost::asio::any_io_executor& executor() const noexcept { return ex_; }

 protected:
  /// `ex` must outlive the host (a node's executor, kept by its session).
  task_host(const operator_registry& registry, const boost::asio::any_io_executor& ex) : registry_(registry), ex_(ex) {}
  ~task_host() = default;
  task_host(const task_host&) = delete;
  task_host& operator=(const task_host&) = delete;
  bool stopping_ = false;
  /// See `run_of`: the ambient context, and the tasks' own (by task, null
  /// for one that has none; the array itself null when none has).
  const run_context* ambient_run_ = nullptr;
  const run_context* const* task_runs_ = nullptr;

 private:
  const operator_registry& registry_;
  const boost::asio::any_io_executor& ex_;
};

/// One execution of a compiled tree run as a plain state machine, with no
/// coroutine frame: synchronous nets are called inline and asynchronous
/// ops are started through their callback form (`op_kernel::start`), the
/// run resuming from their completion. The same semantics as
/// `run_compiled` (both drive the step machine, lib/step/machine.hpp), for
/// the trees `may_run_inline` accepts, with or without an observer.
/// Reusable: `start` again once a run has ended.
///
/// It is the target of its pending op's completion (`op_completion`),
/// through the same virtual table: a waiting task holds its run.
class frame_free_run : protected op_completion::target {
 public:
  enum class outcome {
    ended,     ///< ran to its end: `result()` holds its status
    waiting,   ///< an op pends: the host's `run_ended` follows
    declined,  ///< needs the coroutine runner; nothing ran, `ws` untouched
  };
  virtual ~frame_free_run() = default;
  frame_free_run(const frame_free_run&) = delete;
  frame_free_run& operator=(const frame_free_run&) = delete;

  /// Binds `s` in `ws` (or in its own child of `ws`) with the host's
  /// registry and runs it until its end or its first wait; a waiting run
  /// takes `ws` (released when it ends). Completions go through the
  /// host's executor.
  virtual outcome start(const compiled_step& s, std::shared_ptr<workspace>& ws) = 0;
  /// Cancels the pending op of a waiting run (it then ends cancelled).
  virtual void cancel() noexcept = 0;
  [[nodiscard]] virtual status result() const = 0;
  [[nodiscard]] virtual const step_stats& stats() const noexcept = 0;
  /// Drops what an ended run still holds (its workspace, its observation).
  virtual void reset() noexcept = 0;
  /// An ended run, reset, reports to `host` from now on (a host's spare
  /// run handed to the next host on the same strand).
  virtual void rehost(task_host& host) noexcept = 0;
  /// Where a waiting run stands (`path/net "x" op #i (Type): what it
  /// waits for`); empty when it does not wait.
  [[nodiscard]] virtual std::string where() const = 0;

  /// The host's: told of the run's step executions and net runs (what it
  /// asked for) when set before `start`; it must outlive the run.
  const observation* observed = &no_observation;
  // 32 bits each: a waiting task holds its run.
  std::uint32_t task = 0;  ///< the host's: which task this run is
  std::uint32_t slot = 0;  ///< the host's: where it keeps the run

 protected:
  frame_free_run() = default;
};

/// A run reporting to `host`.
std::unique_ptr<frame_free_run> make_frame_free_run(task_host& host);

/// Runs `body` (not started yet) while report steps run in `ws` every
/// interval, each with a final run after `body` succeeds (report-substep
/// semantics); without report steps, `body` itself. `path` names the
/// reporters' parent in errors; `observed` must outlive the run; `run`
/// is the run the reporters' kernels serve (null: none).
boost::asio::awaitable<status> run_with_reporters(
    boost::asio::awaitable<status> body,
    const std::vector<std::pair<execution_step, std::chrono::milliseconds>>& reports, std::shared_ptr<workspace> ws,
    run_step_options options, const observation& observed, std::string_view path, const run_context* run = nullptr);

}  // namespace taskgroup::detail
