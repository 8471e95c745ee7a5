// task_group::async_run: a group run on a session of its own, made on the
// completion handler's executor.
#include <taskgroup/session.hpp>
#include <taskgroup/task_group.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>

#include <memory>
#include <utility>

namespace taskgroup {

namespace asio = boost::asio;

void task_group::run_on_own_session(task_group g, run_options options, const asio::any_io_executor& ex,
                                    detail::run_completion_ptr done) {
  auto session = std::make_shared<local_session>(ex);
  // The caller's cancellation slot reaches the run through this handler;
  // the session is dropped once the run has ended.
  const asio::cancellation_slot slot = done->slot();
  local_session& s = *session;
  s.async_run(std::move(g), std::move(options),
              asio::bind_cancellation_slot(slot, [session = std::move(session), done = std::move(done)](
                                                     boost::system::error_code, run_report report) mutable {
                // It frees itself.
                done.release()->complete(std::make_shared<run_report>(std::move(report)));
              }));
}

}  // namespace taskgroup
