// Test harness for step trees: running them, counting ops, stuck ops.
#pragma once

#include <taskgroup/net.hpp>
#include <taskgroup/plan.hpp>
#include <taskgroup/step_runner.hpp>
#include <taskgroup/task_group.hpp>
#include <taskgroup/workspace.hpp>

#include "run.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

using i64 = std::int64_t;

namespace taskgroup::test {

/// Checks that a valid tree of registered operators survives a plan round
/// trip: written, read back and written again, the JSON is the same.
inline void check_plan_round_trip(const execution_step& s,
                                  const operator_registry& registry = operator_registry::global()) {
  if (!s.validate()) return;
  task_group g;
  if (!g.add(task("round_trip", s))) return;
  auto text = write_plan(g);
  if (!text) return;  // inline operators: not serializable by design
  auto back = read_plan(std::string_view(text.value()), registry);
  INFO(text.value());
  REQUIRE(back);
  REQUIRE(write_plan(back.value()).value() == text.value());
}

/// Runs `s` in `ws` on a fresh io_context and returns its status; every
/// tree a test runs this way is also checked to round-trip as a plan.
inline status run_tree(const execution_step& s, const std::shared_ptr<workspace>& ws, run_step_options o = {}) {
  check_plan_round_trip(s, o.registry != nullptr ? *o.registry : operator_registry::global());
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
  // Atomic: the tasks of different nodes may run on different threads.
  std::atomic<int> started = 0;
  std::atomic<int> cancelled = 0;
  std::atomic<int> finished = 0;
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
