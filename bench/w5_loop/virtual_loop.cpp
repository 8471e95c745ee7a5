// w5_loop / virtual_loop: a plain loop calling the same virtual op(s): one
// Add per iteration (counted), or GE, a check of its bool, then Add (stop).
#include "w5_loop/w5_loop.hpp"

#include "common/registry.hpp"
#include "common/virtual_ops.hpp"

#include <cstdint>

namespace {

using tgbench::w5::iterations;

void counted(benchmark::State& state) {
  tgbench::counter c;
  auto op = tgbench::make_add(&c.acc, &c.one, &c.acc);
  for (auto _ : state) {
    for (std::int64_t i = 0; i < iterations; ++i) op->run();
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(c.acc);
  if (c.acc != iterations * state.iterations()) state.SkipWithError("w5 virtual_loop: wrong count");
}

void stop_blob(benchmark::State& state) {
  struct alignas(64) {
    std::int64_t iter = 0;
    std::int64_t one = 1;
    std::int64_t limit = iterations;
    bool stop = false;
  } s;
  auto ge = tgbench::make_ge(&s.iter, &s.limit, &s.stop);
  auto add = tgbench::make_add(&s.iter, &s.one, &s.iter);
  for (auto _ : state) {
    s.iter = 0;
    s.stop = false;
    benchmark::ClobberMemory();
    for (;;) {
      ge->run();
      if (s.stop) break;  // reloaded: the op wrote it through a pointer
      add->run();
    }
  }
  benchmark::DoNotOptimize(s.iter);
  if (s.iter != iterations) state.SkipWithError("w5 stop virtual_loop: wrong count");
}

const tgbench::add_contender reg_counted{{
    .workload = "w5_loop",
    .name = "virtual_loop",
    .what = "for (i < 1000000) op->run(): one virtual Add per iteration",
    .units_per_iteration = static_cast<double>(iterations),
    .fn = counted,
}};

const tgbench::add_contender reg_stop{{
    .workload = "w5_loop_stop",
    .name = "virtual_loop",
    .what = "for (;;) { ge->run(); if (stop) break; add->run(); }: two virtual ops per iteration",
    .units_per_iteration = static_cast<double>(iterations),
    .fn = stop_blob,
}};

}  // namespace
