// Workload 5: loops and stop conditions. A step looping
// 1,000,000 times over a one-op net, counted (iterations(n)) and driven by
// a stop blob (nets [GE(iter, limit) -> stop, Add(iter, one) -> iter]).
// Targets: at most 2.5x a plain loop calling the same virtual op(s) in the
// same run, and at most 50 ns per iteration.
#include "common/registry.hpp"

namespace {

const tgbench::add_workload counted{{
    .id = "w5_loop",
    .title = "step iterations(1,000,000) over a one-op net (Add), 1-thread io_context",
    .unit = "ns/iter",
    .unit_ns = 1.0,
    .baselines = {"virtual_loop"},
    .targets = {{tgbench::target_kind::max_ratio, "virtual_loop", 2.5}, {tgbench::target_kind::max_value, "", 50.0}},
    .order = 50,
}};

const tgbench::add_workload stop{{
    .id = "w5_loop_stop",
    .title = "step driven by should_stop_blob, nets [GE(iter, limit) -> stop, Add(iter, one) -> iter], 1,000,000 "
             "iterations",
    .unit = "ns/iter",
    .unit_ns = 1.0,
    .baselines = {"virtual_loop"},
    .targets = {{tgbench::target_kind::max_ratio, "virtual_loop", 2.5}, {tgbench::target_kind::max_value, "", 50.0}},
    .order = 51,
}};

}  // namespace
