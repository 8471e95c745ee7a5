// One run, several observers (fan_out_observer): generated sets of
// observers, each asking for a generated mask and some behind a fan-out
// nested in another, observe a run whose group raises every kind of event
// (tasks, steps, nets, report steps, a task's and a step's retry waits,
// offloaded ops). Each observer must receive exactly the events a full
// observer in the same fan-out received that are of its kinds, and the
// run must be asked for the union of the masks. Observers that all ask for
// task events keep the one-op loop.
#include <taskgroup/fan_out_observer.hpp>
#include <taskgroup/retry_policy.hpp>
#include <taskgroup/run_observer.hpp>
#include <taskgroup/session.hpp>
#include <taskgroup/task_group.hpp>

#include "detail/test_hooks.hpp"
#include "support/checks.hpp"
#include "support/run.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using namespace taskgroup;
namespace asio = boost::asio;
using i64 = std::int64_t;

namespace {

// Records every event it receives as "<kind> <task>@<node> <detail>", with
// the kind of the mask it belongs to; asks for `kinds`.
class recorder final : public run_observer {
 public:
  struct event {
    observe kind;
    std::string text;
    bool operator<(const event& o) const { return text < o.text; }
    bool operator==(const event& o) const { return kind == o.kind && text == o.text; }
  };
  explicit recorder(observe kinds) : kinds_(kinds) {}
  [[nodiscard]] observe interests() const noexcept override { return kinds_; }
  void run_begin(const event_source& at, const std::vector<std::pair<std::string, std::string>>& tasks) override {
    add(observe::tasks, "run_begin", at, std::to_string(tasks.size()));
  }
  void task_begin(const event_source& at) override { add(observe::tasks, "task_begin", at, ""); }
  void task_end(const event_source& at, const task_report& r) override {
    add(observe::tasks, "task_end", at, std::string(to_string(r.status)));
  }
  void step_begin(const event_source& at, std::string_view step) override {
    add(observe::steps, "step_begin", at, step);
  }
  void step_end(const event_source& at, std::string_view step, std::uint64_t iterations, const status& s) override {
    add(observe::steps, "step_end", at, std::string(step) + " " + std::to_string(iterations) + (s ? " ok" : " failed"));
  }
  void net_begin(const event_source& at, std::string_view net) override { add(observe::nets, "net_begin", at, net); }
  void net_end(const event_source& at, std::string_view net, const status& s) override {
    add(observe::nets, "net_end", at, std::string(net) + (s ? " ok" : " failed"));
  }
  void report_begin(const event_source& at, std::string_view step) override {
    add(observe::reports, "report_begin", at, step);
  }
  void report_end(const event_source& at, std::string_view step, const status&) override {
    add(observe::reports, "report_end", at, step);
  }
  void offload_begin(const event_source& at, std::string_view op) override {
    add(observe::offloads, "offload_begin", at, op);
  }
  void offload_end(const event_source& at, std::string_view op, const status&) override {
    add(observe::offloads, "offload_end", at, op);
  }
  void retry_wait(const event_source& at, std::string_view step, int next_attempt, int max_attempts,
                  std::chrono::microseconds, const error&) override {
    add(step.empty() ? observe::tasks : observe::steps, "retry_wait", at,
        std::string(step) + " " + std::to_string(next_attempt) + "/" + std::to_string(max_attempts));
  }

  // Sorted: events on several threads (the node strands, the compute
  // pool) reach the observers of one fan-out in one order per event, not
  // one order overall.
  std::vector<event> sorted() {
    const std::lock_guard hold(m_);
    std::vector<event> out = events_;
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  void add(observe kind, const char* what, const event_source& at, std::string_view detail) {
    const std::lock_guard hold(m_);
    events_.push_back({kind, std::string(what) + " " + std::string(at.task) + "@" + std::string(at.node) + " " +
                                 std::string(detail)});
  }
  observe kinds_;
  std::mutex m_;
  std::vector<event> events_;
};

retry_policy twice() {
  retry_policy p;
  p.max_attempts = 2;
  p.initial_backoff = std::chrono::milliseconds(0);
  return p;
}

// Every kind of event a local run raises: on "a", a loop of one-op nets
// with a report step beside it; on "b", a retried task and a task with a
// retried step, each failing its first attempt, and an offloaded op.
task_group every_kind() {
  net init("init");
  init.op("ConstantFill", {}, {"x"}, {{"value", i64{0}}}).op("ConstantFill", {}, {"one"}, {{"value", i64{1}}});
  net add("add");
  add.op("Add", {"x", "one"}, {"x"});
  task loop("loop",
            step("root").add_substep(step("init").add_net(init)).add_substep(step("l").add_net(add).iterations(50)));
  net rep("rep");
  rep.op("ConstantFill", {}, {"seen"}, {{"value", i64{1}}});
  loop.report(step("r").add_net(rep), std::chrono::hours(1));
  // Two nets: FailTimes counts its failures per op within a run.
  auto flaky = [](const std::string& name) {
    net n(name);
    n.op("FailTimes", {}, {}, {{"times", i64{1}}, {"message", std::string("once")}});
    return n;
  };
  net offloaded("offloaded");
  op_def off{"Add", {"x", "one"}, {"x"}, {}, nullptr};
  off.offload = true;
  offloaded.op("ConstantFill", {}, {"x"}, {{"value", i64{0}}}).op("ConstantFill", {}, {"one"}, {{"value", i64{1}}});
  offloaded.add(off);
  task_group g;
  REQUIRE_OK(g.add(loop, node("a")));
  REQUIRE_OK(g.add(task("retried", step("s").add_net(flaky("flaky_task"))).retry(twice()), node("b")));
  REQUIRE_OK(
      g.add(task("stepped", step("outer").add_substep(step("inner").add_net(flaky("flaky_step")).retry(twice()))),
            node("b")));
  REQUIRE_OK(g.add(task("off", step("o").add_net(offloaded)), node("b")));
  return g;
}

constexpr observe every_kind_of_event[] = {observe::tasks, observe::steps, observe::nets, observe::reports, observe::offloads};

std::vector<recorder::event> only(const std::vector<recorder::event>& all, observe mask) {
  std::vector<recorder::event> out;
  for (const recorder::event& e : all) {
    if (wants(mask, e.kind)) out.push_back(e);
  }
  return out;
}

}  // namespace

TEST_CASE("each observer of a fan-out receives exactly the events of its kinds", "[observer]") {
  const task_group g = every_kind();
  const std::uint64_t seed = GENERATE(range(std::uint64_t{1}, std::uint64_t{21}));
  INFO("seed " << seed << " (fan_out_observer_test)");
  std::mt19937_64 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  // A full observer first, then 1-5 generated ones, each added to the
  // outer fan-out or to one nested in it.
  recorder full(observe::all);
  std::vector<std::unique_ptr<recorder>> members;
  fan_out_observer outer;
  fan_out_observer inner;
  outer.add(&full);
  observe expected_union = observe::all;
  const int n = 1 + pick(5);
  bool nested = false;
  for (int i = 0; i < n; ++i) {
    auto mask = static_cast<observe>(pick(32));
    members.push_back(std::make_unique<recorder>(mask));
    if (pick(2) == 0) {
      inner.add(members.back().get());
      nested = true;
    } else {
      outer.add(members.back().get());
    }
  }
  if (nested) outer.add(&inner);
  CHECK(outer.interests() == expected_union);
  CHECK(outer.size() == static_cast<std::size_t>(n) + 1 - inner.size() + (nested ? 1 : 0));

  asio::thread_pool compute(1);
  asio::io_context io;
  local_session session(io.get_executor());
  session.set_compute_executor(compute.get_executor());
  run_options o;
  o.observer = &outer;
  auto r = test::run(io, test::run_async(session, g, o));
  REQUIRE_OK(r);
  REQUIRE(r.value().ok());

  const std::vector<recorder::event> all = full.sorted();
  // The full observer saw every kind the group raises.
  for (const observe k : every_kind_of_event) {
    CAPTURE(static_cast<int>(k));
    CHECK(!only(all, k).empty());
  }
  for (std::size_t i = 0; i < members.size(); ++i) {
    CAPTURE(i, static_cast<int>(members[i]->interests()));
    CHECK(members[i]->sorted() == only(all, members[i]->interests()));
  }
}

TEST_CASE("a fan-out asks the run for the union of its observers' masks", "[observer]") {
  const std::uint64_t seed = GENERATE(range(std::uint64_t{1}, std::uint64_t{51}));
  INFO("seed " << seed << " (fan_out_observer_test)");
  std::mt19937_64 rng(seed);
  std::vector<std::unique_ptr<recorder>> members;
  fan_out_observer f;
  observe u = observe::none;
  CHECK(f.interests() == observe::none);
  const int n = static_cast<int>(rng() % 6);
  for (int i = 0; i < n; ++i) {
    const auto mask = static_cast<observe>(rng() % 32);
    members.push_back(std::make_unique<recorder>(mask));
    f.add(members.back().get());
    u = u | mask;
    CHECK(f.interests() == u);
  }
  const fan_out_observer copy = f;
  CHECK(copy.interests() == u);
  CHECK(copy.size() == f.size());
}

TEST_CASE("observers of a fan-out that all ask for task events keep the one-op loop", "[observer]") {
  net init("init");
  init.op("ConstantFill", {}, {"x"}, {{"value", i64{0}}}).op("ConstantFill", {}, {"one"}, {{"value", i64{1}}});
  net add("add");
  add.op("Add", {"x", "one"}, {"x"});
  task_group g;
  REQUIRE_OK(g.add(task("t", step("root")
                                 .add_substep(step("init").add_net(init))
                                 .add_substep(step("loop").add_net(add).iterations(10'000))),
                   node("n")));
  recorder progress(observe::tasks), log(observe::tasks);
  fan_out_observer both{&progress, &log};
  auto& hooks = detail::test_driver_hooks();
  hooks.one_op_loops = 0;
  hooks.observed_loops = 0;
  hooks.counting = true;
  local_session session(1);
  run_options o;
  o.observer = &both;
  auto r = test::run_sync(session, g, o);
  hooks.counting = false;
  REQUIRE_OK(r);
  CHECK(hooks.one_op_loops.load() >= 1);
  CHECK(hooks.observed_loops.load() == 0);
  CHECK(progress.sorted().size() == 3);  // run_begin, task_begin, task_end
  CHECK(progress.sorted() == log.sorted());
}

TEST_CASE("a fan-out refuses an observer that would send events round", "[observer]") {
  fan_out_observer a, b, c;
  recorder leaf(observe::all);
  CHECK_THROWS_AS(a.add(nullptr), std::invalid_argument);
  CHECK_THROWS_AS(a.add(&a), std::invalid_argument);
  a.add(&b);
  b.add(&c);
  c.add(&leaf);
  CHECK(a.forwards_to(&leaf));
  CHECK(a.forwards_to(&c));
  CHECK_FALSE(c.forwards_to(&a));
  // c -> a would close a -> b -> c -> a.
  CHECK_THROWS_AS(c.add(&a), std::invalid_argument);
  CHECK_THROWS_AS(b.add(&a), std::invalid_argument);
  CHECK(c.size() == 1);
  CHECK(b.size() == 1);
  // Adding the same leaf twice is allowed: it is told each event twice.
  a.add(&leaf);
  CHECK(a.size() == 2);
}
