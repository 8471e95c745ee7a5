// Offloaded ops seen from outside the run: the observer's offload events
// (observe::offloads), called on the compute thread with the task whose net
// ran the op, and the trace recorder's spans of them on the compute
// threads, linked to their task's span. Generated groups mix the shapes
// that give a task a run context of its own (a retried task, a retried
// step), both drivers (a concurrent step) and the node's own work (local
// init), and compare the events with what the group must run.
#include <taskgroup/retry_policy.hpp>
#include <taskgroup/run_observer.hpp>
#include <taskgroup/session.hpp>
#include <taskgroup/task_group.hpp>
#include <taskgroup/trace_recorder.hpp>

#include "support/checks.hpp"
#include "support/run.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace taskgroup;
namespace asio = boost::asio;
namespace json = boost::json;
using i64 = std::int64_t;

namespace {

// Records the offload events (and counts any other kind it receives).
class oo_log final : public run_observer {
 public:
  struct event {
    bool begin;
    std::string task, node, trace, op;
    std::thread::id thread;
    bool on_pool;
    bool ok;
  };
  oo_log(observe kinds, asio::thread_pool& pool) : kinds_(kinds), pool_(pool) {}
  [[nodiscard]] observe interests() const noexcept override { return kinds_; }
  void offload_begin(const event_source& at, std::string_view op) override { add(true, at, op, true); }
  void offload_end(const event_source& at, std::string_view op, const status& result) override {
    add(false, at, op, static_cast<bool>(result));
  }
  void task_begin(const event_source&) override { ++others; }
  void net_begin(const event_source&, std::string_view) override { ++others; }

  std::vector<event> events;  // read after the run
  std::atomic<int> others{0};

 private:
  void add(bool begin, const event_source& at, std::string_view op, bool ok) {
    const bool on_pool = pool_.get_executor().running_in_this_thread();
    std::lock_guard lock(m_);
    events.push_back(event{begin, std::string(at.task), std::string(at.node), std::string(at.trace_id), std::string(op),
                           std::this_thread::get_id(), on_pool, ok});
  }
  observe kinds_;
  asio::thread_pool& pool_;
  std::mutex m_;
};

// An offloaded Add (x += one).
op_def oo_add() {
  op_def d{"Add", {"x", "one"}, {"x"}, {}, nullptr};
  d.offload = true;
  return d;
}

net oo_init_net(const std::string& name) {
  net n(name);
  n.op("ConstantFill", {}, {"x"}, {{"value", i64{0}}}).op("ConstantFill", {}, {"one"}, {{"value", i64{1}}});
  return n;
}

// A generated group and the offloaded runs it must tell, by "<task>" (a
// task's full name) or "@<node>" (the node's own work).
struct oo_group {
  task_group group;
  std::map<std::string, int> told;
};

retry_policy oo_twice() {
  retry_policy p;
  p.max_attempts = 2;
  p.initial_backoff = std::chrono::milliseconds(0);
  return p;
}

oo_group oo_generate(std::mt19937_64& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  oo_group g;
  const int nodes = 1 + pick(3);
  std::vector<bool> used(static_cast<std::size_t>(nodes));
  const int tasks = 2 + pick(4);
  for (int t = 0; t < tasks; ++t) {
    const std::string name = "t" + std::to_string(t);
    const int at = pick(nodes);
    used[static_cast<std::size_t>(at)] = true;
    const std::string on = "n" + std::to_string(at);
    const int m = 1 + pick(2);
    const int rounds = 1 + pick(4);
    const int shape = pick(4);  // plain, concurrent, retried task, retried step
    net body(name + "_body");
    for (int k = 0; k < m; ++k) body.add(oo_add());
    // The retried shapes fail their first attempt after its first
    // iteration's offloaded ops: they are told again in the second.
    if (shape >= 2) body.op("FailTimes", {}, {}, {{"times", i64{1}}, {"message", std::string("once")}});
    execution_step loop = step(name + "_loop").add_net(body).iterations(static_cast<std::uint64_t>(rounds));
    if (shape == 1) {
      net idle(name + "_idle");
      idle.op("Sleep", {}, {}, {{"ms", i64{0}}});
      loop = step(name + "_both")
                 .concurrent_substeps(true)
                 .add_substep(std::move(loop))
                 .add_substep(step(name + "_idle").add_net(idle));
    }
    if (shape == 3) loop.retry(oo_twice());
    task tk(name, step(name).add_substep(step(name + "_init").add_net(oo_init_net(name + "_init"))).add_substep(loop));
    if (shape == 2) tk.retry(oo_twice());
    REQUIRE_OK(g.group.add(tk, node(on)));
    g.told[on + "/" + name] += rounds * m + (shape >= 2 ? m : 0);
  }
  // Local init on some of the nodes the tasks use: the node's own work.
  for (int i = 0; i < nodes; ++i) {
    if (!used[static_cast<std::size_t>(i)] || pick(2) == 0) continue;
    const std::string name = "n" + std::to_string(i);
    net local = oo_init_net(name + "_local");
    const int m = 1 + pick(2);
    for (int k = 0; k < m; ++k) local.add(oo_add());
    g.group.local_init(node(name), std::move(local));
    g.told["@" + name] += m;
  }
  return g;
}

// Runs `g` on a session whose compute executor is `pool`, observed by
// `observer`.
result<run_report> oo_run(const task_group& g, run_observer& observer, asio::thread_pool& pool) {
  asio::io_context io;
  local_session session(io.get_executor());
  session.set_compute_executor(pool.get_executor());
  run_options o;
  o.observer = &observer;
  return test::run(io, test::run_async(session, g, o));
}

}  // namespace

TEST_CASE("every offloaded op run is told on its compute thread, with the task that ran it", "[observer]") {
  const std::uint64_t seed = GENERATE(range(std::uint64_t{1}, std::uint64_t{25}));
  INFO("seed " << seed << " (offload_observe_test)");
  std::mt19937_64 rng(seed);
  oo_group g = oo_generate(rng);
  asio::thread_pool pool(2);
  oo_log log(observe::offloads, pool);
  auto r = oo_run(g.group, log, pool);
  INFO((r ? std::string() : r.error().message));
  REQUIRE_OK(r);
  CHECK(log.others == 0);  // asked for offloaded ops only
  std::map<std::string, int> told;
  std::map<std::thread::id, std::vector<const oo_log::event*>> open;
  for (const oo_log::event& e : log.events) {
    CHECK(e.on_pool);
    CHECK(e.op == "Add");
    CHECK(e.trace == r.value().trace_id);
    CHECK(e.ok);
    std::vector<const oo_log::event*>& here = open[e.thread];
    if (e.begin) {
      here.push_back(&e);
      ++told[e.task.empty() ? "@" + e.node : e.task];
      continue;
    }
    // An end closes the begin of its thread, of the same task.
    REQUIRE_FALSE(here.empty());
    CHECK(here.back()->task == e.task);
    CHECK(here.back()->node == e.node);
    here.pop_back();
  }
  for (const auto& [thread, left] : open) CHECK(left.empty());
  CHECK(told == g.told);
}

TEST_CASE("an observer that does not ask for offloaded ops is not told of them", "[observer]") {
  std::mt19937_64 rng(7);
  oo_group g = oo_generate(rng);
  asio::thread_pool pool(2);
  oo_log log(observe::tasks | observe::nets, pool);
  REQUIRE_OK(oo_run(g.group, log, pool));
  CHECK(log.events.empty());
  CHECK(log.others > 0);
}

TEST_CASE("an offloaded op's span is on its compute thread, a child of its task's span", "[trace]") {
  std::mt19937_64 rng(11);
  oo_group g = oo_generate(rng);
  asio::thread_pool pool(2);
  trace_recorder recorder;
  auto r = oo_run(g.group, recorder, pool);
  REQUIRE_OK(r);
  const json::object trace = json::parse(recorder.to_json(r.value().trace)).as_object();
  const json::array& events = trace.at("traceEvents").as_array();
  // The processes by name, and every task's span.
  std::map<std::string, std::int64_t> pid_of;
  std::map<std::string, const json::object*> task_span;
  for (const json::value& v : events) {
    const json::object& e = v.as_object();
    if (e.at("ph") == "M" && e.at("name") == "process_name") {
      pid_of[json::value_to<std::string>(e.at("args").at("name"))] = e.at("pid").as_int64();
    }
    if (e.at("ph") == "X" && e.at("cat") == "task") {
      task_span[json::value_to<std::string>(e.at("args").at("task"))] = &e;
    }
  }
  REQUIRE(pid_of.count("compute") == 1);
  const std::string run_span = json::value_to<std::string>(trace.at("otherData").at("run_span_id"));
  std::map<std::string, int> told;
  for (const json::value& v : events) {
    const json::object& e = v.as_object();
    if (e.at("ph") != "X" || e.at("cat") != "offload") continue;
    CHECK(e.at("name") == "Add");
    CHECK(e.at("pid").as_int64() == pid_of.at("compute"));
    CHECK(e.at("tid").as_int64() >= 1);
    CHECK(e.at("tid").as_int64() <= 2);  // the pool's two threads
    const json::object& args = e.at("args").as_object();
    const std::string node_name = json::value_to<std::string>(args.at("node"));
    if (!args.contains("task")) {
      CHECK(args.at("parent_span_id") == run_span.c_str());  // the node's own work
      ++told["@" + node_name];
      continue;
    }
    const std::string task_name = json::value_to<std::string>(args.at("task"));
    ++told[task_name];
    REQUIRE(task_span.count(task_name) == 1);
    const json::object& parent = *task_span.at(task_name);
    CHECK(args.at("parent_span_id") == parent.at("args").at("span_id"));
    // Within its task's span (both read from the recorder's one clock).
    const double ts = e.at("ts").to_number<double>();
    CHECK(ts >= parent.at("ts").to_number<double>());
    CHECK(ts + e.at("dur").to_number<double>() <=
          parent.at("ts").to_number<double>() + parent.at("dur").to_number<double>() + 0.001);
  }
  CHECK(told == g.told);
}
