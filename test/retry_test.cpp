// Retry policies (task::retry, execution_step::retry) and the run context
// ops see (op_context::run): generated groups of failing tasks against a
// model of their attempts, on both drivers and on 1 and 2 threads, with
// GLOBAL and PRIVATE workspaces; cancellation and deadlines at generated
// points; step retries (their own timeouts included); what each attempt
// starts from; the diagnosis of a task waiting to retry.
#include <taskgroup/builtin_ops.hpp>
#include <taskgroup/net.hpp>
#include <taskgroup/run_probe.hpp>
#include <taskgroup/session.hpp>
#include <taskgroup/task_group.hpp>

#include "detail/test_hooks.hpp"
#include "support/checks.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace taskgroup;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using i64 = std::int64_t;

namespace {

// A run's report, whatever its outcome.
run_report rt_run(local_session& s, task_group g, run_options o = {}) {
  boost::system::error_code ec;
  return s.run(std::move(g), std::move(o), ec);
}

retry_policy rt_policy(int attempts, std::chrono::milliseconds backoff = 1ms, double multiplier = 1.0,
                       bool jitter = false) {
  retry_policy p;
  p.max_attempts = attempts;
  p.initial_backoff = backoff;
  p.multiplier = multiplier;
  p.max_backoff = std::max(backoff, 5ms);
  p.jitter = jitter;
  return p;
}

// A one-task group on node "local": task "t", step "s", one net of a
// FailTimes failing `times` runs with `message`, under `policy`.
task_group rt_flaky(i64 times, const retry_policy& policy, const std::string& message = "Fail operator") {
  net n("work");
  n.op("FailTimes", {}, {}, {{"times", times}, {"message", message}});
  task_group g;
  REQUIRE(g.add(task("t", step("s").add_net(n)).retry(policy)));
  return g;
}

// The model of one generated task: FailTimes `fails` under `policy`.
struct rt_case_task {
  int fails = 0;
  retry_policy policy;
  bool global = false;
  int node = 0;
};

struct rt_expect {
  int attempts;
  bool succeeds;
};

rt_expect rt_model(const rt_case_task& t) {
  const bool retried = t.policy.retries_on(errc::op_failed);
  const int attempts = retried ? std::min(t.fails + 1, t.policy.max_attempts) : 1;
  return {attempts, t.fails < attempts};
}

// The least time the waits of `attempts` attempts take (without jitter).
std::chrono::microseconds rt_least_wait(const retry_policy& p, int attempts) {
  std::chrono::microseconds sum{0};
  for (int a = 1; a < attempts; ++a) sum += p.backoff(a);
  return p.jitter ? std::chrono::microseconds{0} : sum;
}

}  // namespace

TEST_CASE("retried tasks match the model of their attempts, on both drivers", "[retry]") {
  auto& hooks = detail::test_driver_hooks();
  const std::uint64_t base = std::random_device{}();
  for (int round = 0; round < 48; ++round) {
    const std::uint64_t seed = base + static_cast<std::uint64_t>(round);
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const int threads = pick(1, 2);
    const bool coroutine_only = pick(0, 1) == 1;
    INFO(threads << " threads, " << (coroutine_only ? "coroutine driver" : "automatic driver"));
    std::vector<rt_case_task> cases(static_cast<std::size_t>(pick(1, 5)));
    // A group's tasks are all PRIVATE or all GLOBAL.
    const bool global = pick(0, 1) == 1;
    task_group g(global ? workspace_type::global : workspace_type::private_);
    for (std::size_t i = 0; i < cases.size(); ++i) {
      rt_case_task& c = cases[i];
      c.fails = pick(0, 6);
      c.policy =
          rt_policy(pick(1, 5), std::chrono::milliseconds(pick(0, 2)), pick(0, 1) == 1 ? 1.0 : 2.0, pick(0, 3) == 0);
      if (pick(0, 4) == 0) c.policy.retry_on = {errc::timeout};  // op_failed is then final
      c.global = global;
      c.node = pick(0, 1);
      net n("work" + std::to_string(i));
      n.op("FailTimes", {}, {}, {{"times", i64{c.fails}}, {"message", std::string("flaky")}});
      task t("t" + std::to_string(i), step("s" + std::to_string(i)).add_net(n));
      t.retry(c.policy);
      REQUIRE(g.add(std::move(t), node("n" + std::to_string(c.node))));
    }
    hooks.coroutine_only = coroutine_only;
    local_session session(threads);
    run_options o;
    o.policy = run_policy::gather;
    const run_report r = rt_run(session, g, o);
    hooks.coroutine_only = false;
    REQUIRE(r.tasks.size() == cases.size());
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const rt_case_task& c = cases[i];
      const task_report& t = r.tasks[i];
      const rt_expect want = rt_model(c);
      INFO("task " << t.name << ": fails " << c.fails << ", max_attempts " << c.policy.max_attempts);
      CHECK(t.attempts == want.attempts);
      CHECK(t.status == (want.succeeds ? task_status::succeeded : task_status::failed));
      // The failed attempts before the last one: the first and the latest 4.
      const int failed_before_last = want.attempts - 1;
      const std::vector<error>& failures = r.attempt_failures(i);
      CHECK(failures.size() == static_cast<std::size_t>(std::min(failed_before_last, 5)));
      for (std::size_t a = 0; a < failures.size(); ++a) {
        CHECK(failures[a].code == errc::op_failed);
        // The first kept is attempt 1; the rest are the latest.
        const int attempt =
            a == 0 ? 1 : failed_before_last - static_cast<int>(failures.size()) + 1 + static_cast<int>(a);
        CHECK_THAT(failures[a].message,
                   Catch::Contains("flaky (run " + std::to_string(attempt) + " of the " + std::to_string(c.fails)));
      }
      if (!want.succeeds) {
        REQUIRE(t.failure);
        CHECK_THAT(t.failure->message, Catch::Contains("(run " + std::to_string(want.attempts) + " of the"));
      }
      CHECK(t.duration() >= rt_least_wait(c.policy, want.attempts));
    }
  }
}

TEST_CASE("a retry wait ends at once when the run is cancelled, on both drivers", "[retry]") {
  auto& hooks = detail::test_driver_hooks();
  const std::uint64_t base = std::random_device{}();
  for (int round = 0; round < 12; ++round) {
    const std::uint64_t seed = base + static_cast<std::uint64_t>(round);
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    const bool coroutine_only = (rng() & 1) != 0;
    const auto cancel_after = std::chrono::milliseconds(rng() % 30);
    INFO((coroutine_only ? "coroutine driver" : "automatic driver")
         << ", cancelled after " << cancel_after.count() << " ms");
    const task_group g = rt_flaky(100, rt_policy(5, 3600s));
    hooks.coroutine_only = coroutine_only;
    local_session session(1);
    asio::cancellation_signal cancel;
    std::promise<run_report> done;
    session.async_run(g, {}, asio::bind_cancellation_slot(cancel.slot(), [&](boost::system::error_code, run_report r) {
                        done.set_value(std::move(r));
                      }));
    std::this_thread::sleep_for(cancel_after);
    cancel.emit(asio::cancellation_type::terminal);
    std::future<run_report> ending = done.get_future();
    // A wait of an hour that is not ended at once would hold the run.
    REQUIRE(ending.wait_for(60s) == std::future_status::ready);
    const std::optional<run_report> got = ending.get();
    hooks.coroutine_only = false;
    REQUIRE(got->tasks.size() == 1);
    const task_report& t = got->tasks[0];
    // Cancelled before the run started, before the task began, or while
    // it waited to retry.
    CHECK((t.status == task_status::cancelled || t.status == task_status::not_run));
    CHECK(t.attempts <= 1);
    if (t.attempts == 1) {
      // It had failed its first attempt and waited.
      REQUIRE(t.failure);
      CHECK_THAT(t.failure->message, Catch::Contains("s: cancelled: waiting to retry (attempt 2 of 5, "));
      CHECK_THAT(t.failure->message, Catch::Contains("ms left) after: "));
      // The run's own error says where it stood.
      REQUIRE(got->failure);
      CHECK_THAT(got->failure->message,
                 Catch::StartsWith("run cancelled; still running then: ") && Catch::Contains("waiting to retry"));
    }
  }
}

TEST_CASE("a retry wait that would pass the run's deadline is not started", "[retry]") {
  auto& hooks = detail::test_driver_hooks();
  for (const bool coroutine_only : {false, true}) {
    INFO((coroutine_only ? "coroutine driver" : "automatic driver"));
    // Attempts fail at once and wait 200 ms, so the deadline at 1000 ms
    // almost always falls in a wait the run declines to start. On a
    // stalled machine it can fall while an attempt runs instead: then the
    // run is stopping when the attempt fails, nothing is retried, and the
    // run ends timed out. Such a try proves nothing here; try again.
    bool seen = false;
    for (int attempt_run = 0; attempt_run < 5 && !seen; ++attempt_run) {
      const task_group g = rt_flaky(1000, rt_policy(50, 200ms), "down");
      hooks.coroutine_only = coroutine_only;
      local_session session(1);
      run_options o;
      o.timeout = 1000ms;
      const auto began = std::chrono::steady_clock::now();
      const run_report r = rt_run(session, g, o);
      hooks.coroutine_only = false;
      REQUIRE(r.tasks.size() == 1);
      const task_report& t = r.tasks[0];
      CHECK(t.status == task_status::failed);
      REQUIRE(t.failure);
      // The task's own failure, never the deadline's.
      CHECK(t.failure->code == errc::op_failed);
      CHECK(t.attempts >= 2);
      CHECK(t.attempts < 50);
      CHECK(std::chrono::steady_clock::now() - began < 1000ms + 30s);
      seen = t.failure->message.find("would start after the run's deadline") != std::string::npos;
      if (!seen) {
        INFO("try " << attempt_run << ": " << t.failure->message);
        REQUIRE(r.failure);
        CHECK(r.failure->code == errc::timeout);
      } else {
        CHECK_THAT(t.failure->message, Catch::Contains(", after a wait of 200 ms, would start after"));
      }
    }
    CHECK(seen);
  }
}

TEST_CASE("a policy never retries a cancellation, a code it does not name, or a task that succeeded", "[retry]") {
  local_session session(1);
  // Not named: retry_on {timeout} and an op_failed failure.
  {
    retry_policy p = rt_policy(3);
    p.retry_on = {errc::timeout};
    const task_group g = rt_flaky(1, p);
    const run_report r = rt_run(session, g);
    CHECK(r.tasks[0].status == task_status::failed);
    CHECK(r.tasks[0].attempts == 1);
  }
  // A bad argument is the net's own error at binding: never retried.
  {
    const task_group g = rt_flaky(-1, rt_policy(3));
    const run_report r = rt_run(session, g);
    CHECK(r.tasks[0].status == task_status::failed);
    CHECK(r.tasks[0].attempts == 1);
    REQUIRE(r.tasks[0].failure);
    CHECK_THAT(r.tasks[0].failure->message, Catch::Contains("argument \"times\" must be in [0, "));
  }
}

TEST_CASE("an invalid policy is refused before the group runs, naming the task or step and the field", "[retry]") {
  local_session session(1);
  struct bad {
    retry_policy p;
    std::string says;
  };
  retry_policy zero;
  zero.max_attempts = 0;
  retry_policy many;
  many.max_attempts = 1001;
  retry_policy negative;
  negative.initial_backoff = -1ms;
  retry_policy slow;
  slow.max_backoff = max_duration + 1ms;
  retry_policy shrinking;
  shrinking.multiplier = 0.5;
  retry_policy nan;
  nan.multiplier = std::numeric_limits<double>::quiet_NaN();
  retry_policy cancelled;
  cancelled.retry_on = {errc::cancelled};
  const std::vector<bad> cases = {
      {zero, "retry: max_attempts must be in [1, 1000], got 0"},
      {many, "retry: max_attempts must be in [1, 1000], got 1001"},
      {negative, "retry: initial_backoff must be >= 0 ms, got -1"},
      {slow, "retry: max_backoff must be at most 1099511627776 ms"},
      {shrinking, "retry: multiplier must be finite and >= 1, got 0.5"},
      {nan, "retry: multiplier must be finite and >= 1, got nan"},
      {cancelled, "retry: retry_on must not hold cancelled: it is never retried"},
  };
  for (const bad& b : cases) {
    INFO(b.says);
    net n("work");
    n.op("Fail", {}, {});
    // Refused as the task joins its group (its first check), or else at
    // the group's first run.
    auto refused = [&](task t) -> std::optional<error> {
      task_group g;
      if (auto added = g.add(std::move(t)); !added) return added.error();
      const run_report r = rt_run(session, g);
      return r.failure;
    };
    const std::optional<error> on_task = refused(task("t", step("s").add_net(n)).retry(b.p));
    REQUIRE(on_task);
    CHECK(on_task->code == errc::invalid_task);
    CHECK_THAT(on_task->message, Catch::Contains("task \"local/t\": " + b.says));
    const std::optional<error> on_step = refused(task("t", step("s").add_substep(step("inner").add_net(n).retry(b.p))));
    REQUIRE(on_step);
    CHECK_THAT(on_step->message, Catch::Contains("step \"s/inner\": " + b.says));
  }
}

TEST_CASE("each attempt of a task starts clean: a fresh PRIVATE workspace, empty declared outputs", "[retry]") {
  auto& hooks = detail::test_driver_hooks();
  for (const bool coroutine_only : {false, true}) {
    for (const bool global : {false, true}) {
      INFO((coroutine_only ? "coroutine driver" : "automatic driver") << (global ? ", GLOBAL" : ", PRIVATE"));
      // Attempt 1 writes the output and a scratch blob, then fails; attempt
      // 2 finds neither (PRIVATE) and writes nothing.
      auto seen = std::make_shared<std::vector<std::pair<int, bool>>>();  // attempt, scratch seen
      net n("work");
      n.lambda("Attempt", {}, {}, [seen](op_context& ctx) -> status {
        const int a = ctx.run().attempt();
        seen->emplace_back(a, ctx.ws().has("scratch"));
        if (a == 1) {
          ctx.ws().create("scratch").set<i64>(1);
          ctx.ws().create("out").set<i64>(41);
        }
        return ok();
      });
      n.op("FailTimes", {}, {}, {{"times", i64{1}}});
      task t("t", step("s").add_net(n));
      t.retry(rt_policy(2)).workspace_type(global ? workspace_type::global : workspace_type::private_);
      t.declare_output({"out"});
      task_group g;
      REQUIRE(g.add(std::move(t)));
      hooks.coroutine_only = coroutine_only;
      local_session session(1);
      const run_report r = rt_run(session, g);
      hooks.coroutine_only = false;
      REQUIRE(r.tasks.size() == 1);
      CHECK(r.tasks[0].status == task_status::succeeded);
      CHECK(r.tasks[0].attempts == 2);
      REQUIRE(seen->size() == 2);
      CHECK((*seen)[0] == std::pair{1, false});
      // GLOBAL: the node's blob stays (documented); PRIVATE: a fresh workspace.
      CHECK((*seen)[1] == std::pair{2, global});
      // The failed attempt's output never reaches the report.
      CHECK(r.tasks[0].outputs.empty());
      REQUIRE(r.tasks[0].output_errors.size() == 1);
      CHECK_THAT(r.tasks[0].output_errors[0].second.message, Catch::Contains("has no value"));
    }
  }
}

TEST_CASE("a retried step runs its subtree again, its own timeout included, never the run's deadline",
          "[retry][step]") {
  local_session session(2);
  // FailTimes in a step with its own workspace: three attempts, each an
  // execution the observer sees, with the waits between them.
  {
    struct rt_observer : run_observer {
      std::mutex m;
      int begins = 0;
      std::vector<int> waits;
      void step_begin(const event_source&, std::string_view step) override {
        const std::lock_guard hold(m);
        if (step == "flaky") ++begins;
      }
      void retry_wait(const event_source&, std::string_view step, int next, int max, std::chrono::microseconds,
                      const error& after) override {
        const std::lock_guard hold(m);
        CHECK(step == "flaky");
        CHECK(max == 4);
        CHECK(after.code == errc::op_failed);
        waits.push_back(next);
      }
    } obs;
    net n("work");
    n.op("FailTimes", {}, {}, {{"times", i64{2}}});
    task_group g;
    REQUIRE(g.add(
        task("t", step("root").add_substep(step("flaky").add_net(n).create_workspace(true).retry(rt_policy(4))))));
    run_options o;
    o.observer = &obs;
    const run_report r = rt_run(session, g, o);
    CHECK(r.ok());
    CHECK(obs.begins == 3);
    CHECK(obs.waits == std::vector<int>{2, 3});
    // A step's attempts are not the task's.
    CHECK(r.tasks[0].attempts == 1);
  }
  // The step's own timeout ends attempt 1 (its op waits an hour); attempt 2
  // is quick.
  {
    net n("work");
    n.lambda("SlowFirst", {}, {}, [](op_context& ctx) -> asio::awaitable<status> {
      if (ctx.run().attempt() == 1) {
        asio::steady_timer t(co_await asio::this_coro::executor, 3600s);
        co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
        co_return fail(errc::cancelled, "cut short");
      }
      co_return ok();
    });
    task_group g;
    REQUIRE(g.add(task("t", step("root").add_substep(step("slow").add_net(n).timeout(50ms).retry(rt_policy(3))))));
    const run_report r = rt_run(session, g);
    CHECK(r.ok());
  }
  // The run's deadline is never retried: one attempt, the run times out.
  {
    net n("work");
    n.op("Sleep", {}, {}, {{"ms", i64{3600000}}});
    task_group g;
    REQUIRE(g.add(task("t", step("root").add_substep(step("nap").add_net(n).retry(rt_policy(5))))));
    run_options o;
    o.timeout = 100ms;
    const auto began = std::chrono::steady_clock::now();
    const run_report r = rt_run(session, g, o);
    REQUIRE(r.failure);
    CHECK(r.failure->code == errc::timeout);
    CHECK(r.tasks[0].status == task_status::cancelled);
    CHECK(std::chrono::steady_clock::now() - began < 30s);
  }
}

TEST_CASE("a task waiting to retry is described by the probe", "[retry][probe]") {
  auto& hooks = detail::test_driver_hooks();
  for (const bool coroutine_only : {false, true}) {
    INFO((coroutine_only ? "coroutine driver" : "automatic driver"));
    const task_group g = rt_flaky(1, rt_policy(3, 3600s), "service down");
    hooks.coroutine_only = coroutine_only;
    local_session session(1);
    run_probe probe;
    run_options o;
    o.probe = &probe;
    asio::cancellation_signal cancel;
    std::promise<run_report> done;
    session.async_run(g, o, asio::bind_cancellation_slot(cancel.slot(), [&](boost::system::error_code, run_report r) {
                        done.set_value(std::move(r));
                      }));
    std::vector<std::string> lines;
    const auto began = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - began < 60s) {
      lines = probe.async_where(asio::use_future).get();
      if (!lines.empty() && lines[0].find("waiting to retry") != std::string::npos) break;
      std::this_thread::sleep_for(1ms);
    }
    REQUIRE(lines.size() == 1);
    CHECK_THAT(lines[0], Catch::StartsWith("task \"local/t\" (node \"local\"): s: waiting to retry (attempt 2 of 3, "));
    CHECK_THAT(lines[0], Catch::Contains(" ms left) after: "));
    CHECK_THAT(lines[0], Catch::Contains("service down (run 1 of the 1 that fail)"));
    cancel.emit(asio::cancellation_type::terminal);
    const run_report r = done.get_future().get();
    hooks.coroutine_only = false;
    CHECK(r.tasks[0].status == task_status::cancelled);
  }
}

TEST_CASE("every op call sees the run it serves: identity, deadline, attempt", "[retry][run_context]") {
  struct sighting {
    std::uint64_t id;
    bool deadline;
    int attempt;
    int max;
  };
  auto seen = std::make_shared<std::mutex>();
  auto log = std::make_shared<std::vector<sighting>>();
  auto record = [seen, log](const run_context& c) {
    const std::lock_guard hold(*seen);
    log->push_back({c.id(), c.deadline().has_value(), c.attempt(), c.max_attempts()});
  };
  net sync_net("sync");
  sync_net.lambda("Sync", {}, {}, [record](op_context& ctx) -> status {
    record(ctx.run());
    return ok();
  });
  net async_net("async");
  async_net.lambda("Async", {}, {}, [record](op_context& ctx) -> asio::awaitable<status> {
    record(ctx.run());  // before its first suspension
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
    co_return ok();
  });
  net offloaded("offloaded");
  {
    net tmp("tmp");
    tmp.lambda("Off", {}, {}, [record](op_context& ctx) -> status {
      record(ctx.run());
      return ok();
    });
    op_def d = tmp.ops()[0];
    d.offload = true;
    offloaded.add(d);
  }
  net flaky("flaky");
  flaky.op("FailTimes", {}, {}, {{"times", i64{2}}});
  local_session session(2);
  for (const bool global : {false, true}) {
    INFO((global ? "GLOBAL" : "PRIVATE"));
    task_group g(global ? workspace_type::global : workspace_type::private_);
    REQUIRE(g.add(task("a", step("a").add_net(sync_net)), node("n0")));
    REQUIRE(g.add(task("b", step("b").add_net(async_net)), node("n1")));
    REQUIRE(g.add(task("c", step("c").add_net(offloaded)), node("n0")));
    REQUIRE(g.add(task("d", step("d").add_net(sync_net).add_net(flaky)).retry(rt_policy(3)), node("n1")));
    log->clear();
    REQUIRE(rt_run(session, g).ok());
    const std::vector<sighting> first = *log;
    // a, b, c once each; d's three attempts.
    REQUIRE(first.size() == 6);
    for (const sighting& s : first) {
      CHECK(s.id == first[0].id);
      CHECK(s.id != 0);
      CHECK_FALSE(s.deadline);
    }
    std::vector<std::pair<int, int>> attempts;
    for (const sighting& s : first) attempts.emplace_back(s.attempt, s.max);
    std::sort(attempts.begin(), attempts.end());
    CHECK(attempts == std::vector<std::pair<int, int>>{{1, 1}, {1, 1}, {1, 1}, {1, 3}, {2, 3}, {3, 3}});
    // Another run of the same group (its nets cached, or bound in the
    // node's workspace) is another run, here with a deadline.
    log->clear();
    run_options o;
    o.timeout = 3600s;
    REQUIRE(rt_run(session, g, o).ok());
    REQUIRE(log->size() == 6);
    for (const sighting& s : *log) {
      CHECK(s.id != first[0].id);
      CHECK(s.deadline);
    }
  }
  // Outside a session's run: no run.
  auto ws = workspace::make("w");
  auto inst = ws->create_net(sync_net);
  REQUIRE(inst);
  log->clear();
  REQUIRE(inst.value()->run_sync());
  REQUIRE(log->size() == 1);
  CHECK((*log)[0].id == 0);
  CHECK((*log)[0].attempt == 1);
}

TEST_CASE("retry_policy's waits: capped exponential backoff, full jitter within it", "[retry]") {
  const std::uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 200; ++round) {
    retry_policy p;
    p.initial_backoff = std::chrono::milliseconds(rng() % 100);
    p.multiplier = 1.0 + static_cast<double>(rng() % 40) / 10.0;
    p.max_backoff = std::chrono::milliseconds(rng() % 5000);
    p.jitter = (rng() & 1) != 0;
    REQUIRE(p.fault().empty());
    double model = static_cast<double>(p.initial_backoff.count());
    for (int a = 1; a <= 12; ++a) {
      const auto want =
          std::chrono::milliseconds(static_cast<i64>(std::min(model, static_cast<double>(p.max_backoff.count()))));
      CHECK(p.backoff(a) == want);
      const std::chrono::microseconds w = p.wait_before(a, rng());
      if (p.jitter) {
        CHECK(w >= 0us);
        CHECK(w <= want);
      } else {
        CHECK(w == want);
      }
      model *= p.multiplier;
    }
  }
  // A huge multiplier saturates at the cap instead of overflowing.
  retry_policy big;
  big.multiplier = 1e300;
  big.max_backoff = max_duration;
  CHECK(big.backoff(1000) == max_duration);
}

TEST_CASE("the observer hears a retried task begin once, wait before each retry, and end once", "[retry][observer]") {
  auto& hooks = detail::test_driver_hooks();
  for (const bool coroutine_only : {false, true}) {
    INFO((coroutine_only ? "coroutine driver" : "automatic driver"));
    struct rt_task_observer : run_observer {
      std::mutex m;
      std::vector<std::string> events;
      void task_begin(const event_source& at) override {
        const std::lock_guard hold(m);
        events.push_back("begin " + std::string(at.task));
      }
      void retry_wait(const event_source& at, std::string_view step, int next, int max, std::chrono::microseconds wait,
                      const error& after) override {
        const std::lock_guard hold(m);
        CHECK(step.empty());
        CHECK(wait <= 5ms);
        CHECK(after.code == errc::op_failed);
        events.push_back("wait " + std::string(at.task) + " " + std::to_string(next) + "/" + std::to_string(max));
      }
      void task_end(const event_source& /*at*/, const task_report& r) override {
        const std::lock_guard hold(m);
        events.push_back("end " + r.name + " " + std::to_string(r.attempts));
      }
    } obs;
    const task_group g = rt_flaky(2, rt_policy(4, 2ms, 2.0, true));
    hooks.coroutine_only = coroutine_only;
    local_session session(1);
    run_options o;
    o.observer = &obs;
    const run_report r = rt_run(session, g, o);
    hooks.coroutine_only = false;
    CHECK(r.ok());
    CHECK(obs.events ==
          std::vector<std::string>{"begin local/t", "wait local/t 2/4", "wait local/t 3/4", "end local/t 3"});
  }
}

TEST_CASE("every task begins and ends once for the observer, whichever driver takes it", "[retry][observer]") {
  struct rt_count_observer : run_observer {
    std::mutex m;
    std::map<std::string, int> begins;
    std::map<std::string, int> ends;
    void task_begin(const event_source& at) override {
      const std::lock_guard hold(m);
      ++begins[std::string(at.task)];
    }
    void task_end(const event_source& /*at*/, const task_report& r) override {
      const std::lock_guard hold(m);
      ++ends[r.name];
    }
  } obs;
  // A task the frame-free driver takes, one it declines once bound (a
  // coroutine-form op), each with and without a policy that retries.
  // (Each its own nets: tasks that share a net share its FailTimes count.)
  auto sync_net = [](const std::string& name) {
    net n(name);
    n.op("FailTimes", {}, {}, {{"times", i64{1}}});
    return n;
  };
  auto async_net = [](const std::string& name) {
    net n(name);
    n.lambda("Later", {}, {}, [](op_context&) -> asio::awaitable<status> {
      co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
      co_return ok();
    });
    n.op("FailTimes", {}, {}, {{"times", i64{1}}});
    return n;
  };
  task_group g;
  REQUIRE(g.add(task("inline", step("a").add_net(sync_net("a"))).retry(rt_policy(2))));
  REQUIRE(g.add(task("declined", step("b").add_net(async_net("b"))).retry(rt_policy(2))));
  REQUIRE(g.add(task("inline_once", step("c").add_net(sync_net("c")))));
  REQUIRE(g.add(task("declined_once", step("d").add_net(async_net("d")))));
  local_session session(1);
  run_options o;
  o.observer = &obs;
  o.policy = run_policy::gather;
  const run_report r = rt_run(session, g, o);
  const std::map<std::string, int> once = {
      {"local/inline", 1}, {"local/declined", 1}, {"local/inline_once", 1}, {"local/declined_once", 1}};
  CHECK(obs.begins == once);
  CHECK(obs.ends == once);
  CHECK(r.tasks[0].status == task_status::succeeded);
  CHECK(r.tasks[0].attempts == 2);
  CHECK(r.tasks[1].status == task_status::succeeded);
  CHECK(r.tasks[1].attempts == 2);
  CHECK(r.tasks[2].status == task_status::failed);
  CHECK(r.tasks[3].status == task_status::failed);
  for (const task_report& t : r.tasks) CHECK(t.began);
}

TEST_CASE("retried_steps lists every step of a task's work that retries, where it stands", "[retry]") {
  const retry_policy twice = rt_policy(2);
  const retry_policy once = rt_policy(1);  // never retries: not listed
  net n("work");
  n.op("FailTimes", {}, {}, {{"times", i64{0}}});
  task t("t", step("root")
                  .add_substep(step("a").add_net(n).retry(twice))
                  .add_substep(step("b").add_substep(step("c").add_net(n).retry(twice)).retry(once)));
  t.init(body(step("warm").add_net(n).retry(twice)));
  t.report(step("tick").add_net(n).retry(twice), 10ms);
  std::vector<std::string> got;
  for (const retried_step& r : t.retried_steps())
    got.push_back(r.where + r.path + " x" + std::to_string(r.step.retry().max_attempts));
  CHECK(got == std::vector<std::string>{"init warm x2", "root/a x2", "root/b/c x2", "report tick x2"});
  CHECK(retried_steps(step("alone").add_net(n).retry(twice), "here ").front().where == "here ");
  CHECK(retried_steps(step("plain").add_net(n)).empty());
}
