#include "start_run.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>

namespace taskgroup::cli {

namespace {

// The command's callback takes the run's report, or its error.
auto as_result(std::function<void(result<run_report>)> done) {
  return [done = std::move(done)](boost::system::error_code, run_report r) {
    if (r.failure) {
      done(*r.failure);
    } else {
      done(std::move(r));
    }
  };
}

}  // namespace

void start_run(local_session& session, task_group group, run_options options, boost::asio::io_context& io,
               boost::asio::cancellation_slot slot, std::function<void(result<run_report>)> done) {
  session.async_run(
      std::move(group), std::move(options),
      boost::asio::bind_cancellation_slot(slot, boost::asio::bind_executor(io, as_result(std::move(done)))));
}

#ifdef TASKGROUP_HAVE_MPI
void start_run(mpi_session& session, task_group group, run_options options, boost::asio::io_context& io,
               boost::asio::cancellation_slot slot, std::function<void(result<run_report>)> done) {
  session.async_run(
      std::move(group), std::move(options),
      boost::asio::bind_cancellation_slot(slot, boost::asio::bind_executor(io, as_result(std::move(done)))));
}
#endif

}  // namespace taskgroup::cli
