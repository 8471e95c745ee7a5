// Internal: what the families of built-in operators share (lib/ops/*.cpp),
// and the function of each that adds its types to a registry
// (register_builtin_ops, lib/ops/builtin_registry.cpp).
//
// Every factory resolves everything once, when a net is instantiated: it
// parses and checks the arguments and captures raw pointers to the bound
// blobs (the op_context owns them through shared_ptrs and outlives the
// kernel; the net instance never moves its contexts). A run only checks the
// input types and computes; messages are built on failure only. The net
// runner prefixes `net "n" op #i (Type): ` to every error, so messages here
// do not.
#pragma once

#include <taskgroup/builtin_ops.hpp>
#include <taskgroup/operator.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace taskgroup::detail {

using kernel_result = result<std::unique_ptr<op_kernel>>;

/// `make_fast_kernel` for a built-in: every built-in fast path writes only
/// its op's own blobs, in place (`fast_writes::own_blobs_in_place`).
template <class Fast, class General>
std::unique_ptr<op_kernel> builtin_fast_kernel(Fast fast, General general) {
  return make_fast_kernel(std::move(fast), std::move(general), fast_writes::own_blobs_in_place);
}

/// Adds schemas to a registry one by one: every type that can be added is,
/// and the first failure is kept.
class builtin_table {
 public:
  explicit builtin_table(operator_registry& registry) noexcept : registry_(&registry) {}
  void add(operator_schema& schema);
  [[nodiscard]] status first_failure() && { return std::move(first_); }

 private:
  operator_registry* registry_;
  status first_ = ok();
};

/// Whether `type` names a built-in operator type.
bool is_builtin_type(std::string_view type);

/// The families of built-in types (see the table in builtin_ops.hpp).
void add_value_ops(builtin_table& t);       // ConstantFill Copy Append Size Sum Get Concat (values.cpp)
void add_arithmetic_ops(builtin_table& t);  // Add ... Mod Negate, LT ... NE, And Or Xor Not (arithmetic.cpp)
void add_counter_ops(builtin_table& t);     // CreateCounter CountDown ResetCounter Iter AtomicIter (counters.cpp)
void add_effect_ops(builtin_table& t);      // Print Sleep Fail (effects.cpp)
void add_queue_ops(builtin_table& t);       // CreateQueue Enqueue Dequeue CloseQueue (queues.cpp)
void add_compute_ops(builtin_table& t);     // Hash, offloaded (compute.cpp)
void add_net_ops(builtin_table& t);         // RunNet (run_net.cpp)

// --- messages (cold paths; messages.cpp) -------------------------------------

/// `input #i "name": `, the start of a message about input `i`.
std::string input_where(const op_context& ctx, std::size_t i);
/// Input `i` holds no value (`errc::blob_empty`) or a value of another type
/// than `expected` (`errc::type_mismatch`); the wording of
/// op_context::try_input.
[[gnu::cold]] error input_type_error(const op_context& ctx, std::size_t i, std::string_view expected);
/// Input `i` holds no value.
[[gnu::cold]] error empty_input_error(const op_context& ctx, std::size_t i);

// --- wrapping int64 arithmetic -----------------------------------------------

constexpr std::uint64_t bits(std::int64_t v) noexcept { return static_cast<std::uint64_t>(v); }
constexpr std::int64_t wrap(std::uint64_t v) noexcept { return static_cast<std::int64_t>(v); }

// --- value rendering (display.cpp) -------------------------------------------

/// Appends the rendering of `b` that Print shows (see to_display_string).
void append_display(std::string& s, const blob& b);
/// The shortest text that reads back as `v`.
std::string number_text(double v);

}  // namespace taskgroup::detail
