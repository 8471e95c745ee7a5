// Allocation failure: a run in which the n-th allocation of its start
// throws std::bad_alloc, for every n up to the start's last allocation
// (see run_once for where the start ends and why). Each run must end (with
// an error, or with the exception out of the event loop), leave nothing
// running and nothing leaked (the sanitizer build checks), and the session
// must run the group normally afterwards.
//
// A binary of its own: it replaces the global operator new, and counts only
// on the thread that armed it.
#include <taskgroup/control.hpp>
#include <taskgroup/session.hpp>
#include <taskgroup/task_group.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>

namespace {

// Allocations left before one fails; negative: none fails.
thread_local std::int64_t allocations_left = -1;

void* allocate(std::size_t n) {
  if (allocations_left >= 0 && allocations_left-- == 0) throw std::bad_alloc();
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

using namespace taskgroup;
using i64 = std::int64_t;
namespace asio = boost::asio;

namespace {

// A net of one asynchronous op with a callback form that waits 50 ms on a
// timer of its own: a task of it waits without a frame. As Asio's own
// operations do, it allocates when it starts and never when it completes.
net nap(const std::string& name) {
  operator_schema schema("Nap");
  schema.factory(
      [](op_context&) -> result<std::unique_ptr<op_kernel>> {
        class kernel final : public op_kernel {
         public:
          kernel() : op_kernel(callback_form) {}
          void start(const asio::any_io_executor& ex, op_completion done) noexcept override {
            // The completion stays with this call until the wait has
            // started: a failure to start reports the error through it.
            std::unique_ptr<waiting> w;
            try {
              w = std::make_unique<waiting>(ex, std::move(done));
              waiting* at = w.get();
              // Asio's initiation of the wait is not allocation-safe (it
              // copies the strand's any_io_executor inside a noexcept
              // constructor): no failure is injected there.
              const std::int64_t left = std::exchange(allocations_left, -1);
              at->timer.async_wait(asio::bind_cancellation_slot(at->done.slot(), [at](boost::system::error_code ec) {
                std::unique_ptr<waiting> own(at);
                own->done(ec ? fail(errc::cancelled, "nap cancelled") : ok());
              }));
              allocations_left = left;
              (void)w.release();  // the handler owns it now
            } catch (const std::bad_alloc&) {
              op_completion& d = w ? w->done : done;
              d(fail(errc::op_failed, "nap: out of memory"));
            }
          }

         private:
          struct waiting {
            waiting(const asio::any_io_executor& ex, op_completion&& d)
                : timer(ex, std::chrono::milliseconds(50)), done(std::move(d)) {}
            asio::steady_timer timer;
            op_completion done;
          };
        };
        return std::unique_ptr<op_kernel>(std::make_unique<kernel>());
      },
      true);
  net n(name);
  n.add(op_def{"Nap", {}, {}, {}, std::make_shared<const operator_schema>(std::move(schema))});
  return n;
}

// One run with allocation #n of this thread failing (none when negative)
// while the run starts: until every node has run what it can before its
// first wait ends (`io.poll()`). Asio's completion of a wait on a strand
// is not allocation-safe (it copies the strand's any_io_executor, inside
// a noexcept constructor or dropping the handler): the naps last long
// enough (50 ms) for the start to end first.
struct attempt {
  bool threw = false;    // the bad_alloc came out of the event loop
  bool reached = false;  // allocation #n happened
  std::optional<result<run_report>> out;
};

attempt run_once(asio::io_context& io, local_session& session, const task_group& group, const run_options& o,
                 std::int64_t n) {
  attempt a;
  allocations_left = n;
  try {
    session.async_run(group, o, [&](boost::system::error_code, run_report r) {
      if (r.failure) {
        a.out.emplace(*r.failure);
      } else {
        a.out.emplace(std::move(r));
      }
    });
    io.restart();
    (void)io.poll();
  } catch (const std::bad_alloc&) {
    a.threw = true;
  }
  a.reached = n >= 0 && allocations_left < 0;
  allocations_left = -1;
  io.restart();
  io.run();                                  // the rest of the run, and whatever a failure left queued
  if (!a.threw) REQUIRE(a.out.has_value());  // the run completed: nothing was dropped
  return a;
}

// Runs `group` with allocation #0, #1, ... failing until a run no longer
// reaches the failing allocation; after each, a normal run must pass
// `check_normal`. `check_last` looks at the run that reached no failure.
template <class CheckNormal, class CheckLast>
void sweep(const task_group& group, const run_options& o, CheckNormal check_normal, CheckLast check_last) {
  asio::io_context io;
  local_session session(io.get_executor());
  check_normal(run_once(io, session, group, o, -1).out.value());  // compiles the group
  int failed = 0;
  int threw = 0;
  std::int64_t n = 0;
  for (;; ++n) {
    INFO("allocation #" << n << " fails");
    attempt a = run_once(io, session, group, o, n);
    if (!a.reached) {
      check_last(a.out.value());
      break;
    }
    if (a.threw) {
      ++threw;
    } else if (!a.out->has_value()) {
      ++failed;
      CHECK(a.out->error().code != errc::no_result);
    }
    check_normal(run_once(io, session, group, o, -1).out.value());
  }
  INFO("runs with a failing allocation: " << n << ", " << failed << " failed, " << threw << " threw");
  CHECK(n > 20);  // the sweep reached into the run
  CHECK(failed > 0);
}

}  // namespace

TEST_CASE("allocation failure at every point of the start of a run of frame-free, waiting and coroutine tasks",
          "[alloc]") {
  task_group g;
  const net sleep = nap("sleep");
  net fill("fill");
  fill.op("ConstantFill", {}, {"x"}, {{"value", i64{7}}});
  net count("count");
  count.op("Iter", {}, {"i"});
  // Node a: tasks the node's batch runs without frames, one of them waits.
  REQUIRE(g.add(task("sleeper", step("sleeper").nets({fill, sleep})), node("a")));
  task quick("quick", step("quick").add_net(fill));
  auto x = quick.output<i64>("x");
  REQUIRE(g.add(std::move(quick), node("a")));
  // Node b: concurrent substeps (coroutines and a barrier) and a counted
  // loop.
  REQUIRE(g.add(task("conc", step("conc").concurrent_substeps(true).iterations(2).substeps(
                                 {step("s1").add_net(sleep), step("s2").add_net(count)})),
                node("b")));
  REQUIRE(g.add(task("loop", loop("loop", 3, count)), node("b")));
  auto succeeded = [&](const result<run_report>& r) {
    REQUIRE(r.has_value());
    CHECK(r.value().ok());
    CHECK(r.value().tasks.size() == 4);
    CHECK(x.get().value() == 7);
  };
  sweep(g, {}, succeeded, succeeded);
}

TEST_CASE("allocation failure at every point of the start of a run whose task fails", "[alloc]") {
  // Gathered: the failure cancels no wait (a cancelled wait completes
  // within the start, where Asio's completion is not allocation-safe).
  task_group g;
  const net sleep = nap("sleep");
  net bad("bad");
  bad.op("Fail", {}, {}, {{"message", std::string("broken")}});
  REQUIRE(g.add(task("sleeper", step("sleeper").add_net(sleep)), node("a")));
  REQUIRE(g.add(task("bad", step("bad").add_net(bad)), node("a")));
  REQUIRE(g.add(task("other", step("other").add_net(sleep)), node("b")));
  run_options gather;
  gather.policy = run_policy::gather;
  auto broken = [](const result<run_report>& r) {
    REQUIRE(r.has_value());
    CHECK_FALSE(r.value().ok());
    REQUIRE(r.value().first_failure().has_value());
    CHECK(r.value().first_failure()->code == errc::op_failed);
    CHECK_THAT(r.value().first_failure()->message, Catch::Contains("broken"));
    CHECK(r.value().tasks[0].status == task_status::succeeded);
  };
  sweep(g, gather, broken, broken);
}

TEST_CASE("allocation failure at every point of a run's arrival to a full session", "[alloc]") {
  // One run naps in flight; a second arrives with allocation #n failing
  // (its state, its completion, its queued wait, its place in the queue).
  // Each run ends, or its initiation throws and it never completes; the
  // session counts nothing left, and runs normally afterwards. (Its
  // admission comes when the first run's nap completes, where Asio's
  // completion is not allocation-safe: no failure is injected there.)
  task_group g;
  REQUIRE(g.add(task("sleeper", step("sleeper").add_net(nap("sleep"))), node("a")));
  asio::io_context io;
  local_session session(
      io.get_executor(),
      session_limits{.max_runs_in_flight = 1, .max_queued = 1, .max_queue_wait = std::chrono::seconds(10)});
  REQUIRE(run_once(io, session, g, {}, -1).out.value());  // compiles the group
  int threw = 0;
  int failed = 0;
  std::int64_t n = 0;
  for (;; ++n) {
    INFO("allocation #" << n << " fails");
    std::optional<boost::system::error_code> first;
    std::optional<boost::system::error_code> second;
    session.async_run(g, {}, [&](boost::system::error_code ec, run_report) { first = ec; });
    io.restart();
    (void)io.poll();
    bool initiation_threw = false;
    bool loop_threw = false;
    allocations_left = n;
    try {
      session.async_run(g, {}, [&](boost::system::error_code ec, run_report) { second = ec; });
    } catch (const std::bad_alloc&) {
      initiation_threw = true;
    }
    try {
      io.restart();
      (void)io.poll();
    } catch (const std::bad_alloc&) {
      loop_threw = true;
    }
    const bool reached = allocations_left < 0;
    allocations_left = -1;
    io.restart();
    io.run();
    REQUIRE(first.has_value());
    if (initiation_threw) {
      CHECK_FALSE(second.has_value());  // an initiation that throws never completes
      ++threw;
    } else if (!loop_threw) {
      REQUIRE(second.has_value());
      if (*second) ++failed;
    }
    const session_load l = session.load();
    CHECK(l.in_flight == 0);
    CHECK(l.queued == 0);
    if (!reached) {
      CHECK(second.has_value());
      CHECK_FALSE(*second);
      break;
    }
  }
  INFO("runs with a failing allocation: " << n << ", " << threw << " threw, " << failed << " failed");
  CHECK(n >= 4);
  CHECK(threw > 0);
  REQUIRE(run_once(io, session, g, {}, -1).out.value());
}
