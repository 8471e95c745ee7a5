// w1_spawn_join_{10k,100k} / ours: a local_session on a single-threaded
// io_context runs a task group of N tasks on node "n", each task's step one
// empty net; one benchmark iteration = one `session.async_run(group)`.
// The group is built (and compiled, on the warm-up run) once.
//
// ours: the default workspace type (PRIVATE: every task runs in its own
// child workspace, where its net is instantiated). ours_global: the same
// group with workspace_type::global (the nets are bound in the node
// workspace on the warm-up run), informational. w1_retry_ok: the 10k
// group with a 3-attempt retry policy on every task (ours) and without
// (no_policy).
#include "w1_spawn_join/w1_spawn_join.hpp"

#include "common/registry.hpp"
#include "common/taskgroup_helpers.hpp"

#include <boost/asio/io_context.hpp>

#include <optional>
#include <string>
#include <utility>

namespace {

using namespace tgbench::w1;

taskgroup::task_group make_group(std::size_t n, std::optional<taskgroup::workspace_type> type, int attempts = 1) {
  taskgroup::task_group g(type);
  taskgroup::retry_policy policy;
  policy.max_attempts = attempts;
  for (std::size_t i = 0; i < n; ++i) {
    std::string name = "t";
    name += std::to_string(i);
    taskgroup::task t(name, taskgroup::step(name).add_net(taskgroup::net(name)));
    if (attempts > 1) t.retry(policy);
    (void)g.add(std::move(t), taskgroup::node("n"));
  }
  return g;
}

bool check_run(benchmark::State& state, const taskgroup::result<taskgroup::run_report>& r, std::size_t n) {
  if (!r) {
    state.SkipWithError(r.error().message.c_str());
    return false;
  }
  if (!r.value().ok() || r.value().tasks.size() != n) {
    state.SkipWithError("w1 ours: a task did not succeed");
    return false;
  }
  return true;
}

void run(benchmark::State& state, std::size_t n, std::optional<taskgroup::workspace_type> type, int attempts = 1) {
  boost::asio::io_context io(1);
  taskgroup::local_session session(io.get_executor());
  const taskgroup::task_group g = make_group(n, type, attempts);
  if (!check_run(state, tgbench::run_group_on(io, session, g), n)) return;  // warm-up, compiles the group
  for (auto _ : state) {
    auto r = tgbench::run_group_on(io, session, g);
    if (!r || !r.value().ok()) [[unlikely]] {
      check_run(state, r, n);
      return;
    }
  }
}

const tgbench::add_contender small{{
    .workload = "w1_spawn_join_10k",
    .name = tgbench::ours,
    .what = "session.async_run(group): 10,000 PRIVATE tasks on one node, each step one empty net",
    .units_per_iteration = static_cast<double>(small_n),
    .fn = [](benchmark::State& state) { run(state, small_n, std::nullopt); },
}};

const tgbench::add_contender large{{
    .workload = "w1_spawn_join_100k",
    .name = tgbench::ours,
    .what = "session.async_run(group): 100,000 PRIVATE tasks on one node, each step one empty net",
    .units_per_iteration = static_cast<double>(large_n),
    .fn = [](benchmark::State& state) { run(state, large_n, std::nullopt); },
}};

const tgbench::add_contender small_global{{
    .workload = "w1_spawn_join_10k",
    .name = "ours_global",
    .what = "the same group with workspace_type::global (no child workspace per task)",
    .units_per_iteration = static_cast<double>(small_n),
    .fn = [](benchmark::State& state) { run(state, small_n, taskgroup::workspace_type::global); },
}};

const tgbench::add_contender large_global{{
    .workload = "w1_spawn_join_100k",
    .name = "ours_global",
    .what = "the same group with workspace_type::global (no child workspace per task)",
    .units_per_iteration = static_cast<double>(large_n),
    .fn = [](benchmark::State& state) { run(state, large_n, taskgroup::workspace_type::global); },
}};

const tgbench::add_contender retry_ok{{
    .workload = "w1_retry_ok",
    .name = tgbench::ours,
    .what =
        "session.async_run(group): 10,000 PRIVATE tasks, each with a 3-attempt retry policy, each step one empty net",
    .units_per_iteration = static_cast<double>(small_n),
    .fn = [](benchmark::State& state) { run(state, small_n, std::nullopt, 3); },
}};

const tgbench::add_contender retry_ok_none{{
    .workload = "w1_retry_ok",
    .name = "no_policy",
    .what = "the same group without retry policies (w1_spawn_join_10k's ours)",
    .units_per_iteration = static_cast<double>(small_n),
    .fn = [](benchmark::State& state) { run(state, small_n, std::nullopt); },
}};

}  // namespace
