// Workload 5 (loops and stop conditions): shared sizes.
#pragma once

#include <cstdint>

namespace tgbench::w5 {

inline constexpr std::int64_t iterations = 1'000'000;

}  // namespace tgbench::w5
