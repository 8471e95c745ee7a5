// Internal: the coroutine driver. It awaits what the step machine
// (step/machine.hpp) asks for; concurrent iterations, deadlines, report
// steps and coroutine-form ops need it, and a task whose tree needs none
// of them runs on the frame-free driver. Its parts: one execution and its
// iterations (coroutine_driver.cpp), concurrent iterations
// (concurrent.cpp), report steps (reports.cpp), the entry points
// (run_compiled.cpp).
#pragma once

#include "detail/join.hpp"
#include "ops/net_run.hpp"
#include "step/machine.hpp"
#include "step/runner.hpp"

#include <taskgroup/step_runner.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_state.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace taskgroup::detail {

namespace asio = boost::asio;

// Shared by the body of a step and its report substeps.
struct report_control {
  bool done = false;
  std::vector<asio::steady_timer*> sleepers;
  void finish() {
    done = true;
    for (auto* t : sleepers) t->cancel();
  }
};

/// One run of a step tree on the coroutine driver: the executor it runs
/// on, the registry its nets bind with, the task's counts and observer,
/// the task's wait sites. Lives in the frame of the run's entry point.
class runner {
 public:
  // internal: every member is used by the entry points below
  runner(asio::any_io_executor ex, const operator_registry& registry, const run_step_options& options,
         const observation& observed, site_registry sites = {}, const run_context* run = nullptr)
      : ex_(std::move(ex)),
        registry_(registry),
        ctx_{options.stats, &observed, run},
        sites_(sites),
        yield_every_(std::max<std::uint32_t>(1, options.yield_every)),
        yield_slice_(std::max(options.yield_slice, std::chrono::microseconds::zero())) {}

  // The same run, its kernels serving `run` (the subtree of a retried
  // step, on the strand of `outer`).
  runner(const runner& outer, const run_context* run) : runner(outer) { ctx_.run = run; }

  // Files `site` as net `inst` at `path` waiting, when the task's sites
  // are kept (a session's run): the caller awaits the net with the
  // site's op index kept.
  void watch(wait_site& site, const net_instance& inst, const step_path* path);

  // A net run's status; a wait it ended by cancellation that nothing left
  // in the run could have ended says so (ops/queues.hpp).
  [[nodiscard]] status told_if_starved(const net_instance& inst, std::uint32_t op, status st) const;

  status bind(const program_step& n, workspace& ws, bound_step& b, const step_path* path);

  // One execution of a step: its attempts when it retries (`retried`),
  // else `exec_once` (no frame of its own).
  asio::awaitable<status> exec(const program_step& n, std::shared_ptr<workspace> ws, const bound_step* b,
                               const step_path* path) {
    if (n.retry() != nullptr) return retried(n, std::move(ws), b, path);
    return exec_once(n, std::move(ws), b, path);
  }

  // One attempt of a step: its own workspace, then its machine, which
  // tells its begin and its end (a deadline's included) around the
  // iterations, timed, beside the report steps.
  asio::awaitable<status> exec_once(const program_step& n, std::shared_ptr<workspace> ws, const bound_step* b,
                                    const step_path* path);

  // A step with a retry policy: attempts (`exec_once`, each its own
  // execution, in a fresh workspace with `create_workspace`, its kernels
  // told their attempt) and the waits between them (step/retry.hpp), each
  // in view of run_probe.
  asio::awaitable<status> retried(const program_step& n, std::shared_ptr<workspace> ws, const bound_step* b,
                                  const step_path* path);

  // The execution's iterations raced against its deadline. When the
  // deadline wins, its error says where the iterations were cut short
  // (the op they waited on), as a run's deadline does for its tasks.
  asio::awaitable<status> timed(step_machine& m, const std::shared_ptr<workspace>& ws, const step_path* path,
                                std::chrono::milliseconds limit);

  // `work`'s status, also kept in `out`.
  static asio::awaitable<status> kept(asio::awaitable<status> work, status& out);

  asio::awaitable<status> deadline(std::chrono::milliseconds limit, const step_path* path);

  // The machine's iterations, beside the step's report steps if any.
  asio::awaitable<status> iterate_beside_reports(step_machine& m, const std::shared_ptr<workspace>& ws,
                                                 const step_path* path);

  // Runs `body` beside report steps (already bound in `ws`).
  asio::awaitable<status> with_reporters(asio::awaitable<status> body, const std::vector<program_step>& reports,
                                         std::vector<bound_step>& bounds, std::shared_ptr<workspace> ws,
                                         const step_path* path);

  // A fail-fast join of `body` and `count` report loops; the reporters get
  // their final run once the body has succeeded (on failure the join
  // cancels them instead).
  template <class Body, class Report>
  asio::awaitable<status> beside_reports(Body body, std::size_t count, Report report) {
    report_control ctl;
    co_return co_await guarded(detail::join(
        ex_, 1 + count,
        [&](std::size_t i) -> asio::awaitable<status> {
          if (i == 0) return finish_after(body(), ctl);
          return report(i - 1, ctl);
        },
        detail::join_mode::fail_fast));
  }

  static asio::awaitable<status> finish_after(asio::awaitable<status> body, report_control& ctl);

  // A report substep: run after each interval, and once more when the
  // parent's work ends (unless that end arrived during a run).
  asio::awaitable<status> report_loop(const program_step& r, std::shared_ptr<workspace> ws, const bound_step& b,
                                      const step_path* parent, report_control& ctl);

  // A net that may wait, whose run has begun (counted and told, by the
  // machine or, for a concurrent instance, by `nets_instance`): awaited
  // with its wait in view of run_probe. A net that cannot wait is called
  // inline (`run_sync`): no frame.
  asio::awaitable<status> run_waiting_net(net_instance& inst, const step_path* path);

  // A net's failure, named at `path`.
  static status named_at(status st, const step_path* path);

  // One execution's iterations: the step machine's actions, carried out.
  asio::awaitable<status> iterate(step_machine& m, workspace& ws, const step_path* path);

  // The same for a plain child of no observed run (`exec_elidable`): its
  // machine in this frame, no begin or end to tell. `failed`, when given,
  // is set on a failure (`concurrent_iteration`).
  asio::awaitable<status> iterate(const program_step& n, workspace& ws, const bound_step& b, const step_path* path,
                                  bool* failed = nullptr);

  // How a concurrent step's iterations run: in turn (its children cannot
  // wait), or as rounds of one join; the children's paths; whether a child
  // of the join's current round has failed (`concurrent_iteration`).
  struct concurrency {
    std::vector<step_path> paths;
    std::shared_ptr<spawn_join> join;
    bool in_turn = false;
    bool failed = false;
  };
  concurrency plan_concurrency(const program_step& n, const bound_step& b, const step_path* path);
  // One call of the synchronous loop: its end, or none when a yield is due.
  std::optional<status> sync_loop(step_machine& m, const step_path* path, const stop_query& stop, yield_clock& clock);

  asio::awaitable<status> drive(step_machine& m, workspace& ws, const step_path* path, const stop_query& stop,
                                yield_clock& clock);

  // A concurrent step whose children are all plain synchronous net steps
  // that end on their own (no stop-blob loop waiting for a sibling): one
  // substep per child, no instances. They run one after another, as plain
  // calls (no spawn, no join): on one strand that is what the join's
  // schedule comes to, minus its cost; the first failure skips the
  // children not yet run, as it would cancel them.
  static bool children_run_in_turn(const program_step& n, const bound_step& b);

  // Where children run in turn stand: child k next, or `child` (child k's
  // execution) interrupted by a due yield.
  struct in_turn_cursor {
    std::size_t k = 0;
    std::optional<step_machine> child;
  };

  // Runs the children in turn from `at` on, as plain calls: true once they
  // have all ended or one has failed (`st` says which), false when a yield
  // is due (`at` then holds the child to go on with).
  bool run_children_in_turn(const program_step& n, const bound_step& b, const std::vector<step_path>& paths,
                            const stop_query& stop, yield_clock& clock, in_turn_cursor& at, status& st);

  // Child `at.k`'s execution ended with `st`: its event, then on to the
  // next child; true when that end stops the children (a failure).
  bool end_child(in_turn_cursor& at, const status& st);

  // The children in turn once a yield is due (the common iteration needs
  // no coroutine frame: `run_children_in_turn`).
  asio::awaitable<status> children_in_turn_after_yield(const program_step& n, workspace& ws, const bound_step& b,
                                                       const std::vector<step_path>& paths, const stop_query& stop,
                                                       yield_clock& clock, in_turn_cursor at);

  // A flat-stack yield (post, never dispatch); false when the run was
  // cancelled meanwhile.
  asio::awaitable<bool> yield(const asio::cancellation_state& cs);

  // A child that `exec` would only pass on to `iterate`: no deadline, own
  // workspace or report steps.
  static bool is_plain(const program_step& c) {
    return !c.timeout() && !c.create_ws && c.reports().empty() && c.retry() == nullptr;
  }

  // `exec` adds nothing for a plain child but its step events: unless they
  // are asked for, such a child is run as `iterate` directly (fewer frames).
  [[nodiscard]] bool exec_elidable(const program_step& c) const { return !ctx_.told(observe::steps) && is_plain(c); }

  // The paths of the children of a concurrent step (substep k of
  // `concurrent_iteration`), made once per execution of the step: plain
  // children are spawned as `iterate` directly and point to these.
  std::vector<step_path> child_paths(const program_step& n, const step_path* path) const;

  // The children of one concurrent iteration: S recurring substeps x N
  // instances (or N instances of the nets).
  static std::size_t concurrent_children(const program_step& n);

  // One concurrent iteration: a round of the step's join over its children
  // (fail-fast: the first failing child cancels the others at once). A
  // child spawned after a sibling has failed does not start, as in turn: a
  // child runs inline until it first waits, and the join hears of a failure
  // only by a post, after the children spawned meanwhile had run.
  asio::awaitable<status> concurrent_iteration(concurrency& plan, const program_step& n, workspace& ws,
                                               const bound_step& b, const step_path* path);

  // A child that does not start: cancelled where it would have run (the
  // join has a failure to report by the time it hears of this end).
  static asio::awaitable<status> not_started(const step_path* at, std::int64_t instance);

  // The children of a round; each sets `failed` on a failure.
  asio::awaitable<status> nets_instance(const bound_step& b, const step_path* parent, std::int64_t instance,
                                        bool* failed);

  asio::awaitable<status> substep_instance(const program_step& c, std::shared_ptr<workspace> ws, const bound_step& b,
                                           const step_path* parent, std::int64_t instance, bool* failed);

  static std::shared_ptr<workspace> shared(workspace& ws) { return ws.shared_from_this(); }

  // Turns what an awaited Asio operation throws (cancellation of an
  // already-cancelled coroutine) into a status.
  static asio::awaitable<status> guarded(asio::awaitable<status> a);

  asio::any_io_executor ex_;

  const operator_registry& registry_;

  step_context ctx_;

  site_registry sites_;

  std::uint32_t yield_every_;
  std::chrono::microseconds yield_slice_;
};

}  // namespace taskgroup::detail
