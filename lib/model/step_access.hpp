// Internal: what the library does to steps that their builder does not
// offer.
#pragma once

#include <taskgroup/execution_step.hpp>

#include <string>
#include <utility>

namespace taskgroup::detail {

struct step_access {
  /// A new, unfrozen step with the contents of `s` at its own level (name,
  /// settings, a recorded misuse) and the same nets and substeps (shared,
  /// as when one step is added in two places): so that a setting made on
  /// the copy (a task report step's interval) leaves `s`, which its owner
  /// may use elsewhere, unchanged.
  static execution_step copy_level(const execution_step& s);
  /// Freezes `s` and its subtree (its substeps are frozen already): what
  /// adding it to a parent or compiling it does.
  static void freeze(const execution_step& s) noexcept { s.freeze(); }
  /// Records a misuse of `s` that its `validate` reports: the control-flow
  /// helpers reject a bad body this way, without throwing.
  static execution_step& mark_invalid(execution_step& s, std::string reason) {
    return s.mark_invalid(std::move(reason));
  }
};

}  // namespace taskgroup::detail
