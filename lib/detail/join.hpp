// Internal: the library's one join. A join waits for a set of children and
// completes with the status their ends make together. It serves a
// step's concurrent iterations (one join reused by every iteration), a
// step's deadline raced against its body, report steps beside their
// parent, and a node's tasks (lib/session/node_tasks.cpp, whose children
// are frame-free runs); a session's run (lib/session/run.cpp: one child
// per node strand) is decided by its `join_rule`.
//
// Three layers:
// - `join_rule`: the rules, with no Asio in them. Which child's status is
//   the join's, when the running children are cancelled, and what a
//   cancellation from outside makes of the result.
// - `join_core<Derived>`: the waiting. For one round it holds the parent's
//   completion handler and cancellation slot, and it is owned by its
//   children (`shared_ptr`), its holder's reference being handed back on
//   completion: an io_context destroyed with children pending frees the
//   join, the parent's handler and the parent's frame. `Derived` says how
//   its running children are cancelled.
// - `spawn_join`: a `join_core` whose children are coroutines spawned
//   with co_spawn; `join()` runs one round of a new one.
//
// Modes:
// - fail_fast: the first failing child cancels every other child at once;
//   the join completes after all have unwound, with that first error.
// - gather: every child runs to its end; the first error is reported.
// - race: the first child to complete cancels the others; its status wins.
// In every mode, the `cancelled` ends that the join's own cancellation
// caused are not failures, and cancelling the parent cancels every running
// child; the join then completes with the first real failure, or
// `errc::cancelled` in the words of the first child that its cancellation
// ended (where that child waited), with a count of the others.
#pragma once

#include <taskgroup/error.hpp>

#include "detail/errors.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace taskgroup::detail {

enum class join_mode { fail_fast, gather, race };

/// The rules of a join (see the top of this file), for one round at a
/// time. Not thread-safe: a join's children report on one executor.
class join_rule {
 public:
  explicit join_rule(join_mode mode) noexcept : mode_(mode) {}

  [[nodiscard]] join_mode mode() const noexcept { return mode_; }

  /// Forgets the previous round.
  void restart() noexcept {
    first_.reset();
    winner_.reset();
    first_cancelled_.reset();
    more_cancelled_ = 0;
    cancel_sent_ = false;
    cancelled_from_outside_ = false;
  }

  /// A child ended with `st`. True when the running children must now be
  /// cancelled (the caller cancels them and calls `cancelling`).
  [[nodiscard]] bool child_ended(const status& st) {
    if (mode_ == join_mode::race) {
      if (winner_) return false;
      winner_.emplace(st);
      return true;
    }
    if (st || first_) return false;
    if (cancel_sent_ && st.error().is_cancelled()) {
      // Kept for a join cancelled from outside: where its children were
      // when the cancellation reached them (a wait's own message).
      if (!first_cancelled_) {
        first_cancelled_ = st.error();
      } else {
        ++more_cancelled_;
      }
      return false;
    }
    first_ = st.error();
    return mode_ == join_mode::fail_fast;
  }

  /// The join is cancelling its running children.
  void cancelling() noexcept { cancel_sent_ = true; }
  /// True once the round's children are being cancelled: a child spawned
  /// after that is cancelled as it starts.
  [[nodiscard]] bool cancel_sent() const noexcept { return cancel_sent_; }
  /// The parent asked the join to stop (its children are then cancelled).
  void cancelled_from_outside() noexcept { cancelled_from_outside_ = true; }

  /// The first failure so far (none in race mode).
  [[nodiscard]] const std::optional<error>& first_failure() const noexcept { return first_; }

  /// The round's status once every child has ended: the race's winner, or
  /// the first failure, else success; a join cancelled from outside never
  /// reports success: it reports the first child that its cancellation
  /// ended (which says where that child was: an op's wait, say) and how
  /// many more it ended, or a bare `errc::cancelled` when none had begun.
  [[nodiscard]] status result() const {
    status r = ok();
    if (winner_) {
      r = *winner_;
    } else if (first_) {
      r = *first_;
    }
    if (r && cancelled_from_outside_) {
      if (!first_cancelled_) return fail(errc::cancelled, "cancelled");
      if (more_cancelled_ == 0) return *first_cancelled_;
      return fail(error(first_cancelled_->code, first_cancelled_->message + " (and " + std::to_string(more_cancelled_) +
                                                    " more concurrent " +
                                                    (more_cancelled_ == 1 ? "branch" : "branches") + " cancelled)"));
    }
    return r;
  }

 private:
  join_mode mode_;
  std::optional<error> first_;
  std::optional<status> winner_;
  std::optional<error> first_cancelled_;
  std::size_t more_cancelled_ = 0;
  bool cancel_sent_ = false;
  bool cancelled_from_outside_ = false;
};

/// The waiting part of a join, shared by its kinds (CRTP: `Derived` has
/// `void cancel_running()`, which cancels its running children). Used on
/// the joining executor only.
template <class Derived>
class join_core : public std::enable_shared_from_this<Derived> {
 public:
  using handler_type = boost::asio::async_result<boost::asio::use_awaitable_t<>, void(status)>::handler_type;

  /// The first failure of the round so far.
  [[nodiscard]] const std::optional<error>& first_failure() const noexcept { return rule_.first_failure(); }

  /// Cancels the running children; their cancelled ends are no failures.
  void cancel() {
    rule_.cancelling();
    static_cast<Derived*>(this)->cancel_running();
  }

  /// The holder asks the join to stop, as a cancellation of an awaiting
  /// parent would (the join then never reports success).
  void cancel_from_outside() {
    rule_.cancelled_from_outside();
    cancel();
  }

 protected:
  explicit join_core(join_mode mode) noexcept : rule_(mode) {}
  ~join_core() = default;
  join_core(const join_core&) = delete;
  join_core& operator=(const join_core&) = delete;

  /// Awaits one round, which `begin(Derived&)` starts once the parent's
  /// handler is held (it may complete the round at once). Meanwhile
  /// `owner` is empty: the children hold the join.
  template <class Begin>
  static boost::asio::awaitable<status> await_round(std::shared_ptr<Derived>& owner, Begin begin) {
    return boost::asio::async_initiate<const boost::asio::use_awaitable_t<>, void(status)>(
        [&owner, begin = std::move(begin)](handler_type handler) mutable {
          std::shared_ptr<Derived> self = std::move(owner);
          self->hold(owner, std::move(handler));
          begin(*self);
        },
        boost::asio::use_awaitable);
  }

  /// A child of the round ended with `st`.
  void child_ended(const status& st) {
    if (rule_.child_ended(st)) cancel();
  }

  /// The round is awaited by a callback instead of a coroutine: its end
  /// goes to `Derived::round_ended(status)`, and its cancellation from
  /// outside comes through `cancel_from_outside`.
  void await_directly() noexcept { direct_ = true; }

  /// True while a round is awaited.
  [[nodiscard]] bool awaited() const noexcept { return direct_ || handler_.has_value(); }

  /// Ends the awaited round with the rule's result; the holder has its
  /// reference again before the parent resumes.
  void complete() {
    if constexpr (requires(Derived & d, status st) { d.round_ended(std::move(st)); }) {
      if (direct_) {
        direct_ = false;
        static_cast<Derived*>(this)->round_ended(rule_.result());
        return;
      }
    }
    if (parent_slot_.is_connected()) parent_slot_.clear();
    status result = rule_.result();
    *owner_ = this->shared_from_this();
    owner_ = nullptr;
    handler_type h = std::move(*handler_);
    handler_.reset();
    std::move(h)(std::move(result));  // may start the next round
  }

  join_rule rule_;

 private:
  void hold(std::shared_ptr<Derived>& owner, handler_type handler) {
    owner_ = &owner;
    handler_.emplace(std::move(handler));
    parent_slot_ = boost::asio::get_associated_cancellation_slot(*handler_);
    if (parent_slot_.is_connected()) {
      // Weak: the join owns the parent's handler, which owns the slot; a
      // strong reference here would be a cycle that leaks an abandoned run.
      parent_slot_.assign([weak = this->weak_from_this()](boost::asio::cancellation_type_t) {
        if (std::shared_ptr<Derived> self = weak.lock()) {
          join_core& core = *self;
          core.cancel_from_outside();
        }
      });
    }
  }

  std::shared_ptr<Derived>* owner_ = nullptr;  // while awaited: the holder's reference to give back
  std::optional<handler_type> handler_;
  bool direct_ = false;  // awaited through round_ended (await_directly)
  boost::asio::cancellation_slot parent_slot_;
};

// The cancellation relay of a child on another executor (see
// spawn_join::spawn). Every member is used on the child's executor only.
struct child_relay {
  boost::asio::cancellation_signal signal;
  bool started = false;
  bool finished = false;
  // A cancellation that arrived before the child started: emitted as it
  // starts.
  std::optional<boost::asio::cancellation_type_t> early;
};

// Runs a child and marks it finished, still on its own executor.
inline boost::asio::awaitable<status> relayed(boost::asio::awaitable<status> child,
                                              std::shared_ptr<child_relay> relay) {
  status st = ok();
  try {
    st = co_await std::move(child);
  } catch (...) {
    st = error_from_exception(std::current_exception());
  }
  relay->finished = true;
  co_return st;
}

/// A join of `n` coroutine children, reusable round after round (a
/// concurrent step's iterations). Two allocations whatever `n` (the join
/// and one array of per-child signals and flags); each child costs what
/// co_spawn costs. Children spawned on the joining executor complete there
/// without an executor binder; children on other executors start by a
/// post, so that they run in parallel on the threads of their contexts.
class spawn_join final : public join_core<spawn_join> {
 public:
  spawn_join(std::size_t n, join_mode mode) : join_core(mode), n_(n), children_(new child_slot[n]) {}

  /// One round: child k is `make(k)` (an `awaitable<status>`), spawned on
  /// `child_executor(k)`, or on `ex` with `same_executor`. `results`, when
  /// given, receives each child's status. Awaited on `ex`; `owner` holds
  /// the join and is empty until the round completes.
  // (Forwarding references, not values: a parameter object of a call
  // inside a `co_await` is a temporary of the awaiting coroutine, which
  // GCC 12 destroys twice when that coroutine is destroyed suspended.)
  template <bool same_executor, class Make, class ChildExecutor>
  static boost::asio::awaitable<status> round(std::shared_ptr<spawn_join>& owner,
                                              const boost::asio::any_io_executor& ex, Make&& make,
                                              ChildExecutor&& child_executor, std::vector<status>* results = nullptr) {
    return await_round(
        owner, [&ex, make = std::forward<Make>(make), child_executor = std::forward<ChildExecutor>(child_executor),
                results](spawn_join& self) mutable {
          self.begin_round(results);
          for (std::size_t k = 0; k < self.n_; ++k) self.spawn<same_executor>(ex, k, make(k), child_executor);
        });
  }

  /// Cancels the children of the running round (join_core's hook).
  void cancel_running() {
    // Only running children: a finished child's coroutine state is gone,
    // and a signal not yet handed to this round's child still holds a
    // handler of an earlier one.
    for (std::size_t k = 0; k < n_; ++k) {
      if (children_[k].state == running) signal(k).emit(boost::asio::cancellation_type::terminal);
    }
  }

 private:
  // A child's completion handler: it holds the join.
  struct ticket {
    std::shared_ptr<spawn_join> join;
    std::size_t k;
    void operator()(std::exception_ptr e, status st) { join->child_done(k, e, std::move(st)); }
  };

  enum : char { not_started, running, finished };

  struct child_slot {
    // Two signals, used by alternate rounds: the last child of a round may
    // still be unwinding inside its own completion when the next round
    // starts.
    boost::asio::cancellation_signal signal[2];
    char state = not_started;
  };

  boost::asio::cancellation_signal& signal(std::size_t k) { return children_[k].signal[odd_ ? 1 : 0]; }

  void begin_round(std::vector<status>* results) {
    odd_ = !odd_;
    remaining_ = n_;
    for (std::size_t k = 0; k < n_; ++k) children_[k].state = not_started;
    rule_.restart();
    results_ = results;
    if (results_ != nullptr) results_->assign(n_, ok());
  }

  template <bool same_executor, class ChildExecutor>
  void spawn(const boost::asio::any_io_executor& ex, std::size_t k, boost::asio::awaitable<status> child,
             ChildExecutor& child_executor) {
    children_[k].state = running;
    ticket done{shared_from_this(), k};
    if constexpr (same_executor) {
      boost::asio::co_spawn(ex, std::move(child),
                            boost::asio::bind_cancellation_slot(signal(k).slot(), std::move(done)));
    } else {
      // Another executor: a child may finish there while its completion is
      // on its way here. Asio 1.26's co_spawn would then forward a
      // cancellation to a coroutine that is gone; relay it instead through
      // a signal emitted on the child's executor, and only while the child
      // runs (both are decided there).
      //
      // The child starts by a post, never inline: co_spawn dispatches, and
      // an idle strand dispatched to from a thread of its context runs at
      // once on that thread, so the children (a run's nodes) would run one
      // after another on the starting thread instead of in parallel on the
      // context's threads.
      boost::asio::any_io_executor cex = child_executor(k);
      auto relay = std::make_shared<child_relay>();
      signal(k).slot().assign([relay, cex](boost::asio::cancellation_type_t type) {
        boost::asio::dispatch(cex, [relay, type] {
          if (!relay->started) {
            relay->early = type;
          } else if (!relay->finished) {
            relay->signal.emit(type);
          }
        });
      });
      boost::asio::post(cex, [ex, cex, relay, child = std::move(child), done = std::move(done)]() mutable {
        relay->started = true;
        boost::asio::co_spawn(
            cex, relayed(std::move(child), relay),
            boost::asio::bind_cancellation_slot(relay->signal.slot(), boost::asio::bind_executor(ex, std::move(done))));
        if (relay->early && !relay->finished) relay->signal.emit(*relay->early);
      });
    }
    // The round was cancelled while it spawned (an earlier child failed at
    // once, inline): this child is cancelled too, or it would run on (a
    // report step beside failed tasks waited out its interval).
    if (rule_.cancel_sent() && children_[k].state == running) signal(k).emit(boost::asio::cancellation_type::terminal);
  }

  void child_done(std::size_t k, std::exception_ptr e, status st) {
    children_[k].state = finished;
    if (e) st = error_from_exception(e);
    child_ended(st);
    if (results_ != nullptr) (*results_)[k] = std::move(st);
    if (--remaining_ == 0) complete();
  }

  std::size_t n_;
  std::unique_ptr<child_slot[]> children_;
  std::size_t remaining_ = 0;
  std::vector<status>* results_ = nullptr;
  bool odd_ = true;
};

/// Spawns the children of a one-round join; with `same_executor`, every
/// `child_executor(i)` is `ex`.
template <bool same_executor, class Make, class ChildExecutor>
boost::asio::awaitable<status> join_children(boost::asio::any_io_executor ex, std::size_t n, Make make,
                                             ChildExecutor child_executor, join_mode mode,
                                             std::vector<status>* results) {
  if (n == 0) {
    if (results != nullptr) results->clear();
    co_return ok();
  }
  auto join = std::make_shared<spawn_join>(n, mode);
  co_return co_await spawn_join::round<same_executor>(join, ex, std::move(make), std::move(child_executor), results);
}

/// Runs `n` children `make(i)` (each an `awaitable<status>`) spawned on
/// `child_executor(i)`, and completes as described above. `results`, when
/// given, receives each child's status. Must be awaited on `ex`.
template <class Make, class ChildExecutor>
boost::asio::awaitable<status> join(boost::asio::any_io_executor ex, std::size_t n, Make make,
                                    ChildExecutor child_executor, join_mode mode,
                                    std::vector<status>* results = nullptr) {
  return join_children<false>(std::move(ex), n, std::move(make), std::move(child_executor), mode, results);
}

/// The same with every child spawned on `ex`.
template <class Make>
boost::asio::awaitable<status> join(boost::asio::any_io_executor ex, std::size_t n, Make make, join_mode mode,
                                    std::vector<status>* results = nullptr) {
  auto unused = [](std::size_t) { return 0; };
  return join_children<true>(std::move(ex), n, std::move(make), unused, mode, results);
}

}  // namespace taskgroup::detail
