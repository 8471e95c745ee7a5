// Internal: the step runner's entry points for sessions.
#pragma once

#include <taskgroup/execution_step.hpp>
#include <taskgroup/step_runner.hpp>
#include <taskgroup/workspace.hpp>

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
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

/// Runs `body` while report steps run in `ws` every interval, each with a
/// final run after `body` succeeds (report-substep semantics). `path` names
/// the reporters' parent in errors.
boost::asio::awaitable<status> run_with_reporters(std::function<boost::asio::awaitable<status>()> body,
                                                  std::vector<std::pair<execution_step, std::chrono::milliseconds>> reports,
                                                  std::shared_ptr<workspace> ws, run_step_options options,
                                                  std::string path);

}  // namespace taskgroup::detail
