// task_group::run: a group run on a session of its own, made on the
// awaiting coroutine's executor.
#include <taskgroup/session.hpp>
#include <taskgroup/task_group.hpp>

#include <boost/asio/this_coro.hpp>

namespace taskgroup {

namespace asio = boost::asio;

asio::awaitable<result<run_report>> task_group::run(run_options options) {
  local_session session(co_await asio::this_coro::executor);
  co_return co_await session.run(*this, options);
}

}  // namespace taskgroup
