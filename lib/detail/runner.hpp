// Internal: the step runner's entry points for sessions.
#pragma once

#include <taskgroup/execution_step.hpp>
#include <taskgroup/step_runner.hpp>
#include <taskgroup/workspace.hpp>

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace taskgroup::detail {

/// A validated snapshot of a step tree, compiled once and run many times.
struct compiled_step;

/// Compiles `s`; `counted` (if given) is the step whose iterations go to
/// `step_stats::iterations`. Errors: `execution_step::validate`'s.
result<std::shared_ptr<const compiled_step>> compile_step(const execution_step& s,
                                                          const execution_step* counted = nullptr);

/// Runs a compiled tree in `ws` (on the strand owning `ws`).
boost::asio::awaitable<status> run_compiled(std::shared_ptr<const compiled_step> s, std::shared_ptr<workspace> ws,
                                            run_step_options options);

/// Runs a compiled tree in `ws` to its end without suspending, when the
/// tree allows it: a bounded number of iterations (at most
/// `options.yield_every` net runs and child executions), only synchronous
/// nets, no deadline, report step, concurrency or nested own workspace, no
/// observer. Returns the tree's status then (as `run_compiled` would), or
/// nullopt, having run nothing, when the tree needs the coroutine runner.
/// Call on the strand owning `ws`.
/// True when `s`'s structure allows `run_compiled_inline` (its nets may
/// still turn out asynchronous when bound).
bool may_run_inline(const compiled_step& s) noexcept;

/// The name of the tree's root step (the first component of its paths).
std::string_view root_name(const compiled_step& s) noexcept;

std::optional<status> run_compiled_inline(const compiled_step& s, workspace* ws, const run_step_options& options);

/// Runs `body` while report steps run in `ws` every interval, each with a
/// final run after `body` succeeds (report-substep semantics). `path` names
/// the reporters' parent in errors.
boost::asio::awaitable<status> run_with_reporters(
    std::function<boost::asio::awaitable<status>()> body,
    std::vector<std::pair<execution_step, std::chrono::milliseconds>> reports, std::shared_ptr<workspace> ws,
    run_step_options options, std::string path);

}  // namespace taskgroup::detail
