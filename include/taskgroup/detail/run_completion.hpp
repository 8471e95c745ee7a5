// Not part of the API: the initiation that `local_session::async_run` and
// `mpi_session::async_run` share, in a header because it is a template
// over the caller's completion handler.
#pragma once

#include <taskgroup/error.hpp>
#include <taskgroup/run_report.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/system/error_code.hpp>

#include <exception>
#include <memory>
#include <utility>

namespace taskgroup::detail {

/// Spawns `run` on `ex` for `handler`. Cancellation reaches the run through
/// `cancel` (the session's relay to the run's executor, kept alive by the
/// completion). The handler is called on its associated executor (by
/// default `ex`) with the run's error code (`report.failure`'s, or none)
/// and the report; an exception escaping `run` becomes an
/// `errc::op_failed` failure reading `unexpected`.
template <class Handler>
void spawn_run(const boost::asio::any_io_executor& ex, boost::asio::awaitable<run_report> run,
               std::shared_ptr<boost::asio::cancellation_signal> cancel, Handler handler, const char* unexpected) {
  auto handler_ex = boost::asio::get_associated_executor(handler, ex);
  const boost::asio::cancellation_slot slot = cancel->slot();
  boost::asio::co_spawn(
      ex, std::move(run),
      boost::asio::bind_cancellation_slot(
          slot, boost::asio::bind_executor(handler_ex, [h = std::move(handler), cancel = std::move(cancel), unexpected](
                                                           std::exception_ptr ep, run_report r) mutable {
            if (ep) r.failure = error(errc::op_failed, unexpected);
            const boost::system::error_code ec = r.failure ? r.failure->code : boost::system::error_code();
            std::move(h)(ec, std::move(r));
          })));
}

}  // namespace taskgroup::detail
