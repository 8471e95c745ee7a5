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

namespace {

// The loop with or without an observer to tell: without one, a net's run
// is its fast paths and two counts.
template <bool Observed>
loop_exit sync_loop(step_machine& m, const step_path* path, const stop_query& stop, yield_clock& clock,
                    step_stats& counts, const step_events& events, status& failure) {
  return m.run_nets(stop, clock, &counts, [&](net_instance& inst) {
    ++counts.net_runs;
    if constexpr (Observed) events.net_begins(inst);
    status st = inst.run_sync();
    if constexpr (Observed) events.net_ends(inst, st);
    if (!st) [[unlikely]] {
      failure = at(path, st.error());
      return false;
    }
    return true;
  });
}

}  // namespace

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
  const loop_exit exit = events.o != nullptr ? sync_loop<true>(m, path, stop, clock, counts, events, failure)
                                             : sync_loop<false>(m, path, stop, clock, counts, events, failure);
  machine = m;
  clock_in = clock;
  if (stats != nullptr) *stats = counts;
  if (exit != loop_exit::bad_stop) return exit;
  failure = stop_blob_error(m.bound(), m.step(), path);
  return loop_exit::failed;
}

}  // namespace taskgroup::detail
