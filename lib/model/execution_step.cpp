#include <taskgroup/execution_step.hpp>

#include "detail/test_hooks.hpp"
#include "model/limits.hpp"
#include "model/on_demand.hpp"
#include "model/step_access.hpp"

#include <map>
#include <memory>

namespace taskgroup {

struct execution_step::data {
  // What few steps set, kept apart so that a plain step stays small (a
  // plan holds a step or more per task, 10^5 tasks and more).
  struct extra_fields {
    std::optional<std::string> stop_blob;
    std::optional<std::chrono::milliseconds> run_every;
    std::optional<std::chrono::milliseconds> timeout;
    retry_policy retry;
    std::optional<std::string> misuse;  // the first builder misuse, reported by validate()
    std::int64_t instances = 1;
  };

  std::string name;
  std::vector<net> nets;
  std::vector<execution_step> substeps;
  std::int64_t num_iter = 0;  // when has_num_iter (an optional's flag beside the others)
  bool has_num_iter = false;
  bool only_once = false;
  bool concurrent = false;
  bool create_workspace = false;
  bool frozen = false;
  detail::on_demand<extra_fields> extra;

  data() = default;
  data(const data&) = delete;
  data& operator=(const data&) = delete;
  // Destroys the subtree without recursion: a tree as deep as a program
  // can build (deeper than max_step_depth, which only validate refuses)
  // must not exhaust the stack of the thread that lets it go.
  ~data() {
    std::vector<execution_step> pending = std::move(substeps);
    while (!pending.empty()) {
      execution_step s = std::move(pending.back());
      pending.pop_back();
      if (s.data_.use_count() == 1) {
        for (auto& c : s.data_->substeps) pending.push_back(std::move(c));
        s.data_->substeps.clear();
      }
    }
  }
};

execution_step::execution_step(std::string name) : data_(std::make_shared<data>()) { data_->name = std::move(name); }

execution_step detail::step_access::copy_level(const execution_step& s) {
  const execution_step::data& from = *s.data_;
  execution_step out(from.name);
  execution_step::data& to = *out.data_;
  to.nets = from.nets;
  to.substeps = from.substeps;
  to.num_iter = from.num_iter;
  to.has_num_iter = from.has_num_iter;
  to.only_once = from.only_once;
  to.concurrent = from.concurrent;
  to.create_workspace = from.create_workspace;
  if (const auto* extra = from.extra.get()) to.extra.edit() = *extra;
  return out;
}

bool execution_step::check_mutable(const char* what) {
  if (!data_->frozen) return true;
  if (!data_->extra.view().misuse) {
    data_->extra.edit().misuse =
        std::string("cannot mutate a step that has already been added to a plan/step (") + what + ")";
  }
  return false;
}

execution_step& execution_step::nets(std::vector<net> list) {
  for (auto& n : list) add_net(std::move(n));
  return *this;
}

execution_step& execution_step::add_net(net n) {
  if (check_mutable("nets")) data_->nets.push_back(std::move(n));
  return *this;
}

execution_step& execution_step::substeps(std::vector<execution_step> list) {
  for (auto& s : list) add_substep(std::move(s));
  return *this;
}

execution_step& execution_step::add_substep(execution_step child) {
  if (!check_mutable("substeps")) return *this;
  // The only cycle a builder can make: a step's subtree is frozen, and a
  // frozen step cannot take substeps.
  if (child.same(*this)) return mark_invalid("a step cannot be its own substep");
  // Caffe2 drops empty children silently; a child carrying a misuse is
  // kept so that validation reports it.
  if (child.empty() && !child.data_->extra.view().misuse) return *this;
  child.freeze();
  data_->substeps.push_back(std::move(child));
  return *this;
}

execution_step& execution_step::iterations(std::int64_t n) {
  if (check_mutable("iterations")) {
    data_->num_iter = n;
    data_->has_num_iter = true;
  }
  return *this;
}

execution_step& execution_step::should_stop_blob(std::string blob) {
  if (check_mutable("should_stop_blob")) data_->extra.edit().stop_blob = std::move(blob);
  return *this;
}

execution_step& execution_step::only_once(bool on) {
  if (check_mutable("only_once")) data_->only_once = on;
  return *this;
}

execution_step& execution_step::concurrent_substeps(bool on) {
  if (check_mutable("concurrent_substeps")) data_->concurrent = on;
  return *this;
}

execution_step& execution_step::run_every(std::chrono::milliseconds interval) {
  data_->extra.edit().run_every = interval;  // allowed on a frozen step, as in Caffe2
  return *this;
}

execution_step& execution_step::create_workspace(bool on) {
  if (check_mutable("create_workspace")) data_->create_workspace = on;
  return *this;
}

execution_step& execution_step::concurrent_instances(std::int64_t n) {
  if (check_mutable("concurrent_instances")) data_->extra.edit().instances = n;
  return *this;
}

execution_step& execution_step::timeout(std::chrono::milliseconds d) {
  if (check_mutable("timeout")) data_->extra.edit().timeout = d;
  return *this;
}

execution_step& execution_step::retry(retry_policy policy) {
  if (check_mutable("retry")) data_->extra.edit().retry = std::move(policy);
  return *this;
}

execution_step& execution_step::mark_invalid(std::string reason) {
  if (!data_->extra.view().misuse) data_->extra.edit().misuse = std::move(reason);
  return *this;
}

const std::string& execution_step::name() const noexcept { return data_->name; }
const std::vector<net>& execution_step::nets() const noexcept { return data_->nets; }
const std::vector<execution_step>& execution_step::substeps() const noexcept { return data_->substeps; }
std::optional<std::int64_t> execution_step::iterations() const noexcept {
  if (!data_->has_num_iter) return std::nullopt;
  return data_->num_iter;
}
const std::optional<std::string>& execution_step::should_stop_blob() const noexcept {
  return data_->extra.view().stop_blob;
}
bool execution_step::only_once() const noexcept { return data_->only_once; }
bool execution_step::concurrent_substeps() const noexcept { return data_->concurrent; }
std::optional<std::chrono::milliseconds> execution_step::run_every() const noexcept {
  return data_->extra.view().run_every;
}
bool execution_step::create_workspace() const noexcept { return data_->create_workspace; }
std::int64_t execution_step::concurrent_instances() const noexcept { return data_->extra.view().instances; }
std::optional<std::chrono::milliseconds> execution_step::timeout() const noexcept {
  return data_->extra.view().timeout;
}
const retry_policy& execution_step::retry() const noexcept { return data_->extra.view().retry; }
bool execution_step::empty() const noexcept { return data_->nets.empty() && data_->substeps.empty(); }
bool execution_step::frozen() const noexcept { return data_->frozen; }

void execution_step::freeze() const noexcept {
  // Every substep was frozen when it was added, so freezing is one flag:
  // building a tree level by level stays linear in its size (a test holds
  // it to that through the count).
  data_->frozen = true;
  ++detail::test_step_hooks().frozen;
}

namespace {

status validate_one(const execution_step& s, const std::string& path, const std::optional<std::string>& misuse) {
  auto bad = [&](const std::string& what) { return fail(errc::invalid_step, "step " + quote(path) + ": " + what); };
  if (misuse) return bad(*misuse);
  if (!s.nets().empty() && !s.substeps().empty()) return bad("cannot have both nets and substeps");
  if (s.iterations() && s.should_stop_blob()) return bad("cannot set both should_stop_blob and num_iter");
  if (s.only_once() && !s.should_stop_blob()) return bad("only_once is not supported without should_stop_blob");
  if (s.iterations() && *s.iterations() < 0)
    return bad("num_iter must be >= 0, got " + std::to_string(*s.iterations()));
  if (auto f = detail::instances_fault(s.concurrent_instances()); !f.empty()) {
    return bad("num_concurrent_instances " + f);
  }
  if (s.run_every()) {
    if (auto f = detail::duration_fault(s.run_every()->count()); !f.empty()) return bad("run_every_ms " + f);
  }
  if (s.timeout()) {
    if (auto f = detail::duration_fault(s.timeout()->count()); !f.empty()) return bad("timeout " + f);
  }
  if (s.should_stop_blob() && s.should_stop_blob()->empty()) return bad("should_stop_blob must name a blob");
  if (auto f = s.retry().fault(); !f.empty()) return bad("retry: " + f);
  return ok();
}

// The path of a step past the depth limit, without its thousand middle
// components.
std::string truncated_path(const std::string& root, const std::string& leaf) { return root + "/.../" + leaf; }

}  // namespace

status execution_step::validate() const { return validate_within(max_step_depth); }

status execution_step::validate_within(std::size_t max_depth, std::size_t* deepest) const {
  std::map<std::string, net, std::less<>> seen;
  // Depth-first with an explicit stack (no recursion, whatever the depth);
  // the step path is rendered only for an error. Substeps are checked
  // before the step's own nets (Caffe2's Plan.AddStep order).
  struct frame {
    const execution_step* s;
    std::int64_t instances = 1;  // of its children at once: the counts from the root to it, multiplied
    std::size_t next = 0;        // the substep to visit next
  };
  std::vector<frame> stack{{this, concurrent_instances()}};
  auto path = [&] {
    std::string out;
    for (const frame& f : stack) out += (out.empty() ? "" : "/") + f.s->name();
    return out;
  };
  if (deepest != nullptr) *deepest = 1;
  if (auto st = validate_one(*this, name(), data_->extra.view().misuse); !st) return st;
  while (!stack.empty()) {
    frame& f = stack.back();
    const auto& children = f.s->substeps();
    if (f.next < children.size()) {
      const execution_step& child = children[f.next++];
      if (stack.size() == max_depth) {
        return fail(errc::invalid_step, "step " + quote(truncated_path(stack.front().s->name(), child.name())) +
                                            ": deeper than max_step_depth (" + std::to_string(max_step_depth) +
                                            " levels of nested steps)");
      }
      const std::int64_t above = f.instances;
      stack.push_back(frame{&child});
      if (deepest != nullptr && stack.size() > *deepest) *deepest = stack.size();
      if (auto st = validate_one(child, path(), child.data_->extra.view().misuse); !st) return st;
      // Its count is in range now: the product cannot overflow.
      const std::int64_t n = child.concurrent_instances();
      if (auto fault = detail::instance_product_fault(above, n); !fault.empty()) {
        return fail(errc::invalid_step,
                    "step " + quote(path()) + ": num_concurrent_instances " + std::to_string(n) + " " + fault);
      }
      stack.back().instances = above * n;
      continue;
    }
    for (const auto& n : f.s->nets()) {
      auto [it, inserted] = seen.emplace(n.name(), n);
      if (!inserted && !it->second.same(n)) {
        return fail(errc::duplicate_net,
                    "step " + quote(path()) + ": different nets with same name: " + quote(n.name()));
      }
    }
    stack.pop_back();
  }
  return ok();
}

std::optional<detail::instance_excess> detail::first_instance_excess(const execution_step& root, std::int64_t outer) {
  struct frame {
    const execution_step* s;
    std::int64_t instances;  // of its children at once
    std::size_t next = 0;
  };
  std::vector<frame> stack;
  auto path = [&] {
    std::string out;
    for (const frame& f : stack) out += (out.empty() ? "" : "/") + f.s->name();
    return out;
  };
  // Checks `s`, entered under `above` instances; true when it is the one.
  auto enter = [&](const execution_step& s, std::int64_t above) {
    const std::int64_t n = s.concurrent_instances();
    if (!instances_fault(n).empty()) return false;  // execution_step::validate names it
    stack.push_back(frame{&s, above * n});
    return !instance_product_fault(above, n).empty();
  };
  if (enter(root, outer)) return instance_excess{path(), outer, root.concurrent_instances()};
  while (!stack.empty()) {
    frame& f = stack.back();
    if (f.next == f.s->substeps().size()) {
      stack.pop_back();
      continue;
    }
    const execution_step& child = f.s->substeps()[f.next++];
    const std::int64_t above = f.instances;
    if (enter(child, above)) return instance_excess{path(), above, child.concurrent_instances()};
  }
  return std::nullopt;
}

}  // namespace taskgroup
