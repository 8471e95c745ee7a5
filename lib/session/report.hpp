// Internal: what the reports of the local and the MPI session share: the
// report of a run that ended before its tasks ran, the blocking runs'
// ends, the list of tasks a stuck run left waiting.
#pragma once

#include <taskgroup/run_report.hpp>
#include <taskgroup/task_group.hpp>
#include <taskgroup/trace_context.hpp>

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace taskgroup::detail {

// Every task of `group` not run, the run failed with `e`. Inline: the MPI
// library uses it too and links only the core library's public API.
inline run_report refused_report(const task_group& group, error e, std::chrono::system_clock::time_point at) {
  run_report r;
  r.arrived = r.started = r.finished = at;
  r.tasks.reserve(group.tasks().size());
  for (const auto& t : group.tasks()) {
    task_report tr;
    tr.name = t.name();
    tr.node = t.node_name();
    r.tasks.push_back(std::move(tr));
  }
  r.failure = std::move(e);
  return r;
}

// The trace a run runs under: a span of its own under `given`
// (run_options::trace_parent), or a fresh trace when none is given. Both
// sessions decide it so; the MPI session sends it to every rank. Errors:
// a malformed `given`: `errc::invalid_task` naming
// `run_options::trace_parent` and what is wrong.
inline result<trace_context> run_trace(const trace_parent_text& given) {
  if (given.empty()) return trace_context::fresh();
  result<trace_context> parsed = given.parse();
  if (!parsed) return error(parsed.error().code, "run_options::" + parsed.error().message);
  return parsed.value().child();
}

// The error of a run whose deadline passed `after` its start (`doing`:
// what it was doing then when not running, e.g. " waiting for
// admission"), naming its trace so that a log line leads to it:
// "run timed out after 20 ms (trace 4bf9...4736)".
inline error run_timed_out(std::chrono::milliseconds after, std::string_view trace_id, std::string_view doing = {}) {
  std::string message = "run timed out after " + std::to_string(after.count()) + " ms";
  message += doing;
  message += " (trace ";
  message += trace_id;
  message += ')';
  return {errc::timeout, std::move(message)};
}

// The blocking runs' ends, alike on both sessions: the code of `report`
// (none on success), and the report or, on failure, its error thrown.
inline boost::system::error_code report_code(const run_report& report) noexcept {
  return report.failure ? report.failure->code : boost::system::error_code();
}
inline run_report report_or_throw(run_report report) {
  if (report.failure) throw system_error(*report.failure);
  return report;
}

// Where a run stood when its deadline or a cancellation from outside ended
// it: `e` followed by the errors of the tasks that had begun and were
// still running then (each names its step, net, op and what the op waited
// for), the first `max_waiting_listed` of them, and how many more. Both
// sessions end such a run with it, the MPI session over every rank's tasks.
inline constexpr std::size_t max_waiting_listed = 8;
inline error with_waiting_tasks(const std::vector<task_report>& tasks, const error& e) {
  std::string message = e.message;
  std::size_t listed = 0;
  std::size_t more = 0;
  for (const task_report& t : tasks) {
    if (t.status != task_status::cancelled || !t.began || !t.failure) continue;
    if (listed == max_waiting_listed) {
      ++more;
      continue;
    }
    message += listed++ == 0 ? "; still running then: " : "; ";
    message += t.failure->message;
  }
  if (more != 0) message += "; and " + std::to_string(more) + " more";
  return {e.code, std::move(message)};
}

}  // namespace taskgroup::detail
