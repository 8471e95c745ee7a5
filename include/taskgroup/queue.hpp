// taskgroup: a bounded asynchronous queue of blobs (the queue blob).
//
// Producers `co_await push(value)` and wait while the queue is full;
// consumers `co_await pop()` and wait while it is empty. Waiting suspends
// the coroutine (a timer used as a wake-up signal), never a thread, so
// producers and consumers on one node strand interleave. `close()` wakes
// everyone: later pushes fail with `errc::queue_closed`, pops drain what is
// left and then complete with no value.
//
// Fairness: waiting consumers are served in arrival order. A value pushed
// while consumers wait is handed to the one that has waited longest (it
// never passes through the queue, so a consumer arriving later cannot take
// it first); a waiting producer is woken, oldest first, each time a value
// leaves. A consumer cancelled after a value was handed to it gives the
// value back to the front of the queue (or to the next waiting consumer):
// nothing is lost.
//
// Cancellation: a waiting push or pop honours the awaiting coroutine's
// cancellation (terminal, partial or total) and completes with
// `errc::cancelled`; the queue is unchanged.
//
// Threading: strand-bound. Every producer and consumer of one queue must
// run on one strand (the queue's node); queues do not cross nodes.
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/blob.hpp>
#include <taskgroup/error.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstddef>
#include <deque>
#include <list>
#include <memory>
#include <optional>
#include <string>

namespace taskgroup {

/// A bounded FIFO of blobs with waiting push and pop.
class TASKGROUP_API blob_queue {
 public:
  /// A queue holding at most `capacity` values (at least 1).
  explicit blob_queue(std::size_t capacity);
  blob_queue(const blob_queue&) = delete;
  blob_queue& operator=(const blob_queue&) = delete;
  ~blob_queue();

  /// Appends `value`, waiting while the queue is full. Completes with
  /// `errc::queue_closed` if the queue is (or gets) closed first, with
  /// `errc::cancelled` when cancelled while waiting.
  boost::asio::awaitable<status> push(blob value);

  /// Takes the oldest value, waiting while the queue is empty and open.
  /// Completes with no value once the queue is closed and drained, with
  /// `errc::cancelled` when cancelled while waiting.
  boost::asio::awaitable<result<std::optional<blob>>> pop();

  /// Appends without waiting; false when full or closed.
  bool try_push(blob& value);
  /// Takes without waiting; no value when empty.
  std::optional<blob> try_pop();

  /// Closes the queue and wakes every waiter. Idempotent.
  void close();

  [[nodiscard]] bool closed() const noexcept { return closed_; }
  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  /// Its state in words, as waits on it report it: "the queue is empty (0
  /// of 4, open)", "the queue is full (4 of 4)", "the queue holds 2 of 4
  /// (open)", "the queue is closed (1 of 4)".
  [[nodiscard]] std::string describe() const;

 private:
  // A suspended push or pop: its wake-up timer and, for a pop, where a
  // producer hands it a value. `woken` is set (and the entry removed) by
  // whoever wakes it.
  struct waiter {
    boost::asio::steady_timer* timer;
    std::optional<blob>* slot;
    bool* woken;
  };
  using waiters = std::list<waiter>;
  boost::asio::awaitable<status> wait(waiters& list, std::optional<blob>* slot);
  static void wake_one(waiters& list) noexcept;
  static void wake_all(waiters& list) noexcept;
  // Hands `value` to the oldest waiting consumer; false (value untouched)
  // when none waits.
  bool hand_over(blob& value) noexcept;

  std::size_t capacity_;
  bool closed_ = false;
  std::deque<blob> items_;
  waiters not_full_;
  waiters not_empty_;
};

/// A queue blob holds a `shared_ptr<blob_queue>`: ops keep the queue alive
/// while they wait, even if the blob is overwritten.
using queue_ptr = std::shared_ptr<blob_queue>;

namespace detail {
template <>
struct type_name_of<queue_ptr> {
  static std::string get() { return "queue"; }
};
}  // namespace detail

}  // namespace taskgroup
