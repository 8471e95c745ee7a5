#include <taskgroup/queue.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

namespace taskgroup {

namespace asio = boost::asio;

blob_queue::blob_queue(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 1)) {}

blob_queue::~blob_queue() = default;

void blob_queue::wake_one(waiters& list) noexcept {
  if (list.empty()) return;
  const waiter w = list.front();
  list.pop_front();
  *w.woken = true;
  w.timer->cancel();
}

void blob_queue::wake_all(waiters& list) noexcept {
  while (!list.empty()) wake_one(list);
}

bool blob_queue::hand_over(blob& value) noexcept {
  if (not_empty_.empty()) return false;
  *not_empty_.front().slot = std::move(value);
  wake_one(not_empty_);
  return true;
}

// Waits until woken (or cancelled), in arrival order among the waiters of
// `list`. The caller re-checks its condition.
asio::awaitable<status> blob_queue::wait(waiters& list, std::optional<blob>* slot) {
  asio::steady_timer timer(co_await asio::this_coro::executor, asio::steady_timer::time_point::max());
  bool woken = false;
  auto it = list.insert(list.end(), waiter{&timer, slot, &woken});
  (void)co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  if (!woken) list.erase(it);  // a woken waiter was removed by its waker
  asio::cancellation_state state = co_await asio::this_coro::cancellation_state;
  if (state.cancelled() != asio::cancellation_type::none) {
    // A producer woken for room it will not use passes the wake-up on.
    if (woken && slot == nullptr) wake_one(list);
    // What it waited for, for a run that ends stuck here (a consumer with
    // no producer left, a producer with no consumer).
    co_return fail(errc::cancelled, std::string(slot != nullptr ? "cancelled while waiting for an item: "
                                                                : "cancelled while waiting for room: ") +
                                        describe());
  }
  co_return ok();
}

asio::awaitable<status> blob_queue::push(blob value) {
  while (!closed_ && not_empty_.empty() && items_.size() >= capacity_) {
    if (status st = co_await wait(not_full_, nullptr); !st) co_return st;
  }
  if (closed_) co_return fail(errc::queue_closed, "the queue is closed");
  if (!hand_over(value)) items_.push_back(std::move(value));
  co_return ok();
}

asio::awaitable<result<std::optional<blob>>> blob_queue::pop() {
  for (;;) {
    // Values wait in the queue only while no consumer does.
    if (!items_.empty() || closed_) co_return try_pop();
    std::optional<blob> handed;
    status st = co_await wait(not_empty_, &handed);
    if (handed) {
      if (st) co_return std::move(handed);
      // Cancelled after a producer handed it a value: give it back.
      if (!hand_over(*handed)) items_.push_front(std::move(*handed));
    }
    if (!st) co_return st.error();
  }
}

bool blob_queue::try_push(blob& value) {
  if (closed_) return false;
  if (hand_over(value)) return true;
  if (items_.size() >= capacity_) return false;
  items_.push_back(std::move(value));
  return true;
}

std::optional<blob> blob_queue::try_pop() {
  if (items_.empty()) return std::nullopt;
  blob b = std::move(items_.front());
  items_.pop_front();
  wake_one(not_full_);
  return b;
}

std::string blob_queue::describe() const {
  const std::string fill = std::to_string(items_.size()) + " of " + std::to_string(capacity_);
  if (closed_) return "the queue is closed (" + fill + ")";
  if (items_.empty()) return "the queue is empty (" + fill + ", open)";
  if (items_.size() >= capacity_) return "the queue is full (" + fill + ")";
  return "the queue holds " + fill + " (open)";
}

void blob_queue::close() {
  closed_ = true;
  wake_all(not_empty_);
  wake_all(not_full_);
}

}  // namespace taskgroup
