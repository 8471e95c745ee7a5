// taskgroup: nets, ordered lists of operator definitions, and their
// instances bound in a workspace.
//
// A `net` is a handle: copies share one definition, as a Caffe2 Python Net
// object does, so a net listed at several places of a step tree is one net
// (and one instance per workspace). Instantiating binds every input and
// output once; running calls synchronous ops inline and awaits only the
// asynchronous ones. The first failing op stops the net with an error
// naming the net, the op index and type, and the op's message:
// `net "body" op #2 (Div): division by zero`.
//
// Threading: building a `net` is not synchronised (build it on one thread,
// then share it read-only). A `net_instance` is strand-bound like its
// workspace.
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/error.hpp>
#include <taskgroup/operator.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/container/small_vector.hpp>

#include <concepts>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace taskgroup {

class workspace;

/// A named, ordered list of operator definitions (a Caffe2 NetDef).
class TASKGROUP_API net {
 public:
  /// An empty net named `name`.
  explicit net(std::string name);

  /// Appends an op of a registered type.
  net& op(std::string type, std::vector<std::string> inputs, std::vector<std::string> outputs, arguments args = {});
  /// Appends a definition as is.
  net& add(op_def def);

  /// Appends an inline operator: `fn(op_context&)` returning `status`
  /// (synchronous) or `asio::awaitable<status>` (asynchronous). `label`
  /// names it in errors. A net holding one is not serializable.
  template <class F>
  requires std::invocable<F&, op_context&> net& lambda(std::string label, std::vector<std::string> inputs,
                                                       std::vector<std::string> outputs, F fn) {
    using R = std::invoke_result_t<F&, op_context&>;
    operator_schema schema(label);
    if constexpr (std::is_same_v<R, boost::asio::awaitable<status>>) {
      schema.async(async_function(std::move(fn)));
    } else {
      static_assert(std::is_convertible_v<R, status>, "an inline op returns status or awaitable<status>");
      schema.sync(sync_function(std::move(fn)));
    }
    return add_inline(std::move(label), std::move(inputs), std::move(outputs), std::move(schema));
  }

  [[nodiscard]] const std::string& name() const noexcept;
  [[nodiscard]] const std::vector<op_def>& ops() const noexcept;
  [[nodiscard]] std::size_t size() const noexcept { return ops().size(); }
  [[nodiscard]] bool empty() const noexcept { return ops().empty(); }

  /// The label of the first inline op, if any: such a net cannot be
  /// written to a plan file.
  [[nodiscard]] std::optional<std::string> first_inline_op() const;

  /// True when both handles refer to the same net.
  [[nodiscard]] bool same(const net& other) const noexcept { return data_ == other.data_; }
  /// The identity of the net (shared by its copies) and a token that
  /// expires when the last copy is gone: how workspaces key the instances
  /// of step trees without holding the nets alive.
  [[nodiscard]] const void* id() const noexcept { return data_.get(); }
  [[nodiscard]] std::weak_ptr<const void> token() const noexcept { return data_; }

  /// The net as it is now (name and ops), immutable: what instances are
  /// bound from, so that later edits do not reach a bound instance. Copy
  /// on write: the net's own definition is handed out, not copied; the
  /// first edit after a freeze copies it, so freezing costs nothing until
  /// the net changes. Thread-safe (edits are not: see above).
  struct frozen {
    std::string name;
    std::vector<op_def> ops;
  };
  [[nodiscard]] std::shared_ptr<const frozen> freeze() const;
  /// Checks every op against its schema (found in `registry`, or carried
  /// inline). Errors: `errc::unknown_operator`, `errc::arity_mismatch`,
  /// `errc::bad_argument`, naming the net, the op index and the type.
  [[nodiscard]] status validate(const operator_registry& registry) const;

 private:
  net& add_inline(std::string label, std::vector<std::string> inputs, std::vector<std::string> outputs,
                  operator_schema schema);
  struct data;
  std::shared_ptr<data> data_;
};

namespace detail {
class fast_net_run;
struct net_access;
}  // namespace detail

/// A net bound in a workspace: every blob resolved, every kernel built.
class TASKGROUP_API net_instance {
 public:
  /// Binds `n` in `ws`. Errors: each op's schema check, an input that does
  /// not exist (`net "body" op #2 (Add): input blob "x" does not exist`),
  /// and the kernels' own argument and type checks.
  static result<std::unique_ptr<net_instance>> make(const net& n, workspace& ws, const operator_registry& registry);

  [[nodiscard]] const std::string& name() const noexcept { return defs_->name; }
  /// The op definitions this instance was bound from (a snapshot).
  [[nodiscard]] const std::vector<op_def>& ops() const noexcept { return defs_->ops; }
  [[nodiscard]] std::size_t size() const noexcept { return ops_.size(); }
  /// True when some op is asynchronous (then only `run` may be used);
  /// an offloaded op is.
  [[nodiscard]] bool has_async() const noexcept { return async_; }
  /// True when running this net now may have to wait: it has an
  /// asynchronous op, or an offloaded op of its node is running (any op
  /// may then have to wait for it, see `operator_schema::offload`). When
  /// false, `run_sync` may be used.
  [[nodiscard]] bool may_wait() const noexcept;

  /// Runs every op in order, inline. Requires `!may_wait()`. Returns the
  /// first failure, with the net, op index and type in its message.
  status run_sync() noexcept {
    if (has_async()) [[unlikely]]
      return run_sync_mixed();
    return run_fast(sync_.data(), sync_.size());
  }

  /// Runs every op in order: synchronous ones inline, asynchronous ones
  /// awaited, a blocked one once it is not. Completes with the first
  /// failure. Cancellation: reaches the awaited async op (or the wait);
  /// the net then completes with `errc::cancelled`.
  boost::asio::awaitable<status> run();

 private:
  friend class detail::fast_net_run;
  friend struct detail::net_access;
  struct fast_entry;

  // What the step drivers use to drive a net themselves
  // (detail::net_access). True when op `i` must wait before it runs: it
  // writes a blob that a running offloaded op reads, or it is an offloaded
  // op whose previous run has not ended.
  [[nodiscard]] bool blocked(std::size_t i) const noexcept;
  // Completes `done` through `ex` after the node's next offloaded op ends
  // (then check `blocked` again), or with `errc::cancelled` when its slot
  // fires. On the strand, like `run`.
  void wait_unblocked(const boost::asio::any_io_executor& ex, op_completion done) noexcept;
  // Runs the synchronous ops from op `i` inline until the end of the net,
  // the next asynchronous op or the next `blocked` one, and leaves `i`
  // there (`size()` at the end). Returns the first failure, as `run_sync`
  // does.
  status run_from(std::size_t& i) noexcept;
  // The kernel of op `i` (`i < size()`).
  [[nodiscard]] op_kernel& kernel(std::size_t i) const noexcept { return *ops_[i].kernel; }
  // `e` as the error of op `i`: `net "body" op #2 (Div): <message>`.
  [[nodiscard]] error op_error(std::size_t i, const error& e) const;

  explicit net_instance(const net& def);
  // The hot loop of `run_sync` over `sync_` (`first`, `n`), inline in the
  // step loops that call it: the fast paths called straight from one
  // contiguous array (state included, the kernels are not touched), no
  // status built per op, no exception handling; the first op whose fast
  // path declines (or that has none) hands the rest of the net to the
  // general loop.
  status run_fast(const fast_entry* first, std::size_t n) noexcept;
  status run_sync_mixed() noexcept;
  status run_general_from(std::size_t i) noexcept;
  // op_error as a status, and the same for an exception in flight: out of
  // line, so that the loops that call them stay small.
  [[nodiscard]] status op_failure(std::size_t i, const error& e) const;
  [[nodiscard]] status op_exception(std::size_t i) const;

  std::shared_ptr<const net::frozen> defs_;  // later edits of the net do not reach a bound instance
  workspace* ws_ = nullptr;                  // where it is bound (its node's gate: offloaded ops)
  // An op's context and the kernel built on it (destroyed first).
  struct op_slot {
    template <class... Args>
    explicit op_slot(Args&&... args) : ctx(std::forward<Args>(args)...) {}
    op_context ctx;
    std::unique_ptr<op_kernel> kernel;
  };
  // Inline room for a net of one op (a task's Sleep, say): binding it
  // allocates the instance and the kernel only.
  boost::container::small_vector<op_slot, 1> ops_;
  // What `run_sync` loops over when no kernel is asynchronous (else
  // empty): each kernel's fast path (one
  // that declines when it has none), copied into one contiguous array;
  // `ops_[i].kernel` runs when entry `i` declines. Entries are aligned to their size so that none straddles
  // two cache lines (the kernels themselves are not over-aligned: a
  // waiting task holds one).
  struct alignas(sizeof(op_kernel::fast_path)) fast_entry {
    op_kernel::fast_path path;
  };
  std::vector<fast_entry> sync_;
  bool async_ = false;  // some kernel is asynchronous (then `sync_` is empty)
};

inline status net_instance::run_fast(const fast_entry* first, std::size_t n) noexcept {
  for (std::size_t i = 0; i != n; ++i) {
    if (!first[i].path.fn(first[i].path.state)) [[unlikely]]
      return run_general_from(i);
  }
  return ok();
}

}  // namespace taskgroup
