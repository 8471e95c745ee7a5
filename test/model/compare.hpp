// The property test's comparisons of a library run with the model's
// (property_test.cpp): status and error, tasks, outputs, node blobs,
// observer events.
#pragma once

#include "model/model.hpp"

#include <taskgroup/run_report.hpp>
#include <taskgroup/session.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace taskgroup::model {

/// A difference: its kind (failing seeds are counted and shrunk by kind)
/// and what differs.
struct failure {
  std::string kind;
  std::string detail;
};

/// A blob's value as the model has it.
value value_of(const blob* b);

/// How a status ends an observer event.
inline ending ending_of(const status& st) {
  if (st) return ending::ok;
  return st.error().is_cancelled() ? ending::cancelled : ending::failed;
}

/// `m` with the milliseconds a cancelled wait had left (which vary)
/// written `#`, as the model writes them.
std::string normalized(std::string m);

/// The events of each task (and of each node's own work), in order, or as
/// multisets where the model ran concurrent parts.
std::optional<std::string> compare_events(const run_outcome& m, const std::vector<event>& got);

using node_blobs = std::vector<std::map<std::string, value>>;  // by node index

/// The run's status and error, each task's status, error, iterations and
/// outputs, and every node workspace's local blobs.
std::optional<failure> compare_run(const run_outcome& m, const run_report& r, local_session& s,
                                   const node_blobs& model_blobs, const std::vector<std::string>& nodes);

}  // namespace taskgroup::model
