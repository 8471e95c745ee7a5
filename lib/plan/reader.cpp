// Reading plans: JSON to a task group, every fault named by its JSON pointer.
#include "plan/internal.hpp"

#include <algorithm>
#include <filesystem>
#include <set>

namespace taskgroup {

namespace json = boost::json;
using namespace plan_detail;

namespace {

// Concatenates parts pairwise (a body copies its parts' items: joining them
// one by one would take quadratic time for a long body).
body join_bodies(std::vector<body> parts) {
  if (parts.empty()) return body{};
  while (parts.size() > 1) {
    std::vector<body> next;
    next.reserve((parts.size() + 1) / 2);
    for (std::size_t i = 0; i + 1 < parts.size(); i += 2) next.push_back(body{parts[i], parts[i + 1]});
    if (parts.size() % 2 == 1) next.push_back(std::move(parts.back()));
    parts = std::move(next);
  }
  return std::move(parts.front());
}

class reader {
 public:
  explicit reader(const operator_registry& r) : registry_(r) {}

  result<task_group> plan(plan_members& m);

 private:
  result<op_def> op(const json::value& v, const pointer& opp) {
    TASKGROUP_TRY(auto o, get_object(v, opp));
    TASKGROUP_TRY(known_keys(*o, opp, {"type", "inputs", "outputs", "args", "offload"}));
    const auto* type_v = o->if_contains("type");
    if (type_v == nullptr) return bad(opp, "an op needs a \"type\"");
    op_def def;
    TASKGROUP_TRY(def.type, get_string(*type_v, child(opp, "type")));
    if (const auto* x = o->if_contains("inputs")) {
      TASKGROUP_TRY(def.inputs, get_names(*x, child(opp, "inputs")));
    }
    if (const auto* x = o->if_contains("outputs")) {
      TASKGROUP_TRY(def.outputs, get_names(*x, child(opp, "outputs")));
    }
    if (const auto* x = o->if_contains("args")) {
      const pointer ap = child(opp, "args");
      TASKGROUP_TRY(auto args, get_object(*x, ap));
      for (const auto& [k, a] : *args) {
        TASKGROUP_TRY(auto value, argument_from_json(a, child(ap, k)));
        def.args.set(std::string(k), std::move(value));
      }
    }
    if (const auto* x = o->if_contains("offload")) {
      TASKGROUP_TRY(def.offload, get_bool(*x, child(opp, "offload")));
    }
    auto schema = registry_.find(def.type);
    if (!schema) return bad(opp, "unknown operator type " + quote(def.type));
    if (auto st = schema->validate(def); !st) {
      // Point at the argument when the message names one.
      const pointer args_at = child(opp, "args");
      std::optional<pointer> arg_at;
      for (const auto& [k, x] : def.args) {
        if (st.error().message.find(quote(k)) != std::string::npos) arg_at.emplace(args_at, k);
      }
      return bad(arg_at ? *arg_at : opp, def.type + ": " + st.error().message);
    }
    return def;
  }

  status net_of(const json::value& v, const pointer& np) {
    TASKGROUP_TRY(auto o, get_object(v, np));
    TASKGROUP_TRY(known_keys(*o, np, {"name", "ops"}));
    const auto* name_v = o->if_contains("name");
    if (name_v == nullptr) return bad(np, "a net needs a \"name\"");
    TASKGROUP_TRY(auto name, get_name(*name_v, child(np, "name")));
    if (nets_.count(name)) return bad(child(np, "name"), "duplicate net name " + quote(name));
    net n(name);
    if (const auto* x = o->if_contains("ops")) {
      const pointer opsp = child(np, "ops");
      TASKGROUP_TRY(auto ops, get_array(*x, opsp));
      for (std::size_t j = 0; j < ops->size(); ++j) {
        TASKGROUP_TRY(auto def, op((*ops)[j], child(opsp, j)));
        n.add(std::move(def));
      }
    }
    const std::string_view key = n.name();
    nets_.emplace(key, std::move(n));
    return ok();
  }

  // A body run `outer` times at once (read_step_tree).
  result<body> body_of(const json::value& v, const pointer& ptr, std::int64_t outer = 1) {
    TASKGROUP_TRY(auto arr, get_array(v, ptr));
    std::vector<body> parts;
    parts.reserve(arr->size());
    for (std::size_t i = 0; i < arr->size(); ++i) {
      const pointer ip = child(ptr, i);
      TASKGROUP_TRY(auto o, get_object((*arr)[i], ip));
      if (const auto* net_v = o->size() == 1 ? o->if_contains("net") : nullptr) {
        const pointer np = child(ip, "net");
        TASKGROUP_TRY(auto name, get_name(*net_v, np));
        auto it = nets_.find(name);
        if (it == nets_.end()) return bad(np, "unknown net " + quote(name));
        parts.emplace_back(it->second);
      } else {
        TASKGROUP_TRY(auto s, read_step_tree((*arr)[i], ip, nets_, outer));
        parts.emplace_back(std::move(s));
      }
    }
    return join_bodies(std::move(parts));
  }

  result<std::chrono::milliseconds> interval(const json::object& o, const pointer& ptr) {
    if (!o.contains("interval_ms")) return std::chrono::milliseconds(1000);
    return get_duration(o.at("interval_ms"), child(ptr, "interval_ms"));
  }

  result<workspace_type> ws_type(const json::value& v, const pointer& ptr) {
    TASKGROUP_TRY(auto s, get_string(v, ptr));
    if (s == "global") return workspace_type::global;
    if (s == "private") return workspace_type::private_;
    return bad(ptr, "expected \"global\" or \"private\", got " + quote(s));
  }

  // The node named at `o["node"]` ("local" when absent).
  result<std::string> node_name(const json::object& o, const pointer& ptr) {
    const auto* v = o.if_contains("node");
    if (v == nullptr) return std::string("local");
    return get_name(*v, child(ptr, "node"));
  }

  status node_list(const json::value& v);
  status task_setup(task& t, const json::object& to, const pointer& tp);
  result<task> task_of(const json::value& v, const pointer& tp);
  status report_steps(task_group& g, const json::value& v, const std::set<std::string>& task_nodes);
  status local_setups(task_group& g, plan_members& m, const std::set<std::string>& task_nodes);
  status remote_nets(task_group& g, const json::value& v);

  const operator_registry& registry_;
  net_table nets_;
  std::map<std::string, arguments> node_options_;
};

status reader::node_list(const json::value& v) {
  const pointer at(document_root, "nodes");
  TASKGROUP_TRY(auto arr, get_array(v, at));
  for (std::size_t i = 0; i < arr->size(); ++i) {
    const pointer np = child(at, i);
    TASKGROUP_TRY(auto n, get_object((*arr)[i], np));
    TASKGROUP_TRY(known_keys(*n, np, {"name", "options"}));
    if (!n->contains("name")) return bad(np, "a node needs a \"name\"");
    TASKGROUP_TRY(auto name, get_name(n->at("name"), child(np, "name")));
    arguments opts;
    if (const auto* x = n->if_contains("options")) {
      const pointer op = child(np, "options");
      TASKGROUP_TRY(auto oo, get_object(*x, op));
      for (const auto& [k, a] : *oo) {
        TASKGROUP_TRY(auto value, argument_from_json(a, child(op, k)));
        opts.set(std::string(k), std::move(value));
      }
    }
    node_options_[name] = std::move(opts);
  }
  return ok();
}

status reader::task_setup(task& t, const json::object& to, const pointer& tp) {
  for (const char* key : {"init", "exit", "instance_init", "instance_exit"}) {
    if (!to.contains(key)) continue;
    const std::string_view k = key;
    // Instance work runs in every instance; task work once.
    const std::int64_t outer = k.starts_with("instance_") ? t.num_instances() : 1;
    TASKGROUP_TRY(auto b, body_of(to.at(key), child(tp, key), outer));
    if (k == "init") t.init(std::move(b));
    if (k == "exit") t.exit(std::move(b));
    if (k == "instance_init") t.instance_init(std::move(b));
    if (k == "instance_exit") t.instance_exit(std::move(b));
  }
  if (const auto* x = to.if_contains("reports")) {
    const pointer rp = child(tp, "reports");
    TASKGROUP_TRY(auto reps, get_array(*x, rp));
    for (std::size_t j = 0; j < reps->size(); ++j) {
      const pointer p = child(rp, j);
      TASKGROUP_TRY(auto r, get_object((*reps)[j], p));
      TASKGROUP_TRY(known_keys(*r, p, {"step", "interval_ms"}));
      if (!r->contains("step")) return bad(p, "a report needs a \"step\"");
      TASKGROUP_TRY(auto s, read_step_tree(r->at("step"), child(p, "step"), nets_, t.num_instances()));
      TASKGROUP_TRY(auto every, interval(*r, p));
      t.report(std::move(s), every);
    }
  }
  return ok();
}

result<task> reader::task_of(const json::value& v, const pointer& tp) {
  TASKGROUP_TRY(auto to, get_object(v, tp));
  TASKGROUP_TRY(known_keys(*to, tp,
                           {"name", "node", "num_instances", "workspace_type", "retry", "step", "outputs", "init",
                            "exit", "instance_init", "instance_exit", "reports"}));
  std::string name;
  if (const auto* x = to->if_contains("name")) {
    TASKGROUP_TRY(name, get_name(*x, child(tp, "name")));
  }
  task t(name);
  TASKGROUP_TRY(auto where, node_name(*to, tp));
  auto opts = node_options_.find(where);
  t.node(node(where, opts != node_options_.end() ? opts->second : arguments{}));
  if (const auto* x = to->if_contains("num_instances")) {
    TASKGROUP_TRY(auto n, get_instances(*x, child(tp, "num_instances")));
    t.num_instances(n);
  }
  if (const auto* x = to->if_contains("workspace_type")) {
    TASKGROUP_TRY(auto wt, ws_type(*x, child(tp, "workspace_type")));
    t.workspace_type(wt);
  }
  if (const auto* x = to->if_contains("retry")) {
    TASKGROUP_TRY(auto p, read_retry(*x, child(tp, "retry")));
    t.retry(std::move(p));
  }
  if (const auto* x = to->if_contains("step")) {
    TASKGROUP_TRY(auto s, read_step_tree(*x, child(tp, "step"), nets_, t.num_instances()));
    t.step(std::move(s));
  }
  if (const auto* x = to->if_contains("outputs")) {
    const pointer op = child(tp, "outputs");
    TASKGROUP_TRY(auto outs, get_array(*x, op));
    for (std::size_t j = 0; j < outs->size(); ++j) {
      if ((*outs)[j].is_array()) {
        TASKGROUP_TRY(auto names, get_names((*outs)[j], child(op, j)));
        t.declare_output(std::move(names), true);
      } else {
        TASKGROUP_TRY(auto b, get_name((*outs)[j], child(op, j)));
        t.declare_output({std::move(b)});
      }
    }
  }
  TASKGROUP_TRY(task_setup(t, *to, tp));
  return t;
}

status reader::report_steps(task_group& g, const json::value& v, const std::set<std::string>& task_nodes) {
  const pointer at(document_root, "report_steps");
  TASKGROUP_TRY(auto arr, get_array(v, at));
  for (std::size_t i = 0; i < arr->size(); ++i) {
    const pointer rp = child(at, i);
    TASKGROUP_TRY(auto r, get_object((*arr)[i], rp));
    TASKGROUP_TRY(known_keys(*r, rp, {"node", "step", "interval_ms"}));
    TASKGROUP_TRY(auto where, node_name(*r, rp));
    if (!task_nodes.count(where)) return bad(rp, "report step on node " + quote(where) + ", which has no task");
    if (!r->contains("step")) return bad(rp, "a report step needs a \"step\"");
    TASKGROUP_TRY(auto s, read_step_tree(r->at("step"), child(rp, "step"), nets_));
    TASKGROUP_TRY(auto every, interval(*r, rp));
    g.report_step(std::move(s), node(where), every);
  }
  return ok();
}

status reader::remote_nets(task_group& g, const json::value& v) {
  const pointer at(document_root, "remote_nets");
  TASKGROUP_TRY(auto arr, get_array(v, at));
  for (std::size_t i = 0; i < arr->size(); ++i) {
    const pointer rp = child(at, i);
    TASKGROUP_TRY(auto r, get_object((*arr)[i], rp));
    TASKGROUP_TRY(known_keys(*r, rp, {"node", "net"}));
    TASKGROUP_TRY(auto where, node_name(*r, rp));
    if (!r->contains("net")) return bad(rp, "a remote net needs a \"net\" (the name of one of \"nets\")");
    const pointer np = child(rp, "net");
    TASKGROUP_TRY(auto name, get_name(r->at("net"), np));
    auto it = nets_.find(name);
    if (it == nets_.end()) return bad(np, "unknown net " + quote(name));
    if (status st = g.add_remote_net(it->second, node(where)); !st) return bad(rp, st.error().message);
  }
  return ok();
}

status reader::local_setups(task_group& g, plan_members& m, const std::set<std::string>& task_nodes) {
  for (const char* key : {"local_init", "local_exit"}) {
    TASKGROUP_TRY(const json::value* v, m.value(key));
    if (v == nullptr) continue;
    const pointer lp = child(document_root, key);
    TASKGROUP_TRY(auto arr, get_array(*v, lp));
    for (std::size_t i = 0; i < arr->size(); ++i) {
      const pointer ip = child(lp, i);
      TASKGROUP_TRY(auto e, get_object((*arr)[i], ip));
      TASKGROUP_TRY(known_keys(*e, ip, {"node", "body"}));
      TASKGROUP_TRY(auto where, node_name(*e, ip));
      if (!task_nodes.count(where)) return bad(ip, "local setup on node " + quote(where) + ", which has no task");
      if (!e->contains("body")) return bad(ip, "local setup needs a \"body\"");
      TASKGROUP_TRY(auto b, body_of(e->at("body"), child(ip, "body")));
      if (std::string_view(key) == "local_init") {
        g.local_init(node(where), std::move(b));
      } else {
        g.local_exit(node(where), std::move(b));
      }
    }
  }
  return ok();
}

// The keys a plan may hold at its top.
constexpr std::string_view plan_keys[] = {"taskgroup_plan", "name",       "workspace_type", "nodes",
                                          "inputs",         "nets",       "tasks",          "report_steps",
                                          "local_init",     "local_exit", "remote_nets"};

// The group's name at the plan's "name": a string within the limits of
// `task_group::name`.
result<std::string> group_name(const json::value& v) {
  const pointer at(document_root, "name");
  TASKGROUP_TRY(auto name, get_string(v, at));
  if (std::string f = detail::group_name_fault(name); !f.empty()) return bad(at, f);
  return name;
}

result<task_group> reader::plan(plan_members& m) {
  for (std::string_view k : m.keys()) {
    if (std::find(std::begin(plan_keys), std::end(plan_keys), k) == std::end(plan_keys)) {
      return unknown_key(document_root, k);
    }
  }
  if (!m.has("taskgroup_plan")) return bad(document_root, "not a taskgroup plan (no \"taskgroup_plan\" version)");
  const pointer version_at(document_root, "taskgroup_plan");
  TASKGROUP_TRY(const json::value* version_v, m.value("taskgroup_plan"));
  TASKGROUP_TRY(auto version, get_integer(*version_v, version_at));
  if (version != plan_format_version) {
    return bad(version_at, "unsupported plan version " + std::to_string(version) + " (this reader knows " +
                               std::to_string(plan_format_version) + ")");
  }
  std::string name;
  TASKGROUP_TRY(const json::value* name_v, m.value("name"));
  if (name_v != nullptr) {
    TASKGROUP_TRY(name, group_name(*name_v));
  }
  // Nets first, wherever they are: steps name them.
  const pointer nets_at(document_root, "nets");
  TASKGROUP_TRY(m.each("nets", [&](const json::value& e, std::size_t i) { return net_of(e, child(nets_at, i)); }));
  std::optional<workspace_type> type;
  TASKGROUP_TRY(const json::value* type_v, m.value("workspace_type"));
  if (type_v != nullptr) {
    TASKGROUP_TRY(type, ws_type(*type_v, child(document_root, "workspace_type")));
  }
  task_group g(type);
  g.name(std::move(name));
  TASKGROUP_TRY(const json::value* nodes_v, m.value("nodes"));
  if (nodes_v != nullptr) {
    TASKGROUP_TRY(node_list(*nodes_v));
  }
  const pointer tasks_at(document_root, "tasks");
  TASKGROUP_TRY(m.each("tasks", [&](const json::value& e, std::size_t i) -> status {
    const pointer tp = child(tasks_at, i);
    TASKGROUP_TRY(auto t, task_of(e, tp));
    if (auto added = g.add(std::move(t)); !added) return bad(tp, added.error().message);
    return ok();
  }));
  std::set<std::string> task_nodes;
  for (const auto& t : g.tasks()) task_nodes.insert(t.node_name());
  TASKGROUP_TRY(const json::value* inputs_v, m.value("inputs"));
  if (inputs_v != nullptr) {
    TASKGROUP_TRY(read_inputs(g, *inputs_v, child(document_root, "inputs"), task_nodes));
  }
  TASKGROUP_TRY(const json::value* reports_v, m.value("report_steps"));
  if (reports_v != nullptr) {
    TASKGROUP_TRY(report_steps(g, *reports_v, task_nodes));
  }
  TASKGROUP_TRY(local_setups(g, m, task_nodes));
  TASKGROUP_TRY(const json::value* remote_v, m.value("remote_nets"));
  if (remote_v != nullptr) {
    TASKGROUP_TRY(remote_nets(g, *remote_v));
  }
  return g;
}

// Plan text: read in two passes (see plan_detail::outline) when its root
// is an object, else parsed whole (the error names what it is).
result<task_group> read_text(std::string_view text, const operator_registry& registry) {
  TASKGROUP_TRY(auto found, outline_text(text));
  reader r(registry);
  if (found) {
    auto m = text_members(text, std::move(*found));
    return r.plan(*m);
  }
  TASKGROUP_TRY(const auto doc, parse_text(text));
  TASKGROUP_TRY(auto m, document_members(doc.v));
  return r.plan(*m);
}

}  // namespace

result<task_group> read_plan(const json::value& plan, const operator_registry& registry) {
  TASKGROUP_TRY(auto m, document_members(plan));
  reader r(registry);
  return r.plan(*m);
}

result<task_group> read_plan(std::string_view text, const operator_registry& registry) {
  return read_text(text, registry);
}

result<task_group> read_plan_file(const std::filesystem::path& path, const operator_registry& registry) {
  // The text is read in two passes and never becomes a document whole: at
  // most the text, one element's document and the group are alive at once.
  TASKGROUP_TRY(const std::string text, read_file_text(path, "plan file"));
  auto g = read_text(text, registry);
  if (!g) return g.error().with_context(path.string());
  return g;
}

}  // namespace taskgroup
