// Test harness: run awaitables to completion on a private io_context.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>

#include <taskgroup/run_options.hpp>
#include <taskgroup/run_report.hpp>
#include <taskgroup/task_group.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <exception>
#include <optional>
#include <utility>

namespace taskgroup::test {

/// Runs `a` on `io` until the context has no more work; rethrows what the
/// coroutine threw; returns its value.
template <class T>
T run(boost::asio::io_context& io, boost::asio::awaitable<T> a) {
  std::optional<T> out;
  std::exception_ptr error;
  boost::asio::co_spawn(io, std::move(a), [&](std::exception_ptr e, T v) {
    error = e;
    if (!e) out.emplace(std::move(v));
  });
  io.restart();
  io.run();
  if (error) std::rethrow_exception(error);
  return std::move(*out);
}

/// Same, on a fresh io_context.
template <class T>
T run(boost::asio::awaitable<T> a) {
  boost::asio::io_context io;
  return run(io, std::move(a));
}

/// A session's blocking run (`run(group, options, ec)`) as a
/// `result<run_report>`: the report, or the run's failure.
template <class Session>
result<run_report> run_sync(Session& session, task_group group, run_options options = {}) {
  boost::system::error_code ec;
  run_report r = session.run(std::move(group), std::move(options), ec);
  if (r.failure) return *r.failure;
  return r;
}

/// A session's run awaited as a `result<run_report>`.
template <class Session>
boost::asio::awaitable<result<run_report>> run_async(Session& session, task_group group, run_options options = {}) {
  auto [ec, r] = co_await session.async_run(std::move(group), std::move(options),
                                            boost::asio::as_tuple(boost::asio::use_awaitable));
  if (r.failure) co_return *r.failure;
  co_return std::move(r);
}

/// A completion handler for `async_run` that hands `f` the run as a
/// `result<run_report>`: the report, or the run's failure.
template <class F>
auto as_result(F f) {
  return [f = std::move(f)](boost::system::error_code, run_report r) mutable {
    if (r.failure) {
      f(result<run_report>(*r.failure));
    } else {
      f(result<run_report>(std::move(r)));
    }
  };
}

}  // namespace taskgroup::test
