// Internal: a when_all over child coroutines that returns the first failure.
//
// Children are spawned with co_spawn, each with its own cancellation
// signal; completions are serialised on the joining coroutine's executor.
// A join makes two allocations whatever the number of children (its state
// and one array of per-child signals and flags); each child costs what
// co_spawn costs. Children spawned on the joining executor itself complete
// there without an executor binder (one type-erased executor less to copy
// and prefer per child); children on other executors start by a post, so
// that they run in parallel on the threads of their contexts.
// Modes:
// - fail_fast: the first failing child cancels every other child at once;
//   the join completes after all have unwound, with that first error.
// - gather: every child runs to its end; the first error is reported.
// - race: the first child to complete cancels the others; its status wins.
// Cancelling the joining coroutine cancels every child; the join then
// completes with the first real failure, or `errc::cancelled`.
#pragma once

#include <taskgroup/error.hpp>

#include "errors.hpp"

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
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstddef>
#include <exception>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace taskgroup::detail {

enum class join_mode { fail_fast, gather, race };

template <class Handler>
class join_state : public std::enable_shared_from_this<join_state<Handler>> {
 public:
  join_state(std::size_t n, join_mode mode, std::vector<status>* results, Handler handler)
      : total_(n),
        remaining_(n),
        mode_(mode),
        children_(new child[n]),
        results_(results),
        handler_(std::move(handler)) {
    if (results_ != nullptr) results_->assign(n, ok());
  }

  boost::asio::cancellation_slot slot(std::size_t i) { return children_[i].signal.slot(); }

  void start() {
    parent_slot_ = boost::asio::get_associated_cancellation_slot(*handler_);
    if (parent_slot_.is_connected()) {
      // Weak: the state owns the parent's handler, which owns the slot; a
      // strong reference here would be a cycle that leaks an abandoned run.
      parent_slot_.assign([weak = this->weak_from_this()](boost::asio::cancellation_type_t) {
        if (auto self = weak.lock()) {
          self->cancelled_from_outside_ = true;
          self->cancel_all();
        }
      });
    }
  }

  void child_done(std::size_t i, std::exception_ptr e, status st) {
    children_[i].finished = true;
    if (e) st = error_from_exception(e);
    if (results_ != nullptr) (*results_)[i] = st;
    switch (mode_) {
      case join_mode::fail_fast:
        if (!st && !first_) {
          if (!(cancel_sent_ && st.error().is_cancelled())) {
            first_ = st.error();
            cancel_all();
          }
        }
        break;
      case join_mode::gather:
        if (!st && !first_ && !(cancel_sent_ && st.error().is_cancelled())) first_ = st.error();
        break;
      case join_mode::race:
        if (!race_winner_) {
          race_winner_.emplace(std::move(st));
          cancel_all();
        }
        break;
    }
    if (--remaining_ == 0) complete();
  }

  void cancel_all() {
    cancel_sent_ = true;
    // Only running children: a finished child's coroutine state is gone.
    for (std::size_t i = 0; i < total_; ++i) {
      if (!children_[i].finished) children_[i].signal.emit(boost::asio::cancellation_type::terminal);
    }
  }

 private:
  void complete() {
    if (parent_slot_.is_connected()) parent_slot_.clear();
    status result = ok();
    if (mode_ == join_mode::race && race_winner_) {
      result = std::move(*race_winner_);
    } else if (first_) {
      result = std::move(*first_);
    }
    if (result && cancelled_from_outside_) result = fail(errc::cancelled, "cancelled");
    Handler h = std::move(*handler_);
    handler_.reset();
    std::move(h)(std::move(result));
  }

  std::size_t total_;
  std::size_t remaining_;
  join_mode mode_;
  struct child {
    boost::asio::cancellation_signal signal;
    bool finished = false;
  };
  std::unique_ptr<child[]> children_;
  std::vector<status>* results_;
  std::optional<Handler> handler_;
  boost::asio::cancellation_slot parent_slot_;
  std::optional<error> first_;
  std::optional<status> race_winner_;
  bool cancel_sent_ = false;
  bool cancelled_from_outside_ = false;
};

/// A child's completion handler: reports to the join's state.
template <class State>
struct child_done_handler {
  std::shared_ptr<State> state;
  std::size_t index;
  void operator()(std::exception_ptr e, status st) { state->child_done(index, e, std::move(st)); }
};

// The cancellation relay of a child on another executor (see
// join_children). Every member is used on the child's executor only.
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

/// Spawns the children of a join; with `same_executor`, every
/// `child_executor(i)` is `ex` and the completions need no binder.
template <bool same_executor, class Make, class ChildExecutor>
boost::asio::awaitable<status> join_children(boost::asio::any_io_executor ex, std::size_t n, Make make,
                                             ChildExecutor child_executor, join_mode mode,
                                             std::vector<status>* results) {
  if (n == 0) {
    if (results != nullptr) results->clear();
    co_return ok();
  }
  auto init = [&](auto handler) {
    using state_t = join_state<decltype(handler)>;
    auto state = std::make_shared<state_t>(n, mode, results, std::move(handler));
    state->start();
    for (std::size_t i = 0; i < n; ++i) {
      child_done_handler<state_t> done{state, i};
      if constexpr (same_executor) {
        boost::asio::co_spawn(ex, make(i), boost::asio::bind_cancellation_slot(state->slot(i), std::move(done)));
      } else {
        // Another executor: a child may finish there while its completion
        // is on its way here. Asio 1.26's co_spawn would then forward a
        // cancellation to a coroutine that is gone; relay it instead
        // through a signal emitted on the child's executor, and only while
        // the child runs (both are decided there).
        //
        // The child starts by a post, never inline: co_spawn dispatches,
        // and an idle strand dispatched to from a thread of its context
        // runs at once on that thread, so the children (a run's nodes)
        // would run one after another on the starting thread instead of
        // in parallel on the context's threads.
        boost::asio::any_io_executor cex = child_executor(i);
        auto relay = std::make_shared<child_relay>();
        state->slot(i).assign([relay, cex](boost::asio::cancellation_type_t type) {
          boost::asio::dispatch(cex, [relay, type] {
            if (!relay->started) {
              relay->early = type;
            } else if (!relay->finished) {
              relay->signal.emit(type);
            }
          });
        });
        boost::asio::post(cex, [ex, cex, relay, child = make(i), done = std::move(done)]() mutable {
          relay->started = true;
          boost::asio::co_spawn(cex, relayed(std::move(child), relay),
                                boost::asio::bind_cancellation_slot(relay->signal.slot(),
                                                                    boost::asio::bind_executor(ex, std::move(done))));
          if (relay->early && !relay->finished) relay->signal.emit(*relay->early);
        });
      }
    }
  };
  co_return co_await boost::asio::async_initiate<const boost::asio::use_awaitable_t<>, void(status)>(
      std::move(init), boost::asio::use_awaitable);
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
