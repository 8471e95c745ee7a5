// Internal: the kernel of an offloaded op (`operator_schema::offload`). It
// wraps the op's synchronous kernel, bound on a context of its own whose
// outputs are private blobs: `start` leases the op's input blobs and
// itself in the node's gate, runs the kernel on the compute executor and,
// back on the strand, moves the private outputs into the op's outputs
// (on success), releases the leases and wakes the ops that waited. The
// store waits while another offloaded op still reads one of the outputs.
#pragma once

#include <taskgroup/operator.hpp>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace taskgroup::detail {

struct observation;

class offload_kernel final : public op_kernel, private op_completion::target {
 public:
  /// The offloaded kernel of `schema` for the op bound in `ctx`. Errors:
  /// the kernel's own; `errc::bad_argument` when it is asynchronous.
  static result<std::unique_ptr<op_kernel>> make(const operator_schema& schema, op_context& ctx);
  ~offload_kernel() override;
  offload_kernel(const offload_kernel&) = delete;
  offload_kernel& operator=(const offload_kernel&) = delete;

  void start(const boost::asio::any_io_executor& ex, op_completion done) noexcept override;
  [[nodiscard]] std::string waiting_for() const override;

 private:
  struct run_state;
  explicit offload_kernel(op_context& outer);
  // On the compute thread: the kernel, told to `told` when the run's
  // observer asked for offloaded ops (null: not asked).
  status run_told(const observation* told) noexcept;
  status run_inner() noexcept;
  // Back on the strand: gives back the inputs, then stores the outputs
  // (`commit`) once no other offloaded op reads them.
  void finish(std::unique_ptr<run_state> run) noexcept;
  [[nodiscard]] bool outputs_in_use() const noexcept;
  void commit(std::unique_ptr<run_state> run) noexcept;
  // The wait for the outputs (op_completion::target).
  void complete(status st) noexcept override;
  void abandon() noexcept override;

  op_context* outer_;
  std::optional<op_context> inner_ctx_;  // the op's inputs, private outputs
  std::unique_ptr<op_kernel> inner_;
  std::vector<std::pair<blob*, std::shared_ptr<blob>>> commits_;  // each output and its private blob
  std::vector<const void*> keys_;                                 // what a run leases: distinct inputs, then itself
  std::atomic<bool> stop_{false};
  std::unique_ptr<run_state> pending_;  // a run whose outputs wait to be stored
};

}  // namespace taskgroup::detail
