// taskgroup command: --load and `taskgroup ops`. The text listing is drawn
// from the JSON one, so that both always say the same.
#include "ops.hpp"

#include "results.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <map>
#include <string>
#include <variant>

namespace taskgroup::cli {

namespace json = boost::json;

namespace {

json::value bound(std::size_t n) {
  if (n == operator_schema::unbounded) return nullptr;
  return json::value(static_cast<std::uint64_t>(n));
}

json::value bounds(std::pair<std::size_t, std::size_t> b) {
  return json::object{{"min", bound(b.first)}, {"max", bound(b.second)}};
}

// An argument's value as plain JSON (its kinds are listed beside it).
json::value plain(const argument& a) {
  return std::visit(
      [](const auto& v) -> json::value {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, double> || std::is_same_v<T, bool>) {
          return json::value(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return json::value(v);
        } else {
          json::array arr;
          for (const auto& x : v) arr.emplace_back(static_cast<typename T::value_type>(x));
          return arr;
        }
      },
      a);
}

json::value argument_json(const argument_spec& spec) {
  json::array kinds;
  for (auto k : spec.kinds) kinds.emplace_back(to_string(k));
  return json::object{{"name", spec.name},
                      {"kinds", std::move(kinds)},
                      {"required", spec.required},
                      {"default", spec.default_value ? plain(*spec.default_value) : json::value(nullptr)},
                      {"doc", spec.doc}};
}

std::string count_text(const json::value& b) {
  const auto& o = b.as_object();
  const std::string min = json::serialize(o.at("min"));
  if (o.at("max").is_null()) return min + "+";
  const std::string max = json::serialize(o.at("max"));
  return min == max ? min : min + ".." + max;
}

}  // namespace

result<std::vector<op_library>> load_libraries(const std::vector<std::string>& paths) {
  std::vector<op_library> loaded;
  for (const auto& p : paths) {
    TASKGROUP_TRY(auto lib, load_op_library(p, operator_registry::global()));
    loaded.push_back(std::move(lib));
  }
  return loaded;
}

json::value operators_json(const operator_registry& registry, const std::vector<op_library>& libraries) {
  std::map<std::string, std::string> origin;
  for (const auto& lib : libraries) {
    for (const auto& type : lib.operators) origin[type] = lib.path.string();
  }
  json::array ops;
  for (const auto& type : registry.types()) {
    auto schema = registry.find(type);
    if (!schema) continue;  // removed meanwhile (another thread's registry)
    json::array args;
    for (const auto& spec : schema->argument_specs()) args.push_back(argument_json(spec));
    auto from = origin.find(type);
    ops.push_back(json::object{{"type", type},
                               {"doc", schema->doc()},
                               {"inputs", bounds(schema->input_bounds())},
                               {"outputs", bounds(schema->output_bounds())},
                               {"async", schema->is_async()},
                               {"offload", schema->is_offloaded()},
                               {"any_args", schema->accepts_any_args()},
                               {"library", from == origin.end() ? json::value(nullptr) : json::value(from->second)},
                               {"arguments", std::move(args)}});
  }
  return json::object{{"operators", std::move(ops)}};
}

std::string operators_text(const operator_registry& registry, const std::vector<op_library>& libraries) {
  const json::value all = operators_json(registry, libraries);
  std::string out;
  for (const auto& v : all.at("operators").as_array()) {
    const auto& op = v.as_object();
    out += std::string(op.at("type").as_string()) + "  " + count_text(op.at("inputs")) + " -> " +
           count_text(op.at("outputs"));
    if (op.at("async").as_bool()) out += ", async";
    if (op.at("offload").as_bool()) out += ", offloaded";
    if (op.at("any_args").as_bool()) out += ", any arguments";
    if (!op.at("library").is_null()) out += "  (from " + std::string(op.at("library").as_string()) + ")";
    out += '\n';
    if (!op.at("doc").as_string().empty()) out += "    " + std::string(op.at("doc").as_string()) + '\n';
    for (const auto& a : op.at("arguments").as_array()) {
      const auto& arg = a.as_object();
      std::vector<std::string> kinds;
      for (const auto& k : arg.at("kinds").as_array()) kinds.emplace_back(k.as_string());
      std::string line = "    " + std::string(arg.at("name").as_string()) + "  ";
      for (std::size_t i = 0; i < kinds.size(); ++i) line += (i == 0 ? "" : " or ") + kinds[i];
      if (arg.at("required").as_bool()) {
        line += ", required";
      } else if (!arg.at("default").is_null()) {
        std::string value = json_text(arg.at("default"));  // doubles as doubles
        value.pop_back();                                  // its newline
        line += ", default " + value;
      } else {
        line += ", optional";
      }
      if (!arg.at("doc").as_string().empty()) line += "  " + std::string(arg.at("doc").as_string());
      out += line + '\n';
    }
  }
  return out;
}

}  // namespace taskgroup::cli
