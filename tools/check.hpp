// taskgroup command: validating a plan and summarising it.
//
// Threading: pure functions (reentrant).
#pragma once

#include <taskgroup/error.hpp>
#include <taskgroup/task_group.hpp>

#include <string>
#include <string_view>

namespace taskgroup::cli {

/// Checks what the plan reader leaves to the session: each task's composed
/// step tree (misuse, instance counts, setup work). Errors name the task.
status validate_group(const task_group& group);

/// A summary of `group` read from `path`: its name when it has one
/// (`group name: "checkout"`) and its workspace type when set; nodes, and
/// per node its tasks (instances, workspace type, outputs, steps and nets),
/// report steps and local setup; totals of steps, nets and ops. Each retry
/// policy that retries gets a line below its task (`retry: 3 attempts,
/// backoff 10 ms x2 up to 1000 ms, jitter, on op_failed, timeout`, or for a
/// step `step "main/fetch" retry: ...`, `init step ...`, `report step
/// ...`), with a note where what a failed attempt wrote is not undone: a
/// global task's policy (`note: a global task: ...`), a step's without
/// `create_workspace` (`note: no create_workspace: ...`).
std::string summarize_group(const task_group& group, std::string_view path);

}  // namespace taskgroup::cli
