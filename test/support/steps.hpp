// Test harness for step trees: running them, counting ops, stuck ops.
#pragma once

#include <taskgroup/net.hpp>
#include <taskgroup/step_runner.hpp>
#include <taskgroup/workspace.hpp>

#include "run.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace taskgroup::test {

using i64 = std::int64_t;

/// Runs `s` in `ws` on a fresh io_context and returns its status.
inline status run_tree(const execution_step& s, const std::shared_ptr<workspace>& ws, run_step_options o = {}) {
  return run(run_step(s, ws, o));
}

/// A net of one op: `blob = value`.
inline net fill_int(const std::string& net_name, const std::string& blob, i64 value) {
  net n(net_name);
  n.op("ConstantFill", {}, {blob}, {{"value", value}});
  return n;
}
inline net fill_bool(const std::string& net_name, const std::string& blob, bool value) {
  net n(net_name);
  n.op("ConstantFill", {}, {blob}, {{"value", value}});
  return n;
}

/// A net of one op: `blob += 1` (blob must hold an int64).
inline net incr(const std::string& net_name, const std::string& blob) {
  net n(net_name);
  n.op("Iter", {}, {blob});
  return n;
}

/// A net of one binary op: `out = type(a, b)`.
inline net binary(const std::string& name, const std::string& type, const std::string& a, const std::string& b,
                  const std::string& out) {
  net n(name);
  n.op(type, {a, b}, {out});
  return n;
}

/// Counters shared with a `stuck` op.
struct stuck_counters {
  int started = 0;
  int cancelled = 0;
  int finished = 0;
};

/// A net whose one async op waits (practically) forever and records when
/// it is cancelled: the coroutine analogue of Caffe2's stuck op.
inline net stuck(const std::string& net_name, std::shared_ptr<stuck_counters> c) {
  net n(net_name);
  n.lambda("Stuck", {}, {}, [c](op_context&) -> boost::asio::awaitable<status> {
    ++c->started;
    boost::asio::steady_timer t(co_await boost::asio::this_coro::executor, std::chrono::hours(1));
    auto [ec] = co_await t.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    if (ec) {
      ++c->cancelled;
      co_return fail(errc::cancelled, "stuck op cancelled");
    }
    ++c->finished;
    co_return ok();
  });
  return n;
}

/// A net whose one op fails with `message`.
inline net failing(const std::string& net_name, const std::string& message) {
  net n(net_name);
  n.op("Fail", {}, {}, {{"message", message}});
  return n;
}

}  // namespace taskgroup::test
