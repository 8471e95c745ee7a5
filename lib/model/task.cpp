#include <taskgroup/task.hpp>

#include "model/limits.hpp"
#include "model/on_demand.hpp"
#include "model/step_access.hpp"
#include "model/task_access.hpp"

#include <algorithm>
#include <atomic>
#include <memory>

namespace taskgroup {

std::string_view to_string(workspace_type t) noexcept { return t == workspace_type::global ? "global" : "private"; }

result<std::vector<std::shared_ptr<const blob>>> detail::last_output_values(const output_state& s) {
  if (s.failure) return *s.failure;
  if (!s.set) {
    return fail(errc::output_not_set, "task " + quote(s.task) + " output " + quote(s.blobs.empty() ? "" : s.blobs[0]) +
                                          ": Output value not set yet.");
  }
  return s.values;
}

result<std::vector<std::shared_ptr<const blob>>> detail::output_values_in(const output_state& s, const run_report& r) {
  if (!group_access::ran(r, s.group)) {
    return fail(errc::output_not_set, "task " + quote(s.task) + " output " + quote(s.blobs.empty() ? "" : s.blobs[0]) +
                                          ": the report is not of a run of the task's group");
  }
  return output_values(s, r.find(s.task));
}

bool detail::output_is_set(const output_state& s) noexcept { return s.set; }
bool detail::output_is_list(const output_state& s) noexcept { return s.list; }
const std::vector<std::string>& detail::output_blobs(const output_state& s) noexcept { return s.blobs; }

result<std::vector<std::shared_ptr<const blob>>> detail::output_values(const output_state& s, const task_report* r) {
  // Built only on failure: every run publishes every output.
  auto what = [&] { return "task " + quote(s.task) + " output " + quote(s.blobs.empty() ? "" : s.blobs[0]); };
  if (r == nullptr) return fail(errc::output_not_set, what() + ": the task was not in the run");
  if (r->status != task_status::succeeded) return fail(errc::output_not_set, what() + ": the task did not succeed");
  std::vector<std::shared_ptr<const blob>> values;
  values.reserve(s.blobs.size());
  for (const auto& name : s.blobs) {
    auto is = [&](const auto& kv) { return kv.first == name; };
    if (auto e = std::find_if(r->output_errors.begin(), r->output_errors.end(), is); e != r->output_errors.end()) {
      return e->second.with_context("task " + quote(s.task) + " output " + quote(name));
    }
    auto v = std::find_if(r->outputs.begin(), r->outputs.end(), is);
    if (v == r->outputs.end()) {
      return fail(errc::output_not_set, "task " + quote(s.task) + " output " + quote(name) + ": no value in the run");
    }
    values.push_back(v->second);
  }
  return values;
}

void detail::set_output(output_state& s, const task_report& r) {
  s.values.clear();
  s.failure.reset();
  s.set = false;
  auto values = output_values(s, &r);
  if (!values) {
    s.failure = std::make_unique<const error>(values.error());
    return;
  }
  s.values = std::move(values).value();
  s.set = true;
}

error detail::output_type_error(const output_state& s, std::size_t i, const blob& b, const std::string& expected) {
  return {errc::type_mismatch, "task " + quote(s.task) + " output " + quote(s.blobs.at(i)) + ": expected " + expected +
                                   ", got " + b.type_name()};
}

namespace {

// Explicit init/exit bodies are setup objects too, so that all setup work
// keeps one order: the order of attachment.
class body_setup final : public setup_object {
 public:
  body_setup(body init, body exit) : init_(std::move(init)), exit_(std::move(exit)) {}
  body setup() override { return init_; }
  body exit() override { return exit_; }

 private:
  body init_;
  body exit_;
};

struct attachment {
  std::shared_ptr<setup_object> obj;
  setup_scope scope;
};

}  // namespace

std::shared_ptr<setup_object> make_setup(body init, body exit) {
  return std::make_shared<body_setup>(std::move(init), std::move(exit));
}

struct task::data {
  // What few tasks have, kept apart so that a plain task stays small (a
  // plan may hold 10^5 tasks and more).
  struct extra_fields {
    std::vector<attachment> setups;
    std::vector<std::pair<execution_step, std::chrono::milliseconds>> reports;
    std::vector<attachment> local_setups;  // claimed local-scope objects, for the group
    std::optional<std::string> misuse;
    retry_policy retry;
  };

  std::string base;
  taskgroup::node where;
  std::string full_name;  // set when added to a group (then `used`)
  std::optional<execution_step> user;
  std::int64_t instances = 1;
  // The workspace type as 0 (none set) or 1 + the enumerator, beside
  // `used`: one word for both, and the data one allocation class smaller.
  std::uint8_t type = 0;
  bool used = false;
  std::vector<std::shared_ptr<detail::output_state>> outputs;
  std::optional<execution_step> composed;  // cached get_step()
  detail::on_demand<extra_fields> extra;
};

task::task(std::string name) : data_(std::make_shared<data>()) { data_->base = std::move(name); }

task::task(std::string name, execution_step s) : task(std::move(name)) { step(std::move(s)); }

bool task::check_mutable(const char* what) {
  if (!data_->used) return true;
  // At the call, leaving the task (and its group) as they were.
  throw system_error(
      error(errc::invalid_task,
            "task " + quote(name()) + ": Cannot modify task since it is already been used (" + what + ")"));
}

task& task::step(execution_step s) {
  if (!check_mutable("step")) return *this;
  if (data_->user) {
    if (!data_->extra.view().misuse) data_->extra.edit().misuse = "This Task already has an execution step.";
    return *this;
  }
  data_->user = std::move(s);
  return *this;
}

task& task::step(net n) {
  std::string label = n.name();
  return step(execution_step(std::move(label)).add_net(std::move(n)));
}

task& task::node(taskgroup::node n) {
  if (check_mutable("node")) data_->where = std::move(n);
  return *this;
}

task& task::num_instances(std::int64_t n) {
  if (check_mutable("num_instances")) data_->instances = n;
  return *this;
}

task& task::workspace_type(taskgroup::workspace_type t) {
  if (check_mutable("workspace_type")) data_->type = static_cast<std::uint8_t>(1 + static_cast<int>(t));
  return *this;
}

task& task::init(body b) { return setup(make_setup(std::move(b), body{}), setup_scope::task); }
task& task::exit(body b) { return setup(make_setup(body{}, std::move(b)), setup_scope::task); }
task& task::instance_init(body b) { return setup(make_setup(std::move(b), body{}), setup_scope::instance); }
task& task::instance_exit(body b) { return setup(make_setup(body{}, std::move(b)), setup_scope::instance); }

task& task::report(execution_step s, std::optional<std::chrono::milliseconds> interval) {
  if (!check_mutable("report")) return *this;
  auto every = interval.value_or(s.run_every().value_or(std::chrono::milliseconds(1000)));
  data_->extra.edit().reports.emplace_back(std::move(s), every);
  return *this;
}

task& task::retry(retry_policy policy) {
  if (check_mutable("retry")) data_->extra.edit().retry = std::move(policy);
  return *this;
}

const retry_policy& task::retry() const noexcept { return data_->extra.view().retry; }

task& task::setup(std::shared_ptr<setup_object> obj, setup_scope scope) {
  if (check_mutable("setup") && obj) data_->extra.edit().setups.push_back({std::move(obj), scope});
  return *this;
}

std::shared_ptr<detail::output_state> task::add_output(std::vector<std::string> blobs, bool list,
                                                       const std::type_info* type) {
  auto st = std::make_shared<detail::output_state>();
  st->task = name();
  st->blobs = std::move(blobs);
  st->list = list;
  st->type = type;
  if (check_mutable("output")) data_->outputs.push_back(st);
  return st;
}

std::string task::name() const {
  if (data_->used) return data_->full_name;
  std::string base = data_->base;
  if (base.empty()) base = data_->user ? data_->user->name() : "task";
  return data_->where.name() + "/" + base;
}

const std::string& task::base_name() const noexcept { return data_->base; }
const std::string& task::node_name() const noexcept { return data_->where.name(); }
const taskgroup::node& task::node() const noexcept { return data_->where; }
std::int64_t task::num_instances() const noexcept { return data_->instances; }
std::optional<taskgroup::workspace_type> task::workspace_type() const noexcept {
  if (data_->type == 0) return std::nullopt;
  return static_cast<taskgroup::workspace_type>(data_->type - 1);
}
const std::optional<execution_step>& task::step() const noexcept { return data_->user; }
bool task::used() const noexcept { return data_->used; }

std::vector<std::pair<std::shared_ptr<setup_object>, setup_scope>> task::setups() const {
  std::vector<std::pair<std::shared_ptr<setup_object>, setup_scope>> out;
  for (const auto& a : data_->extra.view().setups) out.emplace_back(a.obj, a.scope);
  return out;
}

std::vector<std::pair<execution_step, std::chrono::milliseconds>> task::reports() const {
  return data_->extra.view().reports;
}

namespace {

// Appends the steps of the tree at `root` whose policy retries.
void retried_in(const execution_step& root, std::string_view where, std::vector<retried_step>& out) {
  std::vector<std::pair<const execution_step*, std::size_t>> path{{&root, 0}};  // a step, its next substep
  auto visit = [&] {
    const execution_step& s = *path.back().first;
    if (!s.retry().retries()) return;
    std::string name;
    for (const auto& [step, next] : path) name += (name.empty() ? "" : "/") + step->name();
    out.push_back(retried_step{std::string(where), std::move(name), s});
  };
  visit();
  while (!path.empty()) {
    auto& [s, next] = path.back();
    if (next == s->substeps().size()) {
      path.pop_back();
      continue;
    }
    path.emplace_back(&s->substeps()[next++], 0);
    visit();
  }
}

void retried_in(const body& b, std::string_view where, std::vector<retried_step>& out) {
  for (const auto& entry : b.items()) {
    if (const auto* s = std::get_if<execution_step>(&entry)) retried_in(*s, where, out);
  }
}

}  // namespace

std::vector<retried_step> retried_steps(const execution_step& root, std::string_view where) {
  std::vector<retried_step> out;
  retried_in(root, where, out);
  return out;
}

std::vector<retried_step> retried_steps(const body& b, std::string_view where) {
  std::vector<retried_step> out;
  retried_in(b, where, out);
  return out;
}

std::vector<retried_step> task::retried_steps() const {
  std::vector<retried_step> out;
  for (const auto& a : data_->extra.view().setups) {
    if (a.scope == setup_scope::local) continue;  // the node's
    const bool instance = a.scope == setup_scope::instance;
    retried_in(a.obj->setup(), instance ? "instance init " : "init ", out);
    retried_in(a.obj->exit(), instance ? "instance exit " : "exit ", out);
  }
  if (data_->user) retried_in(*data_->user, "", out);
  for (const auto& [s, every] : data_->extra.view().reports) retried_in(s, "report ", out);
  return out;
}

std::vector<output_decl> task::declared_outputs() const {
  std::vector<output_decl> out;
  out.reserve(data_->outputs.size());
  for (const auto& o : data_->outputs) out.push_back(output_decl{o->blobs, o->list, o->type});
  return out;
}

std::vector<std::string> task::output_names() const {
  std::vector<std::string> names;
  for (const auto& o : data_->outputs) names.insert(names.end(), o->blobs.begin(), o->blobs.end());
  return names;
}

status task::validate() const {
  if (const auto& m = data_->extra.view().misuse) return fail(errc::invalid_task, "task " + quote(name()) + ": " + *m);
  if (auto f = data_->extra.view().retry.fault(); !f.empty()) {
    return fail(errc::invalid_task, "task " + quote(name()) + ": retry: " + f);
  }
  if (auto f = detail::instances_fault(data_->instances); !f.empty()) {
    return fail(errc::invalid_task, "task " + quote(name()) + ": num_instances " + f);
  }
  for (const auto& [s, every] : data_->extra.view().reports) {
    if (auto f = detail::duration_fault(every.count()); !f.empty()) {
      return fail(errc::invalid_task, "task " + quote(name()) + ": report step " + quote(s.name()) + ": interval " + f);
    }
  }
  // Every instance runs the step and the report steps: their counts
  // multiply the task's (a tree alone is checked by its own validate, the
  // instance setups with the composed tree in get_step).
  if (data_->instances > 1) {
    auto excess = [&](const execution_step& root, const char* what) -> status {
      auto e = detail::first_instance_excess(root, data_->instances);
      if (!e) return ok();
      return fail(errc::invalid_task, "task " + quote(name()) + " (num_instances " + std::to_string(data_->instances) +
                                          "): " + what + " " + quote(e->path) + ": num_concurrent_instances " +
                                          std::to_string(e->count) + " " +
                                          detail::instance_product_fault(e->above, e->count));
    };
    if (data_->user) {
      TASKGROUP_TRY(excess(*data_->user, "step"));
    }
    for (const auto& r : data_->extra.view().reports) {
      TASKGROUP_TRY(excess(r.first, "report step"));
    }
  }
  return ok();
}

namespace {

// [name:init] + inner + [name:exit], or inner alone when there is no setup.
execution_step wrap(const std::string& name, std::string_view suffix, execution_step inner,
                    const std::vector<body>& inits, const std::vector<body>& exits) {
  // Most tasks have no setup: no steps made for nothing.
  if (inits.empty() && exits.empty()) return inner;
  const std::string full = name + std::string(suffix);
  execution_step init(full + ":init");
  for (const auto& b : inits) append_body(init, b);
  execution_step exit(full + ":exit");
  for (const auto& b : exits) append_body(exit, b);
  if (init.empty() && exit.empty()) return inner;
  execution_step outer(full);
  outer.add_substep(init);
  outer.add_substep(std::move(inner));
  outer.add_substep(exit);
  return outer;
}

}  // namespace

namespace {

// The setup bodies of a task, by scope.
struct claimed_setups {
  std::vector<body> task_inits, task_exits, inst_inits, inst_exits;
};

// Claims the setup objects of a task's data `d` (each contributes once, to
// its first consumer); local ones are kept in `d` for the session.
template <class Data>
claimed_setups claim_setups(Data& d) {
  claimed_setups c;
  if (auto* e = d.extra.get()) e->local_setups.clear();
  for (const auto& a : d.extra.view().setups) {
    if (!a.obj->claim(&d)) continue;
    switch (a.scope) {
      case setup_scope::task:
        c.task_inits.push_back(a.obj->setup());
        c.task_exits.push_back(a.obj->exit());
        break;
      case setup_scope::instance:
        c.inst_inits.push_back(a.obj->setup());
        c.inst_exits.push_back(a.obj->exit());
        break;
      case setup_scope::local: d.extra.edit().local_setups.push_back(a); break;
    }
  }
  return c;
}

// The first fault of the parts given to task `name` (its step, report
// steps, setup bodies), each checked on its own: a composed tree that is
// not valid is named in the part given.
template <class Reports>
status part_at_fault(const std::optional<execution_step>& user, const Reports& reports, const claimed_setups& c,
                     const std::string& name) {
  if (user) {
    TASKGROUP_TRY(user->validate());
  }
  for (const auto& r : reports) {
    TASKGROUP_TRY(r.first.validate());
  }
  auto bodies_fit = [](const std::vector<body>& bodies, const std::string& holder) -> status {
    execution_step s(holder);
    for (const auto& b : bodies) append_body(s, b);
    return detail::step_validation::holding_bodies(s);
  };
  TASKGROUP_TRY(bodies_fit(c.task_inits, name + ":init"));
  TASKGROUP_TRY(bodies_fit(c.task_exits, name + ":exit"));
  TASKGROUP_TRY(bodies_fit(c.inst_inits, name + ":instance:init"));
  return bodies_fit(c.inst_exits, name + ":instance:exit");
}

}  // namespace

result<execution_step> task::get_step() const {
  TASKGROUP_TRY(validate());
  if (data_->composed) return *data_->composed;
  const std::string name = this->name();

  const claimed_setups c = claim_setups(*data_);
  const auto& [task_inits, task_exits, inst_inits, inst_exits] = c;

  execution_step user = data_->user ? *data_->user : execution_step(name);
  // B: report steps beside the user step.
  execution_step body_step = user;
  if (const auto& reports = data_->extra.view().reports; !reports.empty()) {
    body_step = execution_step(name + ":body");
    for (const auto& [r, every] : reports) {
      // A copy of its level takes the interval: the user's step, which may
      // be used elsewhere, is not changed.
      body_step.add_substep(detail::step_access::copy_level(r).run_every(every));
    }
    body_step.add_substep(user);
  }
  // I: instance setup around B, in the instance's own workspace.
  execution_step instance = wrap(name, ":instance", body_step, inst_inits, inst_exits);
  // X: concurrent instances of I, each in a workspace of its own. I is
  // made here when the instances have setup; else (I = B) B is wrapped in
  // one, as B may be the user's step, which is not changed.
  execution_step x = instance;
  if (data_->instances > 1) {
    execution_step child =
        instance.same(body_step) ? execution_step(name + ":instance").add_substep(instance) : instance;
    child.create_workspace(true);
    x = execution_step(name + ":parallel").add_substep(child).concurrent_instances(data_->instances);
  }
  execution_step composed = wrap(name, "", x, task_inits, task_exits);
  if (composed.empty()) {
    // An empty user step may carry a builder's misuse (a rejected control
    // helper is an empty step marked invalid): reported, not replaced.
    TASKGROUP_TRY(composed.validate());
    composed = execution_step(name);
  }
  // The levels composed here do not count against max_step_depth: only
  // when the whole is deeper may a tree given be too deep on its own. A
  // fault is named in the part given (the whole's path runs through the
  // composed levels, and its depth error through the first step past
  // their allowance, not past the limit).
  std::size_t deepest = 0;
  const status whole = detail::step_validation::composed(composed, &deepest);
  if (!whole || deepest > max_step_depth) {
    TASKGROUP_TRY(part_at_fault(data_->user, data_->extra.view().reports, c, name));
    TASKGROUP_TRY(whole);
  }
  data_->composed = composed;
  return composed;
}

}  // namespace taskgroup

namespace taskgroup::detail {

const std::vector<std::shared_ptr<output_state>>& task_access::outputs(const task& t) noexcept {
  return t.data_->outputs;
}

void task_access::set_full_name(const task& t, std::string full, std::weak_ptr<const void> group) {
  task::data& d = *t.data_;
  d.full_name = std::move(full);
  d.used = true;
  for (auto& o : d.outputs) {
    o->task = d.full_name;
    o->group = group;
  }
}

const std::string& task_access::full_name(const task& t) noexcept { return t.data_->full_name; }

std::vector<std::pair<body, body>> task_access::local_work(const task& t) {
  std::vector<std::pair<body, body>> out;
  for (const auto& a : t.data_->extra.view().local_setups) out.emplace_back(a.obj->setup(), a.obj->exit());
  return out;
}

}  // namespace taskgroup::detail
