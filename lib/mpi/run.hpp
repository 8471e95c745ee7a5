// Internal: one run of the MPI protocol: what it shares with the local part
// of the run (this rank's nodes, on the local session), and the two roles
// that drive it, rank 0's (client.cpp) and the other ranks' (worker.cpp).
#pragma once

#include "mpi/state.hpp"

#include <taskgroup/run_report.hpp>
#include <taskgroup/session.hpp>
#include <taskgroup/task_group.hpp>
#include <taskgroup/trace_context.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace taskgroup::detail::mpi {

/// A nonblocking send whose buffer lives until it completes.
struct pending_send {
  std::shared_ptr<const void> keep;  // owns the bytes being sent
  MPI_Request request = MPI_REQUEST_NULL;
  int dest = -1;
};

/// What one run shares with the completion handler of its local part.
struct run_ctx {
  explicit run_ctx(const boost::asio::any_io_executor& ex) : wake(ex) {}
  boost::asio::steady_timer wake;
  boost::asio::cancellation_signal local_cancel;
  bool local_done = false;
  result<run_report> local;
  std::optional<run_report> failed_local;  // the local report, when `local` is its failure
  trace_context trace;                     // the run's, once START told it (none before)
  // When START left rank 0 (on rank 0) or arrived (elsewhere), on this
  // rank's system clock: the first reading of the clock estimate.
  std::int64_t start_ns = 0;
  /// The local part's report, whether it went well or not; null until it
  /// has ended.
  run_report* local_report() { return local ? &local.value() : failed_local ? &*failed_local : nullptr; }
  std::vector<pending_send> sends;
  std::optional<error> mpi_error;  // MPI itself failed: stop talking, unwind
};

/// Starts this rank's nodes of `group` (placed by `where`) on the local
/// session; their end wakes the run's loop (`ctx.wake`).
void start_local(const state_ptr& s, const std::shared_ptr<run_ctx>& ctx, const task_group& group,
                 const std::map<std::string, int>& where, run_options options);
/// Cancels the local part of the run unless it has ended.
void cancel_local(run_ctx& ctx);

/// Rank 0's part of run `run_id`: completes with every task's report,
/// `failure` set when the run failed.
boost::asio::awaitable<run_report> run_client(state_ptr s, task_group group, run_options options, std::uint64_t run_id);
/// Another rank's part of run `run_id`: this rank's report, `failure` set
/// when the run failed.
boost::asio::awaitable<run_report> run_worker(state_ptr s, task_group group, run_options options, std::uint64_t run_id);

}  // namespace taskgroup::detail::mpi
