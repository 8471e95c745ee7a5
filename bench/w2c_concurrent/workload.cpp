// Workload 2c: 4 concurrent substeps, each a net of 1,000 trivial ops, with
// a barrier per iteration, 1,000 iterations. The library must cost at most
// 1.2x raw Asio (co_spawn + ranged parallel_group per iteration) and beat a
// Caffe2-shaped executor (a fresh std::thread per substep per iteration) by
// at least 10x.
#include "w2c_concurrent/w2c_concurrent.hpp"

#include "common/registry.hpp"

namespace {

const tgbench::add_workload reg{{
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

}  // namespace
