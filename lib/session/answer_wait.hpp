// Waiting on the coordinator for answers asked of several parties at
// once (the nodes of a run, the runs of a session): each party answers
// once, and the waiter wakes when the last has answered or at a deadline.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstddef>

namespace taskgroup::detail {

/// Every call is made on the coordinator: the count needs no lock, and an
/// answer cannot land between the last `expect` and the `wait` (the
/// waiting coroutine does not yield in between).
class answer_wait {
 public:
  explicit answer_wait(const boost::asio::any_io_executor& coord) : all_in_(coord) {}

  /// One more answer to wait for.
  void expect() noexcept { ++pending_; }
  /// One answer has come; the last wakes the waiter.
  void answered() {
    if (--pending_ == 0) all_in_.cancel();
  }
  /// Completes once every expected answer has come, or at `deadline`
  /// (the answers still missing then are the caller's to report).
  boost::asio::awaitable<void> wait(std::chrono::steady_clock::time_point deadline) {
    if (pending_ == 0) co_return;
    all_in_.expires_at(deadline);
    co_await all_in_.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
  }

 private:
  boost::asio::steady_timer all_in_;  // cancelled when the last answer comes
  std::size_t pending_ = 0;
};

}  // namespace taskgroup::detail
