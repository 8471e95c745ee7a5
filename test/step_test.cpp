#include <taskgroup/step_runner.hpp>

#include <taskgroup/execution_step.hpp>

#include "support/steps.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

using namespace taskgroup;
using namespace taskgroup::test;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

// Runs `s` and lets `cancel_after` handlers run before emitting a terminal
// cancellation; returns the status and checks the context drained.
status run_and_cancel(const execution_step& s, const std::shared_ptr<workspace>& ws, std::size_t handlers_before,
                      const run_step_options& o = {}) {
  asio::io_context io;
  asio::cancellation_signal sig;
  std::optional<status> out;
  asio::co_spawn(io, run_step(s, ws, o), asio::bind_cancellation_slot(sig.slot(), [&](std::exception_ptr e, status st) {
                   REQUIRE_FALSE(e);
                   out.emplace(std::move(st));
                 }));
  for (std::size_t i = 0; i < handlers_before && !out; ++i) io.run_one();
  if (!out) sig.emit(asio::cancellation_type::terminal);
  io.run();
  REQUIRE(out.has_value());
  return std::move(*out);
}

}  // namespace

// --- fields and validation -------------------------------------------------

TEST_CASE("a step reads well as a builder and reports its fields", "[step]") {
  net a = fill_int("a", "x", 1);
  auto s = step("train").nets({a}).iterations(100).timeout(5s);
  CHECK(s.name() == "train");
  CHECK(s.nets().size() == 1);
  CHECK(s.iterations() == 100);
  CHECK(s.timeout() == std::chrono::milliseconds(5000));
  CHECK_FALSE(s.should_stop_blob());
  CHECK(s.concurrent_instances() == 1);
  CHECK(s.validate());
}

TEST_CASE("empty children are dropped", "[step]") {
  auto parent = step("p");
  parent.add_substep(step("empty"));
  parent.add_substep(step("full").add_net(fill_int("n", "x", 1)));
  CHECK(parent.substeps().size() == 1);
  CHECK(parent.substeps()[0].name() == "full");
  CHECK(step("nothing").empty());
}

TEST_CASE("every invalid combination of fields is rejected", "[step]") {
  auto check = [](const execution_step& s, const std::string& text) {
    auto st = s.validate();
    REQUIRE_FALSE(st);
    CHECK(st.error().code == errc::invalid_step);
    CHECK_THAT(st.error().message, Catch::Contains(text));
  };
  net n = fill_int("n", "x", 1);
  check(step("s").add_net(n).add_substep(step("c").add_net(n)), "cannot have both nets and substeps");
  check(step("s").add_net(n).iterations(2).should_stop_blob("stop"), "cannot set both should_stop_blob and num_iter");
  check(step("s").add_net(n).only_once(true), "only_once is not supported without should_stop_blob");
  check(step("s").add_net(n).iterations(-1), "num_iter must be >= 0");
  check(step("s").add_net(n).concurrent_instances(0), "num_concurrent_instances must be >= 1");
  check(step("s").add_net(n).run_every(0ms), "run_every_ms must be > 0");
  check(step("s").add_net(n).timeout(0ms), "timeout must be > 0");
  auto child = step("child").add_net(n);
  auto parent = step("parent").add_substep(child);
  child.iterations(3);
  check(parent, "step \"parent/child\": cannot mutate a step that has already been added to a plan/step");
}

TEST_CASE("run_every may still be set on a frozen step", "[step]") {
  auto child = step("child").add_net(fill_int("n", "x", 1));
  auto parent = step("parent").add_substep(child);
  child.run_every(10ms);
  CHECK(parent.validate());
  CHECK(child.run_every() == 10ms);
}

TEST_CASE("two different nets with the same name in one tree are an error", "[step]") {
  auto s =
      step("s").substeps({step("a").add_net(fill_int("same", "x", 1)), step("b").add_net(fill_int("same", "y", 2))});
  auto st = s.validate();
  REQUIRE_FALSE(st);
  CHECK(st.error().code == errc::duplicate_net);
  CHECK_THAT(st.error().message, Catch::Contains("different nets with same name: \"same\""));
  auto ws = workspace::make("w");
  CHECK(run_tree(s, ws).error().code == errc::duplicate_net);
}

TEST_CASE("an invalid tree fails before anything runs", "[step]") {
  auto ws = workspace::make("w");
  auto s = step("s").substeps(
      {step("a").add_net(fill_int("a", "x", 1)), step("b").add_net(fill_int("b", "y", 1)).only_once(true)});
  CHECK(run_tree(s, ws).error().code == errc::invalid_step);
  CHECK_FALSE(ws->has("x"));
}

// --- iterations and stop blobs ---------------------------------------------

TEST_CASE("scenario 14: num_iter n runs the nets n times, 0 runs nothing", "[step][scenario]") {
  for (i64 n : {0, 1, 7, 100}) {
    auto ws = workspace::make("w");
    ws->set("iter", i64{5});
    REQUIRE(run_tree(step("s").add_net(incr("inc", "iter")).iterations(n), ws));
    CHECK(ws->read<i64>("iter").value() == 5 + n);
  }
}

TEST_CASE("scenario 12: a stop blob is checked after every net", "[step][scenario]") {
  for (i64 initial : {0, 3, 10, 20}) {
    auto ws = workspace::make("w");
    ws->set("iter", initial);
    ws->set("n", i64{10});
    net check("check");
    check.op("GE", {"iter", "n"}, {"stop"});
    auto s = step("s").nets({check, incr("inc", "iter")}).should_stop_blob("stop");
    REQUIRE(run_tree(s, ws));
    CHECK(ws->read<i64>("iter").value() == std::max<i64>(initial, 10));
  }
}

TEST_CASE("scenario 13: disabled steps stop early, steps without a stop blob run fully", "[step][scenario]") {
  auto ws = workspace::make("w");
  auto sub = [&](int k, bool disabled, bool with_stop) {
    const std::string i = std::to_string(k);
    ws->set("disabled" + i, disabled);
    net init("init" + i);
    init.op("ConstantFill", {}, {"out" + i}, {{"value", i64{0}}})
        .op("ConstantFill", {}, {"stop" + i}, {{"value", false}});
    net gate("gate" + i);
    gate.op("Copy", {"disabled" + i}, {"stop" + i});
    net set_out = fill_int("set" + i, "out" + i, 1);
    net end = fill_bool("end" + i, "stop" + i, true);
    auto s = step("sub" + i).nets({init, gate, set_out, end});
    if (with_stop) s.should_stop_blob("stop" + i);
    return s;
  };
  auto top = step("top").substeps({sub(1, false, true), sub(2, true, true), sub(3, true, false)}).iterations(3);
  REQUIRE(run_tree(top, ws));
  CHECK(ws->read<i64>("out1").value() == 1);
  CHECK(ws->read<i64>("out2").value() == 0);
  CHECK(ws->read<i64>("out3").value() == 1);
}

TEST_CASE("only_once runs iteration 0 only", "[step]") {
  auto ws = workspace::make("w");
  ws->set("count", i64{0});
  ws->set("stop", false);
  REQUIRE(run_tree(step("s").add_net(incr("inc", "count")).should_stop_blob("stop").only_once(true), ws));
  CHECK(ws->read<i64>("count").value() == 1);
}

TEST_CASE("a stop exits only the step that owns the stop blob", "[step]") {
  auto ws = workspace::make("w");
  ws->set("a", i64{0});
  ws->set("b", i64{0});
  auto inner = step("inner").nets({incr("inc_a", "a"), fill_bool("stop_now", "stop", true)}).should_stop_blob("stop");
  auto outer = step("outer").substeps({inner, step("after").add_net(incr("inc_b", "b"))}).iterations(3);
  REQUIRE(run_tree(outer, ws));
  CHECK(ws->read<i64>("a").value() == 3);
  CHECK(ws->read<i64>("b").value() == 3);
}

TEST_CASE("a stop blob that is not a bool is an error", "[step]") {
  auto ws = workspace::make("w");
  ws->set("stop", i64{1});
  auto st = run_tree(step("s").add_net(fill_int("n", "x", 1)).should_stop_blob("stop"), ws);
  REQUIRE_FALSE(st);
  CHECK(st.error().code == errc::type_mismatch);
  CHECK(st.error().message == "s: should_stop_blob \"stop\" expects a scalar boolean, got int64");
}

TEST_CASE("a stop blob that does not exist is an error naming it", "[step]") {
  auto ws = workspace::make("w");
  auto st = run_tree(step("s").add_net(fill_int("n", "x", 1)).should_stop_blob("nope"), ws);
  REQUIRE_FALSE(st);
  CHECK(st.error().code == errc::blob_not_found);
  CHECK(st.error().message == "s: should_stop_blob: blob \"nope\" does not exist");
}

TEST_CASE("scenario 17: an empty step succeeds", "[step][scenario]") {
  auto ws = workspace::make("w");
  CHECK(run_tree(step("empty"), ws));
}

TEST_CASE("sequential substeps run in program order", "[step]") {
  auto ws = workspace::make("w");
  ws->set("log", std::vector<i64>{});
  auto append = [](const std::string& name, i64 v) {
    net n(name);
    n.op("ConstantFill", {}, {name + "/v"}, {{"value", v}}).op("Append", {"log", name + "/v"}, {"log"});
    return n;
  };
  auto s = step("s")
               .substeps({step("one").add_net(append("one", 1)), step("two").add_net(append("two", 2)),
                          step("three").add_net(append("three", 3))})
               .iterations(2);
  REQUIRE(run_tree(s, ws));
  CHECK(ws->read<std::vector<i64>>("log").value() == std::vector<i64>{1, 2, 3, 1, 2, 3});
}

TEST_CASE("a net listed twice in a tree is one instance and runs at each appearance", "[step]") {
  auto ws = workspace::make("w");
  int constructed = 0;
  operator_registry reg(operator_registry::global());
  REQUIRE(reg.add(operator_schema("Counted").inputs(0).outputs(1).factory(
      [&](op_context& ctx) -> result<std::unique_ptr<op_kernel>> {
        ++constructed;
        blob* out = &ctx.output_blob(0);
        if (!out->has_value()) out->set(i64{0});
        return make_kernel([out] {
          ++out->as<i64>();
          return ok();
        });
      })));
  net n("counted");
  n.op("Counted", {}, {"total"});
  auto s = step("s").substeps({step("a").add_net(n), step("b").add_net(n)});
  run_step_options o;
  o.registry = &reg;
  REQUIRE(run_tree(s, ws, o));
  CHECK(constructed == 1);
  CHECK(ws->read<i64>("total").value() == 2);
  REQUIRE(run_tree(s, ws, o));  // the same workspace keeps the instance
  CHECK(constructed == 1);
  CHECK(ws->read<i64>("total").value() == 4);
}

// --- workspaces --------------------------------------------------------------

TEST_CASE("create_workspace gives every execution a fresh child workspace and fresh nets", "[step]") {
  auto ws = workspace::make("w");
  ws->set("shared", i64{0});
  int constructed = 0;
  operator_registry reg(operator_registry::global());
  REQUIRE(reg.add(
      operator_schema("Probe").inputs(0).outputs(0).factory([&](op_context&) -> result<std::unique_ptr<op_kernel>> {
        ++constructed;
        return make_kernel([] { return ok(); });
      })));
  net body("body");
  body.op("Probe", {}, {}).op("Iter", {}, {"shared"}).op("ConstantFill", {}, {"scratch"}, {{"value", i64{1}}});
  auto s = step("outer").add_substep(step("inner").add_net(body).create_workspace(true)).iterations(3);
  run_step_options o;
  o.registry = &reg;
  REQUIRE(run_tree(s, ws, o));
  CHECK(constructed == 3);
  CHECK(ws->read<i64>("shared").value() == 3);
  CHECK_FALSE(ws->has("scratch"));
}

// --- concurrency ----------------------------------------------------------

TEST_CASE("scenario 15: concurrent substeps times iterations", "[step][scenario]") {
  for (int k = 0; k <= 5; ++k) {
    for (i64 n : {0, 1, 4}) {
      auto ws = workspace::make("w");
      ws->set("iter", i64{7});
      auto s = step("s").concurrent_substeps(true).iterations(n);
      for (int j = 0; j < k; ++j) {
        net inc("inc" + std::to_string(j));
        inc.op("AtomicIter", {}, {"iter"});
        s.add_substep(step("sub" + std::to_string(j)).add_net(inc));
      }
      if (k == 0) CHECK(s.empty());
      REQUIRE(run_tree(s, ws));
      CHECK(ws->read<i64>("iter").value() == 7 + n * k);
    }
  }
}

TEST_CASE("concurrent substeps interleave at suspension points with a barrier per iteration", "[step]") {
  auto ws = workspace::make("w");
  ws->set("log", std::vector<i64>{});
  auto worker = [](const std::string& name, i64 id) {
    net n(name);
    n.op("ConstantFill", {}, {name + "/id"}, {{"value", id}})
        .op("Append", {"log", name + "/id"}, {"log"})
        .op("Sleep", {}, {}, {{"ms", i64{2}}})
        .op("Append", {"log", name + "/id"}, {"log"});
    return n;
  };
  auto s = step("s")
               .substeps({step("a").add_net(worker("a", 1)), step("b").add_net(worker("b", 2))})
               .concurrent_substeps(true)
               .iterations(2);
  REQUIRE(run_tree(s, ws));
  auto log = ws->read<std::vector<i64>>("log").value();
  REQUIRE(log.size() == 8);
  // Both start before either finishes (interleaving), and iteration 2
  // starts only after both finished iteration 1 (barrier).
  CHECK(std::vector<i64>(log.begin(), log.begin() + 2) == std::vector<i64>{1, 2});
  std::vector<i64> first(log.begin(), log.begin() + 4), second(log.begin() + 4, log.end());
  std::sort(first.begin(), first.end());
  std::sort(second.begin(), second.end());
  CHECK(first == std::vector<i64>{1, 1, 2, 2});
  CHECK(second == std::vector<i64>{1, 1, 2, 2});
}

TEST_CASE("concurrent instances each get their own child workspace", "[step]") {
  auto ws = workspace::make("w");
  ws->set("total", i64{0});
  net body("body");
  body.op("ConstantFill", {}, {"mine"}, {{"value", i64{1}}}).op("Add", {"total", "mine"}, {"total"});
  auto s = step("s").add_substep(step("inst").add_net(body).create_workspace(true)).concurrent_instances(8);
  REQUIRE(run_tree(s, ws));
  CHECK(ws->read<i64>("total").value() == 8);
  CHECK_FALSE(ws->has("mine"));
}

namespace {

// An observer that only forces concurrent children through the spawning
// runner (children run in turn only without an observer).
class silent_step_observer final : public run_observer {};

// Concurrent children that cannot suspend: plain synchronous net steps
// that end on their own, counted or `only_once` with a stop blob.
execution_step in_turn_tree() {
  net tick("tick");
  tick.op("Iter", {}, {"a"}).op("Add", {"total", "a"}, {"total"});
  net twice("twice");
  twice.op("Iter", {}, {"b"});
  net once("once");
  once.op("Iter", {}, {"c"}).op("ConstantFill", {}, {"stop"}, {{"value", false}});
  return step("s")
      .substeps({step("tick").add_net(tick).iterations(3), step("twice").add_net(twice).add_net(twice).iterations(2),
                 step("once").add_net(once).should_stop_blob("stop").only_once(true)})
      .concurrent_substeps(true)
      .iterations(5);
}

std::shared_ptr<workspace> in_turn_workspace() {
  auto ws = workspace::make("w");
  for (const char* b : {"a", "b", "c", "total"}) ws->set(b, i64{0});
  ws->set("stop", false);
  return ws;
}

}  // namespace

TEST_CASE("concurrent children that cannot suspend run in turn, with the results and counts of the barrier",
          "[step][in_turn]") {
  step_stats turn_stats, spawn_stats;
  auto turn = in_turn_workspace();
  run_step_options o;
  o.stats = &turn_stats;
  REQUIRE(run_tree(in_turn_tree(), turn, o));
  silent_step_observer observer;
  auto spawned = in_turn_workspace();
  o.stats = &spawn_stats;
  o.observer = &observer;
  REQUIRE(run_tree(in_turn_tree(), spawned, o));
  for (const char* b : {"a", "b", "c", "total"}) {
    INFO(b);
    CHECK(turn->read<i64>(b).value() == spawned->read<i64>(b).value());
  }
  CHECK(turn->read<i64>("a").value() == 15);
  CHECK(turn->read<i64>("b").value() == 20);
  CHECK(turn->read<i64>("c").value() == 5);
  CHECK(turn_stats.iterations == 5);
  CHECK(turn_stats.net_runs == spawn_stats.net_runs);
  CHECK(turn_stats.net_runs == 5 * (3 + 4 + 1));
}

TEST_CASE("in turn, the first failure is the error and the children after it do not start", "[step][in_turn]") {
  auto ws = workspace::make("w");
  ws->set("before", i64{0});
  ws->set("after", i64{0});
  auto s = step("plan")
               .substeps({step("before").add_net(incr("b", "before")),
                          step("thrower").add_net(failing("throw", "boom")), step("after").add_net(incr("a", "after"))})
               .concurrent_substeps(true)
               .iterations(3);
  auto st = run_tree(s, ws);
  REQUIRE_FALSE(st);
  CHECK(st.error().code == errc::op_failed);
  CHECK(st.error().message == "plan/thrower/net \"throw\" op #0 (Fail): boom");
  CHECK(ws->read<i64>("before").value() == 1);
  CHECK(ws->read<i64>("after").value() == 0);
}

// The same rule when the children are spawned (each a step of steps, so
// not run in turn): a child spawned after a sibling failed, inline, does
// not start either (it ran to its end before the join heard of the failure).
TEST_CASE("spawned, the children after the first failure do not start either", "[step]") {
  auto ws = workspace::make("w");
  ws->set("before", i64{0});
  ws->set("after", i64{0});
  auto nested = [](const char* name, net n) {
    return step(name).add_substep(step(std::string(name) + "1").add_net(n));
  };
  auto s = step("plan")
               .substeps({nested("before", incr("b", "before")), nested("thrower", failing("throw", "boom")),
                          nested("after", incr("a", "after"))})
               .concurrent_substeps(true)
               .iterations(3);
  auto st = run_tree(s, ws);
  REQUIRE_FALSE(st);
  CHECK(st.error().message == "plan/thrower/thrower1/net \"throw\" op #0 (Fail): boom");
  CHECK(ws->read<i64>("before").value() == 1);
  CHECK(ws->read<i64>("after").value() == 0);
}

// Options whose loops yield at every count of yield_every (256), however
// little time it took.
run_step_options by_count() {
  run_step_options o;
  o.yield_slice = std::chrono::microseconds::zero();
  return o;
}

TEST_CASE("in turn, a long child yields to the strand and a cancellation there stops the rest", "[step][in_turn]") {
  auto make = [] {
    return step("s")
        .substeps({step("long").add_net(incr("l", "long")).iterations(1000), step("short").add_net(incr("s", "short"))})
        .concurrent_substeps(true);
  };
  auto fresh = [] {
    auto ws = workspace::make("w");
    ws->set("long", i64{0});
    ws->set("short", i64{0});
    return ws;
  };
  SECTION("other coroutines of the strand run between the long child's yields") {
    auto ws = fresh();
    asio::io_context io;
    std::vector<i64> seen;
    bool done = false;
    asio::co_spawn(io, run_step(make(), ws, by_count()), [&](std::exception_ptr e, status st) {
      CHECK_FALSE(e);
      CHECK(st);
      done = true;
    });
    std::function<void()> watch = [&] {
      seen.push_back(ws->read<i64>("long").value());
      if (!done) asio::post(io, watch);
    };
    asio::post(io, watch);
    io.run();
    REQUIRE(done);
    CHECK(ws->read<i64>("long").value() == 1000);
    CHECK(ws->read<i64>("short").value() == 1);
    // Seen mid-loop: yield_every 256, by count alone, gives three yields.
    CHECK(std::count_if(seen.begin(), seen.end(), [](i64 v) { return v > 0 && v < 1000; }) >= 3);
  }
  SECTION("cancelled at each yield, the tree stops and the later child never starts") {
    bool completed = false;
    std::size_t cancelled = 0;
    for (std::size_t k = 0; k < 20 && !completed; ++k) {
      auto ws = fresh();
      status st = run_and_cancel(make(), ws, k, by_count());
      if (st) {
        completed = true;
        CHECK(ws->read<i64>("short").value() == 1);
        continue;
      }
      ++cancelled;
      CHECK(st.error().code == errc::cancelled);
      CHECK(ws->read<i64>("long").value() < 1000);
      CHECK(ws->read<i64>("short").value() == 0);
    }
    CHECK(completed);
    CHECK(cancelled >= 3);
  }
  SECTION("abandoning the event loop at a yield tears the tree down cleanly") {
    // The sanitizer builds check for leaks and use after free; here, that
    // the torn-down tree let go of its workspace, and that it was torn down
    // before its end at least at first (the tree yields only a few times).
    std::size_t torn_down = 0;
    for (std::size_t k = 0; k < 6; ++k) {
      INFO(k << " handlers run");
      auto ws = fresh();
      bool completed = false;
      {
        asio::io_context io;
        asio::co_spawn(io, run_step(make(), ws, by_count()), [&](std::exception_ptr, status) { completed = true; });
        for (std::size_t i = 0; i < k; ++i) io.run_one();
      }
      CHECK(ws.use_count() == 1);
      if (completed) {
        CHECK(ws->read<i64>("long").value() == 1000);
      } else {
        ++torn_down;
      }
    }
    CHECK(torn_down >= 2);
  }
}

// How many times a handler beside a loop of `end` iterations ran while the
// loop was under way (each time is one yield of the loop), and how long
// the whole took.
std::size_t st_yields_of(const execution_step& s, i64 end, const run_step_options& o, std::chrono::nanoseconds& took) {
  auto ws = workspace::make("w");
  ws->set("long", i64{0});
  asio::io_context io;
  bool done = false;
  std::size_t mid = 0;
  asio::co_spawn(io, run_step(s, ws, o), [&](std::exception_ptr e, status st) {
    CHECK_FALSE(e);
    CHECK(st);
    done = true;
  });
  std::function<void()> watch = [&] {
    const i64 v = ws->read<i64>("long").value();
    if (v > 0 && v < end) ++mid;
    if (!done) asio::post(io, watch);
  };
  asio::post(io, watch);
  const auto t0 = std::chrono::steady_clock::now();
  io.run();
  took = std::chrono::steady_clock::now() - t0;
  CHECK(ws->read<i64>("long").value() == end);
  return mid;
}

TEST_CASE("a loop yields at a count only once yield_slice has passed since its last yield", "[step][yield]") {
  std::chrono::nanoseconds took{};
  SECTION("a loop of cheap ops yields at most once a slice, the first time at its first count") {
    constexpr i64 n = 100000;
    run_step_options o;
    o.yield_every = 1;  // a count at every iteration start
    o.yield_slice = 2ms;
    const std::size_t yields = st_yields_of(step("long").add_net(incr("l", "long")).iterations(n), n, o, took);
    INFO(yields << " yields in " << took.count() << " ns");
    CHECK(yields >= 1);
    CHECK(yields <= static_cast<std::size_t>(took / o.yield_slice) + 2);
    // By count alone, the same loop yields before every iteration but the first.
    o.yield_slice = std::chrono::microseconds::zero();
    CHECK(st_yields_of(step("long").add_net(incr("l", "long")).iterations(n), n, o, took) == n - 1);
  }
  SECTION("a loop of slow ops still yields at every count") {
    net slow("slow");
    slow.lambda("Slow", {"long"}, {"long"}, [](op_context& ctx) -> status {
      std::this_thread::sleep_for(100us);
      ctx.set_output(0, ctx.input<i64>(0) + 1);
      return ok();
    });
    run_step_options o;
    o.yield_every = 40;  // 40 iterations of at least 100 us each: 4 ms a count
    o.yield_slice = 1ms;
    const std::size_t yields = st_yields_of(step("long").add_net(slow).iterations(400), 400, o, took);
    // Counts come due at the starts of iterations 40, 80, ... 400: the
    // last one's yield sees 399 written, still under way.
    CHECK(yields == 10);
  }
}

TEST_CASE("scenario 18: the first failure cancels a stuck async sibling once and is the error", "[step][scenario]") {
  auto ws = workspace::make("w");
  auto c = std::make_shared<stuck_counters>();
  auto s =
      step("plan")
          .substeps({step("stuck").add_net(stuck("stuck", c)), step("thrower").add_net(failing("throw", "test error"))})
          .concurrent_substeps(true);
  auto st = run_tree(s, ws);
  REQUIRE_FALSE(st);
  CHECK(st.error().code == errc::op_failed);
  CHECK(st.error().message == "plan/thrower/net \"throw\" op #0 (Fail): test error");
  CHECK(c->started == 1);
  CHECK(c->cancelled == 1);
  CHECK(c->finished == 0);
}

TEST_CASE("scenario 19: a sibling waiting on an empty queue is cancelled by the failure", "[step][scenario]") {
  auto ws = workspace::make("w");
  net init("init");
  init.op("CreateQueue", {}, {"q"}, {{"capacity", i64{1}}});
  net consume("consume");
  consume.op("Dequeue", {"q"}, {"item", "ok"});
  auto s = step("plan").substeps(
      {step("init").add_net(init),
       step("work")
           .substeps({step("consumer").add_net(consume), step("thrower").add_net(failing("throw", "test error"))})
           .concurrent_substeps(true)});
  auto st = run_tree(s, ws);
  REQUIRE_FALSE(st);
  CHECK(st.error().message == "plan/work/thrower/net \"throw\" op #0 (Fail): test error");
}

TEST_CASE("scenario 20: a failing report substep cancels the stuck body", "[step][scenario]") {
  auto ws = workspace::make("w");
  auto c = std::make_shared<stuck_counters>();
  auto s = step("plan").substeps({step("stuck").add_net(stuck("stuck", c)),
                                  step("reporter").add_net(failing("report", "reporter error")).run_every(1ms)});
  auto st = run_tree(s, ws);
  REQUIRE_FALSE(st);
  CHECK(st.error().message == "plan/reporter/net \"report\" op #0 (Fail): reporter error");
  CHECK(c->cancelled == 1);
}

TEST_CASE("scenario 21: an endless stop loop ends through the sibling's failure", "[step][scenario]") {
  auto ws = workspace::make("w");
  ws->set("never", false);
  ws->set("inner_runs", i64{0});
  ws->set("noop_ran", false);
  auto endless = step("endless")
                     .add_substep(step("inner").add_net(incr("count", "inner_runs")).iterations(10))
                     .should_stop_blob("never");
  auto thrower = step("thrower").nets({fill_bool("noop", "noop_ran", true), failing("throw", "test error")});
  auto st = run_tree(step("plan").substeps({endless, thrower}).concurrent_substeps(true), ws);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().message, Catch::Contains("test error"));
  CHECK(ws->read<bool>("noop_ran").value());
}

TEST_CASE("scenario 22: an instance blocked on an async wait is cancelled, the other's error wins",
          "[step][scenario]") {
  auto ws = workspace::make("w");
  auto calls = std::make_shared<int>(0);
  auto c = std::make_shared<stuck_counters>();
  net n("work");
  n.lambda("BlockOrThrow", {}, {}, [calls, c](op_context&) -> asio::awaitable<status> {
    if ((*calls)++ == 0) {
      asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::hours(1));
      auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
      if (ec) ++c->cancelled;
      co_return fail(errc::cancelled, "cancelled");
    }
    co_return fail(errc::op_failed, "test error");
  });
  auto s = step("body:parallel").add_substep(step("instance").add_net(n)).concurrent_instances(2);
  auto st = run_tree(s, ws);
  REQUIRE_FALSE(st);
  CHECK(st.error().message == "body:parallel/instance 1/instance/net \"work\" op #0 (BlockOrThrow): test error");
  CHECK(c->cancelled == 1);
}

TEST_CASE("errors name the full step path", "[step]") {
  auto ws = workspace::make("w");
  ws->set("q", i64{0});
  net read("read");
  read.op("ConstantFill", {}, {"x"}, {{"value", i64{1}}}).op("Dequeue", {"q"}, {"v", "ok"});
  auto s = step("train").add_substep(
      step("body:parallel").add_substep(step("reader").add_net(read)).concurrent_instances(4));
  auto st = run_tree(s, ws);
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().message,
             Catch::StartsWith("train/body:parallel/instance ") &&
                 Catch::Contains("/reader/net \"read\" op #1 (Dequeue): input #0 \"q\": expected queue, got int64"));
}

// --- report steps ------------------------------------------------------------

TEST_CASE("a report step runs at least once after a body shorter than its interval", "[step][report]") {
  auto ws = workspace::make("w");
  ws->set("reports", i64{0});
  ws->set("work", i64{0});
  step_stats stats;
  run_step_options o;
  o.stats = &stats;
  auto s = step("parent").substeps(
      {step("work").add_net(incr("w", "work")), step("report").add_net(incr("r", "reports")).run_every(10s)});
  REQUIRE(run_tree(s, ws, o));
  CHECK(ws->read<i64>("work").value() == 1);
  CHECK(ws->read<i64>("reports").value() == 1);
  CHECK(stats.report_runs == 1);
}

TEST_CASE("a report step runs every interval while the parent works, then once more", "[step][report]") {
  auto ws = workspace::make("w");
  ws->set("reports", i64{0});
  auto s = step("parent").substeps({step("work").add_net([] {
                                      net n("sleep");
                                      n.op("Sleep", {}, {}, {{"ms", i64{60}}});
                                      return n;
                                    }()),
                                    step("report").add_net(incr("r", "reports")).run_every(5ms)});
  REQUIRE(run_tree(s, ws));
  // At least one periodic run plus the final one; timing only bounds it below.
  CHECK(ws->read<i64>("reports").value() >= 2);
}

TEST_CASE("a report step runs in its parent's workspace across iterations", "[step][report]") {
  auto ws = workspace::make("w");
  ws->set("seen", i64{0});
  net body("body");
  body.op("ConstantFill", {}, {"local"}, {{"value", i64{1}}});
  net report("report");
  report.op("Add", {"seen", "local"}, {"seen"});
  auto parent = step("parent")
                    .substeps({step("work").add_net(body), step("report").add_net(report).run_every(10s)})
                    .create_workspace(true);
  REQUIRE(run_tree(step("top").add_substep(parent), ws));
  CHECK(ws->read<i64>("seen").value() == 1);  // read "local" from the parent's child workspace
}

TEST_CASE("run_every on the top-level step is ignored", "[step][report]") {
  auto ws = workspace::make("w");
  ws->set("x", i64{0});
  REQUIRE(run_tree(step("top").add_net(incr("inc", "x")).run_every(10s), ws));
  CHECK(ws->read<i64>("x").value() == 1);
}

// --- cancellation and deadlines ----------------------------------------------

TEST_CASE("an expired timeout is a timeout error naming the step and where it waited", "[step][cancel]") {
  auto ws = workspace::make("w");
  auto c = std::make_shared<stuck_counters>();
  auto s = step("outer").add_substep(step("slow").add_net(stuck("stuck", c)).timeout(10ms));
  auto st = run_tree(s, ws);
  REQUIRE_FALSE(st);
  CHECK(st.error().code == errc::timeout);
  CHECK(
      st.error().message ==
      "outer/slow: timed out after 10 ms; waiting then in outer/slow/net \"stuck\" op #0 (Stuck): stuck op cancelled");
  CHECK(c->cancelled == 1);
}

namespace {

// Records every event as one line: "kind name [iterations] [ok|code]".
struct event_log final : run_observer {
  std::vector<std::string> lines;
  static std::string end(const status& st) {
    if (st) return "ok";
    if (st.error().code == errc::timeout) return "timeout";
    if (st.error().code == errc::cancelled) return "cancelled";
    if (st.error().code == errc::blob_not_found) return "blob_not_found";
    return st.error().code.message();
  }
  void step_begin(const event_source&, std::string_view s) override { lines.push_back("step_begin " + std::string(s)); }
  void step_end(const event_source&, std::string_view s, std::uint64_t it, const status& st) override {
    lines.push_back("step_end " + std::string(s) + " " + std::to_string(it) + " " + end(st));
  }
  void net_begin(const event_source&, std::string_view n) override { lines.push_back("net_begin " + std::string(n)); }
  void net_end(const event_source&, std::string_view n, const status& st) override {
    lines.push_back("net_end " + std::string(n) + " " + end(st));
  }
};

}  // namespace

TEST_CASE("an execution's events: a deadline ends it timed out, a binding failure tells nothing of it",
          "[step][cancel][observer]") {
  SECTION("deadline") {
    auto ws = workspace::make("w");
    auto c = std::make_shared<stuck_counters>();
    event_log log;
    run_step_options o;
    o.observer = &log;
    REQUIRE_FALSE(run_tree(step("outer").add_substep(step("slow").add_net(stuck("stuck", c)).timeout(10ms)), ws, o));
    CHECK(log.lines == std::vector<std::string>{"step_begin outer", "step_begin slow", "net_begin stuck",
                                                "net_end stuck cancelled", "step_end slow 1 timeout",
                                                "step_end outer 1 timeout"});
  }
  SECTION("a create_workspace child whose stop blob does not exist in its workspace") {
    auto ws = workspace::make("w");
    ws->set("x", i64{0});
    event_log log;
    run_step_options o;
    o.observer = &log;
    auto s = step("outer").substeps(
        {step("first").add_net(incr("inc", "x")),
         step("own").add_net(incr("inc2", "y")).should_stop_blob("nowhere").create_workspace(true)});
    auto st = run_tree(s, ws, o);
    REQUIRE_FALSE(st);
    INFO(st.error().message);
    CHECK(st.error().code == errc::blob_not_found);
    CHECK(log.lines == std::vector<std::string>{"step_begin outer", "step_begin first", "net_begin inc",
                                                "net_end inc ok", "step_end first 1 ok",
                                                "step_end outer 1 blob_not_found"});
  }
}

TEST_CASE("a step that finishes within its timeout succeeds", "[step][cancel]") {
  auto ws = workspace::make("w");
  ws->set("x", i64{0});
  REQUIRE(run_tree(step("quick").add_net(incr("inc", "x")).iterations(5).timeout(10s), ws));
  CHECK(ws->read<i64>("x").value() == 5);
}

TEST_CASE("cancellation from outside stops the tree at every suspension point", "[step][cancel]") {
  // A tree with a loop, concurrent substeps, a report step and async ops;
  // it is cancelled after k handlers for every k until it completes first.
  auto make = [] {
    net tick("tick");
    tick.op("Iter", {}, {"ticks"}).op("Sleep", {}, {}, {{"ms", i64{1}}});
    net report("report");
    report.op("Iter", {}, {"reports"});
    auto work = step("work")
                    .substeps({step("a").add_net(tick).iterations(3),
                               step("b").add_net(incr("count", "counts")).iterations(600)})
                    .concurrent_substeps(true);
    return step("tree").substeps({work, step("report").add_net(report).run_every(1ms)});
  };
  bool completed = false;
  for (std::size_t k = 0; k < 400 && !completed; ++k) {
    auto ws = workspace::make("w");
    ws->set("ticks", i64{0});
    ws->set("reports", i64{0});
    ws->set("counts", i64{0});
    status st = run_and_cancel(make(), ws, k);
    if (st) {
      completed = true;
      continue;
    }
    CHECK(st.error().code == errc::cancelled);
    // Nothing keeps running: the io_context drained and the counters froze.
    auto ticks = ws->read<i64>("ticks").value();
    CHECK(ticks <= 3);
  }
}

TEST_CASE("abandoning the event loop at any point tears the tree down cleanly", "[step][cancel]") {
  // Cobalt-style brute force: run k handlers, then destroy the io_context
  // with the tree suspended wherever it was. Sanitizers check the rest.
  for (std::size_t k = 0; k < 60; ++k) {
    auto ws = workspace::make("w");
    ws->set("x", i64{0});
    net n("n");
    n.op("Iter", {}, {"x"}).op("Sleep", {}, {}, {{"ms", i64{0}}});
    auto s = step("t")
                 .substeps({step("a").add_net(n).iterations(5), step("b").add_net(incr("i", "x")).iterations(3),
                            step("r").add_net(incr("r", "x")).run_every(1ms)})
                 .concurrent_substeps(true);
    {
      asio::io_context io;
      asio::co_spawn(io, run_step(s, ws), [](std::exception_ptr, status) {});
      for (std::size_t i = 0; i < k; ++i) io.run_one();
    }
    // Torn down wherever it was (or ended first): nothing of the run holds
    // the workspace any more.
    CHECK(ws.use_count() == 1);
  }
}

TEST_CASE("async_run_step works with a callback and with use_future", "[step]") {
  auto ws = workspace::make("w");
  ws->set("x", i64{0});
  asio::io_context io;
  std::optional<step_report> got;
  async_run_step(io.get_executor(), step("s").add_net(incr("inc", "x")).iterations(3), ws,
                 [&](boost::system::error_code ec, step_report r) {
                   CHECK_FALSE(ec);
                   got.emplace(std::move(r));
                 });
  io.run();
  REQUIRE(got);
  CHECK(got->ok());
  CHECK(got->stats.iterations == 3);
  CHECK(got->stats.net_runs == 3);
  CHECK(ws->read<i64>("x").value() == 3);

  io.restart();
  std::future<step_report> f =
      async_run_step(io.get_executor(), step("f").add_net(failing("bad", "nope")), ws, asio::use_future);
  io.run();
  try {
    (void)f.get();
    FAIL("no exception");
  } catch (const taskgroup::system_error& e) {
    CHECK(e.error().code == errc::op_failed);
    CHECK(std::string(e.what()) == "f/net \"bad\" op #0 (Fail): nope");
  }
}

TEST_CASE("async_run_step honours the token's cancellation slot", "[step][cancel]") {
  auto ws = workspace::make("w");
  auto c = std::make_shared<stuck_counters>();
  asio::io_context io;
  asio::cancellation_signal sig;
  std::optional<step_report> got;
  boost::system::error_code code;
  async_run_step(io.get_executor(), step("s").add_net(stuck("stuck", c)), ws,
                 asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code ec, step_report r) {
                   code = ec;
                   got.emplace(std::move(r));
                 }));
  asio::steady_timer t(io, 5ms);
  t.async_wait([&](boost::system::error_code) { sig.emit(asio::cancellation_type::terminal); });
  io.run();
  REQUIRE(got);
  REQUIRE(got->failure);
  CHECK(got->failure->code == errc::cancelled);
  CHECK(code == errc::cancelled);
  CHECK(code == std::errc::operation_canceled);
  CHECK(c->cancelled == 1);
}

// --- flat stack --------------------------------------------------------------

namespace {

// Runs `fn` on a thread with a 256 KiB stack and waits for it. Catch2's
// assertions are not thread-safe: `fn` only records results (no REQUIRE,
// no run_tree, which asserts), and every assertion is made on this thread,
// after the join.
template <class F>
void on_small_stack(F fn) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t thread;
  struct job {
    F fn;
    std::exception_ptr thrown;  // rethrown on this thread
  } j{std::move(fn), nullptr};
  auto trampoline = [](void* p) -> void* {
    auto* jp = static_cast<job*>(p);
    try {
      jp->fn();
    } catch (...) {
      jp->thrown = std::current_exception();
    }
    return nullptr;
  };
  const int created = pthread_create(&thread, &attr, trampoline, &j);
  if (created == 0) pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  REQUIRE(created == 0);
  if (j.thrown) std::rethrow_exception(j.thrown);
}

}  // namespace

TEST_CASE("a million iterations keep a flat stack", "[step][stack]") {
  auto ws = workspace::make("w");
  ws->set("x", i64{0});
  std::optional<status> got;
  step_stats stats;
  auto s = step("loop").add_net(incr("inc", "x")).iterations(1'000'000);
  check_plan_round_trip(s);
  on_small_stack([&] {
    run_step_options o;
    o.stats = &stats;
    got.emplace(run(run_step(s, ws, o)));
  });
  REQUIRE(got);
  CHECK(got->has_value());
  CHECK(ws->read<i64>("x").value() == 1'000'000);
  CHECK(stats.iterations == 1'000'000);
}

// 100,000 iterations on a 256 KiB stack: any frame kept per iteration
// (never under 16 bytes) would overflow it several times over. (Each
// iteration runs two substeps and two nets: a million of them took half a
// minute under ASan.)
TEST_CASE("a 100,000-iteration stop-blob loop keeps a flat stack", "[step][stack]") {
  auto ws = workspace::make("w");
  ws->set("x", i64{0});
  ws->set("limit", i64{100'000});
  net check("check");
  check.op("GE", {"x", "limit"}, {"stop"});
  std::optional<status> got;
  auto s = step("loop")
               .add_substep(step("check").add_net(check))
               .add_substep(step("inc").add_net(incr("inc", "x")))
               .should_stop_blob("stop");
  check_plan_round_trip(s);
  on_small_stack([&] { got.emplace(run(run_step(s, ws))); });
  REQUIRE(got);
  CHECK(got->has_value());
  CHECK(ws->read<i64>("x").value() == 100'000);
}
