// taskgroup command: starting a session run whose completion comes back to
// the command's own io_context.
#pragma once

#include <taskgroup/run_report.hpp>
#include <taskgroup/session.hpp>
#include <taskgroup/task_group.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>

#include <functional>
#include <utility>

namespace taskgroup::cli {

/// Starts `group` on `session` (a `local_session` or an `mpi_session`,
/// through its `async_run`); `done` is called on `io`'s thread with the
/// run's report, whose `failure` is set when the run failed (its tasks
/// are listed whatever the end). Emitting on the signal behind `slot`
/// cancels the run.
template <class Session>
void start_run(Session& session, task_group group, run_options options, boost::asio::io_context& io,
               boost::asio::cancellation_slot slot, std::function<void(run_report)> done) {
  auto report = [done = std::move(done)](boost::system::error_code, run_report r) { done(std::move(r)); };
  session.async_run(std::move(group), std::move(options),
                    boost::asio::bind_cancellation_slot(slot, boost::asio::bind_executor(io, std::move(report))));
}

}  // namespace taskgroup::cli
