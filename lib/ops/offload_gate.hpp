// The blob rule of offloaded ops, for one node (a root workspace and its
// children): which blobs an offloaded kernel is reading off the strand,
// which offloaded ops are running, and the ops on the strand that wait for
// them. Threading: strand-bound, like the workspace that owns it; only the
// offloaded kernel itself runs elsewhere, and it never touches the gate.
#pragma once

#include <taskgroup/operator.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <cstddef>
#include <list>
#include <optional>
#include <utility>
#include <vector>

namespace taskgroup {
class workspace;
}

namespace taskgroup::detail {

class offload_gate {
 public:
  offload_gate() = default;
  offload_gate(const offload_gate&) = delete;
  offload_gate& operator=(const offload_gate&) = delete;
  ~offload_gate();

  /// True while some offloaded op runs: then every op on the node checks
  /// `leased` before it runs (`net_instance::blocked`).
  [[nodiscard]] bool active() const noexcept { return !leases_.empty(); }
  /// True when `key` (an input blob, or an offloaded kernel) is in use by
  /// a running offloaded op.
  [[nodiscard]] bool leased(const void* key) const noexcept;
  /// Takes / gives back one use of `key`.
  void lease(const void* key);
  void release(const void* key) noexcept;

  /// Completes `done` with success, through `ex`, after the next release
  /// (the op then checks again), or with `errc::cancelled` when its slot
  /// fires. Errors: allocation failure completes it at once with
  /// `errc::op_failed`.
  void wait(const boost::asio::any_io_executor& ex, op_completion done) noexcept;
  /// Wakes every waiting op (after releases).
  void wake() noexcept;

  /// The executor offloaded kernels run on; empty: `default_compute_executor()`.
  std::optional<boost::asio::any_io_executor> compute;

 private:
  struct waiter {
    boost::asio::any_io_executor ex;
    op_completion done;
  };
  std::vector<std::pair<const void*, std::size_t>> leases_;  // few at a time: a flat list
  std::list<waiter> waiters_;
};

/// The gate of `ws`'s node (its root workspace), made on first use.
offload_gate& gate_of(workspace& ws);
/// The same, or null when none has been made.
offload_gate* find_gate(const workspace& ws) noexcept;

}  // namespace taskgroup::detail
