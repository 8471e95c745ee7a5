// Property test: generated task groups run through local_session as the
// reference model (model.hpp) and the helpers' documentation (intent) say.
//
// Each seed makes a group (generate.hpp): nested loops (counted, stop blob
// with and without only_once), every control helper, while_/until nested in
// loops, concurrent substeps, instances, create_workspace, task and group
// report steps, task/instance/local setup, PRIVATE or GLOBAL, 1-3 nodes and
// tasks, Sleeps that end on their own (at once, or on the timer: the
// frame-free driver starts them through their callback form, the
// coroutine driver awaits them). About a third of the seeds also have one
// trigger: an op that fails (at once, or on its n-th run) or that cancels
// the run through the cancellation slot of its completion token (the
// test's CancelRun), in a task's tree, setup or report step or in a node's
// local init, exit or group report step, with tasks and concurrent
// siblings that wait (an hour's Sleep) until the run's end cancels them;
// each such seed is deterministic by construction (generate.hpp). It runs
// 2 or 3 times on one session (up to the first run that fails), under 8
// configurations: the automatic driver and the coroutine driver only (test
// hooks) x 1 and 2 threads x with and without an observer. After each run
// it compares:
//   - the run's status, and when it failed its error code and message (the
//     node, task, step path, net and op; for a cancellation, where each
//     task that had begun waited);
//   - each task's status (succeeded, failed, cancelled, not run), error,
//     iterations and declared outputs; which tasks began is the library's
//     choice once the run fails (the order of tasks is unspecified): the
//     model checks that only a task it allows was not begun, and follows it;
//   - every node workspace's local blobs (names, types, values): what was
//     written before a failure or a cancellation, and nothing after;
//   - with an observer, the events of each task and of each node's own work
//     (how each execution, net and task ended: well, failed or cancelled),
//     in order; where the model ran something concurrently (concurrent
//     substeps, instances, two report steps side by side) as multisets;
//   - which driver ran (runs that succeeded): coroutine only: every task on
//     the coroutine driver; automatic: the two counts add up to the tasks,
//     and tasks whose tree is small and plain (model::expected_driver) run
//     frame-free, with or without an observer;
//   - the model's counters against `intent` (what each helper is documented
//     to do) over the runs that succeeded, which catches helpers whose
//     assembled steps misbehave even when the step semantics are followed
//     (e.g. while_ entered a second time).
// Not covered: timing (report steps run every hour, so exactly once at the
// end; periodic report counts and step timeouts are not generated; a Sleep
// that ends on its own never meets a cancellation), a cancellation or a
// failure that reaches a task between two of its waits or in a concurrent
// step's barrier (only where it waits for it: the generator keeps the
// other tasks free of such points), two failures in one run (which one is
// the run's error), queues and other waits that other tasks end,
// run_policy::gather, deadlines, setup objects shared between tasks, the
// order of events across tasks and nodes (only within each), the MPI
// session.
//
// TASKGROUP_MODEL_TREES=N (default 10000) and TASKGROUP_MODEL_SEED=S (first
// seed, default 1) choose the seeds; TASKGROUP_MODEL_VERBOSE=1 prints every
// failing seed's first difference as it is found. Failing seeds are counted
// by kind; the first of each kind is shrunk greedily (while it fails the same
// way) and printed: the spec dump, the first difference and the plan JSON.
#include "detail/test_hooks.hpp"
#include "model/compare.hpp"
#include "model/generate.hpp"
#include "model/model.hpp"

#include <taskgroup/plan.hpp>
#include <taskgroup/session.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

using namespace taskgroup;
using taskgroup::model::ending;
using taskgroup::model::ending_of;
using taskgroup::model::event;
using taskgroup::model::failure;

namespace {

class recorder final : public run_observer {
 public:
  void task_begin(const event_source& at) override { add(at.task, at.node, event::type::task_begin, at.task); }
  void task_end(const event_source& /*at*/, const task_report& r) override {
    const ending end = r.status == task_status::succeeded ? ending::ok
                       : r.status == task_status::failed  ? ending::failed
                                                          : ending::cancelled;
    add(r.name, r.node, event::type::task_end, r.name, r.iterations, end);
  }
  void step_begin(const event_source& at, std::string_view s) override {
    add(at.task, at.node, event::type::step_begin, s);
  }
  void step_end(const event_source& at, std::string_view s, std::uint64_t it, const status& st) override {
    add(at.task, at.node, event::type::step_end, s, it, ending_of(st));
  }
  void net_begin(const event_source& at, std::string_view s) override {
    add(at.task, at.node, event::type::net_begin, s);
  }
  void net_end(const event_source& at, std::string_view s, const status& st) override {
    add(at.task, at.node, event::type::net_end, s, 0, ending_of(st));
  }
  void report_begin(const event_source& at, std::string_view s) override {
    add(at.task, at.node, event::type::report_begin, s);
  }
  void report_end(const event_source& at, std::string_view s, const status& st) override {
    add(at.task, at.node, event::type::report_end, s, 0, ending_of(st));
  }
  std::vector<event> take() {
    std::lock_guard lock(m_);
    return std::exchange(events_, {});
  }

 private:
  void add(std::string_view t, std::string_view n, event::type ty, std::string_view name, std::uint64_t it = 0,
           ending end = ending::ok) {
    std::lock_guard lock(m_);
    events_.push_back(event{std::string(t), std::string(n), ty, std::string(name), it, end});
  }
  std::mutex m_;
  std::vector<event> events_;
};

// The cancellation signal bound to the completion token of the run in
// flight (the test runs one at a time): what CancelRun emits.
std::atomic<boost::asio::cancellation_signal*> run_signal{nullptr};

// CancelRun: cancels the run, then waits until that cancellation reaches
// it, so the task is cancelled at this op whatever the threads do (the
// run's cancellation comes back through the session's coordinator).
class cancel_run_kernel final : public op_kernel {
 public:
  cancel_run_kernel() noexcept : op_kernel(callback_form) {}
  void start(const boost::asio::any_io_executor& ex, op_completion done) noexcept override {
    boost::asio::cancellation_slot slot = done.slot();
    auto held = std::make_shared<op_completion>(std::move(done));
    slot.assign([held, ex](boost::asio::cancellation_type_t) {
      boost::asio::post(ex, [held] {
        if (auto s = held->slot(); s.is_connected()) s.clear();
        (*held)(fail(errc::cancelled, model::cancel_run_text));
      });
    });
    run_signal.load()->emit(boost::asio::cancellation_type::terminal);
  }
};

const operator_registry& test_registry() {
  static const operator_registry r = [] {
    operator_registry reg(operator_registry::global());
    auto made = reg.add(operator_schema("CancelRun")
                            .inputs(0)
                            .outputs(0)
                            .factory(
                                [](op_context&) -> result<std::unique_ptr<op_kernel>> {
                                  return std::unique_ptr<op_kernel>(std::make_unique<cancel_run_kernel>());
                                },
                                /*async=*/true));
    if (!made) std::abort();
    return reg;
  }();
  return r;
}

// One run, its report kept whatever its end, its token's cancellation
// slot bound to `run_signal`.
run_report run_once(local_session& s, const task_group& g, const run_options& o) {
  boost::asio::cancellation_signal sig;
  run_signal = &sig;
  std::promise<run_report> done;
  s.async_run(g, o, boost::asio::bind_cancellation_slot(sig.slot(), [&done](boost::system::error_code, run_report r) {
                done.set_value(std::move(r));
              }));
  run_report r = done.get_future().get();
  run_signal = nullptr;
  return r;
}

struct config {
  bool coroutine_only;
  std::size_t threads;
  bool observe;
  [[nodiscard]] std::string str() const {
    return std::string(coroutine_only ? "coroutine driver" : "automatic driver") + ", " + std::to_string(threads) +
           " thread(s), " + (observe ? "observer" : "no observer");
  }
};

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

using model::node_blobs;

// What the model says for each run of a spec, computed once per seed with
// every task begun; a run in which the library began fewer tasks (it may,
// once the run fails) is computed again with those (`with_began`).
struct expectation {
  const model::group_spec* spec = nullptr;
  std::vector<std::string> nodes;
  std::vector<model::run_outcome> runs;
  std::vector<node_blobs> blobs;                                                  // after each run
  std::vector<model::driver> drivers;                                             // per task
  std::map<std::vector<bool>, std::pair<model::run_outcome, node_blobs>> others;  // the last run's

  // The model's last run (runs before it all succeed) with `began`.
  const std::pair<model::run_outcome, node_blobs>& with_began(const std::vector<bool>& began) {
    auto it = others.find(began);
    if (it != others.end()) return it->second;
    model::session m;
    set_initial(*spec, nullptr, &m);
    const task_group g = model::build(*spec);
    for (std::size_t run = 0; run + 1 < runs.size(); ++run) (void)m.run(g);
    std::pair<model::run_outcome, node_blobs> out{m.run(g, &began), {}};
    for (const auto& n : nodes) out.second.push_back(m.blobs(n));
    return others.emplace(began, std::move(out)).first->second;
  }
};

expectation expect(const model::group_spec& spec) {
  expectation x;
  x.spec = &spec;
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

// The model against the helpers' documentation: counters after each run
// that succeeded (the helpers say nothing of a failure's effects).
std::optional<failure> check_intent(const model::group_spec& spec, const expectation& x) {
  const auto want = model::intent(spec);
  for (std::size_t run = 0; run < x.runs.size() && x.runs[run].ok; ++run) {
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

// What the model says of run `run`, given the tasks the library began:
// all of them, or fewer where the model allows it (a failure otherwise).
std::optional<failure> expected_run(expectation& x, std::size_t run, const run_report& r, const model::run_outcome*& mo,
                                    const node_blobs*& mb) {
  mo = &x.runs[run];
  mb = &x.blobs[run];
  std::vector<bool> began;
  bool fewer = false;
  for (std::size_t k = 0; k < r.tasks.size(); ++k) {
    began.push_back(r.tasks[k].began);
    const model::task_outcome& t = x.runs[run].tasks.at(k);
    if (r.tasks[k].began || t.status == task_status::not_run) continue;
    if (!t.may_skip) return failure{"began", "task " + t.name + " did not begin; the model says it must"};
    fewer = true;
  }
  if (fewer && run + 1 == x.runs.size()) {
    const auto& other = x.with_began(began);
    mo = &other.first;
    mb = &other.second;
  }
  return std::nullopt;
}

// One configuration: a fresh session (fresh node workspaces) on a pool of
// cfg.threads threads, the group run spec.runs times (up to the first run
// that fails). The pools live for the whole test: making threads for every
// session would dominate its time. A wrong driver choice goes to `driver`
// and the comparisons go on, so that a driver bug does not hide the others.
std::optional<failure> check_config(const model::group_spec& spec, expectation& x, const config& cfg,
                                    std::optional<failure>& driver) {
  static boost::asio::thread_pool one(1), two(2);
  auto& hooks = detail::test_driver_hooks();
  local_session s(cfg.threads == 1 ? one.get_executor() : two.get_executor());
  s.set_registry(test_registry());
  set_initial(spec, &s, nullptr);
  const task_group g = model::build(spec);
  recorder rec;
  run_options opts;
  if (cfg.observe) opts.observer = &rec;
  // A run that waits for a cancellation it never gets ends all the same.
  if (model::has_extra(spec, model::extra::block) || model::has_extra(spec, model::extra::cancel)) {
    opts.timeout = std::chrono::seconds(60);
  }
  hooks.coroutine_only = cfg.coroutine_only;
  hooks.frame_free_tasks = 0;
  hooks.coroutine_tasks = 0;
  for (std::size_t run = 0; run < x.runs.size(); ++run) {
    const run_report r = run_once(s, g, opts);
    const model::run_outcome* mo = nullptr;
    const node_blobs* mb = nullptr;
    auto f = expected_run(x, run, r, mo, mb);
    if (!f) f = model::compare_run(*mo, r, s, *mb, x.nodes);
    if (!f && cfg.observe) {
      if (auto d = model::compare_events(*mo, rec.take())) f = failure{"events", *d};
    }
    auto where = [&](failure& w) { w.detail = cfg.str() + ", run " + std::to_string(run + 1) + ": " + w.detail; };
    if (mo->ok && !driver) {
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
  expectation x = expect(spec);
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
