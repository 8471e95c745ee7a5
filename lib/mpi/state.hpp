// Internal: what an MPI session keeps from run to run (its communicator,
// options, thread level, the last group described), shared by the parts of
// the protocol (lib/mpi/*.cpp). The public mpi_session::impl is this.
#pragma once

#include <taskgroup/mpi_session.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>

#include "model/task_access.hpp"
#include "session/metrics_book.hpp"
#include "session/strands.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace taskgroup::detail::mpi {

using clock_type = std::chrono::steady_clock;

/// `from` + `d`, saturated: at most `time_point::max()` (a timeout or grace
/// up to `milliseconds::max()` must not wrap into the past), and `from`
/// for `d <= 0` (such a deadline has passed).
inline clock_type::time_point deadline_after(clock_type::time_point from, std::chrono::milliseconds d) noexcept {
  if (d.count() <= 0) return from;
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::time_point::max() - from);
  return d >= room ? clock_type::time_point::max() : from + d;
}

class value_recycler;
struct group_description;

/// The first option of `o` out of its range (each duration within
/// `taskgroup::max_duration`; `poll_min`, `poll_max`, `grace` and
/// `heartbeat` above 0; `poll_spin` and `lost_after` at least 0; `poll_max`
/// at least `poll_min`), as `errc::invalid_task` naming the option and the
/// limit; nullopt when every one is in range.
std::optional<error> options_fault(const mpi_options& o);

struct session_state {
  /// Checks MPI (initialized, thread level, this thread), duplicates the
  /// communicator, then checks the options (options_fault); a failure is
  /// kept in `init_error` for every run.
  session_state(local_session& l, mpi_options o, bool threaded);
  ~session_state();
  session_state(const session_state&) = delete;
  session_state& operator=(const session_state&) = delete;

  /// Below MPI_THREAD_SERIALIZED only the thread that initialized MPI may
  /// call it: the error for `what` happening on another thread, if so.
  [[nodiscard]] std::optional<error> wrong_thread(const char* what) const;

  /// Where the nodes of `g` run. Errors: `errc::invalid_task` when the
  /// placement names a rank outside the job.
  [[nodiscard]] result<std::map<std::string, int>> place(const task_group& g) const;

  /// Frees the communicator (collective: every rank's session does it in
  /// the same order); called by ~mpi_session once no run is in flight.
  void free_comm() noexcept;

  // Owned by the mpi_session, which outlives every run (see its destructor).
  local_session* local;
  mpi_options options;
  // The session's strand in its two forms (detail::erased_strand): every
  // run starts through `strand_ex`.
  detail::erased_strand strands = detail::make_erased_strand(local->get_executor());
  const boost::asio::strand<boost::asio::any_io_executor>& strand = strands.strand;
  const boost::asio::any_io_executor& strand_ex = strands.executor;
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  int thread_level = MPI_THREAD_SINGLE;
  std::optional<error> init_error;
  // One run at a time, on the strand (run, async_run) or on the thread
  // blocked in the blocking run: what follows belongs to the run that set it.
  std::atomic<bool> running{false};
  // The runs this rank coordinated (rank 0's), by group label: the tasks
  // are counted by the local session, which runs this rank's part.
  metrics_book runs_book;
  // Set by ~mpi_session first: a run that starts later (queued by
  // async_run, its executor run after the session died) ends with
  // errc::session_closed before it touches `local` or the communicator.
  std::atomic<bool> closed{false};
  std::uint64_t runs = 0;

  // the blocking run's event loop, kept from run to run (a new one would make
  // its reactor again each time); one blocking caller at a time.
  std::mutex blocking_mutex;
  std::optional<boost::asio::io_context> blocking_loop;

  // The bytes of sends given up to a lost rank (transport's abandon_sends):
  // MPI may still read them, so they live as long as the session.
  std::vector<std::shared_ptr<const void>> abandoned;

  // Rank 0: storage of large received values, for the next ones.
  std::shared_ptr<value_recycler> recycler;

  // The last used group described: a used group can no longer change, so
  // its next runs skip placing and describing it again.
  std::shared_ptr<const group_description> described;

 private:
  void setup(bool threaded);
};

using state_ptr = std::shared_ptr<session_state>;

}  // namespace taskgroup::detail::mpi
