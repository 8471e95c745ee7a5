#include <taskgroup/task_group.hpp>

#include "model/limits.hpp"
#include "model/step_access.hpp"
#include "model/task_access.hpp"

#include <boost/unordered/unordered_flat_set.hpp>

#include <algorithm>
#include <set>
#include <string_view>
#include <unordered_set>

namespace taskgroup {

namespace {

struct local_entry {
  std::string node;
  std::shared_ptr<setup_object> obj;
};

}  // namespace

struct task_group::data {
  std::optional<taskgroup::workspace_type> type;
  std::string name;
  std::vector<task> tasks;
  // The full names of `tasks`, for unique names: views of the names each
  // task holds (set once, in data that the task list keeps alive).
  boost::unordered_flat_set<std::string_view, std::hash<std::string_view>> full_names;
  taskgroup::cluster nodes;
  std::vector<group_report_step> reports;
  std::vector<local_entry> locals;
  std::vector<group_input> inputs;
  std::set<std::pair<std::string, std::string>> input_keys;  // (node, blob) of `inputs`
  std::vector<remote_net> remote;
  std::set<std::pair<std::string, std::string>> remote_keys;  // (node, net name) of `remote`
  mutable bool used = false;

  // Throws when the group is used: `what` is added. At the call, leaving
  // the group as it was.
  bool check_mutable(const std::string& what) const {
    if (!used) return true;
    throw system_error(error(errc::invalid_task, "task group: Cannot add " + what + " to an already used TaskGroup."));
  }
  // tasks_by_node cache: the node map it was computed for, and the result.
  std::optional<std::map<std::string, std::string>> remap_used;
  std::optional<task_group> grouped;
};

task_group::task_group(std::optional<taskgroup::workspace_type> type) : data_(std::make_shared<data>()) {
  data_->type = type;
}

result<task> task_group::add(task t, node on) {
  t.node(std::move(on));
  return add(std::move(t));
}

result<task> task_group::add(task t) {
  if (data_->used) return fail(errc::invalid_task, "Cannot add Task to an already used TaskGroup.");
  if (t.used()) {
    return fail(errc::invalid_task, "task " + quote(t.name()) + " already belongs to a task group");
  }
  TASKGROUP_TRY(t.validate());
  auto tt = t.workspace_type();
  if (tt && data_->type && *tt != *data_->type) {
    return fail(errc::invalid_task, "task " + quote(t.name()) + ": Require " + std::string(to_string(*data_->type)) +
                                        " but already have " + std::string(to_string(*tt)) +
                                        " (a task group cannot mix PRIVATE and GLOBAL tasks)");
  }
  if (!tt) t.workspace_type(data_->type.value_or(taskgroup::workspace_type::private_));
  if (!data_->type) data_->type = t.workspace_type();

  // Unique full name within the group: <node>/<name>, then :1, :2, ...
  const std::string base = t.name();
  std::string full = base;
  for (int k = 1; data_->full_names.contains(full); ++k) full = base + ":" + std::to_string(k);
  detail::task_access::set_full_name(t, std::move(full), data_);
  data_->full_names.insert(detail::task_access::full_name(t));
  data_->nodes.add(t.node());
  data_->tasks.push_back(t);
  return t;
}

const std::vector<task>& task_group::tasks() const noexcept { return data_->tasks; }

std::vector<std::string> task_group::used_nodes() const {
  std::vector<std::string> out = data_->nodes.nodes();
  std::unordered_set<std::string_view> extra;  // report and remote-net nodes without a task, once each
  for (const auto& r : data_->reports) {
    if (!data_->nodes.has(r.node) && extra.insert(r.node).second) out.push_back(r.node);
  }
  for (const auto& r : data_->remote) {
    if (!data_->nodes.has(r.node) && extra.insert(r.node).second) out.push_back(r.node);
  }
  return out;
}

const taskgroup::cluster& task_group::cluster() const noexcept { return data_->nodes; }
std::optional<taskgroup::workspace_type> task_group::workspace_type() const noexcept { return data_->type; }
bool task_group::used() const noexcept { return data_->used; }
const std::string& task_group::name() const noexcept { return data_->name; }

task_group& task_group::name(std::string n) {
  if (data_->used) {
    throw system_error(
        error(errc::invalid_task, "task group: Cannot set name " + quote(n) + " on an already used TaskGroup."));
  }
  if (std::string f = detail::group_name_fault(n); !f.empty()) {
    throw system_error(error(errc::invalid_task, "task group: name " + f));
  }
  data_->name = std::move(n);
  return *this;
}
const std::vector<group_report_step>& task_group::report_steps() const noexcept { return data_->reports; }

status task_group::declare_input(std::string blob, node on, bool required, const std::type_info* type,
                                 std::string type_name) {
  const std::string where = quote(on.name() + "/" + blob);
  if (data_->used) return fail(errc::invalid_task, "Cannot add input " + where + " to an already used TaskGroup.");
  if (blob.empty()) return fail(errc::invalid_task, "an input on node " + quote(on.name()) + " has an empty blob name");
  if (!data_->input_keys.emplace(on.name(), blob).second) {
    return fail(errc::invalid_task, "input " + where + " declared twice");
  }
  if (type != nullptr && type_name.empty()) type_name = detail::demangle(type->name());
  data_->inputs.push_back(group_input{on.name(), std::move(blob), type, std::move(type_name), required});
  return ok();
}

const std::vector<group_input>& task_group::inputs() const noexcept { return data_->inputs; }

status task_group::add_remote_net(net n, node on) {
  const std::string where = "remote net " + quote(n.name()) + " for node " + quote(on.name());
  if (data_->used) return fail(errc::invalid_task, "Cannot add " + where + " to an already used TaskGroup.");
  if (n.name().empty()) return fail(errc::invalid_task, "a remote net for node " + quote(on.name()) + " has no name");
  if (!data_->remote_keys.emplace(on.name(), n.name()).second) {
    return fail(errc::invalid_task, where + " added twice (a node holds one net of a name)");
  }
  data_->remote.push_back(remote_net{on.name(), std::move(n)});
  return ok();
}

const std::vector<remote_net>& task_group::remote_nets() const noexcept { return data_->remote; }

task_group& task_group::report_step(execution_step s, node on, std::optional<std::chrono::milliseconds> interval) {
  if (!data_->check_mutable("report step " + quote(s.name()) + " on node " + quote(on.name()))) return *this;
  auto every = interval.value_or(s.run_every().value_or(std::chrono::milliseconds(1000)));
  data_->reports.push_back({std::move(s), on.name(), every});
  return *this;
}

task_group& task_group::local_init(node on, body b) {
  return local_setup(std::move(on), make_setup(std::move(b), body{}));
}

task_group& task_group::local_exit(node on, body b) {
  return local_setup(std::move(on), make_setup(body{}, std::move(b)));
}

task_group& task_group::local_setup(node on, std::shared_ptr<setup_object> obj) {
  if (!data_->check_mutable("local setup of node " + quote(on.name()))) return *this;
  if (obj) data_->locals.push_back({on.name(), std::move(obj)});
  return *this;
}

std::vector<std::pair<std::string, std::shared_ptr<setup_object>>> task_group::local_setups() const {
  std::vector<std::pair<std::string, std::shared_ptr<setup_object>>> out;
  for (const auto& l : data_->locals) out.emplace_back(l.node, l.obj);
  return out;
}

namespace detail {

std::size_t invalid_utf8_at(std::string_view t) {
  const auto* p = reinterpret_cast<const unsigned char*>(t.data());
  const std::size_t n = t.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned min = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      min = 0x10000;
    } else {
      return i;
    }
    if (n - i < len) return i;
    unsigned cp = c & (0x7Fu >> len);
    for (std::size_t k = 1; k < len; ++k) {
      const unsigned b = p[i + k];
      if ((b & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::string group_name_fault(std::string_view name) {
  if (name.size() > max_group_name_size) {
    return "must be at most " + std::to_string(max_group_name_size) + " bytes (taskgroup::max_group_name_size), got " +
           std::to_string(name.size());
  }
  if (const std::size_t at = invalid_utf8_at(name); at != std::string_view::npos) {
    static constexpr char hex[] = "0123456789ABCDEF";
    const auto c = static_cast<unsigned char>(name[at]);
    return std::string("must be valid UTF-8, got byte 0x") + hex[c >> 4] + hex[c & 15] + " at offset " +
           std::to_string(at);
  }
  const bool control = std::any_of(name.begin(), name.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7F;
  });
  if (control) return "must hold no control characters, got " + quote(name);
  return {};
}

std::shared_ptr<const void> group_access::identity(const task_group& g) noexcept { return g.data_; }
const void* group_access::key(const task_group& g) noexcept { return g.data_.get(); }
std::weak_ptr<const void> group_access::weak_identity(const task_group& g) noexcept { return g.data_; }

void group_access::mark_used(const task_group& g) noexcept { g.data_->used = true; }

bool group_access::ran(const run_report& r, const std::weak_ptr<const void>& group) noexcept {
  // By owner: an expired identity still names its group alone.
  const std::weak_ptr<const void> none;
  const bool empty = !group.owner_before(none) && !none.owner_before(group);
  return !empty && !group.owner_before(r.group) && !r.group.owner_before(group);
}

status group_access::check_report(const group_report_step& r, bool node_has_task) {
  const std::string where = "report step " + quote(r.step.name()) + " on node " + quote(r.node);
  if (!node_has_task) return fail(errc::invalid_task, where + ", which has no task");
  if (auto f = detail::duration_fault(r.interval.count()); !f.empty()) {
    return fail(errc::invalid_task, where + ": interval " + f);
  }
  return ok();
}

status group_access::check(const task_group& g) {
  for (const auto& t : g.tasks()) {
    if (auto st = t.validate(); !st) return st.error().with_context("task group");
  }
  return ok();
}

std::pair<std::vector<body>, std::vector<body>> group_access::local_work(const task_group& g, const std::string& name) {
  std::vector<body> inits, exits;
  for (const auto& l : g.data_->locals) {
    if (l.node != name || !l.obj->claim(g.data_.get())) continue;
    inits.push_back(l.obj->setup());
    exits.push_back(l.obj->exit());
  }
  return {std::move(inits), std::move(exits)};
}

}  // namespace detail

result<task_group> task_group::tasks_by_node(std::function<std::string(std::string_view)> remap) {
  data_->used = true;
  std::map<std::string, std::string> node_map;
  for (const auto& n : used_nodes()) node_map[n] = remap ? remap(n) : n;
  if (data_->remap_used) {
    if (*data_->remap_used != node_map) return fail(errc::invalid_task, "Cannot call tasks_by_node multiple times.");
    return *data_->grouped;
  }

  // Group tasks and report steps by mapped node, in first-appearance order.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const task*>> by_node;
  for (const auto& t : data_->tasks) {
    const std::string& m = node_map[t.node_name()];
    if (!by_node.count(m)) order.push_back(m);
    by_node[m].push_back(&t);
  }
  for (const auto& r : data_->reports) {
    TASKGROUP_TRY(detail::group_access::check_report(r, by_node.count(node_map[r.node]) != 0));
  }

  task_group grouped;
  for (const auto& m : order) {
    bool any_global = false;
    execution_step body_step(m + ":body");
    std::vector<std::string> outputs;
    for (const auto& r : data_->reports) {
      if (node_map[r.node] == m) body_step.add_substep(detail::step_access::copy_level(r.step).run_every(r.interval));
    }
    std::vector<execution_step> steps;
    for (const task* t : by_node[m]) {
      TASKGROUP_TRY(auto s, t->get_step());
      const bool priv =
          t->workspace_type().value_or(taskgroup::workspace_type::private_) == taskgroup::workspace_type::private_;
      any_global = any_global || !priv;
      steps.push_back(execution_step(t->name()).add_substep(s).create_workspace(priv));
      for (const auto& o : t->output_names()) outputs.push_back(o);
    }
    for (auto& s : steps) body_step.add_substep(s);
    body_step.concurrent_substeps(body_step.substeps().size() > 1);

    std::vector<body> inits, exits;
    for (const auto& [node_name, mapped] : node_map) {
      if (mapped != m) continue;
      auto [i, e] = detail::group_access::local_work(*this, node_name);
      inits.insert(inits.end(), i.begin(), i.end());
      exits.insert(exits.end(), e.begin(), e.end());
    }
    execution_step init(m + ":init"), exit(m + ":exit");
    for (const auto& b : inits) append_body(init, b);
    for (const auto& b : exits) append_body(exit, b);
    execution_step whole(m);
    whole.add_substep(init);
    whole.add_substep(body_step.empty() ? execution_step("empty") : body_step);
    whole.add_substep(exit);

    task t("grouped_by_node", whole);
    t.node(m).workspace_type(any_global ? taskgroup::workspace_type::global : taskgroup::workspace_type::private_);
    for (const auto& o : outputs) (void)t.output<blob>(o);
    TASKGROUP_TRY(grouped.add(std::move(t)));
  }
  for (const auto& r : data_->remote) {
    TASKGROUP_TRY(grouped.add_remote_net(r.net, node(node_map[r.node])));
  }
  grouped.data_->name = data_->name;
  data_->remap_used = node_map;
  data_->grouped = grouped;
  return grouped;
}

result<task> task_group::to_task(node on) {
  const std::string target = on.name();
  if (!data_->remote.empty()) {
    return fail(errc::invalid_task, "to_task: the group carries " + std::to_string(data_->remote.size()) +
                                        " remote net(s), which a task cannot carry (tasks_by_node keeps them)");
  }
  TASKGROUP_TRY(auto grouped, tasks_by_node([target](std::string_view) { return target; }));
  if (grouped.tasks().empty()) return task();
  // A fresh, unused task: the caller adds it to a group of its own.
  const task& g = grouped.tasks().front();
  task fresh("grouped_by_node", *g.step());
  fresh.node(target);
  if (g.workspace_type()) fresh.workspace_type(*g.workspace_type());
  for (const auto& o : g.output_names()) (void)fresh.output<blob>(o);
  return fresh;
}

}  // namespace taskgroup
