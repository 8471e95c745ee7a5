// Workload 2c (concurrent substeps): shared sizes.
#pragma once

#include <cstddef>

namespace tgbench::w2c {

inline constexpr std::size_t substeps = 4;
inline constexpr std::size_t ops_per_net = 1'000;
inline constexpr std::size_t iterations = 1'000;

}  // namespace tgbench::w2c
