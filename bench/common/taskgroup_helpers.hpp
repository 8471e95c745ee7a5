// taskgroup_bench: helpers for the library's own contenders.
#pragma once

#include <taskgroup/taskgroup.hpp>

#include <benchmark/benchmark.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <utility>

namespace tgbench {

/// A net named `name` of `n` ops `Add(acc, one) -> acc` (int64 blobs).
inline taskgroup::net add_chain_net(std::string name, const std::string& acc, const std::string& one, std::size_t n) {
  taskgroup::net net(std::move(name));
  for (std::size_t i = 0; i < n; ++i) net.op("Add", {acc, one}, {acc});
  return net;
}

/// Runs `step` in `ws` with `co_await taskgroup::run_step(...)` on the
/// single-threaded `io` and returns its status once `io` runs out of work.
inline taskgroup::status run_step_on(boost::asio::io_context& io, const taskgroup::execution_step& step,
                                     const std::shared_ptr<taskgroup::workspace>& ws) {
  taskgroup::status result = taskgroup::fail(taskgroup::errc::no_result, "run_step did not complete");
  boost::asio::co_spawn(io, taskgroup::run_step(step, ws), [&result](std::exception_ptr e, taskgroup::status st) {
    result = e ? taskgroup::fail(taskgroup::errc::op_failed, "exception escaped run_step") : std::move(st);
  });
  io.run();
  io.restart();
  return result;
}

/// Runs `group` with `session.async_run(...)` on the single-threaded `io`
/// (the session's executor) and returns its result once `io` runs out of
/// work.
inline taskgroup::result<taskgroup::run_report> run_group_on(boost::asio::io_context& io,
                                                             taskgroup::local_session& session,
                                                             const taskgroup::task_group& group) {
  taskgroup::result<taskgroup::run_report> out = taskgroup::fail(taskgroup::errc::no_result, "run did not complete");
  session.async_run(group, [&out](boost::system::error_code, taskgroup::run_report r) {
    if (r.failure) {
      out = *r.failure;
    } else {
      out = std::move(r);
    }
  });
  io.run();
  io.restart();
  return out;
}

/// A session's blocking run (`run(group, options, ec)`) as a result: the
/// report, or the run's failure.
template <class Session>
taskgroup::result<taskgroup::run_report> run_sync(Session& session, const taskgroup::task_group& group,
                                                  taskgroup::run_options options = {}) {
  boost::system::error_code ec;
  taskgroup::run_report r = session.run(group, std::move(options), ec);
  if (r.failure) return *r.failure;
  return r;
}

/// Reports a failed status to Google Benchmark; true when `st` is ok.
inline bool check(benchmark::State& state, const taskgroup::status& st) {
  if (st) return true;
  state.SkipWithError(st.error().message.c_str());
  return false;
}

}  // namespace tgbench
