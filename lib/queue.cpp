#include <taskgroup/queue.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

namespace taskgroup {

namespace asio = boost::asio;

blob_queue::blob_queue(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 1)) {}

blob_queue::~blob_queue() = default;

void blob_queue::wake(waiters& list) noexcept {
  for (asio::steady_timer* t : list) t->cancel();
}

// Waits until woken by `wake` (or cancelled). The caller re-checks its
// condition, so a spurious wake-up is harmless.
asio::awaitable<status> blob_queue::wait(waiters& list) {
  asio::steady_timer timer(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
  auto it = list.insert(list.end(), &timer);
  (void)co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  list.erase(it);
  asio::cancellation_state state = co_await asio::this_coro::cancellation_state;
  if (state.cancelled() != asio::cancellation_type::none) {
    co_return fail(errc::cancelled, "cancelled while waiting on a queue");
  }
  co_return ok();
}

asio::awaitable<status> blob_queue::push(blob value) {
  while (!closed_ && items_.size() >= capacity_) {
    if (status st = co_await wait(not_full_); !st) co_return st;
  }
  if (closed_) co_return fail(errc::queue_closed, "the queue is closed");
  items_.push_back(std::move(value));
  wake(not_empty_);
  co_return ok();
}

asio::awaitable<result<std::optional<blob>>> blob_queue::pop() {
  while (items_.empty() && !closed_) {
    if (status st = co_await wait(not_empty_); !st) co_return st.error();
  }
  co_return try_pop();
}

bool blob_queue::try_push(blob& value) {
  if (closed_ || items_.size() >= capacity_) return false;
  items_.push_back(std::move(value));
  wake(not_empty_);
  return true;
}

std::optional<blob> blob_queue::try_pop() {
  if (items_.empty()) return std::nullopt;
  blob b = std::move(items_.front());
  items_.pop_front();
  wake(not_full_);
  return b;
}

void blob_queue::close() {
  closed_ = true;
  wake(not_empty_);
  wake(not_full_);
}

}  // namespace taskgroup
