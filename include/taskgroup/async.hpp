// taskgroup: what every asynchronous operation of the library shares.
#pragma once

#include <boost/asio/use_awaitable.hpp>

namespace taskgroup {

/// The completion token of the library's asynchronous operations
/// (`local_session::async_run`, `mpi_session::async_run`,
/// `run_probe::async_where`) when none is given: `use_awaitable`, so
/// `co_await session.async_run(group)` in an `awaitable` coroutine runs
/// the group and, on failure, throws `system_error` with the run's message
/// (Asio's own default for `any_io_executor` is none in Boost 1.81, and
/// `deferred`, whose awaited form throws the code alone, from 1.84). Pass
/// `boost::asio::deferred` for an operation to launch later.
using default_completion_token_t = boost::asio::use_awaitable_t<>;

}  // namespace taskgroup
