// The coroutine driver: report steps beside the work they report on.
#include "step/coroutine_driver.hpp"

#include "model/step_access.hpp"

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

asio::awaitable<status> runner::with_reporters(asio::awaitable<status> body, const std::vector<program_step>& reports,
                                               std::vector<bound_step>& bounds, std::shared_ptr<workspace> ws,
                                               const step_path* path) {
  auto started = [&body] { return std::move(body); };
  co_return co_await beside_reports(started, reports.size(), [&](std::size_t i, report_control& ctl) {
    return report_loop(reports[i], ws, bounds[i], path, ctl);
  });
}

asio::awaitable<status> runner::finish_after(asio::awaitable<status> body, report_control& ctl) {
  status st = co_await std::move(body);
  if (st) ctl.finish();
  co_return st;
}

asio::awaitable<status> runner::report_loop(const program_step& r, std::shared_ptr<workspace> ws, const bound_step& b,
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

namespace {

// run_with_reporters with report steps.
asio::awaitable<status> beside_report_steps(asio::awaitable<status> body,
                                            std::vector<std::pair<execution_step, std::chrono::milliseconds>> reports,
                                            std::shared_ptr<workspace> ws, run_step_options options,
                                            const observation& observed, std::string path_name,
                                            const run_context* run) {
  const operator_registry& registry = options.registry != nullptr ? *options.registry : operator_registry::global();
  runner r(co_await asio::this_coro::executor, registry, options, observed, {}, run);
  step_path path{nullptr, path_name};
  std::vector<program_step> nodes;
  std::vector<bound_step> bounds(reports.size());
  for (std::size_t i = 0; i < reports.size(); ++i) {
    if (auto st = reports[i].first.validate(); !st) co_return st;
    step_access::freeze(reports[i].first);
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

asio::awaitable<status> run_with_reporters(
    asio::awaitable<status> body, const std::vector<std::pair<execution_step, std::chrono::milliseconds>>& reports,
    std::shared_ptr<workspace> ws, run_step_options options, const observation& observed, std::string_view path,
    const run_context* run) {
  // Without report steps, the body itself: no frame of its own.
  if (reports.empty()) return body;
  return beside_report_steps(std::move(body), reports, std::move(ws), options, observed, std::string(path), run);
}

}  // namespace taskgroup::detail
