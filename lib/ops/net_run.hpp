// Internal: a net's asynchronous run with its position in view, and what
// a pending op waits for, for hang diagnosis (run_probe). The step
// drivers and RunNet use them; net_instance::run is the first without a
// position.
#pragma once

#include <taskgroup/net.hpp>

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace taskgroup::detail {

/// What a step driver uses of a bound net to drive it op by op (the
/// frame-free driver, the asynchronous net run, hang diagnosis): not part
/// of net_instance's public face.
struct net_access {
  /// True when op `i` must wait before it runs: it writes a blob that a
  /// running offloaded op reads, or it is an offloaded op whose previous
  /// run has not ended.
  static bool blocked(const net_instance& n, std::size_t i) noexcept { return n.blocked(i); }
  /// Completes `done` through `ex` after the node's next offloaded op ends
  /// (then ask `blocked` again), or with `errc::cancelled` when its slot
  /// fires. On the strand.
  static void wait_unblocked(net_instance& n, const boost::asio::any_io_executor& ex, op_completion done) noexcept {
    n.wait_unblocked(ex, std::move(done));
  }
  /// Runs the synchronous ops from op `i` inline until the end of the net,
  /// the next asynchronous op or the next blocked one, and leaves `i` there
  /// (`size()` at the end). Returns the first failure, as `run_sync` does.
  static status run_from(net_instance& n, std::size_t& i) noexcept { return n.run_from(i); }
  /// The kernel of op `i` (`i < size()`).
  static op_kernel& kernel(const net_instance& n, std::size_t i) noexcept { return n.kernel(i); }
  /// `e` as the error of op `i`: `net "body" op #2 (Div): <message>`.
  static error op_error(const net_instance& n, std::size_t i, const error& e) { return n.op_error(i, e); }
};

/// A synchronous net's run (`net_instance::run_sync` of a net without
/// asynchronous ops) with its fast paths looked up once: the step loop
/// takes one per net before it runs them many times. Valid while the
/// instance lives.
class fast_net_run {
 public:
  explicit fast_net_run(net_instance& inst) noexcept : inst_(&inst), first_(inst.sync_.data()), n_(inst.sync_.size()) {}
  [[nodiscard]] status operator()() const noexcept { return inst_->run_fast(first_, n_); }
  /// Its number of ops.
  [[nodiscard]] std::size_t size() const noexcept { return n_; }
  /// Op 0's fast path (`size() >= 1`): a loop over nets of one op each
  /// calls it directly.
  [[nodiscard]] const op_kernel::fast_path& first_path() const noexcept { return first_->path; }
  /// The net's run once op 0's fast path has declined (having changed
  /// nothing): the rest of `operator()`.
  [[nodiscard]] status after_decline() const noexcept { return inst_->run_general_from(0); }
  /// What op 0's fast path promises about its writes (`size() >= 1`).
  [[nodiscard]] fast_writes first_promise() const noexcept { return inst_->ops_[0].kernel->fast_promise(); }
  /// Whether op 0 names `b` as one of its inputs or outputs (`size() >= 1`).
  [[nodiscard]] bool first_names(const blob* b) const noexcept {
    const op_context& ctx = inst_->ops_[0].ctx;
    for (std::size_t j = 0; j < ctx.num_inputs(); ++j) {
      if (&ctx.input_blob(j) == b) return true;
    }
    for (std::size_t j = 0; j < ctx.num_outputs(); ++j) {
      if (&ctx.output_blob(j) == b) return true;
    }
    return false;
  }

 private:
  net_instance* inst_;
  const net_instance::fast_entry* first_;
  std::size_t n_;
};

/// net_instance::run, keeping in `*at` (when not null) the index of the op
/// it waits on while it waits, its kernels serving run `run` (null: none).
boost::asio::awaitable<status> run_net_at(net_instance& inst, std::uint32_t* at, const run_context* run);

/// Where op `i` of `inst` stands while it pends, as the error of a run that
/// ended there would say it: `net "take" op #0 (Dequeue): input #0 "jobs":
/// waiting for an item: the queue is empty (0 of 4, open)`. `blocked`: it
/// waits for an offloaded op of its node rather than for its own kernel.
std::string op_waiting(const net_instance& inst, std::size_t i, bool blocked);

}  // namespace taskgroup::detail
