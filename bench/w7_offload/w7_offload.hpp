// Workload 7o (offload): CPU-bound ops kept off the node strand and the
// I/O threads. Shared by its contenders.
#pragma once

#include <taskgroup/taskgroup.hpp>

#include <cstdint>
#include <string>

namespace w7_offload {

/// Hash rounds over `text()` for about 50 ms of CPU on this kind of machine.
inline constexpr std::int64_t rounds = 12'000;
/// The 4 KiB string every task hashes (feed "text").
std::string text();

/// 8 tasks on `nodes` nodes (round robin), each hashing "text" `rounds`
/// times with the built-in Hash (offloaded) or, with `on_strand`, the same
/// loop as a synchronous op on the node strand.
taskgroup::task_group burn_group(bool on_strand, int nodes);
/// The feeds of `burn_group`.
taskgroup::feeds burn_feeds(int nodes);

/// One task whose step runs one offloaded op that does nothing, `n` times.
taskgroup::task_group trivial_group(std::int64_t n);

}  // namespace w7_offload
