// Internal: a node's part in one run, as one object with an explicit
// stage machine (as the step machine is for a step's execution).
#pragma once

#include <taskgroup/run_context.hpp>

#include "session/compiled.hpp"
#include "session/records.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/container/small_vector.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace taskgroup::detail {

struct run_state;
class node_tasks;

/// A node's frame-free runs that wait (room for one inline: a node of one
/// task allocates none).
using waiting_runs = boost::container::small_vector<std::unique_ptr<frame_free_run>, 1>;

/// What run_probe asks of a node's part in a run (on the node's strand):
/// its coroutine tasks' waiting net runs and its frame-free runs that wait.
struct node_watch {
  wait_sites sites;
  /// compiled_node::feeders less its tasks that ended other than by the
  /// run's cancellation: none left tells a starved Dequeue (ops/queues.hpp).
  std::uint32_t feeders = 0;
  const waiting_runs* waiting = nullptr;  ///< while its tasks run
  /// While its tasks run: they describe their tasks waiting to retry.
  const node_tasks* tasks = nullptr;
};

/// A feed placed in a GLOBAL node's own workspace, and the value it
/// displaced there (none: the blob is left empty): put back when the
/// node's part of the run ends.
struct displaced_feed {
  const std::string* name;
  blob value;
};

/// Node i's part in one run. Its stages, in order:
///
///   idle -> turn (a GLOBAL node's, awaited) -> set_up (the run's workspace
///   there, every declared output made in it, the feeds copied in) -> init
///   (local init) -> tasks (the node's tasks, with its report steps beside
///   them) -> fetch (the tasks' declared outputs copied out) -> exit
///   (local exit, after a success) -> done (feeds restored, turn released,
///   the run told)
///
/// One function (`advance`) ends a stage and starts the next, on the
/// node's strand; a stage that waits (a turn, local init and exit, tasks
/// with report steps) is a coroutine spawned there, the rest are plain
/// calls, and the tasks are a join of their own (node_tasks). A failed
/// turn, set-up or init ends the node before its tasks run; a failed stage
/// names the node. `stop` is the one way to cancel it.
///
/// Owned by its run (run_state::nodes); everything that waits on a stage
/// holds the run. Touched on the node's strand only, but for what the run
/// sets before it starts the node.
class node_run {
 public:
  enum class stage : std::uint8_t { idle, turn, set_up, init, tasks, fetch, exit, done };

  /// Set by the run before the node starts.
  std::size_t index = 0;  ///< into compiled_group::nodes
  node_state* node = nullptr;
  const compiled_node* compiled = nullptr;
  /// The feeds of this node, checked (check_feeds).
  std::vector<const taskgroup::feeds::entry*> fed;
  /// Started and not ended: set by the run on its coordinator as it starts
  /// the node, cleared on the node's strand as the node ends; read by the
  /// coordinator to stop only the nodes still running.
  std::atomic<bool> live{false};
  /// Clock readings shared along one handler, so that a run coordinated
  /// on its one node's strand reads the clock twice, not four times:
  /// `start_fresh`, the run's start (run_state::started) was read in the
  /// handler that starts this node's tasks, which take it as theirs;
  /// `tasks_ended_at`, the end of the node's last task, read in the
  /// handler where the node then ended, with nothing after it but
  /// bookkeeping (zero otherwise).
  bool start_fresh = false;
  std::chrono::system_clock::time_point tasks_ended_at{};

  /// The run's workspace on the node, from set-up (the node's own for a
  /// `compiled_node::global` node).
  std::shared_ptr<workspace> ws;
  /// An emptied PRIVATE task workspace, a child of `ws`, for its tasks
  /// (node_tasks takes it and gives it back when they have ended).
  std::shared_ptr<workspace> spare_task_ws;
  /// Its tasks' outputs in the order of compiled_node::tasks, fetched when
  /// the tasks have ended; empty while none is.
  std::vector<fetched_outputs> outputs;
  /// The failed attempts' errors of its tasks that retried (task index,
  /// attempt_log's), for the report; empty when none did.
  std::vector<std::pair<std::size_t, std::vector<error>>> attempt_failures;
  node_watch watch;

  /// Starts the node (on its strand): its end goes to `rs`'s join.
  /// `fresh_clock`: `rs->started` was read in this handler.
  void start(const std::shared_ptr<run_state>& rs, bool fresh_clock = false);
  /// Asks the node to stop (on its strand): the stage that runs ends
  /// cancelled, tasks not yet started are reported cancelled, and no later
  /// stage starts.
  void stop();
  /// The tasks stage has ended with `st` (node_tasks).
  void tasks_ended(const std::shared_ptr<run_state>& rs, status st) { advance(rs, std::move(st)); }

  [[nodiscard]] stage current() const noexcept { return stage_; }
  /// Its tasks are gone (node_tasks' destructor).
  void tasks_gone(const node_tasks* t) noexcept {
    if (tasks_ == t) tasks_ = nullptr;
  }

 private:
  // The stage that ran has ended with `st`: the next one starts.
  void advance(const std::shared_ptr<run_state>& rs, status st);
  // Starts stage `s` (which may end at once, inline).
  void enter(const std::shared_ptr<run_state>& rs, stage s);
  // Runs `a` on the node's strand as the current stage.
  void spawn(const std::shared_ptr<run_state>& rs, boost::asio::awaitable<status> a);
  status set_up(run_state& rs);
  void start_tasks(const std::shared_ptr<run_state>& rs);
  void finish(const std::shared_ptr<run_state>& rs, status st);
  status place_feeds();
  void restore_feeds() noexcept;
  void fetch_outputs(const run_state& rs);
  void recycle_workspace() noexcept;
  [[nodiscard]] error node_error(const error& e) const;

  stage stage_ = stage::idle;
  bool stopped_ = false;       // the run asked the node to stop
  bool in_coroutine_ = false;  // a spawned stage runs: `signal_` reaches it
  boost::asio::cancellation_signal signal_;
  node_tasks* tasks_ = nullptr;  // while they live (they hold the run; they clear it as they go)
  node_turns::turn turn_;        // a GLOBAL node's, until the node has ended
  std::vector<displaced_feed> displaced_;
  run_step_options options_;  // of its init, exit and report steps
  observation observed_;      // of the same, for the node's own work
  // The run its own work's kernels serve, told of its offloaded ops when
  // they are asked for (at observed_).
  std::optional<run_context> own_run_;
};

}  // namespace taskgroup::detail
