// Workload 2 (op dispatch): shared sizes.
#pragma once

#include <cstddef>

namespace tgbench::w2 {

inline constexpr std::size_t ops_per_net = 1'000;
inline constexpr std::size_t runs_per_iteration = 1'000;

}  // namespace tgbench::w2
