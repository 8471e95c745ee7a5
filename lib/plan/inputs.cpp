// Inputs in plans ("inputs") and feeds from JSON (`read_feeds`,
// `read_feeds_file` and `read_feed`: the command's --inputs and --input):
// one table of the input types a plan can name, used by the reader, the
// writer and the feed reader, and one rule for what a feed's name names.
#include "plan/internal.hpp"

#include <taskgroup/blob.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <typeinfo>
#include <utility>
#include <variant>
#include <vector>

namespace taskgroup::plan_detail {

namespace {

// A plan's input types: the kinds of op arguments, so that a feed is
// written in JSON as an argument is.
struct input_type {
  std::string_view name;
  const std::type_info* type;
  std::string (*blob_type_name)();
};

template <class T>
input_type entry(std::string_view name) {
  return {name, &typeid(T), &taskgroup::type_name<T>};
}

const std::array<input_type, 8>& input_types() {
  static const std::array<input_type, 8> table{
      entry<std::int64_t>("int64"),
      entry<double>("double"),
      entry<bool>("bool"),
      entry<std::string>("string"),
      entry<std::vector<std::int64_t>>("list<int64>"),
      entry<std::vector<double>>("list<double>"),
      entry<std::vector<bool>>("list<bool>"),
      entry<std::vector<std::string>>("list<string>"),
  };
  return table;
}

std::string type_names() {
  std::string out;
  for (const auto& t : input_types()) out += (out.empty() ? "" : ", ") + std::string(t.name);
  return out;
}

// A feed value as the argument reader reads it; an integer (or a list of
// them) fed to a double input becomes a double (list).
result<blob> feed_value(const json::value& v, const pointer& ptr, const std::type_info* want) {
  TASKGROUP_TRY(argument a, argument_from_json(v, ptr));
  if (want != nullptr && *want == typeid(double)) {
    if (const auto* i = std::get_if<std::int64_t>(&a)) a = static_cast<double>(*i);
  }
  if (want != nullptr && *want == typeid(std::vector<double>)) {
    if (const auto* l = std::get_if<std::vector<std::int64_t>>(&a)) a = std::vector<double>(l->begin(), l->end());
  }
  return std::visit([](auto&& x) { return blob(std::move(x)); }, std::move(a));
}

// What a feed's name "node/blob" names: the declared input whose node and
// blob it spells, if one does (either name may hold '/'), else the name
// split at its first '/' (the run refuses a feed of no declared input).
struct feed_target {
  std::string node;
  std::string blob;
  const std::type_info* type = nullptr;  // the declared input's, if typed
};

// Errors (a message, without a place): a name that is not "node/blob", a
// name that spells several declared inputs.
result<feed_target> feed_target_of(std::string_view name, const task_group& group) {
  std::vector<const group_input*> spelled;
  for (const auto& in : group.inputs()) {
    if (name.size() == in.node.size() + 1 + in.blob.size() && name.starts_with(in.node) &&
        name[in.node.size()] == '/' && name.ends_with(in.blob)) {
      spelled.push_back(&in);
    }
  }
  if (spelled.size() == 1) return feed_target{spelled[0]->node, spelled[0]->blob, spelled[0]->type};
  if (spelled.size() > 1) {
    std::string names;
    for (std::size_t i = 0; i < spelled.size(); ++i) {
      if (i > 0) names += i + 1 == spelled.size() ? " and " : ", ";
      names += "node " + quote(spelled[i]->node) + ", blob " + quote(spelled[i]->blob);
    }
    return fail(errc::invalid_plan, "feed " + quote(name) + " is ambiguous: it names " + names);
  }
  const auto slash = name.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == name.size()) {
    return fail(errc::invalid_plan, "a feed is named \"node/blob\", got " + quote(name));
  }
  return feed_target{std::string(name.substr(0, slash)), std::string(name.substr(slash + 1))};
}

// The feed `name` = `value`, the value read at `value_at`; an error in the
// name at `name_at`, or without a place when null.
result<feeds::entry> feed_entry(std::string_view name, const json::value& value, const pointer& value_at,
                                const pointer* name_at, const task_group& group) {
  auto target = feed_target_of(name, group);
  if (!target) return name_at != nullptr ? bad(*name_at, target.error().message) : target.error();
  TASKGROUP_TRY(blob b, feed_value(value, value_at, target.value().type));
  return feeds::entry{std::move(target.value().node), std::move(target.value().blob),
                      std::make_shared<const blob>(std::move(b))};
}

}  // namespace

status read_inputs(task_group& g, const json::value& v, const pointer& ptr, const std::set<std::string>& task_nodes) {
  TASKGROUP_TRY(auto arr, get_array(v, ptr));
  for (std::size_t i = 0; i < arr->size(); ++i) {
    const pointer ip = child(ptr, i);
    TASKGROUP_TRY(auto o, get_object((*arr)[i], ip));
    TASKGROUP_TRY(known_keys(*o, ip, {"node", "blob", "type", "required"}));
    if (!o->contains("blob")) return bad(ip, "an input needs a \"blob\"");
    TASKGROUP_TRY(auto blob_name, get_name(o->at("blob"), child(ip, "blob")));
    std::string node_name = "local";
    if (const auto* n = o->if_contains("node")) {
      TASKGROUP_TRY(node_name, get_name(*n, child(ip, "node")));
    }
    bool required = true;
    if (const auto* r = o->if_contains("required")) {
      TASKGROUP_TRY(required, get_bool(*r, child(ip, "required")));
    }
    const input_type* type = nullptr;
    if (const auto* t = o->if_contains("type")) {
      TASKGROUP_TRY(auto name, get_string(*t, child(ip, "type")));
      for (const auto& it : input_types()) {
        if (it.name == name) type = &it;
      }
      if (type == nullptr) {
        return bad(child(ip, "type"), "unknown input type " + quote(name) + " (one of " + type_names() + ")");
      }
    }
    if (!task_nodes.count(node_name)) return bad(ip, "input on node " + quote(node_name) + ", which has no task");
    status st = type != nullptr ? g.declare_input(std::move(blob_name), node(node_name), required, type->type,
                                                  type->blob_type_name())
                                : g.declare_input(std::move(blob_name), node(node_name), required);
    if (!st) return bad(ip, st.error().message);
  }
  return ok();
}

result<json::value> inputs_json(const task_group& g) {
  json::array out;
  for (const auto& in : g.inputs()) {
    json::object o{{"node", in.node}, {"blob", in.blob}};
    if (in.type != nullptr) {
      const input_type* type = nullptr;
      for (const auto& it : input_types()) {
        if (*it.type == *in.type) type = &it;
      }
      if (type == nullptr) {
        return fail(errc::not_serializable, "input " + quote(in.node + "/" + in.blob) + " of type " + in.type_name +
                                                ": a plan names only " + type_names());
      }
      o["type"] = type->name;
    }
    if (!in.required) o["required"] = false;
    out.emplace_back(std::move(o));
  }
  return json::value(std::move(out));
}

}  // namespace taskgroup::plan_detail

namespace taskgroup {

result<feeds> read_feeds(const boost::json::value& v, const task_group& group) {
  using namespace plan_detail;
  TASKGROUP_TRY(auto o, get_object(v, document_root));
  feeds out;
  for (const auto& [key, value] : *o) {
    const pointer ptr = child(document_root, key);
    TASKGROUP_TRY(auto e, feed_entry(key, value, ptr, &ptr, group));
    out.set_blob(std::move(e.node), std::move(e.blob), std::move(e.value));
  }
  return out;
}

result<feeds::entry> read_feed(std::string_view name, const boost::json::value& value, const task_group& group) {
  return plan_detail::feed_entry(name, value, plan_detail::document_root, nullptr, group);
}

result<boost::json::value> parse_json(std::string_view text) {
  TASKGROUP_TRY(const auto doc, plan_detail::parse_text(text, plan_detail::text_kind::json));
  return boost::json::value(doc.v, boost::json::storage_ptr());  // out of the document's arena
}

result<feeds> read_feeds(std::string_view text, const task_group& group) {
  TASKGROUP_TRY(const auto doc, plan_detail::parse_text(text, plan_detail::text_kind::inputs));
  return read_feeds(doc.v, group);
}

result<feeds> read_feeds_file(const std::filesystem::path& path, const task_group& group) {
  TASKGROUP_TRY(const std::string text, plan_detail::read_file_text(path, "inputs file"));
  auto f = read_feeds(text, group);
  if (!f) return f.error().with_context("inputs file " + quote(path.string()));
  return f;
}

}  // namespace taskgroup
