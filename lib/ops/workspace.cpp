#include <taskgroup/workspace.hpp>

#include <taskgroup/net.hpp>

#include "ops/offload_gate.hpp"

#include <algorithm>

namespace taskgroup {

workspace::workspace(std::string name, std::shared_ptr<workspace> parent)
    : name_(std::move(name)), parent_(std::move(parent)) {}

workspace::~workspace() { clear(); }

void workspace::clear() noexcept {
  first_.instance.reset();
  first_ = keyed_instance{};
  first_key_ = nullptr;
  if (more_) {
    more_->instances.clear();
    more_->nets.clear();
  }
  more_.reset();
  blobs_.clear();
}

workspace::extras& workspace::more() {
  if (!more_) more_ = std::make_unique<extras>();
  return *more_;
}

std::shared_ptr<workspace> workspace::make(std::string name) { return std::make_shared<workspace>(std::move(name)); }

std::shared_ptr<workspace> workspace::create_child(std::string name) {
  return std::make_shared<workspace>(std::move(name), shared_from_this());
}

std::shared_ptr<blob> workspace::lookup(std::string_view name) const noexcept {
  for (const workspace* w = this; w != nullptr; w = w->parent_.get()) {
    if (auto it = w->blobs_.find(name); it != w->blobs_.end()) return it->second;
    if (w->more_) {
      if (auto it = w->more_->forwarded.find(name); it != w->more_->forwarded.end()) return it->second;
    }
  }
  return nullptr;
}

blob* workspace::find(std::string_view name) const noexcept { return lookup(name).get(); }

std::shared_ptr<blob> workspace::find_shared(std::string_view name) const noexcept { return lookup(name); }

result<blob*> workspace::get_blob(std::string_view name) const {
  if (blob* b = find(name)) return b;
  return fail(errc::blob_not_found, "workspace " + quote(name_) + ": blob " + quote(name) + " does not exist");
}

std::shared_ptr<blob> workspace::create_shared(std::string_view name) {
  if (auto b = lookup(name)) return b;
  auto b = std::make_shared<blob>();
  blobs_.emplace(std::string(name), b);
  return b;
}

blob& workspace::create(std::string_view name) { return *create_shared(name); }

blob& workspace::create_local(std::string_view name) {
  auto it = blobs_.find(name);
  if (it == blobs_.end()) it = blobs_.emplace(std::string(name), std::make_shared<blob>()).first;
  return *it->second;
}

bool workspace::remove(std::string_view name) {
  auto it = blobs_.find(name);
  if (it == blobs_.end()) return false;
  blobs_.erase(it);
  return true;
}

std::vector<std::string> workspace::blobs() const {
  std::vector<std::string> names;
  for (const workspace* w = this; w != nullptr; w = w->parent_.get()) {
    for (const auto& [n, b] : w->blobs_) names.push_back(n);
    if (!w->more_) continue;
    for (const auto& [n, b] : w->more_->forwarded) names.push_back(n);
  }
  return names;
}

std::vector<std::string> workspace::local_blobs() const {
  std::vector<std::string> names;
  names.reserve(blobs_.size());
  for (const auto& [n, b] : blobs_) names.push_back(n);
  return names;
}

status workspace::forward(std::string local_name, const workspace& other, std::string_view other_name) {
  auto b = other.lookup(other_name);
  if (!b) {
    return fail(errc::blob_not_found,
                "workspace " + quote(other.name_) + ": blob " + quote(other_name) + " does not exist");
  }
  more().forwarded.insert_or_assign(std::move(local_name), std::move(b));
  return ok();
}

error workspace::typed_error(std::string_view name, const blob& b, const std::string& expected) const {
  std::string where = "workspace " + quote(name_) + ": blob " + quote(name) + ": ";
  if (!b.has_value()) return {errc::blob_empty, where + "expected " + expected + ", but it has no value"};
  return {errc::type_mismatch, where + "expected " + expected + ", got " + b.type_name()};
}

result<net_instance*> workspace::create_net(const net& n, bool overwrite) {
  return create_net(n, operator_registry::global(), overwrite);
}

result<net_instance*> workspace::create_net(const net& n, const operator_registry& registry, bool overwrite) {
  auto& nets = more().nets;
  auto it = nets.find(n.name());
  if (it != nets.end() && !overwrite) {
    return fail(errc::net_exists,
                "workspace " + quote(name_) + ": net " + quote(n.name()) + " already exists (overwrite not requested)");
  }
  // Bound before the old one goes: a net that fails to bind replaces
  // nothing.
  TASKGROUP_TRY(auto inst, net_instance::make(n, *this, registry));
  net_instance* p = inst.get();
  if (it != nets.end()) {
    it->second = std::move(inst);
  } else {
    nets.emplace(n.name(), std::move(inst));
  }
  return p;
}

net_instance* workspace::find_net(std::string_view name) const noexcept {
  if (!more_) return nullptr;
  auto it = more_->nets.find(name);
  return it == more_->nets.end() ? nullptr : it->second.get();
}

std::shared_ptr<net_instance> workspace::shared_net(std::string_view name) const noexcept {
  if (!more_) return nullptr;
  auto it = more_->nets.find(name);
  return it == more_->nets.end() ? nullptr : it->second;
}

bool workspace::remove_net(std::string_view name) {
  if (!more_) return false;
  auto it = more_->nets.find(name);
  if (it == more_->nets.end()) return false;
  more_->nets.erase(it);
  return true;
}

result<net_instance*> workspace::instance_of(const net& n, const operator_registry& registry) {
  if (first_key_ == n.id()) {
    if (!first_.token.expired()) return first_.instance.get();
    first_ = keyed_instance{};  // the address was reused by a new net
    first_key_ = nullptr;
  }
  if (first_key_ == nullptr && (!more_ || more_->instances.empty())) {
    TASKGROUP_TRY(auto inst, net_instance::make(n, *this, registry));
    first_key_ = n.id();
    first_ = keyed_instance{n.token(), std::move(inst)};
    return first_.instance.get();
  }
  extras& x = more();
  auto it = x.instances.find(n.id());
  if (it != x.instances.end()) {
    if (!it->second.token.expired()) return it->second.instance.get();
    x.instances.erase(it);  // the address was reused by a new net
  }
  // Drop instances of nets nobody holds any more (a long-lived node
  // workspace serving many groups); not on every new instance, which made
  // binding N nets in one workspace quadratic.
  if (x.instances.size() >= x.sweep_at) {
    std::erase_if(x.instances, [](const auto& kv) { return kv.second.token.expired(); });
    x.sweep_at = std::max<std::size_t>(64, 2 * x.instances.size());
  }
  TASKGROUP_TRY(auto inst, net_instance::make(n, *this, registry));
  net_instance* p = inst.get();
  x.instances.emplace(n.id(), keyed_instance{n.token(), std::move(inst)});
  return p;
}

std::vector<std::string> workspace::nets() const {
  std::vector<std::string> names;
  if (!more_) return names;
  for (const auto& [n, i] : more_->nets) names.push_back(n);
  return names;
}

void workspace::set_compute_executor(boost::asio::any_io_executor ex) {
  detail::gate_of(*this).compute = std::move(ex);
}

boost::asio::any_io_executor workspace::compute_executor() const {
  if (const detail::offload_gate* g = detail::find_gate(*this); g != nullptr && g->compute) return *g->compute;
  return default_compute_executor();
}

namespace detail {

offload_gate& gate_of(workspace& ws) {
  workspace* root = &ws;
  while (root->parent_) root = root->parent_.get();
  std::unique_ptr<offload_gate>& gate = root->more().gate;
  if (!gate) gate = std::make_unique<offload_gate>();
  return *gate;
}

offload_gate* find_gate(const workspace& ws) noexcept {
  const workspace* root = &ws;
  while (root->parent_) root = root->parent_.get();
  return root->more_ ? root->more_->gate.get() : nullptr;
}

}  // namespace detail

}  // namespace taskgroup
