// taskgroup: a group's remote nets, made in their nodes' workspaces before
// a run's tasks start (task_group::add_remote_net).
#include "session/run.hpp"

#include <taskgroup/net.hpp>

#include <algorithm>

namespace taskgroup::detail {

namespace asio = boost::asio;

namespace {

// On n's strand: makes `r` there, unless this very net already is.
status make_one(node_state& n, const remote_net& r, const operator_registry& registry) {
  const std::string& name = r.net.name();
  const std::string where = "remote net " + quote(name) + " for node " + quote(n.name);
  if (n.ws->find_net(name) != nullptr) {
    auto it = n.remote_nets.find(name);
    if (it != n.remote_nets.end() && it->second.same(r.net)) return ok();
    return fail(errc::net_exists, where + ": the node already has another net of that name");
  }
  if (auto made = n.ws->create_net(r.net, registry); !made) return made.error().with_context(where);
  n.remote_nets.insert_or_assign(name, r.net);
  return ok();
}

// On n's strand: n's remote nets, in the group's order.
asio::awaitable<status> make_on_node(node_state* n, const std::vector<remote_net>& nets,
                                     const std::vector<node_state*>& on, const operator_registry& registry) {
  for (std::size_t k = 0; k < nets.size(); ++k) {
    if (on[k] != n) continue;
    if (status st = make_one(*n, nets[k], registry); !st) co_return st;
  }
  co_return ok();
}

}  // namespace

asio::awaitable<status> make_remote_nets(asio::any_io_executor coord, task_group g, std::vector<node_state*> on,
                                         const operator_registry& registry) {
  const auto& nets = g.remote_nets();
  // One child per node that has some, each on that node's strand: nodes
  // make theirs in parallel, a node's in the group's order.
  std::vector<node_state*> nodes;
  for (node_state* n : on) {
    if (n != nullptr && std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
  }
  if (nodes.empty()) co_return ok();
  co_return co_await join(
      coord, nodes.size(), [&](std::size_t j) { return make_on_node(nodes[j], nets, on, registry); },
      [&](std::size_t j) { return nodes[j]->executor; }, join_mode::fail_fast);
}

}  // namespace taskgroup::detail
