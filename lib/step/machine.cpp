#include "step/machine.hpp"

#include "detail/test_hooks.hpp"
#include "ops/net_run.hpp"

#include <boost/container/small_vector.hpp>

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
// is its fast paths, looked up once here for the whole loop. `ctx.stats`
// is not null.
template <bool Observed, class Stop>
loop_exit sync_loop(step_machine& m, const step_path* path, Stop stop, yield_clock& clock, const step_context& ctx,
                    status& failure) {
  boost::container::small_vector<fast_net_run, 4> runs;
  bool one_op_each = true;
  for (net_instance* inst : m.bound().nets) {
    if (runs.emplace_back(*inst).size() != 1) one_op_each = false;
  }
  auto ended = [&](const status& st) {
    if (st) [[likely]]
      return net_ran::any;
    failure = at(path, st.error());
    return net_ran::failed;
  };
  // Which loop runs, for the tests that hold the fast paths to their
  // promise (one relaxed load per entry, not per iteration).
  if (driver_hooks& hooks = test_driver_hooks(); hooks.counting.load(std::memory_order_relaxed)) [[unlikely]] {
    auto& counter = Observed ? hooks.observed_loops : one_op_each ? hooks.one_op_loops : hooks.net_loops;
    counter.fetch_add(1, std::memory_order_relaxed);
  }
  if constexpr (!Observed) {
    if (one_op_each) {
      // Nets of one op each (a loop's condition and body, say): each op's
      // fast path, copied here, is called without a loop over the net,
      // and says how it wrote when it ran.
      struct unit {
        op_kernel::fast_path path;
        net_ran ran;  // when the fast path has run
      };
      boost::container::small_vector<unit, 4> units;
      const blob* stop_blob = m.bound().stop;
      for (const fast_net_run& r : runs) {
        net_ran ran = net_ran::any;
        if (r.first_promise() == fast_writes::own_blobs_in_place) {
          ran = r.first_names(stop_blob) ? net_ran::in_place : net_ran::elsewhere;
        }
        units.push_back({r.first_path(), ran});
      }
      // The units read through a local pointer, not the vector: the ops
      // are handed pointers into it, so after each call the compiler would
      // read its header again.
      const unit* const us = units.data();
      auto one = [&, us](net_instance&, std::uint32_t u) {
        const unit& e = us[u];
        if (e.path.fn(e.path.state)) [[likely]] {
          // No unit says `failed`: the loop needs no test for it here.
          if (e.ran == net_ran::failed) __builtin_unreachable();
          return e.ran;
        }
        return ended(runs[u].after_decline());
      };
      // A loop's condition and body, or its body alone, as a loop over
      // that many nets known when compiled: unrolled, with the units in
      // registers (a two-net iteration takes a third less time).
      switch (m.unit_count()) {
        case 1: return m.run_nets<1>(stop, clock, ctx.stats, one);
        case 2: return m.run_nets<2>(stop, clock, ctx.stats, one);
        default: return m.run_nets(stop, clock, ctx.stats, one);
      }
    }
  }
  return m.run_nets(stop, clock, ctx.stats, [&](net_instance& inst, std::uint32_t u) {
    if constexpr (Observed) ctx.told_net_begins(inst);
    status st = runs[u]();
    if constexpr (Observed) ctx.net_ends(inst, st);
    return ended(st);
  });
}

}  // namespace

loop_exit run_sync_loop(step_machine& m, const step_path* path, const stop_query& stop, yield_clock& clock,
                        const step_context& ctx, status& failure) {
  // The loop keeps what it reads at every net in locals of its own
  // (run_nets_as); the machine, the clock and the counts are touched at
  // its boundaries only.
  step_stats none;
  const step_context counted{ctx.stats != nullptr ? ctx.stats : &none, ctx.observed, ctx.run};
  loop_exit exit;
  // Net events are the only ones a loop of nets tells: a run observed for
  // anything else runs the unobserved loop, fast paths included.
  if (ctx.told(observe::nets)) {
    exit = sync_loop<true>(m, path, stop, clock, counted, failure);
  } else if (stop.cs != nullptr && stop.flag == nullptr) {
    exit = sync_loop<false>(m, path, state_stop{stop.cs}, clock, counted, failure);
  } else if (stop.cs == nullptr && stop.flag != nullptr) {
    exit = sync_loop<false>(m, path, flag_stop{stop.flag}, clock, counted, failure);
  } else {
    exit = sync_loop<false>(m, path, stop, clock, counted, failure);
  }
  if (exit != loop_exit::bad_stop) return exit;
  failure = stop_blob_error(m.bound(), m.step(), path);
  return loop_exit::failed;
}

}  // namespace taskgroup::detail
