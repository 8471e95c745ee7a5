// Not part of the API: how `local_session::async_run` and
// `mpi_session::async_run` complete their caller's handler, in a header
// because it is a template over that handler.
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/error.hpp>
#include <taskgroup/run_report.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/system/error_code.hpp>

#include <exception>
#include <memory>
#include <type_traits>
#include <utility>

namespace taskgroup::detail {

/// The end of a run as the session sees it: its caller's handler, erased.
class TASKGROUP_API run_completion {
 public:
  virtual ~run_completion() = default;
  run_completion() = default;
  run_completion(const run_completion&) = delete;
  run_completion& operator=(const run_completion&) = delete;
  /// Calls the handler with the report (and its failure's code) on the
  /// handler's associated executor; called once, never inside the
  /// initiating call.
  virtual void complete(run_report r) noexcept = 0;
  /// The handler's cancellation slot (not connected when it has none).
  [[nodiscard]] virtual boost::asio::cancellation_slot slot() const noexcept = 0;
};

/// `run_completion` for a handler of type `Handler`: it keeps work on the
/// handler's associated executor (by default `fallback`) while the run is
/// in flight, and calls it there, inline when already there (dispatch).
template <class Handler>
class run_completion_for final : public run_completion {
 public:
  run_completion_for(Handler handler, const boost::asio::any_io_executor& fallback)
      : work_(boost::asio::prefer(boost::asio::get_associated_executor(handler, fallback),
                                  boost::asio::execution::outstanding_work.tracked)),
        handler_(std::move(handler)) {}

  void complete(run_report r) noexcept override {
    auto ex = work_;
    boost::asio::dispatch(ex, [h = std::move(handler_), r = std::move(r), work = std::move(work_)]() mutable {
      // Cleared where it is emitted: the handler's executor.
      if (auto s = boost::asio::get_associated_cancellation_slot(h); s.is_connected()) s.clear();
      const boost::system::error_code ec = r.failure ? r.failure->code : boost::system::error_code();
      std::move(h)(ec, std::move(r));
    });
  }
  [[nodiscard]] boost::asio::cancellation_slot slot() const noexcept override {
    return boost::asio::get_associated_cancellation_slot(handler_);
  }

 private:
  // Decayed: for an executor without the property, prefer returns its
  // argument as it was given (a reference).
  using work_executor = std::decay_t<
      typename boost::asio::prefer_result<boost::asio::associated_executor_t<Handler, boost::asio::any_io_executor>,
                                          boost::asio::execution::outstanding_work_t::tracked_t>::type>;
  work_executor work_;
  Handler handler_;
};

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
