// Property test: generated task groups run through local_session as the
// reference model (model.hpp) and the helpers' documentation (intent) say.
//
// Each seed makes a group (generate.hpp): nested loops (counted, stop blob
// with and without only_once), every control helper, while_/until nested in
// loops, concurrent substeps, instances, create_workspace, task and group
// report steps, task/instance/local setup, PRIVATE or GLOBAL, 1-3 nodes and
// tasks. It runs 2 or 3 times on one session, under 8 configurations: the
// automatic driver and the coroutine driver only (test hooks) x 1 and 2
// threads x with and without an observer. After each run it compares:
//   - the run's status, each task's status, iterations and declared outputs;
//   - every node workspace's local blobs (names, types, values);
//   - with an observer, the events of each task and of each node's own work,
//     in order; where the model ran something concurrently (concurrent
//     substeps, instances, two report steps side by side) as multisets;
//   - which driver ran: coroutine only: every task on the coroutine driver;
//     automatic: the two counts add up to the tasks, and tasks whose tree is
//     small and plain (model::expected_driver) run frame-free, with or
//     without an observer;
//   - the model's counters against `intent` (what each helper is documented
//     to do), which catches helpers whose assembled steps misbehave even when
//     the step semantics are followed (e.g. while_ entered a second time).
// Not covered: timing (report steps run every hour, so exactly once at the
// end; periodic report counts and timeouts are not generated), failures and
// cancellation (no generated op fails), asynchronous ops, setup objects
// shared between tasks, the order of events across tasks and nodes (only
// within each), the MPI session.
//
// TASKGROUP_MODEL_TREES=N (default 10000) and TASKGROUP_MODEL_SEED=S (first
// seed, default 1) choose the seeds; TASKGROUP_MODEL_VERBOSE=1 prints every
// failing seed's first difference as it is found. Failing seeds are counted
// by kind; the first of each kind is shrunk greedily (while it fails the same
// way) and printed: the spec dump, the first difference and the plan JSON.
#include "detail/test_hooks.hpp"
#include "model/generate.hpp"
#include "model/model.hpp"
#include "support/run.hpp"

#include <taskgroup/plan.hpp>
#include <taskgroup/session.hpp>

#include <boost/asio/thread_pool.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

using namespace taskgroup;
using taskgroup::model::event;

namespace {

class recorder final : public run_observer {
 public:
  void task_begin(const event_source& at) override { add(at.task, at.node, event::type::task_begin, at.task); }
  void task_end(const task_report& r) override {
    add(r.name, r.node, event::type::task_end, r.name, r.iterations, r.status == task_status::succeeded);
  }
  void step_begin(const event_source& at, std::string_view s) override {
    add(at.task, at.node, event::type::step_begin, s);
  }
  void step_end(const event_source& at, std::string_view s, std::uint64_t it, const status& st) override {
    add(at.task, at.node, event::type::step_end, s, it, static_cast<bool>(st));
  }
  void net_begin(const event_source& at, std::string_view s) override {
    add(at.task, at.node, event::type::net_begin, s);
  }
  void net_end(const event_source& at, std::string_view s, const status& st) override {
    add(at.task, at.node, event::type::net_end, s, 0, static_cast<bool>(st));
  }
  void report_begin(const event_source& at, std::string_view s) override {
    add(at.task, at.node, event::type::report_begin, s);
  }
  void report_end(const event_source& at, std::string_view s, const status& st) override {
    add(at.task, at.node, event::type::report_end, s, 0, static_cast<bool>(st));
  }
  std::vector<event> take() {
    std::lock_guard lock(m_);
    return std::exchange(events_, {});
  }

 private:
  void add(std::string_view t, std::string_view n, event::type ty, std::string_view name, std::uint64_t it = 0,
           bool ok = true) {
    std::lock_guard lock(m_);
    events_.push_back(event{std::string(t), std::string(n), ty, std::string(name), it, ok});
  }
  std::mutex m_;
  std::vector<event> events_;
};

struct config {
  bool coroutine_only;
  std::size_t threads;
  bool observe;
  [[nodiscard]] std::string str() const {
    return std::string(coroutine_only ? "coroutine driver" : "automatic driver") + ", " + std::to_string(threads) +
           " thread(s), " + (observe ? "observer" : "no observer");
  }
};

struct failure {
  std::string kind;
  std::string detail;
};

model::value value_of(const blob* b) {
  if (b == nullptr || !b->has_value()) return {};
  if (const auto* i = b->try_get<std::int64_t>()) return {model::value::type::i64, *i, false};
  if (const auto* v = b->try_get<bool>()) return {model::value::type::boolean, 0, *v};
  return {model::value::type::other, 0, false};
}

using event_list = std::vector<const event*>;

std::string first_difference(const event_list& want, const event_list& got) {
  std::size_t i = 0;
  while (i < want.size() && i < got.size() && *want[i] == *got[i]) ++i;
  std::ostringstream o;
  o << "at event #" << i << ": model " << (i < want.size() ? want[i]->str() : "(end)") << ", library "
    << (i < got.size() ? got[i]->str() : "(end)") << " (" << want.size() << " vs " << got.size() << " events)";
  return o.str();
}

bool same_events(const event_list& a, const event_list& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const event* x, const event* y) { return *x == *y; });
}

// Per task (and per node for its own work), in order, or as multisets where
// the model ran concurrent parts. Pointers, so sorting moves no strings.
std::optional<std::string> compare_events(const model::run_outcome& m, const std::vector<event>& got) {
  std::map<std::string, event_list> want_by, got_by;
  for (const auto& e : m.events) want_by[e.node + "|" + e.task].push_back(&e);
  for (const auto& e : got) got_by[e.node + "|" + e.task].push_back(&e);
  auto less = [](const event* x, const event* y) { return *x < *y; };
  for (auto& [key, want] : want_by) {
    auto& have = got_by[key];
    const bool unordered = m.unordered.count(key) != 0;
    if (unordered) {
      std::sort(want.begin(), want.end(), less);
      std::sort(have.begin(), have.end(), less);
    }
    if (!same_events(want, have)) {
      return "events of " + key + (unordered ? " (as a multiset)" : " (in order)") + " " + first_difference(want, have);
    }
  }
  for (const auto& [key, have] : got_by) {
    if (!want_by.count(key) && !have.empty()) return "unexpected events for " + key + ": " + have.front()->str();
  }
  return std::nullopt;
}

void set_initial(const model::group_spec& spec, local_session* s, model::session* m) {
  for (std::size_t i = 0; i < spec.nodes.size(); ++i) {
    const std::string name = model::node_name(static_cast<int>(i));
    for (const auto& b : model::initial_blobs(spec.nodes[i])) {
      model::value v = b.is_bool ? model::value{model::value::type::boolean, 0, b.b}
                                 : model::value{model::value::type::i64, b.i, false};
      if (m != nullptr) m->set(name, b.name, v);
      if (s != nullptr) {
        auto ws = s->node_workspace(name);
        if (b.is_bool) {
          ws->set(b.name, b.b);
        } else {
          ws->set(b.name, b.i);
        }
      }
    }
  }
}

using node_blobs = std::vector<std::map<std::string, model::value>>;  // by node index

std::optional<failure> compare_run(const model::run_outcome& m, const result<run_report>& r, local_session& s,
                                   const node_blobs& model_blobs, const std::vector<std::string>& nodes) {
  if (m.ok != static_cast<bool>(r)) {
    return failure{"status", "model " + (m.ok ? std::string("succeeded") : "failed: " + m.error) + ", library " +
                                 (r ? std::string("succeeded") : "failed: " + r.error().message)};
  }
  if (!m.ok) return std::nullopt;
  for (std::size_t k = 0; k < m.tasks.size(); ++k) {
    const auto& want = m.tasks[k];
    const auto& got = r.value().tasks.at(k);
    if (want.ok != (got.status == task_status::succeeded) || want.iterations != got.iterations) {
      return failure{"task", "task " + want.name + ": model iterations " + std::to_string(want.iterations) +
                                 ", library " + std::to_string(got.iterations) + " (" +
                                 std::string(to_string(got.status)) + ")"};
    }
    std::vector<std::pair<std::string, model::value>> outs;
    for (const auto& [name, v] : got.outputs) outs.emplace_back(name, value_of(v.get()));
    if (outs != want.outputs) {
      std::string d = "task " + want.name + " outputs:";
      for (std::size_t i = 0; i < want.outputs.size(); ++i) {
        d += " " + want.outputs[i].first + " model " + want.outputs[i].second.str() + " library " +
             (i < outs.size() ? outs[i].second.str() : "(missing)");
      }
      return failure{"output", d};
    }
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const std::string& node = nodes[i];
    auto ws = s.node_workspace(node);
    std::map<std::string, model::value> got;
    for (const auto& name : ws->local_blobs()) got[name] = value_of(ws->find(name));
    const auto& want = model_blobs[i];
    if (got != want) {
      std::string d = "node " + node + " blobs:";
      for (const auto& [name, v] : want) {
        auto it = got.find(name);
        if (it == got.end() || !(it->second == v)) {
          d += " " + name + " model " + v.str() + " library " + (it == got.end() ? "(absent)" : it->second.str());
        }
      }
      for (const auto& [name, v] : got) {
        if (!want.count(name)) d += " " + name + " model (absent) library " + v.str();
      }
      return failure{"blobs", d};
    }
  }
  return std::nullopt;
}

std::optional<failure> check_driver(const config& cfg, const std::vector<model::driver>& expected) {
  auto& h = detail::test_driver_hooks();
  const std::uint64_t ff = h.frame_free_tasks.exchange(0), co = h.coroutine_tasks.exchange(0);
  std::uint64_t want_ff = 0, want_co = 0;
  for (auto d : expected) {
    want_ff += d == model::driver::frame_free;
    want_co += d == model::driver::coroutine;
  }
  const std::string counts = "frame-free " + std::to_string(ff) + ", coroutine " + std::to_string(co);
  if (ff + co != expected.size())
    return failure{"driver", counts + " for " + std::to_string(expected.size()) + " tasks"};
  if (cfg.coroutine_only && ff != 0) return failure{"driver", counts + " with the coroutine driver forced"};
  if (!cfg.coroutine_only && (ff < want_ff || co < want_co)) {
    return failure{"driver", counts + "; expected frame-free " + std::to_string(want_ff) + ", coroutine " +
                                 std::to_string(want_co) + " (frame-free shaped tasks run on the frame-free driver)"};
  }
  return std::nullopt;
}

// What the model says for each run of a spec, computed once per seed.
struct expectation {
  std::vector<std::string> nodes;
  std::vector<model::run_outcome> runs;
  std::vector<node_blobs> blobs;       // after each run
  std::vector<model::driver> drivers;  // per task
};

expectation expect(const model::group_spec& spec) {
  expectation x;
  for (std::size_t i = 0; i < spec.nodes.size(); ++i) x.nodes.push_back(model::node_name(static_cast<int>(i)));
  model::session m;
  set_initial(spec, nullptr, &m);
  const task_group g = model::build(spec);
  for (int run = 0; run < spec.runs; ++run) {
    x.runs.push_back(m.run(g));
    x.blobs.emplace_back();
    for (const auto& n : x.nodes) x.blobs.back().push_back(m.blobs(n));
    if (!x.runs.back().ok) break;
  }
  for (const auto& t : g.tasks()) x.drivers.push_back(model::expected_driver(model::session::compose(t)));
  return x;
}

// The model against the helpers' documentation: counters after each run.
std::optional<failure> check_intent(const model::group_spec& spec, const expectation& x) {
  const auto want = model::intent(spec);
  for (std::size_t run = 0; run < x.runs.size(); ++run) {
    if (!x.runs[run].ok) return failure{"intent", "the model failed: " + x.runs[run].error};
    for (std::size_t i = 0; i < x.nodes.size(); ++i) {
      const auto& blobs = x.blobs[run][i];
      for (int c = 0; c < model::counters; ++c) {
        const std::string name = "c" + std::to_string(c);
        auto it = blobs.find(name);
        const std::int64_t w = want[run][i][static_cast<std::size_t>(c)];
        if (it == blobs.end() || it->second.t != model::value::type::i64 || it->second.i != w) {
          return failure{"intent", "run " + std::to_string(run + 1) + " node " + x.nodes[i] + " " + name +
                                       ": documented " + std::to_string(w) + ", steps give " +
                                       (it == blobs.end() ? "(absent)" : it->second.str())};
        }
      }
    }
  }
  return std::nullopt;
}

// One configuration: a fresh session (fresh node workspaces) on a pool of
// cfg.threads threads, the group run spec.runs times. The pools live for the
// whole test: making threads for every session would dominate its time.
// A wrong driver choice goes to `driver` and the comparisons go on, so that
// a driver bug does not hide the others.
std::optional<failure> check_config(const model::group_spec& spec, const expectation& x, const config& cfg,
                                    std::optional<failure>& driver) {
  static boost::asio::thread_pool one(1), two(2);
  auto& hooks = detail::test_driver_hooks();
  local_session s(cfg.threads == 1 ? one.get_executor() : two.get_executor());
  set_initial(spec, &s, nullptr);
  const task_group g = model::build(spec);
  recorder rec;
  run_options opts;
  if (cfg.observe) opts.observer = &rec;
  hooks.coroutine_only = cfg.coroutine_only;
  hooks.frame_free_tasks = 0;
  hooks.coroutine_tasks = 0;
  for (std::size_t run = 0; run < x.runs.size(); ++run) {
    auto r = test::run_sync(s, g, opts);
    const auto& mo = x.runs[run];
    auto f = compare_run(mo, r, s, x.blobs[run], x.nodes);
    if (!f && cfg.observe && mo.ok) {
      if (auto d = compare_events(mo, rec.take())) f = failure{"events", *d};
    }
    auto where = [&](failure& w) { w.detail = cfg.str() + ", run " + std::to_string(run + 1) + ": " + w.detail; };
    if (mo.ok && !driver) {
      if ((driver = check_driver(cfg, x.drivers))) {
        // Apart with and without an observer: observing a run must not
        // change which driver runs it.
        driver->kind += cfg.observe ? " (observer)" : " (no observer)";
        where(*driver);
      }
    }
    detail::test_driver_hooks().frame_free_tasks = 0;
    detail::test_driver_hooks().coroutine_tasks = 0;
    rec.take();
    if (f) {
      where(*f);
      return f;
    }
  }
  return std::nullopt;
}

// The first difference between library and model; else the model against
// the helpers' documentation; else a wrong driver choice.
std::optional<failure> check(const model::group_spec& spec) {
  const expectation x = expect(spec);
  static const config configs[] = {{false, 1, false}, {false, 1, true}, {false, 2, false}, {false, 2, true},
                                   {true, 1, false},  {true, 1, true},  {true, 2, false},  {true, 2, true}};
  auto& hooks = detail::test_driver_hooks();
  hooks.counting = true;
  std::optional<failure> f, driver;
  for (const auto& cfg : configs) {
    if ((f = check_config(spec, x, cfg, driver))) break;
  }
  hooks.coroutine_only = false;
  if (!f) f = check_intent(spec, x);
  return f ? f : driver;
}

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

// Greedy shrinking: the first smaller variant that fails the same way
// replaces the spec, until none does.
std::pair<model::group_spec, failure> shrink(model::group_spec spec, failure f) {
  for (int rounds = 0; rounds < 200; ++rounds) {
    bool smaller = false;
    for (auto& c : model::shrink_candidates(spec)) {
      auto g = check(c);
      if (g && g->kind == f.kind) {
        spec = std::move(c);
        f = *g;
        smaller = true;
        break;
      }
    }
    if (!smaller) break;
  }
  return {spec, f};
}

std::string reproduction(const model::group_spec& spec, const failure& f) {
  std::ostringstream o;
  o << "seed " << spec.seed << " (" << f.kind << "), shrunk:\n" << model::dump(spec);
  o << "first difference: " << f.detail << "\n";
  auto plan = write_plan(model::build(spec));
  o << (plan ? "plan:\n" + plan.value() + "\n" : "(plan not serializable: " + plan.error().message + ")\n");
  return o.str();
}

}  // namespace

TEST_CASE("generated step trees run as the reference model says", "[model]") {
  const std::uint64_t trees = env_or("TASKGROUP_MODEL_TREES", 10000);
  const std::uint64_t first = env_or("TASKGROUP_MODEL_SEED", 1);
  const bool verbose = env_or("TASKGROUP_MODEL_VERBOSE", 0) != 0;
  std::map<std::string, std::vector<std::uint64_t>> failing;  // kind -> seeds
  std::map<std::string, failure> first_failure;
  for (std::uint64_t seed = first; seed < first + trees; ++seed) {
    const auto spec = model::generate(seed);
    if (auto f = check(spec)) {
      if (verbose) std::cerr << "seed " << seed << " (" << f->kind << "): " << f->detail << "\n";
      failing[f->kind].push_back(seed);
      first_failure.emplace(f->kind, *f);
    }
  }
  std::ostringstream report;
  std::size_t total = 0;
  for (const auto& [kind, seeds] : failing) {
    total += seeds.size();
    report << kind << ": " << seeds.size() << " of " << trees << " seeds fail; first seeds:";
    for (std::size_t i = 0; i < seeds.size() && i < 12; ++i) report << ' ' << seeds[i];
    report << "\n";
    auto [small, f] = shrink(model::generate(seeds.front()), first_failure.at(kind));
    report << reproduction(small, f) << "\n";
  }
  INFO(report.str());
  CHECK(total == 0);
}
