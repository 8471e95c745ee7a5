// Workload 1 (spawn and join): shared sizes.
#pragma once

#include <cstddef>

namespace tgbench::w1 {

inline constexpr std::size_t small_n = 10'000;
inline constexpr std::size_t large_n = 100'000;
/// The thread-per-task contender keeps at most this many threads alive at
/// once (100,000 live threads would exceed vm.max_map_count here).
inline constexpr std::size_t thread_wave = 1'000;
/// Memory per pending task is measured with this many tasks.
inline constexpr std::size_t memory_n = 100'000;

}  // namespace tgbench::w1
