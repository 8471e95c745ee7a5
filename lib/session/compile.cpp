#include "session/compiled.hpp"

#include "model/limits.hpp"
#include "ops/queues.hpp"
#include "step/program.hpp"

#include <algorithm>
#include <map>

namespace taskgroup::detail {

namespace asio = boost::asio;

namespace {

result<std::shared_ptr<const detail::compiled_step>> compile_setup(const std::string& name,
                                                                   const std::vector<body>& bodies) {
  execution_step s(name);
  for (const auto& b : bodies) append_body(s, b);
  TASKGROUP_TRY(detail::step_validation::holding_bodies(s));
  if (s.empty()) return std::shared_ptr<const detail::compiled_step>();
  return detail::compile_step(s);
}

// Whether a net of tree `n` holds an op that may feed or close a queue.
bool may_feed(const program_step& n) {
  for (const net& x : n.nets) {
    if (std::any_of(x.ops().begin(), x.ops().end(), [](const op_def& d) { return may_feed_queues(d); })) return true;
  }
  return std::any_of(n.children.begin(), n.children.end(), [](const program_step& c) { return may_feed(c); });
}

// Task `t`'s composed step, compiled into `compiled`.
status compile_task(const task& t, compiled_step& compiled) {
  TASKGROUP_TRY(auto composed, t.get_step());
  const execution_step* counted = t.step() ? &*t.step() : nullptr;
  return compile_into(compiled, composed, counted);
}

}  // namespace

result<std::shared_ptr<const compiled_group>> compile_group(const task_group& g) {
  detail::group_access::mark_used(g);
  auto out = std::make_shared<compiled_group>();
  std::map<std::string, std::size_t> node_index;
  // The index of node `name` in out->nodes, added at its first use.
  auto index_of = [&](const std::string& name) -> std::size_t {
    auto [it, added] = node_index.try_emplace(name, out->nodes.size());
    if (added) out->nodes.push_back(compiled_node{name, nullptr, nullptr, {}, {}});
    return it->second;
  };
  // Exact sizes: the group is kept for its later runs, and an array grown
  // by doubling would leave its smaller copies behind at the peak.
  out->tasks.reserve(g.tasks().size());
  out->steps = detail::make_compiled_steps(g.tasks().size());
  std::vector<std::size_t> node_of_task;
  node_of_task.reserve(g.tasks().size());
  for (const auto& t : g.tasks()) {
    detail::compiled_step& compiled = detail::compiled_at(out->steps.get(), out->tasks.size());
    if (status st = compile_task(t, compiled); !st) return task_error(t.name(), t.node_name(), st.error());
    const bool priv = t.workspace_type().value_or(workspace_type::private_) == workspace_type::private_;
    node_of_task.push_back(index_of(t.node_name()));
    out->tasks.push_back(compiled_task{t, nullptr, &detail::task_access::full_name(t), 0, priv,
                                       !detail::task_access::outputs(t).empty(), may_feed(compiled.root),
                                       t.retry().retries()});
  }
  // Every node is known now: its name stays where it is.
  for (std::size_t k = 0; k < node_of_task.size(); ++k) {
    compiled_task& ct = out->tasks[k];
    compiled_node& cn = out->nodes[node_of_task[k]];
    ct.node = &cn.name;
    ct.node_index = static_cast<std::uint32_t>(node_of_task[k]);
    if (!ct.is_private) cn.global = true;
    if (ct.may_feed) ++cn.feeders;
  }
  std::vector<std::size_t> per_node(out->nodes.size(), 0);
  for (std::size_t i : node_of_task) ++per_node[i];
  for (std::size_t i = 0; i < out->nodes.size(); ++i) out->nodes[i].tasks.reserve(per_node[i]);
  for (std::size_t k = 0; k < node_of_task.size(); ++k) out->nodes[node_of_task[k]].tasks.push_back(k);
  out->all_nodes.reserve(out->nodes.size());
  for (std::size_t i = 0; i < out->nodes.size(); ++i) out->all_nodes.push_back(i);
  for (const auto& r : g.report_steps()) {
    TASKGROUP_TRY(detail::group_access::check_report(r, node_index.count(r.node) != 0));
    compiled_node& cn = out->nodes[index_of(r.node)];
    // Run beside the tasks, a report step could feed a queue at any time.
    if (cn.reports.empty()) ++cn.feeders;
    cn.reports.emplace_back(r.step, r.interval);
  }
  for (const auto& [node_name, obj] : g.local_setups()) {
    if (!node_index.count(node_name)) {
      return fail(errc::invalid_task, "local setup on node " + quote(node_name) + ", which has no task");
    }
  }
  for (const auto& in : g.inputs()) {
    if (!node_index.count(in.node)) {
      return fail(errc::invalid_task, "input " + quote(in.blob) + " on node " + quote(in.node) + ", which has no task");
    }
  }
  for (auto& n : out->nodes) {
    auto [inits, exits] = detail::group_access::local_work(g, n.name);
    for (std::size_t k : n.tasks) {
      for (auto& [i, e] : detail::task_access::local_work(out->tasks[k].t)) {
        inits.push_back(i);
        exits.push_back(e);
      }
    }
    TASKGROUP_TRY(n.init, compile_setup(n.name + ":init", inits));
    TASKGROUP_TRY(n.exit, compile_setup(n.name + ":exit", exits));
  }
  return std::shared_ptr<const compiled_group>(std::move(out));
}

bool takes_part(const run_options& options, std::string_view name) {
  if (!options.only_nodes) return true;
  const auto& list = *options.only_nodes;
  return std::find(list.begin(), list.end(), name) != list.end();
}

result<std::span<const std::size_t>> active_nodes(const task_group& group, const compiled_group& g,
                                                  const run_options& options, std::vector<std::size_t>& out) {
  if (!options.only_nodes) return std::span<const std::size_t>(g.all_nodes);
  for (const auto& name : *options.only_nodes) {
    const bool has_task =
        std::any_of(g.nodes.begin(), g.nodes.end(), [&](const compiled_node& n) { return n.name == name; });
    const bool has_remote = std::any_of(group.remote_nets().begin(), group.remote_nets().end(),
                                        [&](const remote_net& r) { return r.node == name; });
    if (!has_task && !has_remote) {
      return fail(errc::invalid_task, "run_options::only_nodes names node " + quote(name) + ", which has no task");
    }
  }
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (takes_part(options, g.nodes[i].name)) out.push_back(i);
  }
  return std::span<const std::size_t>(out);
}

}  // namespace taskgroup::detail
