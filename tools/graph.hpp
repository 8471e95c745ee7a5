// taskgroup command: a task group as a Graphviz DOT graph.
//
// One cluster per node (labelled with the node and its options), holding a
// node anchor, the node's local init and exit work, its group report
// steps, and one graph node per task (full name, instances, workspace
// type, outputs, `retry x3` for a policy that retries). Each task points
// at its step tree (and its init, exit, instance init/exit and report
// steps); steps are rounded boxes showing their fields (iterations, stop
// blob, concurrency, interval, workspace, instances, timeout, `retry x3`);
// nets are boxes listing their ops as
// `Type(inputs) -> outputs [args]`. Edges into the children of a
// sequential step are numbered in execution order. Every label is escaped
// (`dot_escape`); a long op line is cut at a character boundary.
//
// Threading: pure function (reentrant).
#pragma once

#include <taskgroup/task_group.hpp>

#include <string>
#include <string_view>

namespace taskgroup::cli {

/// The DOT text of `group`; `title` labels the graph (e.g. the plan file),
/// with a second line `group "<name>"` for a named group.
std::string group_to_dot(const task_group& group, std::string_view title);

/// `s` as the inside of a DOT double-quoted string: its control characters
/// shown as escapes (`escape_controls`: a newline is shown as `\n`, not
/// a line break), then `\` and `"` escaped, so that the DOT is valid and
/// the text is one line of one label.
std::string dot_escape(std::string_view s);

}  // namespace taskgroup::cli
