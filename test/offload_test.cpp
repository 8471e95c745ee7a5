// Offloaded ops (operator_schema::offload): the kernel runs on the compute
// executor while the node strand serves the node's other tasks; the blob
// rule (inputs read-shared, outputs private until the op ends, runs of one
// op never overlap); cancellation through op_context::stop_requested; the
// errors; the built-in Hash. Run under ThreadSanitizer by the test command:
// the sibling tasks here read and write the offloaded ops' blobs on purpose.
#include <taskgroup/builtin_ops.hpp>
#include <taskgroup/plan.hpp>
#include <taskgroup/session.hpp>
#include <taskgroup/task_group.hpp>

#include "support/checks.hpp"
#include "support/run.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

using namespace taskgroup;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using i64 = std::int64_t;

namespace {

// How long a kernel waits for something that must happen while it runs
// before it gives up with an error: a bound against hangs, not a timing.
constexpr auto patience = 20s;

// What the test ops share with the test body (atomics: the kernels run on
// the compute pool's threads).
struct probe {
  std::atomic<bool> released{false};
  std::atomic<bool> kernel_running{false};
  std::atomic<bool> kernel_returned{false};
  std::atomic<bool> saw_stop{false};
  std::atomic<int> running{0};
  std::atomic<int> most_running{0};
  std::atomic<int> runs{0};
  std::atomic<bool> on_pool{true};
  std::atomic<bool> off_io_thread{true};
  std::atomic<int> nice{-100};  // the kernel's thread's (Linux)
  asio::thread_pool* pool = nullptr;
  std::thread::id io_thread;
  // Written on the strand only, read after the run.
  std::vector<i64> observed;
  bool bump_after_return = false;
};

// Spins until `cond()` or the patience runs out (false).
template <class F>
bool spin_until(F cond) {
  const auto end = std::chrono::steady_clock::now() + patience;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::yield();
  }
  return true;
}

void note_thread(probe& p) {
  if (p.pool != nullptr && !p.pool->get_executor().running_in_this_thread()) p.on_pool = false;
  if (std::this_thread::get_id() == p.io_thread) p.off_io_thread = false;
#if defined(__linux__)
  p.nice = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
#endif
}

// The registry of the test ops (and the built-ins).
operator_registry registry_for(probe& p) {
  operator_registry r(operator_registry::global());
  // Offloaded: waits until released, then outputs the sum of its inputs
  // (read at the start and again at the end: they must not have changed).
  REQUIRE_OK(r.add(operator_schema("Hold").inputs(0, 4).outputs(0, 1).offload().sync([&p](op_context& ctx) -> status {
    note_thread(p);
    i64 before = 0;
    for (std::size_t i = 0; i < ctx.num_inputs(); ++i) before += ctx.input<i64>(i);
    p.kernel_running = true;
    const bool released = spin_until([&] { return p.released.load(); });
    p.kernel_running = false;
    if (!released) return fail(errc::op_failed, "never released");
    // Long enough after the release that a writer that did not wait
    // would run into this read.
    std::this_thread::sleep_for(20ms);
    i64 after = 0;
    for (std::size_t i = 0; i < ctx.num_inputs(); ++i) after += ctx.input<i64>(i);
    p.kernel_returned = true;
    if (after != before) return fail(errc::op_failed, "an input changed while offloaded");
    if (ctx.num_outputs() == 1) ctx.set_output(0, after);
    return ok();
  })));
  // On the strand: is the offloaded kernel running now (bool output).
  REQUIRE_OK(r.add(operator_schema("IsHeld").outputs(1).sync([&p](op_context& ctx) -> status {
    ctx.set_output(0, p.kernel_running.load());
    return ok();
  })));
  REQUIRE_OK(r.add(operator_schema("Release").sync([&p](op_context&) -> status {
    p.released = true;
    return ok();
  })));
  REQUIRE_OK(r.add(operator_schema("Observe").inputs(1).sync([&p](op_context& ctx) -> status {
    p.observed.push_back(ctx.input<i64>(0));
    return ok();
  })));
  // On the strand: x += 1, noting whether the offloaded kernel had
  // returned by then.
  REQUIRE_OK(r.add(operator_schema("Bump").inputs(1).outputs(1).sync([&p](op_context& ctx) -> status {
    p.bump_after_return = p.kernel_returned.load();
    ctx.set_output(0, ctx.input<i64>(0) + 1);
    return ok();
  })));
  // Offloaded: counts how many of its runs overlap.
  REQUIRE_OK(r.add(operator_schema("Count").outputs(0, 1).offload().sync([&p](op_context&) -> status {
    const int now = ++p.running;
    int most = p.most_running.load();
    while (now > most && !p.most_running.compare_exchange_weak(most, now)) {
    }
    std::this_thread::sleep_for(10ms);
    --p.running;
    ++p.runs;
    return ok();
  })));
  // Offloaded: runs until told to stop (or outputs 0 when it never is).
  REQUIRE_OK(
      r.add(operator_schema("UntilStopped").inputs(0, 1).outputs(0, 1).offload().sync([&p](op_context& ctx) -> status {
        p.kernel_running = true;
        const bool stopped = spin_until([&] { return ctx.stop_requested(); });
        p.saw_stop = stopped;
        p.kernel_returned = true;
        if (ctx.num_outputs() == 1) ctx.set_output(0, i64{0});
        return ok();
      })));
  // Offloaded: ignores the stop request for 50 ms.
  REQUIRE_OK(r.add(operator_schema("Stubborn").offload().sync([&p](op_context&) -> status {
    p.kernel_running = true;
    std::this_thread::sleep_for(50ms);
    p.kernel_returned = true;
    return ok();
  })));
  REQUIRE_OK(r.add(operator_schema("Throw").outputs(0, 1).offload().sync([](op_context& ctx) -> status {
    ctx.set_output(0, i64{99});
    throw std::runtime_error("boom");
  })));
  // Offloaded: reads its inputs twice, a little apart (they must be the
  // same), outputs their sum: the generated test's op.
  REQUIRE_OK(r.add(operator_schema("SumTwice").inputs(1, 4).outputs(1).offload().sync([](op_context& ctx) -> status {
    auto sum = [&] {
      i64 s = 0;
      for (std::size_t i = 0; i < ctx.num_inputs(); ++i) s += ctx.input<i64>(i);
      return s;
    };
    const i64 first = sum();
    std::this_thread::sleep_for(200us);
    if (sum() != first) return fail(errc::op_failed, "an input changed while offloaded");
    ctx.set_output(0, first);
    return ok();
  })));
  REQUIRE_OK(r.add(operator_schema("AsyncOffloaded").offload().async([](op_context&) -> asio::awaitable<status> {
    co_return ok();
  })));
  return r;
}

// A task that loops until the offloaded kernel runs, then runs `then`.
task when_held(const std::string& name, net then) {
  net poll(name + "_poll");
  poll.op("Sleep", {}, {}, {{"ms", i64{1}}}).op("IsHeld", {}, {name + "_held"});
  return task(name, step(name)
                        .add_substep(step(name + "_wait").add_net(poll).should_stop_blob(name + "_held"))
                        .add_substep(step(name + "_then").add_net(std::move(then))));
}

// The offloaded task's tree in two shapes: plain (the frame-free driver)
// or beside a concurrent sibling substep (the coroutine driver).
execution_step shaped(const std::string& name, net n, bool concurrent) {
  if (!concurrent) return step(name).add_net(std::move(n));
  net idle(name + "_idle");
  idle.op("Sleep", {}, {}, {{"ms", i64{0}}});
  return step(name)
      .concurrent_substeps(true)
      .add_substep(step(name + "_a").add_net(std::move(n)))
      .add_substep(step(name + "_b").add_net(idle));
}

struct fixture {
  probe p;
  asio::io_context io;
  asio::thread_pool pool{2};
  operator_registry registry = registry_for(p);
  local_session session{io.get_executor()};

  // With `own_pool`, the kernels run on `pool`; else on the default
  // compute executor.
  explicit fixture(bool own_pool = true) {
    p.pool = own_pool ? &pool : nullptr;
    p.io_thread = std::this_thread::get_id();
    session.set_registry(registry);
    if (own_pool) session.set_compute_executor(pool.get_executor());
  }
  result<run_report> run(const task_group& g, run_options o = {}) {
    return test::run(io, test::run_async(session, g, std::move(o)));
  }
};

}  // namespace

TEST_CASE("an offloaded op runs on the compute executor and leaves the node strand free", "[offload]") {
  const bool concurrent = GENERATE(false, true);
  const bool own_pool = GENERATE(true, false);
  CAPTURE(concurrent, own_pool);
  fixture f(own_pool);
  net a("a");
  a.op("ConstantFill", {}, {"y"}, {{"value", i64{7}}});
  net hold("hold");
  hold.op("Hold", {}, {"y"});
  net then("then");
  then.op("Observe", {"y"}, {}).op("Release", {}, {});
  task ta("a", step("a_root").add_substep(step("a_init").add_net(a)).add_substep(shaped("a_hold", hold, concurrent)));
  auto y = ta.output<i64>("y");
  task_group g(workspace_type::global);             // the tasks of the node share its blobs
  f.session.node_workspace("n")->set<i64>("y", 0);  // so that b's nets bind, whoever starts first
  REQUIRE_OK(g.add(ta, node("n")));
  REQUIRE_OK(g.add(when_held("b", then), node("n")));
  auto r = f.run(g);
  REQUIRE_OK(r);
  CHECK(f.p.on_pool);
  CHECK(f.p.off_io_thread);
#if defined(__linux__)
  // The default pool's threads run below the program's priority; a pool
  // of the caller's keeps its own.
  CHECK(f.p.nice == (own_pool ? getpriority(PRIO_PROCESS, 0) : std::min(19, getpriority(PRIO_PROCESS, 0) + 10)));
#endif
  // The sibling ran while the kernel held, and saw y's previous value:
  // the kernel's output is private until it ends.
  REQUIRE(f.p.observed == std::vector<i64>{7});
  CHECK(y.get().value() == 0);  // Hold without inputs outputs their sum, 0
}

TEST_CASE("an op that writes an offloaded op's input waits until it ends; readers do not", "[offload]") {
  const bool concurrent = GENERATE(false, true);
  CAPTURE(concurrent);
  fixture f;
  net init("init");
  init.op("ConstantFill", {}, {"x"}, {{"value", i64{5}}});
  net hold("hold");
  hold.op("Hold", {"x"}, {"seen"});
  net then("then");
  then.op("Observe", {"x"}, {}).op("Release", {}, {}).op("Bump", {"x"}, {"x"});
  task ta("a",
          step("a_root").add_substep(step("a_init").add_net(init)).add_substep(shaped("a_hold", hold, concurrent)));
  auto seen = ta.output<i64>("seen");
  auto x = ta.output<i64>("x");
  task_group g(workspace_type::global);
  f.session.node_workspace("n")->set<i64>("x", 0);
  REQUIRE_OK(g.add(ta, node("n")));
  REQUIRE_OK(g.add(when_held("b", then), node("n")));
  REQUIRE_OK(f.run(g));
  CHECK(f.p.observed == std::vector<i64>{5});  // read while held
  CHECK(f.p.bump_after_return);                // the write waited
  CHECK(seen.get().value() == 5);
  CHECK(x.get().value() == 6);
}

TEST_CASE("runs of one offloaded op never overlap", "[offload]") {
  fixture f;
  net n("count");
  n.op("Count", {}, {});
  task t("t", step("t").concurrent_instances(3).add_substep(step("c").add_net(n).iterations(2)));
  task_group g;
  REQUIRE_OK(g.add(t, node("n")));
  REQUIRE_OK(f.run(g));
  CHECK(f.p.most_running == 1);
  // Three instances, each its own workspace and so its own kernel: those
  // may overlap with each other, not with themselves. One instance's two
  // iterations are one kernel's runs.
  CHECK(f.p.runs == 6);
}

TEST_CASE("a shared net's offloaded op: concurrent substeps of one workspace take turns", "[offload]") {
  fixture f;
  net n("count");
  n.op("Count", {}, {});
  task t("t", step("t")
                  .concurrent_substeps(true)
                  .add_substep(step("c1").add_net(n))
                  .add_substep(step("c2").add_net(n))
                  .add_substep(step("c3").add_net(n)));
  task_group g;
  REQUIRE_OK(g.add(t, node("n")));
  REQUIRE_OK(f.run(g));
  CHECK(f.p.runs == 3);
  CHECK(f.p.most_running == 1);
}

TEST_CASE("a cancelled run tells the offloaded kernel and ends when it returns", "[offload]") {
  const bool concurrent = GENERATE(false, true);
  CAPTURE(concurrent);
  fixture f;
  net n("n");
  n.op("UntilStopped", {}, {"z"});
  task t("t", shaped("t", n, concurrent));
  task_group g;
  REQUIRE_OK(g.add(t, node("n")));
  run_options o;
  o.timeout = 30ms;
  auto r = f.run(g, o);
  REQUIRE_FALSE(r);
  CHECK(f.p.saw_stop);
  CHECK(f.p.kernel_returned);
}

TEST_CASE("a run cancelled while its op waits for an offloaded op ends", "[offload]") {
  fixture f;
  net init("init");
  init.op("ConstantFill", {}, {"x"}, {{"value", i64{1}}});
  net hold("hold");
  hold.op("UntilStopped", {"x"}, {});
  net then("then");
  then.op("Bump", {"x"}, {"x"});
  task ta("a", step("a").add_net(init).add_net(hold));
  task_group g(workspace_type::global);
  f.session.node_workspace("n")->set<i64>("x", 0);
  REQUIRE_OK(g.add(ta, node("n")));
  REQUIRE_OK(g.add(when_held("b", then), node("n")));
  run_options o;
  o.timeout = 50ms;
  auto r = f.run(g, o);
  REQUIRE_FALSE(r);
  CHECK(f.p.saw_stop);
}

TEST_CASE("a kernel that ignores the stop request delays the cancelled run until it returns", "[offload]") {
  fixture f;
  net n("n");
  n.op("Stubborn", {}, {});
  task t("t", step("t").add_net(n));
  task_group g;
  REQUIRE_OK(g.add(t, node("n")));
  run_options o;
  o.timeout = 5ms;
  auto r = f.run(g, o);
  REQUIRE_FALSE(r);
  CHECK(f.p.kernel_returned);  // the run did not end before its kernel
}

TEST_CASE("an offloaded kernel that throws fails its op with the message and changes no output", "[offload]") {
  fixture f;
  net init("init");
  init.op("ConstantFill", {}, {"z"}, {{"value", i64{3}}});
  net n("n");
  n.op("Throw", {}, {"z"});
  task t("t", step("t").add_net(init).add_net(n));
  task_group g(workspace_type::global);
  REQUIRE_OK(g.add(t, node("n")));
  auto r = f.run(g);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("net \"n\" op #0 (Throw): boom"));
  CHECK(*f.session.node_workspace("n")->get<i64>("z").value() == 3);
}

TEST_CASE("only synchronous kernels can be offloaded: the error names the op", "[offload]") {
  probe p;
  const operator_registry r = registry_for(p);
  auto ws = workspace::make("w");
  SECTION("a schema marked offload with a coroutine kernel") {
    net n("n");
    n.op("AsyncOffloaded", {}, {});
    auto inst = ws->create_net(n, r);
    REQUIRE_FALSE(inst);
    CHECK(inst.error().code == make_error_code(errc::bad_argument));
    CHECK_THAT(inst.error().message, Catch::Contains("net \"n\" op #0 (AsyncOffloaded): cannot be offloaded"));
  }
  SECTION("an op definition asking to offload a callback-form kernel") {
    net n("n");
    op_def d{"Sleep", {}, {}, {{"ms", i64{1}}}, nullptr};
    d.offload = true;
    n.add(d);
    auto inst = ws->create_net(n, r);
    REQUIRE_FALSE(inst);
    CHECK_THAT(inst.error().message, Catch::Contains("op #0 (Sleep): cannot be offloaded"));
  }
}

TEST_CASE("any synchronous op can be offloaded by its definition; the default compute executor", "[offload]") {
  asio::io_context io;
  local_session s(io.get_executor());  // no compute executor set
  net n("n");
  op_def d{"Add", {"a", "b"}, {"c"}, {}, nullptr};
  d.offload = true;
  n.op("ConstantFill", {}, {"a"}, {{"value", i64{2}}}).op("ConstantFill", {}, {"b"}, {{"value", i64{40}}}).add(d);
  task t("t", step("t").add_net(n));
  auto c = t.output<i64>("c");
  task_group g;
  REQUIRE_OK(g.add(t));
  REQUIRE_OK(test::run(io, test::run_async(s, g)));
  CHECK(c.get().value() == 42);
}

TEST_CASE("generated sibling tasks read and write the offloaded ops' blobs", "[offload]") {
  // Tasks of one node over blobs b0..b3: offloaded SumTwice ops (which
  // fail if an input changes under them), strand Adds and Sleeps. The run
  // must succeed, and ThreadSanitizer must see no race.
  const std::uint64_t seed = GENERATE(range(std::uint64_t{1}, std::uint64_t{33}));
  INFO("seed " << seed << " (offload_test generated siblings)");
  std::mt19937_64 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  auto blob_name = [](int i) { return "b" + std::to_string(i); };
  fixture f;
  task_group g(workspace_type::global);
  // In the node workspace before the run: every net binds them.
  for (int i = 0; i < 4; ++i) f.session.node_workspace("n")->set<i64>(blob_name(i), i64{i + 1});
  const int tasks = 2 + pick(4);
  for (int k = 0; k < tasks; ++k) {
    execution_step s = step("t" + std::to_string(k));
    const int nets = 1 + pick(4);
    for (int j = 0; j < nets; ++j) {
      net n("t" + std::to_string(k) + "_" + std::to_string(j));
      n.op("Sleep", {}, {}, {{"ms", i64{pick(2)}}});
      switch (pick(3)) {
        case 0: {
          std::vector<std::string> in;
          for (int q = 0, m = 1 + pick(3); q < m; ++q) in.push_back(blob_name(pick(4)));
          n.add(op_def{"SumTwice", in, {blob_name(pick(4))}, {}, nullptr});
          break;
        }
        case 1: n.op("Add", {blob_name(pick(4)), blob_name(pick(4))}, {blob_name(pick(4))}); break;
        default: n.op("Negate", {blob_name(pick(4))}, {blob_name(pick(4))}); break;
      }
      s.add_net(n);
    }
    REQUIRE_OK(g.add(task("t" + std::to_string(k), s.iterations(1 + pick(3))), node("n")));
  }
  auto r = f.run(g);
  INFO((r ? std::string() : r.error().message));
  REQUIRE_OK(r);
}

TEST_CASE("Hash: FNV-1a of the input repeated `rounds` times, on generated strings", "[offload]") {
  const std::uint64_t seed = GENERATE(range(std::uint64_t{1}, std::uint64_t{6}));
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  std::string text(rng() % 40, '\0');
  for (char& c : text) c = static_cast<char>(rng() % 256);
  const i64 rounds = 1 + static_cast<i64>(rng() % 20);
  // The model: plain FNV-1a over the repeated bytes.
  std::string repeated;
  for (i64 k = 0; k < rounds; ++k) repeated += text;
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : repeated) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  asio::io_context io;
  local_session s(io.get_executor());
  net n("n");
  n.op("Hash", {"text"}, {"h"}, {{"rounds", rounds}});
  task t("t", step("t").add_net(n));
  auto out = t.output<i64>("h");
  task_group g;
  REQUIRE_OK(g.input<std::string>("text"));
  REQUIRE_OK(g.add(t));
  run_options o;
  o.feeds.set("local", "text", text);
  REQUIRE_OK(test::run(io, test::run_async(s, g, o)));
  CHECK(static_cast<std::uint64_t>(out.get().value()) == h);
}

TEST_CASE("Hash: the known FNV-1a vector, and its errors", "[offload]") {
  auto ws = workspace::make("w");
  ws->set<std::string>("a", "a");
  ws->set<i64>("i", 1);
  net n("n");
  n.op("Hash", {"a"}, {"h"});
  auto inst = ws->create_net(n);
  REQUIRE_OK(inst);
  asio::io_context io;
  REQUIRE_OK(test::run(io, inst.value()->run()));
  CHECK(static_cast<std::uint64_t>(*ws->get<i64>("h").value()) == 0xaf63dc4c8601ec8cULL);
  net bad("bad");
  bad.op("Hash", {"a"}, {"h"}, {{"rounds", i64{0}}});
  auto b = ws->create_net(bad);
  REQUIRE_FALSE(b);
  CHECK_THAT(b.error().message, Catch::Contains("rounds must be at least 1, got 0"));
  net wrong("wrong");
  wrong.op("Hash", {"i"}, {"h"});
  auto w = ws->create_net(wrong);
  REQUIRE_OK(w);
  auto st = test::run(io, w.value()->run());
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error().message, Catch::Contains("net \"wrong\" op #0 (Hash): input #0 \"i\""));
}

TEST_CASE("a plan op says \"offload\": read, run and written back", "[offload]") {
  const std::string text = R"({"taskgroup_plan": 1, "nets": [{"name": "n", "ops": [
      {"type": "ConstantFill", "outputs": ["a"], "args": {"value": 1}},
      {"type": "Negate", "inputs": ["a"], "outputs": ["b"], "offload": true}]}],
    "tasks": [{"name": "t", "step": {"name": "t", "nets": ["n"]}, "outputs": ["b"]}]})";
  auto plan = read_plan(std::string_view(text));
  REQUIRE_OK(plan);
  auto written = write_plan(plan.value());
  REQUIRE_OK(written);
  CHECK_THAT(written.value(), Catch::Contains("\"offload\": true"));
  asio::io_context io;
  local_session s(io.get_executor());
  auto r = test::run(io, test::run_async(s, plan.value()));
  REQUIRE_OK(r);
  const std::string bad =
      R"({"taskgroup_plan": 1, "nets": [{"name": "n", "ops": [{"type": "Negate", "inputs": ["a"], "outputs": ["b"], "offload": 1}]}],
    "tasks": []})";
  auto e = read_plan(std::string_view(bad));
  REQUIRE_FALSE(e);
  CHECK_THAT(e.error().message, Catch::Contains("/nets/0/ops/0/offload"));
}
