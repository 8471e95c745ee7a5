// taskgroup: the registration of the built-in operators, and the
// process-wide registry that holds them. Defined here, beside the
// built-ins, so that the registry itself (registry.cpp) knows none of them.
#include "ops/builtins.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace taskgroup {

void detail::builtin_table::add(operator_schema& schema) {
  status st = registry_->add(std::move(schema));
  if (!st && first_) first_ = std::move(st);
}

status register_builtin_ops(operator_registry& registry) {
  detail::builtin_table table(registry);
  detail::add_value_ops(table);
  detail::add_arithmetic_ops(table);
  detail::add_counter_ops(table);
  detail::add_effect_ops(table);
  detail::add_queue_ops(table);
  detail::add_compute_ops(table);
  detail::add_net_ops(table);
  return std::move(table).first_failure();
}

bool detail::is_builtin_type(std::string_view type) {
  static const std::vector<std::string> names = [] {
    operator_registry r;
    (void)register_builtin_ops(r);
    return r.types();  // sorted
  }();
  return std::binary_search(names.begin(), names.end(), type, std::less<>());
}

operator_registry& operator_registry::global() {
  static operator_registry* instance = [] {
    auto* r = new operator_registry;  // never destroyed: usable from static destructors
    (void)register_builtin_ops(*r);
    return r;
  }();
  return *instance;
}

}  // namespace taskgroup
