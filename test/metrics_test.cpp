// Session metrics (local_session::metrics, session_metrics): generated
// mixes of runs of every outcome, submitted from 2 threads onto 2 session
// threads, against a model made from their kinds and reports; admission's
// queue waits and shed runs; the label limit; the switch; the histogram's
// buckets against a model; the exposition format (a golden text) and JSON.
#include <taskgroup/builtin_ops.hpp>
#include <taskgroup/net.hpp>
#include <taskgroup/session.hpp>
#include <taskgroup/session_metrics.hpp>
#include <taskgroup/task_group.hpp>

#include "support/checks.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <array>
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

// What a generated run does, and so how it ends.
enum class mt_kind {
  ok,           // 1-3 tasks on 1-2 nodes, each sleeping 0-2 ms: succeeded
  gather_fail,  // one task fails, one succeeds, under gather: succeeded
  fails,        // one task fails under join: failed
  times_out,    // sleeps an hour, the run's timeout 5 ms: timed_out
  cancelled,    // sleeps an hour, cancelled from outside: cancelled
  bad_feed,     // a feed the group does not declare: failed, no task run
  task_retry,   // FailTimes 2 under a task policy of 3 attempts: 2 retried
  step_retry,   // FailTimes 1 under a step policy of 2 attempts: 1 retried
  offload,      // a Hash (offloaded): one offloaded op
};
constexpr int mt_kinds = 9;

retry_policy mt_policy(int attempts) {
  retry_policy p;
  p.max_attempts = attempts;
  p.initial_backoff = 1ms;
  p.jitter = false;
  return p;
}

net mt_sleep_net(const std::string& name, i64 ms) {
  net n(name);
  n.op("Sleep", {}, {}, {{"ms", ms}});
  return n;
}

// A group of `kind` named `name` (generated shape for `ok`).
task_group mt_group(mt_kind kind, const std::string& name, std::mt19937_64& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  task_group g;
  g.name(name);
  switch (kind) {
    case mt_kind::ok: {
      const int tasks = pick(1, 3);
      for (int t = 0; t < tasks; ++t) {
        const std::string node = pick(0, 1) == 0 ? "n0" : "n1";
        REQUIRE(g.add(task("t" + std::to_string(t), step("s").add_net(mt_sleep_net("w", pick(0, 2)))), node));
      }
      break;
    }
    case mt_kind::gather_fail: {
      net bad("bad");
      bad.op("Fail", {}, {}, {{"message", "no"}});
      REQUIRE(g.add(task("bad", step("s").add_net(bad))));
      REQUIRE(g.add(task("good", step("s").add_net(mt_sleep_net("w", 0)))));
      break;
    }
    case mt_kind::fails: {
      net bad("bad");
      bad.op("Fail", {}, {}, {{"message", "no"}});
      REQUIRE(g.add(task("bad", step("s").add_net(bad))));
      break;
    }
    case mt_kind::times_out:
    case mt_kind::cancelled: REQUIRE(g.add(task("hour", step("s").add_net(mt_sleep_net("w", 3'600'000))))); break;
    case mt_kind::bad_feed: REQUIRE(g.add(task("t", step("s").add_net(mt_sleep_net("w", 0))))); break;
    case mt_kind::task_retry: {
      net n("flaky");
      n.op("FailTimes", {}, {}, {{"times", i64{2}}});
      REQUIRE(g.add(task("t", step("s").add_net(n)).retry(mt_policy(3))));
      break;
    }
    case mt_kind::step_retry: {
      net n("flaky");
      n.op("FailTimes", {}, {}, {{"times", i64{1}}});
      REQUIRE(g.add(task("t", step("outer").add_substep(step("s").add_net(n).retry(mt_policy(2))))));
      break;
    }
    case mt_kind::offload: {
      net n("hash");
      n.op("ConstantFill", {}, {"text"}, {{"value", std::string("metrics")}});
      n.op("Hash", {"text"}, {"h"});
      REQUIRE(g.add(task("t", step("s").add_net(n))));
      break;
    }
  }
  return g;
}

run_outcome mt_expected_outcome(mt_kind kind) {
  switch (kind) {
    case mt_kind::fails:
    case mt_kind::bad_feed: return run_outcome::failed;
    case mt_kind::times_out: return run_outcome::timed_out;
    case mt_kind::cancelled: return run_outcome::cancelled;
    default: return run_outcome::succeeded;
  }
}

// Adds what a run of `kind` that ended with `r`, admitted at once, should
// have counted to `m`: the model.
void mt_expect(group_metrics& m, mt_kind kind, const run_report& r) {
  ++m.runs[static_cast<std::size_t>(mt_expected_outcome(kind))];
  m.run_latency.add(std::chrono::duration_cast<std::chrono::nanoseconds>(r.finished - r.arrived));
  m.queue_wait.add(0ns);
  for (const task_report& t : r.tasks) {
    ++m.tasks[static_cast<std::size_t>(t.status)];
    if (t.began) {
      m.task_duration.add(std::chrono::duration_cast<std::chrono::nanoseconds>(t.duration()));
      m.attempts_retried += static_cast<std::uint64_t>(t.attempts - 1);
    }
  }
  if (kind == mt_kind::step_retry) m.attempts_retried += 1;
  if (kind == mt_kind::offload) ++m.offloaded_ops;
}

struct mt_ended {
  mt_kind kind;
  std::string label;
  run_report report;
};

}  // namespace

TEST_CASE("metrics count generated runs of every outcome as their reports say", "[metrics]") {
  const std::uint64_t base = std::random_device{}();
  const std::vector<std::string> labels = {"", "alpha", "beta", "needs \"escaping\" and \\ more"};
  for (int round = 0; round < 6; ++round) {
    const std::uint64_t seed = base + static_cast<std::uint64_t>(round);
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    local_session session(2);
    // The groups, made once each (runs of one group reuse its compilation).
    std::map<std::pair<int, std::size_t>, task_group> groups;
    struct planned {
      mt_kind kind;
      std::size_t label;
      task_group group;
    };
    std::array<std::vector<planned>, 2> per_thread;
    const int runs = pick(20, 60);
    for (int i = 0; i < runs; ++i) {
      const auto kind = static_cast<mt_kind>(pick(0, mt_kinds - 1));
      const auto label = static_cast<std::size_t>(pick(0, static_cast<int>(labels.size()) - 1));
      auto key = std::make_pair(static_cast<int>(kind), label);
      auto it = groups.find(key);
      if (it == groups.end()) it = groups.emplace(key, mt_group(kind, labels[label], rng)).first;
      per_thread[static_cast<std::size_t>(i % 2)].push_back(planned{kind, label, it->second});
    }
    std::mutex lock;
    std::vector<mt_ended> ended;
    std::vector<std::future<void>> all_done;
    auto submit = [&](const std::vector<planned>& mine) {
      std::vector<std::unique_ptr<asio::cancellation_signal>> cancels;
      std::vector<std::future<void>> done;
      for (const planned& p : mine) {
        run_options o;
        if (p.kind == mt_kind::times_out) o.timeout = 5ms;
        if (p.kind == mt_kind::gather_fail) o.policy = run_policy::gather;
        if (p.kind == mt_kind::bad_feed) o.feeds.set("local", "nobody_reads_this", i64{1});
        auto promise = std::make_shared<std::promise<void>>();
        done.push_back(promise->get_future());
        auto handler = [&, p, promise](boost::system::error_code, run_report r) {
          {
            const std::lock_guard hold(lock);
            ended.push_back(mt_ended{p.kind, labels[p.label], std::move(r)});
          }
          promise->set_value();
        };
        if (p.kind == mt_kind::cancelled) {
          cancels.push_back(std::make_unique<asio::cancellation_signal>());
          session.async_run(p.group, o, asio::bind_cancellation_slot(cancels.back()->slot(), handler));
        } else {
          session.async_run(p.group, o, handler);
        }
      }
      // Runs that sleep an hour: cancelled while in flight.
      std::this_thread::sleep_for(2ms);
      for (auto& c : cancels) c->emit(asio::cancellation_type::terminal);
      // Catch's assertions are for the test's own thread: count here.
      int late = 0;
      for (auto& d : done) late += d.wait_for(60s) == std::future_status::ready ? 0 : 1;
      return late;
    };
    int other_late = 0;
    std::thread other([&] { other_late = submit(per_thread[1]); });
    const int late = submit(per_thread[0]);
    other.join();
    REQUIRE(late + other_late == 0);
    REQUIRE(ended.size() == static_cast<std::size_t>(runs));

    std::map<std::string, group_metrics> model;
    for (const mt_ended& e : ended) {
      INFO("a run of kind " << static_cast<int>(e.kind) << " ended with "
                            << (e.report.failure ? e.report.failure->message : std::string("success")));
      CHECK(outcome_of(e.report) == mt_expected_outcome(e.kind));
      group_metrics& m = model[e.label];
      m.group = e.label;
      mt_expect(m, e.kind, e.report);
    }
    const session_metrics got = session.metrics();
    CHECK(got.enabled);
    CHECK(got.runs_in_flight == 0);
    CHECK(got.runs_queued == 0);
    for (const auto& [label, want] : model) {
      INFO("label \"" << label << "\"");
      const group_metrics* g = got.find(label);
      REQUIRE(g != nullptr);
      CHECK(g->runs == want.runs);
      CHECK(g->tasks == want.tasks);
      CHECK(g->attempts_retried == want.attempts_retried);
      CHECK(g->offloaded_ops == want.offloaded_ops);
      CHECK(g->run_latency == want.run_latency);
      CHECK(g->queue_wait == want.queue_wait);
      CHECK(g->task_duration == want.task_duration);
      CHECK(g->offload_wait.count() == want.offloaded_ops);
    }
    // Only the labels runs used (the unnamed one is always there).
    for (const group_metrics& g : got.groups) {
      CHECK((model.count(g.group) == 1 || (g.group.empty() && g.runs_ended() == 0)));
    }
    CHECK(got.total().runs_ended() == static_cast<std::uint64_t>(runs));
  }
}

TEST_CASE("metrics: queue waits, shed runs and the gauges under admission limits", "[metrics]") {
  session_limits limits;
  limits.max_runs_in_flight = 1;
  limits.max_queued = 1;
  local_session session(2, limits);
  // A run that sleeps until the test cancels it.
  task_group holder;
  holder.name("holder");
  REQUIRE(holder.add(task("t", step("s").add_net(mt_sleep_net("w", 3'600'000)))));
  task_group quick;
  quick.name("quick");
  REQUIRE(quick.add(task("t", step("s").add_net(mt_sleep_net("w", 0)))));

  asio::cancellation_signal cancel;
  std::promise<run_report> held_done;
  std::future<run_report> held = held_done.get_future();
  session.async_run(holder, {},
                    asio::bind_cancellation_slot(cancel.slot(), [&](boost::system::error_code, run_report r) {
                      held_done.set_value(std::move(r));
                    }));
  // Wait until it is in flight, then queue one and shed one.
  for (int i = 0; i < 6000 && session.load().in_flight == 0; ++i) std::this_thread::sleep_for(1ms);
  REQUIRE(session.load().in_flight == 1);
  std::future<run_report> queued = session.async_run(quick, asio::use_future);
  for (int i = 0; i < 6000 && session.load().queued == 0; ++i) std::this_thread::sleep_for(1ms);
  boost::system::error_code shed_ec;
  const run_report shed = session.run(quick, {}, shed_ec);
  CHECK(shed_ec == errc::overloaded);

  session_metrics now = session.metrics();
  CHECK(now.runs_in_flight == 1);
  CHECK(now.runs_queued == 1);
  REQUIRE(now.find("quick") != nullptr);
  CHECK(now.find("quick")->runs_of(run_outcome::overloaded) == 1);
  CHECK(now.find("quick")->tasks_of(task_status::not_run) == 1);
  // A shed run is not admitted: no latency, no queue wait.
  CHECK(now.find("quick")->run_latency.count() == 0);

  std::this_thread::sleep_for(20ms);  // the queued run waits at least this long
  // The holder ends, and the queued run is admitted.
  cancel.emit(asio::cancellation_type::terminal);
  REQUIRE(held.wait_for(60s) == std::future_status::ready);
  REQUIRE(queued.wait_for(60s) == std::future_status::ready);
  CHECK(outcome_of(held.get()) == run_outcome::cancelled);
  const run_report second = queued.get();
  CHECK(second.ok());

  now = session.metrics();
  CHECK(now.runs_in_flight == 0);
  CHECK(now.runs_queued == 0);
  const group_metrics* q = now.find("quick");
  REQUIRE(q != nullptr);
  CHECK(q->runs_of(run_outcome::succeeded) == 1);
  CHECK(q->runs_of(run_outcome::overloaded) == 1);
  REQUIRE(q->queue_wait.count() == 1);
  CHECK(q->queue_wait.sum >= 20ms);
  // Its latency counts from its arrival: the wait and its own run.
  CHECK(second.started - second.arrived >= 20ms);
  CHECK(q->run_latency.sum == second.finished - second.arrived);
  CHECK(q->run_latency.sum >= q->queue_wait.sum + (second.finished - second.started));
  const group_metrics* h = now.find("holder");
  REQUIRE(h != nullptr);
  CHECK(h->queue_wait.counts[0] == 1);  // admitted at once
}

TEST_CASE("metrics: a run's latency counts its wait for a busy coordinator", "[metrics]") {
  // One thread, held by a handler for 30 ms before the run arrives: the
  // run is admitted at once but begins only then.
  asio::io_context io;
  local_session session(io.get_executor());
  task_group g;
  g.name("waits");
  REQUIRE(g.add(task("t", step("s").add_net(mt_sleep_net("w", 0)))));
  asio::post(io, [] { std::this_thread::sleep_for(30ms); });
  std::optional<run_report> got;
  session.async_run(g, {}, [&](boost::system::error_code, run_report r) { got = std::move(r); });
  io.run();
  REQUIRE(got.has_value());
  CHECK(got->ok());
  CHECK(got->arrived <= got->started);
  CHECK(got->started - got->arrived >= 30ms);
  const session_metrics m = session.metrics();
  const group_metrics* w = m.find("waits");
  REQUIRE(w != nullptr);
  REQUIRE(w->run_latency.count() == 1);
  CHECK(w->run_latency.sum == got->finished - got->arrived);
  CHECK(w->run_latency.sum >= 30ms);
  CHECK(w->queue_wait.counts[0] == 1);  // no queue: admitted at once
}

TEST_CASE("metrics: at most 256 group names get a label, later ones count under \"other\"", "[metrics]") {
  local_session session(1);
  const int names = static_cast<int>(session_metrics::max_group_labels) + 20;
  for (int i = 0; i < names; ++i) {
    task_group g;
    g.name("g" + std::to_string(i));
    REQUIRE(g.add(task("t", step("s").add_net(mt_sleep_net("w", 0)))));
    REQUIRE(session.run(g).ok());
  }
  task_group unnamed;
  REQUIRE(unnamed.add(task("t", step("s").add_net(mt_sleep_net("w", 0)))));
  REQUIRE(session.run(unnamed).ok());
  // A group named "other" shares the overflow's label.
  task_group other;
  other.name("other");
  REQUIRE(other.add(task("t", step("s").add_net(mt_sleep_net("w", 0)))));
  REQUIRE(session.run(other).ok());

  const session_metrics m = session.metrics();
  CHECK(m.groups.size() == session_metrics::max_group_labels + 2);  // + "" and "other"
  REQUIRE(m.find("other") != nullptr);
  CHECK(m.find("other")->runs_of(run_outcome::succeeded) == 21);
  CHECK(m.find("g255") != nullptr);
  CHECK(m.find("g256") == nullptr);
  REQUIRE(m.find("") != nullptr);
  CHECK(m.find("")->runs_of(run_outcome::succeeded) == 1);
  CHECK(m.total().runs_ended() == static_cast<std::uint64_t>(names + 2));
}

TEST_CASE("metrics: a run refused before its group compiles counts under its name", "[metrics]") {
  local_session session(1);
  task_group g;
  g.name("broken");
  REQUIRE(g.add(task("t", step("s").add_net(mt_sleep_net("w", 0)))));
  boost::system::error_code ec;
  // A negative timeout refuses the run before its group is compiled.
  const run_report r = session.run(g, {.timeout = -1ms}, ec);
  CHECK(ec == errc::invalid_task);
  REQUIRE(r.tasks.size() == 1);
  const session_metrics m = session.metrics();
  REQUIRE(m.find("broken") != nullptr);
  CHECK(m.find("broken")->runs_of(run_outcome::failed) == 1);
  CHECK(m.find("broken")->tasks_of(task_status::not_run) == r.tasks.size());
}

TEST_CASE("metrics: enable_metrics(false) stops counting; the counts so far stay", "[metrics]") {
  local_session session(1);
  task_group g;
  g.name("switch");
  REQUIRE(g.add(task("t", step("s").add_net(mt_sleep_net("w", 0)))));
  REQUIRE(session.run(g).ok());
  session.enable_metrics(false);
  REQUIRE(session.run(g).ok());
  session_metrics m = session.metrics();
  CHECK_FALSE(m.enabled);
  CHECK(m.find("switch")->runs_ended() == 1);
  session.enable_metrics(true);
  REQUIRE(session.run(g).ok());
  m = session.metrics();
  CHECK(m.enabled);
  CHECK(m.find("switch")->runs_ended() == 2);
  CHECK(m.find("switch")->task_duration.count() == 2);
}

TEST_CASE("duration_histogram's buckets match a model of their bounds", "[metrics]") {
  const std::uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  // The model: the first bucket whose bound is not below the duration.
  auto model = [](std::chrono::nanoseconds d) {
    for (std::size_t i = 0; i + 1 < duration_histogram::bucket_count; ++i) {
      if (d <= duration_histogram::upper_bound(i)) return i;
    }
    return duration_histogram::bucket_count - 1;
  };
  CHECK(duration_histogram::upper_bound(0) == 1us);
  CHECK(duration_histogram::upper_bound(26) == std::chrono::microseconds(i64{1} << 26));
  CHECK(duration_histogram::upper_bound(27) == std::chrono::nanoseconds::max());
  std::vector<std::chrono::nanoseconds> edges = {0ns,    1ns,    999ns,  1000ns,
                                                 1001ns, 2000ns, 2001ns, std::chrono::nanoseconds::max()};
  for (std::size_t i = 0; i + 1 < duration_histogram::bucket_count; ++i) {
    const auto b = duration_histogram::upper_bound(i);
    edges.insert(edges.end(), {b - 1ns, b, b + 1ns});
  }
  for (int k = 0; k < 20000; ++k) {
    const int shift = std::uniform_int_distribution<int>(0, 62)(rng);
    edges.push_back(std::chrono::nanoseconds(static_cast<i64>(rng() >> (1 + shift))));
  }
  duration_histogram h;
  std::chrono::nanoseconds sum{0};
  for (auto d : edges) {
    INFO("duration " << d.count() << " ns");
    REQUIRE(duration_histogram::bucket_of(d) == model(d));
    if (d < 1h) {
      h.add(d);
      sum += d;
    }
  }
  CHECK(h.sum == sum);
  CHECK(h.count() > 0);
  // The quantile bound: at least q of the durations lie at or below it.
  for (double q : {0.0, 0.5, 0.9, 0.99, 1.0}) {
    const auto bound = h.quantile_bound(q);
    std::uint64_t below = 0;
    for (std::size_t i = 0; i < duration_histogram::bucket_count; ++i) {
      if (duration_histogram::upper_bound(i) <= bound) below += h.counts[i];
    }
    CHECK(static_cast<double>(below) >= q * static_cast<double>(h.count()));
  }
  CHECK(duration_histogram{}.quantile_bound(0.5) == 0ns);
}

namespace {

// A snapshot with known counts: two labels, one of them to escape.
session_metrics mt_known() {
  session_metrics m;
  m.runs_in_flight = 3;
  m.runs_queued = 1;
  group_metrics a;
  a.group = "";
  a.runs = {5, 1, 0, 2, 4};
  a.tasks = {9, 1, 2, 4};
  a.attempts_retried = 6;
  a.offloaded_ops = 2;
  a.run_latency.add(1500ns);   // 2 us
  a.run_latency.add(3ms);      // 4.096 ms
  a.queue_wait.add(0ns);       // 1 us
  a.task_duration.add(100s);   // +Inf
  a.offload_wait.add(1024us);  // 1.024 ms
  a.offload_wait.add(1025us);  // 2.048 ms
  group_metrics b;
  b.group = "say \"hi\"\n\\";
  b.runs = {1, 0, 0, 0, 0};
  b.tasks = {1, 0, 0, 0};
  b.run_latency.add(1us);
  b.queue_wait.add(1us);
  b.task_duration.add(1us);
  m.groups = {a, b};
  return m;
}

// The samples of a histogram in the exposition: `at` is the bucket that
// holds everything counted from there on.
std::string mt_histogram_lines(const std::string& name, const std::string& group, const duration_histogram& h,
                               const std::string& rank) {
  static const char* const bounds[] = {"0.000001",  "0.000002",  "0.000004",  "0.000008", "0.000016", "0.000032",
                                       "0.000064",  "0.000128",  "0.000256",  "0.000512", "0.001024", "0.002048",
                                       "0.004096",  "0.008192",  "0.016384",  "0.032768", "0.065536", "0.131072",
                                       "0.262144",  "0.524288",  "1.048576",  "2.097152", "4.194304", "8.388608",
                                       "16.777216", "33.554432", "67.108864", "+Inf"};
  std::string out;
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < duration_histogram::bucket_count; ++i) {
    cumulative += h.counts[i];
    out += "taskgroup_" + name + "_seconds_bucket{group=\"" + group + "\",le=\"" + bounds[i] + "\"" + rank + "} " +
           std::to_string(cumulative) + "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("to_prometheus renders a known snapshot as its golden text", "[metrics]") {
  for (bool ranked : {false, true}) {
    session_metrics m = mt_known();
    if (ranked) m.rank = 2;
    const std::string rank = ranked ? ",rank=\"2\"" : "";
    const std::string a = "group=\"\"";
    const std::string b = "group=\"say \\\"hi\\\"\\n\\\\\"";
    const std::string golden =
        "# HELP taskgroup_runs_total Runs ended, by group label and outcome.\n"
        "# TYPE taskgroup_runs_total counter\n"
        "taskgroup_runs_total{" +
        a + ",outcome=\"succeeded\"" + rank +
        "} 5\n"
        "taskgroup_runs_total{" +
        a + ",outcome=\"failed\"" + rank +
        "} 1\n"
        "taskgroup_runs_total{" +
        a + ",outcome=\"cancelled\"" + rank +
        "} 0\n"
        "taskgroup_runs_total{" +
        a + ",outcome=\"timed_out\"" + rank +
        "} 2\n"
        "taskgroup_runs_total{" +
        a + ",outcome=\"overloaded\"" + rank +
        "} 4\n"
        "taskgroup_runs_total{" +
        b + ",outcome=\"succeeded\"" + rank +
        "} 1\n"
        "taskgroup_runs_total{" +
        b + ",outcome=\"failed\"" + rank +
        "} 0\n"
        "taskgroup_runs_total{" +
        b + ",outcome=\"cancelled\"" + rank +
        "} 0\n"
        "taskgroup_runs_total{" +
        b + ",outcome=\"timed_out\"" + rank +
        "} 0\n"
        "taskgroup_runs_total{" +
        b + ",outcome=\"overloaded\"" + rank +
        "} 0\n"
        "# HELP taskgroup_tasks_total Tasks of the runs ended, by group label and outcome.\n"
        "# TYPE taskgroup_tasks_total counter\n"
        "taskgroup_tasks_total{" +
        a + ",outcome=\"succeeded\"" + rank +
        "} 9\n"
        "taskgroup_tasks_total{" +
        a + ",outcome=\"failed\"" + rank +
        "} 1\n"
        "taskgroup_tasks_total{" +
        a + ",outcome=\"cancelled\"" + rank +
        "} 2\n"
        "taskgroup_tasks_total{" +
        a + ",outcome=\"not_run\"" + rank +
        "} 4\n"
        "taskgroup_tasks_total{" +
        b + ",outcome=\"succeeded\"" + rank +
        "} 1\n"
        "taskgroup_tasks_total{" +
        b + ",outcome=\"failed\"" + rank +
        "} 0\n"
        "taskgroup_tasks_total{" +
        b + ",outcome=\"cancelled\"" + rank +
        "} 0\n"
        "taskgroup_tasks_total{" +
        b + ",outcome=\"not_run\"" + rank +
        "} 0\n"
        "# HELP taskgroup_attempts_retried_total Attempts of tasks and steps that ran again after a failed one.\n"
        "# TYPE taskgroup_attempts_retried_total counter\n"
        "taskgroup_attempts_retried_total{" +
        a + rank +
        "} 6\n"
        "taskgroup_attempts_retried_total{" +
        b + rank +
        "} 0\n"
        "# HELP taskgroup_offloaded_ops_total Ops that ran offloaded on the compute executor.\n"
        "# TYPE taskgroup_offloaded_ops_total counter\n"
        "taskgroup_offloaded_ops_total{" +
        a + rank +
        "} 2\n"
        "taskgroup_offloaded_ops_total{" +
        b + rank +
        "} 0\n"
        "# HELP taskgroup_runs_in_flight Runs admitted and not ended.\n"
        "# TYPE taskgroup_runs_in_flight gauge\n"
        "taskgroup_runs_in_flight" +
        (ranked ? "{rank=\"2\"}" : std::string()) +
        " 3\n"
        "# HELP taskgroup_runs_queued Runs waiting for admission.\n"
        "# TYPE taskgroup_runs_queued gauge\n"
        "taskgroup_runs_queued" +
        (ranked ? "{rank=\"2\"}" : std::string()) +
        " 1\n"
        "# HELP taskgroup_run_latency_seconds Admitted runs, from their arrival to their completion.\n"
        "# TYPE taskgroup_run_latency_seconds histogram\n" +
        mt_histogram_lines("run_latency", "", m.groups[0].run_latency, rank) + "taskgroup_run_latency_seconds_sum{" +
        a + rank +
        "} 0.0030015\n"
        "taskgroup_run_latency_seconds_count{" +
        a + rank + "} 2\n" + mt_histogram_lines("run_latency", "say \\\"hi\\\"\\n\\\\", m.groups[1].run_latency, rank) +
        "taskgroup_run_latency_seconds_sum{" + b + rank +
        "} 0.000001\n"
        "taskgroup_run_latency_seconds_count{" +
        b + rank +
        "} 1\n"
        "# HELP taskgroup_queue_wait_seconds Admitted runs' wait for admission.\n"
        "# TYPE taskgroup_queue_wait_seconds histogram\n" +
        mt_histogram_lines("queue_wait", "", m.groups[0].queue_wait, rank) + "taskgroup_queue_wait_seconds_sum{" + a +
        rank +
        "} 0\n"
        "taskgroup_queue_wait_seconds_count{" +
        a + rank + "} 1\n" + mt_histogram_lines("queue_wait", "say \\\"hi\\\"\\n\\\\", m.groups[1].queue_wait, rank) +
        "taskgroup_queue_wait_seconds_sum{" + b + rank +
        "} 0.000001\n"
        "taskgroup_queue_wait_seconds_count{" +
        b + rank +
        "} 1\n"
        "# HELP taskgroup_task_duration_seconds Tasks that began, from their start to their end.\n"
        "# TYPE taskgroup_task_duration_seconds histogram\n" +
        mt_histogram_lines("task_duration", "", m.groups[0].task_duration, rank) +
        "taskgroup_task_duration_seconds_sum{" + a + rank +
        "} 100\n"
        "taskgroup_task_duration_seconds_count{" +
        a + rank + "} 1\n" +
        mt_histogram_lines("task_duration", "say \\\"hi\\\"\\n\\\\", m.groups[1].task_duration, rank) +
        "taskgroup_task_duration_seconds_sum{" + b + rank +
        "} 0.000001\n"
        "taskgroup_task_duration_seconds_count{" +
        b + rank +
        "} 1\n"
        "# HELP taskgroup_offload_wait_seconds Offloaded ops, from their hand-off to the start of their kernel.\n"
        "# TYPE taskgroup_offload_wait_seconds histogram\n" +
        mt_histogram_lines("offload_wait", "", m.groups[0].offload_wait, rank) + "taskgroup_offload_wait_seconds_sum{" +
        a + rank +
        "} 0.002049\n"
        "taskgroup_offload_wait_seconds_count{" +
        a + rank + "} 2\n" +
        mt_histogram_lines("offload_wait", "say \\\"hi\\\"\\n\\\\", m.groups[1].offload_wait, rank) +
        "taskgroup_offload_wait_seconds_sum{" + b + rank +
        "} 0\n"
        "taskgroup_offload_wait_seconds_count{" +
        b + rank + "} 0\n";
    CHECK(to_prometheus(m) == golden);
  }
  // The known snapshot's buckets are where their comments say.
  const session_metrics m = mt_known();
  CHECK(m.groups[0].run_latency.counts[1] == 1);
  CHECK(m.groups[0].run_latency.counts[12] == 1);
  CHECK(m.groups[0].task_duration.counts[27] == 1);
  CHECK(m.groups[0].offload_wait.counts[10] == 1);
  CHECK(m.groups[0].offload_wait.counts[11] == 1);
}

TEST_CASE("to_json renders every count of a snapshot", "[metrics]") {
  session_metrics m = mt_known();
  m.rank = 1;
  const boost::json::value v = boost::json::parse(to_json(m));
  const boost::json::object& root = v.as_object();
  CHECK(root.at("runs_in_flight").to_number<std::uint64_t>() == 3);
  CHECK(root.at("runs_queued").to_number<std::uint64_t>() == 1);
  CHECK(root.at("rank").to_number<int>() == 1);
  CHECK(root.at("enabled").as_bool());
  const boost::json::array& groups = root.at("groups").as_array();
  REQUIRE(groups.size() == 2);
  const boost::json::object& a = groups[0].as_object();
  CHECK(a.at("group").as_string() == "");
  CHECK(a.at("runs").at("timed_out").to_number<std::uint64_t>() == 2);
  CHECK(a.at("runs").at("overloaded").to_number<std::uint64_t>() == 4);
  CHECK(a.at("tasks").at("not_run").to_number<std::uint64_t>() == 4);
  CHECK(a.at("attempts_retried").to_number<std::uint64_t>() == 6);
  CHECK(a.at("offloaded_ops").to_number<std::uint64_t>() == 2);
  const boost::json::object& lat = a.at("run_latency").as_object();
  CHECK(lat.at("count").to_number<std::uint64_t>() == 2);
  CHECK(lat.at("sum_seconds").to_number<double>() == Approx(0.0030015));
  const boost::json::array& buckets = lat.at("buckets").as_array();
  REQUIRE(buckets.size() == duration_histogram::bucket_count);
  CHECK(buckets[1].at("count").to_number<std::uint64_t>() == 1);
  CHECK(buckets[1].at("le_seconds").to_number<double>() == Approx(0.000002));
  CHECK(buckets[27].at("le_seconds").as_string() == "+Inf");
  CHECK(groups[1].at("group").as_string() == "say \"hi\"\n\\");
}
