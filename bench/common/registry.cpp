#include "common/registry.hpp"

#include <utility>

namespace tgbench {

registry& registry::get() {
  static registry r;
  return r;
}

void registry::add(workload w) { workloads_.push_back(std::move(w)); }
void registry::add(contender c) { contenders_.push_back(std::move(c)); }

}  // namespace tgbench
