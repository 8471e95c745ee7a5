// Internal: a workspace made new again, for the session's PRIVATE tasks. A
// task that ends on the node's strand hands its workspace, which nothing
// else holds any more, to the next task of its node rather than freeing
// it: emptied when the task ends (its blobs go then, as they would with
// the workspace), renamed when the next one starts.
#pragma once

#include <taskgroup/workspace.hpp>

#include <string>

namespace taskgroup::detail {

struct workspace_reuse {
  /// Drops every local blob and net of `ws` (its parent stays).
  static void clear(workspace& ws) noexcept { ws.clear(); }
  /// `ws`, emptied, now named `name`.
  static void rename(workspace& ws, const std::string& name) { ws.name_ = name; }
};

}  // namespace taskgroup::detail
