// Internal: waits for the Sleep operator, many per Asio timer.
#pragma once

#include <taskgroup/operator.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <chrono>

namespace taskgroup::detail {

/// Calls `done` through `ex` with success once `deadline` has passed, or
/// with `errc::cancelled` ("Sleep cancelled") when `done.slot()` fires
/// first (any cancellation type). The waits of one execution context share
/// one Asio timer armed at the earliest deadline: a pending wait holds a
/// 56-byte entry in an ordered set, where a timer per wait would hold an
/// I/O object, a pending operation and a place in Asio's timer heap.
///
/// `ex` must outlive the wait (until `done` has been called or destroyed).
/// When the execution context shuts down with waits pending, their `done`
/// is destroyed uncalled (abandoned). Errors: allocation failure completes
/// `done` with `errc::op_failed` (through `ex`). Threading: thread-safe (the
/// waits of a context are guarded by one mutex); the cancellation slot must
/// be emitted on `ex`, as for any Asio operation.
void sleep_until(const boost::asio::any_io_executor& ex, std::chrono::steady_clock::time_point deadline,
                 op_completion done) noexcept;

}  // namespace taskgroup::detail
