// `use_awaitable` and `use_future` for the completion signatures of a run,
// `void(boost::system::error_code, taskgroup::run_report)`, and of a step
// run, `void(boost::system::error_code, taskgroup::step_report)`: on failure
// they throw (the awaiting coroutine) or store (the future) a
// `taskgroup::system_error` whose `what()` is the run's own message
// (`report.failure`), not only its code's: the exception every throwing
// path of the library throws. Asio's generic forms would throw
// `system_error(ec)` and drop the message.
// Included by session.hpp and step_runner.hpp; nothing here is called
// directly.
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

/// The exception a throwing token makes of a failed run or step run
/// (`report.failure`): the library's `system_error` (a
/// `boost::system::system_error`), as `result::value()` throws, its
/// `what()` the run's message.
template <class Report>
taskgroup::system_error report_exception(const boost::system::error_code& ec, const Report& report) {
  return taskgroup::system_error(report.failure ? *report.failure : error(ec, ec.message()));
}

/// `co_await op(..., use_awaitable)`: the report, or a thrown
/// `system_error` carrying its message. Cancellation: the awaiting
/// coroutine's, as for any Asio operation.
template <class Report, class Executor>
class throwing_awaitable {
 public:
  using return_type = boost::asio::awaitable<Report, Executor>;

  template <class Initiation, class... InitArgs>
  static return_type initiate(Initiation initiation, boost::asio::use_awaitable_t<Executor> token, InitArgs... args) {
    // The generic as_tuple form delivers the code and the report together
    // (its signature is another, so this specialization is not re-entered).
    auto tuple_token = boost::asio::as_tuple(token);
    auto [ec, report] =
        co_await boost::asio::async_initiate<decltype(tuple_token), void(boost::system::error_code, Report)>(
            std::move(initiation), tuple_token, std::move(args)...);
    if (ec) throw report_exception(ec, report);
    co_return std::move(report);
  }
};

/// `op(..., use_future)`: a future of the report, or of a `system_error`
/// carrying its message.
template <class Report, class Allocator>
class throwing_future {
 public:
  using return_type = std::future<Report>;

  template <class Initiation, class... InitArgs>
  static return_type initiate(Initiation initiation, const boost::asio::use_future_t<Allocator>& token,
                              InitArgs... args) {
    auto promise = std::make_shared<std::promise<Report>>(std::allocator_arg, token.get_allocator());
    return_type future = promise->get_future();
    std::move(initiation)(
        [promise](const boost::system::error_code& ec, Report report) {
          if (ec) {
            promise->set_exception(std::make_exception_ptr(report_exception(ec, report)));
          } else {
            promise->set_value(std::move(report));
          }
        },
        std::move(args)...);
    return future;
  }
};

}  // namespace taskgroup::detail

namespace boost::asio {

template <class Executor>
class async_result<use_awaitable_t<Executor>, void(boost::system::error_code, taskgroup::run_report)>
    : public taskgroup::detail::throwing_awaitable<taskgroup::run_report, Executor> {};

template <class Allocator>
class async_result<use_future_t<Allocator>, void(boost::system::error_code, taskgroup::run_report)>
    : public taskgroup::detail::throwing_future<taskgroup::run_report, Allocator> {};

}  // namespace boost::asio
