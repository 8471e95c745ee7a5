// One observer (run_observer), asked once what it wants: a run emits only
// the kinds of events its observer asked for, and a run observed for task
// events only keeps the fast paths of an unobserved one (the test hooks
// count which synchronous loop ran).
#include <taskgroup/retry_policy.hpp>
#include <taskgroup/run_observer.hpp>
#include <taskgroup/session.hpp>
#include <taskgroup/step_runner.hpp>

#include "detail/test_hooks.hpp"
#include "support/steps.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

using namespace taskgroup;
using namespace taskgroup::test;

namespace {

// Counts every event by kind; asks for `kinds`.
class counting_observer final : public run_observer {
 public:
  explicit counting_observer(observe kinds) : kinds_(kinds) {}
  [[nodiscard]] observe interests() const noexcept override {
    ++asked;
    return kinds_;
  }
  void run_begin(const event_source&, const std::vector<std::pair<std::string, std::string>>&) override { ++runs; }
  void task_begin(const event_source& at) override {
    ++tasks;
    std::lock_guard lock(m_);
    sources.emplace_back(std::string(at.task) + "@" + std::string(at.node));
  }
  void task_end(const event_source&, const task_report&) override { ++tasks; }
  void step_begin(const event_source&, std::string_view) override { ++steps; }
  void step_end(const event_source&, std::string_view, std::uint64_t, const status&) override { ++steps; }
  void net_begin(const event_source& at, std::string_view) override {
    ++nets;
    std::lock_guard lock(m_);
    if (net_sources.size() < 4) net_sources.emplace_back(std::string(at.task) + "@" + std::string(at.node));
  }
  void net_end(const event_source&, std::string_view, const status&) override { ++nets; }
  void report_begin(const event_source&, std::string_view) override { ++reports; }
  void report_end(const event_source&, std::string_view, const status&) override { ++reports; }

  mutable std::atomic<int> asked{0};
  std::atomic<int> runs{0}, tasks{0}, steps{0}, nets{0}, reports{0};
  std::vector<std::string> sources, net_sources;

 private:
  observe kinds_;
  std::mutex m_;
};

// Counts the synchronous loops entered while alive.
struct loop_counts {
  loop_counts() {
    auto& h = detail::test_driver_hooks();
    h.one_op_loops = 0;
    h.net_loops = 0;
    h.observed_loops = 0;
    h.counting = true;
  }
  ~loop_counts() { detail::test_driver_hooks().counting = false; }
  static std::uint64_t one_op() { return detail::test_driver_hooks().one_op_loops.load(); }
  static std::uint64_t nets() { return detail::test_driver_hooks().net_loops.load(); }
  static std::uint64_t observed() { return detail::test_driver_hooks().observed_loops.load(); }
};

constexpr i64 iterations = 10'000;

// A loop-heavy group: one task on node "n", a counted loop over a one-op
// net (x += 1), with a report step beside it every hour (one final run).
task_group loop_group(bool with_report) {
  net init("init");
  init.op("ConstantFill", {}, {"x"}, {{"value", i64{0}}}).op("ConstantFill", {}, {"one"}, {{"value", i64{1}}});
  net add("add");
  add.op("Add", {"x", "one"}, {"x"});
  task t("t", step("root")
                  .add_substep(step("init").add_net(init))
                  .add_substep(step("loop").add_net(add).iterations(iterations)));
  if (with_report) {
    net rep("rep");
    rep.op("ConstantFill", {}, {"seen"}, {{"value", i64{1}}});
    t.report(step("r").add_net(rep), std::chrono::hours(1));
  }
  task_group g;
  REQUIRE(g.add(t, node("n")));
  return g;
}

}  // namespace

TEST_CASE("a run observed for task events only runs the one-op fast loop", "[observer]") {
  for (const bool with_report : {false, true}) {
    CAPTURE(with_report);
    local_session session(1);
    const task_group g = loop_group(with_report);
    counting_observer seen(observe::tasks);
    run_options o;
    o.observer = &seen;
    loop_counts loops;
    auto r = test::run_sync(session, g, o);
    REQUIRE(r);
    CHECK(r.value().tasks[0].iterations == 1);
    CHECK(seen.asked == 1);  // once, when the run starts
    CHECK(seen.runs == 1);
    CHECK(seen.tasks == 2);
    CHECK(seen.steps == 0);
    CHECK(seen.nets == 0);
    CHECK(seen.reports == 0);
    REQUIRE(seen.sources.size() == 1);
    CHECK(seen.sources[0] == "n/t@n");
    // The loop of 10,000 iterations enters the fast loop of one-op nets at
    // its start and again after each yield (how many depends on the time
    // it takes: run_step_options::yield_slice); never the observed one.
    CHECK(loops.one_op() >= 1);
    CHECK(loops.observed() == 0);
  }
}

TEST_CASE("a run observed for net events tells every net run, from the observed loop", "[observer]") {
  local_session session(1);
  const task_group g = loop_group(false);
  counting_observer seen(observe::nets);
  run_options o;
  o.observer = &seen;
  loop_counts loops;
  REQUIRE(test::run_sync(session, g, o));
  CHECK(seen.nets == 2 * (iterations + 1));  // the loop's net runs and init's, begin and end
  CHECK(seen.tasks == 0);
  CHECK(seen.runs == 0);
  CHECK(seen.steps == 0);
  CHECK(loops.one_op() == 0);
  CHECK(loops.observed() >= 1);  // at its start and after each yield
  REQUIRE_FALSE(seen.net_sources.empty());
  CHECK(seen.net_sources[0] == "n/t@n");
}

TEST_CASE("each kind of event reaches only an observer that asked for it", "[observer]") {
  const task_group g = loop_group(true);
  struct expected {
    observe kinds;
    bool tasks, steps, nets, reports;
  };
  for (const expected e :
       {expected{observe::none, false, false, false, false}, expected{observe::steps, false, true, false, false},
        expected{observe::reports, false, false, false, true},
        expected{observe::steps | observe::reports, false, true, false, true},
        expected{observe::all, true, true, true, true}}) {
    CAPTURE(static_cast<int>(e.kinds));
    for (const bool coroutine_only : {false, true}) {
      CAPTURE(coroutine_only);
      detail::test_driver_hooks().coroutine_only = coroutine_only;
      local_session session(1);
      counting_observer seen(e.kinds);
      run_options o;
      o.observer = &seen;
      auto r = test::run_sync(session, g, o);
      detail::test_driver_hooks().coroutine_only = false;
      REQUIRE(r);
      CHECK((seen.tasks > 0) == e.tasks);
      CHECK((seen.runs > 0) == e.tasks);
      CHECK((seen.steps > 0) == e.steps);
      CHECK((seen.nets > 0) == e.nets);
      CHECK((seen.reports > 0) == e.reports);
      CHECK(seen.asked == 1);
    }
  }
}

TEST_CASE("run_step tells its observer what it asked for, from an empty source", "[observer]") {
  net add("add");
  add.op("Add", {"x", "one"}, {"x"});
  const execution_step s = step("loop").add_net(add).iterations(100);
  for (const observe kinds : {observe::tasks, observe::steps, observe::nets}) {
    CAPTURE(static_cast<int>(kinds));
    auto ws = workspace::make("w");
    ws->set<i64>("x", 0);
    ws->set<i64>("one", 1);
    counting_observer seen(kinds);
    run_step_options o;
    o.observer = &seen;
    loop_counts loops;
    REQUIRE(run_tree(s, ws, o));
    CHECK(ws->read<i64>("x").value() == 100);
    CHECK(seen.asked == 1);
    CHECK(seen.tasks == 0);  // no task here, whatever is asked
    CHECK(seen.steps == (kinds == observe::steps ? 2 : 0));
    CHECK(seen.nets == (kinds == observe::nets ? 200 : 0));
    CHECK((loops.one_op() > 0) == (kinds != observe::nets));
  }
}

namespace {

// Every trace id an event carried, by kind of event.
class trace_ids_observer final : public run_observer {
 public:
  void run_begin(const event_source& at, const std::vector<std::pair<std::string, std::string>>&) override {
    add("run_begin", at);
  }
  void task_begin(const event_source& at) override { add("task_begin", at); }
  void task_end(const event_source& at, const task_report&) override { add("task_end", at); }
  void step_begin(const event_source& at, std::string_view) override { add("step_begin", at); }
  void step_end(const event_source& at, std::string_view, std::uint64_t, const status&) override {
    add("step_end", at);
  }
  void net_begin(const event_source& at, std::string_view) override { add("net_begin", at); }
  void net_end(const event_source& at, std::string_view, const status&) override { add("net_end", at); }
  void report_begin(const event_source& at, std::string_view) override { add("report_begin", at); }
  void report_end(const event_source& at, std::string_view, const status&) override { add("report_end", at); }
  void retry_wait(const event_source& at, std::string_view, int, int, std::chrono::microseconds,
                  const error&) override {
    add("retry_wait", at);
  }

  std::mutex m;
  std::map<std::string, std::set<std::string>> ids;  // kind -> trace ids seen

 private:
  void add(const char* kind, const event_source& at) {
    const std::lock_guard hold(m);
    ids[kind].insert(std::string(at.trace_id));
  }
};

}  // namespace

TEST_CASE("every event of a run carries the run's trace id, on both drivers", "[observer][trace]") {
  // Two nodes: a loop with a report step on "n", a task on "m" that fails
  // once and is retried.
  task_group g = loop_group(true);
  net flaky("flaky");
  flaky.op("FailTimes", {}, {}, {{"times", i64{1}}});
  retry_policy p;
  p.max_attempts = 2;
  p.initial_backoff = std::chrono::milliseconds(1);
  REQUIRE(g.add(task("f", step("s").add_net(flaky)).retry(p), node("m")));
  for (const bool given : {false, true}) {
    for (const bool coroutine_only : {false, true}) {
      CAPTURE(given, coroutine_only);
      detail::test_driver_hooks().coroutine_only = coroutine_only;
      local_session session(2);
      trace_ids_observer seen;
      run_options o;
      o.observer = &seen;
      if (given) o.trace_parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
      boost::system::error_code ec;
      const run_report r = session.run(g, o, ec);
      detail::test_driver_hooks().coroutine_only = false;
      REQUIRE_FALSE(ec);
      REQUIRE(r.trace_id.size() == 32);
      if (given) CHECK(r.trace_id == "0af7651916cd43dd8448eb211c80319c");
      for (const char* kind : {"run_begin", "task_begin", "task_end", "step_begin", "step_end", "net_begin", "net_end",
                               "report_begin", "report_end", "retry_wait"}) {
        CAPTURE(kind);
        CHECK(seen.ids[kind] == std::set<std::string>{r.trace_id});
      }
    }
  }
  // A step tree run alone has no run: its events carry no trace id.
  trace_ids_observer alone;
  run_step_options o;
  o.observer = &alone;
  auto ws = workspace::make("w");
  const status st = run_tree(step("s").add_net(flaky), ws, o);
  REQUIRE_FALSE(st);
  CHECK(st.error().code == errc::op_failed);
  CHECK(alone.ids["step_begin"] == std::set<std::string>{""});
  CHECK(alone.ids["net_end"] == std::set<std::string>{""});
}
