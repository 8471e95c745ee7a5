#include "step/program.hpp"

#include "model/step_access.hpp"
#include "step/runner.hpp"

#include <algorithm>
#include <limits>
#include <utility>

namespace taskgroup::detail {

// See program_step::inline_cost; saturates at 2^32 - 1 (far above any accepted
// cost, run_step_options::yield_every) instead of overflowing.
std::uint32_t inline_cost(const program_step& n, bool root) {
  if (n.timeout() || !n.reports().empty() || n.instances() != 1 || (n.concurrent && n.recurring_size() >= 2)) return 0;
  // A retried step waits between attempts on the coroutine driver.
  if (n.retry() != nullptr) return 0;
  if (n.create_ws && !root) return 0;
  if (n.stop() && !n.only_once) return 0;
  const std::uint64_t iterations = n.stop() ? 1 : static_cast<std::uint64_t>(std::max<std::int64_t>(n.num_iter, 0));
  std::uint64_t body = n.nets.size();
  for (std::size_t j = 0, e = n.recurring_size(); j < e; ++j) {
    const std::size_t idx = n.recurring_at(j);
    const std::uint64_t c = n.children[idx].inline_cost;
    if (c == 0) return 0;
    body += c;
  }
  constexpr std::uint64_t cap = std::numeric_limits<std::uint32_t>::max();
  body = std::min(std::max<std::uint64_t>(body, 1), cap);
  // A loop of zero iterations costs one step (its end check), not 0, which
  // means "cannot run without suspending".
  return static_cast<std::uint32_t>(std::min(std::max<std::uint64_t>(iterations * body, 1), cap));
}

program_step compile_tree(const execution_step& s, const execution_step* counted) {
  program_step n;
  n.counted = counted != nullptr && counted->same(s);
  n.name = s.name();
  const auto& nets = s.nets();
  n.nets.assign(nets.begin(), nets.end());
  // Made now, once: every instance bound in a run shares it.
  for (const auto& nt : n.nets) (void)nt.freeze();
  n.num_iter = s.iterations().value_or(1);
  if (auto stop = s.should_stop_blob()) n.uncommon_fields().stop = std::move(stop);
  n.only_once = s.only_once();
  n.concurrent = s.concurrent_substeps();
  n.create_ws = s.create_workspace();
  if (s.concurrent_instances() != 1) n.uncommon_fields().instances = s.concurrent_instances();
  if (auto every = s.run_every()) n.uncommon_fields().every = *every;
  if (auto timeout = s.timeout()) n.uncommon_fields().timeout = timeout;
  if (s.retry().retries()) n.uncommon_fields().retry = s.retry();
  n.children.reserve(s.substeps().size());
  for (const auto& child : s.substeps()) {
    if (child.run_every()) n.uncommon_fields().reports.push_back(n.children.size());
    n.children.push_back(compile_tree(child, counted));
  }
  if (!n.reports().empty()) {
    program_step::uncommon& r = n.uncommon_fields();
    for (std::size_t i = 0, next = 0; i < n.children.size(); ++i) {
      if (next < r.reports.size() && r.reports[next] == i) {
        ++next;
      } else {
        r.recurring.push_back(i);
      }
    }
  }
  n.inline_cost = inline_cost(n, false);
  return n;
}

namespace {

void render(const step_path* p, std::string& out) {
  if (p == nullptr) return;
  render(p->parent, out);
  if (p->instance >= 0) {
    if (!out.empty()) out += '/';
    out += "instance " + std::to_string(p->instance);
  }
  if (p->name.empty()) return;
  if (!out.empty()) out += '/';
  out += p->name;
}

}  // namespace

std::string render(const step_path* p) {
  std::string out;
  render(p, out);
  return out;
}

error at(const step_path* p, const error& e) { return {e.code, render(p) + "/" + e.message}; }
error at(const step_path* p, errc code, const std::string& what) { return {code, render(p) + ": " + what}; }

status cancelled_at(const step_path* p) { return at(p, errc::cancelled, "cancelled"); }

status bind_step(const program_step& n, workspace& ws, const operator_registry& registry, bound_step& b,
                 const step_path* path) {
  b.nets.clear();
  for (const auto& nt : n.nets) {
    auto inst = ws.instance_of(nt, registry);
    if (!inst) return at(path, inst.error());
    b.nets.push_back(inst.value());
  }
  b.children.clear();
  b.children.resize(n.children.size());
  for (std::size_t i = 0; i < n.children.size(); ++i) {
    const program_step& c = n.children[i];
    if (c.create_ws) continue;
    step_path cp{path, c.name};
    if (auto st = bind_step(c, ws, registry, b.children[i], &cp); !st) return st;
  }
  if (n.stop()) {
    b.stop = ws.find(*n.stop());
    if (b.stop == nullptr) {
      return at(path, errc::blob_not_found, "should_stop_blob: blob " + quote(*n.stop()) + " does not exist");
    }
  }
  return ok();
}

status compile_into(compiled_step& out, const execution_step& s, const execution_step* counted) {
  step_access::freeze(s);
  out.root = compile_tree(s, counted);
  // The root may have its own workspace (the frame-free driver makes it
  // when it starts); only a nested one keeps a tree off that driver.
  out.root.inline_cost = inline_cost(out.root, true);
  return ok();
}

result<std::shared_ptr<const compiled_step>> compile_step(const execution_step& s, const execution_step* counted) {
  auto c = std::make_shared<compiled_step>();
  TASKGROUP_TRY(compile_into(*c, s, counted));
  return std::shared_ptr<const compiled_step>(std::move(c));
}

std::shared_ptr<compiled_step[]> make_compiled_steps(std::size_t n) {
  return std::shared_ptr<compiled_step[]>(new compiled_step[n]);
}

compiled_step& compiled_at(compiled_step* steps, std::size_t k) noexcept { return steps[k]; }

bool may_run_inline(const compiled_step& s) noexcept {
  return s.root.inline_cost != 0 && s.root.inline_cost <= run_step_options{}.yield_every;
}

std::string_view root_name(const compiled_step& s) noexcept { return s.root.name; }

}  // namespace taskgroup::detail
