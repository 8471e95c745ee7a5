// local_session::async_describe: every run admission holds, and where the
// tasks of those in flight stand, asked of their nodes at once.
#include "session/answer_wait.hpp"
#include "session/run.hpp"

#include "detail/errors.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace taskgroup {

namespace asio = boost::asio;

namespace detail {

namespace {

std::chrono::microseconds age_micros(std::chrono::nanoseconds d) {
  return std::max(std::chrono::duration_cast<std::chrono::microseconds>(d), std::chrono::microseconds{0});
}

}  // namespace

// Each run in flight answers within run_probe::answer_within: where_tasks
// waits no longer for a node.
asio::awaitable<session_description> describe_runs(std::vector<admission::seen_run> seen, bool closed) {
  const asio::any_io_executor coord = co_await asio::this_coro::executor;
  session_description d;
  d.closed = closed;
  d.runs.resize(seen.size());
  const auto steady_now = std::chrono::steady_clock::now();
  const auto system_now = std::chrono::system_clock::now();
  auto ask = std::make_shared<answer_wait>(coord);
  for (std::size_t k = 0; k < seen.size(); ++k) {
    const run_state& rs = *seen[k].rs;
    run_description& r = d.runs[k];
    // Set before admission saw the run, never changed after.
    r.trace_id = rs.scope.trace.trace_id_hex();
    r.group = std::string(rs.scope.group);
    r.priority = seen[k].priority;
    if (seen[k].queued) {
      r.phase = run_phase::queued;
      r.age = age_micros(steady_now - seen[k].arrived);
      continue;
    }
    r.phase = run_phase::running;
    const std::int64_t since = rs.in_view_since.load(std::memory_order_acquire);
    if (since == 0) continue;  // admitted, its nodes not started yet
    r.age = age_micros(system_now - std::chrono::system_clock::time_point(std::chrono::system_clock::duration(since)));
    ask->expect();
    asio::co_spawn(
        coord, where_tasks(seen[k].rs), [ask, &d, k](const std::exception_ptr& e, std::vector<std::string> lines) {
          d.runs[k].waiting = e ? std::vector<std::string>{error_from_exception(e).message} : std::move(lines);
          ask->answered();
        });
  }
  // Every run answers within answer_within; this frame (and `d`) lives
  // until the last has.
  co_await ask->wait(std::chrono::steady_clock::time_point::max());
  co_return d;
}

}  // namespace detail

}  // namespace taskgroup
