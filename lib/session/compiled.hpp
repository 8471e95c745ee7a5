// Internal: a local session's nodes and its compiled groups, what every run
// of a group reads and none writes.
#pragma once

#include <taskgroup/execution_step.hpp>
#include <taskgroup/run_report.hpp>
#include <taskgroup/task_group.hpp>
#include <taskgroup/workspace.hpp>

#include "model/task_access.hpp"
#include "session/turns.hpp"
#include "step/runner.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/strand.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace taskgroup::detail {

class metrics_series;
using strand_t = boost::asio::strand<boost::asio::any_io_executor>;

/// A node of a session: its strand and its workspace, for as long as the
/// session lives.
struct node_state {
  std::string name;
  strand_t strand;
  /// `strand` as an any_io_executor (detail::erased_strand): what the
  /// library's own hops to the node use.
  boost::asio::any_io_executor executor;
  std::shared_ptr<workspace> ws;
  /// Runs of groups with GLOBAL tasks here take turns (touched on `strand`).
  std::shared_ptr<node_turns> turns = std::make_shared<node_turns>();
  /// The remote nets made in `ws`, by name: which net each is, so that a
  /// later run of the same group finds its own (touched on `strand`).
  std::map<std::string, net, std::less<>> remote_nets;
  /// What an ended run here leaves for the next one, which takes it
  /// rather than making its own (touched on `strand`): its workspace (a
  /// child of `ws`, for a group with no GLOBAL task here) and the PRIVATE
  /// task workspace its tasks left (a child of that one), both emptied;
  /// its tasks' frame-free run, reset (null when none).
  struct spares {
    std::shared_ptr<workspace> run_ws;
    std::shared_ptr<workspace> task_ws;
    std::unique_ptr<frame_free_run> driver;
  } spare;
};

/// A task of a compiled group. A group is kept compiled while it lives (one
/// of these per task), so a task's entry is small: its names by reference,
/// its tree in the group's block of trees (compiled_group::step).
struct compiled_task {
  task t;
  const std::string* node = nullptr;  ///< its compiled_node's name
  const std::string* name = nullptr;  ///< t.name(), fixed when `t` joined its group
  std::uint32_t node_index = 0;       ///< into compiled_group::nodes
  bool is_private = true;
  /// It declares outputs (a used task's are fixed): the run's output passes
  /// skip the others without touching the task.
  bool has_outputs = false;
  /// Its tree holds an op that may feed or close a queue (may_feed_queues).
  bool may_feed = false;
  /// It has a retry policy that retries (`t.retry()`): a flag beside the
  /// others, so that an entry stays as small as without policies.
  bool retries = false;
};

/// A node of a compiled group: its tasks and its own work.
struct compiled_node {
  std::string name;
  std::shared_ptr<const compiled_step> init;  ///< null when there is no local init
  std::shared_ptr<const compiled_step> exit;
  std::vector<std::pair<execution_step, std::chrono::milliseconds>> reports;
  std::vector<std::size_t> tasks;  ///< indexes into compiled_group::tasks
  /// A GLOBAL task runs here: the group's runs take turns on this node, in
  /// its workspace (see node_turns); otherwise each run has a workspace of
  /// its own, a child of the node's.
  bool global = false;
  /// Its tasks that may feed or close a queue, and 1 for its report steps
  /// if it has any: node_watch::feeders at the run's start.
  std::uint32_t feeders = 0;
};

/// A group as every run of it reads it.
struct compiled_group {
  std::shared_ptr<compiled_step[]> steps;  ///< aligned with tasks
  std::vector<compiled_task> tasks;
  std::vector<compiled_node> nodes;
  /// Every node, by index: the active nodes of a run that takes them all.
  std::vector<std::size_t> all_nodes;
  /// The session node of each node, null until a run has placed it
  /// (guarded by the session's mutex; empty before the first run).
  /// `all_placed`, read under the same mutex, says none is null: the
  /// entries never change after that, and runs read them without it.
  mutable std::vector<node_state*> placed;
  mutable bool all_placed = false;
  /// The session node of a group of one node, once a run has placed it
  /// (under the session's mutex): runs of such a group are coordinated on
  /// that node's strand, with no hop to the session's coordinator and back.
  [[nodiscard]] node_state* only_node() const noexcept { return placed.size() == 1 ? placed.front() : nullptr; }
  /// Where its runs are counted in the session's metrics (its name's
  /// label), set by the session as it compiles the group, before any run
  /// reads it.
  mutable metrics_series* series = nullptr;
  /// Taken while a run fills the output handles of the group's tasks:
  /// runs coordinated on different strands may end at once.
  mutable std::mutex publishing;

  /// Task k's step tree.
  [[nodiscard]] const compiled_step& step(std::size_t k) const noexcept { return compiled_at(steps.get(), k); }
};

/// Compiles every task of `g` (checking each) and its node work.
result<std::shared_ptr<const compiled_group>> compile_group(const task_group& g);

/// The indexes of the nodes that run, those of `options.only_nodes` (in
/// `own`), or every node (`g.all_nodes`: no copy).
result<std::span<const std::size_t>> active_nodes(const task_group& group, const compiled_group& g,
                                                  const run_options& options, std::vector<std::size_t>& own);
/// Whether `options` has node `name` take part in its run (all do without
/// run_options::only_nodes).
bool takes_part(const run_options& options, std::string_view name);

/// The error `e` of task `task` (its full name), named with its node: how
/// every error of a task begins, found at compile time or while it runs.
error task_error(std::string_view task, std::string_view node, const error& e);
/// The same for a compiled task.
error task_error(const compiled_task& ct, const error& e);

}  // namespace taskgroup::detail
