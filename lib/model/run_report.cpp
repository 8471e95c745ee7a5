// What a run reports: the report's queries.
#include <taskgroup/run_report.hpp>
#include <taskgroup/task_group.hpp>

#include "model/task_access.hpp"

#include <algorithm>
#include <optional>
#include <string_view>

namespace taskgroup {

std::string_view to_string(task_status s) noexcept {
  switch (s) {
    case task_status::succeeded: return "succeeded";
    case task_status::failed: return "failed";
    case task_status::cancelled: return "cancelled";
    case task_status::not_run: return "not run";
  }
  return "unknown";
}

bool run_report::of(const task_group& g) const noexcept {
  return detail::group_access::ran(*this, detail::group_access::identity(g));
}

bool run_report::ok() const noexcept {
  return std::all_of(tasks.begin(), tasks.end(),
                     [](const task_report& t) { return t.status == task_status::succeeded; });
}

const task_report* run_report::find(std::string_view name) const noexcept {
  for (const auto& t : tasks) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::optional<error> run_report::first_failure() const {
  for (const auto& t : tasks) {
    if (t.failure) return t.failure;
  }
  return std::nullopt;
}

const std::vector<error>& run_report::attempt_failures(std::size_t k) const noexcept {
  static const std::vector<error> none;
  for (const task_retries& r : retries) {
    if (r.task == k) return r.failures;
  }
  return none;
}

}  // namespace taskgroup
