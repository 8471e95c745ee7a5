// Internal: the relay that both sessions put between a caller's
// cancellation slot and the coroutine that runs a group.
#pragma once

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/dispatch.hpp>

#include <memory>

namespace taskgroup::detail {

// Forwards cancellation from `from` to a new signal, emitted on `ex`.
// Asio 1.26's co_spawn, cancelled from another thread, dispatches a raw
// pointer to a signal that dies with the coroutine (a use-after-free when
// the run ends meanwhile); bind the returned signal's slot to co_spawn
// instead and keep the signal alive in the completion handler.
template <class Executor>
std::shared_ptr<boost::asio::cancellation_signal> forward_cancellation(boost::asio::cancellation_slot from,
                                                                       const Executor& ex) {
  auto sig = std::make_shared<boost::asio::cancellation_signal>();
  if (from.is_connected()) {
    from.assign([sig, ex](boost::asio::cancellation_type type) {
      boost::asio::dispatch(ex, [sig, type] { sig->emit(type); });
    });
  }
  return sig;
}

}  // namespace taskgroup::detail
