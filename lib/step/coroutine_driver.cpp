// The coroutine driver: one step execution, its deadline, and its
// iterations as the step machine decides them.
#include "step/coroutine_driver.hpp"

#include "ops/queues.hpp"
#include "ops/run_scope.hpp"
#include "step/retry.hpp"

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

void runner::watch(wait_site& site, const net_instance& inst, const step_path* path) {
  if (sites_.sites == nullptr) return;
  site.task = sites_.task;
  site.path = path;
  site.inst = &inst;
  sites_.sites->push_back(site);
}

status runner::told_if_starved(const net_instance& inst, std::uint32_t op, status st) const {
  if (st || !st.error().is_cancelled() || !starved(inst, op, sites_.feeders)) return st;
  return error(st.error().code, st.error().message + std::string(no_producer_left));
}

status runner::bind(const program_step& n, workspace& ws, bound_step& b, const step_path* path) {
  return bind_step(n, ws, registry_, b, path);
}

asio::awaitable<status> runner::exec_once(const program_step& n, std::shared_ptr<workspace> ws, const bound_step* b,
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

asio::awaitable<status> runner::retried(const program_step& n, std::shared_ptr<workspace> ws, const bound_step* b,
                                        const step_path* path) {
  const retry_policy& policy = *n.retry();
  const asio::cancellation_state cs = co_await asio::this_coro::cancellation_state;
  const run_scope* scope = ctx_.run != nullptr ? ctx_.run->scope() : nullptr;
  const std::optional<std::chrono::steady_clock::time_point> deadline =
      scope != nullptr ? scope->deadline : std::nullopt;
  for (int attempt = 1;; ++attempt) {
    status st = ok();
    {
      // Its offloaded ops are told where the enclosing task's are.
      const run_context ctx(scope, attempt, policy.max_attempts,
                            ctx_.run != nullptr ? ctx_.run->offloads_told() : nullptr);
      runner inner(*this, &ctx);
      st = co_await inner.exec_once(n, ws, b, path);
    }
    if (st) co_return st;
    // The step's own timeout is a failure of the attempt (errc::timeout);
    // the run's deadline and its cancellation reach it as a cancellation,
    // which is never retried.
    const bool stopping = cs.cancelled() != asio::cancellation_type::none;
    const retry_decision d = decide_retry(policy, attempt, st.error(), stopping, deadline);
    if (d.what == retry_decision::kind::end) co_return st;
    if (d.what == retry_decision::kind::past_deadline) co_return past_deadline(st.error(), attempt, policy, d.wait);
    if (ctx_.told(observe::steps)) {
      ctx_.observed->observer->retry_wait(ctx_.observed->at, n.name, attempt + 1, policy.max_attempts, d.wait,
                                          st.error());
    }
    const error after = st.error();
    retry_wait waiting{attempt + 1, policy.max_attempts, std::chrono::steady_clock::now() + d.wait, &after};
    wait_site site;
    site.retry = &waiting;
    if (sites_.sites != nullptr) {
      site.task = sites_.task;
      site.path = path;
      sites_.sites->push_back(site);
    }
    asio::steady_timer timer(ex_, waiting.due);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    site.unlink();
    if (ec || cs.cancelled() != asio::cancellation_type::none) {
      co_return at(path, cancelled_waiting(attempt + 1, policy.max_attempts,
                                           waiting.due - std::chrono::steady_clock::now(), after));
    }
    // The next attempt starts: the session's metrics count it.
    if (scope != nullptr) scope->step_retries.fetch_add(1, std::memory_order_relaxed);
  }
}

asio::awaitable<status> runner::timed(step_machine& m, const std::shared_ptr<workspace>& ws, const step_path* path,
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

asio::awaitable<status> runner::kept(asio::awaitable<status> work, status& out) {
  out = co_await std::move(work);
  co_return out;
}

asio::awaitable<status> runner::deadline(std::chrono::milliseconds limit, const step_path* path) {
  asio::steady_timer timer(ex_, limit);
  auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  if (ec) co_return cancelled_at(path);
  co_return at(path, errc::timeout, "timed out after " + std::to_string(limit.count()) + " ms");
}

asio::awaitable<status> runner::iterate_beside_reports(step_machine& m, const std::shared_ptr<workspace>& ws,
                                                       const step_path* path) {
  const program_step& n = m.step();
  if (n.reports().empty()) return iterate(m, *ws, path);
  return beside_reports([&m, &ws, path, this]() { return iterate(m, *ws, path); }, n.reports().size(),
                        [&n, &m, &ws, path, this](std::size_t i, report_control& ctl) {
                          const std::size_t idx = n.reports()[i];
                          return report_loop(n.children[idx], ws, m.bound().children[idx], path, ctl);
                        });
}

asio::awaitable<status> runner::run_waiting_net(net_instance& inst, const step_path* path) {
  wait_site site;
  watch(site, inst, path);
  // The net's run moves site.op to the op it waits in: read it after.
  status st = co_await run_net_at(inst, &site.op, ctx_.run);
  co_return told_if_starved(inst, site.op, std::move(st));
}

status runner::named_at(status st, const step_path* path) {
  if (!st) return at(path, st.error());
  return st;
}

asio::awaitable<status> runner::iterate(step_machine& m, workspace& ws, const step_path* path) {
  asio::cancellation_state cs = co_await asio::this_coro::cancellation_state;
  yield_clock clock{yield_every_, 0, yield_slice_};
  co_return co_await drive(m, ws, path, stop_query{&cs}, clock);
}

asio::awaitable<status> runner::iterate(const program_step& n, workspace& ws, const bound_step& b,
                                        const step_path* path, bool* failed) {
  asio::cancellation_state cs = co_await asio::this_coro::cancellation_state;
  step_machine m(n, b);
  yield_clock clock{yield_every_, 0, yield_slice_};
  status st = co_await drive(m, ws, path, stop_query{&cs}, clock);
  if (!st && failed != nullptr) *failed = true;
  co_return st;
}

asio::awaitable<status> runner::drive(step_machine& m, workspace& ws, const step_path* path, const stop_query& stop,
                                      yield_clock& clock) {
  const program_step& n = m.step();
  const bound_step& b = m.bound();
  const bool concurrent = runs_concurrently(n);
  concurrency plan = concurrent ? plan_concurrency(n, b, path) : concurrency{};
  if (!concurrent && has_only_sync_nets(n, b)) {
    // The common loop runs in a plain function, back here only to yield.
    for (;;) {
      if (std::optional<status> end = sync_loop(m, path, stop, clock)) co_return std::move(*end);
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
          const run_context_scope scope(ctx_.run);
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
        if (plan.in_turn) {
          in_turn_cursor at;
          if (!run_children_in_turn(n, b, plan.paths, stop, clock, at, st)) {
            st = co_await children_in_turn_after_yield(n, ws, b, plan.paths, stop, clock, std::move(at));
          }
        } else if (plan.join) {
          // Turns what an awaited Asio operation throws (cancellation of
          // an already-cancelled coroutine) into a status, as `guarded`.
          try {
            st = co_await concurrent_iteration(plan, n, ws, b, path);
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

std::optional<status> runner::sync_loop(step_machine& m, const step_path* path, const stop_query& stop,
                                        yield_clock& clock) {
  status failure = ok();
  switch (in_run(ctx_.run, [&] { return run_sync_loop(m, path, stop, clock, ctx_, failure); })) {
    case loop_exit::end: return ok();
    case loop_exit::failed:
    case loop_exit::bad_stop: return failure;
    case loop_exit::cancelled: return cancelled_at(path);
    case loop_exit::yield: break;
  }
  return std::nullopt;
}

asio::awaitable<bool> runner::yield(const asio::cancellation_state& cs) {
  try {
    co_await asio::post(ex_, asio::use_awaitable);
  } catch (...) {
    co_return false;
  }
  co_return cs.cancelled() == asio::cancellation_type::none;
}

asio::awaitable<status> runner::guarded(asio::awaitable<status> a) {
  try {
    co_return co_await std::move(a);
  } catch (...) {
    co_return detail::error_from_exception(std::current_exception());
  }
}

}  // namespace taskgroup::detail
