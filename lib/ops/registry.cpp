// taskgroup: operator schemas (their checks of an op's definition) and the
// registry of operator types. The process-wide registry, which holds the
// built-ins, is defined beside them (builtin_registry.cpp).
#include <taskgroup/operator.hpp>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

namespace taskgroup {

namespace {

std::string count_text(std::size_t min, std::size_t max) {
  if (min == max) return std::to_string(min);
  if (max == operator_schema::unbounded) return "at least " + std::to_string(min);
  return std::to_string(min) + " to " + std::to_string(max);
}

error already_registered(const std::string& type) {
  return {errc::duplicate_operator, "operator type " + quote(type) + " is already registered"};
}

}  // namespace

// --- operator_schema ---------------------------------------------------------

operator_schema::operator_schema(std::string type) : type_(std::move(type)) {}

operator_schema& operator_schema::inputs(std::size_t min, std::size_t max) {
  min_in_ = min;
  max_in_ = max;
  return *this;
}

operator_schema& operator_schema::outputs(std::size_t min, std::size_t max) {
  min_out_ = min;
  max_out_ = max;
  return *this;
}

operator_schema& operator_schema::arg(std::string name, argument_kind kind, std::string doc) {
  return arg(std::move(name), std::vector<argument_kind>{kind}, std::move(doc));
}

operator_schema& operator_schema::arg(std::string name, std::vector<argument_kind> kinds, std::string doc) {
  args_.push_back({std::move(name), std::move(kinds), false, std::move(doc), std::nullopt});
  return *this;
}

operator_schema& operator_schema::required_arg(std::string name, argument_kind kind, std::string doc) {
  return required_arg(std::move(name), std::vector<argument_kind>{kind}, std::move(doc));
}

operator_schema& operator_schema::required_arg(std::string name, std::vector<argument_kind> kinds, std::string doc) {
  args_.push_back({std::move(name), std::move(kinds), true, std::move(doc), std::nullopt});
  return *this;
}

operator_schema& operator_schema::arg_with_default(std::string name, argument default_value, std::string doc) {
  std::vector<argument_kind> kinds{kind_of(default_value)};
  args_.push_back({std::move(name), std::move(kinds), false, std::move(doc), std::move(default_value)});
  return *this;
}

operator_schema& operator_schema::any_args() {
  any_args_ = true;
  return *this;
}

operator_schema& operator_schema::offload(bool on) {
  offload_ = on;
  return *this;
}

operator_schema& operator_schema::doc(std::string text) {
  doc_ = std::move(text);
  return *this;
}

operator_schema& operator_schema::factory(kernel_factory f, bool async) {
  factory_ = std::move(f);
  async_ = async;
  return *this;
}

status operator_schema::validate(const op_def& def) const {
  if (def.inputs.size() < min_in_ || def.inputs.size() > max_in_) {
    return fail(errc::arity_mismatch,
                "expects " + count_text(min_in_, max_in_) + " input(s), got " + std::to_string(def.inputs.size()));
  }
  if (def.outputs.size() < min_out_ || def.outputs.size() > max_out_) {
    return fail(errc::arity_mismatch,
                "expects " + count_text(min_out_, max_out_) + " output(s), got " + std::to_string(def.outputs.size()));
  }
  for (const auto& spec : args_) {
    const argument* a = def.args.find(spec.name);
    if (a == nullptr) {
      if (spec.required) return fail(errc::bad_argument, "missing required argument " + quote(spec.name));
      continue;
    }
    if (std::find(spec.kinds.begin(), spec.kinds.end(), kind_of(*a)) == spec.kinds.end()) {
      std::string expected;
      for (auto k : spec.kinds) expected += (expected.empty() ? "" : " or ") + std::string(to_string(k));
      return fail(errc::bad_argument, "argument " + quote(spec.name) + ": expected " + expected + ", got " +
                                          std::string(to_string(kind_of(*a))));
    }
  }
  if (!any_args_) {
    for (const auto& item : def.args) {
      const std::string& name = item.first;
      bool known = std::any_of(args_.begin(), args_.end(), [&](const argument_spec& s) { return s.name == name; });
      if (!known) return fail(errc::bad_argument, "unknown argument " + quote(name));
    }
  }
  return ok();
}

result<std::unique_ptr<op_kernel>> operator_schema::instantiate(op_context& ctx) const {
  if (!factory_) return fail(errc::unknown_operator, "operator " + quote(type_) + " has no kernel");
  return factory_(ctx);
}

// --- operator_registry -------------------------------------------------------

operator_registry::operator_registry(const operator_registry& other) {
  std::shared_lock lock(other.mutex_);
  table_ = other.table_;
}

status operator_registry::add(operator_schema schema) {
  std::unique_lock lock(mutex_);
  std::string type = schema.type();
  if (table_.count(type) != 0) {
    return fail(already_registered(type));
  }
  table_.emplace(std::move(type), std::make_shared<const operator_schema>(std::move(schema)));
  return ok();
}

void operator_registry::add_or_replace(operator_schema schema) {
  std::unique_lock lock(mutex_);
  std::string type = schema.type();
  table_.insert_or_assign(std::move(type), std::make_shared<const operator_schema>(std::move(schema)));
}

status operator_registry::merge(const operator_registry& other) {
  std::vector<std::pair<std::string, std::shared_ptr<const operator_schema>>> incoming;
  {
    std::shared_lock lock(other.mutex_);
    incoming.assign(other.table_.begin(), other.table_.end());
  }
  std::sort(incoming.begin(), incoming.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::unique_lock lock(mutex_);
  for (const auto& [type, schema] : incoming) {
    if (table_.count(type) != 0) {
      return fail(already_registered(type));
    }
  }
  table_.insert(incoming.begin(), incoming.end());
  return ok();
}

std::shared_ptr<const operator_schema> operator_registry::find(std::string_view type) const {
  std::shared_lock lock(mutex_);
  auto it = table_.find(std::string(type));
  return it == table_.end() ? nullptr : it->second;
}

result<std::shared_ptr<const operator_schema>> operator_registry::get(std::string_view type) const {
  if (auto s = find(type)) return s;
  return fail(errc::unknown_operator, "unknown operator type " + quote(type));
}

std::vector<std::string> operator_registry::types() const {
  std::shared_lock lock(mutex_);
  std::vector<std::string> names;
  names.reserve(table_.size());
  for (const auto& [n, s] : table_) names.push_back(n);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace taskgroup
