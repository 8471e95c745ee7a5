// The coroutine driver: a step's concurrent iterations, over a join of its
// children, or in turn when they cannot wait.
#include "step/coroutine_driver.hpp"

#include "ops/run_scope.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace taskgroup::detail {

bool runner::children_run_in_turn(const program_step& n, const bound_step& b) {
  if (!n.nets.empty() || n.instances() != 1) return false;
  for (std::size_t j = 0, e = n.recurring_size(); j < e; ++j) {
    const std::size_t idx = n.recurring_at(j);
    const program_step& c = n.children[idx];
    if (c.inline_cost == 0 || !is_plain(c) || !has_only_sync_nets(c, b.children[idx])) return false;
  }
  return true;
}

bool runner::run_children_in_turn(const program_step& n, const bound_step& b, const std::vector<step_path>& paths,
                                  const stop_query& stop, yield_clock& clock, in_turn_cursor& at, status& st) {
  for (const std::size_t e = n.recurring_size(); at.k < e;) {
    const std::size_t idx = n.recurring_at(at.k);
    const program_step& c = n.children[idx];
    if (!at.child) at.child.emplace(c, b.children[idx]).begins(ctx_);
    status failure = ok();
    status child_st = ok();
    switch (in_run(ctx_.run, [&] { return run_sync_loop(*at.child, &paths[at.k], stop, clock, ctx_, failure); })) {
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

bool runner::end_child(in_turn_cursor& at, const status& st) {
  at.child->ends(ctx_, st);
  at.child.reset();
  ++at.k;
  return !st;
}

asio::awaitable<status> runner::children_in_turn_after_yield(const program_step& n, workspace& ws, const bound_step& b,
                                                             const std::vector<step_path>& paths,
                                                             const stop_query& stop, yield_clock& clock,
                                                             in_turn_cursor at) {
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

std::vector<step_path> runner::child_paths(const program_step& n, const step_path* path) const {
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

std::size_t runner::concurrent_children(const program_step& n) {
  const std::size_t units = n.nets.empty() ? n.recurring_size() : 1;
  return units * static_cast<std::size_t>(n.instances());
}

asio::awaitable<status> runner::concurrent_iteration(concurrency& plan, const program_step& n, workspace& ws,
                                                     const bound_step& b, const step_path* path) {
  const std::size_t units = n.nets.empty() ? n.recurring_size() : 1;
  const auto instances = static_cast<std::size_t>(n.instances());
  plan.failed = false;
  auto child = [this, &n, &ws, &b, path, &paths = plan.paths, units, instances, failed = &plan.failed](std::size_t k) {
    const std::int64_t instance = instances > 1 ? static_cast<std::int64_t>(k / units) : -1;
    if (*failed) return not_started(n.nets.empty() ? &paths[k] : path, n.nets.empty() ? -1 : instance);
    if (!n.nets.empty()) return nets_instance(b, path, instance, failed);
    const std::size_t idx = n.recurring_at(k % units);
    const program_step& c = n.children[idx];
    // The parent's workspace outlives the iteration (it waits for every
    // child), so a plain child needs neither `exec` nor a reference.
    if (exec_elidable(c)) return iterate(c, ws, b.children[idx], &paths[k], failed);
    return substep_instance(c, shared(ws), b.children[idx], path, instance, failed);
  };
  return spawn_join::round<true>(plan.join, ex_, child, [](std::size_t) { return 0; });
}

asio::awaitable<status> runner::not_started(const step_path* at, std::int64_t instance) {
  step_path path{at, "", instance};
  co_return cancelled_at(instance >= 0 ? &path : at);
}

asio::awaitable<status> runner::nets_instance(const bound_step& b, const step_path* parent, std::int64_t instance,
                                              bool* failed) {
  step_path path{parent, "", instance};
  const step_path* p = instance >= 0 ? &path : parent;
  for (net_instance* inst : b.nets) {
    ctx_.net_begins(*inst);
    status st = ok();
    if (inst->may_wait()) {
      st = co_await run_waiting_net(*inst, p);
    } else {
      const run_context_scope scope(ctx_.run);
      st = inst->run_sync();
    }
    ctx_.net_ends(*inst, st);
    if (!st) {
      *failed = true;
      co_return named_at(std::move(st), p);
    }
  }
  co_return ok();
}

asio::awaitable<status> runner::substep_instance(const program_step& c, std::shared_ptr<workspace> ws,
                                                 const bound_step& b, const step_path* parent, std::int64_t instance,
                                                 bool* failed) {
  step_path path{parent, c.name, instance};
  status st = co_await exec(c, std::move(ws), &b, &path);
  if (!st) *failed = true;
  co_return st;
}

runner::concurrency runner::plan_concurrency(const program_step& n, const bound_step& b, const step_path* path) {
  concurrency plan;
  plan.in_turn = children_run_in_turn(n, b);
  if (concurrent_children(n) > 0) {
    plan.paths = child_paths(n, path);
    // One join for every iteration of this execution: its bookkeeping
    // and the children's signals are made once, not per iteration.
    if (!plan.in_turn) plan.join = std::make_shared<spawn_join>(concurrent_children(n), join_mode::fail_fast);
  }
  return plan;
}

}  // namespace taskgroup::detail
