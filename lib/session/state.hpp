// Internal: a local session's compiled groups and the state of its runs,
// shared by the files of lib/session/ (compile, node runs, outputs, the
// session itself).
#pragma once

#include <taskgroup/run_report.hpp>
#include <taskgroup/session.hpp>
#include <taskgroup/step_runner.hpp>
#include <taskgroup/task_group.hpp>
#include <taskgroup/workspace.hpp>

#include "detail/join.hpp"
#include "step/runner.hpp"
#include "model/task_access.hpp"
#include "session/turns.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace taskgroup::detail {

using strand_t = boost::asio::strand<boost::asio::any_io_executor>;

struct node_state {
  std::string name;
  strand_t strand;
  // `strand` as an any_io_executor (detail::erased_strand): what the
  // library's own hops to the node use.
  boost::asio::any_io_executor executor;
  std::shared_ptr<workspace> ws;
  // Runs of groups with GLOBAL tasks here take turns (touched on `strand`).
  std::shared_ptr<node_turns> turns = std::make_shared<node_turns>();
  // The remote nets made in `ws`, by name: which net each is, so that a
  // later run of the same group finds its own (touched on `strand`).
  std::map<std::string, net, std::less<>> remote_nets;
};

// A group is kept compiled while it lives (one of these per task), so a
// task's entry is small: its names by reference, its tree in the group's
// block of trees (compiled_group::step).
struct compiled_task {
  task t;
  const std::string* node = nullptr;  // its compiled_node's name
  const std::string* name = nullptr;  // t.name(), fixed when `t` joined its group
  std::uint32_t node_index = 0;       // into compiled_group::nodes
  bool is_private = true;
  // It declares outputs (a used task's are fixed): the run's output passes
  // skip the others without touching the task.
  bool has_outputs = false;
  // Its tree holds an op that may feed or close a queue (may_feed_queues).
  bool may_feed = false;
};

struct compiled_node {
  std::string name;
  std::shared_ptr<const detail::compiled_step> init;  // null when there is no local init
  std::shared_ptr<const detail::compiled_step> exit;
  std::vector<std::pair<execution_step, std::chrono::milliseconds>> reports;
  std::vector<std::size_t> tasks;  // indexes into compiled_group::tasks
  // A GLOBAL task runs here: the group's runs take turns on this node, in
  // its workspace (see node_turns); otherwise each run has a workspace of
  // its own, a child of the node's.
  bool global = false;
  // Its tasks that may feed or close a queue, and 1 for its report steps
  // if it has any: node_watch::feeders at the run's start.
  std::uint32_t feeders = 0;
};

struct compiled_group {
  std::shared_ptr<detail::compiled_step[]> steps;  // aligned with tasks
  std::vector<compiled_task> tasks;
  std::vector<compiled_node> nodes;

  // Task k's step tree.
  [[nodiscard]] const detail::compiled_step& step(std::size_t k) const noexcept {
    return detail::compiled_at(steps.get(), k);
  }
};

// Compiles every task of `g` (checking each) and its node work.
result<std::shared_ptr<const compiled_group>> compile_group(const task_group& g);

// The indexes of the nodes that run: every node, or those of
// `options.only_nodes`.
result<std::vector<std::size_t>> active_nodes(const task_group& group, const compiled_group& g,
                                              const run_options& options);
// Whether `options` has node `name` take part in its run (all do without
// run_options::only_nodes).
bool takes_part(const run_options& options, std::string_view name);

// Forwards a step runner's events to the run observer with task context.
class task_events final : public step_observer {
 public:
  task_events(run_observer* o, std::string task, std::string node)
      : o_(o), task_(std::move(task)), node_(std::move(node)) {}
  void step_begin(std::string_view step) override { o_->step_begin(task_, node_, step); }
  void step_end(std::string_view step, std::uint64_t iterations, const status& r) override {
    o_->step_end(task_, node_, step, iterations, r);
  }
  void net_begin(std::string_view n) override { o_->net_begin(task_, node_, n); }
  void net_end(std::string_view n, const status& r) override { o_->net_end(task_, node_, n, r); }
  void report_begin(std::string_view step) override { o_->report_begin(task_, node_, step); }
  void report_end(std::string_view step, const status& r) override { o_->report_end(task_, node_, step, r); }

 private:
  run_observer* o_;
  std::string task_;
  std::string node_;
};

// The error `e` of task `task` (its full name), named with its node: how
// every error of a task begins, found at compile time or while it runs.
error task_error(std::string_view task, std::string_view node, const error& e);
// The same for a compiled task.
error task_error(const compiled_task& ct, const error& e);

// A task's report while the run is in flight: a fifth of a task_report's
// size (every waiting task holds one), made into the report at the end.
// Its outputs, fetched once its node's tasks have all ended, are kept by
// the node (run_state::outputs).
struct task_record {
  std::chrono::system_clock::time_point started{};
  std::chrono::system_clock::time_point finished{};
  std::uint64_t iterations = 0;
  std::unique_ptr<error> failure;  // when failed or cancelled
  task_status status = task_status::not_run;
  bool unstarted = false;  // cancelled before it began (cancel_unstarted)
};

// A task's outputs as one run fetched them: values, and the errors of the
// blobs that had none.
struct fetched_outputs {
  std::vector<std::pair<std::string, std::shared_ptr<const blob>>> values;
  std::vector<std::pair<std::string, error>> errors;
};

// Fills `out`, a new report, as task `ct`'s from its record and, when
// given, its fetched outputs (moved from).
void fill_report(task_report& out, const compiled_task& ct, const task_record& r, fetched_outputs* outputs);
// The report of task `ct` from its record, without outputs.
task_report report_of(const compiled_task& ct, const task_record& r);

// What run_probe asks on a node (touched on its strand only): its
// coroutine tasks' waiting net runs and its frame-free runs that wait.
struct node_watch {
  wait_sites sites;
  // compiled_node::feeders less its tasks that ended other than by the
  // run's cancellation: none left tells a starved Dequeue (queues.hpp).
  std::uint32_t feeders = 0;
  const std::vector<std::unique_ptr<frame_free_run>>* waiting = nullptr;  // while its tasks run
};

class node_tasks;

// A node's part in a run, touched on the node's strand only: what its
// stages (its turn, local init, tasks, local exit) share.
// A feed placed in a GLOBAL node's own workspace, and the value it
// displaced there (none: the blob is left empty): put back when the
// node's part of the run ends (restore_feeds).
struct displaced_feed {
  const std::string* name;
  blob value;
};

struct node_part {
  node_turns::turn turn;  // a GLOBAL node's, held until the node has ended
  std::vector<displaced_feed> displaced;
  // Reaches the coroutine stage that runs, while `in_coroutine`.
  boost::asio::cancellation_signal signal;
  bool in_coroutine = false;
  bool cancelled = false;  // the run asked the node to stop
  // Its tasks while they run (weak: they hold the run).
  std::weak_ptr<node_tasks> tasks;
  run_step_options options;  // of its init, exit and report steps
  std::optional<task_events> events;
};

// The state of one run, shared by every node and by the run's own work on
// the session's coordinator strand. Owned by what waits: the handlers
// queued for it, the operations of its waiting tasks; an io_context
// destroyed with any of them pending frees it, the caller's handler
// uncalled.
struct run_state {
  std::shared_ptr<const compiled_group> group;
  task_group source;  // the group as given
  run_options options;
  const operator_registry* registry = nullptr;
  std::vector<task_record> records;  // aligned with group->tasks
  std::vector<node_state*> nodes;    // aligned with group->nodes
  // Aligned with group->nodes: the run's workspace on each node, set when
  // the node starts (the node's own for a `compiled_node::global` node).
  std::vector<std::shared_ptr<workspace>> workspaces;
  // Aligned with group->nodes: the feeds of each node, checked.
  std::vector<std::vector<const taskgroup::feeds::entry*>> feeds;
  // Aligned with group->nodes, each (touched by its node's strand only)
  // with its tasks' outputs in the order of compiled_node::tasks; empty
  // while none is fetched.
  std::vector<std::vector<fetched_outputs>> outputs;
  // Aligned with group->nodes: where its running tasks stand (run_probe).
  std::vector<node_watch> watch;
  // For run_probe, which asks from the session's coordinator: it, and the
  // session's state, which owns the nodes' strands (held as long as the
  // run is: a probe holds the run only while it asks).
  boost::asio::any_io_executor coord;
  std::shared_ptr<const void> session;

  // --- the run as a whole, on the coordinator ----------------------------
  std::unique_ptr<run_completion> done;  // the caller's handler
  std::chrono::system_clock::time_point started{};
  std::vector<std::size_t> active;  // the nodes that take part, in group order
  // Aligned with group->nodes: started and not ended yet.
  std::vector<char> running;
  std::size_t nodes_left = 0;
  // The nodes' join: the first failure (under run_policy::join) stops the
  // others; cancelled ends the run itself caused are no failures.
  join_rule nodes_rule{join_mode::fail_fast};
  std::optional<boost::asio::steady_timer> deadline;  // run_options::timeout
  std::optional<error> expired;                       // the deadline's error, once it fired
  bool cancelled_outside = false;                     // terminal or partial cancellation from the caller
  // Set by the caller's cancellation slot as it is emitted, on the
  // emitting thread: the cancellation reaches the coordinator after the
  // run's `begin` (posted first), which must then start no node.
  std::atomic<bool> cancel_asked{false};
  bool nodes_started = false;

  // Aligned with group->nodes (touched by each node's strand).
  std::unique_ptr<node_part[]> parts;
};

// The workspace task k runs in: the run's on its node, or a child of it
// for a PRIVATE task (destroyed when the task ends), `*spare` when given
// and not empty (an emptied child of the same workspace, see
// workspace_reuse.hpp).
std::shared_ptr<workspace> task_workspace(const run_state& rs, std::size_t k,
                                          std::shared_ptr<workspace>* spare = nullptr);

// Fills a task's report from its end (at `finished`).
status end_task(run_state& rs, std::size_t k, const status& st, const step_stats& stats,
                std::chrono::system_clock::time_point finished = std::chrono::system_clock::now());

// A task that never started because the run was cancelled (or another
// task failed) first: reported as a task cancelled at its first step.
void cancel_unstarted(run_state& rs, std::size_t k);

// run_probe's link to the run it follows (run_options::probe).
struct probe_access {
  // From the run's start. Errors: errc::invalid_task when the probe
  // follows another run in flight.
  static status attach(run_probe& p, const std::shared_ptr<run_state>& rs);
  // At its end: the probe no longer follows `rs`, and holds nothing of it.
  static void detach(run_probe& p, const run_state& rs);
};

// Where each task of node i that has begun and not ended stands, as
// (task, `path/net "x" op #i (Type): what it waits for`), on the node's
// strand: each waiting net run of a coroutine task, each waiting
// frame-free run, and "<root>: running, not waiting on an op" for the
// others (run_probe).
void describe_node(const run_state& rs, std::size_t i, std::vector<std::pair<std::size_t, std::string>>& out);

// Node i's part of a run, started on its strand: its turn (a GLOBAL
// node), its workspace with outputs and feeds, local init, its tasks
// beside its report steps, outputs fetched, local exit; its end goes to
// the coordinator (`node_ended`). Each stage that is a coroutine (a turn,
// local init and exit, report steps, tasks that need the coroutine
// driver) is spawned on the strand; the rest are plain calls.
void start_node(std::shared_ptr<run_state> rs, std::size_t i);
// Asks node i's part to stop (on its strand): the stage that runs ends
// cancelled, tasks not yet started are reported cancelled, and no later
// stage starts.
void cancel_node(run_state& rs, std::size_t i);
// Node i's part has ended with `st` (on the coordinator, session.cpp).
void node_ended(const std::shared_ptr<run_state>& rs, std::size_t i, status st);

// Copies the declared outputs of node i's tasks out of the run's
// workspace there.
void fetch_outputs(run_state& rs, std::size_t i);

// Places node i's feeds in the run's workspace there (copies); in a
// GLOBAL node's own workspace, what they displace is kept. Errors: a
// value that cannot be copied, naming the feed.
status place_feeds(run_state& rs, std::size_t i);
// Takes a GLOBAL node's feeds out of its workspace again, putting back
// the values they displaced (or leaving their blobs empty): a run's feeds
// are its own (on the node's strand, when its part of the run ends).
void restore_feeds(run_state& rs, std::size_t i) noexcept;

// Checks `given` against the inputs `g` declares (taskgroup::check_feeds;
// only the required inputs of the `active` nodes must be fed) and files
// each feed under its node in `rs.feeds`.
status check_feeds(const task_group& g, const compiled_group& cg, const feeds& given,
                   const std::vector<std::size_t>& active, run_state& rs);

// Fills the output handles of the tasks of the `active` nodes from the
// run's report (on the coordinator, where every run of a session ends).
void publish_outputs(const compiled_group& cg, const run_report& report, const std::vector<std::size_t>& active);

// Makes the remote nets of `g` (task_group::add_remote_net) on their nodes,
// each on its node's strand: `on[j]` is the node of `g.remote_nets()[j]`,
// null for one this run leaves out (run_options::only_nodes). A net this
// group made there before is kept. Errors, naming the net and the node:
// another net of that name there (errc::net_exists), the net's binding
// errors.
// (By value: the caller does not wait for it in a frame of its own.)
boost::asio::awaitable<status> make_remote_nets(boost::asio::any_io_executor coord, task_group g,
                                                std::vector<node_state*> on, const operator_registry& registry);

// Strict codecs, at the end of a run: every fetched output goes through
// its codec, as it would travel to another process; a failure fails the
// task. Returns the first such failure in task order.
status round_trip_outputs(run_state& rs, const std::vector<std::size_t>& active, const codec_registry& codecs);

}  // namespace taskgroup::detail
