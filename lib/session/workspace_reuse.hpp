// Internal: a workspace made new again, for the session's PRIVATE tasks. A
// task that ends on the node's strand hands its workspace, which nothing
// else holds any more, to the next task of its node rather than freeing
// it: emptied when the task ends (its blobs go then, as they would with
// the workspace), renamed when the next one starts.
#pragma once

#include <taskgroup/workspace.hpp>

#include <memory>
#include <string>

namespace taskgroup::detail {

struct workspace_reuse {
  /// `ws`, emptied, now named `name`.
  static void rename(workspace& ws, const std::string& name) { ws.name_ = name; }
  /// When `ws` is held by `holders` references only (nothing else can
  /// reach it), empties it (every local blob and net; its parent stays)
  /// and moves it to `spare`; otherwise leaves it.
  static bool keep(std::shared_ptr<workspace>& ws, long holders, std::shared_ptr<workspace>& spare) noexcept {
    if (!ws || ws.use_count() != holders) return false;
    ws->clear();
    spare = std::move(ws);
    return true;
  }
};

}  // namespace taskgroup::detail
