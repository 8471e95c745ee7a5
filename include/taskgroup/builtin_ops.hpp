// taskgroup: the built-in operators.
//
// Registered in `operator_registry::global()`; enough to write real plans
// without C++. Every type checks its input and output counts, its
// arguments and its input types, and fails with a message naming what is
// wrong. Numeric ops accept int64 or double inputs (both of one type).
//
// clang-format off
// | type | inputs -> outputs | arguments | effect |
// |---|---|---|---|
// | ConstantFill | 0 -> 1 | value (any kind, required) | output = value (a list makes a vector) |
// | Copy | 1 -> 1 | | output = copy of input (error for move-only values) |
// | Add Sub Mul Div Mod | 2 -> 1 | | arithmetic; int64 Div/Mod by zero is an error; double Mod is fmod |
// | Negate | 1 -> 1 | | -x |
// | LT LE GT GE EQ NE | 2 -> 1 | | bool comparison (EQ/NE also on bool and string) |
// | And Or Xor | 2 -> 1, Not 1 -> 1 | | boolean logic |
// | CreateCounter | 0 -> 1 | init (int64, default 0) | counter = init |
// | CountDown | 1 -> 1 | | counter > 0: decrement, done = false; else done = true |
// | ResetCounter | 1 -> 0 | init (int64, default 0) | counter = init |
// | Iter, AtomicIter | 0..1 -> 1 | | output += 1 (starts at 0 when it has no value) |
// | Print | 1+ -> 0 | prefix (string) | one line per input to the print sink |
// | Sleep | 0..1 -> 0 | ms (int64 or double; required without an input, refused with one) | waits `ms` milliseconds, or with an input the milliseconds it holds (int64 or double, read each time the op runs: a per-run duration can be a feed; an empty or other blob or a value out of [0, 1e12] fails the op, naming the input; 0 ends at once, without the timer); async (callback form: a task waiting on it holds no coroutine frame, only an entry in its execution context's queue of Sleeps, served by one Asio timer), cancellable (any cancellation type) |
// | Fail | 0+ -> 0 | message (string) | fails with errc::op_failed and the message |
// | FailTimes | 0+ -> 0 | times (int64, required), message (string) | fails as Fail the first `times` times it runs within one run of the group (counted by the run, across retried attempts), then succeeds |
// | Append | 2 -> 1 | | output = input 0 followed by input 1 (an element or a vector) |
// | Size | 1 -> 1 | | int64 length of a vector or string |
// | Sum | 1 -> 1 | | sum of a vector<int64> or vector<double> |
// | Get | 1..2 -> 1 | index (int64) | element at the index (argument, or int64 input 1) |
// | Concat | 1+ -> 1 | separator (string) | joined strings |
// | CreateQueue | 0 -> 1 | capacity (int64 >= 1, required) | a bounded queue blob |
// | Enqueue | 2 -> 0 | | copies input 1 into the queue; waits while full; async |
// | Dequeue | 1 -> 2 | | waits while empty; output 0 = value, output 1 = true; false once closed and drained; async |
// | CloseQueue | 1 -> 0 | | closes the queue: waiting consumers drain then get false |
// | RunNet | 0 -> 0 | net (string, required) | runs the named net of this workspace or the nearest parent that has one (a node's remote net, `task_group::add_remote_net`, or any `workspace::create_net` net): its ops, bound in that workspace, run as a net step's would (async ones awaited, cancellable); its failure is the op's, under the op's own prefix. The net must exist when the op is bound and when it runs; at most `max_run_net_in_flight` runs of one RunNet op at once (a net that runs itself fails there); async |
// | Hash | 1 -> 1 | rounds (int64 >= 1, default 1) | int64 64-bit FNV-1a hash of the string input repeated `rounds` times; offloaded (see operator_schema::offload), checks for cancellation every 64 KiB hashed |
// clang-format on
//
// Threading: the ops are strand-bound like the workspace they run in; the
// print sink is thread-safe.
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/operator.hpp>

#include <cstddef>
#include <functional>
#include <string_view>

namespace taskgroup {

/// Runs of one RunNet op in flight at once: a net that runs itself,
/// directly or through others, fails with `errc::op_failed` at this
/// depth instead of growing without end.
inline constexpr std::size_t max_run_net_in_flight = 256;

/// Registers every built-in operator in `registry`. Errors:
/// `errc::duplicate_operator` when one of the types is already there.
TASKGROUP_API status register_builtin_ops(operator_registry& registry);

/// Where Print writes: called once per line, without the newline.
using print_sink = std::function<void(std::string_view line)>;

/// Replaces the print sink (an empty function restores the default, which
/// writes lines to stdout) and returns the previous one. Thread-safe.
TASKGROUP_API print_sink set_print_sink(print_sink sink);

/// Writes a line to the current print sink. Thread-safe.
TASKGROUP_API void print_line(std::string_view line);

/// A readable rendering of a blob's value, as Print shows it: numbers,
/// bools, strings, vectors of them, queues; `<type>` for other types.
TASKGROUP_API std::string to_display_string(const blob& b);

}  // namespace taskgroup
