// Different nodes run in parallel on a multi-threaded executor, whether or
// not their tasks ever wait: a node starts by a post to its strand, never
// inline on the thread that starts the run.
#include <taskgroup/session.hpp>

#include "detail/test_hooks.hpp"
#include "support/steps.hpp"

#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

using namespace taskgroup;
using namespace taskgroup::test;

namespace {

// A rendezvous of `n` parties that gives up after a while: the synchronous
// ops below block their thread (they never suspend) until every node's op
// has arrived, which can only happen when the nodes run at the same time.
struct rendezvous {
  explicit rendezvous(int n) : expected(n) {}
  // True when all parties arrived within the grace period.
  bool arrive() {
    std::unique_lock lock(m);
    ++arrived;
    cv.notify_all();
    return cv.wait_for(lock, std::chrono::seconds(20), [&] { return arrived >= expected; });
  }
  std::mutex m;
  std::condition_variable cv;
  int arrived = 0;
  const int expected;
};

// A group of `nodes` nodes with one task each; each task's single
// synchronous op waits at the rendezvous.
task_group meeting(int nodes, const std::shared_ptr<rendezvous>& r) {
  task_group g;
  for (int i = 0; i < nodes; ++i) {
    net n("meet");
    n.lambda("Meet", {}, {}, [r](op_context&) -> status {
      if (!r->arrive()) return fail(errc::op_failed, "the other nodes never ran beside this one");
      return ok();
    });
    REQUIRE(g.add(task("t", step("t").add_net(n)), node("n" + std::to_string(i))));
  }
  return g;
}

}  // namespace

TEST_CASE("tasks of different nodes run in parallel, with or without waits", "[session][parallel]") {
  auto& hooks = detail::test_driver_hooks();
  for (bool coroutine_only : {false, true}) {
    INFO((coroutine_only ? "coroutine driver" : "automatic driver"));
    hooks.coroutine_only = coroutine_only;
    {
      INFO("a session with a pool of two threads");
      local_session session(2);
      auto r = std::make_shared<rendezvous>(2);
      auto report = test::run_sync(session, meeting(2, r));
      REQUIRE(report);
      CHECK(report.value().ok());
    }
    {
      INFO("an io_context run by two threads");
      boost::asio::io_context io;
      local_session session(io.get_executor());
      auto r = std::make_shared<rendezvous>(2);
      std::optional<result<run_report>> out;
      session.async_run(meeting(2, r), {}, [&](boost::system::error_code ec, run_report rr) {
        CHECK(!ec);
        out = std::move(rr);
      });
      std::thread other([&] { io.run(); });
      io.run();
      other.join();
      REQUIRE(out);
      REQUIRE(*out);
      CHECK(out->value().ok());
    }
    hooks.coroutine_only = false;
  }
}
