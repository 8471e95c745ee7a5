#include "step/machine.hpp"

namespace taskgroup::detail {

bool has_only_sync_nets(const program_step& n, const bound_step& b) noexcept {
  if (n.nets.empty()) return false;
  for (const net_instance* inst : b.nets) {
    if (inst->has_async()) return false;
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

loop_exit run_sync_loop(step_machine& m, const step_path* path, const stop_query& stop, yield_clock& clock,
                        step_stats* stats, const step_events& events, status& failure) {
  for (;;) {
    switch (m.next(stop, clock, stats)) {
      case step_machine::action::run_net: {
        net_instance& inst = m.net();
        if (stats != nullptr) ++stats->net_runs;
        events.net_begins(inst);
        status st = inst.run_sync();
        events.net_ends(inst, st);
        if (!st) [[unlikely]] {
          failure = at(path, st.error());
          return loop_exit::failed;
        }
        m.unit_ended();
        break;
      }
      case step_machine::action::yield: return loop_exit::yield;
      case step_machine::action::done: return loop_exit::end;
      case step_machine::action::bad_stop:
        failure = stop_blob_error(m.bound(), m.step(), path);
        return loop_exit::failed;
      case step_machine::action::cancelled: return loop_exit::cancelled;
      case step_machine::action::run_child:
      case step_machine::action::run_concurrent:
        // Not for a net step (has_only_sync_nets).
        failure = at(path, errc::invalid_step, "internal: a synchronous loop met a step with children");
        return loop_exit::failed;
    }
  }
}

}  // namespace taskgroup::detail
