#include "step/machine.hpp"

namespace taskgroup::detail {

bool has_only_sync_nets(const program_step& n, const bound_step& b) noexcept {
  if (n.nets.empty()) return false;
  for (const net_instance* inst : b.nets) {
    if (inst->may_wait()) return false;
  }
  return true;
}

stop_verdict stop_verdict_slow(const blob& stop) noexcept {
  if (const bool* v = stop.try_get<bool>()) return *v ? stop_verdict::stop : stop_verdict::go_on;
  if (!stop.has_value()) return stop_verdict::go_on;  // not written yet: keep going
  return stop_verdict::bad_type;
}

error stop_blob_error(const bound_step& b, const program_step& n, const step_path* path) {
  return at(path, errc::type_mismatch,
            "should_stop_blob " + quote(*n.stop()) + " expects a scalar boolean, got " + b.stop->type_name());
}

loop_exit run_sync_loop(step_machine& machine, const step_path* path, const stop_query& stop_in, yield_clock& clock_in,
                        step_stats* stats, const step_events& events_in, status& failure) {
  // The loop works on copies that nothing else can reach, so that they
  // stay in registers across the nets' opaque calls; they are written back
  // when it leaves.
  step_machine m = machine;
  yield_clock clock = clock_in;
  const stop_query stop = stop_in;
  const step_events events = events_in;
  step_stats counts = stats != nullptr ? *stats : step_stats{};
  const loop_exit exit = m.run_nets(stop, clock, &counts, [&](net_instance& inst) {
    ++counts.net_runs;
    events.net_begins(inst);
    status st = inst.run_sync();
    events.net_ends(inst, st);
    if (!st) [[unlikely]] {
      failure = at(path, st.error());
      return false;
    }
    return true;
  });
  machine = m;
  clock_in = clock;
  if (stats != nullptr) *stats = counts;
  if (exit != loop_exit::bad_stop) return exit;
  failure = stop_blob_error(m.bound(), m.step(), path);
  return loop_exit::failed;
}

}  // namespace taskgroup::detail
