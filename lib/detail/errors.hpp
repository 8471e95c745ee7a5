// Internal: the one conversion of an exception into an error, for every
// place where one is caught (an op's kernel, a step's child, a session's
// run, the MPI protocol).
//
// Defined inline: the MPI library calls it too, and so needs no symbol of
// the core library that is not part of its public API.
#pragma once

#include <taskgroup/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/system/system_error.hpp>

#include <exception>
#include <utility>

namespace taskgroup::detail {

/// The error that `e` carries: a `system_error`'s own error; an Asio
/// `operation_aborted` (what an awaited operation throws once cancelled)
/// as `errc::cancelled`, so that a cancellation reads the same wherever it
/// was caught; another `boost::system::system_error`'s code and text; any
/// other exception as `errc::op_failed` with its `what()`.
inline error error_from_exception(std::exception_ptr e) {
  try {
    std::rethrow_exception(std::move(e));
  } catch (const system_error& ex) {
    return ex.error();
  } catch (const boost::system::system_error& ex) {
    if (ex.code() == boost::asio::error::operation_aborted) return {errc::cancelled, "cancelled"};
    return {ex.code(), ex.what()};
  } catch (const std::exception& ex) {
    return {errc::op_failed, ex.what()};
  } catch (...) {
    return {errc::op_failed, "unknown exception"};
  }
}

}  // namespace taskgroup::detail
