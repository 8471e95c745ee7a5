// Internal: the report of a run that ended before its tasks ran, shared
// by the local and the MPI session.
#pragma once

#include <taskgroup/run_report.hpp>
#include <taskgroup/task_group.hpp>

#include <chrono>
#include <utility>

namespace taskgroup::detail {

// Every task of `group` not run, the run failed with `e`. Inline: the MPI
// library uses it too and links only the core library's public API.
inline run_report refused_report(const task_group& group, error e, std::chrono::system_clock::time_point at) {
  run_report r;
  r.started = r.finished = at;
  r.tasks.reserve(group.tasks().size());
  for (const auto& t : group.tasks()) {
    task_report tr;
    tr.name = task_full_name(*t.state());
    tr.node = t.node_name();
    r.tasks.push_back(std::move(tr));
  }
  r.failure = std::move(e);
  return r;
}

// The report of a run that went well, or the run's failure: what `run`
// and `run_blocking` complete with.
inline result<run_report> result_of(run_report r) {
  if (r.failure) return *r.failure;
  return r;
}

}  // namespace taskgroup::detail
