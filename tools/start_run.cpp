#include "start_run.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>

namespace taskgroup::cli {

void start_run(local_session& session, task_group group, run_options options, boost::asio::io_context& io,
               boost::asio::cancellation_slot slot, std::function<void(result<run_report>)> done) {
  session.async_run(std::move(group),
                    boost::asio::bind_cancellation_slot(slot, boost::asio::bind_executor(io, std::move(done))),
                    options);
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
