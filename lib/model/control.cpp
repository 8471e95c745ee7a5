#include <taskgroup/control.hpp>

#include "model/step_access.hpp"

#include <cstdint>

namespace taskgroup {

condition::condition(net n) : net_(std::move(n)) {
  const auto& ops = net_->ops();
  if (!ops.empty() && !ops.back().outputs.empty()) blob_ = ops.back().outputs.front();
}

body::body(std::vector<net> nets) {
  for (auto& n : nets) items_.emplace_back(std::move(n));
}

body::body(std::vector<execution_step> steps) {
  for (auto& s : steps) items_.emplace_back(std::move(s));
}

body::body(std::initializer_list<body> parts) {
  for (const auto& p : parts) items_.insert(items_.end(), p.items_.begin(), p.items_.end());
}

bool body::has_stop() const noexcept {
  for (const auto& it : items_) {
    if (std::holds_alternative<stop_marker>(it)) return true;
  }
  return false;
}

namespace {

using item = body::item;

net fill_bool(std::string net_name, const std::string& blob, bool value) {
  net n(std::move(net_name));
  n.op("ConstantFill", {}, {blob}, {{"value", value}});
  return n;
}

// The nets that evaluate `c` (if it has a net) into its blob.
void eval_condition(std::vector<item>& out, const condition& c) {
  if (c.computing_net()) out.emplace_back(*c.computing_net());
}

// Builds a step from items. Stop markers become nets that OR their
// condition into `stop` (each its own net, so the check comes right
// after it). All-net lists stay flat, as Caffe2 kept them.
// `label` is the step's name, `name` the prefix of the nets it creates.
execution_step assemble(const std::string& label, const std::string& name, const std::vector<item>& items,
                        const std::string* stop) {
  execution_step s(label);
  std::vector<item> expanded;
  std::size_t markers = 0;
  for (const auto& it : items) {
    if (const auto* m = std::get_if<stop_marker>(&it)) {
      if (stop == nullptr) {
        detail::step_access::mark_invalid(s, "stop_if/stop used in a body whose helper has no stop blob");
        return s;
      }
      const std::string net_name = name + "/stop_if:" + std::to_string(markers++);
      if (!m->cond) {
        expanded.emplace_back(fill_bool(net_name, *stop, true));
        continue;
      }
      if (m->cond->blob().empty()) {
        detail::step_access::mark_invalid(s, "Invalid condition net");
        return s;
      }
      eval_condition(expanded, *m->cond);
      net n(net_name);
      n.op("Or", {*stop, m->cond->blob()}, {*stop});
      expanded.emplace_back(std::move(n));
      continue;
    }
    expanded.push_back(it);
  }
  bool all_nets = true;
  for (const auto& it : expanded) all_nets = all_nets && std::holds_alternative<net>(it);
  for (const auto& it : expanded) {
    if (const auto* n = std::get_if<net>(&it)) {
      if (all_nets) {
        s.add_net(*n);
      } else {
        s.add_substep(execution_step(n->name()).add_net(*n));
      }
    } else {
      s.add_substep(std::get<execution_step>(it));
    }
  }
  return s;
}

std::vector<item> concat(std::vector<item> a, const std::vector<item>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

execution_step invalid(std::string name, std::string why) {
  execution_step s(std::move(name));
  detail::step_access::mark_invalid(s, std::move(why));
  return s;
}

bool bad_condition(const condition& c) { return c.blob().empty(); }

// A step that runs `items` once: loops until stopped, with a stop reset
// first and an unconditional stop last (net_builder _RunOnce).
execution_step run_once(const std::string& name, std::vector<item> items, const std::string& stop) {
  std::vector<item> all;
  all.emplace_back(fill_bool(name + "/stop_init", stop, false));
  all.insert(all.end(), items.begin(), items.end());
  all.emplace_back(fill_bool(name + "/stop_at_end", stop, true));
  return assemble(name, name, all, &stop).should_stop_blob(stop);
}

// One branch: runs `items` once when blob `run_if` holds (the decision
// was taken before), ends early on a stop marker.
// `prefix` names the branch's blobs and nets; `label` is the step's name.
execution_step branch(const std::string& prefix, const std::string& label, const std::string& decision, bool when,
                      const body& b, bool scoped) {
  const std::string& name = prefix;
  const std::string stop = name + "/stop";
  net gate(name + "/gate");
  if (when) {
    gate.op("Not", {decision}, {stop});
  } else {
    gate.op("Copy", {decision}, {stop});
  }
  if (scoped && b.has_stop()) return invalid(label, "Stop blobs are not used with control operators");
  std::vector<item> items;
  items.reserve(1 + (scoped ? 1 : b.items().size()));
  items.emplace_back(std::move(gate));
  if (scoped) {
    items.emplace_back(assemble("scope", name + "/scope", b.items(), nullptr).create_workspace(true));
  } else {
    items.insert(items.end(), b.items().begin(), b.items().end());
  }
  return assemble(label, name, items, &stop).should_stop_blob(stop).only_once(true);
}

execution_step make_if(const std::string& name, const std::string& label, const condition& cond, const body& then_body,
                       const std::optional<body>& else_body, bool scoped) {
  if (bad_condition(cond)) return invalid(label, "Invalid condition net");
  // The decision is taken once, before either branch runs, so exactly one
  // branch runs even when the chosen one changes the condition's inputs.
  const std::string decision = name + "/cond";
  std::vector<item> items;
  eval_condition(items, cond);
  net snap(name + "/decide");
  snap.op("Copy", {cond.blob()}, {decision});
  items.emplace_back(std::move(snap));
  if (!then_body.items().empty()) items.emplace_back(branch(name + "/then", "then", decision, true, then_body, scoped));
  if (else_body) items.emplace_back(branch(name + "/else", "else", decision, false, *else_body, scoped));
  return assemble(label, name, items, nullptr);
}

// A loop entered afresh: `init` runs first on every entry, then `looping`.
// State a loop keeps between its iterations (its stop blob, its counter)
// is reset by `init`, in the enclosing execution, so that a loop entered
// again (inside an enclosing loop, or a GLOBAL group run again) behaves as
// on its first entry (Caffe2's While/DoWhile reset the stop the same way).
execution_step entered_afresh(const std::string& name, net init, execution_step looping) {
  return execution_step(name).add_substep(execution_step("init").add_net(std::move(init))).add_substep(looping);
}

// Loops with the condition evaluated before (`before`) or after the body;
// `negate` stops when the condition is false (while) rather than true.
execution_step make_conditional_loop(std::string name, const condition& cond, const body& b, bool before, bool negate,
                                     bool scoped) {
  if (bad_condition(cond)) return invalid(name, "Invalid condition net");
  const std::string stop = name + "/stop";
  std::vector<item> check;
  eval_condition(check, cond);
  net to_stop(name + "/check");
  to_stop.op(negate ? "Not" : "Copy", {cond.blob()}, {stop});
  check.emplace_back(std::move(to_stop));
  std::vector<item> body_items;
  if (scoped) {
    if (b.has_stop()) return invalid(name, "Stop blobs are not used with control operators");
    body_items.emplace_back(assemble("scope", name + "/scope", b.items(), nullptr).create_workspace(true));
  } else {
    body_items = b.items();
  }
  std::vector<item> items = before ? concat(check, body_items) : concat(body_items, check);
  // The stop blob starts false on every entry: the stop check after the
  // condition's own net (or after the body of a do-loop) comes before
  // `<name>/check` recomputes it.
  return entered_afresh(name, fill_bool(name + "/stop_init", stop, false),
                        assemble("body", name, items, &stop).should_stop_blob(stop));
}

// A counted loop whose limit the init net `init` sets in `<name>/limit`.
execution_step counted_loop(const std::string& name, net init, const body& b) {
  const std::string iter = loop_iter_blob(name);
  const std::string limit = name + "/limit";
  const std::string one = name + "/one";
  const std::string stop = name + "/stop";
  init.op("ConstantFill", {}, {iter}, {{"value", std::int64_t{0}}})
      .op("ConstantFill", {}, {one}, {{"value", std::int64_t{1}}});
  net cond(name + "/cond");
  cond.op("GE", {iter, limit}, {stop});
  net inc(name + "/inc");
  inc.op("Add", {iter, one}, {iter});
  std::vector<item> items{cond};
  items.insert(items.end(), b.items().begin(), b.items().end());
  items.emplace_back(inc);
  return entered_afresh(name, std::move(init), assemble("body", name + "/body", items, &stop).should_stop_blob(stop));
}

}  // namespace

execution_step& append_body(execution_step& s, const body& b) {
  for (const auto& it : b.items()) {
    if (const auto* n = std::get_if<net>(&it)) {
      s.add_substep(execution_step(n->name()).add_net(*n));
    } else if (const auto* st = std::get_if<execution_step>(&it)) {
      s.add_substep(*st);
    } else {
      detail::step_access::mark_invalid(s, "stop_if/stop cannot be used here: no helper owns a stop blob");
    }
  }
  return s;
}

execution_step do_(std::string name, body b) {
  if (b.has_stop()) return run_once(name, b.items(), name + "/stop");
  return assemble(name, name, b.items(), nullptr);
}

execution_step do_parallel(std::string name, body b) {
  if (b.has_stop()) return invalid(name, "stop_if/stop cannot end a do_parallel");
  execution_step s(name);
  for (const auto& it : b.items()) {
    if (const auto* n = std::get_if<net>(&it)) {
      s.add_substep(execution_step(n->name()).add_net(*n));
    } else {
      s.add_substep(std::get<execution_step>(it));
    }
  }
  return s.concurrent_substeps(true);
}

std::string loop_iter_blob(const std::string& name) { return name + "/iter"; }

execution_step loop(std::string name, std::int64_t n, body b) {
  // Counters live in the enclosing execution: reset each time it runs.
  net init(name + "/init");
  init.op("ConstantFill", {}, {name + "/limit"}, {{"value", n}});
  return counted_loop(name, std::move(init), b);
}

execution_step loop(std::string name, std::string count_blob, body b) {
  if (count_blob.empty()) return invalid(name, "loop: the count blob must be named");
  // The count is read when the loop is entered: a body that changes the
  // count blob does not change the number of iterations of this entry.
  net init(name + "/init");
  init.op("Copy", {std::move(count_blob)}, {name + "/limit"});
  return counted_loop(name, std::move(init), b);
}

execution_step loop(std::string name, body b) {
  if (!b.has_stop()) {
    return invalid(name, "This NetBuilder (" + name + ") requires a stop condition to be set with `stop` or `stop_if`");
  }
  const std::string stop = name + "/stop";
  std::vector<item> items;
  items.emplace_back(fill_bool(name + "/stop_init", stop, false));
  items.insert(items.end(), b.items().begin(), b.items().end());
  return assemble(name, name, items, &stop).should_stop_blob(stop);
}

execution_step while_(std::string name, condition cond, body b) {
  return make_conditional_loop(std::move(name), cond, b, true, true, false);
}
execution_step until(std::string name, condition cond, body b) {
  return make_conditional_loop(std::move(name), cond, b, true, false, false);
}
execution_step do_while(std::string name, condition cond, body b) {
  return make_conditional_loop(std::move(name), cond, b, false, true, false);
}
execution_step do_until(std::string name, condition cond, body b) {
  return make_conditional_loop(std::move(name), cond, b, false, false, false);
}
execution_step while_net(std::string name, condition cond, body b) {
  return make_conditional_loop(std::move(name), cond, b, true, true, true);
}

execution_step if_(std::string name, condition cond, body then_body, std::optional<body> else_body) {
  return make_if(name, name, cond, then_body, else_body, false);
}

execution_step if_not(std::string name, condition cond, body b) { return make_if(name, name, cond, body{}, b, false); }

execution_step if_net(std::string name, condition cond, body then_body, std::optional<body> else_body) {
  return make_if(name, name, cond, then_body, else_body, true);
}

execution_step switch_(std::string name, std::vector<std::pair<condition, body>> cases) {
  execution_step s(name);
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const std::string label = "case:" + std::to_string(k);
    s.add_substep(make_if(name + "/" + label, label, cases[k].first, cases[k].second, std::nullopt, false));
  }
  return s;
}

execution_step switch_not(std::string name, std::vector<std::pair<condition, body>> cases) {
  execution_step s(name);
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const std::string label = "case:" + std::to_string(k);
    s.add_substep(make_if(name + "/" + label, label, cases[k].first, body{}, cases[k].second, false));
  }
  return s;
}

std::string has_stopped_blob(const std::string& name) { return name + "/stopped"; }

execution_step stop_guard(std::string name, body b) {
  const std::string stopped = has_stopped_blob(name);
  std::vector<item> items;
  items.emplace_back(fill_bool(name + "/guard_start", stopped, true));
  items.insert(items.end(), b.items().begin(), b.items().end());
  items.emplace_back(fill_bool(name + "/guard_end", stopped, false));
  return run_once(name, items, name + "/stop");
}

}  // namespace taskgroup
