#include <taskgroup/net.hpp>

#include <taskgroup/workspace.hpp>

#include "detail/errors.hpp"
#include "ops/await_started.hpp"
#include "ops/net_run.hpp"
#include "ops/offload.hpp"
#include "ops/offload_gate.hpp"
#include "ops/run_scope.hpp"

#include <boost/asio/this_coro.hpp>

#include <atomic>
#include <exception>

namespace taskgroup {

struct net::data {
  // The definition as it is now. Copy on write: freeze() hands out `defs`
  // itself and marks it shared; the next edit copies it first, so a bound
  // instance never sees later edits and freezing an unedited net copies
  // nothing (a group of 100,000 one-op tasks keeps one definition per net,
  // not two). Edits are not synchronised with freeze() anyway (net.hpp).
  std::shared_ptr<frozen> defs;
  std::atomic<bool> shared{false};

  frozen& writable() {
    if (shared.load(std::memory_order_relaxed)) {
      defs = std::make_shared<frozen>(*defs);
      shared.store(false, std::memory_order_relaxed);
    }
    return *defs;
  }
};

net::net(std::string name) : data_(std::make_shared<data>()) {
  data_->defs = std::make_shared<frozen>(frozen{std::move(name), {}});
}

net& net::op(std::string type, std::vector<std::string> inputs, std::vector<std::string> outputs, arguments args) {
  return add(op_def{std::move(type), std::move(inputs), std::move(outputs), std::move(args), nullptr});
}

net& net::add(op_def def) {
  data_->writable().ops.push_back(std::move(def));
  return *this;
}

std::shared_ptr<const net::frozen> net::freeze() const {
  // Binding calls this for every instance: write the flag only once, so
  // that binding on several threads does not bounce the line.
  if (!data_->shared.load(std::memory_order_relaxed)) data_->shared.store(true, std::memory_order_relaxed);
  return data_->defs;
}

net& net::add_inline(std::string label, std::vector<std::string> inputs, std::vector<std::string> outputs,
                     operator_schema schema) {
  schema.any_args();
  return add(op_def{std::move(label),
                    std::move(inputs),
                    std::move(outputs),
                    {},
                    std::make_shared<const operator_schema>(std::move(schema))});
}

const std::string& net::name() const noexcept { return data_->defs->name; }
const std::vector<op_def>& net::ops() const noexcept { return data_->defs->ops; }

std::optional<std::string> net::first_inline_op() const {
  for (const auto& def : ops()) {
    if (def.inline_schema) return def.type;
  }
  return std::nullopt;
}

namespace {

std::string op_where(const std::string& net_name, std::size_t i, const std::string& type) {
  return "net " + quote(net_name) + " op #" + std::to_string(i) + " (" + type + ")";
}

result<std::shared_ptr<const operator_schema>> schema_of(const op_def& def, const operator_registry& registry) {
  if (def.inline_schema) return def.inline_schema;
  return registry.get(def.type);
}

}  // namespace

status net::validate(const operator_registry& registry) const {
  for (std::size_t i = 0; i < ops().size(); ++i) {
    const op_def& def = ops()[i];
    auto schema = schema_of(def, registry);
    if (!schema) return schema.error().with_context(op_where(name(), i, def.type));
    if (auto st = schema.value()->validate(def); !st) return st.error().with_context(op_where(name(), i, def.type));
  }
  return ok();
}

// --- net_instance ------------------------------------------------------------

net_instance::net_instance(const net& def) : defs_(def.freeze()) {}

result<std::unique_ptr<net_instance>> net_instance::make(const net& n, workspace& ws,
                                                         const operator_registry& registry) {
  std::unique_ptr<net_instance> inst(new net_instance(n));
  inst->ws_ = &ws;
  const std::size_t count = inst->defs_->ops.size();
  // Kernels may keep pointers to their context: never reallocate.
  inst->ops_.reserve(count);
  bool has_async = false;
  for (std::size_t i = 0; i < count; ++i) {
    const op_def& def = inst->defs_->ops[i];
    auto where = [&] { return op_where(n.name(), i, def.type); };
    auto schema = schema_of(def, registry);
    if (!schema) return schema.error().with_context(where());
    if (auto st = schema.value()->validate(def); !st) return st.error().with_context(where());

    std::vector<std::shared_ptr<blob>> inputs;
    inputs.reserve(def.inputs.size());
    for (const auto& in : def.inputs) {
      auto b = ws.find_shared(in);
      if (!b) return fail(errc::blob_not_found, where() + ": input blob " + quote(in) + " does not exist");
      inputs.push_back(std::move(b));
    }
    std::vector<std::shared_ptr<blob>> outputs;
    outputs.reserve(def.outputs.size());
    for (const auto& out : def.outputs) outputs.push_back(ws.create_shared(out));

    op_slot& slot = inst->ops_.emplace_back(def, ws, std::move(inputs), std::move(outputs));
    op_context& ctx = slot.ctx;
    result<std::unique_ptr<op_kernel>> kernel = [&]() -> result<std::unique_ptr<op_kernel>> {
      try {
        if (schema.value()->is_offloaded() || def.offload) return detail::offload_kernel::make(*schema.value(), ctx);
        return schema.value()->instantiate(ctx);
      } catch (const system_error& e) {
        return e.error();
      } catch (const std::exception& e) {
        return error(errc::bad_argument, e.what());
      }
    }();
    if (!kernel) return kernel.error().with_context(where());
    has_async = has_async || kernel.value()->is_async();
    slot.kernel = std::move(kernel).value();
  }
  inst->async_ = has_async;
  if (!has_async) {
    inst->sync_.reserve(count);
    // A kernel without a fast path gets one that always declines, so the
    // hot loop has no null test.
    op_kernel::fast_path decline;
    decline.fn = [](const void*) noexcept { return false; };
    for (const auto& o : inst->ops_)
      inst->sync_.push_back({o.kernel->fast().fn != nullptr ? o.kernel->fast() : decline});
  }
  return inst;
}

error net_instance::op_error(std::size_t i, const error& e) const {
  return e.with_context(op_where(defs_->name, i, defs_->ops[i].type));
}

[[gnu::cold, gnu::noinline]] status net_instance::op_failure(std::size_t i, const error& e) const {
  return op_error(i, e);
}

[[gnu::cold, gnu::noinline]] status net_instance::op_exception(std::size_t i) const {
  return op_error(i, detail::error_from_exception(std::current_exception()));
}

bool net_instance::may_wait() const noexcept {
  if (has_async()) return true;
  const detail::offload_gate* g = detail::find_gate(*ws_);
  return g != nullptr && g->active();
}

bool net_instance::blocked(std::size_t i) const noexcept {
  const detail::offload_gate* g = detail::find_gate(*ws_);
  if (g == nullptr || !g->active()) return false;
  const op_slot& o = ops_[i];
  for (std::size_t j = 0; j < o.ctx.num_outputs(); ++j) {
    if (g->leased(&o.ctx.output_blob(j))) return true;
  }
  return g->leased(o.kernel.get());  // an offloaded op's run in flight
}

void net_instance::wait_unblocked(const boost::asio::any_io_executor& ex, op_completion done) noexcept {
  detail::offload_gate* g = detail::find_gate(*ws_);
  if (g == nullptr) {
    done(ok());  // nothing to wait for (never reached: blocked was true)
    return;
  }
  g->wait(ex, std::move(done));
}

// Runs synchronous kernels from `i` until the end, the next asynchronous
// one or the next blocked one; `i` is left on the op that stopped the loop.
status net_instance::run_from(std::size_t& i) noexcept {
  const std::size_t n = ops_.size();
  // No op of this loop can start an offloaded run: a gate that is idle
  // now stays idle until the loop returns.
  const detail::offload_gate* g = detail::find_gate(*ws_);
  const bool gated = g != nullptr && g->active();
  try {
    for (; i < n; ++i) {
      op_kernel& k = *ops_[i].kernel;
      if (k.is_async() || (gated && blocked(i))) return ok();
      if (k.fast().fn != nullptr && k.fast().fn(k.fast().state)) continue;
      if (status st = k.run(); !st) [[unlikely]] {
        return op_error(i, st.error());
      }
    }
  } catch (...) {
    return op_error(i, detail::error_from_exception(std::current_exception()));
  }
  return ok();
}

// The rest of a synchronous net from op `i`: each op's fast path when it
// takes the case, else its `run()`, with failures and exceptions turned
// into the op's error.
[[gnu::noinline]] status net_instance::run_general_from(std::size_t i) noexcept {
  const fast_entry* s = sync_.data();
  const std::size_t n = sync_.size();
  try {
    for (; i < n; ++i) {
      if (s[i].path.fn(s[i].path.state)) continue;
      if (status st = ops_[i].kernel->run(); !st) [[unlikely]]
        return op_failure(i, st.assume_error());
    }
  } catch (...) {
    return op_exception(i);
  }
  return ok();
}

// run_sync of a net holding asynchronous ops: the synchronous ones before
// the first asynchronous one run, then that one is an error.
[[gnu::cold, gnu::noinline]] status net_instance::run_sync_mixed() noexcept {
  std::size_t i = 0;
  status st = run_from(i);
  if (st && i < ops_.size()) {
    return op_error(i, error(errc::op_failed, "asynchronous operator in a net run synchronously"));
  }
  return st;
}

boost::asio::awaitable<status> net_instance::run() { return detail::run_net_at(*this, nullptr, detail::current_run); }

namespace {

// The run context of a coroutine-form kernel's run, from its start to its
// first suspension (op_context::run): set before the kernel is awaited,
// cleared once the await is over, or when the frame goes while it pends,
// unless another stretch of kernel calls has set its own meanwhile.
class awaiting_kernel {
 public:
  explicit awaiting_kernel(const run_context* run) noexcept : run_(run) { detail::current_run = run; }
  ~awaiting_kernel() {
    if (detail::current_run == run_) detail::current_run = nullptr;
  }
  awaiting_kernel(const awaiting_kernel&) = delete;
  awaiting_kernel& operator=(const awaiting_kernel&) = delete;

 private:
  const run_context* run_;
};

}  // namespace

boost::asio::awaitable<status> detail::run_net_at(net_instance& inst, std::uint32_t* at, const run_context* run) {
  std::size_t i = 0;
  for (;;) {
    status st = ok();
    {
      const run_context_scope scope(run);
      st = net_access::run_from(inst, i);
    }
    if (!st) co_return st;
    if (i >= inst.size()) co_return ok();
    if (at != nullptr) *at = static_cast<std::uint32_t>(i);
    if (net_access::blocked(inst, i)) {
      const boost::asio::any_io_executor ex = co_await boost::asio::this_coro::executor;
      st = co_await detail::await_started(
          ex,
          [](void* self, const boost::asio::any_io_executor& e, op_completion done) {
            net_access::wait_unblocked(*static_cast<net_instance*>(self), e, std::move(done));
          },
          &inst);
      if (!st) co_return net_access::op_error(inst, i, st.error());
      continue;  // op i again: it may run now
    }
    try {
      const awaiting_kernel kernel_run(run);
      st = co_await net_access::kernel(inst, i).run_async();
    } catch (...) {
      st = detail::error_from_exception(std::current_exception());
    }
    if (!st) co_return net_access::op_error(inst, i, st.error());
    ++i;
  }
}

std::string detail::op_waiting(const net_instance& inst, std::size_t i, bool blocked) {
  std::string what = blocked ? std::string("waiting for an offloaded op of its node to end")
                             : net_access::kernel(inst, i).waiting_for();
  if (what.empty()) what = "waiting";
  return net_access::op_error(inst, i, error(errc::cancelled, std::move(what))).message;
}

}  // namespace taskgroup
