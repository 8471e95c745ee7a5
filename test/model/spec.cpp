// What a generated spec means (intent), how it reads (dump), and its
// smaller variants (shrink_candidates).
#include "model/generate.hpp"

#include <algorithm>
#include <functional>
#include <sstream>

using i64 = std::int64_t;

namespace taskgroup::model {

namespace {

using counts = std::vector<i64>;

// --- intent: each helper as control.hpp documents it ------------------------

void run_node(const gnode& g, counts& c);

// Kids [from, to); a stop marker at g.stop_at ends them when `fires`.
void run_kids(const gnode& g, counts& c, std::size_t from, std::size_t to, bool fires, bool* stopped = nullptr) {
  for (std::size_t i = from; i <= to; ++i) {
    if (g.stop_at == static_cast<int>(i) && fires) {
      if (stopped != nullptr) *stopped = true;
      return;
    }
    if (i < to) run_node(g.kids[i], c);
  }
}

bool if_holds(const gnode& g, const counts& c) {
  if (g.cond == 2) return c[static_cast<std::size_t>(g.cond_counter)] >= 2;
  return g.cond == 0;
}

void run_node(const gnode& g, counts& c) {
  const std::size_t size = g.kids.size();
  auto repeat = [&](int times) {
    for (int r = 0; r < times; ++r) run_kids(g, c, 0, size, false);
  };
  switch (g.k) {
    case kind::leaf:
      if (g.tmp) c[0] += 2;
      for (const auto& a : g.adds) c[static_cast<std::size_t>(a.counter)] += a.konst;
      return;
    case kind::raw_iter: return repeat(g.n);
    case kind::raw_stop:
    case kind::do_while:
    case kind::do_until: return repeat(std::max(g.n, 1));  // the body runs before the first check
    case kind::raw_once: return run_kids(g, c, 0, size, g.stop_true);
    case kind::loop_n:
      if (g.n == 0) return;
      if (g.stop_at >= 0 && g.stop_true) return run_kids(g, c, 0, size, true);
      return repeat(g.n);
    case kind::loop_blob:
    case kind::loop_stop:
    case kind::while_:
    case kind::until:
    case kind::while_net: return repeat(g.n);
    case kind::if_:
    case kind::if_net:
      if (if_holds(g, c)) return run_kids(g, c, 0, static_cast<std::size_t>(g.split), true);
      if (g.has_else) run_kids(g, c, static_cast<std::size_t>(g.split), size, false);
      return;
    case kind::if_not:
      if (!if_holds(g, c)) run_kids(g, c, 0, size, false);
      return;
    case kind::switch_:
    case kind::switch_not:
      for (std::size_t k = 0; k < size; ++k) {
        if (g.case_conds[k] == (g.k == kind::switch_)) run_node(g.kids[k], c);
      }
      return;
    case kind::stop_guard:
    case kind::do_: return run_kids(g, c, 0, size, g.stop_true);
    case kind::do_parallel: return repeat(1);
  }
}

void run_leaves(const std::vector<gnode>& ls, counts& c) {
  for (const auto& l : ls) run_node(l, c);
}

}  // namespace

std::vector<std::vector<counts>> intent(const group_spec& spec) {
  std::vector<counts> now;
  for (const auto& n : spec.nodes) now.push_back(n.initial);
  std::vector<std::vector<counts>> out;
  for (int run = 0; run < spec.runs; ++run) {
    for (std::size_t i = 0; i < spec.nodes.size(); ++i) {
      const node_spec& ns = spec.nodes[i];
      counts& c = now[i];
      const bool used = std::any_of(spec.tasks.begin(), spec.tasks.end(),
                                    [&](const task_spec& t) { return t.node == static_cast<int>(i); });
      if (!used) continue;
      if (ns.reset) c[2] = 0;
      run_leaves(ns.local_init, c);
      for (const auto& t : spec.tasks) {
        if (t.node != static_cast<int>(i)) continue;
        run_leaves(t.init, c);
        for (int k = 0; k < t.instances; ++k) {
          run_leaves(t.inst_init, c);
          run_node(t.root, c);
          run_leaves(t.reports, c);
          run_leaves(t.inst_exit, c);
        }
        run_leaves(t.exit, c);
      }
      run_leaves(ns.reports, c);
      run_leaves(ns.local_exit, c);
    }
    out.push_back(now);
  }
  return out;
}

// --- dump --------------------------------------------------------------------

namespace {

void dump_node(std::ostringstream& o, const gnode& g, int indent) {
  o << std::string(static_cast<std::size_t>(indent), ' ') << to_string(g.k) << " g" << g.id;
  if (g.k == kind::leaf) {
    for (const auto& a : g.adds) o << " c" << a.counter << "+=k" << a.konst;
    if (g.tmp) o << " tmp";
    if (g.x != extra::none) {
      o << (g.x_first ? " first:" : " then:") << to_string(g.x);
      if (g.x == extra::sleep || g.x == extra::fail_at) o << "(" << g.x_n << ")";
    }
    o << "\n";
    return;
  }
  o << " n=" << g.n;
  if (g.cond_net) o << " cond_net";
  if (g.concurrent) o << " concurrent";
  if (g.create_ws) o << " create_ws";
  if (g.direct_nets) o << " direct_nets";
  if (g.k == kind::if_ || g.k == kind::if_not || g.k == kind::if_net) {
    o << " cond=" << (g.cond == 0 ? "T" : g.cond == 1 ? "F" : "c" + std::to_string(g.cond_counter) + ">=2");
    if (g.has_else) o << " else_from=" << g.split;
  }
  if (g.stop_at >= 0) o << " stop_at=" << g.stop_at << (g.stop_true ? "(T)" : "(F)");
  if (!g.case_conds.empty()) {
    o << " cases=";
    for (bool b : g.case_conds) o << (b ? 'T' : 'F');
  }
  o << "\n";
  for (const auto& k : g.kids) dump_node(o, k, indent + 2);
}

void dump_leaves(std::ostringstream& o, const char* what, const std::vector<gnode>& ls, int indent) {
  for (const auto& l : ls) {
    o << std::string(static_cast<std::size_t>(indent), ' ') << what << ": ";
    dump_node(o, l, 0);
  }
}

}  // namespace

std::string dump(const group_spec& spec) {
  std::ostringstream o;
  o << "group seed=" << spec.seed << " " << (spec.global ? "GLOBAL" : "PRIVATE") << " runs=" << spec.runs;
  if (!spec.name.empty()) o << " name=" << quote(spec.name);
  o << "\n";
  for (std::size_t i = 0; i < spec.nodes.size(); ++i) {
    const node_spec& n = spec.nodes[i];
    o << "node n" << i << " initial c=";
    for (auto v : n.initial) o << v << ' ';
    if (n.reset) o << "reset(c2=0) ";
    o << "\n";
    dump_leaves(o, "local_init", n.local_init, 2);
    dump_leaves(o, "local_exit", n.local_exit, 2);
    dump_leaves(o, "group report", n.reports, 2);
  }
  for (std::size_t j = 0; j < spec.tasks.size(); ++j) {
    const task_spec& t = spec.tasks[j];
    o << "task t" << j << " node n" << t.node << " instances=" << t.instances << " outputs=";
    for (int c : t.outputs) o << "c" << c << ' ';
    o << "\n";
    dump_leaves(o, "init", t.init, 2);
    dump_leaves(o, "exit", t.exit, 2);
    dump_leaves(o, "instance_init", t.inst_init, 2);
    dump_leaves(o, "instance_exit", t.inst_exit, 2);
    dump_leaves(o, "report", t.reports, 2);
    dump_node(o, t.root, 2);
  }
  return o.str();
}

// --- shrinking -----------------------------------------------------------------

namespace {

// Variants of `g` with one change each (smaller or simpler first).
void node_candidates(const gnode& g, std::vector<gnode>& out) {
  if (g.k != kind::leaf) {
    for (const auto& k : g.kids) out.push_back(k);  // hoist a child
    for (std::size_t i = 0; i < g.kids.size() && g.kids.size() > 1; ++i) {
      gnode c = g;
      c.kids.erase(c.kids.begin() + static_cast<std::ptrdiff_t>(i));
      const int at = static_cast<int>(i);
      if (c.split > at) --c.split;
      if (c.stop_at > at) --c.stop_at;
      if (!c.case_conds.empty()) c.case_conds.erase(c.case_conds.begin() + static_cast<std::ptrdiff_t>(i));
      out.push_back(std::move(c));
    }
    auto variant = [&](auto change) {
      gnode c = g;
      change(c);
      out.push_back(std::move(c));
    };
    if (g.n > 0) variant([](gnode& c) { --c.n; });
    if (g.concurrent) variant([](gnode& c) { c.concurrent = false; });
    if (g.create_ws) variant([](gnode& c) { c.create_ws = false; });
    if (g.direct_nets) variant([](gnode& c) { c.direct_nets = false; });
    if (g.cond_net) variant([](gnode& c) { c.cond_net = false; });
    if (g.stop_at >= 0 && g.k != kind::stop_guard) variant([](gnode& c) { c.stop_at = -1; });
    if (g.has_else)
      variant([](gnode& c) {
        c.has_else = false;
        c.kids.resize(static_cast<std::size_t>(c.split));
        if (c.kids.empty()) c.k = kind::leaf;
      });
  } else {
    for (std::size_t i = 0; i < g.adds.size() && g.adds.size() > 1; ++i) {
      gnode c = g;
      c.adds.erase(c.adds.begin() + static_cast<std::ptrdiff_t>(i));
      out.push_back(std::move(c));
    }
    if (g.tmp) {
      gnode c = g;
      c.tmp = false;
      out.push_back(std::move(c));
    }
    if (g.x != extra::none) {
      gnode c = g;
      c.x = extra::none;
      out.push_back(std::move(c));
    }
  }
  for (std::size_t i = 0; i < g.kids.size(); ++i) {
    std::vector<gnode> sub;
    node_candidates(g.kids[i], sub);
    for (auto& s : sub) {
      gnode c = g;
      c.kids[i] = std::move(s);
      out.push_back(std::move(c));
    }
  }
}

}  // namespace

std::vector<group_spec> shrink_candidates(const group_spec& spec) {
  std::vector<group_spec> out;
  auto variant = [&](auto change) {
    group_spec c = spec;
    change(c);
    out.push_back(std::move(c));
  };
  for (std::size_t j = 0; j < spec.tasks.size() && spec.tasks.size() > 1; ++j) {
    variant([j](group_spec& c) { c.tasks.erase(c.tasks.begin() + static_cast<std::ptrdiff_t>(j)); });
  }
  if (spec.runs > 1) variant([](group_spec& c) { --c.runs; });
  for (std::size_t i = 0; i < spec.nodes.size(); ++i) {
    const int at = static_cast<int>(i);
    if (std::any_of(spec.tasks.begin(), spec.tasks.end(), [at](const task_spec& t) { return t.node == at; })) continue;
    variant([i, at](group_spec& c) {  // a node without tasks, and renumber the later ones
      c.nodes.erase(c.nodes.begin() + static_cast<std::ptrdiff_t>(i));
      for (auto& t : c.tasks) t.node -= t.node > at ? 1 : 0;
    });
  }
  for (std::size_t i = 0; i < spec.nodes.size(); ++i) {
    const node_spec& n = spec.nodes[i];
    if (!n.local_init.empty()) variant([i](group_spec& c) { c.nodes[i].local_init.clear(); });
    if (!n.local_exit.empty()) variant([i](group_spec& c) { c.nodes[i].local_exit.clear(); });
    if (!n.reports.empty()) variant([i](group_spec& c) { c.nodes[i].reports.clear(); });
    if (n.reset) variant([i](group_spec& c) { c.nodes[i].reset = false; });
  }
  for (std::size_t j = 0; j < spec.tasks.size(); ++j) {
    const task_spec& t = spec.tasks[j];
    if (t.instances > 1) variant([j](group_spec& c) { c.tasks[j].instances = 1; });
    if (!t.init.empty()) variant([j](group_spec& c) { c.tasks[j].init.clear(); });
    if (!t.exit.empty()) variant([j](group_spec& c) { c.tasks[j].exit.clear(); });
    if (!t.inst_init.empty()) variant([j](group_spec& c) { c.tasks[j].inst_init.clear(); });
    if (!t.inst_exit.empty()) variant([j](group_spec& c) { c.tasks[j].inst_exit.clear(); });
    if (!t.reports.empty()) variant([j](group_spec& c) { c.tasks[j].reports.clear(); });
    if (!t.outputs.empty()) variant([j](group_spec& c) { c.tasks[j].outputs.clear(); });
    std::vector<gnode> roots;
    node_candidates(t.root, roots);
    for (auto& r : roots) {
      variant([&](group_spec& c) { c.tasks[j].root = r; });
    }
  }
  // A variant without its trigger would wait an hour in its blockers.
  for (auto& c : out) settle(c);
  return out;
}

}  // namespace taskgroup::model
