// Workload 2c: 4 concurrent substeps, each a net of 1,000 trivial ops, with
// a barrier per iteration, 1,000 iterations. The library must cost at most
// 1.2x raw Asio (co_spawn + ranged parallel_group per iteration) and beat a
// Caffe2-shaped executor (a fresh std::thread per substep per iteration) by
// at least 10x.
//
// w2c_sched is the same shape with one op per net: what an iteration costs
// in scheduling alone (4 spawns and a barrier). It has no target; it tells
// how much of w2c_concurrent is op dispatch and how much is scheduling.
#include "w2c_concurrent/w2c_concurrent.hpp"

#include "common/registry.hpp"

namespace {

const tgbench::add_workload concurrent{{
    .id = "w2c_concurrent",
    .title = "step of 4 concurrent substeps x net of 1,000 Add ops, iterations(1000), 1-thread io_context",
    .unit = "us/iter",
    .unit_ns = 1'000.0,
    .baselines = {"asio", "tbb", "threads"},
    .targets =
        {
            {tgbench::target_kind::max_ratio, "asio", 1.2},
            {tgbench::target_kind::min_inverse, "threads", 10.0},
        },
    .order = 21,
}};

const tgbench::add_workload sched{{
    .id = "w2c_sched",
    .title = "as w2c_concurrent with 1 op per net (scheduling only: 4 concurrent substeps + barrier per iteration)",
    .unit = "us/iter",
    .unit_ns = 1'000.0,
    .baselines = {"asio", "tbb", "threads"},
    .targets = {},
    .order = 22,
}};

}  // namespace
