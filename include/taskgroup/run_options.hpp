// taskgroup: how a run of a task group runs: its policy, its deadline, its
// feeds, what observes it.
//
// Threading: value types (reentrant).
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/blob.hpp>
#include <taskgroup/error.hpp>
#include <taskgroup/trace_context.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace taskgroup {

class codec_registry;
class run_observer;
class run_probe;

/// What happens to the other tasks when one fails.
enum class run_policy {
  /// The first failure cancels every task on every node; the run completes
  /// with that error once all have unwound (the default).
  join,
  /// Every task runs to its end; the report holds each task's result and
  /// the run succeeds (check `run_report::ok()`).
  gather,
};

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
  /// Where the run stands in a local session's admission queue
  /// (session_limits): queued runs start highest priority first, in arrival
  /// order within one priority, and a full queue makes room for a run of
  /// higher priority than its last by shedding that one. Priority orders
  /// admission only: it never preempts a run in flight, and a node's
  /// strand and the turns of GLOBAL groups stay first come, first served.
  /// Any int; a session without limits, and the MPI session, ignore it.
  int priority = 0;
  /// The W3C `traceparent` of the request this run serves
  /// (`00-<32 hex>-<16 hex>-<2 hex>`, trace_context::parse; held inline,
  /// at most 128 bytes read, trace_parent_text): the run joins
  /// that trace, its own span a child of the given parent. Empty (the
  /// default): the run starts a trace of its own, with a fresh trace id.
  /// Either way `run_report::trace_id` names it and ops see it
  /// (`op_context::run().trace()`). A malformed value fails the run at its
  /// start with `errc::invalid_task` ("trace_parent has an all-zero trace
  /// id, which is invalid"), no task run; the report still carries a
  /// (fresh) trace id. A server that would rather ignore a malformed header,
  /// as W3C advises, checks it with `trace_context::parse` first.
  trace_parent_text trace_parent{};
};

}  // namespace taskgroup
