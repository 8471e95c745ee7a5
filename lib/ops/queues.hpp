// Internal: what a run asks of the queue operators to tell a wait that
// nothing left can end (a Dequeue with no producer left).
//
// A run counts, on each node, the tasks that have not ended (a task ended
// by the run's own cancellation still counts: it was there when the wait
// began) whose step trees hold an op that may feed or close a queue. When
// that count is zero, a Dequeue waiting on an empty, open queue waits for
// something that no task of the run can do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace taskgroup {
class net_instance;
struct op_def;
}  // namespace taskgroup

namespace taskgroup::detail {

/// Whether op `d` may put an item into a queue or close one: an Enqueue,
/// a CloseQueue, a RunNet (its net is known only when it runs), an inline
/// op, or an op of a type that is not built in.
bool may_feed_queues(const op_def& d);

/// Whether op `i` of `inst` is a Dequeue that waits on an empty, open
/// queue while `feeders` (the count above; none when null) is zero.
bool starved(const net_instance& inst, std::size_t i, const std::uint32_t* feeders) noexcept;

/// What a starved wait's message ends with.
inline constexpr std::string_view no_producer_left =
    "; no producer left: no task of this node that has not ended can enqueue or close";

}  // namespace taskgroup::detail
