// taskgroup: execution steps, the trees that tasks run.
//
// An `execution_step` holds nets or substeps (never both) and the fields of
// Caffe2's ExecutionStep (docs/semantics.md, "Execution steps"):
//
// clang-format off
// | builder call | Caffe2 field | meaning |
// |---|---|---|
// | `nets({a, b})`, `add_net(n)` | network | nets run in order each iteration |
// | `substeps({s, t})`, `add_substep(s)` | substep | child steps; an empty child (no nets, no substeps) is dropped |
// | `iterations(n)` | num_iter | default 1; 0 runs nothing |
// | `should_stop_blob("b")` | should_stop_blob | a bool blob checked after every net, every sequential substep, every concurrent iteration; true ends the step with success |
// | `only_once()` | only_once | with a stop blob only: run iteration 0 only |
// | `concurrent_substeps()` | concurrent_substeps | substeps run concurrently, with a barrier per iteration |
// | `run_every(ms)` | run_every_ms | makes the step a report substep of its parent |
// | `create_workspace()` | create_workspace | every execution gets a fresh child workspace and fresh net instances |
// | `concurrent_instances(n)` | num_concurrent_instances | n copies of the children run concurrently |
// | `timeout(ms)` | (ours) | a deadline for one execution of the step |
// | `retry(policy)` | (ours) | run a failed execution of the step again (retry_policy) |
// clang-format on
//
// A step is a handle: copies share one step. Adding a step to another
// freezes it: later builder calls on it (except `run_every`, as in Caffe2)
// are recorded as a misuse that `validate` reports, so a tree is checked as
// a whole before it runs. Builder calls never throw.
//
// Threading: build a step on one thread, then share it read-only
// (reentrant once frozen).
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/error.hpp>
#include <taskgroup/net.hpp>
#include <taskgroup/retry_policy.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace taskgroup {

/// The longest duration accepted anywhere: a step's `timeout` and
/// `run_every`, a report step's interval (`task::report`,
/// `task_group::report_step`), `run_options::timeout`, and the `_ms` keys
/// of plan files. 2^40 ms, about 34.8 years: far inside
/// `std::chrono::steady_clock`'s range, so `now() + d` never overflows.
/// Longer durations are refused with an error naming the field and this
/// limit (`errc::invalid_step`, `errc::invalid_task`, `errc::invalid_plan`).
inline constexpr std::chrono::milliseconds max_duration{std::int64_t{1} << 40};

/// The most concurrent instances of a step (`concurrent_instances`) or of a
/// task (`task::num_instances`), and of their product along any path: a
/// task's `num_instances` times the `concurrent_instances` of every step
/// from its root to a step (that step's included) is the number of copies
/// of that step's children that run at once, and is bounded the same way.
/// Every instance holds a workspace and its own run state, so larger
/// counts exhaust memory instead of running; they are refused with an error
/// naming the step or task (and the step path) and this limit.
inline constexpr std::int64_t max_instances = 65536;

/// The deepest step tree that runs: levels of nested steps, the root step
/// being level 1. `validate` (and so every run) and the plan reader refuse a
/// deeper tree with `errc::invalid_step` (`errc::invalid_plan` in a plan)
/// naming this limit. It counts the levels you build: the steps a session
/// wraps around them (a task's setup, instances and report steps, a node's
/// setup) do not count, so a tree that `validate` or the plan reader
/// accepts runs in any of those places. Building, copying and destroying a
/// deeper tree is safe (no recursion).
inline constexpr std::size_t max_step_depth = 1000;

namespace detail {
struct step_validation;
struct step_access;
}  // namespace detail

/// A node of a step tree (a Caffe2 ExecutionStep).
class TASKGROUP_API execution_step {
 public:
  /// An empty step named `name` (a label; it need not be unique).
  explicit execution_step(std::string name = "step");

  // --- builder -----------------------------------------------------------

  /// Appends nets.
  execution_step& nets(std::vector<net> list);
  execution_step& add_net(net n);
  /// Appends substeps, dropping empty ones; each added child is frozen.
  /// Adding a step to itself is recorded as a misuse (the only cycle a
  /// builder could make). Linear: adding costs the same at any depth.
  execution_step& substeps(std::vector<execution_step> list);
  execution_step& add_substep(execution_step child);
  /// Number of iterations (Caffe2 num_iter). Must be >= 0.
  execution_step& iterations(std::int64_t n);
  /// The stop blob: a bool blob; the step loops until it is true.
  execution_step& should_stop_blob(std::string blob);
  /// With a stop blob only: run iteration 0 only.
  execution_step& only_once(bool on);
  /// Run substeps concurrently (a barrier at the end of each iteration).
  execution_step& concurrent_substeps(bool on);
  /// Makes this step a report substep of its parent, run every `interval`
  /// while the parent runs and once more after it ends. Must be > 0 and at
  /// most `max_duration`.
  execution_step& run_every(std::chrono::milliseconds interval);
  /// Run every execution of this step in a fresh child workspace.
  execution_step& create_workspace(bool on);
  /// Run `n` concurrent copies of the children (1 <= n <= max_instances,
  /// and `n` times the counts of the steps above it at most max_instances).
  execution_step& concurrent_instances(std::int64_t n);
  /// A deadline for one execution of this step: when it expires the step is
  /// cancelled and fails with `errc::timeout`. Must be > 0 and at most
  /// `max_duration`.
  execution_step& timeout(std::chrono::milliseconds d);
  /// How a failed execution of this step (its whole subtree) is run again
  /// (see `retry_policy`; the default runs it once). A failure of the
  /// step's own `timeout` may be retried; the run's deadline and its
  /// cancellation never are. With `create_workspace`, each attempt gets a
  /// fresh child workspace; otherwise what a failed attempt wrote stays.
  /// A tree holding a step with a policy runs on the coroutine driver.
  execution_step& retry(retry_policy policy);

  // --- getters: each named after its setter ------------------------------

  [[nodiscard]] const std::string& name() const noexcept;
  [[nodiscard]] const std::vector<net>& nets() const noexcept;
  [[nodiscard]] const std::vector<execution_step>& substeps() const noexcept;
  /// The count set with `iterations` (Caffe2 num_iter); absent means 1
  /// without a stop blob, unbounded with one.
  [[nodiscard]] std::optional<std::int64_t> iterations() const noexcept;
  [[nodiscard]] const std::optional<std::string>& should_stop_blob() const noexcept;
  [[nodiscard]] bool only_once() const noexcept;
  [[nodiscard]] bool concurrent_substeps() const noexcept;
  /// The interval set with `run_every`, if any (a report substep).
  [[nodiscard]] std::optional<std::chrono::milliseconds> run_every() const noexcept;
  [[nodiscard]] bool create_workspace() const noexcept;
  [[nodiscard]] std::int64_t concurrent_instances() const noexcept;
  [[nodiscard]] std::optional<std::chrono::milliseconds> timeout() const noexcept;
  /// The policy set with `retry` (default: one attempt).
  [[nodiscard]] const retry_policy& retry() const noexcept;

  /// True when the step has neither nets nor substeps.
  [[nodiscard]] bool empty() const noexcept;
  /// True once the step has been added to a parent (or compiled).
  [[nodiscard]] bool frozen() const noexcept;
  /// True when both handles refer to the same step.
  [[nodiscard]] bool same(const execution_step& other) const noexcept { return data_ == other.data_; }

  /// Checks this step and its subtree: misuse recorded by builder calls
  /// (mutating a frozen step, both nets and substeps, num_iter with a stop
  /// blob, only_once without a stop blob, out-of-range values, durations
  /// beyond `max_duration`, instances beyond `max_instances`, alone or
  /// multiplied along a path from this step, a tree deeper than
  /// `max_step_depth`) and two different nets sharing a name. Errors:
  /// `errc::invalid_step` or `errc::duplicate_net`, naming the step path.
  /// Iterative: safe at any depth.
  [[nodiscard]] status validate() const;

 private:
  friend struct detail::step_validation;
  friend struct detail::step_access;
  // Freezes the step and its subtree (its substeps are frozen already).
  void freeze() const noexcept;
  // Records a misuse that `validate` reports (the control-flow helpers
  // reject a bad body this way, without throwing).
  execution_step& mark_invalid(std::string reason);
  // validate() within `max_depth` levels; `deepest`, when given, gets the
  // depth of the tree (validated or not).
  [[nodiscard]] status validate_within(std::size_t max_depth, std::size_t* deepest = nullptr) const;

  struct data;
  bool check_mutable(const char* what);
  std::shared_ptr<data> data_;
};

/// Starts a step: `step("train").nets({a, b}).iterations(100)`.
inline execution_step step(std::string name) { return execution_step(std::move(name)); }

}  // namespace taskgroup
