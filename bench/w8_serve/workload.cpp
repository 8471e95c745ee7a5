// Workload 8: serving one compiled group.
//
// w8_serve: the HTTP example's group (16 tasks on 4 nodes, each reading
// its node's fed int64 `n` and writing a declared output), built once and
// run 64 at a time on a 2-thread pool, each run with distinct feeds and
// its outputs checked. The figure is the CPU time of the whole process per
// run (both pool threads and the benchmark thread), so that idle threads
// do not count and busy ones do. Target: at most 1.5x the same work
// hand-written in Asio (co_spawn on 4 strands + a ranged parallel group per
// run, 64 runs in flight on a 2-thread pool).
//
// w8_empty_run: the fixed cost of one run, one after another: a one-task
// group (one empty net) on a local_session over a 1-thread io_context,
// each run awaited before the next starts (real time). Targets: at most
// 2.5x its baseline in the same process, an empty coroutine co_spawned on
// a strand and awaited (one hop to a node and back, the least an
// asynchronous run on a node can cost), and at most 2 µs per run.
#include "w8_serve/w8_serve.hpp"

#include "common/registry.hpp"

namespace {

const tgbench::add_workload serve{{
    .id = "w8_serve",
    .title = "16 tasks on 4 nodes fed an int64 each, compiled once, 64 runs in flight on a 2-thread pool",
    .unit = "us CPU/run",
    .unit_ns = 1'000.0,
    .baselines = {"asio"},
    .targets = {{tgbench::target_kind::max_ratio, "asio", 1.5}},
    .order = 80,
    .counter = tgbench::w8::cpu_counter,
}};

// What the session's metrics cost a served run: w8_serve with counting on
// against the same with it off (local_session::enable_metrics), their
// repetitions alternated in one process. Target: at most 1.03x.
const tgbench::add_workload serve_metrics{{
    .id = "w8_serve_metrics",
    .title = "w8_serve with the session's metrics on, against off, repetitions alternated in one process",
    .unit = "us CPU/run",
    .unit_ns = 1'000.0,
    .baselines = {"metrics_off"},
    .targets = {{tgbench::target_kind::max_ratio, "metrics_off", 1.03}},
    .order = 82,
    .counter = tgbench::w8::cpu_counter,
    .alternate = true,
}};

const tgbench::add_workload empty_run{{
    .id = "w8_empty_run",
    .title = "runs of a one-task group (one empty net), one after another, local_session on a 1-thread io_context",
    .unit = "us/run",
    .unit_ns = 1'000.0,
    .baselines = {"asio"},
    .targets = {{tgbench::target_kind::max_ratio, "asio", 2.5}, {tgbench::target_kind::max_value, "", 2.0}},
    .order = 81,
}};

}  // namespace
