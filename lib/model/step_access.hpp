// Internal: what the library does to steps that their builder does not
// offer.
#pragma once

#include <taskgroup/execution_step.hpp>

namespace taskgroup::detail {

struct step_access {
  /// A new, unfrozen step with the contents of `s` at its own level (name,
  /// settings, a recorded misuse) and the same nets and substeps (shared,
  /// as when one step is added in two places): so that a setting made on
  /// the copy (a task report step's interval) leaves `s`, which its owner
  /// may use elsewhere, unchanged.
  static execution_step copy_level(const execution_step& s);
};

}  // namespace taskgroup::detail
