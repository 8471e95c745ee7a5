// The step engine's entry points: a compiled tree run on the coroutine
// driver (run_compiled, run_step), and where a waiting net run stands.
#include "step/coroutine_driver.hpp"

#include "ops/queues.hpp"
#include "step/retry.hpp"

#include <boost/asio/this_coro.hpp>

#include <memory>
#include <string>
#include <utility>

namespace taskgroup {

namespace asio = boost::asio;

namespace detail {

std::string where(const wait_site& s, const std::uint32_t* feeders) {
  if (s.retry != nullptr) {
    const retry_wait& r = *s.retry;
    return at(s.path, error(errc::cancelled, waiting_to_retry(r.next_attempt, r.max_attempts,
                                                              r.due - std::chrono::steady_clock::now(), *r.after)))
        .message;
  }
  std::string what = op_waiting(*s.inst, s.op, net_access::blocked(*s.inst, s.op));
  if (starved(*s.inst, s.op, feeders)) what += no_producer_left;
  return at(s.path, error(errc::cancelled, std::move(what))).message;
}

asio::awaitable<status> run_compiled(std::shared_ptr<const compiled_step> s, std::shared_ptr<workspace> ws,
                                     run_step_options options, const observation& observed, site_registry sites,
                                     const run_context* run) {
  if (!ws) co_return fail(errc::invalid_step, "run_step: no workspace");
  const operator_registry& registry = options.registry != nullptr ? *options.registry : operator_registry::global();
  runner r(co_await asio::this_coro::executor, registry, options, observed, sites, run);
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

}  // namespace detail

asio::awaitable<status> run_step(execution_step step, std::shared_ptr<workspace> ws, run_step_options options) {
  if (status st = step.validate(); !st) co_return st;
  auto compiled = detail::compile_step(step, &step);
  if (!compiled) co_return compiled.error();
  // Asked once, as a session's run asks its observer.
  const detail::observation observed = detail::observe_with(options.observer);
  co_return co_await detail::run_compiled(std::move(compiled).value(), std::move(ws), options, observed);
}

}  // namespace taskgroup
