// taskgroup command: starting a session run whose completion comes back to
// the command's own io_context.
#pragma once

#include <taskgroup/run_report.hpp>
#include <taskgroup/session.hpp>
#include <taskgroup/task_group.hpp>
#ifdef TASKGROUP_HAVE_MPI
#include <taskgroup/mpi_session.hpp>
#endif

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>

#include <functional>

namespace taskgroup::cli {

/// Starts `group` on `session` (`local_session::async_run`); `done` is
/// called on `io`'s thread with the result. Emitting on the signal behind
/// `slot` cancels the run.
void start_run(local_session& session, task_group group, run_options options, boost::asio::io_context& io,
               boost::asio::cancellation_slot slot, std::function<void(result<run_report>)> done);

#ifdef TASKGROUP_HAVE_MPI
/// Same, on an MPI session (`mpi_session::async_run`).
void start_run(mpi_session& session, task_group group, run_options options, boost::asio::io_context& io,
               boost::asio::cancellation_slot slot, std::function<void(result<run_report>)> done);
#endif

}  // namespace taskgroup::cli
