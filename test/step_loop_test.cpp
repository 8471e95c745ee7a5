// The synchronous step loop (lib/step/machine.hpp, run_sync_loop): loops of
// synchronous nets generated from a seed, run through run_step and through
// a session, against a plain simulation that takes one iteration and one
// net at a time. The loop runs many iterations without deciding at each
// start (only the stop request is asked), counts them in one go, and calls
// the fast path of a net of one op directly; this checks that blobs, the
// status, iterations, net runs and the observer's net events come out as
// one iteration at a time would make them, whatever the yield interval,
// the stop point, a failure's place, or fast paths that decline. The
// stop blob is written by built-ins and by kernels of this file whose fast
// paths promise to write in place or make no promise (and re-create the
// blob, or give it another type), so that the check the loop skips after
// a net that cannot have changed the blob (fast_writes) is seen to be
// skipped only then.
#include <taskgroup/step_runner.hpp>

#include <taskgroup/execution_step.hpp>
#include <taskgroup/session.hpp>

#include "support/steps.hpp"

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <cstdint>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace taskgroup;
using namespace taskgroup::test;

namespace {

// One op of a generated net, acting on the int64 counter "x", a double
// "d" or the stop blob.
enum class op_kind {
  inc,         // Add(x, one) -> x: int64, its fast path takes it
  inc_d,       // Add(d, half) -> d: double, the fast path declines
  check,       // GE(x, limit) -> stop (stop-blob loops only)
  fail_at,     // an inline op (no fast path) failing when x == fail
  set_stop_i,  // ConstantFill -> stop as an int64 (a stop blob of the wrong type)
  // Kernels of this file with a fast path, writing stop = x >= limit:
  check_in_place,  // in place, promising fast_writes::own_blobs_in_place
  check_anew,      // no promise: the blob's value made anew (emplace) on every run
  set_stop_i_fast  // no promise: the fast path gives the stop blob an int64
};

struct loop_spec {
  std::uint64_t seed = 0;
  bool stop_mode = false;
  bool only_once = false;
  std::int64_t num_iter = 0;  // counted loops
  std::int64_t limit = 0;     // the GE's limit in stop-blob loops
  std::int64_t fail = -1;     // x at which fail_at fails (none: -1)
  std::uint32_t yield_every = 1;
  std::vector<std::vector<op_kind>> nets;
};

std::string describe(const loop_spec& s) {
  std::ostringstream o;
  o << "seed " << s.seed << ": " << (s.stop_mode ? "stop blob" : "counted") << (s.only_once ? " only_once" : "")
    << " num_iter " << s.num_iter << " limit " << s.limit << " fail at " << s.fail << " yield_every " << s.yield_every
    << " nets:";
  for (const auto& n : s.nets) {
    o << " [";
    for (op_kind k : n) o << ' ' << static_cast<int>(k);
    o << " ]";
  }
  return o.str();
}

loop_spec generate(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  loop_spec s;
  s.seed = seed;
  s.stop_mode = pick(0, 1) == 1;
  s.only_once = s.stop_mode && pick(0, 5) == 0;
  s.num_iter = pick(0, 40);
  s.limit = pick(0, 40);
  s.fail = pick(0, 3) == 0 ? pick(0, 45) : -1;
  s.yield_every = static_cast<std::uint32_t>(pick(0, 2) == 0 ? 256 : pick(1, 9));
  const auto nets = pick(1, 3);
  for (std::int64_t u = 0; u < nets; ++u) {
    std::vector<op_kind> ops;
    const auto n = pick(1, 3) == 1 ? 2 : 1;  // mostly nets of one op
    for (std::int64_t i = 0; i < n; ++i) {
      const auto r = pick(0, 11);
      ops.push_back(r < 5    ? op_kind::inc
                    : r < 7  ? op_kind::inc_d
                    : r < 9  ? op_kind::check
                    : r < 10 ? op_kind::fail_at
                    : r < 11 ? op_kind::check_in_place
                             : op_kind::check_anew);
    }
    s.nets.push_back(std::move(ops));
  }
  // Every loop counts (in a net of its own half the time: a loop whose
  // nets have one op each calls their fast paths directly); a stop-blob
  // loop checks at least once, and once in a while writes its stop blob
  // with the wrong type.
  if (pick(0, 1) == 0) {
    s.nets.front().insert(s.nets.front().begin(), op_kind::inc);
  } else {
    s.nets.insert(s.nets.begin(), {op_kind::inc});
  }
  if (s.stop_mode) {
    const auto count = static_cast<std::int64_t>(s.nets.size());
    op_kind last = op_kind::check;
    if (pick(0, 12) == 0) {
      last = pick(0, 1) == 0 ? op_kind::set_stop_i : op_kind::set_stop_i_fast;
    } else if (const auto r = pick(0, 3); r < 2) {
      last = r == 0 ? op_kind::check_in_place : op_kind::check_anew;
    }
    if (pick(0, 1) == 0) {  // in a net of its own
      s.nets.insert(s.nets.begin() + pick(0, count), {last});
    } else {
      s.nets[static_cast<std::size_t>(pick(0, count - 1))].push_back(last);
    }
  }
  return s;
}

// What a loop leaves: its status (the failing op's type when it failed),
// the blobs, and its counts.
struct outcome {
  bool ok = true;
  std::string failure;  // "fail_at", "stop type"
  std::int64_t x = 0;
  double d = 0;
  std::uint64_t iterations = 0;
  std::uint64_t net_runs = 0;
  bool operator==(const outcome&) const = default;
};

std::ostream& operator<<(std::ostream& o, const outcome& r) {
  return o << (r.ok ? "ok" : "failed (" + r.failure + ")") << " x " << r.x << " d " << r.d << " iterations "
           << r.iterations << " net runs " << r.net_runs;
}

// One iteration, one net, one op at a time (docs/semantics.md, "Iterations").
outcome simulate(const loop_spec& s) {
  outcome r;
  std::optional<bool> stop;  // not written yet: go on
  bool stop_is_int = false;
  for (std::int64_t i = 0;; ++i) {
    if (s.stop_mode ? (s.only_once && i > 0) : i >= s.num_iter) return r;
    ++r.iterations;
    for (const auto& net : s.nets) {
      ++r.net_runs;
      for (op_kind k : net) {
        switch (k) {
          case op_kind::inc: ++r.x; break;
          case op_kind::inc_d: r.d += 0.5; break;
          case op_kind::check:
          case op_kind::check_in_place:
          case op_kind::check_anew:
            stop = r.x >= s.limit;
            stop_is_int = false;
            break;
          case op_kind::set_stop_i:
          case op_kind::set_stop_i_fast: stop_is_int = true; break;
          case op_kind::fail_at:
            if (r.x == s.fail) {
              r.ok = false;
              r.failure = "fail_at";
              return r;
            }
            break;
        }
      }
      if (s.stop_mode) {
        if (stop_is_int) {
          r.ok = false;
          r.failure = "stop type";
          return r;
        }
        if (stop && *stop) return r;
      }
    }
  }
}

using factory_result = result<std::unique_ptr<op_kernel>>;

// stop = x >= limit: in place, with the promise (InPlace), or made anew on
// every run, without it (the storage the previous check read is freed).
// The fast path declines inputs that are not int64; the general path does
// the same as the fast path.
template <bool InPlace>
factory_result check_factory(op_context& ctx) {
  const blob* x = &ctx.input_blob(0);
  const blob* limit = &ctx.input_blob(1);
  blob* out = &ctx.output_blob(0);
  auto fast = [x, limit, out]() noexcept {
    const i64* a = x->exact<i64>();
    const i64* b = limit->exact<i64>();
    if (a == nullptr || b == nullptr) return false;
    if constexpr (InPlace) {
      bool* o = out->exact<bool>();
      if (o == nullptr) return false;
      *o = *a >= *b;
    } else {
      out->emplace<bool>(*a >= *b);
    }
    return true;
  };
  auto general = [x, limit, out]() -> status {
    out->emplace<bool>(x->as<i64>() >= limit->as<i64>());
    return ok();
  };
  return make_fast_kernel(fast, general, InPlace ? fast_writes::own_blobs_in_place : fast_writes::any);
}

// Without the promise: the fast path gives the stop blob an int64.
factory_result set_stop_int_factory(op_context& ctx) {
  blob* out = &ctx.output_blob(0);
  auto set = [out]() noexcept {
    out->emplace<i64>(1);
    return true;
  };
  return make_fast_kernel(set, [set]() -> status {
    set();
    return ok();
  });
}

// This file's op types, registered once in the global registry (run_step
// and the session look types up there).
void register_test_ops() {
  static const bool done = [] {
    operator_registry& reg = operator_registry::global();
    REQUIRE(reg.add(operator_schema("TestCheckInPlace").inputs(2).outputs(1).factory(check_factory<true>)));
    REQUIRE(reg.add(operator_schema("TestCheckAnew").inputs(2).outputs(1).factory(check_factory<false>)));
    REQUIRE(reg.add(operator_schema("TestSetStopInt").inputs(0).outputs(1).factory(set_stop_int_factory)));
    return true;
  }();
  (void)done;
}

execution_step build(const loop_spec& s) {
  register_test_ops();
  auto st = step("loop");
  std::vector<net> nets;
  for (std::size_t u = 0; u < s.nets.size(); ++u) {
    net n("n" + std::to_string(u));
    for (op_kind k : s.nets[u]) {
      switch (k) {
        case op_kind::inc: n.op("Add", {"x", "one"}, {"x"}); break;
        case op_kind::inc_d: n.op("Add", {"d", "half"}, {"d"}); break;
        case op_kind::check: n.op("GE", {"x", "limit"}, {"stop"}); break;
        case op_kind::set_stop_i: n.op("ConstantFill", {}, {"stop"}, {{"value", i64{1}}}); break;
        case op_kind::check_in_place: n.op("TestCheckInPlace", {"x", "limit"}, {"stop"}); break;
        case op_kind::check_anew: n.op("TestCheckAnew", {"x", "limit"}, {"stop"}); break;
        case op_kind::set_stop_i_fast: n.op("TestSetStopInt", {}, {"stop"}); break;
        case op_kind::fail_at: {
          const std::int64_t fail = s.fail;
          n.lambda("FailAt", {"x"}, {}, [fail](op_context& ctx) -> status {
            if (ctx.input<i64>(0) == fail) return taskgroup::fail(errc::op_failed, "fail_at");
            return ok();
          });
          break;
        }
      }
    }
    nets.push_back(n);
  }
  st.nets(nets);
  if (s.stop_mode) {
    st.should_stop_blob("stop");
    if (s.only_once) st.only_once(true);
  } else {
    st.iterations(s.num_iter);
  }
  return st;
}

void fill(workspace& ws, const loop_spec& s) {
  ws.set("x", i64{0});
  ws.set("one", i64{1});
  ws.set("d", 0.0);
  ws.set("half", 0.5);
  ws.set("limit", s.limit);
  ws.create("stop");
}

outcome read(const workspace& ws, const status& st) {
  outcome r;
  r.ok = st.has_value();
  if (!r.ok) {
    r.failure = st.error().message.find("fail_at") != std::string::npos ? "fail_at"
                : st.error().code == errc::type_mismatch                ? "stop type"
                                                                        : st.error().message;
  }
  r.x = ws.read<i64>("x").value();
  r.d = ws.read<double>("d").value();
  return r;
}

// Counts the net events an observer sees.
struct net_counter final : run_observer {
  std::uint64_t begins = 0;
  std::uint64_t ends = 0;
  void net_begin(const event_source&, std::string_view) override { ++begins; }
  void net_end(const event_source&, std::string_view, const status&) override { ++ends; }
};

outcome through_run_step(const loop_spec& s, bool observed) {
  auto ws = workspace::make("w");
  fill(*ws, s);
  step_stats stats;
  net_counter counter;
  run_step_options o;
  o.stats = &stats;
  o.yield_every = s.yield_every;
  if (observed) o.observer = &counter;
  const status st = run(run_step(build(s), ws, o));
  outcome r = read(*ws, st);
  r.iterations = stats.iterations;
  r.net_runs = stats.net_runs;
  if (observed) {
    CHECK(counter.begins == stats.net_runs);
    CHECK(counter.ends == stats.net_runs);
  }
  return r;
}

// The same loop as a session's task (the frame-free driver when it runs
// at most 256 nets; the coroutine driver otherwise): the report's
// iterations and the workspace's blobs, read from the node workspace of
// a GLOBAL group.
outcome through_session(const loop_spec& s) {
  boost::asio::io_context io;
  local_session session(io.get_executor());
  fill(*session.node_workspace("n"), s);
  task_group g(workspace_type::global);
  REQUIRE(g.add(task("t", build(s)), node("n")));
  std::optional<result<run_report>> got;
  boost::asio::co_spawn(io, test::run_async(session, g),
                        [&](std::exception_ptr, result<run_report> r) { got.emplace(std::move(r)); });
  io.run();
  REQUIRE(got);
  const auto& rep = got->has_value() ? got->value() : run_report{};
  status st = ok();
  if (!got->has_value()) st = got->error();
  outcome r = read(*session.node_workspace("n"), st);
  if (!rep.tasks.empty()) r.iterations = rep.tasks.front().iterations;
  return r;
}

}  // namespace

TEST_CASE("generated synchronous loops count, stop and fail as one iteration at a time would", "[step][loop]") {
  for (std::uint64_t seed = 1; seed <= 400; ++seed) {
    const loop_spec s = generate(seed);
    INFO(describe(s));
    const outcome want = simulate(s);
    CHECK(through_run_step(s, false) == want);
    CHECK(through_run_step(s, true) == want);
    outcome by_session = through_session(s);
    by_session.net_runs = want.net_runs;                    // a report does not count net runs
    if (!want.ok) by_session.iterations = want.iterations;  // a failed run reports none
    CHECK(by_session == want);
  }
}

TEST_CASE("a long synchronous loop counts every iteration and net run across its yields", "[step][loop]") {
  auto ws = workspace::make("w");
  ws->set("x", i64{0});
  ws->set("one", i64{1});
  net a("a");
  a.op("Add", {"x", "one"}, {"x"});
  net b("b");
  b.op("Add", {"x", "one"}, {"x"}).op("Add", {"x", "one"}, {"x"});
  step_stats stats;
  run_step_options o;
  o.stats = &stats;
  o.yield_every = 7;
  REQUIRE(run_tree(step("loop").nets({a, b}).iterations(100'003), ws, o));
  CHECK(ws->read<i64>("x").value() == 3 * 100'003);
  CHECK(stats.iterations == 100'003);
  CHECK(stats.net_runs == 2 * 100'003);
}
