// Workload 3 (timers): shared sizes.
#pragma once

#include <chrono>
#include <cstddef>

namespace tgbench::w3 {

inline constexpr std::size_t tasks = 10'000;
inline constexpr std::chrono::milliseconds wait{1};

}  // namespace tgbench::w3
