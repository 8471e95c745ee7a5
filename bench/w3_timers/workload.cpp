// Workload 3: I/O-bound fan-out.
//
// 10,000 tasks, each awaiting a 1 ms timer, all started at once and joined;
// the figure is the wall time of the whole run. Targets: at
// most 1.3x raw Asio, and at least 30x faster than a thread per task.
#include "w3_timers/w3_timers.hpp"

#include "common/registry.hpp"

namespace {

const tgbench::add_workload reg{{
    .id = "w3_timers",
    .title = "10,000 tasks each awaiting a 1 ms timer (ours: a net with Sleep(ms=1)), run and joined",
    .unit = "ms/run",
    .unit_ns = 1e6,
    .baselines = {"asio", "threads"},
    .targets =
        {
            {tgbench::target_kind::max_ratio, "asio", 1.3},
            {tgbench::target_kind::min_inverse, "threads", 30.0},
        },
    .order = 30,
}};

}  // namespace
