// `use_awaitable` and `use_future` for a run's completion signature,
// `void(boost::system::error_code, taskgroup::run_report)`: on failure
// they throw (the awaiting coroutine) or store (the future) a
// `boost::system::system_error` whose `what()` carries the run's own
// message (`report.failure`), not only its code's. Asio's generic forms
// would throw `system_error(ec)` and drop the report with its message.
// Included by session.hpp; nothing here is called directly.
#pragma once

#include <taskgroup/run_report.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#include <exception>
#include <future>
#include <memory>
#include <string>
#include <utility>

namespace taskgroup::detail {

/// The exception a throwing token makes of a failed run: the code, and
/// the run's message (`report.failure`) as `what()`'s prefix.
inline boost::system::system_error run_exception(const boost::system::error_code& ec, const run_report& report) {
  return boost::system::system_error(ec, report.failure ? report.failure->message : std::string());
}

}  // namespace taskgroup::detail

namespace boost::asio {

/// `co_await x.async_run(g, opts, use_awaitable)`: the report, or a thrown
/// `system_error` carrying the run's message. Cancellation: the awaiting
/// coroutine's, as for any Asio operation.
template <class Executor>
class async_result<use_awaitable_t<Executor>, void(boost::system::error_code, taskgroup::run_report)> {
 public:
  using return_type = awaitable<taskgroup::run_report, Executor>;

  template <class Initiation, class... InitArgs>
  static return_type initiate(Initiation initiation, use_awaitable_t<Executor> token, InitArgs... args) {
    // The generic as_tuple form delivers the code and the report together
    // (its signature is another, so this specialization is not re-entered).
    auto tuple_token = as_tuple(token);
    auto [ec, report] =
        co_await async_initiate<decltype(tuple_token), void(boost::system::error_code, taskgroup::run_report)>(
            std::move(initiation), tuple_token, std::move(args)...);
    if (ec) throw taskgroup::detail::run_exception(ec, report);
    co_return std::move(report);
  }
};

/// `x.async_run(g, opts, use_future)`: a future of the report, or of a
/// `system_error` carrying the run's message.
template <class Allocator>
class async_result<use_future_t<Allocator>, void(boost::system::error_code, taskgroup::run_report)> {
 public:
  using return_type = std::future<taskgroup::run_report>;

  template <class Initiation, class... InitArgs>
  static return_type initiate(Initiation initiation, const use_future_t<Allocator>& token, InitArgs... args) {
    auto promise = std::make_shared<std::promise<taskgroup::run_report>>(std::allocator_arg, token.get_allocator());
    return_type future = promise->get_future();
    std::move(initiation)(
        [promise](const boost::system::error_code& ec, taskgroup::run_report report) {
          if (ec) {
            promise->set_exception(std::make_exception_ptr(taskgroup::detail::run_exception(ec, report)));
          } else {
            promise->set_value(std::move(report));
          }
        },
        std::move(args)...);
    return future;
  }
};

}  // namespace boost::asio
