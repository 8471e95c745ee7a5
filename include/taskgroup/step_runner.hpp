// taskgroup: running an execution step tree in a workspace.
//
// `run_step` executes a step tree as Caffe2's plan executor did, with
// coroutines instead of threads (docs/semantics.md, "Execution steps"):
//
// - Nets run in order; synchronous ops inline, only async ops suspend. The
//   stop blob is checked after every net, every sequential substep and
//   every concurrent iteration; a true stop blob ends the step that owns it
//   with success. A check after a net that provably left the blob alone
//   (one op whose fast path ran under `fast_writes::own_blobs_in_place`
//   and does not name the blob) is skipped: it could say nothing new.
// - Concurrent substeps and instances are a when_all over coroutines on
//   the same strand with a barrier per iteration; with `create_workspace`
//   each execution (so each instance) gets its own child workspace.
//   Substeps that cannot suspend (plain steps of synchronous nets that end
//   on their own: counted, or `only_once`; no deadline, report step, own
//   workspace or instances) run in turn in the parent's coroutine, the
//   schedule the strand gives them anyway, without a spawn or barrier.
// - Report substeps (`run_every`) are timer loops in the parent's
//   workspace: first run after one interval, then one more run after the
//   parent's work ends, unless a run was in progress at that moment.
// - Nets are bound once per workspace (`workspace::instance_of`), when
//   the execution that owns the workspace starts (depth-first, as Caffe2
//   compiled), so a bad input fails before anything runs.
// - Long loops keep a flat stack and yield to the executor every
//   `yield_every` iterations once `yield_slice` has passed since the last
//   yield, so other coroutines (and cancellation) get through.
//
// Failure: the first failure in a concurrent step cancels its siblings at
// once (pending Sleep, Dequeue, timers abort; siblings that have not
// started yet, run in turn or spawned, do not start) and the step
// completes with that error after every sibling has unwound. Report-step
// failures propagate like any other. Messages name the step path:
// `train/body:parallel/instance 3/net "read" op #1 (Dequeue): ...`.
//
// Cancellation: terminal, partial or total cancellation of the awaiting
// coroutine (or the completion token's slot) stops the whole tree; it
// completes with `errc::cancelled`. An expired step `timeout` completes
// with `errc::timeout` naming the step.
//
// Threading: must run on the strand (or single thread) that owns `ws`;
// every child coroutine is spawned on the same executor.
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/async.hpp>
#include <taskgroup/detail/throwing_tokens.hpp>
#include <taskgroup/error.hpp>
#include <taskgroup/execution_step.hpp>
#include <taskgroup/operator.hpp>
#include <taskgroup/run_observer.hpp>
#include <taskgroup/workspace.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

namespace taskgroup {

/// Counters a run fills in when asked (`run_step_options::stats`).
struct TASKGROUP_API step_stats {
  /// Iterations started by the top-level step.
  std::uint64_t iterations = 0;
  /// Net runs, over the whole tree.
  std::uint64_t net_runs = 0;
  /// Report-step runs, over the whole tree.
  std::uint64_t report_runs = 0;
};

/// Options of `run_step`.
struct TASKGROUP_API run_step_options {
  /// Where operator types are found; null means `operator_registry::global()`.
  const operator_registry* registry = nullptr;
  /// Filled in during the run when not null (strand-bound, like `ws`).
  step_stats* stats = nullptr;
  /// Iterations of a loop between two yields to the executor (>= 1; 0
  /// counts as 1).
  std::uint32_t yield_every = 256;
  /// The least time between two yields of a run: when `yield_every`
  /// iterations come due sooner, the loop goes on and counts again. The
  /// first yield comes at the first count. Zero (or negative): every
  /// count yields. The default keeps a yield (a post through the
  /// executor, some hundred nanoseconds) below 1% of a loop of cheap ops,
  /// and a loop of slow ones still yields every `yield_every`.
  std::chrono::microseconds yield_slice{50};
  /// Told of steps, nets and report runs when not null, as it asks
  /// (`run_observer::interests`, read once when the run starts), with an
  /// empty `event_source`. Task events are not sent: there is no task.
  run_observer* observer = nullptr;
};

/// Runs `step` in `ws`. Completes with success, or the first error with
/// the step path in its message (`errc::cancelled` when cancelled,
/// `errc::timeout` when a step deadline expired, the failing op's code
/// otherwise). Validation errors of the tree (`execution_step::validate`)
/// are reported before anything runs.
TASKGROUP_API boost::asio::awaitable<status> run_step(execution_step step, std::shared_ptr<workspace> ws,
                                                      run_step_options options = {});

/// What a step run ends with (`async_run_step`): its failure, if any (the
/// error `run_step` completes with), and its counts.
struct TASKGROUP_API step_report {
  std::optional<error> failure;
  step_stats stats;
  /// True when the run succeeded.
  [[nodiscard]] bool ok() const noexcept { return !failure.has_value(); }
};

/// `run_step` as an Asio asynchronous operation: starts the run on `ex`
/// (the strand owning `ws`), never inside this call, and completes with
/// `void(boost::system::error_code, step_report)` through any completion
/// token (callback, `use_awaitable` (the default), `use_future`,
/// `deferred`, `as_tuple`, `redirect_error`, ...): the code is that of
/// `report.failure`, none on success; the report also holds the run's
/// counts (`options.stats`, when given, is filled too). `use_awaitable`
/// and `use_future` throw `taskgroup::system_error` whose `what()` is the
/// step's message. The handler is called on its associated executor (by
/// default `ex`); the operation's state is allocated with its associated
/// allocator. Errors: as `run_step`.
///
/// Cancellation: through the token's cancellation slot; terminal, partial
/// and total cancellation all stop the tree (it completes with
/// `errc::cancelled`: a step run in a workspace of the caller's has no
/// effects but its blobs, which the caller owns). Threading: `ws` must be
/// used on `ex` only while the run is in flight.
template <class Executor, class CompletionToken = default_completion_token_t>
auto async_run_step(Executor ex, execution_step step, std::shared_ptr<workspace> ws, run_step_options options,
                    CompletionToken&& token = default_completion_token_t()) {
  auto init = [](auto handler, Executor e, execution_step s, std::shared_ptr<workspace> w, run_step_options o) {
    using handler_type = decltype(handler);
    // The operation's own state: the handler while the step runs, and the
    // counts it reports.
    struct waiting {
      handler_type handler;
      step_stats stats;
      step_stats* also = nullptr;  // the caller's `options.stats`
      std::shared_ptr<boost::asio::cancellation_signal> relay;
    };
    auto slot = boost::asio::get_associated_cancellation_slot(handler);
    auto handler_ex = boost::asio::get_associated_executor(handler, e);
    auto alloc = boost::asio::get_associated_allocator(handler);
    auto state = std::allocate_shared<waiting>(alloc, waiting{std::move(handler), {}, o.stats, {}});
    o.stats = &state->stats;
    // Every cancellation type reaches the tree as terminal (a coroutine
    // takes terminal cancellation only), emitted on the step's executor;
    // a handler without a slot needs no relay.
    boost::asio::cancellation_slot relay_slot;
    if (slot.is_connected()) {
      state->relay = std::allocate_shared<boost::asio::cancellation_signal>(alloc);
      slot.assign([relay = state->relay, e](boost::asio::cancellation_type_t) {
        boost::asio::dispatch(e, [relay] { relay->emit(boost::asio::cancellation_type::terminal); });
      });
      relay_slot = state->relay->slot();
    }
    boost::asio::co_spawn(
        e, run_step(std::move(s), std::move(w), o),
        boost::asio::bind_cancellation_slot(
            relay_slot, boost::asio::bind_executor(handler_ex, [state = std::move(state)](std::exception_ptr ep,
                                                                                          status st) mutable {
              if (ep) st = fail(errc::op_failed, "unexpected exception in the step runner");
              step_report report{st ? std::nullopt : std::optional<error>(st.error()), state->stats};
              if (state->also != nullptr) *state->also = state->stats;
              const boost::system::error_code ec = report.failure ? report.failure->code : boost::system::error_code();
              // The state is freed before the handler runs; the relay,
              // whose slot co_spawn was given, lives until it has.
              if (auto hs = boost::asio::get_associated_cancellation_slot(state->handler); hs.is_connected())
                hs.clear();
              handler_type h = std::move(state->handler);
              const std::shared_ptr<boost::asio::cancellation_signal> relay = std::move(state->relay);
              state.reset();
              std::move(h)(ec, std::move(report));
            })));
  };
  return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, step_report)>(
      std::move(init), token, std::move(ex), std::move(step), std::move(ws), options);
}
/// The same with default options.
template <class Executor, class CompletionToken = default_completion_token_t>
requires(!std::is_same_v<std::decay_t<CompletionToken>, run_step_options>) auto async_run_step(
    Executor ex, execution_step step, std::shared_ptr<workspace> ws,
    CompletionToken&& token = default_completion_token_t()) {
  return async_run_step(std::move(ex), std::move(step), std::move(ws), run_step_options{},
                        std::forward<CompletionToken>(token));
}

}  // namespace taskgroup

namespace boost::asio {

/// `co_await async_run_step(..., use_awaitable)` and `use_future`: the
/// report, or a `taskgroup::system_error` carrying the step's message.
template <class Executor>
class async_result<use_awaitable_t<Executor>, void(boost::system::error_code, taskgroup::step_report)>
    : public taskgroup::detail::throwing_awaitable<taskgroup::step_report, Executor> {};

template <class Allocator>
class async_result<use_future_t<Allocator>, void(boost::system::error_code, taskgroup::step_report)>
    : public taskgroup::detail::throwing_future<taskgroup::step_report, Allocator> {};

}  // namespace boost::asio
