// Internal: a task of a node's run between its attempts (node_tasks'
// retries, docs/under-load.md "Retries"): its attempt, its run context,
// what its failed attempts said, and its wait in the context's queue of
// waits.
#pragma once

#include <taskgroup/operator.hpp>
#include <taskgroup/retry_policy.hpp>
#include <taskgroup/run_context.hpp>

#include "session/node_tasks.hpp"
#include "step/retry.hpp"

#include <boost/asio/cancellation_signal.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>

namespace taskgroup::detail {

// A task between attempts, or running one after the first failed.
struct node_tasks::retrying final : op_completion::target {
  retrying(node_tasks& o, std::size_t task, std::size_t at, const retry_policy& p) noexcept
      : owner(&o), k(task), pos(at), policy(&p) {}
  node_tasks* owner;
  std::size_t k;                   // the task
  std::size_t pos;                 // its place among the node's tasks
  std::size_t coroutine_slot = 0;  // its place in coroutine_tasks_, when `coroutine`
  const retry_policy* policy;
  int attempt = 1;  // the attempt running, or the last one that failed
  std::optional<run_context> ctx;
  attempt_log log;
  error last;  // the last attempt's failure
  std::chrono::steady_clock::time_point due{};
  boost::asio::cancellation_signal signal;
  bool coroutine = false;
  bool waiting = false;
  bool in_start = false;  // inside sleep_until, which may complete at once
  std::optional<status> ended_early;

  void complete(status st) noexcept override {
    if (in_start) {
      ended_early = std::move(st);
      return;
    }
    owner->retry_wait_ended(*this, st);
  }
  // The context is shutting down with the wait pending: the task never
  // resumes, as a waiting run's (run_abandoned).
  void abandon() noexcept override {
    if (in_start) {
      ended_early = status(fail(errc::op_failed, "retry wait dropped"));
      return;
    }
    waiting = false;
    if (--owner->retry_waits_ != 0) return;
    const std::shared_ptr<node_tasks> last_ref = std::move(owner->book_->ref);  // as in run_abandoned
  }
};

}  // namespace taskgroup::detail
