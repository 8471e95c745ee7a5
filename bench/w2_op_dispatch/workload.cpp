// Workload 2: CPU-light op dispatch.
//
// A net of 1,000 trivial Add ops on int64 blobs (acc = acc + one), bound
// once in a workspace and run synchronously 1,000 times, against a plain
// loop of virtual calls over ops holding pre-resolved pointers. The goal of
// the design ("no suspension inside a net"): at most 2 ns per op over the
// virtual-call loop.
#include "w2_op_dispatch/w2_op_dispatch.hpp"

#include "common/registry.hpp"

namespace {

const tgbench::add_workload reg{{
    .id = "w2_op_dispatch",
    .title = "net of 1,000 trivial Add ops (int64), instantiated once, run_sync() x 1,000",
    .unit = "ns/op",
    .unit_ns = 1.0,
    .baselines = {"virtual_loop"},
    .targets = {{tgbench::target_kind::max_difference, "virtual_loop", 2.0}},
    .order = 20,
}};

}  // namespace
