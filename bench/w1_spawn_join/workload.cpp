// Workload 1: scheduling overhead per task.
//
// A task group of N trivial tasks on one node, run by a local_session on a
// single-threaded io_context: spawn every task and join them all. Target:
// per-task cost at most 0.35x raw Asio's (co_spawn of
// awaitable<void> into a ranged parallel_group, wait_for_all), at 10k and
// at 100k tasks.
#include "w1_spawn_join/w1_spawn_join.hpp"

#include "common/registry.hpp"

namespace {

const tgbench::add_workload small{{
    .id = "w1_spawn_join_10k",
    .title = "task group of 10,000 trivial tasks (step = one empty net) on one node, run and joined",
    .unit = "ns/task",
    .unit_ns = 1.0,
    .baselines = {"asio", "tbb", "threads"},
    .targets = {{tgbench::target_kind::max_ratio, "asio", 0.35}},
    .order = 10,
}};

const tgbench::add_workload large{{
    .id = "w1_spawn_join_100k",
    .title = "task group of 100,000 trivial tasks (step = one empty net) on one node, run and joined",
    .unit = "ns/task",
    .unit_ns = 1.0,
    .baselines = {"asio", "tbb", "threads"},
    .targets = {{tgbench::target_kind::max_ratio, "asio", 0.35}},
    .order = 11,
}};

// The cost of a retry policy that never retries: the 10k group with a
// 3-attempt policy on every task, every first attempt succeeding, against
// the same group without policies in the same process.
const tgbench::add_workload retry_ok{{
    .id = "w1_retry_ok",
    .title = "w1_spawn_join_10k's group with a 3-attempt retry policy on every task, each first attempt succeeding",
    .unit = "ns/task",
    .unit_ns = 1.0,
    .baselines = {"no_policy"},
    .targets = {{tgbench::target_kind::max_difference, "no_policy", 20.0}},
    .order = 12,
}};

}  // namespace
