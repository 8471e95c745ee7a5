// w1_memory / ours: a local_session on a single-threaded io_context starts a
// task group of 100,000 (PRIVATE) tasks on node "n", each task's step a net
// with one Sleep op of 1 h. The io_context is polled until no handler is
// ready (every task waits on its timer); the figure is the peak RSS growth
// from just before `session.run` was spawned (the group is already built)
// divided by 100,000. The run is then cancelled and must end cancelled.
#include "w1_memory/probe.hpp"
#include "w1_spawn_join/w1_spawn_join.hpp"

#include "common/memory.hpp"
#include "common/registry.hpp"

#include <taskgroup/taskgroup.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace {

using tgbench::w1::memory_n;

// With `compiled`, the session has compiled the group before the meter
// starts (a run limited to no node: it compiles and runs nothing), as it
// has for every run of a group but the first: the figure is then what a
// pending task holds, without the group's compiled form (kept by the
// session across runs).
double probe(bool compiled) {
  boost::asio::io_context io(1);
  taskgroup::local_session session(io.get_executor());
  taskgroup::task_group g;
  for (std::size_t i = 0; i < memory_n; ++i) {
    std::string name = "t";
    name += std::to_string(i);
    taskgroup::net n(name);
    n.op("Sleep", {}, {}, {{"ms", tgbench::w1m::long_wait_ms}});
    (void)g.add(taskgroup::task(name, taskgroup::step(name).add_net(std::move(n))), taskgroup::node("n"));
  }
  if (compiled) {
    taskgroup::run_options none;
    none.only_nodes = std::vector<std::string>{};
    bool ran = false;
    session.async_run(g, none, [&](boost::system::error_code ec, const taskgroup::run_report&) { ran = !ec; });
    io.run();
    io.restart();
    if (!ran) {
      std::printf("the compiling run failed\n");
      return std::numeric_limits<double>::quiet_NaN();
    }
  }
  boost::asio::cancellation_signal cancel;
  bool done = false;
  bool cancelled = false;
  const tgbench::rss_meter meter;
  session.async_run(g, boost::asio::bind_cancellation_slot(
                           cancel.slot(), [&](boost::system::error_code ec, const taskgroup::run_report&) {
                             done = true;
                             cancelled = ec == std::errc::operation_canceled;
                           }));
  while (io.poll() > 0) {
  }
  const double per_task = meter.growth() / static_cast<double>(memory_n);
  if (done) {
    std::printf("the run ended before it was cancelled\n");
    return std::numeric_limits<double>::quiet_NaN();
  }
  cancel.emit(boost::asio::cancellation_type::terminal);
  io.run();
  if (!cancelled) {
    std::printf("the cancelled run did not end cancelled\n");
    return std::numeric_limits<double>::quiet_NaN();
  }
  return per_task;
}

const tgbench::add_probe reg_probe{{.name = "w1_memory/ours", .fn = [] { return probe(false); }}};
const tgbench::add_probe reg_compiled_probe{{.name = "w1_memory/ours_compiled", .fn = [] { return probe(true); }}};

const tgbench::add_contender reg{{
    .workload = "w1_memory",
    .name = tgbench::ours,
    .what = "session.async_run(group) of 100,000 PRIVATE tasks, each a net with Sleep(1 h), polled until all wait",
    .fn = [](benchmark::State& state) { tgbench::w1m::run_probe_benchmark(state, "w1_memory/ours"); },
    .iterations = 1,
}};

const tgbench::add_contender reg_compiled{{
    .workload = "w1_memory",
    .name = "ours_compiled",
    .what = "the same, the group compiled by an earlier run (what each pending task holds)",
    .fn = [](benchmark::State& state) { tgbench::w1m::run_probe_benchmark(state, "w1_memory/ours_compiled"); },
    .iterations = 1,
}};

}  // namespace
