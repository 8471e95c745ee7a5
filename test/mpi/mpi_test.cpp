// MPI session tests: run under `mpirun -np 3` (test/meson.build), every
// rank running the same test cases in declaration order.
#include <taskgroup/mpi_session.hpp>

#include <taskgroup/codec.hpp>
#include <taskgroup/task_group.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#define CATCH_CONFIG_EXTERNAL_INTERFACES  // event listeners
#include <boost/asio/bind_allocator.hpp>
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include "support/counting_allocator.hpp"
#include "support/run.hpp"
#include "support/tokens.hpp"
#include "support/values.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace taskgroup;
using namespace taskgroup::test;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

// MPI for the whole test run; with TASKGROUP_TEST_MPI_FUNNELED set, MPI
// is initialized at MPI_THREAD_FUNNELED (the [mpi_funneled] job).
struct mpi_listener : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testRunStarting(const Catch::TestRunInfo&) override {
    if (std::getenv("TASKGROUP_TEST_MPI_FUNNELED") != nullptr) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      funneled = true;
    }
    env.emplace();
  }
  void testRunEnded(const Catch::TestRunStats&) override {
    env.reset();
    if (funneled) MPI_Finalize();
  }
  static inline std::optional<mpi_environment> env;
  static inline bool funneled = false;
};

int world_rank() { return mpi_listener::env->rank(); }

// A net whose op waits an hour unless cancelled; counts both.
struct counters {
  std::atomic<int> started{0};
  std::atomic<int> cancelled{0};
};
net stuck(const std::string& name, std::shared_ptr<counters> c) {
  net n(name);
  n.lambda("Stuck", {}, {}, [c](op_context&) -> asio::awaitable<status> {
    ++c->started;
    asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::hours(1));
    auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) ++c->cancelled;
    co_return ec ? fail(errc::cancelled, "stuck op cancelled") : ok();
  });
  return n;
}

// A net that sleeps `ms` then fails with `message`.
net fail_after(const std::string& name, std::int64_t ms, const std::string& message) {
  net n(name);
  n.op("Sleep", {}, {}, {{"ms", ms}});
  n.op("Fail", {}, {}, {{"message", message}});
  return n;
}

struct opaque {
  int v = 0;
};

codec_registry& point_codecs() {
  static codec_registry reg;
  static const bool added = add_point(reg).has_value();
  (void)added;
  return reg;
}

// Records task ends (the observer of rank 0 also sees remote tasks).
struct recorder final : run_observer {
  void task_end(const event_source& /*at*/, const task_report& r) override {
    std::lock_guard lock(m);
    ended.insert(r.name);
  }
  std::mutex m;
  std::set<std::string> ended;
};

// A net that sets blob "s" to `sizes[run]` copies of `fill(run)`, run
// after run.
net sized_strings(const std::string& name, std::vector<std::size_t> sizes, char (*fill)(std::size_t)) {
  net n(name);
  auto runs = std::make_shared<std::size_t>(0);
  n.lambda("Sized", {}, {"s"}, [runs, sizes = std::move(sizes), fill](op_context& ctx) -> status {
    ctx.output_blob(0).set(std::string(sizes.at(*runs), fill(*runs)));
    ++*runs;
    return ok();
  });
  return n;
}

// `t` on node n1 (rank 1), beside a trivial task on n0 (rank 0).
task_group on_rank_one(const task& t) {
  task_group g;
  REQUIRE(g.add(task("first", step("f").add_net(put<std::int64_t>("x", "x", 1))), node("n0")));
  REQUIRE(g.add(t, node("n1")));
  return g;
}

// `async_run` as a future of its result (the report or the failure).
std::future<result<run_report>> run_future(mpi_session& s, task_group g) {
  auto p = std::make_shared<std::promise<result<run_report>>>();
  auto f = p->get_future();
  s.async_run(std::move(g), {}, as_result([p](result<run_report> r) { p->set_value(std::move(r)); }));
  return f;
}

}  // namespace

CATCH_REGISTER_LISTENER(mpi_listener)

TEST_CASE("the job has three ranks and sessions know their rank", "[mpi_placement]") {
  mpi_session s(2);
  REQUIRE(s.size() == 3);
  CHECK(s.rank() == world_rank());
  CHECK(s.is_client() == (world_rank() == 0));
}

TEST_CASE("nodes go to ranks in order of first use modulo the job size", "[mpi_placement]") {
  mpi_session s(2);
  task_group g;
  std::vector<task_output<std::int64_t>> where;
  for (int i = 0; i < 5; ++i) {
    const std::string n = "n" + std::to_string(i);
    task t("t", step("t").add_net(put<std::int64_t>("put", "rank", s.rank())));
    where.push_back(t.output<std::int64_t>("rank"));
    REQUIRE(g.add(t, node(n)));
  }
  auto placed = s.placement(g);
  REQUIRE(placed);
  CHECK(placed.value() == std::map<std::string, int>{{"n0", 0}, {"n1", 1}, {"n2", 2}, {"n3", 0}, {"n4", 1}});
  recorder rec;
  run_options o;
  o.observer = &rec;
  auto r = test::run_sync(s, g, o);
  REQUIRE(r);
  if (s.is_client()) {
    CHECK(r.value().ok());
    for (int i = 0; i < 5; ++i) CHECK(where[static_cast<std::size_t>(i)].get().value() == i % 3);
    CHECK(rec.ended.size() == 5);  // remote tasks included
  } else {
    // Other ranks learn every task's status; outputs only of their own.
    CHECK(r.value().ok());
    for (const auto& t : r.value().tasks) {
      const bool mine = placed.value().at(t.node) == s.rank();
      CHECK(t.outputs.size() == (mine ? 1U : 0U));
    }
  }
}

TEST_CASE("an explicit placement wins; a rank without nodes still takes part", "[mpi_placement]") {
  mpi_options o;
  o.placement = {{"a", 2}, {"b", 2}};
  mpi_session s(2, o);
  task_group g;
  task ta("t", step("t").add_net(put<std::int64_t>("put", "rank", s.rank())));
  auto a = ta.output<std::int64_t>("rank");
  task tb("t", step("t").add_net(put<std::int64_t>("put", "rank", s.rank())));
  auto b = tb.output<std::int64_t>("rank");
  REQUIRE(g.add(ta, node("a")));
  REQUIRE(g.add(tb, node("b")));
  auto r = test::run_sync(s, g);
  REQUIRE(r);
  if (s.is_client()) {
    CHECK(a.get().value() == 2);
    CHECK(b.get().value() == 2);
  }
}

TEST_CASE("several nodes on one rank keep separate workspaces and strands", "[mpi_placement]") {
  mpi_session s(2);
  task_group g(workspace_type::global);
  REQUIRE(g.add(task("w", step("w").add_net(put<std::int64_t>("w", "secret", 7))), node("n0")));
  REQUIRE(g.add(task("x", step("x").add_net(put<std::int64_t>("x", "other", 1))), node("n1")));
  REQUIRE(g.add(task("y", step("y").add_net(put<std::int64_t>("y", "other", 1))), node("n2")));
  REQUIRE(g.add(task("z", step("z").add_net(put<std::int64_t>("z", "other", 1))), node("n3")));
  REQUIRE(test::run_sync(s, g));
  if (s.rank() == 0) {  // n0 and n3
    CHECK(s.local().node_workspace("n0")->has("secret"));
    CHECK_FALSE(s.local().node_workspace("n3")->has("secret"));
    CHECK(s.local().node_workspace("n3")->has("other"));
    CHECK(s.local().node_strand("n0") != s.local().node_strand("n3"));
  }
  auto nodes = s.local().nodes();
  for (const auto& n : nodes) CHECK(s.placement(g).value().at(n) == s.rank());  // only its own nodes ran here
}

TEST_CASE("remote nets are made on the rank that holds their node, and run there by name", "[mpi_placement]") {
  mpi_options o;
  o.placement = {{"ps", 1}, {"w", 2}};
  mpi_session s(2, o);
  net bump("bump");
  bump.op("Iter", {}, {"hits"});
  task_group carrier;  // carries the net for ps, which has no task here
  REQUIRE(carrier.add_remote_net(bump, node("ps")));
  REQUIRE(carrier.add(task("w", step("w").add_net(put<std::int64_t>("w", "x", 1))), node("w")));
  REQUIRE(test::run_sync(s, carrier));
  CHECK((s.local().node_workspace("ps")->find_net("bump") != nullptr) == (s.rank() == 1));

  task_group user;  // another group runs it by name on ps
  net calls("calls");
  calls.op("RunNet", {}, {}, {{"net", "bump"}}).op("RunNet", {}, {}, {{"net", "bump"}}).op("Copy", {"hits"}, {"total"});
  task c("c", step("c").add_net(calls));
  auto total = c.output<std::int64_t>("total");
  REQUIRE(user.add(c, node("ps")));
  auto r = test::run_sync(s, user);
  REQUIRE(r);
  if (s.is_client()) CHECK(total.get().value() == 2);
}

// CPU time of this process (every thread), user and system.
std::chrono::microseconds process_cpu() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return std::chrono::seconds(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         std::chrono::microseconds(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

TEST_CASE("ranks waiting on a sleeping task do not burn CPU", "[mpi_placement]") {
  // Rank 1 sleeps a second; every rank waits for it (rank 0 for STATUS,
  // rank 2 for CTRL). Polling backs off to `poll_max`: each rank uses a
  // small part of the wall time (a functional bound, far above the few
  // percent it takes, far below a spinning thread's 100%).
  mpi_session s(2);
  task_group g;
  for (int k = 0; k < 3; ++k) {
    net n("work");
    n.op("Sleep", {}, {}, {{"ms", std::int64_t{k == 1 ? 1000 : 1}}});
    REQUIRE(g.add(task("t", step("t").add_net(n)), node("n" + std::to_string(k))));
  }
  REQUIRE(test::run_sync(s, g));  // warm: threads started, group compiled
  const auto cpu0 = process_cpu();
  const auto wall0 = std::chrono::steady_clock::now();
  REQUIRE(test::run_sync(s, g));
  const auto cpu = process_cpu() - cpu0;
  const auto wall = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - wall0);
  INFO("rank " << s.rank() << ": " << cpu.count() << " us CPU in " << wall.count() << " us");
  // Rank 0 starts its clock before its START goes out and rank 1 before
  // its 1 s Sleep begins: both waited it all. Rank 2 may come back from the
  // warm-up run after rank 1 began sleeping, so its wait is shorter.
  if (s.rank() != 2) CHECK(wall >= 1s);
  CHECK(cpu < wall / 4);
}

TEST_CASE("a placement outside the job fails the run on every rank", "[mpi_placement]") {
  mpi_options o;
  o.placement = {{"a", 7}};
  mpi_session s(2, o);
  task_group g;
  REQUIRE(g.add(task("t", step("t").add_net(put<std::int64_t>("p", "x", 1))), node("a")));
  auto r = test::run_sync(s, g);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::invalid_task);
  CHECK_THAT(r.error().message, Catch::Contains("node \"a\" on rank 7, outside a job of 3 ranks"));
}

TEST_CASE("outputs of every built-in type and a user type reach rank 0", "[mpi_outputs]") {
  mpi_options o;
  o.codecs = &point_codecs();
  mpi_session s(2, o);
  task_group g;
  struct handles {
    task_output<std::int64_t> i;
    task_output<double> d;
    task_output<bool> b;
    task_output<std::string> str;
    task_output<std::vector<std::int64_t>> vi;
    task_output<std::vector<double>> vd;
    task_output<std::vector<bool>> vb;
    task_output<std::vector<std::string>> vs;
    task_output<point> p;
    task_output<std::vector<std::int64_t>> list;
  };
  std::vector<handles> h;
  for (int k = 0; k < 3; ++k) {
    const std::int64_t v = 100 * k + s.rank();  // the rank that ran it shows in the value
    execution_step st("all");
    st.add_net(put<std::int64_t>("i", "i", v));
    st.add_net(put<double>("d", "d", static_cast<double>(v) + 0.5));
    st.add_net(put<bool>("b", "b", k % 2 == 1));
    st.add_net(put<std::string>("s", "s", "rank " + std::to_string(s.rank())));
    st.add_net(put<std::vector<std::int64_t>>("vi", "vi", {v, v + 1}));
    st.add_net(put<std::vector<double>>("vd", "vd", {0.25, static_cast<double>(v)}));
    st.add_net(put<std::vector<bool>>("vb", "vb", {true, false, true}));
    st.add_net(put<std::vector<std::string>>("vs", "vs", {"a", "", "c"}));
    st.add_net(put<point>("p", "p", point{1.5, static_cast<double>(v)}));
    st.add_net(put<std::int64_t>("l1", "l1", v));
    st.add_net(put<std::int64_t>("l2", "l2", -v));
    task t("t", st);
    h.push_back({t.output<std::int64_t>("i"), t.output<double>("d"), t.output<bool>("b"), t.output<std::string>("s"),
                 t.output<std::vector<std::int64_t>>("vi"), t.output<std::vector<double>>("vd"),
                 t.output<std::vector<bool>>("vb"), t.output<std::vector<std::string>>("vs"), t.output<point>("p"),
                 t.output<std::int64_t>(std::vector<std::string>{"l1", "l2"})});
    t.declare_output({"s"});  // an untyped output travels too
    REQUIRE(g.add(t, node("n" + std::to_string(k))));
  }
  auto r = test::run_sync(s, g);
  REQUIRE(r);
  if (!s.is_client()) return;
  for (int k = 0; k < 3; ++k) {
    const auto& x = h[static_cast<std::size_t>(k)];
    const std::int64_t v = 100 * k + k;  // node k ran on rank k
    CHECK(x.i.get().value() == v);
    CHECK(x.d.get().value() == static_cast<double>(v) + 0.5);
    CHECK(x.b.get().value() == (k % 2 == 1));
    CHECK(x.str.get().value() == "rank " + std::to_string(k));
    CHECK(x.vi.get().value() == std::vector<std::int64_t>{v, v + 1});
    CHECK(x.vd.get().value() == std::vector<double>{0.25, static_cast<double>(v)});
    CHECK(x.vb.get().value() == std::vector<bool>{true, false, true});
    CHECK(x.vs.get().value() == std::vector<std::string>{"a", "", "c"});
    CHECK(x.p.get().value().x == 1.5);
    CHECK(x.p.get().value().y == static_cast<double>(v));
    CHECK(x.list.get().value() == std::vector<std::int64_t>{v, -v});
    const task_report* rep = r.value().find("n" + std::to_string(k) + "/t");
    REQUIRE(rep != nullptr);
    CHECK(rep->status == task_status::succeeded);
    CHECK(rep->iterations >= 1);
  }
}

TEST_CASE("a typed output without a codec fails the run at its start on every rank", "[mpi_outputs]") {
  mpi_session s(2);  // the global registry knows no `point`
  auto ran = std::make_shared<std::atomic<int>>(0);
  task_group g;
  for (int k = 0; k < 3; ++k) {
    net n("count");
    n.lambda("Count", {}, {}, [ran](op_context&) -> status {
      ++*ran;
      return ok();
    });
    task t("t", step("t").add_net(n));
    if (k == 2) (void)t.output<point>("p");
    REQUIRE(g.add(t, node("n" + std::to_string(k))));
  }
  auto r = test::run_sync(s, g);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::not_serializable);
  CHECK_THAT(r.error().message, Catch::Contains("task \"n2/t\" output \"p\": no codec for type"));
  CHECK(*ran == 0);
}

TEST_CASE("an untyped output whose value has no codec fails its task", "[mpi_outputs]") {
  mpi_session s(2);
  task_group g;
  for (int k = 0; k < 3; ++k) {
    task t("t", step("t").add_net(put<opaque>("o", "o", opaque{k})));
    if (k == 1) t.declare_output({"o"});
    REQUIRE(g.add(t, node("n" + std::to_string(k))));
  }
  auto r = test::run_sync(s, g);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::not_serializable);
  CHECK_THAT(r.error().message, Catch::StartsWith("rank 1: task \"n1/t\"") && Catch::Contains("output \"o\"") &&
                                    Catch::Contains("no codec for type"));
}

TEST_CASE("ranks that built different groups fail loudly, naming the rank", "[mpi_fingerprint]") {
  mpi_session s(2);
  task_group g;
  for (int k = 0; k < 3; ++k) {
    task t("t", step("t").add_net(put<std::int64_t>("p", "x", 1)));
    (void)t.output<std::int64_t>(s.rank() == 2 && k == 1 ? "y" : "x");
    REQUIRE(g.add(t, node("n" + std::to_string(k))));
  }
  auto r = test::run_sync(s, g);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::group_mismatch);
  CHECK_THAT(r.error().message, Catch::StartsWith("rank 2: built a different group") &&
                                    Catch::Contains("task \"n1/t\" on node \"n1\", outputs [\"x\"") &&
                                    Catch::Contains("outputs [\"y\""));
  // The session stays usable for the next run.
  task_group ok_group;
  REQUIRE(ok_group.add(task("t", step("t").add_net(put<std::int64_t>("p", "x", 1))), node("n0")));
  CHECK(test::run_sync(s, ok_group));
}

TEST_CASE("a group checked in an earlier run does not hide a different group later", "[mpi_fingerprint]") {
  // Reruns of one used group reuse its description; a new group is
  // described and checked again, and so is the first group after it.
  mpi_session s(2);
  auto make = [](const std::string& out) {
    task_group g;
    task t("t", step("t").add_net(put<std::int64_t>("p", "x", 1)));
    (void)t.output<std::int64_t>(out);
    (void)g.add(t, node("n1"));
    return g;
  };
  task_group same = make("x");
  for (int i = 0; i < 3; ++i) REQUIRE(test::run_sync(s, same));
  task_group other = make(s.rank() == 1 ? "y" : "x");
  auto r = test::run_sync(s, other);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::group_mismatch);
  CHECK_THAT(r.error().message, Catch::StartsWith("rank 1: built a different group"));
  CHECK(test::run_sync(s, same));
  // The same group object on rank 0 against a different one on rank 2,
  // after rank 0 kept its description from the runs above.
  task_group third = make(s.rank() == 2 ? "z" : "x");
  auto r2 = test::run_sync(s, s.rank() == 2 ? third : same);
  REQUIRE_FALSE(r2);
  CHECK_THAT(r2.error().message, Catch::StartsWith("rank 2: built a different group"));
}

TEST_CASE("ranks whose tasks or steps retry differently fail, naming the policy", "[mpi_fingerprint]") {
  // Rank 2 asks for one more attempt: of the task, then of a step.
  mpi_session s(2);
  retry_policy three;
  three.max_attempts = 3;
  retry_policy mine = three;
  if (s.rank() == 2) mine.max_attempts = 4;
  const std::string rank0 =
      "retry: max_attempts 3, initial_backoff 10 ms, multiplier 2, max_backoff 1000 ms, "
      "jitter, retry_on [op_failed, timeout]";
  for (const bool on_step : {false, true}) {
    INFO((on_step ? "a step's policy" : "a task's policy"));
    task_group g;
    execution_step work("work");
    work.add_substep(step("put").add_net(put<std::int64_t>("p", "x", 1)));
    if (on_step) work.add_substep(step("again").add_net(put<std::int64_t>("q", "y", 1)).retry(mine));
    task t("t", work);
    if (!on_step) t.retry(mine);
    REQUIRE(g.add(t, node("n1")));
    auto r = test::run_sync(s, g);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::group_mismatch);
    const std::string place = on_step ? "task \"n1/t\" step \"work/again\" " : "task \"n1/t\" ";
    CHECK_THAT(r.error().message, Catch::StartsWith("rank 2: built a different group: rank 0 has " + place + rank0 +
                                                    ", rank 2 has " + place + "retry: max_attempts 4"));
  }
  // The same policies everywhere run; so does a policy that never retries
  // beside none.
  task_group same;
  retry_policy once;
  once.max_attempts = 1;
  once.jitter = s.rank() != 1;
  task t("t", step("work").add_net(put<std::int64_t>("p", "x", 1)).retry(once));
  t.retry(three);
  REQUIRE(same.add(t, node("n1")));
  CHECK(test::run_sync(s, same));
}

TEST_CASE("ranks that name the group differently fail, naming both names", "[mpi_fingerprint]") {
  // The name labels each rank's metrics: the ranks must agree on it.
  mpi_session s(2);
  task_group g;
  g.name(s.rank() == 1 ? "other" : "orders");
  REQUIRE(g.add(task("t", step("work").add_net(put<std::int64_t>("p", "x", 1))), node("n1")));
  auto r = test::run_sync(s, g);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::group_mismatch);
  CHECK_THAT(r.error().message, Catch::StartsWith("rank 1: built a different group: rank 0 has name \"orders\", "
                                                  "rank 1 has name \"other\""));
}

TEST_CASE("ranks with a different number of tasks fail with the first difference", "[mpi_fingerprint]") {
  mpi_session s(2);
  task_group g;
  const int tasks = s.rank() == 1 ? 4 : 3;
  for (int k = 0; k < tasks; ++k) {
    REQUIRE(g.add(task("t" + std::to_string(k), step("t").add_net(put<std::int64_t>("p", "x", 1))), node("n0")));
  }
  auto r = test::run_sync(s, g);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::group_mismatch);
  CHECK_THAT(r.error().message, Catch::StartsWith("rank 1: built a different group: rank 0 has (nothing)"));
}

TEST_CASE("a failure on any rank cancels every task on every rank", "[mpi_failure]") {
  for (int failing = 0; failing < 3; ++failing) {
    DYNAMIC_SECTION("failing rank " << failing) {
      mpi_session s(2);
      auto c = std::make_shared<counters>();
      task_group g;
      for (int k = 0; k < 3; ++k) {
        execution_step st("work");
        if (k == failing) {
          st.add_net(fail_after("read", 50, "disk on fire"));
        } else {
          st.add_net(stuck("wait", c));
        }
        REQUIRE(g.add(task("t", st), node("n" + std::to_string(k))));
      }
      auto r = test::run_sync(s, g);
      REQUIRE_FALSE(r);
      CHECK(r.error().code == errc::op_failed);
      const std::string n = "n" + std::to_string(failing);
      CHECK_THAT(r.error().message,
                 Catch::StartsWith("rank " + std::to_string(failing) + ": task \"" + n + "/t\" (node \"" + n + "\")") &&
                     Catch::Contains("work/net \"read\" op #1 (Fail)") && Catch::EndsWith("disk on fire"));
      CHECK(c->started == c->cancelled);  // nothing keeps running here
    }
  }
}

TEST_CASE("async_run completes with (error_code, run_report) through every completion token", "[mpi_tokens]") {
  const auto kind = GENERATE(token_kind::callback, token_kind::future, token_kind::awaitable, token_kind::as_tuple,
                             token_kind::redirect_error, token_kind::deferred, token_kind::default_token);
  const bool failing = GENERATE(false, true);
  INFO("token " << static_cast<int>(kind) << (failing ? ", a task on rank 1 fails" : ", every task succeeds"));
  execution_step second("s");
  if (failing) {
    second.add_net(fail_after("f", 0, "boom"));
  } else {
    second.add_net(put<std::int64_t>("y", "y", 2));
  }
  task t("second", second);
  if (!failing) (void)t.output<std::int64_t>("y");
  task_group g = on_rank_one(t);
  asio::io_context io;
  mpi_session s(io.get_executor());
  seen out = run_with(io, s, g, kind);
  INFO("rank " << s.rank());
  if (!failing) {
    CHECK_FALSE(out.code);
    CHECK_FALSE(out.threw);
    REQUIRE(out.report);
    CHECK(out.report->ok());
    REQUIRE(out.report->tasks.size() == 2);
    if (s.is_client()) CHECK(out.report->tasks[1].outputs.at(0).second->as<std::int64_t>() == 2);
    return;
  }
  CHECK(out.code == errc::op_failed);
  CHECK(out.threw == throws(kind));
  if (throws(kind)) {  // the exception carries the code and the run's message
    CHECK_THAT(out.what, Catch::StartsWith("rank 1: ") && Catch::EndsWith("boom"));
    return;
  }
  // The report is there on every rank: the run's failure, and what each
  // task did.
  REQUIRE(out.report);
  REQUIRE(out.report->failure);
  CHECK(out.report->failure->code == out.code);
  CHECK_THAT(out.report->failure->message, Catch::StartsWith("rank 1: ") && Catch::EndsWith("boom"));
  REQUIRE(out.report->tasks.size() == 2);
  // Rank 0 knows what every task did; rank 1 what its own task did (a
  // failed run's CTRL goes out before the other tasks end).
  if (s.rank() == 0) CHECK(out.report->tasks[0].status == task_status::succeeded);
  if (s.rank() <= 1) {
    CHECK(out.report->tasks[1].status == task_status::failed);
    REQUIRE(out.report->tasks[1].failure);
    CHECK_THAT(out.report->tasks[1].failure->message, Catch::EndsWith("boom"));
  }
}

TEST_CASE("a run refused before it starts still reports every task, as not run", "[mpi_tokens]") {
  asio::io_context io;
  mpi_session s(io.get_executor());
  task_group g = on_rank_one(task("second", step("s").add_net(put<std::int64_t>("y", "y", 2))));
  run_options o;
  o.timeout = max_duration + std::chrono::milliseconds(1);
  boost::system::error_code ec;
  run_report report;
  s.async_run(g, o, [&](boost::system::error_code e, run_report r) {
    ec = e;
    report = std::move(r);
  });
  io.run();
  CHECK(ec == errc::invalid_task);
  REQUIRE(report.failure);
  CHECK(report.failure->code == ec);
  REQUIRE(report.tasks.size() == 2);
  for (const auto& t : report.tasks) CHECK(t.status == task_status::not_run);
}

TEST_CASE("an mpi_session is made from its execution context, and binds the handler's allocator", "[mpi_tokens]") {
  allocation_counts c;
  asio::io_context io;
  mpi_session s(io);
  CHECK(s.get_executor() == asio::any_io_executor(io.get_executor()));
  task_group g = on_rank_one(task("second", step("s").add_net(put<std::int64_t>("y", "y", 2))));
  boost::system::error_code ec = asio::error::would_block;
  s.async_run(g, asio::bind_allocator(counting_allocator<void>(&c), [&](boost::system::error_code e, run_report r) {
                ec = e;
                CHECK(r.ok());
              }));
  io.run();
  CHECK_FALSE(ec);
  CHECK(c.allocated > 0);
  CHECK(c.freed == c.allocated);
}

TEST_CASE("cancelling a run from outside cancels every rank", "[mpi_cancel]") {
  // From rank 0 the run ends with the cancellation itself; from a worker
  // with that rank's cancellation, which fails the run everywhere. Terminal
  // and partial cancellation do it; total is ignored (the run goes on
  // until a terminal one).
  const std::pair<const char*, asio::cancellation_type> types[] = {{"terminal", asio::cancellation_type::terminal},
                                                                   {"partial", asio::cancellation_type::partial},
                                                                   {"total", asio::cancellation_type::total}};
  for (const auto& entry : types) {
    // Plain names: clang 14 captures no structured binding.
    const char* type_name = entry.first;
    const asio::cancellation_type type = entry.second;
    for (int canceller : {0, 1}) {
      DYNAMIC_SECTION(type_name << " cancellation on rank " << canceller) {
        asio::io_context io;
        mpi_session s(io.get_executor());
        auto c = std::make_shared<counters>();
        task_group g;
        for (int k = 0; k < 3; ++k)
          REQUIRE(g.add(task("t", step("work").add_net(stuck("wait", c))), node("n" + std::to_string(k))));
        asio::cancellation_signal cancel;
        asio::steady_timer t(io, 100ms);
        asio::steady_timer then(io);
        std::optional<result<run_report>> out;
        bool ended_before_terminal = false;
        if (s.rank() == canceller) {
          t.async_wait([&](boost::system::error_code) {
            cancel.emit(type);
            if (type != asio::cancellation_type::total) return;
            // The tasks never end by themselves: a run still going 200 ms
            // after the total cancellation ignored it. Then end it.
            then.expires_after(200ms);
            then.async_wait([&](boost::system::error_code) {
              ended_before_terminal = out.has_value() || c->cancelled != 0;
              cancel.emit(asio::cancellation_type::terminal);
            });
          });
        }
        s.async_run(g, {}, asio::bind_cancellation_slot(cancel.slot(), test::as_result([&](result<run_report> r) {
                                                          out = std::move(r);
                                                        })));
        io.run();
        CHECK_FALSE(ended_before_terminal);
        REQUIRE(out);
        REQUIRE_FALSE(*out);
        CHECK(out->error().is_cancelled());
        if (canceller == 0) {
          CHECK(out->error().code == errc::cancelled);
        } else {
          CHECK_THAT(out->error().message, Catch::StartsWith("rank " + std::to_string(canceller) + ": "));
        }
        CHECK(c->started == 1);
        CHECK(c->cancelled == 1);
      }
    }
  }
}

TEST_CASE("a run deadline cancels every rank with a timeout", "[mpi_cancel]") {
  mpi_session s(2);
  auto c = std::make_shared<counters>();
  task_group g;
  for (int k = 0; k < 3; ++k)
    REQUIRE(g.add(task("t", step("work").add_net(stuck("wait", c))), node("n" + std::to_string(k))));
  run_options o;
  // Long enough for every rank's task to have begun (the list below names
  // only those), even with three ranks under a sanitizer on two cores.
  o.timeout = 1000ms;
  auto r = test::run_sync(s, g, o);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::timeout);
  CHECK_THAT(r.error().message, Catch::Contains("run timed out after 1000 ms"));
  CHECK(c->cancelled == c->started);
  if (s.is_client()) {
    // Rank 0's error lists where every rank's tasks waited, each task's
    // error as its report has it (a worker's with its rank).
    const std::string& m = r.error().message;
    CHECK_THAT(m,
               Catch::StartsWith("run timed out after 1000 ms (trace ") && Catch::Contains("); still running then: "));
    const auto placed = s.placement(g).value();
    for (int k = 0; k < 3; ++k) {
      const std::string n = "n" + std::to_string(k);
      const int rank = placed.at(n);
      const std::string entry = (rank == 0 ? std::string() : "rank " + std::to_string(rank) + ": ") + "task \"" + n +
                                "/t\" (node \"" + n + "\"): work/net \"wait\" op #0 (Stuck): stuck op cancelled";
      CHECK_THAT(m, Catch::Contains(entry));
    }
  }
}

TEST_CASE("a timeout out of [0, max_duration] is refused on every rank, naming the limit", "[mpi_cancel]") {
  mpi_session s(2);
  task_group g;
  for (int k = 0; k < 3; ++k) {
    REQUIRE(g.add(task("t", step("t").add_net(put<std::int64_t>("x", "x", 1))), node("n" + std::to_string(k))));
  }
  for (auto timeout : {std::chrono::milliseconds::max(), max_duration + 1ms}) {
    run_options o;
    o.timeout = timeout;
    auto r = test::run_sync(s, g, o);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_task);
    CHECK_THAT(r.error().message,
               Catch::StartsWith("run_options::timeout must be at most") && Catch::Contains("taskgroup::max_duration"));
  }
  for (auto timeout : {-1ms, std::chrono::milliseconds::min()}) {
    run_options o;
    o.timeout = timeout;
    auto r = test::run_sync(s, g, o);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_task);
    CHECK_THAT(r.error().message, Catch::StartsWith("run_options::timeout must be >= 0 ms, got -"));
  }
  // The session runs on after the refusals.
  CHECK(test::run_sync(s, g));
}

TEST_CASE("mpi_options out of range refuse every run on every rank, naming the option and the limit", "[mpi_cancel]") {
  task_group g;
  for (int k = 0; k < 3; ++k) {
    REQUIRE(g.add(task("t", step("t").add_net(put<std::int64_t>("x", "x", k))), node("n" + std::to_string(k))));
  }
  mpi_options mo;
  mo.lost_after = std::chrono::milliseconds::max();
  mpi_session s(2, mo);
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto r = test::run_sync(s, g);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_task);
    CHECK(r.error().message ==
          "mpi_options::lost_after must be at most 1099511627776 ms (taskgroup::max_duration, about 34.8 years), got "
          "9223372036854775807");
  }
  // A session with its options in range runs the same group.
  mo.lost_after = max_duration;
  mpi_session fine(2, mo);
  CHECK(test::run_sync(fine, g));
}

TEST_CASE("the longest timeout and grace do not wrap into the past", "[mpi_cancel]") {
  // In nanoseconds, now + 2^40 ms + 9e12 ms passed INT64_MAX: the workers'
  // watchdog wrapped into the past and ended the job at once. Both are
  // bounded by max_duration now; their sum must still be a deadline.
  {
    mpi_options mo;
    mo.grace = max_duration;
    mpi_session s(2, mo);
    task_group g;
    for (int k = 0; k < 3; ++k) {
      REQUIRE(g.add(task("t", step("t").add_net(put<std::int64_t>("x", "x", k))), node("n" + std::to_string(k))));
    }
    run_options o;
    o.timeout = max_duration;
    auto r = test::run_sync(s, g, o);
    REQUIRE(r);
    CHECK(r.value().tasks.size() == 3);
  }
  // now + milliseconds::max() wrapped to 1 ms ago: rank 0's grace period
  // after a failure was over at once, and it ended the job while the
  // other ranks were cancelling their tasks. The longest grace accepted
  // now must not end it either.
  mpi_options mo;
  mo.grace = max_duration;
  mpi_session s(2, mo);
  auto c = std::make_shared<counters>();
  task_group failing;
  for (int k = 0; k < 3; ++k) {
    execution_step st("work");
    st.add_net(k == 1 ? fail_after("read", 20, "disk on fire") : stuck("wait", c));
    REQUIRE(failing.add(task("t", st), node("n" + std::to_string(k))));
  }
  auto f = test::run_sync(s, failing);
  REQUIRE_FALSE(f);
  CHECK_THAT(f.error().message, Catch::StartsWith("rank 1: ") && Catch::EndsWith("disk on fire"));
  CHECK(c->cancelled == c->started);
}

TEST_CASE("gather: every task runs to its end and rank 0 gets each result", "[mpi_gather]") {
  mpi_session s(2);
  task_group g;
  std::vector<task_output<std::int64_t>> outs;
  for (int k = 0; k < 3; ++k) {
    execution_step st("work");
    if (k == 1) {
      st.add_net(fail_after("read", 10, "bad input"));
    }
    st.add_net(put<std::int64_t>("p", "x", 10 + k));
    task t("t", st);
    outs.push_back(t.output<std::int64_t>("x"));
    REQUIRE(g.add(t, node("n" + std::to_string(k))));
  }
  run_options o;
  o.policy = run_policy::gather;
  auto r = test::run_sync(s, g, o);
  REQUIRE(r);
  const auto& rep = r.value();
  CHECK_FALSE(rep.ok());  // on every rank: rank 0's DONE carries each task's status
  REQUIRE(rep.tasks[1].failure);
  // (rank 1 holds its own report; the others got it through rank 0)
  CHECK_THAT(rep.tasks[1].failure->message, Catch::Contains("task \"n1/t\"") && Catch::EndsWith("bad input"));
  if (!s.is_client()) return;
  CHECK(rep.tasks[0].status == task_status::succeeded);
  CHECK(rep.tasks[1].status == task_status::failed);
  CHECK(rep.tasks[2].status == task_status::succeeded);
  REQUIRE(rep.tasks[1].failure);
  CHECK_THAT(rep.tasks[1].failure->message, Catch::StartsWith("rank 1: task \"n1/t\"") && Catch::EndsWith("bad input"));
  CHECK(outs[0].get().value() == 10);
  CHECK(outs[2].get().value() == 12);
  CHECK(outs[1].get().error().code == errc::output_not_set);
}

TEST_CASE("a retried task's attempts run on the rank of its node, and rank 0 reports them", "[mpi_retry]") {
  mpi_session s(2);
  task_group g;
  retry_policy p;
  p.max_attempts = 3;
  p.initial_backoff = std::chrono::milliseconds(1);
  for (int k = 0; k < 3; ++k) {
    net flaky("flaky" + std::to_string(k));
    flaky.op("FailTimes", {}, {}, {{"times", std::int64_t{2}}, {"message", std::string("busy")}});
    REQUIRE(g.add(task("t", step("work").add_net(flaky)).retry(p), node("n" + std::to_string(k))));
  }
  // Twice: FailTimes counts within each run.
  for (int round = 0; round < 2; ++round) {
    auto r = test::run_sync(s, g);
    REQUIRE(r);
    CHECK(r.value().ok());
    if (!s.is_client()) continue;
    for (int k = 0; k < 3; ++k) {
      const task_report& t = r.value().tasks[static_cast<std::size_t>(k)];
      INFO(t.name);
      CHECK(t.attempts == 3);
      const std::vector<error>& failures = r.value().attempt_failures(static_cast<std::size_t>(k));
      REQUIRE(failures.size() == 2);
      CHECK_THAT(failures[1].message, Catch::Contains("busy (run 2 of the 2 that fail)"));
      if (k != 0) CHECK_THAT(failures[0].message, Catch::StartsWith("rank " + std::to_string(k) + ": "));
    }
  }
}

TEST_CASE("metrics: rank 0 counts the runs, each rank its own tasks, retries and offloaded ops", "[mpi_metrics]") {
  mpi_session s(2);
  // n0, n1, n2 on ranks 0, 1, 2: a plain task, a task that retries twice
  // per run, an offloaded Hash.
  task_group g;
  g.name("spread");
  retry_policy p;
  p.max_attempts = 3;
  p.initial_backoff = std::chrono::milliseconds(1);
  net plain("plain");
  plain.op("ConstantFill", {}, {"x"}, {{"value", std::int64_t{1}}});
  REQUIRE(g.add(task("t", step("work").add_net(plain)), node("n0")));
  net flaky("flaky");
  flaky.op("FailTimes", {}, {}, {{"times", std::int64_t{2}}});
  REQUIRE(g.add(task("t", step("work").add_net(flaky)).retry(p), node("n1")));
  net hash("hash");
  hash.op("ConstantFill", {}, {"text"}, {{"value", std::string("metrics")}});
  hash.op("Hash", {"text"}, {"h"});
  REQUIRE(g.add(task("t", step("work").add_net(hash)), node("n2")));
  task_group broken;
  broken.name("broken");
  net bad("bad");
  bad.op("Fail", {}, {}, {{"message", std::string("no")}});
  // Nodes go to ranks in order of first use: n2 on rank 2 again.
  REQUIRE(broken.add(task("t", step("work").add_net(plain)), node("n0")));
  REQUIRE(broken.add(task("t", step("work").add_net(plain)), node("n1")));
  REQUIRE(broken.add(task("t", step("work").add_net(bad)), node("n2")));
  for (int round = 0; round < 2; ++round) {
    auto r = test::run_sync(s, g);
    REQUIRE(r);
    CHECK(r.value().ok());
  }
  auto failed = test::run_sync(s, broken);
  REQUIRE_FALSE(failed);
  CHECK(failed.error().code == errc::op_failed);

  const session_metrics m = s.metrics();
  REQUIRE(m.rank == s.rank());
  const group_metrics* spread = m.find("spread");
  REQUIRE(spread != nullptr);
  const group_metrics* gone = m.find("broken");
  if (s.is_client()) {
    CHECK(spread->runs_of(run_outcome::succeeded) == 2);
    CHECK(spread->run_latency.count() == 2);
    CHECK(spread->queue_wait.counts[0] == 2);
    REQUIRE(gone != nullptr);
    CHECK(gone->runs_of(run_outcome::failed) == 1);
  } else {
    CHECK(spread->runs_ended() == 0);
    CHECK(spread->run_latency.count() == 0);
    if (gone != nullptr) CHECK(gone->runs_ended() == 0);
  }
  // This rank's own task of "spread", twice.
  CHECK(spread->tasks_of(task_status::succeeded) == 2);
  CHECK(spread->task_duration.count() == 2);
  CHECK(spread->attempts_retried == (s.rank() == 1 ? 4U : 0U));
  CHECK(spread->offloaded_ops == (s.rank() == 2 ? 2U : 0U));
  CHECK(spread->offload_wait.count() == spread->offloaded_ops);
  if (s.rank() == 2) {
    REQUIRE(gone != nullptr);
    CHECK(gone->tasks_of(task_status::failed) == 1);
  }
  const std::string text = to_prometheus(m);
  CHECK_THAT(text, Catch::Contains("taskgroup_runs_in_flight{rank=\"" + std::to_string(s.rank()) + "\"} 0"));
  CHECK_THAT(text, Catch::Contains("taskgroup_tasks_total{group=\"spread\",outcome=\"succeeded\",rank=\"" +
                                   std::to_string(s.rank()) + "\"} 2"));
}

TEST_CASE("trace context: every rank's part runs under the run's trace id", "[mpi_metrics]") {
  mpi_session s(2);
  // On n0, n1, n2 (ranks 0, 1, 2): each task's op writes the trace id its
  // run context carries, and the task's events reach rank 0's observer.
  task_group g;
  std::vector<task_output<std::string>> seen;
  for (int k = 0; k < 3; ++k) {
    net n("trace" + std::to_string(k));
    n.lambda("TraceId", {}, {"id"}, [](op_context& ctx) -> status {
      ctx.output_blob(0).set(ctx.run().trace().trace_id_hex());
      return ok();
    });
    task t("t", step("work").add_net(n));
    seen.push_back(t.output<std::string>("id"));
    REQUIRE(g.add(t, node("n" + std::to_string(k))));
  }
  struct trace_ids final : run_observer {
    void task_end(const event_source& at, const task_report&) override {
      std::lock_guard lock(m);
      ids.insert(std::string(at.trace_id));
    }
    std::mutex m;
    std::set<std::string> ids;
  };
  for (const bool given : {true, false}) {
    CAPTURE(given);
    trace_ids obs;
    run_options o;
    o.observer = &obs;
    if (given) o.trace_parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    auto r = test::run_sync(s, g, o);
    REQUIRE(r);
    const std::string& id = r.value().trace_id;
    REQUIRE(id.size() == 32);
    if (given) {
      CHECK(id == "0af7651916cd43dd8448eb211c80319c");
      CHECK(r.value().trace.flags == 1);
      CHECK(r.value().trace.parent_id_hex() != "b7ad6b7169203331");  // a span of its own
    }
    if (!s.is_client()) continue;
    for (const auto& out : seen) CHECK(out.get().value() == id);
    CHECK(obs.ids == std::set<std::string>{id});
  }
  // A malformed trace parent is refused on every rank, naming the option.
  run_options bad;
  bad.trace_parent = "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01";
  auto refused = test::run_sync(s, g, bad);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == errc::invalid_task);
  CHECK_THAT(refused.error().message, Catch::Contains("run_options::trace_parent has an all-zero parent id"));
  // The live view of this rank: nothing in flight now, the rank named.
  auto described = s.async_describe(boost::asio::use_future);
  REQUIRE(described.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  const session_description d = described.get();
  CHECK(d.rank == s.rank());
  CHECK(d.runs.empty());
}

TEST_CASE("reruns of a GLOBAL group accumulate on every rank", "[mpi_reruns]") {
  mpi_session s(2);
  task_group g(workspace_type::global);
  std::vector<task_output<std::int64_t>> outs;
  for (int k = 0; k < 3; ++k) {
    net n("count");
    n.op("Iter", {}, {"count"});
    task t("t", step("t").add_net(n));
    outs.push_back(t.output<std::int64_t>("count"));
    REQUIRE(g.add(t, node("n" + std::to_string(k))));
  }
  std::optional<run_report> first;
  for (int run = 1; run <= 3; ++run) {
    auto r = test::run_sync(s, g);
    REQUIRE(r);
    if (s.is_client()) {
      for (const auto& o : outs) CHECK(o.get().value() == run);
    }
    // Every rank's own task: its handle and report hold copies, which
    // later runs leave alone (the worker sent the value from its node
    // workspace).
    const auto mine = static_cast<std::size_t>(s.rank());
    CHECK(outs[mine].get().value() == run);
    REQUIRE(r.value().tasks[mine].outputs.size() == 1);
    CHECK(r.value().tasks[mine].outputs[0].second->as<std::int64_t>() == run);
    if (!first) first = std::move(r).value();
  }
  CHECK(first->tasks[static_cast<std::size_t>(s.rank())].outputs[0].second->as<std::int64_t>() == 1);
}

TEST_CASE("one run at a time: a run asked for while another is in flight fails at once", "[mpi_reruns]") {
  // Every rank holds a task of the first run until the checks are done;
  // the refused runs send nothing, so the first run ends normally.
  mpi_session s(2);
  auto started = std::make_shared<std::atomic<int>>(0);
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto holding = [&] {
    task_group g;
    for (int k = 0; k < s.size(); ++k) {
      net n("hold");
      n.lambda("Hold", {}, {}, [started, release](op_context&) -> asio::awaitable<status> {
        ++*started;
        asio::steady_timer t(co_await asio::this_coro::executor);
        while (!release->load()) {
          t.expires_after(1ms);
          co_await t.async_wait(asio::use_awaitable);
        }
        co_return ok();
      });
      (void)g.add(task("t", step("t").add_net(n)), node("n" + std::to_string(k)));
    }
    return g;
  };
  task_group other;
  REQUIRE(other.add(task("t", step("t").add_net(put<std::int64_t>("x", "x", 1))), node("n0")));
  auto wait_started = [&](int n) {
    for (int i = 0; i < 20'000 && started->load() < n; ++i) std::this_thread::sleep_for(1ms);
    REQUIRE(started->load() == n);
  };
  auto refused = [](const result<run_report>& r) {
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::session_busy);  // its own code: busy, not wrong
    CHECK(r.error().code == std::errc::device_or_resource_busy);
    CHECK(r.error().message == "a run is already in flight on this MPI session");
  };

  // In flight through async_run: a blocking run and async_run are refused.
  auto first = s.async_run(holding(), {}, asio::use_future);
  wait_started(1);
  refused(test::run_sync(s, other));
  refused(run_future(s, other).get());
  release->store(true);
  CHECK(first.get().ok());

  // In flight through a blocking run on another thread: both forms again.
  release->store(false);
  started->store(0);
  std::optional<result<run_report>> blocked;
  std::thread caller([&] { blocked = test::run_sync(s, holding()); });
  wait_started(1);
  refused(test::run_sync(s, other));
  refused(run_future(s, other).get());
  release->store(true);
  caller.join();
  REQUIRE(blocked);
  CHECK(*blocked);
  // And the session runs the next group normally.
  CHECK(test::run_sync(s, other));
}

TEST_CASE("a run queued when the session is destroyed completes with session_closed", "[mpi_reruns]") {
  // Every rank does the same: no run starts, no message is sent, and the
  // communicator is freed by every rank's destructor in the same order.
  task_group g;
  for (int k = 0; k < 3; ++k) {
    REQUIRE(g.add(task("t", step("t").add_net(put<std::int64_t>("x", "x", 1))), node("n" + std::to_string(k))));
  }
  asio::io_context io;
  std::optional<result<run_report>> queued, deferred_out;
  {
    auto s = std::make_unique<mpi_session>(io.get_executor());
    // Queued on the executor, not started: io has not run yet.
    s->async_run(g, {}, test::as_result([&](result<run_report> r) { queued = std::move(r); }));
    // Initiated only after the session is gone.
    auto op = s->async_run(g, {}, asio::deferred);
    s.reset();
    std::move(op)(test::as_result([&](result<run_report> r) { deferred_out = std::move(r); }));
  }
  io.run();
  for (auto* out : {&queued, &deferred_out}) {
    REQUIRE(*out);
    REQUIRE_FALSE(**out);
    CHECK((*out)->error().code == errc::session_closed);
    CHECK((*out)->error().message == "MPI session is closed.");
  }
  // A new session on the same executor runs normally.
  mpi_session again(io.get_executor());
  std::optional<result<run_report>> next;
  again.async_run(g, {}, test::as_result([&](result<run_report> r) { next = std::move(r); }));
  io.restart();
  io.run();
  REQUIRE(next);
  CHECK(*next);
}

TEST_CASE("30 tasks on 6 nodes", "[mpi_reruns]") {
  mpi_session s(2);
  task_group g;
  std::vector<task_output<std::int64_t>> outs;
  for (int k = 0; k < 30; ++k) {
    task t("t" + std::to_string(k), step("t").add_net(put<std::int64_t>("p", "x" + std::to_string(k), k)));
    outs.push_back(t.output<std::int64_t>("x" + std::to_string(k)));
    REQUIRE(g.add(t, node("n" + std::to_string(k % 6))));
  }
  auto r = test::run_sync(s, g);
  REQUIRE(r);
  if (s.is_client()) {
    CHECK(r.value().ok());
    for (int k = 0; k < 30; ++k) CHECK(outs[static_cast<std::size_t>(k)].get().value() == k);
  }
}

// Run only by test/mpi/rank_exit.py: rank 1 leaves the job mid-run.
TEST_CASE("a rank that exits mid-run ends the job", "[.mpi_rank_exit]") {
  mpi_session s(2);
  auto c = std::make_shared<counters>();
  task_group g;
  for (int k = 0; k < 3; ++k) {
    net n("work");
    if (k == 1) {
      n.op("Sleep", {}, {}, {{"ms", std::int64_t{100}}});
      n.lambda("Exit", {}, {}, [](op_context&) -> status { std::_Exit(3); });
    } else {
      n = stuck("wait", c);
    }
    REQUIRE(g.add(task("t", step("t").add_net(n)), node("n" + std::to_string(k))));
  }
  (void)test::run_sync(s, g);
  FAIL("the run should not end: the job is killed");
}

// Run only by test/mpi/liveness.py, which stops or kills one rank a moment
// into the run (every task waits an hour): each live rank prints how its
// run ended, then waits to be killed (a stopped rank would hold up
// MPI_Finalize).
TEST_CASE("a rank that stops answering is found by its heartbeat", "[.mpi_liveness]") {
  mpi_options mo;
  mo.lost_after = 2000ms;
  mo.heartbeat = 200ms;
  mpi_session s(2, mo);
  auto c = std::make_shared<counters>();
  task_group g;
  for (int k = 0; k < 3; ++k) {
    REQUIRE(g.add(task("t", step("t").add_net(stuck("wait", c))), node("n" + std::to_string(k))));
  }
  std::printf("LIVENESS rank %d pid %d\n", s.rank(), static_cast<int>(::getpid()));
  std::fflush(stdout);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = test::run_sync(s, g);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  std::printf("LIVENESS rank %d ended after %lld ms, tasks cancelled %d of %d: %s\n", s.rank(),
              static_cast<long long>(ms.count()), c->cancelled.load(), c->started.load(),
              r ? "ok" : r.error().message.c_str());
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::minutes(2));
  FAIL("not killed");
}

TEST_CASE("large strings and vectors travel as messages of their own", "[mpi_outputs]") {
  mpi_session s(2);
  task_group g;
  std::vector<double> big(100'000);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<double>(i) * 0.5;
  const std::string text(1 << 20, 'q');
  task t("t", step("t").add_net(put("v", "v", big)).add_net(put("s", "s", text)));
  auto v = t.output<std::vector<double>>("v");
  auto str = t.output<std::string>("s");
  REQUIRE(g.add(task("first", step("f").add_net(put<std::int64_t>("x", "x", 1))), node("n0")));
  REQUIRE(g.add(t, node("n1")));
  for (int run = 0; run < 2; ++run) {
    auto r = test::run_sync(s, g);
    REQUIRE(r);
    if (s.is_client()) {
      CHECK(v.get().value() == big);
      CHECK(str.get().value() == text);
    }
  }
}

TEST_CASE("large values received into the last run's value change with every run", "[mpi_outputs]") {
  // Rank 0 receives a large value into the storage of the last run's one
  // when nothing but the handle holds it (runs 1 and 3: a smaller value
  // in place); a report kept by the caller keeps its own value (run 2
  // gets new storage).
  const std::vector<std::size_t> sizes{100'000, 99'990, 100'020, 100'010};
  auto fill = [](std::size_t run) { return static_cast<char>('a' + run); };
  mpi_session s(2);
  task t("t", step("t").add_net(sized_strings("grow", sizes, fill)));
  auto str = t.output<std::string>("s");
  task_group g = on_rank_one(t);
  std::optional<run_report> kept;
  for (std::size_t run = 0; run < sizes.size(); ++run) {
    auto r = test::run_sync(s, g);
    REQUIRE(r);
    if (s.is_client()) CHECK(str.get().value() == std::string(sizes[run], fill(run)));
    if (run == 1) kept = std::move(r).value();
    if (kept && s.is_client()) {
      CHECK(kept->tasks[1].outputs.at(0).second->as<std::string>() == std::string(sizes[1], fill(1)));
    }
  }
}

TEST_CASE("a large value nobody holds any more lends its storage to the next one", "[mpi_outputs]") {
  // The caller keeps each run's report until the next run ends, so rank 0
  // cannot receive into the last value; the value of the run before, let
  // go meanwhile, gives its storage (same type) instead. Sizes shrink and
  // grow; contents are checked every run.
  const std::vector<std::size_t> sizes{200'000, 150'000, 180'000, 260'000, 100'000};
  auto fill = [](std::size_t run) { return static_cast<char>('k' + run); };
  mpi_session s(2);
  task t("t", step("t").add_net(sized_strings("vary", sizes, fill)));
  auto str = t.output<std::string>("s");
  task_group g = on_rank_one(t);
  std::optional<run_report> kept;
  std::vector<std::uintptr_t> storage;  // where each run's value lives (compared, never read)
  for (std::size_t run = 0; run < sizes.size(); ++run) {
    auto r = test::run_sync(s, g);
    REQUIRE(r);
    if (s.is_client()) {
      const std::string& got = r.value().tasks[1].outputs.at(0).second->as<std::string>();
      CHECK(got == std::string(sizes[run], fill(run)));
      storage.push_back(reinterpret_cast<std::uintptr_t>(got.data()));  // NOLINT
      if (kept)
        CHECK(kept->tasks[1].outputs.at(0).second->as<std::string>() == std::string(sizes[run - 1], fill(run - 1)));
    }
    kept = std::move(r).value();  // lets the run before go (its handle moved on too)
  }
  if (s.is_client()) {
    // Run 2 takes run 0's storage, run 3 run 1's (grown), run 4 run 2's.
    CHECK(storage[2] == storage[0]);
    CHECK(storage[4] == storage[2]);
    CHECK(storage[1] != storage[0]);
  }
}

TEST_CASE("a large value rank 0 cannot take fails the run and leaves nothing behind", "[mpi_outputs]") {
  // Rank 0's string codec has no contiguous form: it cannot receive a
  // detached string, and says so; the next run is unaffected.
  static codec_registry plain;
  static const bool once = [] {
    auto c = *plain.find(typeid(std::string));
    c.adopt = nullptr;
    plain.replace(c);
    return true;
  }();
  (void)once;
  mpi_options o;
  if (world_rank() == 0) o.codecs = &plain;
  mpi_session s(2, o);
  task_group g;
  REQUIRE(g.add(task("first", step("f").add_net(put<std::int64_t>("x", "x", 1))), node("n0")));
  task t("t", step("t").add_net(put("s", "s", std::string(100'000, 'z'))));
  auto str = t.output<std::string>("s");
  REQUIRE(g.add(t, node("n1")));
  auto r = test::run_sync(s, g);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::not_serializable);
  CHECK_THAT(r.error().message, Catch::StartsWith("rank 1: task \"n1/t\" output \"s\"") &&
                                    Catch::Contains("no contiguous codec tagged \"string\""));
  // A small value next: no stray message of the failed run is taken for it.
  task_group small;
  REQUIRE(small.add(task("first", step("f").add_net(put<std::int64_t>("x", "x", 1))), node("n0")));
  task t2("t", step("t").add_net(put("s", "s", std::string("ok"))));
  auto ok_out = t2.output<std::string>("s");
  REQUIRE(small.add(t2, node("n1")));
  REQUIRE(test::run_sync(s, small));
  if (s.is_client()) CHECK(ok_out.get().value() == "ok");
}

// --- MPI below MPI_THREAD_SERIALIZED ------------------------------------------

TEST_CASE("below MPI_THREAD_SERIALIZED, MPI calls off MPI's main thread fail clearly before any message",
          "[.mpi_funneled]") {
  REQUIRE(mpi_listener::funneled);
  REQUIRE(mpi_listener::env->thread_level() < MPI_THREAD_SERIALIZED);
  task_group g;
  REQUIRE(g.add(task("a", step("a").add_net(put<std::int64_t>("x", "x", 1))), node("n0")));
  REQUIRE(g.add(task("b", step("b").add_net(put<std::int64_t>("y", "y", 2))), node("n1")));
  auto refused = [](const result<run_report>& r, const std::string& what) {
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::mpi_failed);
    CHECK(r.error().message.find(what + " on a thread other than the one that initialized MPI, and MPI provides only "
                                        "MPI_THREAD_FUNNELED") != std::string::npos);
  };

  SECTION("a session constructed on another thread") {
    std::optional<mpi_session> s;
    std::thread([&] { s.emplace(1); }).join();
    refused(test::run_sync(*s, g), "the session is constructed");
  }
  SECTION("a blocking run on another thread, then on the main thread") {
    mpi_session s(1);
    result<run_report> r = error(errc::no_result, "not run");
    std::thread([&] { r = test::run_sync(s, g); }).join();
    refused(r, "the run's MPI protocol runs");
    // Nothing was sent: the same session still runs the group from here.
    REQUIRE(test::run_sync(s, g));
  }
  SECTION("async_run on the session's own pool thread") {
    mpi_session s(1);
    refused(run_future(s, g).get(), "the run's MPI protocol runs");
  }
  SECTION("an executor run by the main thread") {
    asio::io_context io;
    mpi_session s(io.get_executor());
    std::optional<result<run_report>> r;
    s.async_run(g, {}, test::as_result([&](result<run_report> out) { r = std::move(out); }));
    io.run();
    REQUIRE(r.has_value());
    REQUIRE(*r);
    if (s.is_client()) CHECK(r->value().tasks.size() == 2);
  }
  SECTION("a pool of several threads is refused at construction") {
    mpi_session s(2);
    auto r = test::run_sync(s, g);
    REQUIRE_FALSE(r);
    CHECK(r.error().message == "MPI provides too low a thread level for a session with several threads");
  }
}
