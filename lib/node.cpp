#include <taskgroup/node.hpp>

#include <algorithm>

namespace taskgroup {

void cluster::add(const node& n) {
  auto it = std::find(names_.begin(), names_.end(), n.name());
  if (it == names_.end()) {
    names_.push_back(n.name());
    options_.push_back(n.options());
    return;
  }
  arguments& merged = options_[static_cast<std::size_t>(it - names_.begin())];
  for (const auto& [key, value] : n.options()) {
    if (!merged.has(key)) merged.set(key, value);
  }
}

const arguments& cluster::options(std::string_view name) const {
  static const arguments none;
  auto it = std::find(names_.begin(), names_.end(), name);
  return it == names_.end() ? none : options_[static_cast<std::size_t>(it - names_.begin())];
}

bool cluster::has(std::string_view name) const noexcept {
  return std::find(names_.begin(), names_.end(), name) != names_.end();
}

}  // namespace taskgroup
