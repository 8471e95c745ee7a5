// Workload 7o (offload): 8 tasks of about 50 ms of CPU each on one node,
// offloaded (the built-in Hash). Three figures:
// - w7_offload_parallel: the group on a compute pool of 2 threads against
//   1 thread (the session itself on 1 thread). Target: >= 1.8x.
// - w7_offload_heartbeat: the p99 lateness of a 1 ms heartbeat timer on
//   the session's io_context (2 threads) while the group runs, its tasks
//   on 2 nodes, offloaded to the default compute executor (2 threads here). Target: <= 2 ms; the baseline runs the same
//   loop on the node strands, which then hold both I/O threads.
// - w7_offload_op: the cost of offloading a trivial op (per op) against a
//   plain asio::post to a pool and back to a strand. Reported, no target.
#include "w7_offload/w7_offload.hpp"

#include "common/registry.hpp"

namespace w7_offload {

std::string text() {
  std::string t(4096, '\0');
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<char>('a' + i % 26);
  return t;
}

std::string node_name(int j) { return "cpu" + std::to_string(j); }

taskgroup::task_group burn_group(bool on_strand, int nodes) {
  taskgroup::task_group g;
  for (int j = 0; j < nodes; ++j) (void)g.input<std::string>("text", taskgroup::node(node_name(j)));
  for (int i = 0; i < 8; ++i) {
    const std::string h = "h" + std::to_string(i);
    taskgroup::net n("burn" + std::to_string(i));
    if (on_strand) {
      n.lambda("HashOnStrand", {"text"}, {h}, [](taskgroup::op_context& ctx) -> taskgroup::status {
        const std::string& s = ctx.input<std::string>(0);
        std::uint64_t x = 0xcbf29ce484222325ULL;
        for (std::int64_t r = 0; r < rounds; ++r) {
          for (const char c : s) {
            x ^= static_cast<unsigned char>(c);
            x *= 0x100000001b3ULL;
          }
        }
        ctx.set_output(0, static_cast<std::int64_t>(x));
        return taskgroup::ok();
      });
    } else {
      n.op("Hash", {"text"}, {h}, {{"rounds", rounds}});
    }
    (void)g.add(taskgroup::task("t" + std::to_string(i), taskgroup::step("burn").add_net(n)),
                taskgroup::node(node_name(i % nodes)));
  }
  return g;
}

taskgroup::feeds burn_feeds(int nodes) {
  taskgroup::feeds f;
  for (int j = 0; j < nodes; ++j) f.set(node_name(j), "text", text());
  return f;
}

taskgroup::task_group trivial_group(std::int64_t n) {
  taskgroup::net net("trivial");
  taskgroup::op_def d{"ConstantFill", {}, {"x"}, {{"value", std::int64_t{1}}}, nullptr};
  d.offload = true;
  net.add(d);
  taskgroup::task_group g;
  (void)g.add(taskgroup::task("t", taskgroup::step("loop").add_net(net).iterations(n)));
  return g;
}

}  // namespace w7_offload

namespace {

const tgbench::add_workload parallel{{
    .id = "w7_offload_parallel",
    .title = "8 offloaded Hash ops of ~50 ms on one node, compute pool of 2 threads against 1 (session on 1 thread)",
    .unit = "ms/run",
    .unit_ns = 1e6,
    .baselines = {"one_thread"},
    .targets = {{tgbench::target_kind::min_inverse, "one_thread", 1.8}},
    .order = 75,
}};

const tgbench::add_workload heartbeat{{
    .id = "w7_offload_heartbeat",
    .title = "p99 lateness of a 1 ms heartbeat timer on the I/O context (2 threads) while the group (on 2 nodes) runs",
    .unit = "ms",
    .unit_ns = 1.0,
    .baselines = {"on_strand"},
    .targets = {{tgbench::target_kind::max_value, "", 2.0}},
    .order = 76,
    .counter = "p99_late_ms",
}};

const tgbench::add_workload op_cost{{
    .id = "w7_offload_op",
    .title = "one trivial op offloaded (a loop step of 1,000 iterations) against asio::post to a pool and back",
    .unit = "us/op",
    .unit_ns = 1e3,
    .baselines = {"asio_post"},
    .targets = {},
    .order = 77,
}};

}  // namespace
