// The Sleeps, triggers and blockers of generated groups (generate.hpp:
// "Failures, cancellation, waits"), and the model's check that a group
// with blockers ends (settle).
#include "model/generate.hpp"
#include "model/model.hpp"

#include <algorithm>
#include <random>

namespace taskgroup::model {

namespace {

class draws {
 public:
  // Apart from the tree's own draws: the plain part of a seed's group is
  // what it was before these were added.
  explicit draws(std::uint64_t seed) : rng_(seed * 0x9e3779b97f4a7c15ULL + 0x5851f42d4c957f2dULL) {}
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool coin(double p = 0.5) { return std::bernoulli_distribution(p)(rng_); }
  int weighted(std::initializer_list<double> w) { return std::discrete_distribution<int>(w)(rng_); }
  template <class T>
  T& one_of(std::vector<T>& v) {
    return v[static_cast<std::size_t>(pick(0, static_cast<int>(v.size()) - 1))];
  }

 private:
  std::mt19937_64 rng_;
};

// The generated kinds whose children run concurrently (a raw step over
// its leaves as nets has no children).
bool concurrent_node(const gnode& g) { return g.k == kind::do_parallel || (g.concurrent && !g.direct_nets); }
bool has_concurrency(const gnode& g) {
  return concurrent_node(g) || std::any_of(g.kids.begin(), g.kids.end(), has_concurrency);
}

template <class G>
void leaves_of(G& g, std::vector<G*>& out) {
  if (g.k == kind::leaf) out.push_back(&g);
  for (auto& k : g.kids) leaves_of(k, out);
}
template <class G>
void leaves_of(std::vector<G>& ls, std::vector<G*>& out) {
  for (auto& l : ls) leaves_of(l, out);
}

// Every tree of the spec: roots, setup, reports, local work.
template <class Spec, class F>
void each_tree(Spec& s, F f) {
  for (auto& t : s.tasks) {
    f(t.root);
    for (auto* v : {&t.init, &t.exit, &t.inst_init, &t.inst_exit, &t.reports}) {
      for (auto& l : *v) f(l);
    }
  }
  for (auto& n : s.nodes) {
    for (auto* v : {&n.local_init, &n.local_exit, &n.reports}) {
      for (auto& l : *v) f(l);
    }
  }
}

template <class Spec, class G>
void all_leaves(Spec& s, std::vector<G*>& ls) {
  each_tree(s, [&ls](auto& g) { leaves_of(g, ls); });
}

int max_id(const gnode& g) {
  int m = g.id;
  for (const auto& k : g.kids) m = std::max(m, max_id(k));
  return m;
}

// Leaves not in a concurrent step: where a Sleep keeps a trigger seed
// deterministic.
void sequential_leaves(gnode& g, std::vector<gnode*>& out) {
  if (concurrent_node(g)) return;
  if (g.k == kind::leaf) out.push_back(&g);
  for (auto& k : g.kids) sequential_leaves(k, out);
}

// Leaves of T's root where a trigger may go, each with its concurrent
// ancestor (at most one, whose children have no concurrency of their own).
void trigger_spots(gnode& g, gnode* ancestor, std::vector<std::pair<gnode*, gnode*>>& out) {
  if (g.k == kind::leaf) {
    out.emplace_back(&g, ancestor);
    return;
  }
  if (concurrent_node(g)) {
    if (ancestor != nullptr || std::any_of(g.kids.begin(), g.kids.end(), has_concurrency)) return;
    ancestor = &g;
  }
  for (auto& k : g.kids) trigger_spots(k, ancestor, out);
}

// A task that is not T: nothing in it suspends before its end or a blocker.
void make_plain(gnode& g) {
  if (g.k == kind::do_parallel) {
    g.k = kind::do_;
    g.stop_at = -1;
  }
  g.concurrent = false;
  for (auto& k : g.kids) make_plain(k);
}

// A leaf of one add, for a trigger where there was no leaf.
gnode new_leaf(group_spec& s, draws& d) {
  gnode g;
  int m = 0;
  each_tree(s, [&m](const gnode& t) { m = std::max(m, max_id(t)); });
  g.id = m + 1;
  g.adds.push_back({d.pick(0, counters - 1), d.pick(1, 3)});
  return g;
}

void add_sleeps(std::vector<gnode*> leaves, draws& d, double p) {
  for (gnode* l : leaves) {
    if (l->x != extra::none || !d.coin(p)) continue;
    l->x = extra::sleep;
    l->x_n = d.pick(0, 1);
    l->x_first = d.coin();
  }
}

void plain_seed(group_spec& s, draws& d) {
  std::vector<gnode*> ls;
  all_leaves(s, ls);
  add_sleeps(ls, d, 0.06);
}

// Where T's trigger goes: a leaf of its root (with its concurrent
// ancestor there, if any), of its setup and report steps, or of its node's
// own work.
struct place {
  gnode* leaf = nullptr;
  gnode* ancestor = nullptr;
  bool in_root = false;
};
place trigger_place(group_spec& s, task_spec& t, draws& d) {
  node_spec& n = s.nodes[static_cast<std::size_t>(t.node)];
  const int where = d.weighted({70, 12, 18});
  if (where == 0) {
    std::vector<std::pair<gnode*, gnode*>> spots;
    trigger_spots(t.root, nullptr, spots);
    if (!spots.empty()) {
      auto [leaf, ancestor] = d.one_of(spots);
      return {leaf, ancestor, true};
    }
  }
  std::vector<gnode*> ls;
  if (where == 2) {
    for (auto* v : {&n.local_init, &n.local_exit, &n.reports}) leaves_of(*v, ls);
    if (ls.empty()) {
      n.local_init.push_back(new_leaf(s, d));
      return {&n.local_init.back()};
    }
    return {d.one_of(ls)};
  }
  for (auto* v : {&t.init, &t.exit, &t.inst_init, &t.inst_exit, &t.reports}) leaves_of(*v, ls);
  if (ls.empty()) {
    t.init.push_back(new_leaf(s, d));
    return {&t.init.back()};
  }
  return {d.one_of(ls)};
}

void trigger_seed(group_spec& s, draws& d, bool cancel) {
  const auto tj = static_cast<std::size_t>(d.pick(0, static_cast<int>(s.tasks.size()) - 1));
  const int node = s.tasks[tj].node;
  s.tasks[tj].instances = 1;
  for (std::size_t j = 0; j < s.tasks.size(); ++j) {
    if (j == tj) continue;
    task_spec& t = s.tasks[j];
    make_plain(t.root);
    t.instances = 1;
    t.reports.clear();
  }
  for (std::size_t i = 0; i < s.nodes.size(); ++i) {
    if (static_cast<int>(i) == node) continue;
    s.nodes[i].local_init.clear();
    s.nodes[i].local_exit.clear();
    s.nodes[i].reports.clear();
    s.nodes[i].reset = false;
  }
  task_spec& t = s.tasks[tj];
  const auto [leaf, ancestor, in_root] = trigger_place(s, t, d);
  leaf->x = cancel ? extra::cancel : (in_root && d.coin(0.4)) ? extra::fail_at : extra::fail;
  leaf->x_n = leaf->x == extra::fail_at ? d.pick(1, 3) : 0;
  leaf->x_first = d.coin();
  // Blockers: in the other tasks, and in the trigger's concurrent siblings.
  for (std::size_t j = 0; j < s.tasks.size(); ++j) {
    std::vector<gnode*> ls;
    if (j != tj && d.coin(0.6)) {
      leaves_of(s.tasks[j].root, ls);
    } else if (j == tj && ancestor != nullptr && d.coin(0.5)) {
      leaves_of(*ancestor, ls);
      std::erase(ls, leaf);
    }
    if (ls.empty()) continue;
    gnode* b = d.one_of(ls);
    b->x = extra::block;
    b->x_first = d.coin();
  }
  std::vector<gnode*> ls;
  sequential_leaves(t.root, ls);
  for (auto* v : {&t.init, &t.exit, &t.inst_init, &t.inst_exit, &t.reports}) leaves_of(*v, ls);
  leaves_of(s.nodes[static_cast<std::size_t>(node)].local_init, ls);
  add_sleeps(ls, d, 0.1);
}

}  // namespace

void decorate(group_spec& spec, std::uint64_t seed) {
  draws d(seed);
  switch (d.weighted({66, 20, 14})) {
    case 0: plain_seed(spec, d); break;
    case 1: trigger_seed(spec, d, false); break;
    default: trigger_seed(spec, d, true); break;
  }
}

bool has_extra(const group_spec& spec, extra x) {
  std::vector<const gnode*> ls;
  all_leaves(spec, ls);
  return std::any_of(ls.begin(), ls.end(), [x](const gnode* l) { return l->x == x; });
}

void settle(group_spec& spec) {
  if (!has_extra(spec, extra::block)) return;
  session m;
  for (std::size_t i = 0; i < spec.nodes.size(); ++i) {
    for (const auto& b : initial_blobs(spec.nodes[i])) {
      m.set(node_name(static_cast<int>(i)), b.name,
            b.is_bool ? value{value::type::boolean, 0, b.b} : value{value::type::i64, b.i, false});
    }
  }
  const task_group g = build(spec);
  for (int run = 0; run < spec.runs; ++run) {
    const run_outcome o = m.run(g);
    if (o.hangs) {
      std::vector<gnode*> ls;
      all_leaves(spec, ls);
      for (gnode* l : ls) {
        if (l->x == extra::block) l->x = extra::none;
      }
      return;
    }
    if (!o.ok) return;  // the test's runs stop there
  }
}

}  // namespace taskgroup::model
