// taskgroup: task groups, the unit a session runs.
//
// A group gathers tasks that start together; it finishes when the last one
// does (docs/semantics.md, "Task groups"). Rules: a group becomes used when
// a session compiles it (or `tasks_by_node` / `to_task` is called); adding
// to a used group is an error. Workspace types must agree: a task without a
// type takes the group's (or PRIVATE); a group without one takes its first
// task's; a PRIVATE and a GLOBAL task cannot share a group.
//
// Per node, a run is: local init -> (all the node's tasks concurrently,
// with the node's group report steps every interval) -> one final run of
// each report step -> local exit.
//
// Tasks start together, and each binds its nets when it starts: a task
// cannot read a blob that only a concurrent sibling creates. Hand data
// over through blobs that exist before both start (made in local init, or
// a queue blob).
//
// A group is a handle: copies share one group.
//
// Threading: build on one thread, then share read-only (reentrant).
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/async.hpp>
#include <taskgroup/control.hpp>
#include <taskgroup/detail/run_completion.hpp>
#include <taskgroup/detail/throwing_tokens.hpp>
#include <taskgroup/error.hpp>
#include <taskgroup/execution_step.hpp>
#include <taskgroup/node.hpp>
#include <taskgroup/run_options.hpp>
#include <taskgroup/run_report.hpp>
#include <taskgroup/task.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/system_executor.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace taskgroup {

namespace detail {
struct group_access;
}

/// A group report step: runs on `node` every `interval` while the group's
/// tasks there run, and once more after they all finished.
struct TASKGROUP_API group_report_step {
  execution_step step;
  std::string node;
  std::chrono::milliseconds interval;
};

/// An input a group declares: blob `blob` on node `node`, given to each run
/// by a feed (`run_options::feeds`).
struct TASKGROUP_API group_input {
  std::string node;
  std::string blob;
  /// The C++ type a feed must hold, or null for any type.
  const std::type_info* type = nullptr;
  /// The type's name in messages (`int64`, `vector<double>`, ...).
  std::string type_name;
  /// A run without a feed for a required input fails before it starts.
  bool required = true;
};

/// A net a group carries for the workspace of node `node` (Caffe2
/// `TaskGroup.add_remote_net`): see `task_group::add_remote_net`.
struct TASKGROUP_API remote_net {
  std::string node;
  taskgroup::net net;
};

/// The longest group name (`task_group::name`), in bytes: 200. A longer
/// name is refused with an error naming the field and this limit
/// (`errc::invalid_task`; in a plan's top-level `"name"`,
/// `errc::invalid_plan`).
inline constexpr std::size_t max_group_name_size = 200;

/// Tasks that run together (a Caffe2 TaskGroup).
class TASKGROUP_API task_group {
 public:
  /// An empty group; `type` fixes the workspace type of its tasks.
  explicit task_group(std::optional<taskgroup::workspace_type> type = std::nullopt);

  /// Adds `t` (on its own node). Its full name becomes `<node>/<name>`,
  /// made unique in the group with `:1`, `:2`, ... Errors:
  /// `errc::invalid_task`: "Cannot add Task to an already used
  /// TaskGroup.", a workspace type clash (naming both types), a task that
  /// already belongs to a group.
  result<task> add(task t);
  /// Same, placing the task on node `on`.
  result<task> add(task t, node on);

  /// The tasks, in order of addition.
  [[nodiscard]] const std::vector<task>& tasks() const noexcept;
  /// Nodes of the tasks, report steps and remote nets, in order of first
  /// use.
  [[nodiscard]] std::vector<std::string> used_nodes() const;
  /// The cluster view (nodes with merged options).
  [[nodiscard]] const taskgroup::cluster& cluster() const noexcept;
  /// The workspace type given at construction, if any.
  [[nodiscard]] std::optional<taskgroup::workspace_type> workspace_type() const noexcept;
  /// True once compiled by a session, or after `tasks_by_node`/`to_task`.
  [[nodiscard]] bool used() const noexcept;

  /// Names the group `n`: at most `max_group_name_size` (200) bytes of
  /// printable UTF-8 (no control character, U+0000 to U+001F or U+007F);
  /// empty (the default) leaves it unnamed. The name labels the group's
  /// metrics in its session (`group="<name>"`): a server should name its
  /// groups by the kind of request they serve (`"checkout"`), not per
  /// request, so that the labels stay few. `tasks_by_node` passes it on.
  /// On a used group (`used()`) it changes nothing and throws
  /// `taskgroup::system_error` (`errc::invalid_task`, "task group: Cannot
  /// set name "n" on an already used TaskGroup."); so does a name out of
  /// limits, naming the field and the limit ("task group: name must be at
  /// most 200 bytes (taskgroup::max_group_name_size), got 201", "task
  /// group: name must hold no control characters, got "a\u000Ab"", "task
  /// group: name must be valid UTF-8, got byte 0xFF at offset 3").
  /// Threading: as the other builders; a used group's name no longer
  /// changes, so runs on any thread may read it. Plans carry the name as
  /// their top-level `"name"` (docs/plan-format.md).
  task_group& name(std::string n);
  /// The name set with `name`; empty for an unnamed group.
  [[nodiscard]] const std::string& name() const noexcept;

  /// A report step on `on` (default `local`), every `interval` (default:
  /// the step's `run_every`, else 1000 ms). A report step on a node with no
  /// task fails the run: "report step on node "x", which has no task"; so
  /// does an interval outside (0, max_duration] (`errc::invalid_task`).
  /// On a used group (`used()`) it adds nothing and throws
  /// `taskgroup::system_error` (`errc::invalid_task`, "task group: Cannot
  /// add report step "r" on node "x" to an already used TaskGroup."); the
  /// group stays as it was and goes on running.
  task_group& report_step(execution_step s, node on = {}, std::optional<std::chrono::milliseconds> interval = {});
  /// Local setup of node `on`: init before all its tasks, exit after. On a
  /// used group it throws as `report_step` does ("Cannot add local setup of
  /// node "x" to an already used TaskGroup.").
  task_group& local_init(node on, body b);
  task_group& local_exit(node on, body b);
  task_group& local_setup(node on, std::shared_ptr<setup_object> obj);

  /// Declares input `blob` on node `on` (default `local`), holding a `T`:
  /// each run is given its value by a feed (`run_options::feeds`), placed
  /// in the run's workspace on that node before any task starts. Errors
  /// (`errc::invalid_task`): an empty blob name, an input declared twice,
  /// a group already used.
  template <class T>
  status input(std::string blob, node on = {}, bool required = true) {
    return declare_input(std::move(blob), std::move(on), required, &typeid(T), taskgroup::type_name<T>());
  }
  /// The same with the type given at run time (null: any type; its name
  /// for messages, demangled when not given), as plans declare inputs.
  status declare_input(std::string blob, node on = {}, bool required = true, const std::type_info* type = nullptr,
                       std::string type_name = {});
  /// The declared inputs, in order of declaration.
  [[nodiscard]] const std::vector<group_input>& inputs() const noexcept;

  /// Carries net `n` for node `on` (default `local`), which need not have
  /// a task in this group (Caffe2 `TaskGroup.add_remote_net`). Each run,
  /// before any task starts, the session makes sure that node's workspace
  /// holds `n` under its name (`workspace::create_net`; bound once, by the
  /// group's first run, and then found by its later runs), so that this
  /// group's tasks, later runs and other groups on that node can run it by
  /// name (the `RunNet` op, `workspace::find_net`). It stays there when the
  /// group is gone. Its ops bind in the node workspace: its inputs must
  /// exist there when the run starts. Errors (`errc::invalid_task`): a
  /// group already used, a net with an empty name, a second remote net of
  /// that name for that node. At run time the run fails before any task
  /// starts, naming the net and the node: a net of that name already on
  /// that node that is not `n` (`errc::net_exists`, e.g. another group's),
  /// and `n`'s binding errors (unknown operator, an input that does not
  /// exist). Under `run_options::only_nodes` (an MPI rank's part), only
  /// the listed nodes' remote nets are made.
  status add_remote_net(net n, node on = {});
  /// The remote nets, in order of addition.
  [[nodiscard]] const std::vector<remote_net>& remote_nets() const noexcept;

  /// Adds an empty task on `on` (default `local`) that carries output
  /// `blob` (Caffe2 final_output with no active task).
  template <class T>
  result<task_output<T>> final_output(std::string blob, node on = {}) {
    task carrier;
    carrier.node(std::move(on));
    auto out = carrier.output<T>(std::move(blob));
    TASKGROUP_TRY(add(std::move(carrier)));
    return out;
  }

  /// Caffe2 tasks_by_node: a new group with one task per (remapped) node,
  /// named `grouped_by_node`, whose step is [<node>:init] + (report steps
  /// and the node's task steps, concurrently; PRIVATE task steps in their
  /// own workspace) + [<node>:exit], with the tasks' outputs. Marks this
  /// group used. Calling it again with an equal node map returns the same
  /// result; with a different one it fails: "Cannot call tasks_by_node
  /// multiple times." Also fails when a report step's node has no task.
  /// The remote nets come along, each on its mapped node, and the name.
  result<task_group> tasks_by_node(std::function<std::string(std::string_view)> remap = {});
  /// Every node mapped to `on`: a new, unused task running the single
  /// grouped step (or an empty task when the group has none), to add to a
  /// group of its own. A group with remote nets fails
  /// (`errc::invalid_task`): a task cannot carry them (`tasks_by_node`
  /// keeps them, on their mapped nodes).
  result<task> to_task(node on = {});

  /// Runs the group on a local session of its own, made on the completion
  /// handler's associated executor (the awaiting coroutine's, for
  /// `use_awaitable`; `asio::system_executor` for a handler without one):
  /// one group in an async server. Otherwise as
  /// `local_session::async_run`: completes with
  /// `void(boost::system::error_code, run_report)`, the same errors and
  /// cancellation (terminal and partial), the operation's state allocated
  /// with the handler's associated allocator. The session lives until the
  /// run has ended. Threading: as `local_session::async_run`.
  template <class CompletionToken = default_completion_token_t>
  auto async_run(run_options options, CompletionToken&& token = default_completion_token_t()) {
    auto init = [g = *this](auto handler, run_options o) {
      auto ex =
          boost::asio::any_io_executor(boost::asio::get_associated_executor(handler, boost::asio::system_executor()));
      run_on_own_session(g, std::move(o), ex, detail::make_run_completion(std::move(handler), ex));
    };
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, run_report)>(
        std::move(init), token, std::move(options));
  }
  /// The same with default options.
  template <class CompletionToken = default_completion_token_t>
  requires(!std::is_same_v<std::decay_t<CompletionToken>, run_options>) auto async_run(
      CompletionToken&& token = default_completion_token_t()) {
    return async_run(run_options{}, std::forward<CompletionToken>(token));
  }

  /// The group report steps (`report_step`), in order of addition.
  [[nodiscard]] const std::vector<group_report_step>& report_steps() const noexcept;
  /// Local setup objects (`local_init`, `local_exit`, `local_setup`) by
  /// node name, in order of attachment.
  [[nodiscard]] std::vector<std::pair<std::string, std::shared_ptr<setup_object>>> local_setups() const;
  /// True when `other` is a handle on this very group.
  [[nodiscard]] bool same(const task_group& other) const noexcept { return data_ == other.data_; }

 private:
  friend struct detail::group_access;
  struct data;
  // async_run's start (lib/session/group_run.cpp): a session on `ex` that
  // lives until `done` has been completed.
  static void run_on_own_session(task_group g, run_options options, const boost::asio::any_io_executor& ex,
                                 detail::run_completion_ptr done);
  std::shared_ptr<data> data_;
};

}  // namespace taskgroup
