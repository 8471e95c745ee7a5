// taskgroup: asking a run in flight where its tasks stand (hang
// diagnosis).
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/async.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace taskgroup {

namespace detail {
struct probe_access;
}

/// Asks a run where its tasks stand while it runs, for hang diagnosis:
/// give it to one run in
/// `run_options::probe`, then call `async_where` while that run is in
/// flight. It follows one run at a time: a run given a probe that follows
/// another run in flight fails at its start with `errc::invalid_task`.
/// The probe must outlive the runs it is given to. Under an MPI session,
/// a rank's probe sees the tasks of that rank. To see every run of a
/// session without preparing a probe, ask the session
/// (`local_session::async_describe`, the same lines per run). Threading:
/// thread-safe.
class TASKGROUP_API run_probe {
 public:
  run_probe();
  ~run_probe();
  run_probe(const run_probe&) = delete;
  run_probe& operator=(const run_probe&) = delete;

  /// How long `async_where` waits for a node's strand to answer.
  static constexpr std::chrono::milliseconds answer_within{250};

  /// Completes with `void(boost::system::error_code, std::vector<std::string>)`:
  /// the code is always empty (asking cannot fail: `error_code` first only
  /// so that `as_tuple`, `redirect_error` and throwing tokens apply as to
  /// any Asio operation), and one line for each
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
  /// The handler's associated allocator holds its state while it waits.
  /// Cancellation: not supported (it ends within `answer_within`).
  /// Threading: thread-safe.
  /// The trace id (`run_report::trace_id`: 32 lowercase hex digits) of
  /// the run this probe follows, empty when it follows none: what a hang
  /// report prints beside the lines of `async_where`, so that it leads to
  /// the run's trace. Threading: thread-safe.
  [[nodiscard]] std::string trace_id() const;

  template <class CompletionToken = default_completion_token_t>
  auto async_where(CompletionToken&& token = default_completion_token_t()) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, std::vector<std::string>)>(
        [s = state_](auto handler) { start_where(s, where_handler(std::move(handler))); }, token);
  }

 private:
  friend struct detail::probe_access;
  struct state;
  // Erased with the handler's allocator (any_completion_handler allocates
  // with it).
  using where_handler = boost::asio::any_completion_handler<void(boost::system::error_code, std::vector<std::string>)>;
  static void start_where(const std::shared_ptr<state>& s, where_handler handler);
  std::shared_ptr<state> state_;
};

}  // namespace taskgroup
