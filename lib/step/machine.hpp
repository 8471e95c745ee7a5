// Internal: the step machine. Caffe2's rules for one execution of a step
// (docs/semantics.md, "Execution steps") are decided here and nowhere else: when an iteration
// starts (num_iter, only_once), the stop check after each net, each
// sequential child and each concurrent iteration, what an iteration start
// counts, when a long loop yields, when the run's stop request is seen,
// and which observer events an execution emits, and when.
//
// A driver holds one `step_machine` per step execution it runs. It tells
// the machine the execution begins (`begins`), asks `next()` what to do:
// run a net, execute a child, run the iteration's children concurrently,
// yield, or stop (done, failed, cancelled); it reports each net's or
// child's end back (`net_ended`, `unit_ended`), and the machine decides
// again; last it tells the execution's end (`ends`). The machine sends
// the observer events and counts the task's net runs and iterations on
// the way (`step_context`): a driver never tells the observer of an
// execution or of a net the machine hands out (the coroutine driver tells
// the nets of a step's concurrent instances, which no machine runs one by
// one, through the same `step_context` functions).
// The coroutine driver (coroutine_driver.cpp) and the frame-free driver
// (frame_free_driver.cpp) differ only in how they carry out an action:
// awaiting, or starting a callback-form op and resuming from its
// completion. Neither restates a rule.
//
// Threading: a machine is used on the strand that runs its step.
#pragma once

#include "step/program.hpp"
#include "step/runner.hpp"
#include "step/yield_clock.hpp"

#include <taskgroup/step_runner.hpp>

#include <boost/asio/cancellation_state.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>

namespace taskgroup::detail {

/// Whether the run has been asked to stop (cancelled from outside, or a
/// sibling failed): the coroutine driver reads its coroutine's
/// cancellation state, the frame-free driver its host's flag.
struct stop_query {
  const boost::asio::cancellation_state* cs = nullptr;
  const bool* flag = nullptr;
  [[nodiscard]] bool requested() const noexcept {
    return (cs != nullptr && cs->cancelled() != boost::asio::cancellation_type::none) || (flag != nullptr && *flag);
  }
};

/// A `stop_query` known to hold only its cancellation state, or only its
/// flag: what a hot loop asks once per iteration.
struct state_stop {
  const boost::asio::cancellation_state* cs;
  [[nodiscard]] bool requested() const noexcept { return cs->cancelled() != boost::asio::cancellation_type::none; }
};
struct flag_stop {
  const bool* flag;
  [[nodiscard]] bool requested() const noexcept { return *flag; }
};

/// What the machines of one task's run report to: the task's counts
/// (`step_stats`, may be null) and the run's observer, told only of the
/// kinds of events it asked for (`observation`; each report is then one
/// test). Passed to every call of a machine, never kept in it: a waiting
/// task holds its machines.
///
/// The machine sends an execution's begin and end and each net run of
/// its iterations; the coroutine driver sends through the same functions
/// what only it runs: the nets of a step's concurrent instances and the
/// runs of report steps.
struct step_context {
  step_stats* stats = nullptr;
  const observation* observed = nullptr;  ///< never null; `no_observation` when there is none
  /// The run the task's kernels serve (`op_context::run`); null outside a
  /// session's run.
  const run_context* run = nullptr;

  /// True when the observer asked for events of `kind`.
  [[nodiscard]] bool told(observe kind) const noexcept { return wants(observed->kinds, kind); }

  /// A net run begins: counted, and told.
  void net_begins(const net_instance& inst) const {
    if (stats != nullptr) ++stats->net_runs;
    told_net_begins(inst);
  }
  /// Told alone: the synchronous loop counts its net runs in bulk.
  void told_net_begins(const net_instance& inst) const {
    if (told(observe::nets)) observed->observer->net_begin(observed->at, inst.name());
  }
  void net_ends(const net_instance& inst, const status& st) const {
    if (told(observe::nets)) observed->observer->net_end(observed->at, inst.name(), st);
  }
  /// A run of report step `r` begins: counted, and told.
  void report_begins(const program_step& r) const {
    if (stats != nullptr) ++stats->report_runs;
    if (told(observe::reports)) observed->observer->report_begin(observed->at, r.name);
  }
  void report_ends(const program_step& r, const status& st) const {
    if (told(observe::reports)) observed->observer->report_end(observed->at, r.name, st);
  }
};

/// The children of `n` run concurrently, with a barrier at the end of each
/// iteration: concurrent_substeps with at least two recurring children,
/// or more than one instance (docs/semantics.md, "Sequential and concurrent iterations").
[[nodiscard]] inline bool runs_concurrently(const program_step& n) noexcept {
  return (n.concurrent && n.recurring_size() >= 2) || n.instances() > 1;
}

/// A net step whose bound nets are all synchronous and none of which may
/// wait now (`net_instance::may_wait`: no offloaded op of the node runs):
/// its whole loop runs in `run_sync_loop`, by either driver. Only valid
/// until the driver next suspends (an offloaded op may start meanwhile).
[[nodiscard]] bool has_only_sync_nets(const program_step& n, const bound_step& b) noexcept;

/// The stop blob's verdict: go on, stop (the step ends with success), or a
/// blob of another type than bool (an error, `stop_blob_error`). A blob
/// not written yet means go on.
enum class stop_verdict : std::uint8_t { go_on, stop, bad_type };
[[nodiscard]] stop_verdict stop_verdict_slow(const blob& stop) noexcept;
[[nodiscard]] inline stop_verdict verdict_of(const blob* stop) noexcept {
  if (stop == nullptr) return stop_verdict::go_on;
  // "Go on" inline, the rest out of line: in a hot loop the check is one
  // fall-through branch until the stop comes.
  if (const bool* v = stop->exact<bool>(); v != nullptr && !*v) [[likely]]
    return stop_verdict::go_on;
  return stop_verdict_slow(*stop);
}
/// The error of a stop blob of the wrong type, at `path`.
[[nodiscard]] error stop_blob_error(const bound_step& b, const program_step& n, const step_path* path);

/// How a synchronous loop (`run_sync_loop`) left off: `bad_stop` is a stop
/// blob of another type than bool.
enum class loop_exit : std::uint8_t { end, yield, failed, bad_stop, cancelled };

/// How a net of a synchronous loop ran (`step_machine::run_nets`), which
/// says what its run may have done to the stop blob.
enum class net_ran : std::uint8_t {
  failed,     ///< it failed: the loop ends
  any,        ///< it may have written any blob, the stop blob's type included
  in_place,   ///< it wrote only its op's own blobs in place (`fast_writes`), the stop blob among them
  elsewhere,  ///< as `in_place`, and the stop blob is not among them
};

/// One execution of one step: where it stands and what comes next.
class step_machine {
 public:
  enum class action : std::uint8_t {
    run_net,         ///< run bound net `net()`, then `net_ended()` and, if it ended well, `unit_ended()`
    run_child,       ///< execute child `n.children[unit()]`, then `unit_ended()`
    run_concurrent,  ///< run this iteration's children concurrently, then `unit_ended()`
    yield,           ///< let the strand in, then `next()`
    done,            ///< the execution ended well: count reached or stopped
    bad_stop,        ///< the stop blob holds another type: `stop_blob_error`
    cancelled,       ///< the run was asked to stop
  };

  /// The step's fields the rules read are copied here once per execution
  /// (`n` bound as `b`): the hot loop reads the machine, not the step.
  step_machine(const program_step& n, const bound_step& b) noexcept
      : n_(&n),
        b_(&b),
        limit_(n.stop() ? 0 : n.num_iter),
        units_(runs_concurrently(n) ? 1
               : n.nets.empty()     ? static_cast<std::uint32_t>(n.recurring_size())
                                    : static_cast<std::uint32_t>(b.nets.size())),
        stop_mode_(n.stop().has_value()),
        only_once_(n.only_once),
        concurrent_(runs_concurrently(n)),
        nets_(!n.nets.empty()),
        counted_(n.counted) {}

  /// The execution begins (before its first iteration): told.
  void begins(const step_context& ctx) const {
    if (ctx.told(observe::steps)) ctx.observed->observer->step_begin(ctx.observed->at, n_->name);
  }
  /// The execution has ended with `st` (well, failed, cancelled, timed
  /// out): told, with the iterations it started.
  void ends(const step_context& ctx, const status& st) const {
    if (ctx.told(observe::steps)) ctx.observed->observer->step_end(ctx.observed->at, n_->name, started(), st);
  }

  /// What to do first, and after a yield. `stop` is checked before each
  /// iteration, `clock` ticks at each iteration start (a due yield comes
  /// before the iteration, whose checks are then not made again), `ctx`
  /// counts the iterations of the counted step; a `run_net` action is the
  /// net's run begun (counted and told).
  action next(const stop_query& stop, yield_clock& clock, const step_context& ctx) {
    if (in_iteration_ && unit_ < units_) return unit_action(ctx);
    return next_iteration(stop, clock, ctx);
  }

  /// The net of the last `run_net` action has ended with `st`: told. The
  /// caller goes on with `unit_ended` if it ended well; else the execution
  /// has failed.
  void net_ended(const step_context& ctx, const status& st) const { ctx.net_ends(net(), st); }

  /// The net, child or concurrent iteration of the last action ended well:
  /// the stop check, then what comes next (arguments as for `next`).
  action unit_ended(const stop_query& stop, yield_clock& clock, const step_context& ctx) {
    switch (after_unit()) {
      case stop_verdict::go_on: break;
      case stop_verdict::stop: return action::done;
      case stop_verdict::bad_type: return action::bad_stop;
    }
    if (unit_ < units_) return unit_action(ctx);
    return next_iteration(stop, clock, ctx);
  }

  /// The same rules as `next` and `unit_ended`, as one tight loop for a net
  /// step whose nets are all synchronous: `run_net(net, u)` runs each net,
  /// the step's `u`-th, says how it ran (`net_ran`; `failed`: the loop
  /// ends `failed`), and tells the observer itself (`run_sync_loop`); the
  /// runs are counted in `stats->net_runs` in bulk. Leaves at the end of the execution, on a
  /// failure, a cancellation or a due yield (call again after it).
  /// `Units`, when not 0, is `unit_count()`, known to the caller when
  /// compiled: the loop over the nets is unrolled.
  template <std::uint32_t Units = 0, class Stop, class RunNet>
  loop_exit run_nets(Stop stop, yield_clock& clock, step_stats* stats, RunNet&& run_net) {
    // Two loops of the same rules: without a stop blob the check after
    // each net is known to say "go on", and leaves the loop.
    if (b_->stop == nullptr) return run_nets_as<false, Units>(stop, clock, stats, run_net);
    return run_nets_as<true, Units>(stop, clock, stats, run_net);
  }

  /// The net or child of the current action (a child by its index in
  /// `children`, recurring children only).
  [[nodiscard]] std::size_t unit() const noexcept { return nets_ ? unit_ : n_->recurring_at(unit_); }
  [[nodiscard]] net_instance& net() const noexcept { return *b_->nets[unit_]; }
  /// How many nets or children an iteration runs in turn (1 for a
  /// concurrent iteration).
  [[nodiscard]] std::uint32_t unit_count() const noexcept { return units_; }

  /// Iterations this execution has started (for its observer event and
  /// the task's report).
  [[nodiscard]] std::uint64_t started() const noexcept {
    // Iterations end by incrementing i_; one is in progress while
    // in_iteration_ (also when a stop ended it).
    return static_cast<std::uint64_t>(i_) + (in_iteration_ ? 1 : 0);
  }
  [[nodiscard]] const program_step& step() const noexcept { return *n_; }
  [[nodiscard]] const bound_step& bound() const noexcept { return *b_; }

 private:
  // `stop` by value: asked at every iteration, it stays in a register.
  template <bool StopBlob, std::uint32_t Units, class Stop, class RunNet>
  loop_exit run_nets_as(Stop stop, yield_clock& clock, step_stats* stats, RunNet& run_net) {
    net_instance* const* const nets = b_->nets.data();
    const std::uint32_t units = Units != 0 ? Units : units_;
    // The stop blob's value as the last check found it, while every net
    // since ran in place (`net_ran`): the blob still holds a bool there,
    // so the check after such a net is a read of it, or, after a net that
    // does not name the blob, known to say "go on" again. Null: the next
    // check is the full one (`verdict_of`).
    const bool* known = nullptr;
    for (;;) {
      switch (begin_iteration(stop, clock, stats)) {
        case boundary::go: break;
        case boundary::done: return loop_exit::end;
        case boundary::cancelled: return loop_exit::cancelled;
        case boundary::yield: return loop_exit::yield;
      }
      // This iteration, then up to `plain_starts` more that follow it with
      // no decision to make at their start but the stop request:
      // begin_iteration's other checks are known to pass for them. They
      // are counted in one go when the run of them ends (`ran`). `left`
      // counts down the ones still allowed; the ones begun are computed
      // again at the end (`begun`) rather than kept: the registers this
      // loop keeps across the calls of its nets are few.
      std::uint32_t left = plain_starts(clock);
      for (;;) {
#pragma GCC unroll 4
        for (std::uint32_t u = 0; u != units; ++u) {
          const net_ran how = run_net(*nets[u], u);
          if (how == net_ran::failed) [[unlikely]] {
            ran(begun(clock, left), u, u + 1, clock, stats);
            return loop_exit::failed;
          }
          if constexpr (StopBlob) {
            if (known != nullptr && how != net_ran::any) {
              if (how == net_ran::elsewhere || !*known) [[likely]]
                continue;
              ran(begun(clock, left), u + 1, u + 1, clock, stats);
              return loop_exit::end;
            }
            const blob* const stop_blob = b_->stop;
            if (const stop_verdict v = verdict_of(stop_blob); v != stop_verdict::go_on) [[unlikely]] {
              ran(begun(clock, left), u + 1, u + 1, clock, stats);
              return v == stop_verdict::stop ? loop_exit::end : loop_exit::bad_stop;
            }
            known = stop_blob->exact<bool>();  // null while not written yet
          }
        }
        if (left == 0 || stop.requested()) break;
        --left;
      }
      ran(begun(clock, left), units, units, clock, stats);
    }
  }

  // How many iterations may start after the current one with the stop
  // request as their only check: the loop's end is not reached and no
  // yield comes due.
  [[nodiscard]] std::uint32_t plain_starts(const yield_clock& clock) const noexcept {
    return static_cast<std::uint32_t>(std::min<std::uint64_t>(starts_left() - 1, clock.quiet_ticks()));
  }

  // How many iterations a run of run_nets_as has begun after the one
  // begin_iteration started, with `left` of plain_starts(clock) not begun.
  [[nodiscard]] std::uint32_t begun(const yield_clock& clock, std::uint32_t left) const noexcept {
    return plain_starts(clock) - left;
  }

  // A run of run_nets_as ended: after the iteration that begin_iteration
  // started, `extra` more began as plain_starts allows (what
  // begin_iteration would have counted for each); the last one ran `runs`
  // nets (a failing one included) and stands at `unit`.
  void ran(std::uint32_t extra, std::uint32_t unit, std::uint32_t runs, yield_clock& clock,
           step_stats* stats) noexcept {
    i_ += extra;
    clock.skip(extra);
    unit_ = unit;
    if (stats != nullptr) {
      if (counted_) stats->iterations += extra;
      stats->net_runs += std::uint64_t{extra} * units_ + runs;
    }
  }

  // The next net or child runs: a net's run begins here.
  [[nodiscard]] action unit_action(const step_context& ctx) const {
    if (!nets_) return action::run_child;
    ctx.net_begins(net());
    return action::run_net;
  }

  // How many iterations may still start, iteration i_ the first of them
  // (docs/semantics.md, "Iterations"): up to num_iter; in stop-blob mode any number, but only
  // iteration 0 with only_once.
  [[nodiscard]] std::uint64_t starts_left() const noexcept {
    if (stop_mode_) {
      if (only_once_) return i_ == 0 ? 1 : 0;
      return std::numeric_limits<std::uint64_t>::max();
    }
    return i_ < limit_ ? static_cast<std::uint64_t>(limit_ - i_) : 0;
  }
  [[nodiscard]] bool iteration_starts() const noexcept { return starts_left() != 0; }

  enum class boundary : std::uint8_t { go, done, cancelled, yield };

  // Ends the current iteration (if any) and decides whether the next one
  // starts: the end of the loop, the run's stop request, a due yield; a
  // started iteration is counted.
  template <class Stop>
  boundary begin_iteration(const Stop& stop, yield_clock& clock, step_stats* stats) noexcept {
    if (in_iteration_) {
      in_iteration_ = false;
      ++i_;
    }
    if (!resume_) {
      if (!iteration_starts()) return boundary::done;
      if (stop.requested()) return boundary::cancelled;
      if (clock.tick()) {
        resume_ = true;
        return boundary::yield;
      }
    }
    resume_ = false;
    if (counted_ && stats != nullptr) ++stats->iterations;
    in_iteration_ = true;
    unit_ = 0;
    return boundary::go;
  }

  // A net, child or concurrent iteration has ended well: the stop check
  // after it (docs/semantics.md, "Stop blob checks": after every net,
  // sequential child, concurrent iteration).
  stop_verdict after_unit() noexcept {
    ++unit_;
    return verdict_of(b_->stop);
  }

  action next_iteration(const stop_query& stop, yield_clock& clock, const step_context& ctx) {
    for (;;) {
      switch (begin_iteration(stop, clock, ctx.stats)) {
        case boundary::go: break;
        case boundary::done: return action::done;
        case boundary::cancelled: return action::cancelled;
        case boundary::yield: return action::yield;
      }
      if (concurrent_) return action::run_concurrent;
      // An iteration with nothing to run (a root step without nets or
      // children) ends at once; the loop goes on, its clock ticking.
      if (units_ != 0) return unit_action(ctx);
    }
  }

  const program_step* n_;
  const bound_step* b_;
  std::int64_t i_ = 0;      // the current iteration
  std::int64_t limit_;      // num_iter (unused in stop-blob mode)
  std::uint32_t unit_ = 0;  // the net or recurring child within the iteration
  std::uint32_t units_;     // nets or recurring children per iteration (1: concurrent)
  bool stop_mode_;
  bool only_once_;
  bool concurrent_;
  bool nets_;
  bool counted_;
  bool in_iteration_ = false;
  bool resume_ = false;  // a yield was taken before iteration i_: its checks are done
};

/// Runs a `has_only_sync_nets` step's machine on (`step_machine::run_nets`):
/// nets called inline, each reported to `ctx` (counted, told),
/// until the execution ends (well: `end`; `failure` set, a stop blob of
/// the wrong type included: `failed`; `cancelled`) or a yield is due
/// (`yield`: call again after it). A plain function, its state in
/// registers: the hot loop of both drivers. The caller has made `ctx.run`
/// the context of the kernel calls (ops/run_scope.hpp, `in_run`).
loop_exit run_sync_loop(step_machine& m, const step_path* path, const stop_query& stop, yield_clock& clock,
                        const step_context& ctx, status& failure);

}  // namespace taskgroup::detail
