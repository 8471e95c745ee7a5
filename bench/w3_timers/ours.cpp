// w3_timers / ours: a local_session on a single-threaded io_context runs a
// task group of 10,000 (PRIVATE) tasks on node "n", each task's step a net
// with one built-in Sleep op (ms = 1); one benchmark iteration = one
// `session.async_run(group)`.
#include "w3_timers/w3_timers.hpp"

#include "common/registry.hpp"
#include "common/taskgroup_helpers.hpp"

#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <string>

namespace {

using namespace tgbench::w3;

void run(benchmark::State& state) {
  boost::asio::io_context io(1);
  taskgroup::local_session session(io.get_executor());
  taskgroup::task_group g;
  for (std::size_t i = 0; i < tasks; ++i) {
    std::string name = "t";
    name += std::to_string(i);
    taskgroup::net n(name);
    n.op("Sleep", {}, {}, {{"ms", std::int64_t{wait.count()}}});
    (void)g.add(taskgroup::task(name, taskgroup::step(name).add_net(std::move(n))), taskgroup::node("n"));
  }
  if (auto r = tgbench::run_group_on(io, session, g); !r || !r.value().ok()) {  // warm-up, compiles the group
    state.SkipWithError("w3 ours: warm-up run failed");
    return;
  }
  for (auto _ : state) {
    auto r = tgbench::run_group_on(io, session, g);
    if (!r || !r.value().ok()) [[unlikely]] {
      state.SkipWithError(r ? "w3 ours: a task did not succeed" : r.error().message.c_str());
      return;
    }
  }
}

const tgbench::add_contender reg{{
    .workload = "w3_timers",
    .name = tgbench::ours,
    .what = "session.async_run(group): 10,000 PRIVATE tasks on one node, each a net with Sleep(ms=1)",
    .units_per_iteration = 1.0,
    .fn = run,
}};

}  // namespace
