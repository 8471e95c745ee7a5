// taskgroup: control flow built from execution steps.
//
// The helpers of Caffe2's control.py and net_builder, as functions that
// take the body as an argument: there are no builder contexts
// (docs/semantics.md, "Control-flow helpers"). Each returns an ordinary
// `execution_step` built from `should_stop_blob`, `only_once` and small
// nets of built-in operators, so the result can be nested, run, and written
// to a plan file.
//
// A body is a net, a step, or a list of nets, steps and stop markers
// (`stop_if`, `stop`). A stop marker ends the innermost helper that owns
// the body (a loop iteration ends the loop; in an `if_` branch it ends
// only that branch), exactly like net_builder's stop_if.
//
// Conditions are a bool blob name, or a net whose last op's first output
// is the bool condition (the net runs where the condition is evaluated).
//
// Names: every helper takes a name; the blobs and nets it creates are
// named after it (`<name>/stop`, `<name>/iter`, ...). Two helpers that
// share one workspace need different names.
//
// Threading: pure functions over value types (reentrant).
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/execution_step.hpp>
#include <taskgroup/net.hpp>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace taskgroup {

/// A condition: a bool blob, or a net computing it.
class TASKGROUP_API condition {
 public:
  /// The bool blob `blob`.
  condition(std::string blob) : blob_(std::move(blob)) {}  // NOLINT(google-explicit-constructor)
  condition(const char* blob) : blob_(blob) {}             // NOLINT(google-explicit-constructor)
  /// The first output of `n`'s last op (computed by running `n`).
  condition(net n);  // NOLINT(google-explicit-constructor)

  [[nodiscard]] const std::string& blob() const noexcept { return blob_; }
  [[nodiscard]] const std::optional<net>& computing_net() const noexcept { return net_; }

 private:
  std::string blob_;
  std::optional<net> net_;
};

/// A stop marker: ends the innermost helper owning the body when `cond`
/// holds (`stop()` always).
struct TASKGROUP_API stop_marker {
  std::optional<condition> cond;  // empty: unconditional
};

/// `stop_if(cond)`: stop the owning helper when `cond` is true.
inline stop_marker stop_if(condition cond) { return stop_marker{std::move(cond)}; }
/// `stop()`: stop the owning helper unconditionally.
inline stop_marker stop() { return stop_marker{}; }

/// The body of a control-flow helper: nets, steps and stop markers.
class TASKGROUP_API body {
 public:
  using item = std::variant<net, execution_step, stop_marker>;

  body() = default;
  body(net n) { items_.emplace_back(std::move(n)); }             // NOLINT(google-explicit-constructor)
  body(execution_step s) { items_.emplace_back(std::move(s)); }  // NOLINT(google-explicit-constructor)
  body(stop_marker m) { items_.emplace_back(std::move(m)); }     // NOLINT(google-explicit-constructor)
  body(std::vector<net> nets);                                   // NOLINT(google-explicit-constructor)
  body(std::vector<execution_step> steps);                       // NOLINT(google-explicit-constructor)
  /// A mixed list; nested bodies are flattened.
  body(std::initializer_list<body> parts);

  [[nodiscard]] const std::vector<item>& items() const noexcept { return items_; }
  [[nodiscard]] bool has_stop() const noexcept;

 private:
  std::vector<item> items_;
};

/// Appends the items of `b` to `s` as substeps, each net wrapped in a step
/// of its own (setup work, group bodies). A stop marker has no helper to
/// end here: it is recorded as a misuse that `s.validate()` reports.
TASKGROUP_API execution_step& append_body(execution_step& s, const body& b);

/// Runs `b` once, in order (control.py Do). Stop markers end the block.
TASKGROUP_API execution_step do_(std::string name, body b);

/// Runs the items of `b` concurrently (control.py DoParallel).
TASKGROUP_API execution_step do_parallel(std::string name, body b);

/// Runs `b` `n` times; blob `<name>/iter` counts 0 .. n-1 during the
/// body (net_builder loop(iters)). A stop marker ends the loop early.
/// The counter is reset on every entry: inside an enclosing loop, or in a
/// GLOBAL group run again, each entry runs `n` iterations.
TASKGROUP_API execution_step loop(std::string name, std::int64_t n, body b);

/// Runs `b` as many times as int64 blob `count_blob` says when the loop is
/// entered (net_builder loop(iters) with a blob; a count <= 0 runs nothing).
/// The count is read once per entry: a body that changes `count_blob`
/// changes the next entry, not this one. `<name>/iter` counts as above.
/// Errors at run time: the blob does not exist when the loop binds
/// (`errc::blob_not_found`), or holds no int64 (`errc::type_mismatch`, from
/// the comparison, naming the loop's nets). Written to a plan as plain
/// steps of built-in operators, like every helper.
TASKGROUP_API execution_step loop(std::string name, std::string count_blob, body b);

/// Runs `b` until a stop marker in it fires (net_builder loop()). Errors
/// at run time (`errc::invalid_step`) when `b` has no stop marker:
/// "requires a stop condition to be set with stop or stop_if".
TASKGROUP_API execution_step loop(std::string name, body b);

/// The counter blob of a counted `loop` named `name`.
TASKGROUP_API std::string loop_iter_blob(const std::string& name);

/// The conditional loops below reset their stop blob (`<name>/stop`) each
/// time they are entered, as Caffe2's control.py does: a loop entered again
/// (inside an enclosing loop, or in a GLOBAL group run again) behaves as on
/// its first entry. Each is a step `<name>` holding `init` (the reset) and
/// `body` (the loop).
///
/// While `cond` holds, runs `b` (cond evaluated before each iteration).
TASKGROUP_API execution_step while_(std::string name, condition cond, body b);
/// Until `cond` holds, runs `b` (cond evaluated before each iteration).
TASKGROUP_API execution_step until(std::string name, condition cond, body b);
/// Runs `b`, then repeats while `cond` holds (cond evaluated after).
TASKGROUP_API execution_step do_while(std::string name, condition cond, body b);
/// Runs `b`, then repeats until `cond` holds (cond evaluated after).
TASKGROUP_API execution_step do_until(std::string name, condition cond, body b);

/// Runs `then_body` once if `cond` holds, else `else_body` once (if any).
/// A stop marker in a branch ends only that branch.
TASKGROUP_API execution_step if_(std::string name, condition cond, body then_body,
                                 std::optional<body> else_body = std::nullopt);
/// Runs `b` once if `cond` does not hold.
TASKGROUP_API execution_step if_not(std::string name, condition cond, body b);

/// `if_` whose branches run in scoped child workspaces (net_builder
/// IfNet/Else): blobs visible outside are written through, blobs first
/// created inside a branch are gone afterwards.
TASKGROUP_API execution_step if_net(std::string name, condition cond, body then_body,
                                    std::optional<body> else_body = std::nullopt);
/// `while_` whose body runs in a scoped child workspace per iteration
/// (net_builder WhileNet + Condition).
TASKGROUP_API execution_step while_net(std::string name, condition cond, body b);

/// Runs every case whose condition holds, in order (control.py Switch).
TASKGROUP_API execution_step switch_(std::string name, std::vector<std::pair<condition, body>> cases);
/// Runs every case whose condition does not hold (control.py SwitchNot).
TASKGROUP_API execution_step switch_not(std::string name, std::vector<std::pair<condition, body>> cases);

/// Runs `b` once; blob `has_stopped_blob(name)` is true afterwards exactly
/// when a stop marker in `b` halted it (net_builder stop_guard).
TASKGROUP_API execution_step stop_guard(std::string name, body b);
/// The has-stopped blob of a `stop_guard` named `name`.
TASKGROUP_API std::string has_stopped_blob(const std::string& name);

}  // namespace taskgroup
