// A reference interpreter of the step semantics, for the property test.
//
// `model::session` runs a `task_group` the plain way: synchronously and
// recursively, with no Asio, reading the group only through the public
// accessors (task_group::tasks, task::user_step/setups/reports/instances,
// execution_step and net accessors). It follows the rules of docs/semantics.md, not the library's code:
//   - workspaces ("Workspaces"): name -> value with a parent chain; a net is bound
//     when its step's workspace is set up (the task's start, or each start of
//     a create_workspace step): an input must resolve, an output resolves to
//     the visible blob or becomes a new local one;
//   - steps ("Execution steps"): num_iter (0 runs nothing), stop blob checked after
//     every net, every sequential substep, every concurrent iteration;
//     only_once; concurrent substeps and instances (run one after another
//     here: the generator makes their result independent of the order);
//     report substeps with a long interval run exactly once, after the
//     parent's iterations ("Report steps");
//   - tasks ("Task composition"): [<t>:init] + <t>:parallel (instances, each in a child
//     workspace) of [<t>:instance:init] + <t>:body ([reports..., step]) +
//     [<t>:instance:exit] + [<t>:exit]; iterations of the task's own step
//     summed over its executions;
//   - groups ("Task groups", "Sessions"): node workspaces live as long as the session; a
//     PRIVATE task runs in a child made at its start; declared outputs are
//     made in the node workspace first and read when the node's tasks and
//     group report steps end (session.hpp), before local exit.
// Rules that Caffe2 did not have: a stop blob without a value does not
// stop ("Stop blob checks"); an op writing a blob of
// another type replaces its value.
//
// Failures and cancellation ("Step failure and cancellation", "Failure
// policies", "Deadlines and cancellation", "Report steps", "A node's
// run"). An op that fails ends its net, and every step around it, with its
// error, named by the step path, the net and the op; in a sequential
// iteration nothing after it runs, in a concurrent one the children not
// yet started do not start (those that began end first: the model runs
// them before it). The stop blob and iteration rules hold up to that
// point: the blobs written before the failure stay written, and a step's
// iterations count the one that failed (task_report::iterations too). The
// observer sees net_end and step_end with the failure, then task_end
// failed. Under run_policy::join the first failure cancels the rest of
// the run: a task that waits then (an op that only ends by cancellation:
// an hour's Sleep, the test's CancelRun) ends `cancelled`, its waiting op
// and every step around it telling the observer so, with the op's
// cancellation error (a concurrent step: its first cancelled child's,
// with a count of the others); a task not yet begun ends `cancelled`
// (`<root>: cancelled`) with no event and no effect. Which tasks had
// begun is the library's choice (the order of tasks is unspecified): the
// run takes it as input, and the task that failed must have begun. A
// failed or cancelled task's report steps make no final run and its
// outputs are not fetched; a node whose tasks did not all succeed runs no
// group report step's final run and no local exit; a failure in local
// init leaves the node's tasks not run. A cancellation (CancelRun asks
// for the run's) is the run's error `run cancelled`, followed by where
// each task that had begun waited. A Sleep that ends on its own (0 ms at
// once, or a short wait) changes nothing but the time.
// Operators: ConstantFill, Copy, Add, Sub, Div, GE, LT, EQ, Not, Or, And
// over int64 and bool scalars (builtin_ops.cpp), Fail, Sleep and the
// test's CancelRun.
#pragma once

#include <taskgroup/error.hpp>
#include <taskgroup/run_report.hpp>
#include <taskgroup/task_group.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace taskgroup::model {

/// A blob's value: none (the blob exists without a value), int64 or bool.
struct value {
  enum class type : std::uint8_t { none, i64, boolean, other };
  type t = type::none;
  std::int64_t i = 0;
  bool b = false;
  friend bool operator==(const value&, const value&) = default;
  [[nodiscard]] std::string str() const;
};

/// How an execution, a net or a task ended, as its observer event says:
/// well, with a failure, or cancelled (`error::is_cancelled`).
enum class ending : std::uint8_t { ok, failed, cancelled };

/// One observer event (run_observer in run_report.hpp).
struct event {
  enum class type : std::uint8_t {
    task_begin,
    task_end,
    step_begin,
    step_end,
    net_begin,
    net_end,
    report_begin,
    report_end
  };
  std::string task;  // empty for a node's own work
  std::string node;
  type t = type::task_begin;
  std::string name;              // step, net or report step (task events: the task)
  std::uint64_t iterations = 0;  // step_end, task_end
  ending end = ending::ok;       // *_end
  friend bool operator==(const event&, const event&) = default;
  friend bool operator<(const event& a, const event& b) {
    return std::tie(a.t, a.name, a.iterations, a.end) < std::tie(b.t, b.name, b.iterations, b.end);
  }
  [[nodiscard]] std::string str() const;
};

struct task_outcome {
  std::string name;
  std::string node;
  task_status status = task_status::not_run;
  std::string error;  // the task's failure message (failed, cancelled)
  std::uint64_t iterations = 0;
  std::vector<std::pair<std::string, value>> outputs;  // succeeded tasks only
  /// The library may have cancelled the task before it began (a failure or
  /// cancellation elsewhere came first).
  bool may_skip = false;
};

struct run_outcome {
  bool ok = true;
  errc code = errc::op_failed;      // when failed
  std::string error;                // the run's error, as the library words it
  std::vector<task_outcome> tasks;  // in group order
  std::vector<event> events;
  /// Keys `node|task` whose events have no defined order (concurrent parts
  /// ran): compared as multisets.
  std::set<std::string> unordered;
  /// A task or node waits for a cancellation that nothing asks for: the
  /// library's run would not end (the generator never keeps such a group).
  bool hangs = false;
};

struct ws;

/// The model of a local_session: node workspaces that persist across runs.
class session {
 public:
  session();
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  /// Sets blob `blob` of node `node`'s workspace (before a run).
  void set(const std::string& node, const std::string& blob, value v);
  /// Runs `g` (one run, join policy: the first error ends it). `began`,
  /// when given, says for each task whether the library began it (only a
  /// task the outcome says `may_skip` can have not begun).
  run_outcome run(const task_group& g, const std::vector<bool>* began = nullptr);
  /// The local blobs of node `node`'s workspace.
  [[nodiscard]] std::map<std::string, value> blobs(const std::string& node) const;

  /// The step tree the model runs for `t` (docs/semantics.md, "Task composition").
  static execution_step compose(const task& t);

 private:
  std::shared_ptr<ws> node_ws(const std::string& name);
  std::map<std::string, std::shared_ptr<ws>> nodes_;
};

/// What the test's CancelRun op ends with once the run is cancelled.
inline constexpr const char* cancel_run_text = "cancelled as asked";

/// Which driver the session must pick for a task with composed tree
/// `root` (session.hpp: small and plain trees run frame-free, with or
/// without an observer): `frame_free`, `coroutine`, or `either` when the
/// tree is near the documented size limit.
enum class driver { frame_free, coroutine, either };
driver expected_driver(const execution_step& root);

}  // namespace taskgroup::model
