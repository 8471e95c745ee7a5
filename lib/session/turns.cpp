#include "session/turns.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

namespace taskgroup::detail {

namespace asio = boost::asio;

asio::awaitable<result<node_turns::turn>> node_turns::acquire() {
  if (!held_) {
    held_ = true;
    co_return turn(shared_from_this());
  }
  auto self = shared_from_this();
  // The executor first, in a variable of its own: GCC 12 destroys a
  // temporary made by co_await inside an aggregate's braces twice (here an
  // executor's reference count, released once too often).
  const asio::any_io_executor ex = co_await asio::this_coro::executor;
  waiter w{asio::steady_timer(ex, asio::steady_timer::time_point::max())};
  queue_.push_back(&w);
  // Out of the queue however the wait ends, even when its frame is
  // destroyed unresumed (an abandoned io_context).
  struct unqueue {
    std::deque<waiter*>& queue;
    waiter* w;
    ~unqueue() {
      if (auto it = std::find(queue.begin(), queue.end(), w); it != queue.end()) queue.erase(it);
    }
  } guard{queue_, &w};
  // A timer that never expires, cancelled by release(): the wait is an
  // ordinary Asio operation, so the run's cancellation reaches it.
  (void)co_await w.timer.async_wait(asio::as_tuple(asio::use_awaitable));
  // Granted while the cancellation was on its way: the turn is ours.
  if (w.granted) co_return turn(std::move(self));
  co_return error(errc::cancelled, "cancelled while waiting for another run of a GLOBAL group on the node");
}

void node_turns::release() noexcept {
  if (queue_.empty()) {
    held_ = false;
    return;
  }
  waiter* next = queue_.front();
  queue_.pop_front();
  next->granted = true;
  next->timer.cancel();
}

}  // namespace taskgroup::detail
