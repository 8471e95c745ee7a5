// Internal: the tasks of one node in one run, and their join.
#pragma once

#include "detail/join.hpp"
#include "session/run.hpp"
#include "step/yield_clock.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace taskgroup::detail {

/// The tasks of node i in one run: the tasks stage of its node_run, one
/// join (detail::join_core, with the rules of every join) whose children
/// are the tasks. It ends each task's record, keeps the first failure and,
/// under fail_fast, stops the others at once, the tasks not started yet
/// included (reported cancelled).
///
/// Those whose tree allows it run without coroutine frames
/// (detail::frame_free_run), one after another on the node's strand until
/// each ends or waits, yielding to the strand by a loop's rule (every
/// `run_step_options::yield_every` tasks once a `yield_slice` has passed,
/// with their defaults: so that other work and cancellation get in); a
/// waiting task then costs its run, its workspace and its pending
/// operation only. The others are coroutines, spawned on
/// the node's strand once the frame-free ones have started, each a child of
/// this same join.
///
/// A task with a retry policy whose attempt failed with a code it retries
/// waits here (in the context's queue of waits, as `Sleep` waits: no
/// thread, no frame), then runs again from the start of its composed
/// work, on the driver it ran on, in a fresh workspace if PRIVATE, its
/// declared outputs emptied (`retry_wait_ended`).
///
/// Owned by what waits: its waiting runs (one reference, `waiting_ref_`,
/// for all of them, and the tasks waiting to retry), the yield it has
/// posted, its coroutine tasks; it holds the run. Its end goes to the node's part (`node_run::tasks_ended`), or
/// to an awaiting coroutine (`run`, under report steps).
class node_tasks final : public join_core<node_tasks>, public task_host {
 public:
  static std::shared_ptr<node_tasks> make(std::shared_ptr<run_state> rs, std::size_t i);

 private:
  struct key {  // `make`'s only: one allocation with the count
    explicit key() = default;
  };

 public:
  node_tasks(key, std::shared_ptr<run_state> rs, std::size_t i);
  ~node_tasks();

  /// Starts the tasks; their end goes to the node's part.
  void start();
  /// Starts the tasks and completes once all have ended, with the first
  /// failure (or errc::cancelled when stopped from outside with none).
  /// Cancelling it stops them. Meanwhile `t` is empty: the tasks hold it.
  static boost::asio::awaitable<status> run(std::shared_ptr<node_tasks>& t);
  /// The node was asked to stop: no task starts, the waiting ones are
  /// cancelled.
  void stop() { cancel_from_outside(); }

  // join_core's hooks.
  void cancel_running() noexcept;
  void round_ended(status st);

  /// Appends (task, `waiting to retry (...) after: <error>`) for each of
  /// its tasks waiting to retry (run_probe). On the node's strand.
  void describe_retries(std::vector<std::pair<std::size_t, std::string>>& out) const;

 private:
  // Starts the node's tasks from `next_` until all have started or a
  // yield is due; then the coroutine tasks.
  void go_on();
  void after_yield();
  // Runs task k, the node's j-th, here until its end or its first wait
  // (true), or declines it (false: it needs the coroutine runner; `ws` is
  // its workspace).
  // `first`: the task's first attempt (it begins now).
  bool start_frame_free(std::size_t j, std::size_t k, std::shared_ptr<workspace>& ws, bool first = true);
  void start_coroutine_tasks();
  // `first`: the task's first attempt (it begins now).
  void spawn_coroutine_task(std::size_t j, bool first = true);
  void coroutine_task_ended(std::size_t j, status st);

  // Retries (see the class comment).
  struct retrying;
  // The run context of task k (at `pos` among the node's tasks) for its
  // attempt about to start: its retrying state's, or a first attempt's
  // context of its policy and observation; also its entry in
  // task_host::task_runs_.
  const run_context* context_of(std::size_t k, std::size_t pos);
  // Where the offloaded ops of the task at `pos` are told (null: not asked).
  [[nodiscard]] const observation* offloads_told(std::size_t pos) const noexcept;
  // Task k's attempt ended with `st`: true when it will run again (a wait
  // has begun); else `st` becomes what the task ends with (a retry
  // refused for the run's deadline says so). `coroutine`: it ran on the
  // coroutine driver (and runs there again).
  bool retry_after(std::size_t k, status& st, bool coroutine);
  void retry_wait_ended(retrying& r, const status& st);
  // Moves task k's attempt count and failed attempts' errors into its
  // record and its node's report data, as the task ends.
  void settle_attempts(std::size_t k);
  // The end of a task attempt that may retry: the task's end unless it
  // retries.
  void task_attempt_ended(std::size_t k, status st, const step_stats& stats, std::chrono::system_clock::time_point at,
                          bool coroutine);
  // Ends the round once nothing runs any more.
  void settle();
  void ended(std::size_t k, const frame_free_run& r, std::chrono::system_clock::time_point at);

  // task_host
  void run_ended(frame_free_run& r) noexcept override;
  void run_begins(frame_free_run& r) noexcept override;
  void run_abandoned(frame_free_run& r) noexcept override;
  std::unique_ptr<frame_free_run> remove(frame_free_run& r);

  [[nodiscard]] node_run& part() const noexcept { return rs_->nodes[node_]; }

  std::shared_ptr<run_state> rs_;
  std::size_t node_;
  std::size_t next_ = 0;  // the next of the node's tasks to start
  // The yield rule of a step's loop, a count per task started.
  yield_clock yield_{run_step_options{}.yield_every, 0, run_step_options{}.yield_slice};
  bool starting_ = true;  // the start loop has not finished
  std::chrono::system_clock::time_point now_{};
  // The end of the last task to end, read in the handler now running
  // (node_run::tasks_ended_at); zero when unknown.
  std::chrono::system_clock::time_point ended_at_{};
  // Declined by the frame-free driver: started as coroutines after the
  // rest (task, workspace if made), each with a signal of its own, emitted
  // while it runs.
  std::vector<std::pair<std::size_t, std::shared_ptr<workspace>>> coroutine_tasks_;
  std::unique_ptr<boost::asio::cancellation_signal[]> signals_;
  std::unique_ptr<char[]> coroutine_running_;
  std::size_t coroutines_running_ = 0;
  waiting_runs waiting_;
  std::unique_ptr<frame_free_run> spare_;
  std::shared_ptr<workspace> spare_ws_;      // an emptied PRIVATE task workspace, for the next task
  std::shared_ptr<node_tasks> waiting_ref_;  // while a run waits
  // Where each task's events happen (by the node's task order), when step,
  // net, report or offload events are asked for.
  std::unique_ptr<observation[]> observed_;
  // What its tasks with a policy need, made for the first of them (a node
  // without one carries a pointer): the tasks that failed an attempt and
  // have not ended (few); this object's reference while any waits; the
  // first attempt's context of each max_attempts among the node's
  // policies (a handful: a task's first attempt allocates nothing).
  struct retry_book {
    // Each task's context while it has one (task_host::task_runs_).
    std::unique_ptr<const run_context*[]> runs;
    std::vector<std::unique_ptr<retrying>> tasks;
    std::shared_ptr<node_tasks> ref;
    std::vector<std::unique_ptr<run_context>> first_attempts;
  };
  retry_book& book();
  std::unique_ptr<retry_book> book_;
  std::size_t retry_waits_ = 0;  // tasks waiting to retry
  // The coroutine tasks' counts, by their order in coroutine_tasks_.
  std::unique_ptr<step_stats[]> coroutine_stats_;
};

}  // namespace taskgroup::detail
