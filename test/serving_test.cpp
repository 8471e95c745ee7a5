// Serving: one compiled group, many concurrent runs on one session, each
// with its own feeds and outputs; GLOBAL runs take turns on their node;
// feed errors; async_run's Asio shape (every completion token, the report
// on failure, cancellation types).
#include <taskgroup/session.hpp>
#include <taskgroup/task_group.hpp>

#include "support/run.hpp"
#include "support/steps.hpp"
#include "support/tokens.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

using namespace taskgroup;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using test::seen;
using test::token_kind;
using i64 = std::int64_t;

namespace {

// The serving shape: `tasks` tasks on `nodes` nodes; task k reads the
// node's input "x" and writes output "y<k>" = x * (k + 1), after a Sleep
// of `sleep_ms` (so that runs overlap). Outputs are returned in `outs`.
task_group sum_group(int tasks, int nodes, i64 sleep_ms, std::vector<task_output<i64>>& outs,
                     const std::string& prefix = "y") {
  task_group g;
  for (int j = 0; j < nodes; ++j) REQUIRE(g.input<i64>("x", node("n" + std::to_string(j))));
  for (int k = 0; k < tasks; ++k) {
    const std::string y = prefix + std::to_string(k);
    net n("work" + std::to_string(k));
    n.op("Sleep", {}, {}, {{"ms", sleep_ms}})
        .op("ConstantFill", {}, {"factor"}, {{"value", i64{k + 1}}})
        .op("Mul", {"x", "factor"}, {y});
    task t("t" + std::to_string(k), step("s" + std::to_string(k)).add_net(n));
    outs.push_back(t.output<i64>(y));
    REQUIRE(g.add(t, node("n" + std::to_string(k % nodes))));
  }
  return g;
}

// Adds task "t" on node `on`, which copies blob `from` to its output `to`.
template <class T>
task_output<T> add_copy_task(task_group& g, const std::string& on, const std::string& from, const std::string& to) {
  net n("copy");
  n.op("Copy", {from}, {to});
  task t("t", step("s").add_net(n));
  auto out = t.output<T>(to);
  REQUIRE(g.add(t, node(on)));
  return out;
}

feeds feeds_for(int nodes, i64 base) {
  feeds f;
  for (int j = 0; j < nodes; ++j) f.set("n" + std::to_string(j), "x", base + j);
  return f;
}

// A run of a group whose cancellation slot is `sig`'s: its completion
// lands in `got` and `code`.
struct cancellable_run {
  asio::cancellation_signal sig;
  std::optional<run_report> got;
  boost::system::error_code code;
  void start(local_session& session, const task_group& g) {
    session.async_run(g, {},
                      asio::bind_cancellation_slot(sig.slot(), [this](boost::system::error_code ec, run_report r) {
                        code = ec;
                        got = std::move(r);
                      }));
  }
};

// Collects completions from the pool's threads.
struct completions {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::optional<run_report>> reports;
  std::vector<boost::system::error_code> codes;
  std::size_t done = 0;

  explicit completions(std::size_t n) : reports(n), codes(n) {}
  auto handler(std::size_t i) {
    return [this, i](boost::system::error_code ec, run_report r) {
      std::lock_guard lock(mutex);
      codes[i] = ec;
      reports[i] = std::move(r);
      ++done;
      cv.notify_all();
    };
  }
  void wait() {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return done == reports.size(); });
  }
};

}  // namespace

TEST_CASE("1,000 concurrent runs of one group, each with its own feeds and outputs", "[serving]") {
  std::vector<task_output<i64>> outs;
  task_group g = sum_group(16, 4, 1, outs);
  local_session session(2);
  constexpr std::size_t runs = 1000;
  completions c(runs);
  for (std::size_t r = 0; r < runs; ++r) {
    session.async_run(g, run_options{.feeds = feeds_for(4, static_cast<i64>(r) * 10)}, c.handler(r));
  }
  c.wait();
  std::size_t wrong = 0;
  for (std::size_t r = 0; r < runs; ++r) {
    INFO("run " << r);
    REQUIRE_FALSE(c.codes[r]);
    const run_report& rep = *c.reports[r];
    REQUIRE(rep.ok());
    for (int k = 0; k < 16; ++k) {
      const i64 expected = (static_cast<i64>(r) * 10 + k % 4) * (k + 1);
      auto v = outs[k].get(rep);
      REQUIRE(v);
      if (v.value() != expected) ++wrong;
      REQUIRE(rep.tasks[k].outputs.size() == 1);
      if (rep.tasks[k].outputs[0].second->as<i64>() != expected) ++wrong;
    }
  }
  CHECK(wrong == 0);
  // The runs' blobs stayed in their own workspaces: the node's has none.
  for (int j = 0; j < 4; ++j) {
    auto ws = session.node_workspace("n" + std::to_string(j));
    CHECK_FALSE(ws->has("x"));
    CHECK_FALSE(ws->has("y" + std::to_string(j)));
  }
}

TEST_CASE("two overlapping runs of one group do not swap outputs", "[serving]") {
  task_group g;
  REQUIRE(g.input<i64>("v", node("n1")));
  net n("copy");
  n.op("Sleep", {}, {}, {{"ms", i64{20}}}).op("Copy", {"v"}, {"out"});
  task t("t", step("s").add_net(n));
  auto out = t.output<i64>("out");
  REQUIRE(g.add(t, node("n1")));
  local_session session(2);
  completions c(2);
  session.async_run(g, {.feeds = feeds().set("n1", "v", i64{1})}, c.handler(0));
  session.async_run(g, {.feeds = feeds().set("n1", "v", i64{2})}, c.handler(1));
  c.wait();
  const run_report& a = *c.reports[0];
  const run_report& b = *c.reports[1];
  CHECK(out.get(a).value() == 1);
  CHECK(a.tasks[0].outputs[0].second->as<i64>() == 1);
  CHECK(out.get(b).value() == 2);
  CHECK(b.tasks[0].outputs[0].second->as<i64>() == 2);
  // The handle's own value is that of the run that completed last.
  const i64 last = out.get().value();
  CHECK((last == 1 || last == 2));
}

TEST_CASE("two different groups with the same output names, concurrently", "[serving]") {
  std::vector<task_output<i64>> outs1;
  std::vector<task_output<i64>> outs2;
  task_group g1 = sum_group(16, 4, 2, outs1);
  task_group g2 = sum_group(16, 4, 2, outs2);
  local_session session(2);
  completions c(2);
  session.async_run(g1, {.feeds = feeds_for(4, 100)}, c.handler(0));
  session.async_run(g2, {.feeds = feeds_for(4, 200)}, c.handler(1));
  c.wait();
  int right = 0;
  for (int k = 0; k < 16; ++k) {
    if (outs1[k].get(*c.reports[0]).value() == (100 + k % 4) * (k + 1)) ++right;
    if (outs2[k].get(*c.reports[1]).value() == (200 + k % 4) * (k + 1)) ++right;
    if (outs1[k].get().value() == (100 + k % 4) * (k + 1)) ++right;
    if (outs2[k].get().value() == (200 + k % 4) * (k + 1)) ++right;
  }
  CHECK(right == 64);
  // Each report is its own group's: a handle of the other group, though
  // its task and blob names are the same, reads nothing from it.
  CHECK(c.reports[0]->of(g1));
  CHECK_FALSE(c.reports[0]->of(g2));
  for (int k = 0; k < 16; ++k) {
    auto crossed = outs2[k].get(*c.reports[0]);
    REQUIRE_FALSE(crossed);
    CHECK(crossed.error().code == errc::output_not_set);
    CHECK_THAT(crossed.error().message, Catch::EndsWith(": the report is not of a run of the task's group"));
  }
  CHECK_FALSE(outs1[0].get(run_report{}));  // a report no session made
}

TEST_CASE("a run's workspace is a child of the node's: node state is shared on purpose", "[serving]") {
  task_group g;
  REQUIRE(g.input<i64>("x"));
  net n("scale");
  n.op("Mul", {"x", "shared_factor"}, {"y"}).op("ConstantFill", {}, {"scratch"}, {{"value", i64{9}}});
  task t("t", step("s").add_net(n));
  auto y = t.output<i64>("y");
  REQUIRE(g.add(t));
  local_session session(1);
  // Kept by the node across runs: every run sees it.
  session.node_workspace("local")->set("shared_factor", i64{7});
  // A blob the node keeps under an output's name is where the runs write
  // (shared on purpose); the run's value is still its own copy.
  session.node_workspace("local")->set("y", i64{-1});
  for (i64 x = 1; x <= 3; ++x) {
    auto r = test::run_sync(session, g, {.feeds = feeds().set("local", "x", x)});
    REQUIRE(r);
    CHECK(y.get(r.value()).value() == 7 * x);
  }
  auto ws = session.node_workspace("local");
  CHECK(ws->read<i64>("y").value() == 21);
  CHECK_FALSE(ws->has("x"));
  CHECK_FALSE(ws->has("scratch"));
}

TEST_CASE("a node's next run finds nothing of the last, though it reuses its workspaces", "[serving]") {
  // Generated: groups of PRIVATE tasks on two nodes, run in batches that
  // overlap. Each task counts with Iter in its own workspace ("it") and in
  // a declared output of the run's workspace ("z<k>"): both must read 1 in
  // every run, whichever run's emptied workspaces it was given.
  const std::uint64_t seed = GENERATE(range(std::uint64_t{1}, std::uint64_t{9}));
  INFO("seed " << seed << " (serving_test reused workspaces)");
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  struct counted {
    task_group g;
    std::vector<task_output<i64>> ys, zs;
  };
  std::vector<counted> groups(static_cast<std::size_t>(pick(1, 3)));
  for (auto& c : groups) {
    const int tasks = pick(1, 3);
    for (int k = 0; k < tasks; ++k) {
      const std::string y = "y" + std::to_string(k), z = "z" + std::to_string(k);
      net n("count" + std::to_string(k));
      if (pick(0, 1) == 1) n.op("Sleep", {}, {}, {{"ms", i64{1}}});
      n.op("Iter", {}, {"it"}).op("Copy", {"it"}, {y}).op("Iter", {}, {z});
      task t("t" + std::to_string(k), step("s").add_net(n));
      c.ys.push_back(t.output<i64>(y));
      c.zs.push_back(t.output<i64>(z));
      REQUIRE(c.g.add(t, node(pick(0, 1) == 0 ? "a" : "b")));
    }
  }
  local_session session(2);
  for (int batch = 0; batch < 6; ++batch) {
    std::vector<std::size_t> which;
    std::vector<std::future<run_report>> runs;
    for (int i = pick(1, 4); i > 0; --i) {
      which.push_back(static_cast<std::size_t>(pick(0, static_cast<int>(groups.size()) - 1)));
      runs.push_back(session.async_run(groups[which.back()].g, {}, asio::use_future));
    }
    for (std::size_t i = 0; i < runs.size(); ++i) {
      INFO("batch " << batch << ", run " << i << " of group " << which[i]);
      const run_report r = runs[i].get();
      REQUIRE(r.ok());
      const counted& c = groups[which[i]];
      for (std::size_t k = 0; k < c.ys.size(); ++k) {
        CHECK(c.ys[k].get(r).value() == 1);
        CHECK(c.zs[k].get(r).value() == 1);
      }
    }
  }
}

TEST_CASE("runs of a GLOBAL group take turns on its node", "[serving]") {
  // Read, wait, write: two runs at once in one workspace would lose an
  // update.
  task_group g(workspace_type::global);
  net n("increment");
  n.op("Copy", {"counter"}, {"before"})
      .op("Sleep", {}, {}, {{"ms", i64{2}}})
      .op("ConstantFill", {}, {"one"}, {{"value", i64{1}}})
      .op("Add", {"before", "one"}, {"counter"});
  REQUIRE(g.add(task("inc", step("s").add_net(n)), node("g")));
  local_session session(2);
  session.node_workspace("g")->set("counter", i64{0});
  constexpr std::size_t runs = 16;
  completions c(runs);
  for (std::size_t r = 0; r < runs; ++r) session.async_run(g, {}, c.handler(r));
  c.wait();
  for (std::size_t r = 0; r < runs; ++r) CHECK(c.reports[r]->ok());
  CHECK(session.node_workspace("g")->read<i64>("counter").value() == static_cast<i64>(runs));
}

TEST_CASE("a run waiting for its turn can be cancelled; PRIVATE runs on the node go on", "[serving][cancel]") {
  auto stuck_count = std::make_shared<test::stuck_counters>();
  task_group holder(workspace_type::global);
  REQUIRE(holder.add(task("hold", step("s").add_net(test::stuck("stuck", stuck_count))), node("g")));
  task_group waiter(workspace_type::global);
  REQUIRE(waiter.add(task("wait", step("s").add_net(test::fill_int("f", "w", 1))), node("g")));
  task_group other;  // PRIVATE, same node
  REQUIRE(other.add(task("other", step("s").add_net(test::fill_int("f2", "p", 2))), node("g")));

  asio::io_context io;
  local_session session(io.get_executor());
  asio::cancellation_signal stop_holder;
  asio::cancellation_signal stop_waiter;
  std::optional<run_report> held;
  std::optional<run_report> waited;
  std::optional<run_report> private_run;
  session.async_run(holder, {},
                    asio::bind_cancellation_slot(stop_holder.slot(), [&](auto, run_report r) { held = std::move(r); }));
  io.poll();
  REQUIRE(stuck_count->started == 1);
  session.async_run(
      waiter, {}, asio::bind_cancellation_slot(stop_waiter.slot(), [&](auto, run_report r) { waited = std::move(r); }));
  session.async_run(other, {}, [&](auto, run_report r) { private_run = std::move(r); });
  io.poll();
  REQUIRE(private_run);
  CHECK(private_run->ok());
  CHECK_FALSE(waited);  // waits for the holder's turn
  stop_waiter.emit(asio::cancellation_type::terminal);
  io.poll();
  REQUIRE(waited);
  REQUIRE(waited->failure);
  CHECK(waited->failure->code == errc::cancelled);
  CHECK(waited->tasks.at(0).status == task_status::not_run);
  CHECK_FALSE(held);
  stop_holder.emit(asio::cancellation_type::terminal);
  io.run();
  REQUIRE(held);
  CHECK(held->failure->code == errc::cancelled);
  // The node is free again.
  std::optional<run_report> after;
  io.restart();
  session.async_run(waiter, {}, [&](auto, run_report r) { after = std::move(r); });
  io.run();
  REQUIRE(after);
  CHECK(after->ok());
}

TEST_CASE("feed errors name the node and blob, and nothing of the run is left behind", "[serving][feeds]") {
  task_group g;
  REQUIRE(g.input<i64>("x", node("n1")));
  REQUIRE(g.declare_input("any", node("n1"), false));
  auto y = add_copy_task<i64>(g, "n1", "x", "y");
  local_session session(1);

  struct bad_case {
    const char* what;
    feeds f;
    std::string message;
  };
  std::vector<bad_case> cases;
  cases.push_back({"unknown node", feeds().set("n1", "x", i64{1}).set("n9", "x", i64{1}),
                   "feed \"n9/x\": the group declares no such input (none on node \"n9\")"});
  cases.push_back({"unknown blob", feeds().set("n1", "x", i64{1}).set("n1", "z", i64{1}),
                   "feed \"n1/z\": the group declares no such input (on node \"n1\": \"x\", \"any\")"});
  cases.push_back(
      {"wrong type", feeds().set("n1", "x", std::string("one")), "feed \"n1/x\": expected int64, got string"});
  cases.push_back(
      {"missing required", feeds().set("n1", "any", 2.5), "input \"n1/x\" is required and was not fed (int64)"});
  cases.push_back({"fed twice", feeds().set("n1", "x", i64{1}).set("n1", "x", i64{2}), "feed \"n1/x\": fed twice"});
  cases.push_back({"no value", feeds().set_blob("n1", "x", std::make_shared<const blob>()), "feed \"n1/x\": no value"});
  const std::string move_only = blob(std::make_unique<int>(1)).type_name();
  cases.push_back({"move-only value", feeds().set("n1", "x", i64{1}).set("n1", "any", std::make_unique<int>(1)),
                   "feed \"n1/any\": a " + move_only + " cannot be copied into the run (its type is move-only)"});
  for (auto& c : cases) {
    INFO(c.what);
    auto r = test::run_sync(session, g, {.feeds = c.f});
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_feed);
    CHECK(r.error().message == c.message);
    CHECK_FALSE(y.is_set());
  }
  CHECK(session.node_workspace("n1")->local_blobs().empty());
  // A good feed (the optional input of any type left out) runs.
  auto ok_run = test::run_sync(session, g, {.feeds = feeds().set("n1", "x", i64{5})});
  REQUIRE(ok_run);
  CHECK(y.get(ok_run.value()).value() == 5);
  CHECK(y.get().value() == 5);
}

TEST_CASE("text is fed as std::string, whatever form it is given in", "[serving][feeds]") {
  task_group g;
  REQUIRE(g.input<std::string>("s"));
  auto out = add_copy_task<std::string>(g, "local", "s", "t");
  local_session session(1);
  const char* pointer = "from a pointer";
  const std::string owned = "from a string_view";
  for (const feeds& f : {feeds().set("local", "s", "a literal"), feeds().set("local", "s", pointer),
                         feeds().set("local", "s", std::string_view(owned))}) {
    auto r = test::run_sync(session, g, {.feeds = f});
    INFO((r ? std::string() : r.error().message));
    REQUIRE(r);
    CHECK(out.get(r.value()).value() == f.entries().at(0).value->as<std::string>());
  }
}

TEST_CASE("a feed that cannot be copied fails the run before any node runs", "[serving][feeds]") {
  task_group g;
  REQUIRE(g.declare_input("any", node("n2"), false));
  REQUIRE(g.add(task("t", step("s").add_net(test::incr("inc", "runs"))), node("n1")));
  REQUIRE(g.add(task("u", step("s").add_net(test::incr("inc", "runs"))), node("n2")));
  local_session session(2);
  auto r = test::run_sync(session, g, {.feeds = feeds().set("n2", "any", std::make_unique<int>(1))});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::invalid_feed);
  CHECK_FALSE(session.node_workspace("n1")->has("runs"));
  CHECK_FALSE(session.node_workspace("n2")->has("runs"));
}

TEST_CASE("a GLOBAL run's feeds are its own: they leave the node workspace when its part ends", "[serving][feeds]") {
  task_group g(workspace_type::global);
  REQUIRE(g.declare_input("x", node("g"), false));
  auto y = add_copy_task<i64>(g, "g", "x", "y");
  local_session session(2);
  auto first = test::run_sync(session, g, {.feeds = feeds().set("g", "x", i64{11})});
  REQUIRE(first);
  CHECK(y.get(first.value()).value() == 11);
  // Gone with the run (the blob stays, empty: the node's net is bound to
  // it): a later run that feeds nothing does not read it.
  CHECK_FALSE(session.node_workspace("g")->find("x")->has_value());
  auto second = test::run_sync(session, g);
  REQUIRE_FALSE(second);
  CHECK_THAT(second.error().message, Catch::EndsWith("input #0 \"x\": the blob has no value"));
  auto again = test::run_sync(session, g, {.feeds = feeds().set("g", "x", i64{14})});
  REQUIRE(again);
  CHECK(y.get(again.value()).value() == 14);
  // A node blob of that name is shadowed for the run, then as it was.
  session.node_workspace("g")->set("x", i64{5});
  auto shadowed = test::run_sync(session, g, {.feeds = feeds().set("g", "x", i64{12})});
  REQUIRE(shadowed);
  CHECK(y.get(shadowed.value()).value() == 12);
  CHECK(session.node_workspace("g")->read<i64>("x").value() == 5);
  auto unfed = test::run_sync(session, g);
  REQUIRE(unfed);
  CHECK(y.get(unfed.value()).value() == 5);
  // Also when the run fails after the feeds were placed.
  task_group h(workspace_type::global);
  REQUIRE(h.declare_input("x", node("g"), false));
  net boom("boom");
  boom.op("Fail", {}, {}, {{"message", std::string("no")}});
  REQUIRE(h.add(task("t", step("s").add_net(boom)), node("g")));
  REQUIRE_FALSE(test::run_sync(session, h, {.feeds = feeds().set("g", "x", i64{13})}));
  CHECK(session.node_workspace("g")->read<i64>("x").value() == 5);
}

TEST_CASE("only_nodes: the required inputs of the nodes that do not run need no feed", "[serving][feeds]") {
  task_group g;
  REQUIRE(g.input<i64>("x", node("n1")));
  REQUIRE(g.input<i64>("x", node("n2")));
  auto y = add_copy_task<i64>(g, "n1", "x", "y");
  REQUIRE(g.add(task("u", step("s").add_net(test::fill_int("f", "z", 1))), node("n2")));
  local_session session(1);
  run_options o{.only_nodes = std::vector<std::string>{"n1"}, .feeds = feeds().set("n1", "x", i64{4})};
  auto r = test::run_sync(session, g, o);
  REQUIRE(r);
  CHECK(y.get(r.value()).value() == 4);
  // Those of a node that runs still do; a feed of a node that does not is
  // still checked.
  o.only_nodes = std::vector<std::string>{"n1", "n2"};
  auto missing = test::run_sync(session, g, o);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message == "input \"n2/x\" is required and was not fed (int64)");
  o.only_nodes = std::vector<std::string>{"n1"};
  o.feeds.set("n2", "x", std::string("two"));
  auto wrong = test::run_sync(session, g, o);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().message == "feed \"n2/x\": expected int64, got string");
  // The public check asks for every required input.
  auto all = check_feeds(g, feeds().set("n1", "x", i64{4}));
  REQUIRE_FALSE(all);
  CHECK(all.error().message == "input \"n2/x\" is required and was not fed (int64)");
}

TEST_CASE("inputs: declaration errors", "[serving][feeds]") {
  task_group g;
  REQUIRE(g.input<i64>("x", node("n1")));
  auto twice = g.input<double>("x", node("n1"));
  REQUIRE_FALSE(twice);
  CHECK(twice.error().message == "input \"n1/x\" declared twice");
  auto empty = g.declare_input("", node("n1"));
  REQUIRE_FALSE(empty);
  CHECK(empty.error().message == "an input on node \"n1\" has an empty blob name");
  REQUIRE(g.add(task("t", step("s").add_net(test::fill_int("f", "y", 1))), node("n1")));
  local_session session(1);
  REQUIRE(test::run_sync(session, g, {.feeds = feeds().set("n1", "x", i64{1})}));
  auto late = g.input<i64>("z", node("n1"));
  REQUIRE_FALSE(late);
  CHECK(late.error().message == "Cannot add input \"n1/z\" to an already used TaskGroup.");
  CHECK(g.inputs().size() == 1);
  // An input on a node without a task could never be both fed and run.
  task_group lonely;
  REQUIRE(lonely.input<i64>("x", node("nowhere")));
  REQUIRE(lonely.add(task("t", step("s").add_net(test::fill_int("f", "y", 1))), node("n1")));
  auto refused = test::run_sync(session, lonely, {.feeds = feeds().set("nowhere", "x", i64{1})});
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == errc::invalid_task);
  CHECK(refused.error().message == "input \"x\" on node \"nowhere\", which has no task");
}

TEST_CASE("a run takes its feeds when called: changing them afterwards changes nothing", "[serving][feeds]") {
  task_group g;
  REQUIRE(g.input<i64>("x"));
  net n("copy");
  n.op("Sleep", {}, {}, {{"ms", i64{1}}}).op("Copy", {"x"}, {"y"});
  task t("t", step("s").add_net(n));
  auto y = t.output<i64>("y");
  REQUIRE(g.add(t));
  asio::io_context io;
  local_session session(io.get_executor());
  run_options o{.feeds = feeds().set("local", "x", i64{1})};
  std::optional<run_report> got;
  session.async_run(g, o, [&](auto, run_report r) { got = std::move(r); });
  o.feeds = feeds().set("local", "x", i64{2});
  io.run();
  REQUIRE(got);
  CHECK(y.get(*got).value() == 1);
}

// --- async_run's Asio shape ---------------------------------------------------

namespace {

// A group that succeeds, or fails with `errc::op_failed` naming its task.
task_group small_group(bool fail) {
  task_group g;
  net n("n");
  if (fail) {
    n.op("Fail", {}, {}, {{"message", std::string("boom")}});
  } else {
    n.op("ConstantFill", {}, {"v"}, {{"value", i64{3}}});
  }
  task t("t", step("s").add_net(n));
  if (!fail) (void)t.output<i64>("v");
  REQUIRE(g.add(t));
  return g;
}

seen run_with(token_kind kind, bool fail) {
  asio::io_context io;
  local_session session(io.get_executor());
  return test::run_with(io, session, small_group(fail), kind);
}

}  // namespace

TEST_CASE("async_run completes with (error_code, run_report) through every completion token", "[serving][token]") {
  const auto kind = GENERATE(token_kind::callback, token_kind::future, token_kind::awaitable, token_kind::as_tuple,
                             token_kind::redirect_error, token_kind::deferred, token_kind::default_token);
  const bool fail = GENERATE(false, true);
  INFO("token " << static_cast<int>(kind) << (fail ? ", failing group" : ", succeeding group"));
  seen s = run_with(kind, fail);
  const bool throwing = test::throws(kind);
  if (!fail) {
    CHECK_FALSE(s.code);
    CHECK_FALSE(s.threw);
    REQUIRE(s.report);
    CHECK(s.report->ok());
    CHECK_FALSE(s.report->failure);
    REQUIRE(s.report->tasks.size() == 1);
    CHECK(s.report->tasks[0].outputs.at(0).second->as<i64>() == 3);
    return;
  }
  CHECK(s.code == errc::op_failed);
  CHECK(s.threw == throwing);
  if (throwing) {  // the exception carries the code and, as what(), the run's message
    CHECK_THAT(s.what, Catch::StartsWith("task ") && Catch::EndsWith("boom"));
    return;
  }
  REQUIRE(s.report);
  REQUIRE(s.report->failure);
  CHECK(s.report->failure->code == s.code);
  CHECK_THAT(s.report->failure->message, Catch::Contains("boom"));
  REQUIRE(s.report->tasks.size() == 1);
  CHECK(s.report->tasks[0].status == task_status::failed);
  CHECK_THAT(s.report->tasks[0].failure->message, Catch::Contains("boom"));
}

TEST_CASE("a refused run still reports every task, as not run", "[serving][token]") {
  asio::io_context io;
  local_session session(io.get_executor());
  task_group g = small_group(false);
  REQUIRE(g.input<i64>("x"));
  std::optional<run_report> got;
  boost::system::error_code code;
  session.async_run(g, {}, [&](boost::system::error_code ec, run_report r) {
    code = ec;
    got = std::move(r);
  });
  io.run();
  CHECK(code == errc::invalid_feed);
  REQUIRE(got);
  REQUIRE(got->tasks.size() == 1);
  CHECK(got->tasks[0].name == "local/t");
  CHECK(got->tasks[0].status == task_status::not_run);
  CHECK(got->of(g));
}

TEST_CASE("terminal and partial cancellation stop a run; total is ignored", "[serving][cancel]") {
  const auto type =
      GENERATE(asio::cancellation_type::terminal, asio::cancellation_type::partial, asio::cancellation_type::total);
  INFO("cancellation type " << static_cast<int>(type));
  auto c = std::make_shared<test::stuck_counters>();
  task_group g;
  REQUIRE(g.add(task("a", step("s").add_net(test::stuck("x", c))), node("n1")));
  REQUIRE(g.add(task("b", step("s").add_net(test::stuck("y", c))), node("n2")));
  asio::io_context io;
  local_session session(io.get_executor());
  cancellable_run run;
  run.start(session, g);
  auto& [sig, got, code] = run;
  io.poll();
  REQUIRE(c->started == 2);
  sig.emit(type);
  io.poll();
  if (type == asio::cancellation_type::total) {
    CHECK_FALSE(got);  // still running
    CHECK(c->cancelled == 0);
    sig.emit(asio::cancellation_type::terminal);
    io.run();
  }
  REQUIRE(got);
  CHECK(code == errc::cancelled);
  CHECK(c->cancelled == 2);
  REQUIRE(got->tasks.size() == 2);
  for (const auto& t : got->tasks) CHECK(t.status == task_status::cancelled);
}

TEST_CASE("a run cancelled before it begins runs nothing, on every path to its start", "[serving][cancel]") {
  // The cancellation reaches the coordinator after the run's begin, which
  // was posted first: the run must still start no task (it ran them all).
  const auto type = GENERATE(asio::cancellation_type::terminal, asio::cancellation_type::partial);
  const bool global = GENERATE(false, true);
  const bool waits = GENERATE(false, true);  // a Sleep after the effect: the frame-free driver's wait
  INFO("cancellation type " << static_cast<int>(type) << (global ? ", GLOBAL" : ", PRIVATE")
                            << (waits ? ", waits" : ", synchronous"));
  task_group g(global ? workspace_type::global : workspace_type::private_);
  std::vector<task_output<i64>> outs;
  for (int k = 0; k < 4; ++k) {
    const std::string y = "y" + std::to_string(k);
    net n("work" + std::to_string(k));
    n.op("ConstantFill", {}, {y}, {{"value", i64{k}}});
    if (waits) n.op("Sleep", {}, {}, {{"ms", i64{1}}});
    task t("t" + std::to_string(k), step("s").add_net(n));
    outs.push_back(t.output<i64>(y));
    REQUIRE(g.add(t, node("n" + std::to_string(k % 2))));
  }
  asio::io_context io;
  local_session session(io.get_executor());
  cancellable_run run;
  run.start(session, g);
  auto& [sig, got, code] = run;
  sig.emit(type);  // the io_context has not run: nothing has begun
  io.run();
  REQUIRE(got);
  CHECK(code == errc::cancelled);
  REQUIRE(got->tasks.size() == 4);
  for (const auto& t : got->tasks) {
    INFO(t.name);
    CHECK(t.status == task_status::not_run);
    CHECK_FALSE(t.began);
  }
  for (int k = 0; k < 4; ++k)
    CHECK_FALSE(session.node_workspace("n" + std::to_string(k % 2))->has("y" + std::to_string(k)));
  // The session serves the next run as usual.
  auto next = session.async_run(g, {}, asio::use_future);
  io.restart();
  io.run();
  const run_report r = next.get();
  for (int k = 0; k < 4; ++k) CHECK(outs[static_cast<std::size_t>(k)].get(r).value() == k);
}
