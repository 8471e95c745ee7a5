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
// another type replaces its value. Operators: ConstantFill, Copy, Add, Sub,
// GE, LT, EQ, Not, Or, And over int64 and bool scalars (builtin_ops.cpp).
#pragma once

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
  bool ok = true;                // *_end
  friend bool operator==(const event&, const event&) = default;
  friend bool operator<(const event& a, const event& b) {
    return std::tie(a.t, a.name, a.iterations, a.ok) < std::tie(b.t, b.name, b.iterations, b.ok);
  }
  [[nodiscard]] std::string str() const;
};

struct task_outcome {
  std::string name;
  std::string node;
  bool ok = true;
  std::uint64_t iterations = 0;
  std::vector<std::pair<std::string, value>> outputs;
};

struct run_outcome {
  bool ok = true;
  std::string error;
  std::vector<task_outcome> tasks;  // in group order
  std::vector<event> events;
  /// Keys `node|task` whose events have no defined order (concurrent parts
  /// ran): compared as multisets.
  std::set<std::string> unordered;
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
  /// Runs `g` (one run, join policy: the first error ends it).
  run_outcome run(const task_group& g);
  /// The local blobs of node `node`'s workspace.
  [[nodiscard]] std::map<std::string, value> blobs(const std::string& node) const;

  /// The step tree the model runs for `t` (docs/semantics.md, "Task composition").
  static execution_step compose(const task& t);

 private:
  std::shared_ptr<ws> node_ws(const std::string& name);
  std::map<std::string, std::shared_ptr<ws>> nodes_;
};

/// Which driver the session must pick for a task with composed tree
/// `root` (session.hpp: small and plain trees run frame-free, with or
/// without an observer): `frame_free`, `coroutine`, or `either` when the
/// tree is near the documented size limit.
enum class driver { frame_free, coroutine, either };
driver expected_driver(const execution_step& root);

}  // namespace taskgroup::model
