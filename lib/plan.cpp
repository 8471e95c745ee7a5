#include <taskgroup/plan.hpp>

#include <boost/json.hpp>

#include <charconv>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace taskgroup {

namespace json = boost::json;

// --- writing -----------------------------------------------------------------

namespace {

json::value arg_to_json(const argument& a) {
  return std::visit(
      [](const auto& v) -> json::value {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::vector<bool>>) {
          json::array arr;
          for (bool b : v) arr.emplace_back(b);
          return arr;
        } else if constexpr (std::is_same_v<T, std::vector<std::int64_t>> || std::is_same_v<T, std::vector<double>> ||
                             std::is_same_v<T, std::vector<std::string>>) {
          json::array arr;
          for (const auto& x : v) arr.emplace_back(json::value_from(x));
          return arr;
        } else {
          return json::value_from(v);
        }
      },
      a);
}

// Empty lists and whole-valued doubles do not survive plain JSON typing;
// they are written as {"type": ..., "value": ...}.
json::value typed_arg(const argument& a) {
  const argument_kind k = kind_of(a);
  bool ambiguous = false;
  if (k == argument_kind::float64) {
    double d = std::get<double>(a);
    ambiguous = d == static_cast<double>(static_cast<std::int64_t>(d));
  } else if (k == argument_kind::int64_list || k == argument_kind::float64_list || k == argument_kind::boolean_list ||
             k == argument_kind::string_list) {
    ambiguous = json::value(arg_to_json(a)).as_array().empty() || k == argument_kind::float64_list;
  }
  if (!ambiguous) return arg_to_json(a);
  return json::object{{"type", std::string(to_string(k))}, {"value", arg_to_json(a)}};
}

class writer {
 public:
  status add_net(const net& n, const std::string& where) {
    if (auto inl = n.first_inline_op()) {
      for (std::size_t i = 0; i < n.ops().size(); ++i) {
        if (n.ops()[i].inline_schema) {
          return fail(errc::not_serializable, where + "net " + quote(n.name()) + " op #" + std::to_string(i) + " (" +
                                                  n.ops()[i].type +
                                                  "): an inline operator cannot be written to a plan");
        }
      }
    }
    auto it = seen_.find(n.name());
    if (it != seen_.end()) {
      if (!it->second.same(n)) {
        return fail(errc::duplicate_net, where + "different nets with same name: " + quote(n.name()));
      }
      return ok();
    }
    seen_.emplace(n.name(), n);
    json::array ops;
    for (const auto& op : n.ops()) {
      json::object o;
      o["type"] = op.type;
      json::array in, out;
      for (const auto& s : op.inputs) in.emplace_back(json::string(s));
      for (const auto& s : op.outputs) out.emplace_back(json::string(s));
      o["inputs"] = std::move(in);
      o["outputs"] = std::move(out);
      if (!op.args.empty()) {
        json::object args;
        for (const auto& [k, v] : op.args) args[k] = typed_arg(v);
        o["args"] = std::move(args);
      }
      ops.emplace_back(std::move(o));
    }
    nets_.emplace_back(json::object{{"name", n.name()}, {"ops", std::move(ops)}});
    return ok();
  }

  result<json::value> step(const execution_step& s, const std::string& where) {
    json::object o;
    o["name"] = s.name();
    if (!s.nets().empty()) {
      json::array names;
      for (const auto& n : s.nets()) {
        TASKGROUP_TRY(add_net(n, where));
        names.emplace_back(json::string(n.name()));
      }
      o["nets"] = std::move(names);
    }
    if (!s.substeps().empty()) {
      json::array subs;
      for (const auto& c : s.substeps()) {
        TASKGROUP_TRY(auto v, step(c, where));
        subs.push_back(std::move(v));
      }
      o["substeps"] = std::move(subs);
    }
    if (s.num_iter()) o["num_iter"] = *s.num_iter();
    if (s.stop_blob()) o["should_stop_blob"] = *s.stop_blob();
    if (s.is_only_once()) o["only_once"] = true;
    if (s.has_concurrent_substeps()) o["concurrent_substeps"] = true;
    if (s.report_interval()) o["run_every_ms"] = s.report_interval()->count();
    if (s.creates_workspace()) o["create_workspace"] = true;
    if (s.num_concurrent_instances() != 1) o["num_concurrent_instances"] = s.num_concurrent_instances();
    if (s.deadline()) o["timeout_ms"] = s.deadline()->count();
    return json::value(std::move(o));
  }

  result<json::value> body_items(const body& b, const std::string& where) {
    json::array arr;
    for (const auto& it : b.items()) {
      if (const auto* n = std::get_if<net>(&it)) {
        TASKGROUP_TRY(add_net(*n, where));
        arr.emplace_back(json::object{{"net", n->name()}});
      } else if (const auto* s = std::get_if<execution_step>(&it)) {
        TASKGROUP_TRY(auto v, step(*s, where));
        arr.push_back(std::move(v));
      } else {
        return fail(errc::not_serializable, where + "a stop marker cannot be used in setup work");
      }
    }
    return json::value(std::move(arr));
  }

  json::array take_nets() { return std::move(nets_); }

 private:
  std::map<std::string, net> seen_;
  json::array nets_;
};

json::value options_json(const arguments& args) {
  json::object o;
  for (const auto& [k, v] : args) o[k] = typed_arg(v);
  return o;
}

}  // namespace

result<json::value> plan_to_json(const task_group& group) {
  writer w;
  json::object plan;
  plan["taskgroup_plan"] = plan_format_version;
  if (group.type()) plan["workspace_type"] = std::string(to_string(*group.type()));

  json::array nodes;
  for (const auto& name : group.cluster().nodes()) {
    json::object n{{"name", name}};
    if (!group.cluster().options(name).empty()) n["options"] = options_json(group.cluster().options(name));
    nodes.emplace_back(std::move(n));
  }
  plan["nodes"] = std::move(nodes);

  json::array tasks;
  json::array local_init, local_exit;
  for (const auto& t : group.tasks()) {
    const std::string where = "task " + quote(t.name()) + ": ";
    json::object o;
    o["name"] = t.name().substr(t.node_name().size() + 1);
    o["node"] = t.node_name();
    if (t.instances() != 1) o["num_instances"] = t.instances();
    if (t.type()) o["workspace_type"] = std::string(to_string(*t.type()));
    if (t.user_step()) {
      TASKGROUP_TRY(auto s, w.step(*t.user_step(), where));
      o["step"] = std::move(s);
    }
    json::array outs;
    for (const auto& st : t.output_states()) {
      if (st->list) {
        json::array names;
        for (const auto& b : st->blobs) names.emplace_back(json::string(b));
        outs.emplace_back(std::move(names));
      } else {
        outs.emplace_back(json::string(st->blobs.front()));
      }
    }
    if (!outs.empty()) o["outputs"] = std::move(outs);
    json::array init, exit, inst_init, inst_exit;
    for (const auto& [obj, scope] : t.setups()) {
      TASKGROUP_TRY(auto in, w.body_items(obj->setup(), where));
      TASKGROUP_TRY(auto ex, w.body_items(obj->exit(), where));
      auto append = [](json::array& to, json::value& from) {
        for (auto& v : from.as_array()) to.push_back(std::move(v));
      };
      switch (scope) {
        case setup_scope::task:
          append(init, in);
          append(exit, ex);
          break;
        case setup_scope::instance:
          append(inst_init, in);
          append(inst_exit, ex);
          break;
        case setup_scope::local:
          if (!in.as_array().empty()) local_init.emplace_back(json::object{{"node", t.node_name()}, {"body", in}});
          if (!ex.as_array().empty()) local_exit.emplace_back(json::object{{"node", t.node_name()}, {"body", ex}});
          break;
      }
    }
    if (!init.empty()) o["init"] = std::move(init);
    if (!exit.empty()) o["exit"] = std::move(exit);
    if (!inst_init.empty()) o["instance_init"] = std::move(inst_init);
    if (!inst_exit.empty()) o["instance_exit"] = std::move(inst_exit);
    json::array reports;
    for (const auto& [s, every] : t.reports()) {
      TASKGROUP_TRY(auto v, w.step(s, where));
      reports.emplace_back(json::object{{"interval_ms", every.count()}, {"step", std::move(v)}});
    }
    if (!reports.empty()) o["reports"] = std::move(reports);
    tasks.emplace_back(std::move(o));
  }
  plan["tasks"] = std::move(tasks);

  json::array reports;
  for (const auto& r : group.report_steps()) {
    TASKGROUP_TRY(auto v, w.step(r.step, "report step " + quote(r.step.name()) + ": "));
    reports.emplace_back(json::object{{"node", r.node}, {"interval_ms", r.interval.count()}, {"step", std::move(v)}});
  }
  if (!reports.empty()) plan["report_steps"] = std::move(reports);
  for (const auto& [node_name, obj] : group.local_setups()) {
    const std::string where = "local setup of node " + quote(node_name) + ": ";
    TASKGROUP_TRY(auto in, w.body_items(obj->setup(), where));
    TASKGROUP_TRY(auto ex, w.body_items(obj->exit(), where));
    if (!in.as_array().empty()) local_init.emplace_back(json::object{{"node", node_name}, {"body", in}});
    if (!ex.as_array().empty()) local_exit.emplace_back(json::object{{"node", node_name}, {"body", ex}});
  }
  if (!local_init.empty()) plan["local_init"] = std::move(local_init);
  if (!local_exit.empty()) plan["local_exit"] = std::move(local_exit);
  plan["nets"] = w.take_nets();
  return json::value(std::move(plan));
}

namespace {

void pretty(std::ostream& os, const json::value& v, int indent) {
  const std::string pad(static_cast<std::size_t>(indent) * 2, ' ');
  const std::string inner(static_cast<std::size_t>(indent + 1) * 2, ' ');
  switch (v.kind()) {
    case json::kind::object: {
      const auto& o = v.get_object();
      if (o.empty()) {
        os << "{}";
        return;
      }
      os << "{\n";
      bool first = true;
      for (const auto& [k, x] : o) {
        if (!first) os << ",\n";
        first = false;
        os << inner << json::serialize(json::string(k)) << ": ";
        pretty(os, x, indent + 1);
      }
      os << "\n" << pad << "}";
      return;
    }
    case json::kind::array: {
      const auto& a = v.get_array();
      bool scalars = std::all_of(a.begin(), a.end(), [](const json::value& x) { return !x.is_structured(); });
      if (a.empty() || scalars) {
        os << "[";
        for (std::size_t i = 0; i < a.size(); ++i) {
          if (i != 0) os << ", ";
          pretty(os, a[i], indent + 1);
        }
        os << "]";
        return;
      }
      os << "[\n";
      bool first = true;
      for (const auto& x : a) {
        if (!first) os << ",\n";
        first = false;
        os << inner;
        pretty(os, x, indent + 1);
      }
      os << "\n" << pad << "]";
      return;
    }
    case json::kind::double_: {
      // Shortest round-trip form, always with a '.' or exponent so it reads
      // back as a double (Boost.JSON would write 1.5E0).
      char buf[64];
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v.get_double());
      std::string text(buf, ec == std::errc() ? end : buf);
      if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
      os << text;
      return;
    }
    default: os << json::serialize(v);
  }
}

}  // namespace

std::string pretty_json(const json::value& v) {
  std::ostringstream os;
  pretty(os, v, 0);
  os << "\n";
  return os.str();
}

result<std::string> write_plan(const task_group& group) {
  TASKGROUP_TRY(auto v, plan_to_json(group));
  return pretty_json(v);
}

// --- reading -----------------------------------------------------------------

namespace {

// A JSON pointer under construction (RFC 6901 escaping).
std::string child(const std::string& ptr, std::string_view key) {
  std::string out = ptr + "/";
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}
std::string child(const std::string& ptr, std::size_t i) { return ptr + "/" + std::to_string(i); }

error bad(const std::string& ptr, const std::string& what) {
  return {errc::invalid_plan, (ptr.empty() ? std::string("/") : ptr) + ": " + what};
}

std::string_view kind_name(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return "null";
    case json::kind::bool_: return "bool";
    case json::kind::int64:
    case json::kind::uint64: return "integer";
    case json::kind::double_: return "number";
    case json::kind::string: return "string";
    case json::kind::array: return "array";
    case json::kind::object: return "object";
  }
  return "value";
}

class reader {
 public:
  explicit reader(const operator_registry& r) : registry_(r) {}

  result<const json::object*> object(const json::value& v, const std::string& ptr) {
    if (!v.is_object()) return bad(ptr, "expected an object, got " + std::string(kind_name(v)));
    return &v.get_object();
  }
  result<const json::array*> array(const json::value& v, const std::string& ptr) {
    if (!v.is_array()) return bad(ptr, "expected an array, got " + std::string(kind_name(v)));
    return &v.get_array();
  }
  result<std::string> string(const json::value& v, const std::string& ptr) {
    if (!v.is_string()) return bad(ptr, "expected a string, got " + std::string(kind_name(v)));
    return std::string(v.get_string());
  }
  result<std::int64_t> integer(const json::value& v, const std::string& ptr) {
    if (v.is_int64()) return v.get_int64();
    if (v.is_uint64() && v.get_uint64() <= static_cast<std::uint64_t>(INT64_MAX))
      return static_cast<std::int64_t>(v.get_uint64());
    return bad(ptr, "expected an integer, got " + std::string(kind_name(v)));
  }
  result<bool> boolean(const json::value& v, const std::string& ptr) {
    if (!v.is_bool()) return bad(ptr, "expected true or false, got " + std::string(kind_name(v)));
    return v.get_bool();
  }
  result<std::vector<std::string>> strings(const json::value& v, const std::string& ptr) {
    TASKGROUP_TRY(auto arr, array(v, ptr));
    std::vector<std::string> out;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      TASKGROUP_TRY(auto s, string((*arr)[i], child(ptr, i)));
      out.push_back(std::move(s));
    }
    return out;
  }

  // Rejects keys the format does not know (typos must not pass silently).
  status known_keys(const json::object& o, const std::string& ptr, std::initializer_list<std::string_view> keys) {
    for (const auto& [k, v] : o) {
      if (std::find(keys.begin(), keys.end(), std::string_view(k)) == keys.end()) {
        return bad(child(ptr, k), "unknown key " + quote(k));
      }
    }
    return ok();
  }

  result<argument> arg(const json::value& v, const std::string& ptr) {
    if (v.is_object()) {
      const auto& o = v.get_object();
      TASKGROUP_TRY(known_keys(o, ptr, {"type", "value"}));
      if (!o.contains("type") || !o.contains("value")) return bad(ptr, "a typed argument needs \"type\" and \"value\"");
      TASKGROUP_TRY(auto type, string(o.at("type"), child(ptr, "type")));
      const json::value& val = o.at("value");
      const std::string vp = child(ptr, "value");
      if (type == "double") {
        if (!val.is_number()) return bad(vp, "expected a number, got " + std::string(kind_name(val)));
        return argument(val.to_number<double>());
      }
      if (type == "int64") {
        TASKGROUP_TRY(auto i, integer(val, vp));
        return argument(i);
      }
      if (type == "bool") {
        TASKGROUP_TRY(auto b, boolean(val, vp));
        return argument(b);
      }
      if (type == "string") {
        TASKGROUP_TRY(auto s, string(val, vp));
        return argument(std::move(s));
      }
      TASKGROUP_TRY(auto arr, array(val, vp));
      if (type == "list<int64>") {
        std::vector<std::int64_t> out;
        for (std::size_t i = 0; i < arr->size(); ++i) {
          TASKGROUP_TRY(auto x, integer((*arr)[i], child(vp, i)));
          out.push_back(x);
        }
        return argument(std::move(out));
      }
      if (type == "list<double>") {
        std::vector<double> out;
        for (std::size_t i = 0; i < arr->size(); ++i) {
          if (!(*arr)[i].is_number()) return bad(child(vp, i), "expected a number");
          out.push_back((*arr)[i].to_number<double>());
        }
        return argument(std::move(out));
      }
      if (type == "list<bool>") {
        std::vector<bool> out;
        for (std::size_t i = 0; i < arr->size(); ++i) {
          TASKGROUP_TRY(auto x, boolean((*arr)[i], child(vp, i)));
          out.push_back(x);
        }
        return argument(std::move(out));
      }
      if (type == "list<string>") {
        TASKGROUP_TRY(auto out, strings(val, vp));
        return argument(std::move(out));
      }
      return bad(child(ptr, "type"), "unknown argument type " + quote(type));
    }
    switch (v.kind()) {
      case json::kind::bool_: return argument(v.get_bool());
      case json::kind::int64:
      case json::kind::uint64: {
        TASKGROUP_TRY(auto i, integer(v, ptr));
        return argument(i);
      }
      case json::kind::double_: return argument(v.get_double());
      case json::kind::string: return argument(std::string(v.get_string()));
      case json::kind::array: {
        const auto& arr = v.get_array();
        if (arr.empty()) return bad(ptr, "an empty list needs a type: {\"type\": \"list<int64>\", \"value\": []}");
        // The first element fixes the list's type; every other must match.
        auto same = [&](auto pred, const char* what) -> status {
          for (std::size_t i = 0; i < arr.size(); ++i) {
            if (!pred(arr[i])) {
              return bad(child(ptr, i), std::string("expected ") + what + " like the list's first element, got " +
                                            std::string(kind_name(arr[i])));
            }
          }
          return ok();
        };
        const json::value& first = arr.front();
        if (first.is_bool()) {
          TASKGROUP_TRY(same([](const json::value& x) { return x.is_bool(); }, "a bool"));
          std::vector<bool> out;
          for (const auto& x : arr) out.push_back(x.get_bool());
          return argument(std::move(out));
        }
        if (first.is_int64() || first.is_uint64()) {
          std::vector<std::int64_t> out;
          for (std::size_t i = 0; i < arr.size(); ++i) {
            if (!arr[i].is_int64() && !arr[i].is_uint64()) {
              return bad(child(ptr, i), "expected an integer like the list's first element, got " +
                                            std::string(kind_name(arr[i])) +
                                            " (write a list of doubles as {\"type\": \"list<double>\", ...})");
            }
            TASKGROUP_TRY(auto x, integer(arr[i], child(ptr, i)));
            out.push_back(x);
          }
          return argument(std::move(out));
        }
        if (first.is_double()) {
          TASKGROUP_TRY(same([](const json::value& x) { return x.is_number(); }, "a number"));
          std::vector<double> out;
          for (const auto& x : arr) out.push_back(x.to_number<double>());
          return argument(std::move(out));
        }
        if (first.is_string()) {
          TASKGROUP_TRY(same([](const json::value& x) { return x.is_string(); }, "a string"));
          std::vector<std::string> out;
          for (const auto& x : arr) out.emplace_back(x.get_string());
          return argument(std::move(out));
        }
        return bad(child(ptr, 0), "a list holds bools, integers, numbers or strings");
      }
      default: return bad(ptr, "an argument is a bool, number, string or list, got " + std::string(kind_name(v)));
    }
  }

  status nets(const json::value& v, const std::string& ptr) {
    TASKGROUP_TRY(auto arr, array(v, ptr));
    for (std::size_t i = 0; i < arr->size(); ++i) {
      const std::string np = child(ptr, i);
      TASKGROUP_TRY(auto o, object((*arr)[i], np));
      TASKGROUP_TRY(known_keys(*o, np, {"name", "ops"}));
      if (!o->contains("name")) return bad(np, "a net needs a \"name\"");
      TASKGROUP_TRY(auto name, string(o->at("name"), child(np, "name")));
      if (nets_.count(name)) return bad(child(np, "name"), "duplicate net name " + quote(name));
      net n(name);
      if (o->contains("ops")) {
        const std::string opsp = child(np, "ops");
        TASKGROUP_TRY(auto ops, array(o->at("ops"), opsp));
        for (std::size_t j = 0; j < ops->size(); ++j) {
          const std::string opp = child(opsp, j);
          TASKGROUP_TRY(auto op, object((*ops)[j], opp));
          TASKGROUP_TRY(known_keys(*op, opp, {"type", "inputs", "outputs", "args"}));
          if (!op->contains("type")) return bad(opp, "an op needs a \"type\"");
          op_def def;
          TASKGROUP_TRY(def.type, string(op->at("type"), child(opp, "type")));
          if (op->contains("inputs")) {
            TASKGROUP_TRY(def.inputs, strings(op->at("inputs"), child(opp, "inputs")));
          }
          if (op->contains("outputs")) {
            TASKGROUP_TRY(def.outputs, strings(op->at("outputs"), child(opp, "outputs")));
          }
          if (op->contains("args")) {
            const std::string ap = child(opp, "args");
            TASKGROUP_TRY(auto args, object(op->at("args"), ap));
            for (const auto& [k, x] : *args) {
              TASKGROUP_TRY(auto a, arg(x, child(ap, k)));
              def.args.set(std::string(k), std::move(a));
            }
          }
          auto schema = registry_.find(def.type);
          if (!schema) return bad(opp, "unknown operator type " + quote(def.type));
          if (auto st = schema->validate(def); !st) {
            std::string where = opp;
            // Point at the argument when the message names one.
            for (const auto& [k, x] : def.args) {
              if (st.error().message.find(quote(k)) != std::string::npos) where = child(child(opp, "args"), k);
            }
            return bad(where, def.type + ": " + st.error().message);
          }
          n.add(std::move(def));
        }
      }
      nets_.emplace(name, n);
    }
    return ok();
  }

  result<net> net_ref(const json::value& v, const std::string& ptr) {
    TASKGROUP_TRY(auto name, string(v, ptr));
    auto it = nets_.find(name);
    if (it == nets_.end()) return bad(ptr, "unknown net " + quote(name));
    return it->second;
  }

  result<execution_step> step(const json::value& v, const std::string& ptr) {
    TASKGROUP_TRY(auto o, object(v, ptr));
    TASKGROUP_TRY(
        known_keys(*o, ptr,
                   {"name", "nets", "substeps", "num_iter", "should_stop_blob", "only_once", "concurrent_substeps",
                    "run_every_ms", "create_workspace", "num_concurrent_instances", "timeout_ms"}));
    std::string name = "step";
    if (o->contains("name")) {
      TASKGROUP_TRY(name, string(o->at("name"), child(ptr, "name")));
    }
    if (o->contains("nets") && o->contains("substeps")) return bad(ptr, "both \"nets\" and \"substeps\"");
    execution_step s(name);
    if (o->contains("nets")) {
      const std::string np = child(ptr, "nets");
      TASKGROUP_TRY(auto arr, array(o->at("nets"), np));
      for (std::size_t i = 0; i < arr->size(); ++i) {
        TASKGROUP_TRY(auto n, net_ref((*arr)[i], child(np, i)));
        s.add_net(std::move(n));
      }
    }
    if (o->contains("substeps")) {
      const std::string sp = child(ptr, "substeps");
      TASKGROUP_TRY(auto arr, array(o->at("substeps"), sp));
      for (std::size_t i = 0; i < arr->size(); ++i) {
        TASKGROUP_TRY(auto c, step((*arr)[i], child(sp, i)));
        s.add_substep(std::move(c));
      }
    }
    if (o->contains("num_iter") && o->contains("should_stop_blob")) {
      return bad(ptr, "both \"num_iter\" and \"should_stop_blob\"");
    }
    if (o->contains("num_iter")) {
      TASKGROUP_TRY(auto n, integer(o->at("num_iter"), child(ptr, "num_iter")));
      if (n < 0) return bad(child(ptr, "num_iter"), "must be >= 0, got " + std::to_string(n));
      s.iterations(n);
    }
    if (o->contains("should_stop_blob")) {
      TASKGROUP_TRY(auto b, string(o->at("should_stop_blob"), child(ptr, "should_stop_blob")));
      s.should_stop_blob(std::move(b));
    }
    if (o->contains("only_once")) {
      TASKGROUP_TRY(auto b, boolean(o->at("only_once"), child(ptr, "only_once")));
      if (b && !o->contains("should_stop_blob")) return bad(child(ptr, "only_once"), "needs \"should_stop_blob\"");
      s.only_once(b);
    }
    if (o->contains("concurrent_substeps")) {
      TASKGROUP_TRY(auto b, boolean(o->at("concurrent_substeps"), child(ptr, "concurrent_substeps")));
      s.concurrent_substeps(b);
    }
    if (o->contains("create_workspace")) {
      TASKGROUP_TRY(auto b, boolean(o->at("create_workspace"), child(ptr, "create_workspace")));
      s.create_workspace(b);
    }
    if (o->contains("run_every_ms")) {
      TASKGROUP_TRY(auto ms, integer(o->at("run_every_ms"), child(ptr, "run_every_ms")));
      if (ms <= 0) return bad(child(ptr, "run_every_ms"), "must be > 0, got " + std::to_string(ms));
      s.run_every(std::chrono::milliseconds(ms));
    }
    if (o->contains("num_concurrent_instances")) {
      TASKGROUP_TRY(auto n, integer(o->at("num_concurrent_instances"), child(ptr, "num_concurrent_instances")));
      if (n < 1) return bad(child(ptr, "num_concurrent_instances"), "must be >= 1, got " + std::to_string(n));
      s.concurrent_instances(n);
    }
    if (o->contains("timeout_ms")) {
      TASKGROUP_TRY(auto ms, integer(o->at("timeout_ms"), child(ptr, "timeout_ms")));
      if (ms <= 0) return bad(child(ptr, "timeout_ms"), "must be > 0, got " + std::to_string(ms));
      s.timeout(std::chrono::milliseconds(ms));
    }
    if (auto st = s.validate(); !st) return bad(ptr, st.error().message);
    return s;
  }

  result<body> body_of(const json::value& v, const std::string& ptr) {
    TASKGROUP_TRY(auto arr, array(v, ptr));
    std::vector<body> parts;
    body b;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      const std::string ip = child(ptr, i);
      TASKGROUP_TRY(auto o, object((*arr)[i], ip));
      if (o->contains("net") && o->size() == 1) {
        TASKGROUP_TRY(auto n, net_ref(o->at("net"), child(ip, "net")));
        b = body{b, body(std::move(n))};
      } else {
        TASKGROUP_TRY(auto s, step((*arr)[i], ip));
        b = body{b, body(std::move(s))};
      }
    }
    return b;
  }

  result<std::chrono::milliseconds> interval(const json::object& o, const std::string& ptr) {
    if (!o.contains("interval_ms")) return std::chrono::milliseconds(1000);
    TASKGROUP_TRY(auto ms, integer(o.at("interval_ms"), child(ptr, "interval_ms")));
    if (ms <= 0) return bad(child(ptr, "interval_ms"), "must be > 0, got " + std::to_string(ms));
    return std::chrono::milliseconds(ms);
  }

  result<workspace_type> ws_type(const json::value& v, const std::string& ptr) {
    TASKGROUP_TRY(auto s, string(v, ptr));
    if (s == "global") return workspace_type::global;
    if (s == "private") return workspace_type::private_;
    return bad(ptr, "expected \"global\" or \"private\", got " + quote(s));
  }

  result<task_group> plan(const json::value& v) {
    TASKGROUP_TRY(auto o, object(v, ""));
    TASKGROUP_TRY(known_keys(
        *o, "",
        {"taskgroup_plan", "workspace_type", "nodes", "nets", "tasks", "report_steps", "local_init", "local_exit"}));
    if (!o->contains("taskgroup_plan")) return bad("", "not a taskgroup plan (no \"taskgroup_plan\" version)");
    TASKGROUP_TRY(auto version, integer(o->at("taskgroup_plan"), "/taskgroup_plan"));
    if (version != plan_format_version) {
      return bad("/taskgroup_plan", "unsupported plan version " + std::to_string(version) + " (this reader knows " +
                                        std::to_string(plan_format_version) + ")");
    }
    if (o->contains("nets")) {
      TASKGROUP_TRY(nets(o->at("nets"), "/nets"));
    }
    std::optional<workspace_type> type;
    if (o->contains("workspace_type")) {
      TASKGROUP_TRY(type, ws_type(o->at("workspace_type"), "/workspace_type"));
    }
    task_group g(type);

    std::map<std::string, arguments> node_options;
    if (o->contains("nodes")) {
      TASKGROUP_TRY(auto arr, array(o->at("nodes"), "/nodes"));
      for (std::size_t i = 0; i < arr->size(); ++i) {
        const std::string np = child("/nodes", i);
        TASKGROUP_TRY(auto n, object((*arr)[i], np));
        TASKGROUP_TRY(known_keys(*n, np, {"name", "options"}));
        if (!n->contains("name")) return bad(np, "a node needs a \"name\"");
        TASKGROUP_TRY(auto name, string(n->at("name"), child(np, "name")));
        arguments opts;
        if (n->contains("options")) {
          const std::string op = child(np, "options");
          TASKGROUP_TRY(auto oo, object(n->at("options"), op));
          for (const auto& [k, x] : *oo) {
            TASKGROUP_TRY(auto a, arg(x, child(op, k)));
            opts.set(std::string(k), std::move(a));
          }
        }
        node_options[name] = std::move(opts);
      }
    }

    if (o->contains("tasks")) {
      TASKGROUP_TRY(auto arr, array(o->at("tasks"), "/tasks"));
      for (std::size_t i = 0; i < arr->size(); ++i) {
        const std::string tp = child("/tasks", i);
        TASKGROUP_TRY(auto to, object((*arr)[i], tp));
        TASKGROUP_TRY(known_keys(*to, tp,
                                 {"name", "node", "num_instances", "workspace_type", "step", "outputs", "init", "exit",
                                  "instance_init", "instance_exit", "reports"}));
        std::string name;
        if (to->contains("name")) {
          TASKGROUP_TRY(name, string(to->at("name"), child(tp, "name")));
        }
        task t(name);
        std::string node_name = "local";
        if (to->contains("node")) {
          TASKGROUP_TRY(node_name, string(to->at("node"), child(tp, "node")));
        }
        t.node(node(node_name, node_options.count(node_name) ? node_options[node_name] : arguments{}));
        if (to->contains("num_instances")) {
          TASKGROUP_TRY(auto n, integer(to->at("num_instances"), child(tp, "num_instances")));
          if (n < 1) return bad(child(tp, "num_instances"), "must be >= 1, got " + std::to_string(n));
          t.num_instances(n);
        }
        if (to->contains("workspace_type")) {
          TASKGROUP_TRY(auto wt, ws_type(to->at("workspace_type"), child(tp, "workspace_type")));
          t.workspace_type(wt);
        }
        if (to->contains("step")) {
          TASKGROUP_TRY(auto s, step(to->at("step"), child(tp, "step")));
          t.step(std::move(s));
        }
        if (to->contains("outputs")) {
          const std::string op = child(tp, "outputs");
          TASKGROUP_TRY(auto outs, array(to->at("outputs"), op));
          for (std::size_t j = 0; j < outs->size(); ++j) {
            if ((*outs)[j].is_array()) {
              TASKGROUP_TRY(auto names, strings((*outs)[j], child(op, j)));
              t.declare_output(std::move(names), true);
            } else {
              TASKGROUP_TRY(auto b, string((*outs)[j], child(op, j)));
              t.declare_output({std::move(b)});
            }
          }
        }
        for (const char* key : {"init", "exit", "instance_init", "instance_exit"}) {
          if (!to->contains(key)) continue;
          TASKGROUP_TRY(auto b, body_of(to->at(key), child(tp, key)));
          const std::string k = key;
          if (k == "init") t.init(std::move(b));
          if (k == "exit") t.exit(std::move(b));
          if (k == "instance_init") t.instance_init(std::move(b));
          if (k == "instance_exit") t.instance_exit(std::move(b));
        }
        if (to->contains("reports")) {
          const std::string rp = child(tp, "reports");
          TASKGROUP_TRY(auto reps, array(to->at("reports"), rp));
          for (std::size_t j = 0; j < reps->size(); ++j) {
            const std::string p = child(rp, j);
            TASKGROUP_TRY(auto r, object((*reps)[j], p));
            TASKGROUP_TRY(known_keys(*r, p, {"step", "interval_ms"}));
            if (!r->contains("step")) return bad(p, "a report needs a \"step\"");
            TASKGROUP_TRY(auto s, step(r->at("step"), child(p, "step")));
            TASKGROUP_TRY(auto every, interval(*r, p));
            t.report(std::move(s), every);
          }
        }
        if (auto added = g.add(std::move(t)); !added) return bad(tp, added.error().message);
      }
    }

    std::set<std::string> task_nodes;
    for (const auto& t : g.tasks()) task_nodes.insert(t.node_name());
    if (o->contains("report_steps")) {
      TASKGROUP_TRY(auto arr, array(o->at("report_steps"), "/report_steps"));
      for (std::size_t i = 0; i < arr->size(); ++i) {
        const std::string rp = child("/report_steps", i);
        TASKGROUP_TRY(auto r, object((*arr)[i], rp));
        TASKGROUP_TRY(known_keys(*r, rp, {"node", "step", "interval_ms"}));
        std::string node_name = "local";
        if (r->contains("node")) {
          TASKGROUP_TRY(node_name, string(r->at("node"), child(rp, "node")));
        }
        if (!task_nodes.count(node_name)) {
          return bad(rp, "report step on node " + quote(node_name) + ", which has no task");
        }
        if (!r->contains("step")) return bad(rp, "a report step needs a \"step\"");
        TASKGROUP_TRY(auto s, step(r->at("step"), child(rp, "step")));
        TASKGROUP_TRY(auto every, interval(*r, rp));
        g.report_step(std::move(s), node(node_name), every);
      }
    }
    for (const char* key : {"local_init", "local_exit"}) {
      if (!o->contains(key)) continue;
      const std::string lp = child("", key);
      TASKGROUP_TRY(auto arr, array(o->at(key), lp));
      for (std::size_t i = 0; i < arr->size(); ++i) {
        const std::string ip = child(lp, i);
        TASKGROUP_TRY(auto e, object((*arr)[i], ip));
        TASKGROUP_TRY(known_keys(*e, ip, {"node", "body"}));
        std::string node_name = "local";
        if (e->contains("node")) {
          TASKGROUP_TRY(node_name, string(e->at("node"), child(ip, "node")));
        }
        if (!task_nodes.count(node_name)) {
          return bad(ip, "local setup on node " + quote(node_name) + ", which has no task");
        }
        if (!e->contains("body")) return bad(ip, "local setup needs a \"body\"");
        TASKGROUP_TRY(auto b, body_of(e->at("body"), child(ip, "body")));
        if (std::string(key) == "local_init") {
          g.local_init(node(node_name), std::move(b));
        } else {
          g.local_exit(node(node_name), std::move(b));
        }
      }
    }
    return g;
  }

 private:
  const operator_registry& registry_;
  std::map<std::string, net> nets_;
};

}  // namespace

result<task_group> read_plan(const json::value& plan, const operator_registry& registry) {
  reader r(registry);
  return r.plan(plan);
}

result<task_group> read_plan(std::string_view text, const operator_registry& registry) {
  json::stream_parser p;
  boost::system::error_code ec;
  std::size_t consumed = p.write_some(text.data(), text.size(), ec);
  if (!ec) p.finish(ec);
  if (ec) {
    // Line and column of the first byte the parser could not take.
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < consumed && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return fail(errc::invalid_plan,
                "line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + ec.message());
  }
  if (consumed < text.size()) {
    std::string_view rest = text.substr(consumed);
    if (rest.find_first_not_of(" \t\r\n") != std::string_view::npos) {
      return fail(errc::invalid_plan, "trailing characters after the JSON document");
    }
  }
  return read_plan(p.release(), registry);
}

result<task_group> read_plan_file(const std::filesystem::path& path, const operator_registry& registry) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(errc::invalid_plan, "cannot open plan file " + quote(path.string()));
  std::ostringstream ss;
  ss << in.rdbuf();
  auto g = read_plan(ss.str(), registry);
  if (!g) return g.error().with_context(path.string());
  return g;
}

}  // namespace taskgroup
