// Internal: awaiting an operation written in callback form (a start that
// completes an `op_completion`), as `op_kernel::run_async` awaits `start`.
#pragma once

#include <taskgroup/operator.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

namespace taskgroup::detail {

/// Starts an operation: begins it on `ex` and completes `done` once.
using start_fn = void (*)(void* arg, const boost::asio::any_io_executor& ex, op_completion done);

/// Completes with the status `start(arg, ex, done)` reports; an end
/// reported inside `start` is posted (the awaiting coroutine never resumes
/// inside its own initiation). Cancellation: the awaiting coroutine's slot
/// is `done.slot()`. `ex` must live until the operation ends.
boost::asio::awaitable<status> await_started(const boost::asio::any_io_executor& ex, start_fn start, void* arg);

}  // namespace taskgroup::detail
