#include "start_run.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>

namespace taskgroup::cli {

void start_run(local_session& session, task_group group, run_options options, boost::asio::io_context& io,
               boost::asio::cancellation_slot slot, std::function<void(result<run_report>)> done) {
  auto as_result = [done = std::move(done)](boost::system::error_code, run_report r) {
    if (r.failure) {
      done(*r.failure);
    } else {
      done(std::move(r));
    }
  };
  session.async_run(std::move(group), std::move(options),
                    boost::asio::bind_cancellation_slot(slot, boost::asio::bind_executor(io, std::move(as_result))));
}

#ifdef TASKGROUP_HAVE_MPI
void start_run(mpi_session& session, task_group group, run_options options, boost::asio::io_context& io,
               boost::asio::cancellation_slot slot, std::function<void(result<run_report>)> done) {
  session.async_run(std::move(group),
                    boost::asio::bind_cancellation_slot(slot, boost::asio::bind_executor(io, std::move(done))),
                    options);
}
#endif

}  // namespace taskgroup::cli
