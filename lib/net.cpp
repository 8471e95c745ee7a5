#include <taskgroup/net.hpp>

#include <taskgroup/workspace.hpp>

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>

namespace taskgroup {

namespace {

// The schemas of a frozen definition's ops in one registry state.
struct resolution {
  std::uint64_t stamp = 0;  // operator_registry::stamp()
  std::vector<std::shared_ptr<const operator_schema>> schemas;
};

// Every frozen definition is one of these (made only here): binding keeps
// what its ops resolved to, so that binding it again (each run of a
// PRIVATE task binds its nets afresh) skips the registry's lookups and the
// ops' checks, whose outcome cannot change for the same definition and
// registry state.
struct frozen_defs final : net::frozen {
  frozen_defs(std::string n, std::vector<op_def> o) : frozen{std::move(n), std::move(o)} {}
  // The latest resolution. Earlier ones stay until the definition goes: a
  // binding on another thread may still read one (there is one per
  // registry change seen by a binding, and registries change rarely).
  mutable std::atomic<const resolution*> current{nullptr};
  mutable std::mutex mutex;  // guards `made`
  mutable std::vector<std::unique_ptr<const resolution>> made;

  void keep(std::uint64_t stamp, std::vector<std::shared_ptr<const operator_schema>> schemas) const {
    const std::lock_guard lock(mutex);
    const resolution* now = current.load(std::memory_order_relaxed);
    if (now != nullptr && now->stamp == stamp) return;  // another binding was first
    made.push_back(std::make_unique<const resolution>(resolution{stamp, std::move(schemas)}));
    current.store(made.back().get(), std::memory_order_release);
  }
};

}  // namespace

struct net::data {
  // The definition as it is now. Copy on write: freeze() hands out `defs`
  // itself and marks it shared; the next edit copies it first, so a bound
  // instance never sees later edits and freezing an unedited net copies
  // nothing (a group of 100,000 one-op tasks keeps one definition per net,
  // not two). Edits are not synchronised with freeze() anyway (net.hpp).
  std::shared_ptr<frozen_defs> defs;
  std::atomic<bool> shared{false};

  frozen& writable() {
    if (shared.load(std::memory_order_relaxed)) {
      defs = std::make_shared<frozen_defs>(defs->name, defs->ops);
      shared.store(false, std::memory_order_relaxed);
    }
    return *defs;
  }
};

net::net(std::string name) : data_(std::make_shared<data>()) {
  data_->defs = std::make_shared<frozen_defs>(std::move(name), std::vector<op_def>{});
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
  const std::size_t count = inst->defs_->ops.size();
  // Kernels may keep pointers to their context: never reallocate.
  inst->contexts_.reserve(count);
  inst->kernels_.reserve(count);
  // What an earlier binding resolved in this registry state, if any; else
  // this binding resolves and checks each op and keeps the outcome.
  const auto& defs = static_cast<const frozen_defs&>(*inst->defs_);
  const std::uint64_t stamp = registry.stamp();
  const resolution* known = defs.current.load(std::memory_order_acquire);
  if (known != nullptr && known->stamp != stamp) known = nullptr;
  std::vector<std::shared_ptr<const operator_schema>> resolved;
  if (known == nullptr) resolved.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const op_def& def = inst->defs_->ops[i];
    auto where = [&] { return op_where(n.name(), i, def.type); };
    const operator_schema* schema = nullptr;
    if (known != nullptr) {
      schema = known->schemas[i].get();
    } else {
      auto found = schema_of(def, registry);
      if (!found) return found.error().with_context(where());
      if (auto st = found.value()->validate(def); !st) return st.error().with_context(where());
      schema = found.value().get();
      resolved.push_back(std::move(found).value());
    }

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

    op_context& ctx = inst->contexts_.emplace_back(def, ws, std::move(inputs), std::move(outputs));
    result<std::unique_ptr<op_kernel>> kernel = [&]() -> result<std::unique_ptr<op_kernel>> {
      try {
        return schema->instantiate(ctx);
      } catch (const system_error& e) {
        return e.error();
      } catch (const std::exception& e) {
        return error(errc::bad_argument, e.what());
      }
    }();
    if (!kernel) return kernel.error().with_context(where());
    inst->has_async_ = inst->has_async_ || kernel.value()->is_async();
    inst->kernels_.push_back(std::move(kernel).value());
  }
  if (known == nullptr) defs.keep(stamp, std::move(resolved));
  if (!inst->has_async_) {
    inst->sync_.reserve(count);
    // A kernel without a fast path gets one that always declines, so the
    // hot loop has no null test.
    op_kernel::fast_path decline;
    decline.fn = [](const void*) noexcept { return false; };
    for (const auto& k : inst->kernels_) inst->sync_.push_back({k->fast().fn != nullptr ? k->fast() : decline});
  }
  return inst;
}

error net_instance::op_error(std::size_t i, const error& e) const {
  return e.with_context(op_where(defs_->name, i, defs_->ops[i].type));
}

namespace {
error from_exception(std::exception_ptr ep) {
  try {
    std::rethrow_exception(std::move(ep));
  } catch (const system_error& e) {
    return e.error();
  } catch (const boost::system::system_error& e) {
    return {e.code(), e.what()};
  } catch (const std::exception& e) {
    return {errc::op_failed, e.what()};
  } catch (...) {
    return {errc::op_failed, "unknown exception"};
  }
}
}  // namespace

[[gnu::cold, gnu::noinline]] status net_instance::op_failure(std::size_t i, const error& e) const {
  return op_error(i, e);
}

[[gnu::cold, gnu::noinline]] status net_instance::op_exception(std::size_t i) const {
  return op_error(i, from_exception(std::current_exception()));
}

// Runs synchronous kernels from `i` until the end or the next asynchronous
// one; `i` is left on the op that stopped the loop.
status net_instance::run_from(std::size_t& i) noexcept {
  const std::size_t n = kernels_.size();
  try {
    for (; i < n; ++i) {
      op_kernel& k = *kernels_[i];
      if (k.is_async()) return ok();
      if (k.fast().fn != nullptr && k.fast().fn(k.fast().state)) continue;
      if (status st = k.run(); !st) [[unlikely]] {
        return op_error(i, st.error());
      }
    }
  } catch (...) {
    return op_error(i, from_exception(std::current_exception()));
  }
  return ok();
}

status net_instance::run_sync() noexcept {
  if (has_async_) [[unlikely]]
    return run_sync_mixed();
  // The hot loop: the fast paths called straight from one contiguous
  // array (state included, the kernels are not touched), no status built
  // per op, no exception handling; the first op whose fast path declines
  // (or that has none) hands the rest of the net to the general loop.
  const fast_entry* const first = sync_.data();
  const fast_entry* const last = first + sync_.size();
  for (const fast_entry* e = first; e != last; ++e) {
    if (!e->path.fn(e->path.state)) [[unlikely]]
      return run_general_from(static_cast<std::size_t>(e - first));
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
      if (status st = kernels_[i]->run(); !st) [[unlikely]]
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
  if (st && i < kernels_.size()) {
    return op_error(i, error(errc::op_failed, "asynchronous operator in a net run synchronously"));
  }
  return st;
}

boost::asio::awaitable<status> net_instance::run() {
  std::size_t i = 0;
  for (;;) {
    if (status st = run_from(i); !st) co_return st;
    if (i >= kernels_.size()) co_return ok();
    status st = ok();
    try {
      st = co_await kernels_[i]->run_async();
    } catch (...) {
      st = from_exception(std::current_exception());
    }
    if (!st) co_return op_error(i, st.error());
    ++i;
  }
}

}  // namespace taskgroup
