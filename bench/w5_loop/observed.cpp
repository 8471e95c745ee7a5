// w5_loop_observed: the w5_loop step (iterations(1,000,000) over a one-op
// Add net) as the step of a one-task group, run by a local_session over a
// 1-thread io_context. `ours`: with an observer that asks for task events
// only, as `taskgroup run` installs for its progress display; `unobserved`:
// the same group with no observer. An observer that wants no step or net
// event must leave the loop its fast paths.
#include "w5_loop/w5_loop.hpp"

#include "common/registry.hpp"
#include "common/taskgroup_helpers.hpp"

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <cstdint>

namespace {

namespace tg = taskgroup;
using tgbench::w5::iterations;

// Counts task events, as a progress display does.
class task_counter final : public tg::run_observer {
 public:
  [[nodiscard]] tg::observe interests() const noexcept override { return tg::observe::tasks; }
  void task_begin(const tg::event_source&) override { began.fetch_add(1, std::memory_order_relaxed); }
  void task_end(const tg::event_source&, const tg::task_report&) override {
    ended.fetch_add(1, std::memory_order_relaxed);
  }
  std::atomic<std::int64_t> began{0};
  std::atomic<std::int64_t> ended{0};
};

void run_group(benchmark::State& state, bool observed) {
  boost::asio::io_context io(1);
  tg::local_session session(io.get_executor());
  auto node = session.node_workspace("n");
  node->set("one", std::int64_t{1});
  node->set("acc", std::int64_t{0});
  tg::task_group group;
  auto loop = tg::step("w5").iterations(iterations).add_net(tgbench::add_chain_net("w5/body", "acc", "one", 1));
  if (auto added = group.add(tg::task("loop", loop), tg::node("n")); !added) {
    state.SkipWithError(added.error().message.c_str());
    return;
  }
  task_counter counter;
  tg::run_options options;
  if (observed) options.observer = &counter;
  auto once = [&] {
    tg::result<tg::run_report> out = tg::fail(tg::errc::no_result, "run did not complete");
    session.async_run(group, options, [&out](boost::system::error_code, tg::run_report r) {
      out = r.failure ? tg::result<tg::run_report>(*r.failure) : tg::result<tg::run_report>(std::move(r));
    });
    io.run();
    io.restart();
    return out;
  };
  if (auto r = once(); !r) {  // warm-up: compiles the group
    state.SkipWithError(r.error().message.c_str());
    return;
  }
  for (auto _ : state) {
    if (auto r = once(); !r) [[unlikely]] {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
  }
  const std::int64_t runs = 1 + state.iterations();
  if (node->read<std::int64_t>("acc").value() != iterations * runs) {
    state.SkipWithError("w5_loop_observed: wrong count");
  } else if (observed && (counter.began != runs || counter.ended != runs)) {
    state.SkipWithError("w5_loop_observed: the observer missed task events");
  }
}

const tgbench::add_workload workload{{
    .id = "w5_loop_observed",
    .title = "the w5_loop step as a one-task group on a local_session (1-thread io_context), observed for task "
             "events only",
    .unit = "ns/iter",
    .unit_ns = 1.0,
    .baselines = {"unobserved"},
    .targets = {{tgbench::target_kind::max_ratio, "unobserved", 1.1}},
    .order = 52,
}};

const tgbench::add_contender reg_observed{{
    .workload = "w5_loop_observed",
    .name = tgbench::ours,
    .what = "session.async_run(group) with run_options::observer asking for observe::tasks",
    .units_per_iteration = static_cast<double>(iterations),
    .fn = [](benchmark::State& state) { run_group(state, true); },
}};

const tgbench::add_contender reg_unobserved{{
    .workload = "w5_loop_observed",
    .name = "unobserved",
    .what = "session.async_run(group) without an observer",
    .units_per_iteration = static_cast<double>(iterations),
    .fn = [](benchmark::State& state) { run_group(state, false); },
}};

}  // namespace
