#include <taskgroup/node.hpp>

namespace taskgroup {

void cluster::add(const node& n) {
  const auto [it, inserted] = index_.try_emplace(n.name(), names_.size());
  if (inserted) {
    names_.push_back(n.name());
    options_.push_back(n.options());
    return;
  }
  arguments& merged = options_[it->second];
  for (const auto& [key, value] : n.options()) {
    if (!merged.has(key)) merged.set(key, value);
  }
}

const arguments* cluster::find(std::string_view name) const noexcept {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &options_[it->second];
}

const arguments& cluster::options(std::string_view name) const {
  static const arguments none;
  const arguments* found = find(name);
  return found == nullptr ? none : *found;
}

bool cluster::has(std::string_view name) const noexcept { return find(name) != nullptr; }

}  // namespace taskgroup
