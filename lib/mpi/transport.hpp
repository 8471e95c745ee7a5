// Internal: how the MPI session's messages move: nonblocking sends and
// probes on the session's communicator, polled by the run's loop at a pace
// that neither spins nor delays a short exchange (docs/mpi-protocol.md).
// An MPI failure is kept in `run_ctx::mpi_error`, after which nothing more
// is sent or received.
#pragma once

#include "mpi/run.hpp"
#include "mpi/state.hpp"

#include <taskgroup/blob.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_state.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace taskgroup::detail::mpi {

/// Ok, or `errc::mpi_failed` with `what` and MPI's text for `rc`.
status check_mpi(int rc, const char* what);

/// Starts sending `bytes` (kept alive by `keep`) to `dest` with `tag`.
void send_bytes(const state_ptr& s, run_ctx& ctx, int dest, int tag, std::string_view bytes,
                std::shared_ptr<const void> keep);
/// Starts sending `bytes` to `dest` with `tag`.
void send(const state_ptr& s, run_ctx& ctx, int dest, int tag, std::string bytes);
/// Completes finished sends; true when any did.
bool progress_sends(run_ctx& ctx);
/// Gives up the sends to `dest`, a lost rank, so that the run can end
/// without them: their requests are freed and their bytes kept with the
/// session (MPI may still read them if the rank comes back).
void abandon_sends(const state_ptr& s, run_ctx& ctx, int dest);
/// Receives a message of `tag` from `source` (or MPI_ANY_SOURCE) into
/// `out` if one has arrived; `from` is its sender.
bool try_receive(const state_ptr& s, run_ctx& ctx, int source, int tag, std::string& out, int& from);

/// Receives the value of codec `tag`, `size` bytes sent apart from the
/// STATUS of rank `from`, into `reuse` when given (see take_reusable).
/// Errors: `errc::not_serializable` (no contiguous codec `tag`, or one that
/// cannot hold `size` bytes), `errc::mpi_failed`.
result<std::shared_ptr<const blob>> receive_detached(const state_ptr& s, int from, const std::string& tag,
                                                     std::uint64_t size, std::shared_ptr<const blob> reuse);
/// Receives and drops `count` values sent apart from a STATUS of `from`
/// that could not be decoded, so that none is left to be mistaken for a
/// later one.
void drain_detached(const state_ptr& s, int from, std::uint32_t count);

/// Paces a polling loop: right after any progress it only yields to other
/// work on the executor between polls (for `poll_spin`), so that a short
/// exchange takes microseconds; then it sleeps, from `poll_min` doubling to
/// `poll_max`, so that a waiting rank stays idle. A sleep ends early at
/// `until`, or when the local run ends (`ctx.wake`).
class pacer {
 public:
  explicit pacer(const mpi_options& o) : o_(o), interval_(o.poll_min), last_(clock_type::now()) {}

  boost::asio::awaitable<void> wait(run_ctx& ctx, bool progressed, std::optional<clock_type::time_point> until);

 private:
  const mpi_options& o_;
  std::chrono::microseconds interval_;
  clock_type::time_point last_;
};

/// Ends the MPI job (MPI_Abort), saying why on stderr.
[[noreturn, gnu::noinline, gnu::cold]] void abort_job(const state_ptr& s, const std::string& why);

/// True once the run was cancelled from outside.
inline bool outside_cancelled(const boost::asio::cancellation_state& cs) {
  return cs.cancelled() != boost::asio::cancellation_type::none;
}

}  // namespace taskgroup::detail::mpi
