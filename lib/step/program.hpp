// Internal: the step program. A compiled step tree (a snapshot immune to
// later edits of the execution_step it came from), its binding in a
// workspace, and the step paths that errors name. Both step drivers run
// it; the rules they follow are in machine.hpp.
#pragma once

#include <taskgroup/error.hpp>
#include <taskgroup/execution_step.hpp>
#include <taskgroup/net.hpp>
#include <taskgroup/operator.hpp>
#include <taskgroup/workspace.hpp>

#include <boost/container/small_vector.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace taskgroup::detail {

// A step tree snapshot: what a run executes, immune to later edits. A
// group keeps one per task while it is cached, so the fields most steps
// leave unset live apart, made only for a step that sets one.
struct program_step {
  struct uncommon {
    std::optional<std::string> stop;
    std::optional<std::chrono::milliseconds> timeout;
    std::chrono::milliseconds every{0};
    std::vector<std::size_t> reports;    // children with run_every
    std::vector<std::size_t> recurring;  // when there are reports: the other children
    std::int64_t instances = 1;
    std::optional<retry_policy> retry;  // set when it retries
  };

  std::string name;
  // Inline room for a step of one net (a task's, typically).
  boost::container::small_vector<net, 1> nets;
  std::vector<program_step> children;
  std::int64_t num_iter = 1;
  // Net runs and child executions of one execution when the subtree can
  // run to its end without suspending (bounded iterations; no deadline,
  // report step, concurrency or nested own workspace); 0 when it cannot.
  std::uint32_t inline_cost = 0;
  std::unique_ptr<uncommon> extra;  // null: every field of `rare` at its default
  bool only_once = false;
  bool concurrent = false;
  bool create_ws = false;
  bool counted = false;  // its iterations go to step_stats::iterations

  [[nodiscard]] const std::optional<std::string>& stop() const noexcept { return extra ? extra->stop : none().stop; }
  [[nodiscard]] const std::optional<std::chrono::milliseconds>& timeout() const noexcept {
    return extra ? extra->timeout : none().timeout;
  }
  [[nodiscard]] std::chrono::milliseconds every() const noexcept { return extra ? extra->every : none().every; }
  [[nodiscard]] const std::vector<std::size_t>& reports() const noexcept {
    return extra ? extra->reports : none().reports;
  }
  [[nodiscard]] std::int64_t instances() const noexcept { return extra ? extra->instances : 1; }
  /// Its retry policy when it retries (execution_step::retry), else null.
  [[nodiscard]] const retry_policy* retry() const noexcept { return extra && extra->retry ? &*extra->retry : nullptr; }
  // The children run in each iteration (those without run_every), by
  // position: every child unless some are report steps.
  [[nodiscard]] std::size_t recurring_size() const noexcept {
    return extra && !extra->reports.empty() ? extra->recurring.size() : children.size();
  }
  [[nodiscard]] std::size_t recurring_at(std::size_t j) const noexcept {
    return extra && !extra->reports.empty() ? extra->recurring[j] : j;
  }
  uncommon& uncommon_fields() {
    if (!extra) extra = std::make_unique<uncommon>();
    return *extra;
  }

 private:
  static const uncommon& none() noexcept {
    static const uncommon r;
    return r;
  }
};

/// The net runs and child executions of one execution of `n` when its
/// subtree can run to its end without suspending (see
/// program_step::inline_cost); `root`: `n` is the tree's root, whose own
/// workspace does not keep it off that path.
std::uint32_t inline_cost(const program_step& n, bool root);

/// Compiles `s` (validated by the caller); `counted` is the step whose
/// iterations go to step_stats::iterations.
program_step compile_tree(const execution_step& s, const execution_step* counted);

// Nets and stop blob of a subtree, bound in one workspace.
struct bound_step {
  // Inline room for the common step of one net: binding a task's step
  // allocates nothing here (a waiting task holds one).
  boost::container::small_vector<net_instance*, 1> nets;
  blob* stop = nullptr;
  std::vector<bound_step> children;  // empty entries for children with their own workspace
};

// The step path, kept on the coroutine frames and rendered only on error.
struct step_path {
  const step_path* parent;
  std::string_view name;
  std::int64_t instance = -1;  // >= 0: an "instance k" component before the name
};

/// The path `p` as text: `root/child/instance 2/grandchild`.
std::string render(const step_path* p);
/// `e` with the path before its message.
error at(const step_path* p, const error& e);
/// An error `code` at path `p`: `path: what`.
error at(const step_path* p, errc code, const std::string& what);
/// A cancellation at `p`.
status cancelled_at(const step_path* p);

/// Binds `n` and, down to any create_workspace boundary, its subtree in
/// `ws`: net instances and the stop blob. Errors: a net that cannot be
/// instantiated, a stop blob that does not exist (`errc::blob_not_found`).
status bind_step(const program_step& n, workspace& ws, const operator_registry& registry, bound_step& b,
                 const step_path* path);

/// A validated snapshot of a step tree, compiled once and run many times.
struct compiled_step {
  program_step root;
};

}  // namespace taskgroup::detail
