// w8_serve / ours and w8_empty_run / ours.
//
// w8_serve: the HTTP example's group without its Sleep: 16 tasks on nodes
// n0..n3 (task k on n<k % 4>), the group declaring input `n` (int64) on
// every node, task k a net with one op computing `value<k>` = sum of
// i * (k + 1), i = 1..n, a declared output. Built once; a
// local_session(2) (its own pool of 2 threads) compiles it on the warm-up
// batch. One benchmark iteration = 64 `session.async_run(group, {.feeds})`
// started at once, the benchmark thread waiting until all completed, then
// every run's 16 outputs read from its report (`task_output::get(report)`)
// and compared with the expected values.
//
// w8_serve_metrics: the same, the session's metrics on (ours) and off.
//
// w8_empty_run: a one-task group (one empty net) on a local_session over a
// 1-thread io_context; one benchmark iteration = a coroutine awaiting 100
// `session.async_run(group, {}, as_tuple(use_awaitable))` one after another.
#include "w8_serve/w8_serve.hpp"

#include "common/registry.hpp"

#include <taskgroup/taskgroup.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace tg = taskgroup;
using i64 = std::int64_t;
using namespace tgbench::w8;

std::string node_name(int j) { return "n" + std::to_string(j); }

struct served {
  tg::task_group group;
  std::vector<tg::task_output<i64>> values;
};

// Fails the benchmark (and returns false) on a build error.
template <class R>
bool built(benchmark::State& state, const R& r) {
  if (r) return true;
  state.SkipWithError(("w8_serve ours: building the group: " + r.error().message).c_str());
  return false;
}

bool make_group(benchmark::State& state, served& s) {
  for (int j = 0; j < nodes; ++j) {
    if (!built(state, s.group.input<i64>("n", tg::node(node_name(j))))) return false;
  }
  for (int k = 0; k < tasks; ++k) {
    const std::string value = "value" + std::to_string(k);
    tg::net n("work");
    n.lambda("Sum", {"n"}, {value}, [k](tg::op_context& ctx) -> tg::status {
      ctx.set_output(0, task_sum(ctx.input<i64>(0), k));
      return tg::ok();
    });
    tg::task t("t" + std::to_string(k), tg::step("work").add_net(n));
    s.values.push_back(t.output<i64>(value));
    if (!built(state, s.group.add(t, tg::node(node_name(k % nodes))))) return false;
  }
  return true;
}

tg::feeds feeds_for(std::uint64_t seq) {
  tg::feeds f;
  for (int j = 0; j < nodes; ++j) f.set(node_name(j), "n", fed_n(seq, j));
  return f;
}

// Runs one batch of 64 runs numbered seq..seq+63 and checks every output;
// false (the benchmark failed with the run, task and values) when wrong.
bool batch(benchmark::State& state, tg::local_session& session, const served& s, std::uint64_t seq) {
  std::vector<tg::run_report> reports(runs_in_flight);
  countdown left;
  left.arm(runs_in_flight);
  for (std::size_t r = 0; r < runs_in_flight; ++r) {
    session.async_run(s.group, tg::run_options{.feeds = feeds_for(seq + r)},
                      [&reports, &left, r](boost::system::error_code, tg::run_report rep) {
                        reports[r] = std::move(rep);
                        left.done();
                      });
  }
  left.wait();
  for (std::size_t r = 0; r < runs_in_flight; ++r) {
    const tg::run_report& rep = reports[r];
    if (rep.failure) [[unlikely]] {
      state.SkipWithError(("w8_serve ours: run " + std::to_string(r) + ": " + rep.failure->message).c_str());
      return false;
    }
    for (int k = 0; k < tasks; ++k) {
      auto v = s.values[static_cast<std::size_t>(k)].get(rep);
      const i64 want = expected(seq + r, k);
      if (!v || v.value() != want) [[unlikely]] {
        const std::string got = v ? std::to_string(v.value()) : v.error().message;
        state.SkipWithError(("w8_serve ours: run " + std::to_string(r) + " task t" + std::to_string(k) + ": expected " +
                             std::to_string(want) + ", got " + got)
                                .c_str());
        return false;
      }
    }
  }
  return true;
}

// `metrics`: the session counts its runs (the default), or not
// (w8_serve_metrics' baseline).
void serve_with(benchmark::State& state, bool metrics) {
  served s;
  if (!make_group(state, s)) return;
  tg::local_session session(2);
  session.enable_metrics(metrics);
  std::uint64_t seq = 0;
  if (!batch(state, session, s, seq)) return;  // warm-up: compiles the group
  seq += runs_in_flight;
  const double cpu_start = process_cpu_us();
  for (auto _ : state) {
    if (!batch(state, session, s, seq)) return;
    seq += runs_in_flight;
  }
  const double runs = static_cast<double>(state.iterations()) * static_cast<double>(runs_in_flight);
  state.counters[cpu_counter] = (process_cpu_us() - cpu_start) / runs;
}

void serve(benchmark::State& state) { serve_with(state, true); }
void serve_unmetered(benchmark::State& state) { serve_with(state, false); }

asio::awaitable<void> sequence(tg::local_session& session, const tg::task_group& g, std::string& error) {
  for (std::size_t i = 0; i < empty_runs; ++i) {
    auto [ec, rep] = co_await session.async_run(g, {}, asio::as_tuple(asio::use_awaitable));
    if (ec || !rep.ok() || rep.tasks.size() != 1) [[unlikely]] {
      error = rep.failure ? rep.failure->message : "a run did not report its one task succeeded";
      co_return;
    }
  }
}

void empty_run(benchmark::State& state) {
  asio::io_context io(1);
  tg::local_session session(io.get_executor());
  tg::task_group g;
  if (!built(state, g.add(tg::task("t", tg::step("t").add_net(tg::net("t"))), tg::node("n")))) return;
  std::string error;
  auto once = [&] {
    asio::co_spawn(io, sequence(session, g, error), asio::detached);
    io.run();
    io.restart();
    if (!error.empty()) state.SkipWithError(("w8_empty_run ours: " + error).c_str());
    return error.empty();
  };
  if (!once()) return;  // warm-up: compiles the group
  for (auto _ : state) {
    if (!once()) return;
  }
}

const tgbench::add_contender serve_reg{{
    .workload = "w8_serve",
    .name = tgbench::ours,
    .what = "64 x session.async_run(group, {.feeds}) on local_session(2), outputs read from each report",
    .fn = serve,
}};

const tgbench::add_contender metered_reg{{
    .workload = "w8_serve_metrics",
    .name = tgbench::ours,
    .what = "w8_serve / ours, the session counting its runs (metrics on, the default)",
    .fn = serve,
}};

const tgbench::add_contender unmetered_reg{{
    .workload = "w8_serve_metrics",
    .name = "metrics_off",
    .what = "w8_serve / ours on a session with local_session::enable_metrics(false)",
    .fn = serve_unmetered,
}};

const tgbench::add_contender empty_reg{{
    .workload = "w8_empty_run",
    .name = tgbench::ours,
    .what = "co_await session.async_run(group, {}, as_tuple(use_awaitable)) x 100, one task of one empty net",
    .units_per_iteration = static_cast<double>(empty_runs),
    .fn = empty_run,
}};

}  // namespace
