// Internal: a net's asynchronous run with its position in view, and what
// a pending op waits for, for hang diagnosis (run_probe). The step
// drivers and RunNet use them; net_instance::run is the first without a
// position.
#pragma once

#include <taskgroup/net.hpp>

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace taskgroup::detail {

/// net_instance::run, keeping in `*at` (when not null) the index of the op
/// it waits on while it waits.
boost::asio::awaitable<status> run_net_at(net_instance& inst, std::uint32_t* at);

/// Where op `i` of `inst` stands while it pends, as the error of a run that
/// ended there would say it: `net "take" op #0 (Dequeue): input #0 "jobs":
/// waiting for an item: the queue is empty (0 of 4, open)`. `blocked`: it
/// waits for an offloaded op of its node rather than for its own kernel.
std::string op_waiting(const net_instance& inst, std::size_t i, bool blocked);

}  // namespace taskgroup::detail
