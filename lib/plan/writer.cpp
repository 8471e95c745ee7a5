// Writing plans: a task group as JSON, in the format's canonical form.
#include "plan/internal.hpp"

#include "model/task_access.hpp"

#include <limits>

namespace taskgroup {

namespace json = boost::json;
using namespace plan_detail;

namespace {

class writer {
 public:
  status add_net(const net& n, const std::string& where) {
    auto it = seen_.find(n.name());
    if (it != seen_.end()) {
      if (!it->second.same(n)) {
        return fail(errc::duplicate_net, where + "different nets with same name: " + quote(n.name()));
      }
      return ok();
    }
    json::array ops;
    for (std::size_t i = 0; i < n.ops().size(); ++i) {
      const auto& op = n.ops()[i];
      const std::string what = where + "net " + quote(n.name()) + " op #" + std::to_string(i) + " (" + op.type + ")";
      if (op.inline_schema) {
        return fail(errc::not_serializable, what + ": an inline operator cannot be written to a plan");
      }
      json::object o;
      o["type"] = op.type;
      json::array in, out;
      for (const auto& s : op.inputs) in.emplace_back(json::string(s));
      for (const auto& s : op.outputs) out.emplace_back(json::string(s));
      o["inputs"] = std::move(in);
      o["outputs"] = std::move(out);
      if (!op.args.empty()) {
        json::object args;
        for (const auto& [k, v] : op.args) {
          auto a = argument_to_json(v);
          if (!a) return a.error().with_context(what + ": argument " + quote(k));
          args[k] = std::move(a).value();
        }
        o["args"] = std::move(args);
      }
      if (op.offload) o["offload"] = true;
      ops.emplace_back(std::move(o));
    }
    seen_.emplace(n.name(), n);
    nets_.emplace_back(json::object{{"name", n.name()}, {"ops", std::move(ops)}});
    return ok();
  }

  // A tree that would not run is not written (its misuse, a limit, a
  // depth past max_step_depth): `read_plan` would refuse it, or read a
  // different tree.
  result<json::value> step(const execution_step& s, const std::string& where) {
    if (status st = s.validate(); !st) return error{st.error().code, where + st.error().message};
    return write_step_tree(s, [&](const net& n) { return add_net(n, where); });
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

result<json::value> options_json(const std::string& node_name, const arguments& args) {
  json::object o;
  for (const auto& [k, v] : args) {
    auto a = argument_to_json(v);
    if (!a) return a.error().with_context("node " + quote(node_name) + ": option " + quote(k));
    o[k] = std::move(a).value();
  }
  return json::value(std::move(o));
}

void append(json::array& to, json::value& from) {
  for (auto& v : from.as_array()) to.push_back(std::move(v));
}

result<json::value> task_json(writer& w, const task& t, json::array& local_init, json::array& local_exit) {
  TASKGROUP_TRY(t.validate());
  const std::string where = "task " + quote(t.name()) + ": ";
  json::object o;
  o["name"] = t.name().substr(t.node_name().size() + 1);
  o["node"] = t.node_name();
  if (t.num_instances() != 1) o["num_instances"] = t.num_instances();
  if (t.workspace_type()) o["workspace_type"] = std::string(to_string(*t.workspace_type()));
  if (writes_retry(t.retry())) o["retry"] = retry_json(t.retry());
  if (t.step()) {
    TASKGROUP_TRY(auto s, w.step(*t.step(), where));
    o["step"] = std::move(s);
  }
  json::array outs;
  for (const auto& st : t.declared_outputs()) {
    if (st.list) {
      json::array names;
      for (const auto& b : st.blobs) names.emplace_back(json::string(b));
      outs.emplace_back(std::move(names));
    } else {
      outs.emplace_back(json::string(st.blobs.front()));
    }
  }
  if (!outs.empty()) o["outputs"] = std::move(outs);
  json::array init, exit, inst_init, inst_exit;
  for (const auto& [obj, scope] : t.setups()) {
    TASKGROUP_TRY(auto in, w.body_items(obj->setup(), where));
    TASKGROUP_TRY(auto ex, w.body_items(obj->exit(), where));
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
  return json::value(std::move(o));
}

}  // namespace

namespace {

// The reader's rules for the strings of a plan, applied to one about to
// be written, so that what write_plan writes read_plan reads: every
// string valid UTF-8, and every name free of control characters (a name
// is any string but argument and node option values and "type"s). An
// explicit stack: a plan is as deep as its step trees. Errors:
// `errc::not_serializable` at the string's JSON pointer.
status check_strings(const json::value& root) {
  struct frame {
    const json::value* v;
    bool keyed;            // a member of an object (else an array element)
    std::string_view key;  // in its parent object
    std::size_t index;     // in its parent array
    bool free_text;        // a value of "args", "options" or "type"
    std::size_t next = 0;  // the member or element to visit next
  };
  std::vector<frame> stack{{&root, false, {}, 0, false}};
  auto fault = [&](const std::string& what) {
    // The pointers view their parents: none may move while they are made.
    std::vector<pointer> path;
    path.reserve(stack.size());
    path.emplace_back();
    for (std::size_t i = 1; i < stack.size(); ++i) {
      if (stack[i].keyed) {
        path.emplace_back(path.back(), stack[i].key);
      } else {
        path.emplace_back(path.back(), stack[i].index);
      }
    }
    const std::string at = path.back().str();
    return fail(errc::not_serializable, (at.empty() ? "/" : at) + ": " + what);
  };
  auto utf8_fault = [](std::string_view text) -> std::string {
    if (invalid_utf8_at(text) == std::string_view::npos) return {};
    return "a string that is not valid UTF-8 cannot be written to a plan (" + quote(text) + ")";
  };
  while (!stack.empty()) {
    frame& f = stack.back();
    if (const json::string* str = f.v->if_string()) {
      const std::string_view text(*str);
      if (std::string e = utf8_fault(text); !e.empty()) return fault(e);
      if (!f.free_text) {
        if (std::string e = name_fault(text); !e.empty()) return fault(e);
      }
      stack.pop_back();
    } else if (const json::object* o = f.v->if_object()) {
      if (f.next == o->size()) {
        stack.pop_back();
        continue;
      }
      const json::key_value_pair& kv = *(o->begin() + static_cast<std::ptrdiff_t>(f.next++));
      const std::string_view key = kv.key();
      const bool free_text = f.free_text || key == "args" || key == "options" || key == "type";
      stack.push_back(frame{&kv.value(), true, key, 0, free_text});
      if (std::string e = utf8_fault(key); !e.empty()) return fault(e);
    } else if (const json::array* a = f.v->if_array()) {
      if (f.next == a->size()) {
        stack.pop_back();
        continue;
      }
      const std::size_t i = f.next++;
      stack.push_back(frame{&(*a)[i], false, {}, i, f.free_text});
    } else {
      stack.pop_back();
    }
  }
  return ok();
}

}  // namespace

result<json::value> plan_to_json(const task_group& group) {
  writer w;
  json::object plan;
  plan["taskgroup_plan"] = plan_format_version;
  if (!group.name().empty()) plan["name"] = group.name();
  if (group.workspace_type()) plan["workspace_type"] = std::string(to_string(*group.workspace_type()));

  json::array nodes;
  for (const auto& name : group.cluster().nodes()) {
    json::object n{{"name", name}};
    if (!group.cluster().options(name).empty()) {
      TASKGROUP_TRY(n["options"], options_json(name, group.cluster().options(name)));
    }
    nodes.emplace_back(std::move(n));
  }
  plan["nodes"] = std::move(nodes);
  if (!group.inputs().empty()) {
    TASKGROUP_TRY(plan["inputs"], inputs_json(group));
  }

  json::array tasks, local_init, local_exit;
  for (const auto& t : group.tasks()) {
    TASKGROUP_TRY(auto o, task_json(w, t, local_init, local_exit));
    tasks.push_back(std::move(o));
  }
  plan["tasks"] = std::move(tasks);

  json::array reports;
  std::set<std::string_view> task_nodes;
  for (const auto& t : group.tasks()) task_nodes.insert(t.node_name());
  for (const auto& r : group.report_steps()) {
    TASKGROUP_TRY(detail::group_access::check_report(r, task_nodes.count(r.node) != 0));
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
  json::array remote;
  for (const auto& r : group.remote_nets()) {
    TASKGROUP_TRY(w.add_net(r.net, "remote net " + quote(r.net.name()) + " for node " + quote(r.node) + ": "));
    remote.emplace_back(json::object{{"node", r.node}, {"net", r.net.name()}});
  }
  if (!remote.empty()) plan["remote_nets"] = std::move(remote);
  plan["nets"] = w.take_nets();
  json::value out(std::move(plan));
  TASKGROUP_TRY(check_strings(out));
  return out;
}

std::string pretty_json(const json::value& v) { return *pretty_text(v, std::numeric_limits<std::size_t>::max()); }

result<std::string> write_plan(const task_group& group) {
  TASKGROUP_TRY(auto v, plan_to_json(group));
  const flat_value doc(std::move(v));
  auto text = pretty_text(doc.v, max_plan_size);
  if (!text) {
    return fail(errc::not_serializable, "the plan would be more than " + std::to_string(max_plan_size) +
                                            " bytes (taskgroup::max_plan_size, 256 MiB), which read_plan refuses");
  }
  return std::move(*text);
}

}  // namespace taskgroup
