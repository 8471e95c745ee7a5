// Internal: the storage of large values that rank 0 receives apart from
// their STATUS (docs/mpi-protocol.md), recycled from run to run: a caller
// that keeps each run's report until the next run ends would otherwise
// have rank 0 allocate, and fault in, every large value.
#pragma once

#include <taskgroup/blob.hpp>
#include <taskgroup/task.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace taskgroup::detail::mpi {

/// The storage of received values whose last holder let them go, one per
/// codec tag, for the next value received. Deleters run on any thread,
/// hence the lock.
class value_recycler {
 public:
  /// Keeps `b` as the spare of `tag`, freeing the one it replaces.
  void give(const std::string& tag, std::unique_ptr<blob> b) noexcept;
  /// The spare of `tag`, if any.
  std::unique_ptr<blob> take(const std::string& tag) noexcept;

 private:
  std::mutex m_;
  std::vector<std::pair<std::string, std::unique_ptr<blob>>> spares_;
};

/// The deleter of received values: rank 0 makes them as mutable blobs, so
/// that the next run may receive into one again, or into its storage once
/// nothing holds it.
struct received_value {
  std::weak_ptr<value_recycler> recycler;
  std::string tag;
  void operator()(const blob* b) const noexcept;
};

/// Takes the value that the handle of output blob `name` of `t` holds from
/// an earlier run, when rank 0 received it apart (received_value) and
/// nothing but the handle holds it: its storage can take the new value. The
/// handle is left unset until the new value is in. Null otherwise.
std::shared_ptr<const blob> take_reusable(const task& t, const std::string& name);

/// Where to receive a value of codec `tag`: `reuse` when given, else a
/// blob made on the spare storage of `tag` (or a new one), deleted into
/// `recycler`. The blob is mutable and held by no one else.
std::shared_ptr<const blob> reception_blob(const std::shared_ptr<value_recycler>& recycler, const std::string& tag,
                                           std::shared_ptr<const blob> reuse);

}  // namespace taskgroup::detail::mpi
