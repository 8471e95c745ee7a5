// MPI session tests of feeds ([mpi_feeds]): rank 0's feeds are the run's,
// sent to the ranks that hold their nodes; run under `mpirun -np 3` with
// the other MPI tests (test/meson.build), every rank running the same
// test cases in declaration order.
#include <taskgroup/mpi_session.hpp>

#include <taskgroup/codec.hpp>
#include <taskgroup/task_group.hpp>

#include <catch2/catch.hpp>

#include "support/run.hpp"
#include "support/values.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace taskgroup;
using namespace taskgroup::test;
using i64 = std::int64_t;

namespace {

// Nodes n0, n1, n2 (ranks 0, 1, 2). n0 reads int64 "z", n1 int64 "i" and
// double "d", n2 string "s" and vector<int64> "v"; each task writes what
// it read, changed so that the output proves the read (z + 1, i * 2,
// d + 0.5, s + "!", v with its sum appended), and the rank that ran it.
struct fed_group {
  task_group g;
  std::optional<task_output<i64>> z1, i2, rank1, rank2;
  std::optional<task_output<double>> d2;
  std::optional<task_output<std::string>> s2;
  std::optional<task_output<std::vector<i64>>> v2;
  std::shared_ptr<std::atomic<int>> ran = std::make_shared<std::atomic<int>>(0);

  explicit fed_group(int rank) {
    REQUIRE(g.input<i64>("z", node("n0")));
    REQUIRE(g.input<i64>("i", node("n1")));
    REQUIRE(g.input<double>("d", node("n1")));
    REQUIRE(g.input<std::string>("s", node("n2")));
    REQUIRE(g.input<std::vector<i64>>("v", node("n2")));
    auto ran_here = ran;
    net n0("n0");
    n0.lambda("Z", {"z"}, {"z1"}, [ran_here](op_context& c) -> status {
      ++*ran_here;
      c.set_output(0, c.input<i64>(0) + 1);
      return ok();
    });
    net n1("n1");
    n1.lambda("ID", {"i", "d"}, {"i2", "d2", "rank"}, [ran_here, rank](op_context& c) -> status {
      ++*ran_here;
      c.set_output(0, c.input<i64>(0) * 2);
      c.set_output(1, c.input<double>(1) + 0.5);
      c.set_output(2, i64{rank});
      return ok();
    });
    net n2("n2");
    n2.lambda("SV", {"s", "v"}, {"s2", "v2", "rank"}, [ran_here, rank](op_context& c) -> status {
      ++*ran_here;
      c.set_output(0, c.input<std::string>(0) + "!");
      std::vector<i64> v = c.input<std::vector<i64>>(1);
      i64 sum = 0;
      for (i64 x : v) sum += x;
      v.push_back(sum);
      c.set_output(1, std::move(v));
      c.set_output(2, i64{rank});
      return ok();
    });
    task t0("t", step("t0").add_net(n0));
    task t1("t", step("t1").add_net(n1));
    task t2("t", step("t2").add_net(n2));
    z1 = t0.output<i64>("z1");
    i2 = t1.output<i64>("i2");
    d2 = t1.output<double>("d2");
    rank1 = t1.output<i64>("rank");
    s2 = t2.output<std::string>("s2");
    v2 = t2.output<std::vector<i64>>("v2");
    rank2 = t2.output<i64>("rank");
    REQUIRE(g.add(t0, node("n0")));
    REQUIRE(g.add(t1, node("n1")));
    REQUIRE(g.add(t2, node("n2")));
  }
};

feeds good_feeds(i64 base) {
  return feeds()
      .set("n0", "z", base)
      .set("n1", "i", base + 1)
      .set("n1", "d", static_cast<double>(base) + 0.25)
      .set("n2", "s", "run " + std::to_string(base))
      .set("n2", "v", std::vector<i64>{base, base + 2});
}

// What a rank other than 0 gives as its own feeds: wrong values, a wrong
// type, an unknown input, none at all for n2. None of it may be read.
feeds ignored_feeds() {
  return feeds().set("n1", "i", i64{-7}).set("n1", "d", std::string("not a double")).set("n9", "q", i64{1});
}

run_options options_on(const mpi_session& s, feeds rank0_feeds) {
  run_options o;
  o.feeds = s.is_client() ? std::move(rank0_feeds) : ignored_feeds();
  return o;
}

}  // namespace

TEST_CASE("feeds given on rank 0 alone reach the tasks on ranks 1 and 2, run after run", "[mpi_feeds]") {
  mpi_session s(2);
  fed_group f(s.rank());
  for (i64 base : {10, 200, 3000}) {
    auto r = test::run_sync(s, f.g, options_on(s, good_feeds(base)));
    REQUIRE(r);
    // Each rank's handles hold what its own tasks wrote; rank 0's all.
    CHECK(r.value().of(f.g));  // every rank's report is of its run of the group
    if (s.rank() == 0) {
      CHECK(f.z1->get().value() == base + 1);
      CHECK(f.z1->get(r.value()).value() == base + 1);
    }
    if (s.rank() == 0 || s.rank() == 1) {
      CHECK(f.i2->get().value() == (base + 1) * 2);
      CHECK(f.d2->get().value() == static_cast<double>(base) + 0.75);
      CHECK(f.rank1->get().value() == 1);
    }
    if (s.rank() == 0 || s.rank() == 2) {
      CHECK(f.s2->get().value() == "run " + std::to_string(base) + "!");
      CHECK(f.v2->get().value() == std::vector<i64>{base, base + 2, 2 * base + 2});
      CHECK(f.rank2->get().value() == 2);
    }
  }
}

TEST_CASE("a feed rank 0's check refuses fails the run on every rank, as locally, and nothing runs", "[mpi_feeds]") {
  mpi_session s(2);
  fed_group f(s.rank());
  struct bad {
    feeds given;
    std::string message;
  };
  std::vector<bad> cases;
  cases.push_back({good_feeds(1).set("n2", "w", i64{1}),
                   "feed \"n2/w\": the group declares no such input (on node \"n2\": \"s\", \"v\")"});
  feeds wrong_type = feeds().set("n0", "z", i64{1}).set("n1", "i", i64{1}).set("n1", "d", 1.0);
  wrong_type.set("n2", "s", i64{5}).set("n2", "v", std::vector<i64>{});
  cases.push_back({wrong_type, "feed \"n2/s\": expected string, got int64"});
  feeds missing = feeds().set("n0", "z", i64{1}).set("n1", "i", i64{1}).set("n1", "d", 1.0);
  missing.set("n2", "s", std::string("x"));
  cases.push_back({missing, "input \"n2/v\" is required and was not fed (vector<int64>)"});
  for (const auto& c : cases) {
    CAPTURE(c.message);
    // The local session's check gives the same message.
    auto local = check_feeds(f.g, c.given);
    REQUIRE_FALSE(local);
    CHECK(local.error().message == c.message);
    auto r = test::run_sync(s, f.g, options_on(s, c.given));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_feed);
    CHECK(r.error().message == c.message);
    CHECK(*f.ran == 0);
  }
  CHECK(test::run_sync(s, f.g, options_on(s, good_feeds(1))));  // the session runs on
}

TEST_CASE("a feed whose type has no codec fails the run at its start on every rank", "[mpi_feeds]") {
  mpi_session s(2);  // the global registry knows no `point`
  fed_group f(s.rank());
  REQUIRE(f.g.input<point>("p", node("n1")));
  auto r = test::run_sync(s, f.g, options_on(s, good_feeds(1).set("n1", "p", point{1, 2})));
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::not_serializable);
  CHECK_THAT(r.error().message, Catch::StartsWith("feed \"n1/p\": no codec for type ") && Catch::Contains("point") &&
                                    Catch::Contains("codec_registry::add"));
  CHECK(*f.ran == 0);
}

TEST_CASE("a feed a rank cannot decode fails the run on every rank, naming the rank and the feed", "[mpi_feeds]") {
  // Rank 0 knows `point`, the others do not: rank 2 cannot read n2's feed.
  static codec_registry with_point;
  static const bool added = add_point(with_point).has_value();
  REQUIRE(added);
  int world_rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  mpi_options o;
  if (world_rank == 0) o.codecs = &with_point;
  mpi_session s(2, o);
  fed_group f(s.rank());
  REQUIRE(f.g.input<point>("p", node("n2"), false));
  auto r = test::run_sync(s, f.g, options_on(s, good_feeds(1).set("n2", "p", point{1, 2})));
  REQUIRE_FALSE(r);
  CHECK(r.error().code == errc::not_serializable);
  CHECK_THAT(r.error().message, Catch::StartsWith("rank 2: feed \"n2/p\": no codec tagged \"point\""));
  if (s.rank() == 2) CHECK(*f.ran == 0);  // rank 2 ran nothing
  // The session runs on (the optional input left out).
  CHECK(test::run_sync(s, f.g, options_on(s, good_feeds(2))));
}
