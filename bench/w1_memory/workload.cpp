// Workload 1m: memory per pending task.
//
// 100,000 tasks started at once, each blocked on a long timer; the figure is
// the growth of the process's peak RSS (VmHWM, reset through
// /proc/self/clear_refs just before the run starts) until every task is
// pending, divided by the number of tasks. Each repetition runs in a fresh
// process (`taskgroup_bench --probe ...`), so the allocator starts empty.
// Target: at most 1 KiB per pending task.
#include "common/registry.hpp"

namespace {

const tgbench::add_workload reg{{
    .id = "w1_memory",
    .title = "peak RSS growth per pending task: 100,000 tasks each blocked on a 1 h timer (fresh process each)",
    .unit = "B/task",
    .unit_ns = 1.0,
    .baselines = {"asio"},
    .targets = {{tgbench::target_kind::max_value, "", 1024.0}},
    .order = 12,
    .counter = "bytes_per_task",
}};

}  // namespace
