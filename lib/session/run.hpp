// Internal: a run as a whole, on the session's coordinator strand (the
// local session's begin, in session.cpp, compiles and checks it first).
#pragma once

#include "session/state.hpp"

#include <memory>

namespace taskgroup::detail {

// Starts every node of the checked run `rs` (its records, outputs and
// node parts made, its probe attached, its observer told, its deadline
// armed); the run ends once they all have. On the coordinator.
void start_nodes(const std::shared_ptr<run_state>& rs);

// Ends `rs` before it started anything: every task not run, the run failed
// with `e`. On the coordinator.
void refuse_run(const std::shared_ptr<run_state>& rs, const error& e);

// Terminal or partial cancellation from the caller: every node is asked to
// stop (or, not started yet, never starts). On the coordinator.
void cancel_run(const std::shared_ptr<run_state>& rs);

// Connects the caller's cancellation slot (rs->done) to `cancel_run`,
// through the coordinator; total cancellation is ignored. At initiation.
void follow_cancellation(const std::shared_ptr<run_state>& rs);

}  // namespace taskgroup::detail
