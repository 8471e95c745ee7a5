// Internal: what a run keeps of each task while it is in flight, and how
// that becomes the task's report.
#pragma once

#include <taskgroup/blob.hpp>
#include <taskgroup/error.hpp>
#include <taskgroup/run_report.hpp>

#include "session/compiled.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace taskgroup::detail {

/// A task's report while the run is in flight: a fifth of a task_report's
/// size (every waiting task holds one), made into the report at the end.
/// Its outputs, fetched once its node's tasks have all ended, are kept by
/// its node's part of the run (node_run::outputs).
struct task_record {
  std::chrono::system_clock::time_point started{};
  std::chrono::system_clock::time_point finished{};
  std::uint64_t iterations = 0;
  std::unique_ptr<error> failure;  ///< when failed or cancelled
  task_status status = task_status::not_run;
  bool unstarted = false;     ///< cancelled before it began (cancel_unstarted)
  std::uint16_t retries = 0;  ///< attempts after the first (at most retry_policy::max_attempts_limit)
};

/// A task's outputs as one run fetched them: values, and the errors of the
/// blobs that had none.
struct fetched_outputs {
  std::vector<std::pair<std::string, std::shared_ptr<const blob>>> values;
  std::vector<std::pair<std::string, error>> errors;
};

/// Fills `out`, a new report, as task `ct`'s from its record and, when
/// given, its fetched outputs (moved from).
void fill_report(task_report& out, const compiled_task& ct, const task_record& r, fetched_outputs* outputs);
/// The report of task `ct` from its record, without outputs.
task_report report_of(const compiled_task& ct, const task_record& r);

}  // namespace taskgroup::detail
