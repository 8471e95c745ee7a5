// taskgroup: what a session run reports, and how it runs.
//
// Threading: value types (reentrant).
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/blob.hpp>
#include <taskgroup/error.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace taskgroup {

/// The completion token of the library's asynchronous operations
/// (`local_session::async_run`, `mpi_session::async_run`,
/// `run_probe::async_where`) when none is given: `use_awaitable`, so
/// `co_await session.async_run(group)` in an `awaitable` coroutine runs
/// the group and, on failure, throws `system_error` with the run's message
/// (Asio's own default for `any_io_executor` is none in Boost 1.81, and
/// `deferred`, whose awaited form throws the code alone, from 1.84). Pass
/// `boost::asio::deferred` for an operation to launch later.
using default_completion_token_t = boost::asio::use_awaitable_t<>;

/// What happens to the other tasks when one fails.
enum class run_policy {
  /// The first failure cancels every task on every node; the run completes
  /// with that error once all have unwound (the default).
  join,
  /// Every task runs to its end; the report holds each task's result and
  /// the run succeeds (check `run_report::ok()`).
  gather,
};

struct task_report;
class codec_registry;
class task_group;

/// Values for the inputs of one run, by node and blob name (the feeds of
/// a TensorFlow or ONNX Runtime session, on Caffe2's blobs). A run places
/// each value, copied, in its own workspace of the node before any task
/// starts; tasks read it as an ordinary blob. Every feed must name an
/// input the group declares (`task_group::input`), of its type when the
/// input is typed; each required input (of the nodes that run) must be
/// fed; a blob may be fed once per run. The run checks this before it starts anything and fails with
/// `errc::invalid_feed` naming the node, the blob and what is wrong.
///
/// A run takes its feeds by value when it is called: changing or
/// destroying this object afterwards does not change a run in flight.
/// Values are shared (not copied) between copies of a `feeds`, and a value
/// given to `set_blob` is shared with its giver until the run copies it,
/// when its node starts: leave it unchanged until the run has ended. A
/// GLOBAL node's feeds leave its workspace when the run's part there ends
/// (docs/serving.md, "GLOBAL groups").
///
/// Errors (the run's, `errc::invalid_feed`, before anything runs): an
/// input the group does not declare, a value of another type than a
/// typed input's, a value that cannot be copied (a move-only type), a
/// blob fed twice, a required input not fed.
/// Threading: a value type (reentrant).
class TASKGROUP_API feeds {
 public:
  struct entry {
    std::string node;
    std::string blob;
    std::shared_ptr<const taskgroup::blob> value;
  };

  /// Feeds `value` (a `T`) to blob `blob_name` on node `node_name`. Text
  /// (a string literal, `const char*`, `std::string_view`) is fed as a
  /// `std::string`, the type plans and typed string inputs use.
  template <class T>
  feeds& set(std::string node_name, std::string blob_name, T value) {
    if constexpr (std::is_same_v<T, const char*> || std::is_same_v<T, char*> || std::is_same_v<T, std::string_view>) {
      return set(std::move(node_name), std::move(blob_name), std::string(value));
    } else {
      return set_blob(std::move(node_name), std::move(blob_name),
                      std::make_shared<const taskgroup::blob>(taskgroup::blob(std::move(value))));
    }
  }
  /// Feeds a prepared value (it must be copyable with `blob::clone`, which
  /// the run does; a value that is not fails the run naming the feed).
  feeds& set_blob(std::string node_name, std::string blob_name, std::shared_ptr<const taskgroup::blob> value) {
    entries_.push_back({std::move(node_name), std::move(blob_name), std::move(value)});
    return *this;
  }

  /// Every feed, in the order set.
  [[nodiscard]] const std::vector<entry>& entries() const noexcept { return entries_; }
  [[nodiscard]] bool empty() const noexcept { return entries_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }

 private:
  std::vector<entry> entries_;
};

/// Receives what happens during a run: tasks beginning and ending, and,
/// with their task and node, step executions, net runs and report-step
/// runs (for traces and progress displays). `task` is empty for work that
/// belongs to a node rather than a task (local init/exit, group report
/// steps). Called inline on the node strands, so possibly from several
/// threads at once: an observer must be thread-safe and cheap.
class TASKGROUP_API run_observer {
 public:
  virtual ~run_observer() = default;
  /// The run starts: every task's name and node, in group order.
  virtual void run_begin(const std::vector<std::pair<std::string, std::string>>& /*tasks*/) {}
  virtual void task_begin(std::string_view /*task*/, std::string_view /*node*/) {}
  virtual void task_end(const task_report& /*report*/) {}
  virtual void step_begin(std::string_view /*task*/, std::string_view /*node*/, std::string_view /*step*/) {}
  virtual void step_end(std::string_view /*task*/, std::string_view /*node*/, std::string_view /*step*/,
                        std::uint64_t /*iterations*/, const status& /*result*/) {}
  virtual void net_begin(std::string_view /*task*/, std::string_view /*node*/, std::string_view /*net*/) {}
  virtual void net_end(std::string_view /*task*/, std::string_view /*node*/, std::string_view /*net*/,
                       const status& /*result*/) {}
  virtual void report_begin(std::string_view /*task*/, std::string_view /*node*/, std::string_view /*step*/) {}
  virtual void report_end(std::string_view /*task*/, std::string_view /*node*/, std::string_view /*step*/,
                          const status& /*result*/) {}
};

namespace detail {
struct probe_access;
}

/// Asks a run where its tasks stand while it runs, for hang diagnosis
/// (what `taskgroup run` prints on SIGUSR1): give it to one run in
/// `run_options::probe`, then call `async_where` while that run is in
/// flight. It follows one run at a time: a run given a probe that follows
/// another run in flight fails at its start with `errc::invalid_task`.
/// The probe must outlive the runs it is given to. Under an MPI session,
/// a rank's probe sees the tasks of that rank. Threading: thread-safe.
class TASKGROUP_API run_probe {
 public:
  run_probe();
  ~run_probe();
  run_probe(const run_probe&) = delete;
  run_probe& operator=(const run_probe&) = delete;

  /// How long `async_where` waits for a node's strand to answer.
  static constexpr std::chrono::milliseconds answer_within{250};

  /// Completes with `void(std::vector<std::string>)`: one line for each
  /// place where a task of the run that has begun and not ended waits, in
  /// task order, in the words of a run's error: `task "n/consumer" (node
  /// "n"): consume/net "take" op #0 (Dequeue): input #0 "jobs": waiting for
  /// an item: the queue is empty (0 of 4, open)` (`op_kernel::waiting_for`),
  /// which adds `; no producer left: ...` when no task of its node that has
  /// not ended can enqueue or close (docs/errors.md, "No producer left").
  /// A task with concurrent substeps may have several lines; one that waits on no op
  /// (between two, or on a step's deadline, join or report timer) says
  /// `<step>: running, not waiting on an op`. Empty when no run follows
  /// this probe. The nodes are asked at once, each on its strand, so lines
  /// of different nodes are from slightly different moments. A node whose
  /// strand has not answered within `answer_within` (one of its tasks holds
  /// the thread: an op that blocks, or a long computation between yields)
  /// gets one line after the tasks' instead: `node "n": did not answer
  /// within 250 ms: ...`. Completes on the token's associated executor (by
  /// default the run's coordinator, or the system executor when no run is
  /// in flight), with work counted on it until then.
  /// Cancellation: not supported (it is short). Threading: thread-safe.
  template <class CompletionToken = default_completion_token_t>
  auto async_where(CompletionToken&& token = default_completion_token_t()) {
    return boost::asio::async_initiate<CompletionToken, void(std::vector<std::string>)>(
        [s = state_](auto handler) {
          start_where(s, boost::asio::any_completion_handler<void(std::vector<std::string>)>(std::move(handler)));
        },
        token);
  }

 private:
  friend struct detail::probe_access;
  struct state;
  static void start_where(const std::shared_ptr<state>& s,
                          boost::asio::any_completion_handler<void(std::vector<std::string>)> handler);
  std::shared_ptr<state> state_;
};

/// Options of one run.
struct TASKGROUP_API run_options {
  run_policy policy = run_policy::join;
  /// A deadline for the whole run: on expiry every task is cancelled and
  /// the run fails with `errc::timeout`. The error (and the report's
  /// failure) then lists where the tasks still running waited: each
  /// one's step path, net, op index and type and what the op waited for
  /// (`input #0 "jobs": cancelled while waiting for an item: the queue is
  /// empty (0 of 4, open)`), the first 8 of them, then how many more; a
  /// run cancelled from outside says the same. From 0 (expires at once) to
  /// `taskgroup::max_duration` (execution_step.hpp): a negative or longer
  /// one fails the run at its start with `errc::invalid_task` naming the
  /// limit.
  std::optional<std::chrono::milliseconds> timeout{};
  /// Told of the run's progress when not null (see run_observer).
  run_observer* observer = nullptr;
  /// When not null, follows this run: ask it where the tasks stand (see run_probe); one
  /// following another run in flight fails this run at its start (`errc::invalid_task`).
  run_probe* probe = nullptr;
  /// Strict codec mode, when not null: the run fails at its start with
  /// `errc::not_serializable` when a typed output (`task::output<T>`) has
  /// no codec in this registry, and every output value is encoded and
  /// decoded through it when fetched (a failure fails the task), so that a
  /// group whose outputs could not travel to another process fails here
  /// too. The MPI session always works this way.
  const codec_registry* strict_codecs = nullptr;
  /// When set, only these nodes run; tasks of the others are reported as
  /// `task_status::not_run`, their outputs are left alone and their
  /// required inputs need no feed (feeds given for them are checked, not
  /// placed); only their remote nets are made (`task_group::add_remote_net`).
  /// Errors: `errc::invalid_task` naming a node the group does not use.
  /// (The MPI session runs each rank's own nodes this way.)
  std::optional<std::vector<std::string>> only_nodes{};
  /// The run's input values (see `feeds`).
  taskgroup::feeds feeds{};
};

/// How a task ended.
enum class task_status { succeeded, failed, cancelled, not_run };

/// `succeeded`, `failed`, `cancelled`, `not run`.
TASKGROUP_API std::string_view to_string(task_status s) noexcept;

/// One task's part of a run.
struct TASKGROUP_API task_report {
  std::string name;  ///< full name `<node>/<task>`
  std::string node;
  task_status status = task_status::not_run;
  std::optional<error> failure;  ///< set when failed or cancelled
  std::chrono::system_clock::time_point started{};
  std::chrono::system_clock::time_point finished{};
  /// Iterations run by the task's own step (summed over instances); 0
  /// for a step with neither nets nor substeps, which is dropped as Caffe2
  /// drops empty steps (the observer then sees the task's empty stand-in
  /// step, named after the task, end after its one iteration).
  std::uint64_t iterations = 0;
  /// Whether the task began: false for a task not run and for one
  /// cancelled before it began (its `failure` is then "<step>: cancelled").
  bool began = false;
  /// Declared outputs after the run: blob name and a copy of its value
  /// (this run's own: never shared with another run; an output named as a
  /// blob that its node keeps is that shared blob, copied when the run's
  /// part on the node ended).
  std::vector<std::pair<std::string, std::shared_ptr<const blob>>> outputs;
  /// Declared outputs of a task that succeeded but could not be fetched:
  /// blob name and why (e.g. "blob "x" has no value in node "n1"").
  std::vector<std::pair<std::string, error>> output_errors;

  [[nodiscard]] std::chrono::nanoseconds duration() const noexcept { return finished - started; }
};

/// The report of one run of a task group.
struct TASKGROUP_API run_report {
  std::vector<task_report> tasks;  ///< in the group's task order
  std::chrono::system_clock::time_point started{};
  std::chrono::system_clock::time_point finished{};
  /// Why the run failed, when it did: the error of `local_session::run`,
  /// whose code `async_run` completes with. A failed run's report still
  /// lists every task with its status (`not_run` for a run refused before
  /// it started).
  std::optional<error> failure;
  /// The group that ran, as an identity only (it keeps nothing alive): set
  /// by the sessions, empty in a report made otherwise. `task_output::get`
  /// reads only reports of its own task's group; see also `of`.
  std::weak_ptr<const void> group;

  /// True when this is the report of a run of `g` (a handle on the same
  /// group, `task_group::same`).
  [[nodiscard]] bool of(const task_group& g) const noexcept;
  /// True when every task succeeded.
  [[nodiscard]] bool ok() const noexcept;
  /// The report of task `name` (full name), or null.
  [[nodiscard]] const task_report* find(std::string_view name) const noexcept;
  /// The first failure in task order, if any.
  [[nodiscard]] std::optional<error> first_failure() const;
};

}  // namespace taskgroup
