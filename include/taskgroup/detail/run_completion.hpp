// Not part of the API: how `local_session::async_run` and
// `mpi_session::async_run` complete their caller's handler, in a header
// because it is a template over that handler.
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/error.hpp>
#include <taskgroup/run_report.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_allocator.hpp>
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
/// Destroyed through `run_completion_ptr`, which frees it with the
/// allocator it was made with.
class TASKGROUP_API run_completion {
 public:
  run_completion() = default;
  run_completion(const run_completion&) = delete;
  run_completion& operator=(const run_completion&) = delete;
  /// Calls the handler with the report `*r` (and its failure's code) on
  /// the handler's associated executor, once, never inside the initiating
  /// call; frees this object first, as Asio frees an operation's state
  /// before its handler runs. `r` is where the run keeps its report (it
  /// owns what holds it): the report is moved out of it there, and `r`
  /// dropped, before the handler is called; until then the report moves
  /// as one pointer.
  virtual void complete(std::shared_ptr<run_report> r) noexcept = 0;
  /// The handler's cancellation slot (not connected when it has none).
  [[nodiscard]] virtual boost::asio::cancellation_slot slot() const noexcept = 0;
  /// Frees this object without calling the handler (a run dropped with
  /// its event loop).
  virtual void destroy() noexcept = 0;

 protected:
  ~run_completion() = default;
};

/// Owns a `run_completion`; frees it with its own allocator.
struct run_completion_deleter {
  void operator()(run_completion* c) const noexcept { c->destroy(); }
};
using run_completion_ptr = std::unique_ptr<run_completion, run_completion_deleter>;

/// `run_completion` for a handler of type `Handler`: it keeps work on the
/// handler's associated executor (by default `fallback`) while the run is
/// in flight, and calls it there, inline when already there (dispatch).
/// Made with the handler's associated allocator (`make_run_completion`).
template <class Handler>
class run_completion_for final : public run_completion {
 public:
  using allocator_type = typename std::allocator_traits<
      boost::asio::associated_allocator_t<Handler>>::template rebind_alloc<run_completion_for>;

  run_completion_for(Handler handler, const boost::asio::any_io_executor& fallback)
      : work_(boost::asio::prefer(boost::asio::get_associated_executor(handler, fallback),
                                  boost::asio::execution::outstanding_work.tracked)),
        handler_(std::move(handler)) {}

  ~run_completion_for() = default;

  void complete(std::shared_ptr<run_report> r) noexcept override {
    // Out of this object before it is freed.
    allocator_type alloc_self(boost::asio::get_associated_allocator(handler_));
    upcall call{std::move(handler_), std::move(r), std::move(work_)};
    free(alloc_self, this);
    const auto ex = call.work;
    boost::asio::dispatch(ex, std::move(call));
  }
  [[nodiscard]] boost::asio::cancellation_slot slot() const noexcept override {
    return boost::asio::get_associated_cancellation_slot(handler_);
  }
  void destroy() noexcept override { free(allocator_type(boost::asio::get_associated_allocator(handler_)), this); }

 private:
  static void free(allocator_type alloc, run_completion_for* self) noexcept {
    std::allocator_traits<allocator_type>::destroy(alloc, self);
    std::allocator_traits<allocator_type>::deallocate(alloc, self, 1);
  }
  // Decayed: for an executor without the property, prefer returns its
  // argument as it was given (a reference).
  using work_executor = std::decay_t<
      typename boost::asio::prefer_result<boost::asio::associated_executor_t<Handler, boost::asio::any_io_executor>,
                                          boost::asio::execution::outstanding_work_t::tracked_t>::type>;
  work_executor work_;

  // The call of the handler, queued on its executor. Its allocator is the
  // handler's through a member type rather than an associator's
  // specialisation (bind_allocator), which would have dispatch wrap it in
  // a second work-tracking layer.
  struct upcall {
    Handler h;
    std::shared_ptr<run_report> r;
    work_executor work;  // the handler's executor kept busy until the call

    using allocator_type = boost::asio::associated_allocator_t<Handler>;
    [[nodiscard]] allocator_type get_allocator() const noexcept { return boost::asio::get_associated_allocator(h); }

    void operator()() {
      // Cleared where it is emitted: the handler's executor.
      if (auto s = boost::asio::get_associated_cancellation_slot(h); s.is_connected()) s.clear();
      run_report report = std::move(*r);
      r.reset();  // the run's state, as far as it is this handler's
      const boost::system::error_code ec = report.failure ? report.failure->code : boost::system::error_code();
      std::move(h)(ec, std::move(report));
    }
  };
  Handler handler_;
};

/// The completion of a run for `handler`, allocated with the handler's
/// associated allocator (the operation's own state, as Asio's operations
/// allocate theirs).
template <class Handler>
run_completion_ptr make_run_completion(Handler handler, const boost::asio::any_io_executor& fallback) {
  using completion = run_completion_for<Handler>;
  typename completion::allocator_type alloc(boost::asio::get_associated_allocator(handler));
  completion* p = std::allocator_traits<typename completion::allocator_type>::allocate(alloc, 1);
  try {
    std::allocator_traits<typename completion::allocator_type>::construct(alloc, p, std::move(handler), fallback);
  } catch (...) {
    std::allocator_traits<typename completion::allocator_type>::deallocate(alloc, p, 1);
    throw;
  }
  return run_completion_ptr(p);
}

/// Spawns `run` on `ex` for `handler`. Cancellation reaches the run through
/// `cancel` (the session's relay to the run's executor, kept alive by the
/// completion). The handler is called on its associated executor (by
/// default `ex`) with the run's error code (`report.failure`'s, or none)
/// and the report; an exception escaping `run` becomes an
/// `errc::op_failed` failure reading `unexpected`. The handler waits in a
/// state allocated with its associated allocator.
template <class Handler>
void spawn_run(const boost::asio::any_io_executor& ex, boost::asio::awaitable<run_report> run,
               std::shared_ptr<boost::asio::cancellation_signal> cancel, Handler handler, const char* unexpected) {
  struct waiting {
    Handler handler;
    std::shared_ptr<boost::asio::cancellation_signal> cancel;
  };
  auto handler_ex = boost::asio::get_associated_executor(handler, ex);
  auto alloc = boost::asio::get_associated_allocator(handler);
  auto state = std::allocate_shared<waiting>(alloc, waiting{std::move(handler), std::move(cancel)});
  const boost::asio::cancellation_slot slot = state->cancel->slot();
  boost::asio::co_spawn(
      ex, std::move(run),
      boost::asio::bind_cancellation_slot(
          slot, boost::asio::bind_executor(
                    handler_ex, [state = std::move(state), unexpected](std::exception_ptr ep, run_report r) mutable {
                      if (ep) r.failure = error(errc::op_failed, unexpected);
                      const boost::system::error_code ec = r.failure ? r.failure->code : boost::system::error_code();
                      // The state is freed before the handler runs; the relay, whose
                      // slot co_spawn was given, lives until it has.
                      Handler h = std::move(state->handler);
                      const std::shared_ptr<boost::asio::cancellation_signal> relay = std::move(state->cancel);
                      state.reset();
                      std::move(h)(ec, std::move(r));
                    })));
}

}  // namespace taskgroup::detail
