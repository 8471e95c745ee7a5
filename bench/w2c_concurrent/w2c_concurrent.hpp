// Workload 2c (concurrent substeps): shared sizes.
#pragma once

#include <cstddef>

namespace tgbench::w2c {

inline constexpr std::size_t substeps = 4;
inline constexpr std::size_t ops_per_net = 1'000;
inline constexpr std::size_t iterations = 1'000;
/// w2c_sched: the same shape with one op per net, so that the figure is
/// the scheduling cost of an iteration (spawn, barrier) and not the ops.
inline constexpr std::size_t sched_ops_per_net = 1;

}  // namespace tgbench::w2c
