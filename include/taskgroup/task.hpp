// taskgroup: tasks, their outputs and their setup work.
//
// A task is an execution step placed on a node, with declared outputs,
// a workspace type, a number of concurrent instances and setup work
// (docs/semantics.md, "Tasks"). When a group compiles it, the task's step
// tree is composed as in Caffe2, from outside in (docs/semantics.md, "Task
// composition"):
//
//   <task>            = [<task>:init] + X + [<task>:exit]      (if init/exit work exists)
//   X                 = <task>:parallel, num_instances copies of I (if num_instances > 1)
//   I                 = <task>:instance (in its own workspace when num_instances > 1):
//                       [<task>:instance:init] + B + [<task>:instance:exit]
//                       (if instance setup exists; else B, and with
//                       instances B in a <task>:instance wrapper)
//   B                 = <task>:body = [report steps..., the task's step] (if it has report steps)
//
// Each level appears once in step paths (errors, observer events, probes).
// A report step sits in B as itself, with its interval: a copy of its own
// level carries it, so the step given to `report` is left unchanged. The
// task's own step is never changed either.
//
// Task init runs once before any instance, task exit once after all of
// them; instance init/exit once per instance in the instance's workspace;
// report steps run during each instance, with their final run before the
// instance and task exit.
//
// A task is a handle: copies share one task. Adding it to a group uses it:
// a later builder call throws `taskgroup::system_error`
// (`errc::invalid_task`, "task "n/t": Cannot modify task since it is
// already been used (node)") and leaves the task, its group and their runs
// as they were.
//
// Threading: build on one thread, then share read-only (reentrant). An
// output handle is read after the run completes; reading it while a run
// of its group is in flight is a data race.
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/blob.hpp>
#include <taskgroup/control.hpp>
#include <taskgroup/error.hpp>
#include <taskgroup/execution_step.hpp>
#include <taskgroup/node.hpp>
#include <taskgroup/retry_policy.hpp>
#include <taskgroup/run_report.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <vector>

namespace taskgroup {

/// Where a task's blobs live (Caffe2 WorkspaceType).
enum class workspace_type {
  /// A child of the node workspace, made when the task starts and dropped
  /// when it ends; writes to blobs visible in the node workspace go there.
  private_,
  /// The node workspace itself, which the session keeps across runs.
  global,
};

/// `private` or `global`.
TASKGROUP_API std::string_view to_string(workspace_type t) noexcept;

/// Work contributed by an object at setup and exit (Caffe2 setup objects,
/// e.g. a reader opening and closing a file). Attached to a task or a
/// group, one object contributes once per run, to the first task or group
/// that compiles it, however many places carry it.
class TASKGROUP_API setup_object {
 public:
  setup_object() = default;
  setup_object(const setup_object&) = delete;
  setup_object& operator=(const setup_object&) = delete;
  virtual ~setup_object() = default;
  /// Work to run before the tasks (an empty body for none).
  virtual body setup() { return {}; }
  /// Work to run after them (an empty body for none).
  virtual body exit() { return {}; }

  /// Claims the object for `consumer` (a task or group); true when it was
  /// free or already claimed by the same consumer. Thread-safe.
  bool claim(const void* consumer) noexcept {
    const void* expected = nullptr;
    return consumer_.compare_exchange_strong(expected, consumer) || expected == consumer;
  }

 private:
  std::atomic<const void*> consumer_{nullptr};
};

/// A setup object whose work is the given bodies (how `task::init`,
/// `task::exit`, `task_group::local_init` ... attach plain work).
TASKGROUP_API std::shared_ptr<setup_object> make_setup(body init, body exit);

/// Where a setup object's work runs.
enum class setup_scope {
  task,      ///< task init / task exit
  instance,  ///< instance init / exit, in each instance's workspace
  local,     ///< the node's local init / exit, around all its tasks
};

/// A declared output (`task::output`, `task::declare_output`): its blob
/// names (several for a list output) and, when declared with one, the C++
/// type of its blobs (of each element blob for a list).
struct TASKGROUP_API output_decl {
  std::vector<std::string> blobs;
  bool list = false;
  const std::type_info* type = nullptr;
};

namespace detail {
// What a declared output holds between runs: opaque here, read by
// `task_output` through the functions below (not for programs).
struct output_state;
struct task_access;
// The values the last run of the group to complete left (errors as
// `task_output::get()`).
TASKGROUP_API result<std::vector<std::shared_ptr<const blob>>> last_output_values(const output_state& s);
// The values of `s` in the run whose report is `r` (errors as
// `task_output::get(report)`).
TASKGROUP_API result<std::vector<std::shared_ptr<const blob>>> output_values_in(const output_state& s,
                                                                                const run_report& r);
TASKGROUP_API bool output_is_set(const output_state& s) noexcept;
TASKGROUP_API bool output_is_list(const output_state& s) noexcept;
TASKGROUP_API const std::vector<std::string>& output_blobs(const output_state& s) noexcept;
TASKGROUP_API error output_type_error(const output_state& s, std::size_t i, const blob& b, const std::string& expected);
}  // namespace detail

/// A typed handle on a task's declared output, filled in by each run.
///
/// `T` is the blob's type, or `std::vector<E>` for a list output declared
/// with several blob names (each blob holding an `E`).
template <class T>
class task_output {
 public:
  /// The value of the last run of the group to complete. For one run at a
  /// time; when runs of the group overlap, read each run's value from its
  /// report (`get(report)`). Errors: `errc::output_not_set` ("Output value
  /// not set yet.") before any run, or why the last run did not set it;
  /// `errc::type_mismatch` when the blob holds another type.
  [[nodiscard]] result<T> get() const {
    TASKGROUP_TRY(auto values, detail::last_output_values(*state_));
    return read(values);
  }

  /// The value that the run whose report is `report` produced, whatever
  /// other runs of the group did meanwhile (but for an output named as a
  /// blob that its node keeps, which the node's runs share on purpose: its
  /// value when the run's part on the node ended; see `local_session`).
  /// Errors: `errc::output_not_set`
  /// when `report` is not of a run of this task's group (another group's,
  /// even with the same task and blob names, or one no session made: "the
  /// report is not of a run of the task's group"), that run did not
  /// report the task, the task did not succeed there, or the value could
  /// not be fetched (saying why);
  /// `errc::type_mismatch` as `get()`. Threading: reads `report` only.
  [[nodiscard]] result<T> get(const run_report& report) const {
    TASKGROUP_TRY(auto values, detail::output_values_in(*state_, report));
    return read(values);
  }

  /// True once a run has set the value.
  [[nodiscard]] bool is_set() const noexcept { return detail::output_is_set(*state_); }
  /// The blob names (one, or several for a list output).
  [[nodiscard]] const std::vector<std::string>& blobs() const noexcept { return detail::output_blobs(*state_); }

  explicit task_output(std::shared_ptr<detail::output_state> s) : state_(std::move(s)) {}

 private:
  template <class U>
  struct is_vector : std::false_type {};
  template <class U>
  struct is_vector<std::vector<U>> : std::true_type {};
  static constexpr bool is_list = is_vector<T>::value;

  result<T> read(const std::vector<std::shared_ptr<const blob>>& values) const {
    if constexpr (is_list) {
      if (detail::output_is_list(*state_)) {
        T out;
        out.reserve(values.size());
        for (std::size_t i = 0; i < values.size(); ++i) {
          const auto* v = values[i]->template try_get<typename T::value_type>();
          if (v == nullptr)
            return detail::output_type_error(*state_, i, *values[i], type_name<typename T::value_type>());
          out.push_back(*v);
        }
        return out;
      }
    }
    const T* v = values.at(0)->template try_get<T>();
    if (v == nullptr) return detail::output_type_error(*state_, 0, *values.at(0), type_name<T>());
    return *v;
  }

  std::shared_ptr<detail::output_state> state_;
};

/// A step whose retry policy retries, where it stands (`retried_steps`).
struct retried_step {
  /// Which tree holds it, as the caller named it (for a task's:
  /// "" for its step, "init ", "exit ", "instance init ", "instance exit "
  /// or "report ").
  std::string where;
  /// Its path from its tree's root: `root/child`.
  std::string path;
  execution_step step;  ///< a handle on the step
};

/// Every step of the tree at `root` whose retry policy retries, in
/// depth-first order, each with `where`. Iterative: safe at any depth.
TASKGROUP_API std::vector<retried_step> retried_steps(const execution_step& root, std::string_view where = {});
/// The same for every step tree of body `b`, in order.
TASKGROUP_API std::vector<retried_step> retried_steps(const body& b, std::string_view where = {});

/// A step placed on a node, with outputs and setup work (a Caffe2 Task).
class TASKGROUP_API task {
 public:
  /// A task named `name` (empty: named after its step, or `task`), with no
  /// step yet, on node `local`.
  explicit task(std::string name = {});
  /// A task named `name` running `s`.
  task(std::string name, execution_step s);

  // --- builder (each throws taskgroup::system_error, errc::invalid_task,
  // --- on a used task, changing nothing) ---------------------------------

  /// The step the task runs (nets go through `do_`-style wrapping).
  task& step(execution_step s);
  task& step(net n);
  /// The node the task runs on (default `local`).
  task& node(taskgroup::node n);
  /// Concurrent instances, each in its own workspace (1 <= n <=
  /// `max_instances`; `validate` reports others). Each instance runs the
  /// whole step tree: `n` times the `concurrent_instances` of the steps
  /// along any path of the step, report steps and instance init/exit work
  /// must stay within `max_instances` too.
  task& num_instances(std::int64_t n);
  /// PRIVATE or GLOBAL; unset takes the group's type, or PRIVATE.
  task& workspace_type(taskgroup::workspace_type t);
  /// Task init and exit work, and per-instance init and exit work.
  task& init(body b);
  task& exit(body b);
  task& instance_init(body b);
  task& instance_exit(body b);
  /// A report step run during each instance every `interval` (default: the
  /// step's own `run_every`, else 1000 ms), and once more at its end. The
  /// interval must be in (0, max_duration]; `validate` reports others.
  task& report(execution_step s, std::optional<std::chrono::milliseconds> interval = std::nullopt);
  /// How a failed run of the task's whole composed work (init, instances,
  /// body, exit) is run again (see `retry_policy`; the default runs it
  /// once). Each attempt of a PRIVATE task gets a fresh task workspace
  /// (and fresh instance workspaces); the declared outputs start empty at
  /// every attempt. Writes to a GLOBAL task's node blobs are not undone.
  /// `validate` refuses an invalid policy, naming the field and its limit.
  task& retry(retry_policy policy);
  /// Attaches a setup object (contributes once per run, see setup_object).
  task& setup(std::shared_ptr<setup_object> obj, setup_scope scope = setup_scope::task);

  /// Declares blob `blob` an output of type `T`.
  template <class T>
  task_output<T> output(std::string blob) {
    return task_output<T>(add_output({std::move(blob)}, false, &typeid(T)));
  }
  /// Declares a list output: blobs `blobs`, each an `E`, read as a vector.
  template <class E>
  task_output<std::vector<E>> output(std::vector<std::string> blobs) {
    return task_output<std::vector<E>>(add_output(std::move(blobs), true, &typeid(E)));
  }
  /// Declares an output without a C++ type (plan files): its value is in
  /// the run report. `list` marks a list output.
  task& declare_output(std::vector<std::string> blobs, bool list = false) {
    (void)add_output(std::move(blobs), list);
    return *this;
  }

  // --- observers ----------------------------------------------------------

  /// The full name `<node>/<name>`, made unique in its group (`:1`, ...).
  [[nodiscard]] std::string name() const;
  [[nodiscard]] const std::string& base_name() const noexcept;
  [[nodiscard]] const std::string& node_name() const noexcept;
  /// The node set with `node` (default `local`).
  [[nodiscard]] const taskgroup::node& node() const noexcept;
  /// The count set with `num_instances` (default 1).
  [[nodiscard]] std::int64_t num_instances() const noexcept;
  /// The policy set with `retry` (default: one attempt).
  [[nodiscard]] const retry_policy& retry() const noexcept;
  /// The type set with `workspace_type`, if any.
  [[nodiscard]] std::optional<taskgroup::workspace_type> workspace_type() const noexcept;
  /// The task's own step (not composed), if set.
  [[nodiscard]] const std::optional<execution_step>& step() const noexcept;
  /// Every declared output blob name, in declaration order.
  [[nodiscard]] std::vector<std::string> output_names() const;
  /// True once added to a group (then frozen).
  [[nodiscard]] bool used() const noexcept;
  [[nodiscard]] bool same(const task& other) const noexcept { return data_ == other.data_; }

  /// The composed step tree described above (built once, then cached).
  /// Errors: those of `validate`; the composed tree's own
  /// (`execution_step::validate`, e.g. instance init/exit work whose
  /// instance counts times `num_instances` pass `max_instances`, named by
  /// its path from `<task>:parallel`); setup objects returning an invalid
  /// body.
  [[nodiscard]] result<execution_step> get_step() const;

  /// Reports a recorded misuse, an instance count outside [1,
  /// max_instances], a report interval outside (0, max_duration], an
  /// invalid retry policy (`task "n/t": retry: max_attempts must be in [1,
  /// 1000], got 0`), or a
  /// step or report step in which `num_instances` times the
  /// `concurrent_instances` along a path pass `max_instances`, naming the
  /// task (and report step or step path) and the limit
  /// (`errc::invalid_task`): `task "n/t" (num_instances 4): step
  /// "root/wide": num_concurrent_instances 65536 makes 4 x 65536 = 262144
  /// instances at once, more than 65536 (taskgroup::max_instances, ...)`.
  [[nodiscard]] status validate() const;

  /// Attached setup objects (explicit init/exit bodies included), in order.
  [[nodiscard]] std::vector<std::pair<std::shared_ptr<setup_object>, setup_scope>> setups() const;
  /// Every step of the task's work whose retry policy retries: those of
  /// its task and instance init and exit work, of its step, then of its
  /// report steps, each tree in depth-first order (its node's local setup
  /// work is its node's, not the task's). Iterative: safe at any depth.
  [[nodiscard]] std::vector<retried_step> retried_steps() const;
  /// Report steps with their intervals, in order.
  [[nodiscard]] std::vector<std::pair<execution_step, std::chrono::milliseconds>> reports() const;
  /// The declared outputs, in declaration order.
  [[nodiscard]] std::vector<output_decl> declared_outputs() const;

 private:
  friend struct detail::task_access;
  struct data;
  bool check_mutable(const char* what);
  std::shared_ptr<detail::output_state> add_output(std::vector<std::string> blobs, bool list,
                                                   const std::type_info* type = nullptr);
  std::shared_ptr<data> data_;
};

}  // namespace taskgroup
