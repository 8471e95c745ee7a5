// Step trees in plans. One table of step fields serves the writer, the
// reader and the check for unknown keys; the trees are walked with explicit
// stacks, so that a tree of max_step_depth levels needs no deep recursion.
#include "plan/internal.hpp"

#include "model/limits.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <vector>

namespace taskgroup::plan_detail {

namespace {

struct step_field {
  std::string_view key;
  // Null for the fields the walkers handle themselves (name, nets,
  // substeps): they shape the tree.
  status (*read)(const json::value& v, const pointer& ptr, execution_step& s);
  void (*write)(const execution_step& s, json::object& o);
};

// In written order.
const step_field fields[] = {
    {"name", nullptr, nullptr},
    {"nets", nullptr, nullptr},
    {"substeps", nullptr, nullptr},
    {"num_iter",
     [](const json::value& v, const pointer& ptr, execution_step& s) -> status {
       TASKGROUP_TRY(auto n, get_integer(v, ptr));
       if (n < 0) return bad(ptr, "must be >= 0, got " + std::to_string(n));
       s.iterations(n);
       return ok();
     },
     [](const execution_step& s, json::object& o) {
       if (s.iterations()) o["num_iter"] = *s.iterations();
     }},
    {"should_stop_blob",
     [](const json::value& v, const pointer& ptr, execution_step& s) -> status {
       TASKGROUP_TRY(auto b, get_name(v, ptr));
       if (b.empty()) return bad(ptr, "must name a blob");
       s.should_stop_blob(std::move(b));
       return ok();
     },
     [](const execution_step& s, json::object& o) {
       if (s.should_stop_blob()) o["should_stop_blob"] = *s.should_stop_blob();
     }},
    {"only_once",
     [](const json::value& v, const pointer& ptr, execution_step& s) -> status {
       TASKGROUP_TRY(auto b, get_bool(v, ptr));
       s.only_once(b);
       return ok();
     },
     [](const execution_step& s, json::object& o) {
       if (s.only_once()) o["only_once"] = true;
     }},
    {"concurrent_substeps",
     [](const json::value& v, const pointer& ptr, execution_step& s) -> status {
       TASKGROUP_TRY(auto b, get_bool(v, ptr));
       s.concurrent_substeps(b);
       return ok();
     },
     [](const execution_step& s, json::object& o) {
       if (s.concurrent_substeps()) o["concurrent_substeps"] = true;
     }},
    {"run_every_ms",
     [](const json::value& v, const pointer& ptr, execution_step& s) -> status {
       TASKGROUP_TRY(auto ms, get_duration(v, ptr));
       s.run_every(ms);
       return ok();
     },
     [](const execution_step& s, json::object& o) {
       if (s.run_every()) o["run_every_ms"] = s.run_every()->count();
     }},
    {"create_workspace",
     [](const json::value& v, const pointer& ptr, execution_step& s) -> status {
       TASKGROUP_TRY(auto b, get_bool(v, ptr));
       s.create_workspace(b);
       return ok();
     },
     [](const execution_step& s, json::object& o) {
       if (s.create_workspace()) o["create_workspace"] = true;
     }},
    {"num_concurrent_instances",
     [](const json::value& v, const pointer& ptr, execution_step& s) -> status {
       TASKGROUP_TRY(auto n, get_instances(v, ptr));
       s.concurrent_instances(n);
       return ok();
     },
     [](const execution_step& s, json::object& o) {
       if (s.concurrent_instances() != 1) o["num_concurrent_instances"] = s.concurrent_instances();
     }},
    {"timeout_ms",
     [](const json::value& v, const pointer& ptr, execution_step& s) -> status {
       TASKGROUP_TRY(auto ms, get_duration(v, ptr));
       s.timeout(ms);
       return ok();
     },
     [](const execution_step& s, json::object& o) {
       if (s.timeout()) o["timeout_ms"] = s.timeout()->count();
     }},
    {"retry",
     [](const json::value& v, const pointer& ptr, execution_step& s) -> status {
       TASKGROUP_TRY(auto p, read_retry(v, ptr));
       s.retry(std::move(p));
       return ok();
     },
     [](const execution_step& s, json::object& o) {
       if (writes_retry(s.retry())) o["retry"] = retry_json(s.retry());
     }},
};

constexpr std::size_t field_count = std::size(fields);

// A step being read: its fields are set, its substeps follow.
struct read_frame {
  execution_step s;
  const json::array* subs = nullptr;
  std::size_t next = 0;
  std::int64_t instances = 1;  // of its children at once: the counts along its path, multiplied
};

// Refuses step `f`, read at `ptr` and run by each of `above` instances,
// when its count takes the product along its path past max_instances;
// else notes the product for its children.
status count_instances(read_frame& f, const pointer& ptr, std::int64_t above) {
  const std::int64_t n = f.s.concurrent_instances();  // in range: get_instances checked it
  if (auto fault = detail::instance_product_fault(above, n); !fault.empty()) {
    return bad(child(ptr, "num_concurrent_instances"), std::to_string(n) + " " + fault);
  }
  f.instances = above * n;
  return ok();
}

result<read_frame> begin_step(const json::value& v, const pointer& ptr, const net_table& nets) {
  TASKGROUP_TRY(auto o, get_object(v, ptr));
  // The step's values by field, found in one pass over its keys (which
  // also refuses the unknown ones).
  std::array<const json::value*, field_count> at{};
  for (const auto& kv : *o) {
    const std::string_view k = kv.key();  // a plain name: clang 14 captures no structured binding
    const auto* f =
        std::find_if(std::begin(fields), std::end(fields), [&](const step_field& sf) { return sf.key == k; });
    if (f == std::end(fields)) return unknown_key(ptr, k);
    at[static_cast<std::size_t>(f - std::begin(fields))] = &kv.value();
  }
  auto value = [&](std::string_view key) {
    for (std::size_t i = 0; i < field_count; ++i) {
      if (fields[i].key == key) return at[i];
    }
    return static_cast<const json::value*>(nullptr);
  };
  if (value("nets") != nullptr && value("substeps") != nullptr) return bad(ptr, "both \"nets\" and \"substeps\"");
  if (value("num_iter") != nullptr && value("should_stop_blob") != nullptr) {
    return bad(ptr, "both \"num_iter\" and \"should_stop_blob\"");
  }
  std::string name = "step";
  if (const auto* n = value("name")) {
    TASKGROUP_TRY(name, get_name(*n, child(ptr, "name")));
  }
  read_frame f{execution_step(std::move(name))};
  if (const auto* list = value("nets")) {
    const pointer np = child(ptr, "nets");
    TASKGROUP_TRY(auto arr, get_array(*list, np));
    for (std::size_t i = 0; i < arr->size(); ++i) {
      TASKGROUP_TRY(auto net_name, get_name((*arr)[i], child(np, i)));
      auto it = nets.find(net_name);
      if (it == nets.end()) return bad(child(np, i), "unknown net " + quote(net_name));
      f.s.add_net(it->second);
    }
  }
  for (std::size_t i = 0; i < field_count; ++i) {
    if (fields[i].read != nullptr && at[i] != nullptr) {
      TASKGROUP_TRY(fields[i].read(*at[i], child(ptr, fields[i].key), f.s));
    }
  }
  if (f.s.only_once() && !f.s.should_stop_blob()) return bad(child(ptr, "only_once"), "needs \"should_stop_blob\"");
  if (const auto* subs = value("substeps")) {
    TASKGROUP_TRY(f.subs, get_array(*subs, child(ptr, "substeps")));
  }
  return f;
}

}  // namespace

result<execution_step> read_step_tree(const json::value& v, const pointer& ptr, const net_table& nets,
                                      std::int64_t outer) {
  // The pointers of the open steps, two for each (the step, its
  // "substeps"): a deque, so that each stays where its children view it.
  std::deque<pointer> path;
  path.push_back(ptr);
  std::vector<read_frame> stack;
  TASKGROUP_TRY(auto root, begin_step(v, path.back(), nets));
  TASKGROUP_TRY(count_instances(root, path.back(), outer));
  path.emplace_back(path.back(), "substeps");
  stack.push_back(std::move(root));
  for (;;) {
    read_frame& top = stack.back();
    if (top.subs != nullptr && top.next < top.subs->size()) {
      const std::size_t i = top.next++;
      const json::value& c = (*top.subs)[i];
      path.emplace_back(path.back(), i);
      if (stack.size() == max_step_depth) {
        return bad(path.back(),
                   "steps nest deeper than taskgroup::max_step_depth (" + std::to_string(max_step_depth) + " levels)");
      }
      TASKGROUP_TRY(auto f, begin_step(c, path.back(), nets));
      TASKGROUP_TRY(count_instances(f, path.back(), top.instances));
      path.emplace_back(path.back(), "substeps");
      stack.push_back(std::move(f));
      continue;
    }
    execution_step done = std::move(top.s);
    stack.pop_back();
    path.pop_back();
    path.pop_back();
    // No validate() here: begin_step, count_instances and the depth check
    // above apply each of its rules with the pointer of the fault (and
    // nets come from the plan's table, so two different nets never share a
    // name); the tree is validated again when it runs.
    if (stack.empty()) return done;
    stack.back().s.add_substep(std::move(done));
  }
}

result<json::value> write_step_tree(const execution_step& root, const std::function<status(const net&)>& add_net) {
  struct frame {
    const execution_step* s;
    json::array nets;
    json::array subs;
    std::size_t next = 0;
  };
  std::vector<frame> stack;
  // Nets are added as their step is reached, so that they are listed in
  // order of first use.
  auto push = [&](const execution_step& s) -> status {
    frame f{&s, {}, {}};
    for (const auto& n : s.nets()) {
      TASKGROUP_TRY(add_net(n));
      f.nets.emplace_back(json::string(n.name()));
    }
    stack.push_back(std::move(f));
    return ok();
  };
  TASKGROUP_TRY(push(root));
  for (;;) {
    frame& top = stack.back();
    if (top.next < top.s->substeps().size()) {
      TASKGROUP_TRY(push(top.s->substeps()[top.next++]));
      continue;
    }
    json::object o;
    for (const auto& field : fields) {
      if (field.write != nullptr) {
        field.write(*top.s, o);
      } else if (field.key == "name") {
        o["name"] = top.s->name();
      } else if (field.key == "nets") {
        if (!top.nets.empty()) o["nets"] = std::move(top.nets);
      } else if (!top.subs.empty()) {
        o["substeps"] = std::move(top.subs);
      }
    }
    stack.pop_back();
    if (stack.empty()) return json::value(std::move(o));
    stack.back().subs.emplace_back(std::move(o));
  }
}

}  // namespace taskgroup::plan_detail
