// Internal: the group's description that rank 0 sends in START and every
// rank compares with its own (docs/mpi-protocol.md): one line per fact
// every rank must agree on (the ranks, each node's rank, each task's node
// and outputs, each retry policy that retries, of a task or of a step,
// every field of it, each remote net).
#pragma once

#include "mpi/state.hpp"

#include <taskgroup/error.hpp>
#include <taskgroup/task_group.hpp>

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace taskgroup::detail::mpi {

/// A group's placement and its description.
struct group_description {
  const void* group = nullptr;  // the group's state, while `alive` holds
  std::weak_ptr<const void> alive;
  std::map<std::string, int> where;
  std::vector<std::string> lines;
  std::string text;  // the lines, each ended by '\n'
};

/// The placement and description of `g` on session `s`, kept on the session
/// for its next runs once the group is used. Errors: those of
/// session_state::place.
result<std::shared_ptr<const group_description>> describe_group(session_state& s, const task_group& g);

/// The lines of a description's text.
std::vector<std::string> split_lines(std::string_view text);

/// `errc::group_mismatch` naming the first difference between rank 0's
/// description and that of `rank`.
error group_mismatch(int rank, const std::vector<std::string>& client, const std::vector<std::string>& mine);

}  // namespace taskgroup::detail::mpi
