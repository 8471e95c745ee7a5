#include "model/generate.hpp"

#include <taskgroup/control.hpp>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <random>
#include <sstream>
#include <utility>

using i64 = std::int64_t;

namespace taskgroup::model {

std::string to_string(kind k) {
  static const char* const names[] = {"leaf",      "raw_iter",   "raw_stop",   "raw_once", "loop_n",
                                      "loop_blob", "loop_stop",  "while_",     "until",    "do_while",
                                      "do_until",  "while_net",  "if_",        "if_not",   "if_net",
                                      "switch_",   "switch_not", "stop_guard", "do_",      "do_parallel"};
  return names[static_cast<int>(k)];
}

std::string node_name(int i) { return "n" + std::to_string(i); }

std::string to_string(extra x) {
  static const char* const names[] = {"none", "sleep", "fail", "fail_at", "cancel", "block"};
  return names[static_cast<int>(x)];
}

namespace {

constexpr auto hour = std::chrono::milliseconds(3600 * 1000);

std::string counter(int i) { return "c" + std::to_string(i); }
std::string konst(int k) { return "k" + std::to_string(k); }
std::string gname(const gnode& g) { return "g" + std::to_string(g.id); }
std::string gblob(const gnode& g, const char* what) { return gname(g) + "/" + what; }
// The generator's own nets and steps: `g<id>:what`, apart from the
// `<name>/...` nets the helpers make.
std::string gnet(const gnode& g, const char* what) { return gname(g) + ":" + what; }

// --- generation -------------------------------------------------------------

class generator {
 public:
  explicit generator(std::uint64_t seed) : rng_(seed) {}

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool coin(double p = 0.5) { return std::bernoulli_distribution(p)(rng_); }
  // 0 .. weights.size()-1 with the given relative weights.
  int weighted(std::initializer_list<double> weights) { return std::discrete_distribution<int>(weights)(rng_); }

  gnode leaf() {
    gnode g;
    g.id = next_id_++;
    const int ops = pick(1, 2);
    for (int i = 0; i < ops; ++i) g.adds.push_back({pick(0, counters - 1), pick(1, 3)});
    g.tmp = coin(0.25);
    return g;
  }

  std::vector<gnode> leaves(double p) {
    std::vector<gnode> out;
    if (coin(p)) out.push_back(leaf());
    return out;
  }

  gnode tree(int depth, bool safe) {
    if (depth == 0 || coin(0.3)) return leaf();
    static const kind kinds[] = {kind::raw_iter,   kind::raw_stop,   kind::raw_once, kind::loop_n,     kind::loop_blob,
                                 kind::loop_stop,  kind::while_,     kind::until,    kind::do_while,   kind::do_until,
                                 kind::while_net,  kind::if_,        kind::if_not,   kind::if_net,     kind::switch_,
                                 kind::switch_not, kind::stop_guard, kind::do_,      kind::do_parallel};
    kind k = kinds[pick(0, static_cast<int>(std::size(kinds)) - 1)];
    if (k == kind::loop_blob && !TASKGROUP_MODEL_COUNT_BLOB) k = kind::loop_n;
    gnode g;
    g.k = k;
    g.id = next_id_++;
    g.n = weighted({15, 35, 30, 20});  // 0..3
    g.cond_net = coin();
    const bool concurrent_kind = k == kind::do_parallel || ((k == kind::raw_iter || k == kind::raw_stop) && coin(0.3));
    g.concurrent = concurrent_kind && k != kind::do_parallel;
    g.create_ws = (k == kind::raw_iter || k == kind::raw_stop) && coin(0.25);
    // Mostly one or two children: iteration counts multiply down the tree.
    const int fan = 1 + weighted({55, 30, 15});
    for (int i = 0; i < fan; ++i) g.kids.push_back(tree(depth - 1, safe || concurrent_kind));
    g.direct_nets = k == kind::raw_iter &&
                    std::all_of(g.kids.begin(), g.kids.end(), [](const gnode& c) { return c.k == kind::leaf; }) &&
                    coin();
    const int size = static_cast<int>(g.kids.size());
    switch (k) {
      case kind::if_:
      case kind::if_net:
      case kind::if_not:
        g.cond = pick(0, safe ? 1 : 2);
        g.cond_counter = pick(0, counters - 1);
        g.has_else = k != kind::if_not && coin();
        g.split = g.has_else ? pick(0, size) : size;
        if (k == kind::if_ && coin(0.3)) g.stop_at = pick(0, g.split);
        break;
      case kind::switch_:
      case kind::switch_not:
        for (int i = 0; i < size; ++i) g.case_conds.push_back(coin());
        break;
      case kind::raw_once:
      case kind::loop_n:
      case kind::stop_guard:
      case kind::do_:
        if (k == kind::stop_guard || coin(0.5)) g.stop_at = pick(0, size);
        g.stop_true = coin();
        break;
      default: break;
    }
    return g;
  }

 private:
  std::mt19937_64 rng_;
  int next_id_ = 0;
};

// --- building ---------------------------------------------------------------

body to_body(const body::item& it) {
  return std::visit([](const auto& v) { return body(v); }, it);
}

void append(body& b, const body::item& it) { b = body{b, to_body(it)}; }

// The leaf's extra op(s). fail_at counts the leaf's runs in g<id>/r (set
// to 0 when its task's root starts, `counted_root`) and divides by
// n - runs.
void extra_ops(net& n, const gnode& g) {
  switch (g.x) {
    case extra::none: return;
    case extra::sleep:
      if (g.x_n == 0) {
        n.op("Sleep", {}, {}, {{"ms", i64{0}}});
      } else {
        n.op("Sleep", {}, {}, {{"ms", 0.01}});
      }
      return;
    case extra::fail: n.op("Fail", {}, {}, {{"message", gname(g) + " fails"}}); return;
    case extra::fail_at:
      n.op("Add", {gblob(g, "r"), konst(1)}, {gblob(g, "r")})
          .op("ConstantFill", {}, {gblob(g, "n")}, {{"value", i64{g.x_n}}})
          .op("Sub", {gblob(g, "n"), gblob(g, "r")}, {gblob(g, "d")})
          .op("Div", {konst(1), gblob(g, "d")}, {gblob(g, "q")});
      return;
    case extra::cancel: n.op("CancelRun", {}, {}); return;
    case extra::block: n.op("Sleep", {}, {}, {{"ms", i64{3600 * 1000}}}); return;
  }
}

net leaf_net(const gnode& g) {
  net n(gname(g));
  if (g.x_first) extra_ops(n, g);
  if (g.tmp) {
    n.op("ConstantFill", {}, {gblob(g, "tmp")}, {{"value", i64{2}}});
    n.op("Add", {counter(0), gblob(g, "tmp")}, {counter(0)});
  }
  for (const auto& a : g.adds) n.op("Add", {counter(a.counter), konst(a.konst)}, {counter(a.counter)});
  if (!g.x_first) extra_ops(n, g);
  return n;
}

void fail_at_leaves(const gnode& g, std::vector<const gnode*>& out) {
  if (g.k == kind::leaf && g.x == extra::fail_at) out.push_back(&g);
  for (const auto& k : g.kids) fail_at_leaves(k, out);
}

// A task's root with its fail_at counters set to 0 first, when it has any:
// do_(t<j>:counts, [set them, root]).
execution_step counted_root(const std::string& task, execution_step root, const gnode& tree) {
  std::vector<const gnode*> leaves;
  fail_at_leaves(tree, leaves);
  if (leaves.empty()) return root;
  net reset(task + ":counts/reset");
  for (const gnode* l : leaves) reset.op("ConstantFill", {}, {gblob(*l, "r")}, {{"value", i64{0}}});
  return do_(task + ":counts", body{body(reset), body(std::move(root))});
}

body::item emit(const gnode& g);

// The kids [from, to) with a stop marker at `g.stop_at` (when `marker`).
body kids_body(const gnode& g, std::size_t from, std::size_t to, bool marker, bool unconditional = false) {
  body b;
  for (std::size_t i = from; i <= to; ++i) {
    if (marker && g.stop_at == static_cast<int>(i)) {
      append(b, unconditional ? stop() : stop_if(g.stop_true ? "T" : "F"));
    }
    if (i < to) append(b, emit(g.kids[i]));
  }
  return b;
}

// Helpers that need blobs of their own set first: [init net, helper].
body::item with_init(const gnode& g, net init, execution_step helper) {
  return do_(gnet(g, "w"), body{body(std::move(init)), body(std::move(helper))});
}

execution_step raw_step(const gnode& g) {
  execution_step s(gname(g));
  if (g.direct_nets) {
    for (const auto& c : g.kids) s.add_net(leaf_net(c));
  } else {
    append_body(s, kids_body(g, 0, g.kids.size(), false));
  }
  return s;
}

body::item emit_loop_like(const gnode& g) {
  const std::string i = gblob(g, "i"), n = gblob(g, "n"), c = gblob(g, "c");
  net init(gnet(g, "init"));
  init.op("ConstantFill", {}, {i}, {{"value", i64{0}}}).op("ConstantFill", {}, {n}, {{"value", i64{g.n}}});
  const bool stop_when_done = g.k == kind::until || g.k == kind::do_until || g.k == kind::loop_stop;
  const char* cmp = stop_when_done ? "GE" : "LT";
  net inc(gnet(g, "inc"));
  inc.op("Add", {i, konst(1)}, {i});
  const bool by_net = g.cond_net || g.k == kind::loop_stop;
  if (!by_net) {
    init.op(cmp, {i, n}, {c});
    inc.op(cmp, {i, n}, {c});
  }
  net cond_n(gnet(g, "cond"));
  cond_n.op(cmp, {i, n}, {c});
  condition cond = by_net ? condition(cond_n) : condition(c);
  body b = kids_body(g, 0, g.kids.size(), false);
  append(b, inc);
  const std::string name = gname(g);
  switch (g.k) {
    case kind::loop_stop: return with_init(g, init, loop(name, body{body(stop_if(cond)), b}));
    case kind::while_: return with_init(g, init, while_(name, cond, b));
    case kind::until: return with_init(g, init, until(name, cond, b));
    case kind::do_while: return with_init(g, init, do_while(name, cond, b));
    case kind::do_until: return with_init(g, init, do_until(name, cond, b));
    default: return with_init(g, init, while_net(name, cond, b));
  }
}

condition if_condition(const gnode& g) {
  if (g.cond == 2) {
    net n(gnet(g, "cond"));
    n.op("GE", {counter(g.cond_counter), konst(2)}, {gblob(g, "c")});
    return n;
  }
  const char* blob = g.cond == 0 ? "T" : "F";
  if (!g.cond_net) return blob;
  net n(gnet(g, "cond"));
  n.op("Or", {blob, "F"}, {gblob(g, "c")});
  return n;
}

body::item emit_raw(const gnode& g) {
  const std::string s = gblob(g, "s");
  if (g.k == kind::raw_iter) {
    execution_step st = raw_step(g).iterations(g.n);
    if (g.concurrent) st.concurrent_substeps(true);
    if (g.create_ws) st.create_workspace(true);
    return st;
  }
  net init(gnet(g, "init"));
  init.op("ConstantFill", {}, {s}, {{"value", false}});
  execution_step st(gname(g));
  if (g.k == kind::raw_stop) {
    const std::string i = gblob(g, "i"), n = gblob(g, "n");
    init.op("ConstantFill", {}, {i}, {{"value", i64{0}}}).op("ConstantFill", {}, {n}, {{"value", i64{g.n}}});
    append_body(st, kids_body(g, 0, g.kids.size(), false));
    net tick(gnet(g, "tick"));
    tick.op("Add", {i, konst(1)}, {i}).op("GE", {i, n}, {s});
    st.add_substep(execution_step(gnet(g, "tick")).add_net(tick)).should_stop_blob(s);
    if (g.concurrent) st.concurrent_substeps(true);
    if (g.create_ws) st.create_workspace(true);
    return with_init(g, init, st);
  }
  // raw_once: the stopper (if any) at stop_at.
  for (std::size_t k = 0; k <= g.kids.size(); ++k) {
    if (g.stop_at == static_cast<int>(k)) {
      net stopper(gnet(g, "stopper"));
      stopper.op("ConstantFill", {}, {s}, {{"value", g.stop_true}});
      st.add_substep(execution_step(gnet(g, "stopper")).add_net(stopper));
    }
    if (k < g.kids.size()) append_body(st, body(to_body(emit(g.kids[k]))));
  }
  st.should_stop_blob(s).only_once(true);
  return with_init(g, init, st);
}

body::item emit(const gnode& g) {
  const std::string name = gname(g);
  const std::size_t size = g.kids.size();
  switch (g.k) {
    case kind::leaf: return leaf_net(g);
    case kind::raw_iter:
    case kind::raw_stop:
    case kind::raw_once: return emit_raw(g);
    case kind::loop_n: return loop(name, g.n, kids_body(g, 0, size, true));
    case kind::loop_blob: {
#if TASKGROUP_MODEL_COUNT_BLOB
      net init(gnet(g, "init"));
      init.op("ConstantFill", {}, {gblob(g, "count")}, {{"value", i64{g.n}}});
      body b = kids_body(g, 0, size, false);
      if (g.cond_net) {  // the count is read once per entry: this changes the next one only
        net more(gnet(g, "more"));
        more.op("Add", {gblob(g, "count"), konst(1)}, {gblob(g, "count")});
        append(b, more);
      }
      return with_init(g, init, loop(name, gblob(g, "count"), b));
#else
      return loop(name, g.n, kids_body(g, 0, size, false));
#endif
    }
    case kind::loop_stop:
    case kind::while_:
    case kind::until:
    case kind::do_while:
    case kind::do_until:
    case kind::while_net: return emit_loop_like(g);
    case kind::if_:
    case kind::if_net: {
      body then_b = kids_body(g, 0, static_cast<std::size_t>(g.split), g.k == kind::if_, true);
      std::optional<body> else_b;
      if (g.has_else) else_b = kids_body(g, static_cast<std::size_t>(g.split), size, false);
      if (g.k == kind::if_) return if_(name, if_condition(g), then_b, else_b);
      return if_net(name, if_condition(g), then_b, else_b);
    }
    case kind::if_not: return if_not(name, if_condition(g), kids_body(g, 0, size, false));
    case kind::switch_:
    case kind::switch_not: {
      std::vector<std::pair<condition, body>> cases;
      for (std::size_t k = 0; k < size; ++k) cases.emplace_back(g.case_conds[k] ? "T" : "F", to_body(emit(g.kids[k])));
      return g.k == kind::switch_ ? switch_(name, cases) : switch_not(name, cases);
    }
    case kind::stop_guard: return stop_guard(name, kids_body(g, 0, size, true));
    case kind::do_: return do_(name, kids_body(g, 0, size, true));
    case kind::do_parallel: return do_parallel(name, kids_body(g, 0, size, false));
  }
  return leaf_net(g);
}

body leaves_body(const std::vector<gnode>& ls) {
  body b;
  for (const auto& l : ls) append(b, leaf_net(l));
  return b;
}

// A group name drawn from `seed` with a generator of its own, so that the
// name leaves the trees a seed draws as they are.
std::string draw_name(std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x6e616d65);  // "name"
  const auto pick = [&](std::uint64_t n) { return rng() % n; };
  if (pick(2) == 0) return {};
  static const char* const parts[] = {"checkout", "search", " ",    "/", "\"", "\\", "-", "_", ".",
                                      "é",        "✓",      "名前", "0", "7",  "{",  "}", "~1"};
  if (pick(8) == 0) {  // the longest a name may be: 200 bytes, some of them in multi-byte characters
    std::string longest;
    while (longest.size() + 3 <= max_group_name_size) longest += pick(2) == 0 ? "✓" : "abc";
    longest.append(max_group_name_size - longest.size(), 'z');
    return longest;
  }
  std::string name;
  const std::uint64_t n = 1 + pick(6);
  for (std::uint64_t i = 0; i < n; ++i) name += parts[pick(std::size(parts))];
  return name;
}

}  // namespace

group_spec generate(std::uint64_t seed) {
  generator gen(seed);
  group_spec s;
  s.seed = seed;
  s.name = draw_name(seed);
  s.global = gen.coin();
  s.runs = gen.pick(2, 3);
  const int tasks = 1 + gen.weighted({60, 25, 15});
  const int nodes = gen.pick(1, tasks);
  s.nodes.resize(static_cast<std::size_t>(nodes));
  s.tasks.resize(static_cast<std::size_t>(tasks));
  std::vector<int> per_node(static_cast<std::size_t>(nodes), 0);
  for (int j = 0; j < tasks; ++j) {
    s.tasks[static_cast<std::size_t>(j)].node = j < nodes ? j : gen.pick(0, nodes - 1);
    ++per_node[static_cast<std::size_t>(s.tasks[static_cast<std::size_t>(j)].node)];
  }
  for (auto& t : s.tasks) {
    t.instances = gen.coin(0.7) ? 1 : gen.pick(2, 3);
    const bool safe = per_node[static_cast<std::size_t>(t.node)] > 1 || t.instances > 1;
    // Mostly small trees, some of the full depth: the test's time goes
    // into running them, and iteration counts multiply down a tree.
    t.root = gen.tree(1 + gen.weighted({45, 30, 17, 8}), safe);
    t.init = gen.leaves(0.3);
    t.exit = gen.leaves(0.3);
    t.inst_init = gen.leaves(0.2);
    t.inst_exit = gen.leaves(0.2);
    t.reports = gen.leaves(0.15);
    for (int c = 0; c < counters; ++c) {
      if (gen.coin(0.3)) t.outputs.push_back(c);
    }
  }
  for (auto& n : s.nodes) {
    n.local_init = gen.leaves(0.3);
    n.local_exit = gen.leaves(0.3);
    n.reports = gen.leaves(0.15);
    n.reset = gen.coin(0.2);
    for (int c = 0; c < counters; ++c) n.initial.push_back(gen.pick(0, 3));
  }
  decorate(s, seed);
  settle(s);
  return s;
}

std::vector<initial_blob> initial_blobs(const node_spec& n) {
  std::vector<initial_blob> out;
  for (int c = 0; c < counters; ++c) out.push_back({counter(c), false, n.initial[static_cast<std::size_t>(c)], false});
  for (int k = 1; k <= 3; ++k) out.push_back({konst(k), false, k, false});
  out.push_back({"T", true, 0, true});
  out.push_back({"F", true, 0, false});
  return out;
}

task_group build(const group_spec& spec) {
  task_group g(spec.global ? workspace_type::global : workspace_type::private_);
  g.name(spec.name);
  std::vector<bool> has_task(spec.nodes.size(), false);
  for (std::size_t j = 0; j < spec.tasks.size(); ++j) {
    const task_spec& ts = spec.tasks[j];
    has_task[static_cast<std::size_t>(ts.node)] = true;
    body::item root = emit(ts.root);
    execution_step s = std::holds_alternative<net>(root)
                           ? execution_step(gname(ts.root) + "/step").add_net(std::get<net>(root))
                           : std::get<execution_step>(root);
    task t("t" + std::to_string(j), counted_root("t" + std::to_string(j), s, ts.root));
    t.num_instances(ts.instances);
    if (!ts.init.empty()) t.init(leaves_body(ts.init));
    if (!ts.exit.empty()) t.exit(leaves_body(ts.exit));
    if (!ts.inst_init.empty()) t.instance_init(leaves_body(ts.inst_init));
    if (!ts.inst_exit.empty()) t.instance_exit(leaves_body(ts.inst_exit));
    for (const auto& r : ts.reports) t.report(execution_step(gname(r) + "/report").add_net(leaf_net(r)), hour);
    for (int c : ts.outputs) t.declare_output({counter(c)});
    (void)g.add(std::move(t), node(node_name(ts.node)));
  }
  for (std::size_t i = 0; i < spec.nodes.size(); ++i) {
    if (!has_task[i]) continue;
    const node_spec& ns = spec.nodes[i];
    const node on(node_name(static_cast<int>(i)));
    body init;
    if (ns.reset) {
      net reset("n" + std::to_string(i) + "/reset");
      reset.op("ConstantFill", {}, {counter(2)}, {{"value", i64{0}}});
      append(init, reset);
    }
    init = body{init, leaves_body(ns.local_init)};
    if (!init.items().empty()) g.local_init(on, init);
    if (!ns.local_exit.empty()) g.local_exit(on, leaves_body(ns.local_exit));
    for (const auto& r : ns.reports) g.report_step(execution_step(gname(r) + "/report").add_net(leaf_net(r)), on, hour);
  }
  return g;
}

}  // namespace taskgroup::model
