// The reference model's session (model.hpp): task composition, a run of
// a group node by node, and which driver a task's tree gets.
#include "model/runner.hpp"

#include "model/task_access.hpp"

#include <taskgroup/control.hpp>

#include <algorithm>

namespace taskgroup::model {

namespace {

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

namespace {

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// One run of a group while the model runs it ("A node's run", "Failure
// policies", "Deadlines and cancellation").
struct group_run {
  const task_group& g;
  const std::vector<bool>* began;
  run_outcome out;
  std::optional<halt> failure;  // the first, as worded for the run
  bool cancelled = false;       // an op asked for the run's cancellation
  bool waits = false;           // something waits for the run to end
  int trigger_task = -1;        // the task that failed or cancelled the run
  std::string trigger_node;     // the node whose own work did

  // `h` ended the work of `task` (-1: the node's own work) on `node`.
  void ended(const halt& h, bool cancels, int task, const std::string& node, const std::string& prefix) {
    if (h.w == halt::why::blocked) waits = true;
    if (cancels) cancelled = true;
    if (h.w == halt::why::failed && !failure) failure = halt{h.w, h.code, prefix + h.message};
    if ((cancels || h.w == halt::why::failed) && trigger_task < 0 && trigger_node.empty()) {
      if (task >= 0) {
        trigger_task = task;
      } else {
        trigger_node = node;
      }
    }
  }
};

// A node's own step (local init or exit) of `bodies`, in `w`.
err own_step(runner& own, const std::string& name, const std::vector<body>& bodies, const std::shared_ptr<ws>& w) {
  execution_step s(name);
  for (const auto& bd : bodies) append_body(s, bd);
  if (s.empty()) return std::nullopt;
  return own.start(s, w);
}

// Task k, on node workspace `w`: begun (or not) as the library says.
void run_task(group_run& run, std::size_t k, const std::shared_ptr<ws>& w) {
  const task& t = run.g.tasks()[k];
  task_outcome& to = run.out.tasks[k];
  const std::string prefix = "task " + quoted(t.name()) + " (node " + quoted(t.node_name()) + "): ";
  const execution_step root = session::compose(t);
  if (run.began != nullptr && !(*run.began)[k]) {
    // Cancelled before it began: no event, no effect.
    to.status = task_status::cancelled;
    to.error = prefix + root.name() + ": cancelled";
    return;
  }
  const bool priv = t.workspace_type().value_or(workspace_type::private_) == workspace_type::private_;
  runner r(run.out, t.name(), t.node_name(), t.step() ? &*t.step() : nullptr);
  r.emit(event::type::task_begin, t.name());
  err e = r.start(root, priv ? ws::child(w) : w);
  to.iterations = r.iterations;
  to.status = !e                               ? task_status::succeeded
              : ending_of(e) == ending::failed ? task_status::failed
                                               : task_status::cancelled;
  if (e) {
    to.error = prefix + e->message;
    run.ended(*e, r.cancels_run, static_cast<int>(k), t.node_name(), prefix);
  }
  r.emit(event::type::task_end, t.name(), r.iterations, ending_of(e));
}

// The node's group report steps, bound (before the tasks start, beside
// which they run) in `bound`; false when one could not be.
bool bind_reports(group_run& run, const std::string& node, const std::shared_ptr<ws>& w, std::vector<bstep>& bound) {
  for (const auto& rs : run.g.report_steps()) {
    if (rs.node != node) continue;
    bound.emplace_back();
    if (rs.step.create_workspace()) continue;
    if (err e = bind_nets(rs.step, *w, bound.back(), node + "/" + rs.step.name())) {
      run.ended(*e, false, -1, node, "");
      return false;
    }
  }
  return true;
}

// Their final run; false when one did not end well.
bool final_reports(group_run& run, const std::string& node, runner& own, const std::shared_ptr<ws>& w,
                   std::vector<bstep>& bound) {
  std::size_t i = 0;
  for (const auto& rs : run.g.report_steps()) {
    if (rs.node != node) continue;
    if (i == 1) own.unordered();
    if (err e = own.report(rs.step, w, &bound[i++], node + "/" + rs.step.name())) {
      run.ended(*e, own.cancels_run, -1, node, "");
      return false;
    }
  }
  return true;
}

void run_node(group_run& run, const std::string& node, const std::shared_ptr<ws>& w) {
  const task_group& g = run.g;
  runner own(run.out, "", node, nullptr);
  const std::string prefix = "node " + quoted(node) + ": ";
  auto [inits, exits] = detail::group_access::local_work(g, node);
  if (err e = own_step(own, node + ":init", inits, w)) {
    run.ended(*e, own.cancels_run, -1, node, prefix);  // the node's tasks are not run
    return;
  }
  std::vector<bstep> reports;
  if (!bind_reports(run, node, w, reports)) return;
  bool all_ok = true;
  for (std::size_t k = 0; k < g.tasks().size(); ++k) {
    if (g.tasks()[k].node_name() != node) continue;
    run_task(run, k, w);
    all_ok = all_ok && run.out.tasks[k].status == task_status::succeeded;
  }
  // The final report runs and local exit need the tasks' success.
  all_ok = all_ok && final_reports(run, node, own, w, reports);
  for (std::size_t k = 0; k < g.tasks().size(); ++k) {
    const task& t = g.tasks()[k];
    if (t.node_name() != node || run.out.tasks[k].status != task_status::succeeded) continue;
    for (const auto& name : t.output_names()) run.out.tasks[k].outputs.emplace_back(name, read(w->find(name)));
  }
  if (!all_ok) return;
  if (err e = own_step(own, node + ":exit", exits, w)) run.ended(*e, own.cancels_run, -1, node, prefix);
}

// The run's own error: its cancellation, listing where the tasks that had
// begun waited (at most 8), else its first failure.
void settle(group_run& run) {
  run_outcome& out = run.out;
  if (run.cancelled) {
    out.ok = false;
    out.code = errc::cancelled;
    out.error = "run cancelled";
    std::size_t listed = 0, more = 0;
    for (std::size_t k = 0; k < out.tasks.size(); ++k) {
      const task_outcome& t = out.tasks[k];
      if (t.status != task_status::cancelled || (run.began != nullptr && !(*run.began)[k])) continue;
      if (listed == 8) {
        ++more;
        continue;
      }
      out.error += (listed++ == 0 ? "; still running then: " : "; ") + t.error;
    }
    if (more != 0) out.error += "; and " + std::to_string(more) + " more";
  } else if (run.failure) {
    out.ok = false;
    out.code = run.failure->code;
    out.error = run.failure->message;
  }
  const bool triggered = run.cancelled || run.failure.has_value();
  out.hangs = run.waits && !triggered;
  // Once the run fails or is cancelled, any task may have been cancelled
  // before it began, but the one that did it, and those of a node that
  // did it (they had all ended) or whose local init failed (not run).
  for (std::size_t k = 0; k < out.tasks.size(); ++k) {
    task_outcome& t = out.tasks[k];
    t.may_skip = triggered && static_cast<int>(k) != run.trigger_task && t.node != run.trigger_node &&
                 t.status != task_status::not_run;
  }
}

}  // namespace

run_outcome session::run(const task_group& g, const std::vector<bool>* began) {
  group_run run{g, began, {}, std::nullopt, false, false, -1, {}};
  std::vector<std::string> order;
  for (const auto& t : g.tasks()) {
    if (std::find(order.begin(), order.end(), t.node_name()) == order.end()) order.push_back(t.node_name());
    run.out.tasks.push_back(task_outcome{t.name(), t.node_name(), task_status::not_run, {}, 0, {}, false});
  }
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
    for (const auto& t : g.tasks()) {
      if (t.node_name() != node) continue;
      for (const auto& name : t.output_names()) (void)w->create(name);
    }
    run_node(run, node, w);
  }
  settle(run);
  return std::move(run.out);
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
