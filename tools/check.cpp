#include "check.hpp"
#include "results.hpp"

#include <taskgroup/control.hpp>
#include <taskgroup/execution_step.hpp>
#include <taskgroup/net.hpp>
#include <taskgroup/plan.hpp>
#include <taskgroup/task.hpp>

#include <boost/container_hash/hash.hpp>
#include <boost/unordered/unordered_flat_map.hpp>

#include <algorithm>
#include <charconv>
#include <string_view>
#include <system_error>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

namespace taskgroup::cli {

namespace {

// Steps and nets reached from some roots. Nets are told apart by name
// (names are unique in a plan): a task reaches a few, listed; the group's
// total may reach 10^5, hashed once there are many.
struct tally {
  std::size_t steps = 0;
  std::vector<net> nets;  // distinct by name, in order of first reach

  void add(const net& n) {
    if (nets.size() < few) {
      for (const net& m : nets) {
        if (m.name() == n.name()) return;
      }
      nets.push_back(n);
      if (nets.size() == few) {
        for (const net& m : nets) index_.insert(m.name());
      }
      return;
    }
    if (index_.insert(n.name()).second) nets.push_back(n);
  }
  void add(const execution_step& s) {
    ++steps;
    for (const auto& n : s.nets()) add(n);
    for (const auto& c : s.substeps()) add(c);
  }
  void add(const body& b) {
    for (const auto& item : b.items()) {
      if (const auto* n = std::get_if<net>(&item)) {
        add(*n);
      } else if (const auto* s = std::get_if<execution_step>(&item)) {
        add(*s);
      }
    }
  }
  void add(const tally& other) {
    steps += other.steps;
    for (const net& n : other.nets) add(n);
  }
  [[nodiscard]] std::size_t net_count() const noexcept { return nets.size(); }
  [[nodiscard]] std::size_t op_count() const {
    std::size_t n = 0;
    for (const net& m : nets) n += m.size();
    return n;
  }
  // The nets' names, sorted.
  [[nodiscard]] std::vector<std::string> net_names() const {
    std::vector<std::string> out(nets.size());
    std::transform(nets.begin(), nets.end(), out.begin(), [](const net& n) { return n.name(); });
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  static constexpr std::size_t few = 16;
  std::unordered_set<std::string_view> index_;  // the names of `nets` (which hold them), once there are `few`
};

std::string plural(std::size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// A policy as the summary shows it: `3 attempts, backoff 10 ms x2 up to
// 1000 ms, jitter, on op_failed, timeout`.
std::string policy_text(const retry_policy& p) {
  char multiplier[32];
  const auto [end, ec] = std::to_chars(multiplier, multiplier + sizeof multiplier, p.multiplier);
  std::string out = std::to_string(p.max_attempts) + " attempts, backoff " + std::to_string(p.initial_backoff.count()) +
                    " ms x" + std::string(multiplier, ec == std::errc() ? end : multiplier) + " up to " +
                    std::to_string(p.max_backoff.count()) + " ms, " + (p.jitter ? "jitter" : "no jitter") + ", on ";
  if (p.retry_on.empty()) out += "nothing";
  for (std::size_t i = 0; i < p.retry_on.size(); ++i) {
    if (i != 0) out += ", ";
    out += name_of(p.retry_on[i]);
  }
  return out;
}

// A line for each step, with a note when what a failed attempt wrote stays
// (the step makes no workspace of its own).
void step_retries(const std::vector<retried_step>& steps, std::string& out) {
  for (const retried_step& r : steps) {
    out += "    " + r.where + "step " + quote(r.path) + " retry: " + policy_text(r.step.retry()) + "\n";
    if (!r.step.create_workspace()) out += "      note: no create_workspace: what a failed attempt wrote stays\n";
  }
}

// The retry lines of task `t`, of type `type`: its own policy (with a note
// when its node's blobs keep what a failed attempt wrote), then its steps'.
void task_retries(const task& t, workspace_type type, std::string& out) {
  if (t.retry().retries()) {
    out += "    retry: " + policy_text(t.retry()) + "\n";
    if (type == workspace_type::global) {
      out += "      note: a global task: what a failed attempt wrote to node blobs is not undone\n";
    }
  }
  step_retries(t.retried_steps(), out);
}

tally task_tally(const task& t) {
  tally out;
  if (t.step()) out.add(*t.step());
  for (const auto& [obj, scope] : t.setups()) {
    out.add(obj->setup());
    out.add(obj->exit());
  }
  for (const auto& [s, every] : t.reports()) out.add(s);
  return out;
}

}  // namespace

status validate_group(const task_group& group) {
  for (const auto& t : group.tasks()) {
    TASKGROUP_TRY(t.validate());
    // The composed step, validated (get_step does).
    if (auto s = t.get_step(); !s) return s.error().with_context("task " + quote(t.name()));
  }
  for (const auto& r : group.report_steps()) {
    if (auto st = r.step.validate(); !st) return st.error().with_context("report step " + quote(r.step.name()));
  }
  for (const auto& r : group.remote_nets()) {
    if (auto st = r.net.validate(operator_registry::global()); !st) {
      return st.error().with_context("remote net " + quote(r.net.name()) + " for node " + quote(r.node));
    }
  }
  return ok();
}

namespace {

// What one node holds, gathered in one pass over the group (a pass per
// node was quadratic in the number of nodes).
struct node_items {
  std::vector<const task*> tasks;
  std::vector<const group_report_step*> reports;
  std::vector<setup_object*> locals;
  std::vector<const net*> remote;
};

void summarize_node(const task_group& group, const std::string& node_name, const node_items& items, tally& total,
                    std::string& body_text) {
  body_text += "node " + node_name + ": " + plural(items.tasks.size(), "task", "tasks") + "\n";
  // The names are not kept from this pass to the next: 10^5 copies were
  // a fifth of the check's peak memory beside the summary's text.
  std::size_t name_width = 0;
  for (const auto* t : items.tasks) name_width = std::max(name_width, t->name().size());
  for (std::size_t i = 0; i < items.tasks.size(); ++i) {
    const task& t = *items.tasks[i];
    const std::string name = t.name();
    const auto type = t.workspace_type().value_or(group.workspace_type().value_or(workspace_type::private_));
    tally tt = task_tally(t);
    total.add(tt);
    // Appended in place: 10^5 lines of temporaries were a tenth of a check.
    body_text += "  ";
    body_text += name;
    body_text.append(name_width - name.size(), ' ');
    body_text += "  " + plural(static_cast<std::size_t>(t.num_instances()), "instance", "instances");
    body_text += ", ";
    body_text += to_string(type);
    body_text += " workspace, " + plural(tt.steps, "step", "steps") + ", " + plural(tt.net_count(), "net", "nets");
    body_text += ", outputs: ";
    if (t.declared_outputs().empty()) body_text += "none";
    bool first = true;
    for (const auto& st : t.declared_outputs()) {
      if (!std::exchange(first, false)) body_text += ", ";
      if (st.list) {
        body_text += "[" + join(st.blobs) + "]";
      } else {
        body_text += st.blobs.front();
      }
    }
    body_text += "\n";
    task_retries(t, type, body_text);
  }
  for (const auto* r : items.reports) {
    tally rt;
    rt.add(r->step);
    total.add(rt);
    body_text += "  report step " + quote(r->step.name()) + " every " + std::to_string(r->interval.count()) + " ms (" +
                 plural(rt.steps, "step", "steps") + ", " + plural(rt.net_count(), "net", "nets") + ")\n";
    step_retries(retried_steps(r->step), body_text);
  }
  tally init, exit;
  for (auto* obj : items.locals) {
    init.add(obj->setup());
    exit.add(obj->exit());
  }
  if (init.net_count() != 0) {
    body_text += "  local init: " + plural(init.net_count(), "net", "nets") + " (" + join(init.net_names()) + ")\n";
  }
  for (auto* obj : items.locals) step_retries(retried_steps(obj->setup(), "local init "), body_text);
  if (exit.net_count() != 0) {
    body_text += "  local exit: " + plural(exit.net_count(), "net", "nets") + " (" + join(exit.net_names()) + ")\n";
  }
  for (auto* obj : items.locals) step_retries(retried_steps(obj->exit(), "local exit "), body_text);
  total.add(init);
  total.add(exit);
  for (const net* n : items.remote) {
    total.add(*n);
    body_text += "  remote net " + quote(n->name()) + " (" + plural(n->size(), "op", "ops") + ")\n";
  }
}

}  // namespace

std::string summarize_group(const task_group& group, std::string_view path) {
  std::string out;
  const auto nodes = group.used_nodes();
  const auto locals = group.local_setups();
  tally total;

  out += std::string(path) + ": valid plan (format " + std::to_string(plan_format_version) + ")\n";
  if (!group.name().empty()) out += "group name: " + quote(group.name()) + "\n";
  if (group.workspace_type()) out += "workspace type: " + std::string(to_string(*group.workspace_type())) + "\n";

  // Each node's items at its position in `nodes`, found through an open
  // addressing index of small entries: a hash node per entry was a cache
  // miss per task at 10^5 nodes.
  boost::unordered_flat_map<std::string_view, std::size_t, boost::hash<std::string_view>> position;
  position.reserve(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) position.emplace(nodes[i], i);
  std::vector<node_items> by_node(nodes.size());
  auto items_of = [&](std::string_view node) -> node_items* {
    const auto it = position.find(node);
    return it == position.end() ? nullptr : &by_node[it->second];
  };
  for (const auto& t : group.tasks()) {
    if (node_items* i = items_of(t.node_name())) i->tasks.push_back(&t);
  }
  for (const auto& r : group.report_steps()) {
    if (node_items* i = items_of(r.node)) i->reports.push_back(&r);
  }
  for (const auto& [n, obj] : locals) {
    if (node_items* i = items_of(n)) i->locals.push_back(obj.get());
  }
  for (const auto& r : group.remote_nets()) {
    if (node_items* i = items_of(r.node)) i->remote.push_back(&r.net);
  }

  std::string body_text;
  for (std::size_t i = 0; i < nodes.size(); ++i) summarize_node(group, nodes[i], by_node[i], total, body_text);
  // The totals line names the first nodes only; each has its section below.
  out += plural(nodes.size(), "node", "nodes") + " (" + join(nodes, 10) + "), " +
         plural(group.tasks().size(), "task", "tasks") + ", " + plural(total.steps, "step", "steps") + ", " +
         plural(total.net_count(), "net", "nets") + " (" + plural(total.op_count(), "op", "ops") + ")\n";
  out += body_text;
  return out;
}

}  // namespace taskgroup::cli
