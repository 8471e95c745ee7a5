// Internal: the tasks of one node in one run, and their join.
#pragma once

#include "session/state.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace taskgroup::detail {

// The tasks of node i in one run. Those whose tree allows it run without
// coroutine frames (detail::frame_free_run), one after another on the
// node's strand until each ends or waits, yielding to the strand every
// `run_step_options::yield_every` tasks (so that other work and
// cancellation get in); a waiting task then costs its run, its workspace
// and its pending operation only. The others are joined as coroutines
// (one detail::join for all of them) once the frame-free ones have
// started. The whole is one join (detail::join_core, with the rules of
// every join): it ends each task's report, keeps the first failure and,
// under fail_fast, stops the others at once, the tasks not started yet
// included (reported cancelled).
//
// Owned by what waits: its waiting runs (one reference, `waiting_ref_`,
// for all of them), the yield it has posted, the coroutine tasks' join;
// it holds the run. Its end goes to the node's next stage (`start`), or to
// an awaiting coroutine (`run`, under report steps).
class node_tasks final : public join_core<node_tasks>, public task_host {
 public:
  static std::shared_ptr<node_tasks> make(std::shared_ptr<run_state> rs, std::size_t i);
  ~node_tasks();

  // Starts the tasks; their end goes to `tasks_ended(rs, i, status)`.
  void start(void (*tasks_ended)(const std::shared_ptr<run_state>&, std::size_t, status));
  // Starts the tasks and completes once all have ended, with the first
  // failure (or errc::cancelled when stopped from outside with none).
  // Cancelling it stops them. Meanwhile `t` is empty: the tasks hold it.
  static boost::asio::awaitable<status> run(std::shared_ptr<node_tasks>& t);
  // The node was asked to stop: no task starts, the waiting ones are
  // cancelled.
  void stop() { cancel_from_outside(); }

  // join_core's hooks.
  void cancel_running() noexcept;
  void round_ended(status st);

 private:
  node_tasks(std::shared_ptr<run_state> rs, std::size_t i);

  // Starts the node's tasks from `next_` until all have started or a
  // yield is due; then the coroutine tasks.
  void go_on();
  void after_yield();
  // Runs task k here until its end or its first wait (true), or declines
  // it (false: it needs the coroutine runner; `ws` is its workspace).
  bool start_frame_free(std::size_t k, std::shared_ptr<workspace>& ws);
  void start_coroutine_tasks();
  void coroutine_tasks_ended(status st);
  // Ends the round once nothing runs any more.
  void settle();
  void ended(std::size_t k, const frame_free_run& r, std::chrono::system_clock::time_point at);

  // task_host
  void run_ended(frame_free_run& r) noexcept override;
  void run_begins(frame_free_run& r) noexcept override;
  void run_abandoned(frame_free_run& r) noexcept override;
  std::unique_ptr<frame_free_run> remove(frame_free_run& r);

  std::shared_ptr<run_state> rs_;
  std::size_t node_;
  void (*tasks_ended_)(const std::shared_ptr<run_state>&, std::size_t, status) = nullptr;
  std::size_t next_ = 0;  // the next of the node's tasks to start
  std::uint32_t since_yield_ = 0;
  bool starting_ = true;  // the start loop has not finished
  bool coroutines_running_ = false;
  std::chrono::system_clock::time_point now_{};
  // Declined by the frame-free driver: started as coroutines after the rest.
  std::vector<std::pair<std::size_t, std::shared_ptr<workspace>>> coroutine_tasks_;
  boost::asio::cancellation_signal coroutine_signal_;  // their join's, while it runs
  std::vector<std::unique_ptr<frame_free_run>> waiting_;
  std::unique_ptr<frame_free_run> spare_;
  std::shared_ptr<workspace> spare_ws_;      // an emptied PRIVATE task workspace, for the next task
  std::shared_ptr<node_tasks> waiting_ref_;  // while a run waits
};

}  // namespace taskgroup::detail
