#include "step/machine.hpp"

#include "detail/join.hpp"
#include "ops/net_run.hpp"
#include "step/runner.hpp"
#include "ops/queues.hpp"

#include <taskgroup/step_runner.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace taskgroup {

namespace asio = boost::asio;

namespace {

using namespace detail;

// Shared by the body of a step and its report substeps.
struct report_control {
  bool done = false;
  std::vector<asio::steady_timer*> sleepers;
  void finish() {
    done = true;
    for (auto* t : sleepers) t->cancel();
  }
};

// The coroutine driver: awaits what the step machine asks for. Concurrent
// iterations, deadlines, report steps and coroutine-form ops need it; a
// task whose tree needs none of them runs on the frame-free driver.
struct runner {  // internal: every member is used by the entry points below
  runner(asio::any_io_executor ex, const operator_registry& registry, const run_step_options& options,
         site_registry sites = {})
      : ex_(std::move(ex)),
        registry_(registry),
        ctx_{options.stats, options.observer},
        sites_(sites),
        yield_every_(std::max<std::uint32_t>(1, options.yield_every)) {}

  // Files `site` as net `inst` at `path` waiting, when the task's sites
  // are kept (a session's run): the caller awaits the net with the
  // site's op index kept.
  void watch(wait_site& site, const net_instance& inst, const step_path* path) {
    if (sites_.sites == nullptr) return;
    site.task = sites_.task;
    site.path = path;
    site.inst = &inst;
    sites_.sites->push_back(site);
  }

  // A net run's status; a wait it ended by cancellation that nothing left
  // in the run could have ended says so (ops/queues.hpp).
  [[nodiscard]] status told_if_starved(const net_instance& inst, std::uint32_t op, status st) const {
    if (st || !st.error().is_cancelled() || !starved(inst, op, sites_.feeders)) return st;
    return error(st.error().code, st.error().message + std::string(no_producer_left));
  }

  status bind(const program_step& n, workspace& ws, bound_step& b, const step_path* path) {
    return bind_step(n, ws, registry_, b, path);
  }

  // One execution of a step: its own workspace, then its machine, which
  // tells its begin and its end (a deadline's included) around the
  // iterations, timed, beside the report steps.
  asio::awaitable<status> exec(const program_step& n, std::shared_ptr<workspace> ws, const bound_step* b,
                               const step_path* path) {
    bound_step local;
    if (n.create_ws) {
      ws = ws->create_child(ws->name() + "/" + n.name);
      if (auto st = bind(n, *ws, local, path); !st) co_return st;
      b = &local;
    }
    step_machine m(n, *b);
    m.begins(ctx_);
    // No co_await inside ?: (GCC 12 miscompiles its temporaries).
    status st = ok();
    if (const auto limit = n.timeout()) {
      st = co_await timed(m, ws, path, *limit);
    } else {
      st = co_await iterate_beside_reports(m, ws, path);
    }
    m.ends(ctx_, st);
    co_return st;
  }

  // The execution's iterations raced against its deadline. When the
  // deadline wins, its error says where the iterations were cut short
  // (the op they waited on), as a run's deadline does for its tasks.
  asio::awaitable<status> timed(step_machine& m, const std::shared_ptr<workspace>& ws, const step_path* path,
                                std::chrono::milliseconds limit) {
    status body = ok();
    status st = co_await guarded(detail::join(
        ex_, 2,
        [&](std::size_t i) -> asio::awaitable<status> {
          if (i == 0) return kept(iterate_beside_reports(m, ws, path), body);
          return deadline(limit, path);
        },
        detail::join_mode::race));
    if (!st && st.error().code == errc::timeout && !body && body.error().is_cancelled()) {
      co_return error(errc::timeout, st.error().message + "; waiting then in " + body.error().message);
    }
    co_return st;
  }

  // `work`'s status, also kept in `out`.
  static asio::awaitable<status> kept(asio::awaitable<status> work, status& out) {
    out = co_await std::move(work);
    co_return out;
  }

  asio::awaitable<status> deadline(std::chrono::milliseconds limit, const step_path* path) {
    asio::steady_timer timer(ex_, limit);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return cancelled_at(path);
    co_return at(path, errc::timeout, "timed out after " + std::to_string(limit.count()) + " ms");
  }

  // The machine's iterations, beside the step's report steps if any.
  asio::awaitable<status> iterate_beside_reports(step_machine& m, const std::shared_ptr<workspace>& ws,
                                                 const step_path* path) {
    const program_step& n = m.step();
    if (n.reports().empty()) return iterate(m, *ws, path);
    return beside_reports([&m, &ws, path, this]() { return iterate(m, *ws, path); }, n.reports().size(),
                          [&n, &m, &ws, path, this](std::size_t i, report_control& ctl) {
                            const std::size_t idx = n.reports()[i];
                            return report_loop(n.children[idx], ws, m.bound().children[idx], path, ctl);
                          });
  }

  // Runs `body` beside report steps (already bound in `ws`).
  asio::awaitable<status> with_reporters(asio::awaitable<status> body, const std::vector<program_step>& reports,
                                         std::vector<bound_step>& bounds, std::shared_ptr<workspace> ws,
                                         const step_path* path) {
    auto started = [&body] { return std::move(body); };
    co_return co_await beside_reports(started, reports.size(), [&](std::size_t i, report_control& ctl) {
      return report_loop(reports[i], ws, bounds[i], path, ctl);
    });
  }

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

  static asio::awaitable<status> finish_after(asio::awaitable<status> body, report_control& ctl) {
    status st = co_await std::move(body);
    if (st) ctl.finish();
    co_return st;
  }

  // A report substep: run after each interval, and once more when the
  // parent's work ends (unless that end arrived during a run).
  asio::awaitable<status> report_loop(const program_step& r, std::shared_ptr<workspace> ws, const bound_step& b,
                                      const step_path* parent, report_control& ctl) {
    step_path path{parent, r.name};
    for (;;) {
      if (!ctl.done) {
        asio::steady_timer timer(ex_, r.every());
        ctl.sleepers.push_back(&timer);
        (void)co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        std::erase(ctl.sleepers, &timer);
        asio::cancellation_state cs = co_await asio::this_coro::cancellation_state;
        if (cs.cancelled() != asio::cancellation_type::none) co_return cancelled_at(&path);
      }
      // The parent's end seen before this run makes it the last one; an end
      // that arrives during the run ends the loop without another.
      const bool last = ctl.done;
      ctx_.report_begins(r);
      status st = co_await exec(r, ws, &b, &path);
      ctx_.report_ends(r, st);
      if (!st) co_return st;
      if (last || ctl.done) co_return ok();
    }
  }
  // A net that may wait, whose run has begun (counted and told, by the
  // machine or, for a concurrent instance, by `nets_instance`): awaited
  // with its wait in view of run_probe. A net that cannot wait is called
  // inline (`run_sync`): no frame.
  asio::awaitable<status> run_waiting_net(net_instance& inst, const step_path* path) {
    wait_site site;
    watch(site, inst, path);
    co_return told_if_starved(inst, site.op, co_await run_net_at(inst, &site.op));
  }
  // A net's failure, named at `path`.
  static status named_at(status st, const step_path* path) {
    if (!st) return at(path, st.error());
    return st;
  }

  // One execution's iterations: the step machine's actions, carried out.
  asio::awaitable<status> iterate(step_machine& m, workspace& ws, const step_path* path) {
    asio::cancellation_state cs = co_await asio::this_coro::cancellation_state;
    yield_clock clock{yield_every_};
    co_return co_await drive(m, ws, path, stop_query{&cs}, clock);
  }
  // The same for a plain child of no observed run (`exec_elidable`): its
  // machine in this frame, no begin or end to tell.
  asio::awaitable<status> iterate(const program_step& n, workspace& ws, const bound_step& b, const step_path* path) {
    asio::cancellation_state cs = co_await asio::this_coro::cancellation_state;
    step_machine m(n, b);
    yield_clock clock{yield_every_};
    co_return co_await drive(m, ws, path, stop_query{&cs}, clock);
  }

  asio::awaitable<status> drive(step_machine& m, workspace& ws, const step_path* path, const stop_query& stop,
                                yield_clock& clock) {
    const program_step& n = m.step();
    const bound_step& b = m.bound();
    const bool concurrent = runs_concurrently(n);
    std::vector<step_path> paths;
    std::shared_ptr<spawn_join> join;
    const bool in_turn = concurrent && children_run_in_turn(n, b);
    if (concurrent && concurrent_children(n) > 0) {
      paths = child_paths(n, path);
      // One join for every iteration of this execution: its bookkeeping
      // and the children's signals are made once, not per iteration.
      if (!in_turn) join = std::make_shared<spawn_join>(concurrent_children(n), join_mode::fail_fast);
    }
    if (!concurrent && has_only_sync_nets(n, b)) {
      // The common loop runs in a plain function, back here only to yield.
      for (;;) {
        status failure = ok();
        switch (run_sync_loop(m, path, stop, clock, ctx_, failure)) {
          case loop_exit::end: co_return ok();
          case loop_exit::failed:
          case loop_exit::bad_stop: co_return failure;
          case loop_exit::cancelled: co_return cancelled_at(path);
          case loop_exit::yield: break;
        }
        // The yield awaited here, not through `yield` (one frame less on
        // the path of every long synchronous loop).
        bool resumed = true;
        try {
          co_await asio::post(ex_, asio::use_awaitable);
        } catch (...) {
          resumed = false;
        }
        if (!resumed || stop.requested()) co_return cancelled_at(path);
        // An offloaded op may have started meanwhile: the nets may wait now.
        if (!has_only_sync_nets(n, b)) break;
      }
    }
    for (auto a = m.next(stop, clock, ctx_);;) {
      switch (a) {
        case step_machine::action::run_net: {
          net_instance& inst = m.net();
          // No co_await inside ?: (GCC 12 miscompiles its temporaries).
          status st = ok();
          if (inst.may_wait()) {
            st = co_await run_waiting_net(inst, path);
          } else {
            st = inst.run_sync();
          }
          m.net_ended(ctx_, st);
          if (!st) co_return named_at(std::move(st), path);
          break;
        }
        case step_machine::action::run_child: {
          const program_step& c = n.children[m.unit()];
          step_path cp{path, c.name};
          if (status st = co_await exec(c, shared(ws), &b.children[m.unit()], &cp); !st) co_return st;
          break;
        }
        case step_machine::action::run_concurrent: {
          status st = ok();
          if (in_turn) {
            in_turn_cursor at;
            if (!run_children_in_turn(n, b, paths, stop, clock, at, st)) {
              st = co_await children_in_turn_after_yield(n, ws, b, paths, stop, clock, std::move(at));
            }
          } else if (join) {
            // Turns what an awaited Asio operation throws (cancellation of
            // an already-cancelled coroutine) into a status, as `guarded`.
            try {
              st = co_await concurrent_iteration(join, n, ws, b, path, paths);
            } catch (...) {
              st = detail::error_from_exception(std::current_exception());
            }
          }
          if (!st) co_return st;
          break;
        }
        case step_machine::action::yield:
          if (!co_await yield(*stop.cs)) co_return cancelled_at(path);
          a = m.next(stop, clock, ctx_);
          continue;
        case step_machine::action::done: co_return ok();
        case step_machine::action::bad_stop: co_return stop_blob_error(b, n, path);
        case step_machine::action::cancelled: co_return cancelled_at(path);
      }
      a = m.unit_ended(stop, clock, ctx_);
    }
  }

  // A concurrent step whose children are all plain synchronous net steps
  // that end on their own (no stop-blob loop waiting for a sibling): one
  // substep per child, no instances. They run one after another, as plain
  // calls (no spawn, no join): on one strand that is what the join's
  // schedule comes to, minus its cost; the first failure skips the
  // children not yet run, as it would cancel them.
  static bool children_run_in_turn(const program_step& n, const bound_step& b) {
    if (!n.nets.empty() || n.instances() != 1) return false;
    for (std::size_t j = 0, e = n.recurring_size(); j < e; ++j) {
      const std::size_t idx = n.recurring_at(j);
      const program_step& c = n.children[idx];
      if (c.inline_cost == 0 || !is_plain(c) || !has_only_sync_nets(c, b.children[idx])) return false;
    }
    return true;
  }

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
                            const stop_query& stop, yield_clock& clock, in_turn_cursor& at, status& st) {
    for (const std::size_t e = n.recurring_size(); at.k < e;) {
      const std::size_t idx = n.recurring_at(at.k);
      const program_step& c = n.children[idx];
      if (!at.child) at.child.emplace(c, b.children[idx]).begins(ctx_);
      status failure = ok();
      status child_st = ok();
      switch (run_sync_loop(*at.child, &paths[at.k], stop, clock, ctx_, failure)) {
        case loop_exit::end: break;
        case loop_exit::failed:
        case loop_exit::bad_stop: child_st = std::move(failure); break;
        case loop_exit::cancelled: child_st = cancelled_at(&paths[at.k]); break;
        case loop_exit::yield: return false;
      }
      if (end_child(at, child_st)) {
        st = std::move(child_st);
        return true;
      }
    }
    st = ok();
    return true;
  }

  // Child `at.k`'s execution ended with `st`: its event, then on to the
  // next child; true when that end stops the children (a failure).
  bool end_child(in_turn_cursor& at, const status& st) {
    at.child->ends(ctx_, st);
    at.child.reset();
    ++at.k;
    return !st;
  }

  // The children in turn once a yield is due (the common iteration needs
  // no coroutine frame: `run_children_in_turn`).
  asio::awaitable<status> children_in_turn_after_yield(const program_step& n, workspace& ws, const bound_step& b,
                                                       const std::vector<step_path>& paths, const stop_query& stop,
                                                       yield_clock& clock, in_turn_cursor at) {
    for (;;) {
      const std::size_t idx = n.recurring_at(at.k);
      const program_step& c = n.children[idx];
      status st = ok();
      if (!co_await yield(*stop.cs)) {
        st = cancelled_at(&paths[at.k]);
      } else if (!has_only_sync_nets(c, b.children[idx])) {
        // An offloaded op started meanwhile: the child's nets may wait
        // now, so the general loop carries it on.
        st = co_await drive(*at.child, ws, &paths[at.k], stop, clock);
      } else {
        if (run_children_in_turn(n, b, paths, stop, clock, at, st)) co_return st;
        continue;
      }
      if (end_child(at, st)) co_return st;
      if (run_children_in_turn(n, b, paths, stop, clock, at, st)) co_return st;
    }
  }

  // A flat-stack yield (post, never dispatch); false when the run was
  // cancelled meanwhile.
  asio::awaitable<bool> yield(const asio::cancellation_state& cs) {
    try {
      co_await asio::post(ex_, asio::use_awaitable);
    } catch (...) {
      co_return false;
    }
    co_return cs.cancelled() == asio::cancellation_type::none;
  }

  // A child that `exec` would only pass on to `iterate`: no deadline, own
  // workspace or report steps.
  static bool is_plain(const program_step& c) { return !c.timeout() && !c.create_ws && c.reports().empty(); }
  // `exec` adds nothing for a plain child but its observer events: without
  // an observer such a child is run as `iterate` directly (fewer frames).
  [[nodiscard]] bool exec_elidable(const program_step& c) const { return ctx_.observer == nullptr && is_plain(c); }

  // The paths of the children of a concurrent step (substep k of
  // `concurrent_iteration`), made once per execution of the step: plain
  // children are spawned as `iterate` directly and point to these.
  std::vector<step_path> child_paths(const program_step& n, const step_path* path) const {
    std::vector<step_path> paths;
    if (!n.nets.empty()) return paths;
    const std::size_t units = n.recurring_size();
    const auto instances = static_cast<std::size_t>(n.instances());
    paths.reserve(units * instances);
    for (std::size_t k = 0; k < units * instances; ++k) {
      const std::int64_t instance = instances > 1 ? static_cast<std::int64_t>(k / units) : -1;
      paths.push_back(step_path{path, n.children[n.recurring_at(k % units)].name, instance});
    }
    return paths;
  }

  // The children of one concurrent iteration: S recurring substeps x N
  // instances (or N instances of the nets).
  static std::size_t concurrent_children(const program_step& n) {
    const std::size_t units = n.nets.empty() ? n.recurring_size() : 1;
    return units * static_cast<std::size_t>(n.instances());
  }

  // One concurrent iteration: a round of the step's join over its children
  // (fail-fast: the first failing child cancels the others at once).
  asio::awaitable<status> concurrent_iteration(std::shared_ptr<spawn_join>& join, const program_step& n, workspace& ws,
                                               const bound_step& b, const step_path* path,
                                               const std::vector<step_path>& paths) {
    const std::size_t units = n.nets.empty() ? n.recurring_size() : 1;
    const auto instances = static_cast<std::size_t>(n.instances());
    auto child = [this, &n, &ws, &b, path, &paths, units, instances](std::size_t k) {
      const std::int64_t instance = instances > 1 ? static_cast<std::int64_t>(k / units) : -1;
      if (!n.nets.empty()) return nets_instance(b, path, instance);
      const std::size_t idx = n.recurring_at(k % units);
      const program_step& c = n.children[idx];
      // The parent's workspace outlives the iteration (it waits for every
      // child), so a plain child needs neither `exec` nor a reference.
      if (exec_elidable(c)) return iterate(c, ws, b.children[idx], &paths[k]);
      return substep_instance(c, shared(ws), b.children[idx], path, instance);
    };
    return spawn_join::round<true>(join, ex_, child, [](std::size_t) { return 0; });
  }

  asio::awaitable<status> nets_instance(const bound_step& b, const step_path* parent, std::int64_t instance) {
    step_path path{parent, "", instance};
    const step_path* p = instance >= 0 ? &path : parent;
    for (net_instance* inst : b.nets) {
      ctx_.net_begins(*inst);
      status st = ok();
      if (inst->may_wait()) {
        st = co_await run_waiting_net(*inst, p);
      } else {
        st = inst->run_sync();
      }
      ctx_.net_ends(*inst, st);
      if (!st) co_return named_at(std::move(st), p);
    }
    co_return ok();
  }

  asio::awaitable<status> substep_instance(const program_step& c, std::shared_ptr<workspace> ws, const bound_step& b,
                                           const step_path* parent, std::int64_t instance) {
    step_path path{parent, c.name, instance};
    co_return co_await exec(c, std::move(ws), &b, &path);
  }

  static std::shared_ptr<workspace> shared(workspace& ws) { return ws.shared_from_this(); }

  // Turns what an awaited Asio operation throws (cancellation of an
  // already-cancelled coroutine) into a status.
  static asio::awaitable<status> guarded(asio::awaitable<status> a) {
    try {
      co_return co_await std::move(a);
    } catch (...) {
      co_return detail::error_from_exception(std::current_exception());
    }
  }

  asio::any_io_executor ex_;
  const operator_registry& registry_;
  step_context ctx_;
  site_registry sites_;
  std::uint32_t yield_every_;
};

}  // namespace

std::string detail::where(const wait_site& s, const std::uint32_t* feeders) {
  std::string what = op_waiting(*s.inst, s.op, s.inst->blocked(s.op));
  if (starved(*s.inst, s.op, feeders)) what += no_producer_left;
  return at(s.path, error(errc::cancelled, std::move(what))).message;
}

asio::awaitable<status> detail::run_compiled(std::shared_ptr<const compiled_step> s, std::shared_ptr<workspace> ws,
                                             run_step_options options, site_registry sites) {
  if (!ws) co_return fail(errc::invalid_step, "run_step: no workspace");
  const operator_registry& registry = options.registry != nullptr ? *options.registry : operator_registry::global();
  runner r(co_await asio::this_coro::executor, registry, options, sites);
  const program_step& root = s->root;
  step_path path{nullptr, root.name};
  bound_step b;
  if (!root.create_ws) {
    if (auto st = r.bind(root, *ws, b, &path); !st) co_return st;
  }
  // Straight to the loop when `exec` would only pass the call on: a
  // coroutine frame fewer for the common task (alive while it pends).
  if (r.exec_elidable(root)) co_return co_await r.iterate(root, *ws, b, &path);
  co_return co_await r.exec(root, std::move(ws), &b, &path);
}

namespace {

// run_with_reporters with report steps.
asio::awaitable<status> beside_report_steps(asio::awaitable<status> body,
                                            std::vector<std::pair<execution_step, std::chrono::milliseconds>> reports,
                                            std::shared_ptr<workspace> ws, run_step_options options,
                                            std::string path_name) {
  const operator_registry& registry = options.registry != nullptr ? *options.registry : operator_registry::global();
  runner r(co_await asio::this_coro::executor, registry, options);
  step_path path{nullptr, path_name};
  std::vector<program_step> nodes;
  std::vector<bound_step> bounds(reports.size());
  for (std::size_t i = 0; i < reports.size(); ++i) {
    if (auto st = reports[i].first.validate(); !st) co_return st;
    reports[i].first.freeze();
    nodes.push_back(compile_tree(reports[i].first, nullptr));
    nodes.back().uncommon_fields().every = reports[i].second;
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    step_path rp{&path, nodes[i].name};
    if (!nodes[i].create_ws) {
      if (auto st = r.bind(nodes[i], *ws, bounds[i], &rp); !st) co_return st;
    }
  }
  co_return co_await r.with_reporters(std::move(body), nodes, bounds, ws, &path);
}

}  // namespace

asio::awaitable<status> detail::run_with_reporters(
    asio::awaitable<status> body, const std::vector<std::pair<execution_step, std::chrono::milliseconds>>& reports,
    std::shared_ptr<workspace> ws, run_step_options options, std::string_view path) {
  // Without report steps, the body itself: no frame of its own.
  if (reports.empty()) return body;
  return beside_report_steps(std::move(body), reports, std::move(ws), options, std::string(path));
}

asio::awaitable<status> run_step(execution_step step, std::shared_ptr<workspace> ws, run_step_options options) {
  if (status st = step.validate(); !st) co_return st;
  auto compiled = detail::compile_step(step, &step);
  if (!compiled) co_return compiled.error();
  co_return co_await detail::run_compiled(std::move(compiled).value(), std::move(ws), options);
}

}  // namespace taskgroup
