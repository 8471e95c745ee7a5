#include "model/model.hpp"

#include "model/task_access.hpp"

#include <taskgroup/control.hpp>

#include <algorithm>
#include <functional>
#include <variant>

namespace taskgroup::model {

std::string value::str() const {
  switch (t) {
    case type::none: return "(no value)";
    case type::i64: return std::to_string(i) + " (int64)";
    case type::boolean: return b ? "true (bool)" : "false (bool)";
    case type::other: return "(other type)";
  }
  return "?";
}

std::string event::str() const {
  static const char* const names[] = {"task_begin", "task_end", "step_begin",   "step_end",
                                      "net_begin",  "net_end",  "report_begin", "report_end"};
  std::string s = std::string(names[static_cast<int>(t)]) + " " + name;
  if (t == type::step_end || t == type::task_end) s += " iterations=" + std::to_string(iterations);
  if (t == type::step_end || t == type::task_end || t == type::net_end || t == type::report_end) {
    s += ok ? " ok" : " FAILED";
  }
  return s;
}

// A workspace: local blobs and a parent (docs/semantics.md, "Workspaces").
struct ws {
  std::shared_ptr<ws> parent;
  std::map<std::string, std::shared_ptr<value>> blobs;

  std::shared_ptr<value> find(const std::string& name) const {
    for (const ws* w = this; w != nullptr; w = w->parent.get()) {
      if (auto it = w->blobs.find(name); it != w->blobs.end()) return it->second;
    }
    return nullptr;
  }
  std::shared_ptr<value> create(const std::string& name) {
    if (auto b = find(name)) return b;
    return blobs[name] = std::make_shared<value>();
  }
  static std::shared_ptr<ws> child(std::shared_ptr<ws> of) {
    auto w = std::make_shared<ws>();
    w->parent = std::move(of);
    return w;
  }
};

namespace {

using err = std::optional<std::string>;

struct bop {
  const op_def* def;
  std::vector<std::shared_ptr<value>> in, out;
};
struct bnet {
  std::string name;
  std::vector<bop> ops;
};
// A step's nets and stop blob bound in one workspace; children with their
// own workspace are bound when they start.
struct bstep {
  std::vector<bnet> nets;
  std::shared_ptr<value> stop;
  std::vector<bstep> kids;
};

err bind(const execution_step& s, ws& w, bstep& b) {
  b = bstep{};
  for (const auto& n : s.nets()) {
    bnet bn{n.name(), {}};
    for (std::size_t k = 0; k < n.ops().size(); ++k) {
      const op_def& d = n.ops()[k];
      bop o{&d, {}, {}};
      for (const auto& in : d.inputs) {
        auto v = w.find(in);
        if (!v) return "net " + n.name() + " op #" + std::to_string(k) + ": non-existing input blob " + in;
        o.in.push_back(std::move(v));
      }
      for (const auto& out : d.outputs) o.out.push_back(w.create(out));
      bn.ops.push_back(std::move(o));
    }
    b.nets.push_back(std::move(bn));
  }
  b.kids.resize(s.substeps().size());
  for (std::size_t i = 0; i < s.substeps().size(); ++i) {
    const auto& c = s.substeps()[i];
    if (c.create_workspace()) continue;
    if (auto e = bind(c, w, b.kids[i])) return e;
  }
  if (s.should_stop_blob()) {
    b.stop = w.find(*s.should_stop_blob());
    if (!b.stop) return "step " + s.name() + ": stop blob " + *s.should_stop_blob() + " does not exist";
  }
  return std::nullopt;
}

value int_value(std::int64_t i) { return {value::type::i64, i, false}; }
value bool_value(bool b) { return {value::type::boolean, 0, b}; }

err run_op(const bop& o) {
  const std::string& t = o.def->type;
  auto need = [&](value::type ty) {
    return std::all_of(o.in.begin(), o.in.end(), [&](const auto& v) { return v->t == ty; });
  };
  auto bad = [&]() -> err { return "op " + t + ": unsupported or mistyped inputs"; };
  if (o.out.size() != 1) return bad();
  value& out = *o.out[0];
  if (t == "ConstantFill") {
    const argument* a = o.def->args.find("value");
    if (a == nullptr) return bad();
    if (const auto* i = std::get_if<std::int64_t>(a)) {
      out = int_value(*i);
    } else if (const auto* b = std::get_if<bool>(a)) {
      out = bool_value(*b);
    } else {
      return bad();
    }
    return std::nullopt;
  }
  if (t == "Copy") {
    if (o.in.size() != 1 || o.in[0]->t == value::type::none) return bad();
    out = *o.in[0];
    return std::nullopt;
  }
  if (t == "Not") {
    if (o.in.size() != 1 || !need(value::type::boolean)) return bad();
    out = bool_value(!o.in[0]->b);
    return std::nullopt;
  }
  if (o.in.size() != 2) return bad();
  if (t == "Or" || t == "And") {
    if (!need(value::type::boolean)) return bad();
    out = bool_value(t == "Or" ? (o.in[0]->b || o.in[1]->b) : (o.in[0]->b && o.in[1]->b));
    return std::nullopt;
  }
  if (!need(value::type::i64)) return bad();
  const std::int64_t x = o.in[0]->i, y = o.in[1]->i;
  if (t == "Add") {
    out = int_value(x + y);
  } else if (t == "Sub") {
    out = int_value(x - y);
  } else if (t == "GE") {
    out = bool_value(x >= y);
  } else if (t == "LT") {
    out = bool_value(x < y);
  } else if (t == "EQ") {
    out = bool_value(x == y);
  } else {
    return bad();
  }
  return std::nullopt;
}

// Runs one task's (or one node's) steps, recording events.
class runner {
 public:
  runner(run_outcome& out, std::string task, std::string node, const execution_step* counted)
      : out_(out), task_(std::move(task)), node_(std::move(node)), counted_(counted) {}

  std::uint64_t iterations = 0;  // of the counted step

  void emit(event::type t, const std::string& name, std::uint64_t it = 0, bool ok = true) {
    out_.events.push_back(event{task_, node_, t, name, it, ok});
  }
  void unordered() { out_.unordered.insert(node_ + "|" + task_); }

  // One execution of `s` in `w` (bound in `b`, unless it has its own workspace).
  err exec(const execution_step& s, std::shared_ptr<ws> w, bstep* b) {
    emit(event::type::step_begin, s.name());
    bstep local;
    err e;
    if (s.create_workspace()) {
      w = ws::child(w);
      e = bind(s, *w, local);
      b = &local;
    }
    std::uint64_t it = 0;
    if (!e) e = iterate(s, w, *b, it);
    if (!e) e = reports(s, w, *b);
    emit(event::type::step_end, s.name(), it, !e);
    if (counted_ != nullptr && counted_->same(s)) iterations += it;
    return e;
  }

  // A step started on its own (a task's tree, setup, a group report step):
  // bound here unless it makes its own workspace.
  err start(const execution_step& s, const std::shared_ptr<ws>& w) {
    bstep b;
    if (!s.create_workspace()) {
      if (err e = bind(s, *w, b)) return e;
    }
    return exec(s, w, &b);
  }

  // A group or task report step's run (docs/semantics.md, "Report steps": once, after its siblings).
  err report(const execution_step& r, std::shared_ptr<ws> w, bstep* b) {
    emit(event::type::report_begin, r.name());
    err e = exec(r, std::move(w), b);
    emit(event::type::report_end, r.name(), 0, !e);
    return e;
  }

 private:
  // Tri-state stop check (docs/semantics.md, "Stop blob checks"): stop, go on, or an error.
  static err stop_check(const bstep& b, bool& stop) {
    stop = false;
    if (!b.stop || b.stop->t == value::type::none) return std::nullopt;
    if (b.stop->t != value::type::boolean) return "stop blob expects a scalar boolean";
    stop = b.stop->b;
    return std::nullopt;
  }

  err run_net(const bnet& n) {
    emit(event::type::net_begin, n.name);
    err e;
    for (const auto& o : n.ops) {
      if ((e = run_op(o))) break;
    }
    emit(event::type::net_end, n.name, 0, !e);
    return e;
  }

  err iterate(const execution_step& s, const std::shared_ptr<ws>& w, bstep& b, std::uint64_t& it) {
    std::vector<std::size_t> rec;
    for (std::size_t i = 0; i < s.substeps().size(); ++i) {
      if (!s.substeps()[i].run_every()) rec.push_back(i);
    }
    const auto n = static_cast<std::size_t>(s.concurrent_instances());
    const bool concurrent = (s.concurrent_substeps() && rec.size() >= 2) || n > 1;
    const bool stop_mode = s.should_stop_blob().has_value();
    bool stop = false;
    for (std::int64_t i = 0;; ++i) {
      if (stop_mode ? (s.only_once() && i > 0) : i >= s.iterations().value_or(1)) return std::nullopt;
      ++it;
      if (concurrent) {
        if (!rec.empty()) unordered();
        // S x N workers, worker k runs recurring substep k mod S
        // (docs/semantics.md, "Sequential and concurrent iterations").
        for (std::size_t k = 0; k < rec.size() * n; ++k) {
          const std::size_t idx = rec[k % rec.size()];
          if (err e = exec(s.substeps()[idx], w, &b.kids[idx])) return e;
        }
        if (err e = stop_check(b, stop)) return e;
        if (stop) return std::nullopt;
        continue;
      }
      for (const auto& bn : b.nets) {
        if (err e = run_net(bn)) return e;
        if (err e = stop_check(b, stop)) return e;
        if (stop) return std::nullopt;
      }
      for (std::size_t idx : rec) {
        if (err e = exec(s.substeps()[idx], w, &b.kids[idx])) return e;
        if (err e = stop_check(b, stop)) return e;
        if (stop) return std::nullopt;
      }
    }
  }

  err reports(const execution_step& s, const std::shared_ptr<ws>& w, bstep& b) {
    std::size_t count = 0;
    for (std::size_t i = 0; i < s.substeps().size(); ++i) {
      if (!s.substeps()[i].run_every()) continue;
      if (++count == 2) unordered();  // report substeps run concurrently with each other
      if (err e = report(s.substeps()[i], w, &b.kids[i])) return e;
    }
    return std::nullopt;
  }

  run_outcome& out_;
  std::string task_, node_;
  const execution_step* counted_;
};

execution_step wrap(const std::string& name, execution_step inner, const std::vector<body>& inits,
                    const std::vector<body>& exits) {
  execution_step init(name + ":init"), exit(name + ":exit");
  for (const auto& b : inits) append_body(init, b);
  for (const auto& b : exits) append_body(exit, b);
  if (init.empty() && exit.empty()) return inner;
  return execution_step(name).add_substep(init).add_substep(std::move(inner)).add_substep(exit);
}

value read(const std::shared_ptr<value>& v) { return v ? *v : value{}; }

// A report step as its task's body holds it (docs/semantics.md, "Task composition"): the step itself with
// the interval, built anew so that the user's step stays as it was.
execution_step reporting(const execution_step& r, std::chrono::milliseconds every) {
  execution_step out(r.name());
  out.nets(r.nets()).substeps(r.substeps());
  if (r.iterations()) out.iterations(*r.iterations());
  if (r.should_stop_blob()) out.should_stop_blob(*r.should_stop_blob());
  out.only_once(r.only_once())
      .concurrent_substeps(r.concurrent_substeps())
      .create_workspace(r.create_workspace())
      .concurrent_instances(r.concurrent_instances());
  if (r.timeout()) out.timeout(*r.timeout());
  return out.run_every(every);
}

}  // namespace

session::session() = default;
session::~session() = default;

std::shared_ptr<ws> session::node_ws(const std::string& name) {
  auto& w = nodes_[name];
  if (!w) w = std::make_shared<ws>();
  return w;
}

void session::set(const std::string& node, const std::string& blob, value v) { *node_ws(node)->create(blob) = v; }

std::map<std::string, value> session::blobs(const std::string& node) const {
  std::map<std::string, value> out;
  if (auto it = nodes_.find(node); it != nodes_.end()) {
    for (const auto& [name, v] : it->second->blobs) out[name] = *v;
  }
  return out;
}

execution_step session::compose(const task& t) {
  const std::string name = t.name();
  std::vector<body> task_inits, task_exits, inst_inits, inst_exits;
  for (const auto& [obj, scope] : t.setups()) {
    if (scope == setup_scope::task) {
      task_inits.push_back(obj->setup());
      task_exits.push_back(obj->exit());
    } else if (scope == setup_scope::instance) {
      inst_inits.push_back(obj->setup());
      inst_exits.push_back(obj->exit());
    }
  }
  execution_step user = t.step() ? *t.step() : execution_step(name);
  execution_step b = user;
  if (!t.reports().empty()) {
    b = execution_step(name + ":body");
    for (const auto& [r, every] : t.reports()) b.add_substep(reporting(r, every));
    b.add_substep(user);
  }
  execution_step x = wrap(name + ":instance", b, inst_inits, inst_exits);
  if (t.num_instances() > 1) {
    // I gets create_workspace; without instance setup, I = B is the user's
    // step, kept unchanged in a wrapper of I's name.
    execution_step child = x.same(b) ? execution_step(name + ":instance").add_substep(x) : x;
    child.create_workspace(true);
    x = execution_step(name + ":parallel").add_substep(child).concurrent_instances(t.num_instances());
  }
  execution_step root = wrap(name, x, task_inits, task_exits);
  return root.empty() ? execution_step(name) : root;
}

run_outcome session::run(const task_group& g) {
  run_outcome out;
  std::vector<std::string> order;
  for (const auto& t : g.tasks()) {
    if (std::find(order.begin(), order.end(), t.node_name()) == order.end()) order.push_back(t.node_name());
  }
  for (const auto& t : g.tasks()) out.tasks.push_back(task_outcome{t.name(), t.node_name(), false, 0, {}});
  auto fail = [&](const std::string& why) {
    if (out.ok) out.error = why;
    out.ok = false;
  };
  for (const auto& node : order) {
    // A run's workspace on a node: the node's own when a GLOBAL task runs
    // there, else a child of it that ends with the run.
    bool global_here = false;
    for (const auto& t : g.tasks()) {
      if (t.node_name() == node && t.workspace_type().value_or(workspace_type::private_) == workspace_type::global) {
        global_here = true;
      }
    }
    std::shared_ptr<ws> w = global_here ? node_ws(node) : ws::child(node_ws(node));
    runner own(out, "", node, nullptr);
    for (const auto& t : g.tasks()) {
      if (t.node_name() != node) continue;
      for (const auto& name : t.output_names()) (void)w->create(name);
    }
    auto [inits, exits] = detail::group_access::local_work(g, node);
    auto setup_step = [&](const std::string& name, const std::vector<body>& bodies) -> err {
      execution_step s(name);
      for (const auto& bd : bodies) append_body(s, bd);
      if (s.empty()) return std::nullopt;
      return own.start(s, w);
    };
    if (err e = setup_step(node + ":init", inits)) {
      fail(*e);
      continue;
    }
    for (std::size_t k = 0; k < g.tasks().size(); ++k) {
      const task& t = g.tasks()[k];
      if (t.node_name() != node) continue;
      const bool priv = t.workspace_type().value_or(workspace_type::private_) == workspace_type::private_;
      std::shared_ptr<ws> tw = priv ? ws::child(w) : w;
      const execution_step root = compose(t);
      runner r(out, t.name(), node, t.step() ? &*t.step() : nullptr);
      r.emit(event::type::task_begin, t.name());
      err e = r.start(root, tw);
      out.tasks[k].ok = !e;
      out.tasks[k].iterations = r.iterations;
      r.emit(event::type::task_end, t.name(), r.iterations, !e);
      if (e) fail(t.name() + ": " + *e);
    }
    std::size_t reports = 0;
    for (const auto& rs : g.report_steps()) {
      if (rs.node != node) continue;
      if (++reports == 2) own.unordered();
      bstep b;
      err e = rs.step.create_workspace() ? std::nullopt : bind(rs.step, *w, b);
      if (!e) e = own.report(rs.step, w, &b);
      if (e) fail(*e);
    }
    for (std::size_t k = 0; k < g.tasks().size(); ++k) {
      const task& t = g.tasks()[k];
      if (t.node_name() != node) continue;
      for (const auto& name : t.output_names()) out.tasks[k].outputs.emplace_back(name, read(w->find(name)));
    }
    if (err e = setup_step(node + ":exit", exits)) fail(*e);
  }
  return out;
}

namespace {

// Net runs and substep executions of one execution of `s` when it is plain
// (session.hpp), else nullopt.
std::optional<std::uint64_t> plain_cost(const execution_step& s, bool root) {
  if (s.timeout() || s.concurrent_instances() != 1) return std::nullopt;
  if (s.create_workspace() && !root) return std::nullopt;
  if (s.should_stop_blob() && !s.only_once()) return std::nullopt;  // unbounded
  std::size_t recurring = 0;
  std::uint64_t body = s.nets().size();
  for (const auto& c : s.substeps()) {
    if (c.run_every()) return std::nullopt;
    ++recurring;
    auto cost = plain_cost(c, false);
    if (!cost) return std::nullopt;
    body += 1 + *cost;
  }
  if (s.concurrent_substeps() && recurring >= 2) return std::nullopt;
  const std::uint64_t iters =
      s.should_stop_blob() ? 1 : static_cast<std::uint64_t>(std::max<std::int64_t>(s.iterations().value_or(1), 0));
  return iters * body;
}

}  // namespace

driver expected_driver(const execution_step& root) {
  auto cost = plain_cost(root, true);
  if (!cost) return driver::coroutine;
  // The library counts a little differently near its limit of 256.
  return *cost <= 128 ? driver::frame_free : driver::either;
}

}  // namespace taskgroup::model
