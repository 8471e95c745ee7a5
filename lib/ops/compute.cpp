// taskgroup: the built-in CPU-bound operator, Hash, offloaded.
#include "ops/builtins.hpp"

#include <cstdint>
#include <string>

namespace taskgroup::detail {

namespace {

constexpr std::uint64_t fnv_offset = 0xcbf29ce484222325ULL;
constexpr std::uint64_t fnv_prime = 0x100000001b3ULL;
// Between two looks at the stop request: a few microseconds of hashing.
constexpr std::size_t bytes_between_checks = std::size_t{64} << 10;

kernel_result hash_factory(op_context& ctx) {
  TASKGROUP_TRY(std::int64_t rounds, ctx.args().get_or<std::int64_t>("rounds", 1));
  if (rounds < 1) return fail(errc::bad_argument, "rounds must be at least 1, got " + std::to_string(rounds));
  const op_context* c = &ctx;
  return make_kernel([c, rounds]() -> status {
    const std::string& text = c->input<std::string>(0);
    std::uint64_t h = fnv_offset;
    std::size_t since_check = 0;
    for (std::int64_t r = 0; r < rounds && !text.empty(); ++r) {
      for (const char ch : text) {
        h ^= static_cast<unsigned char>(ch);
        h *= fnv_prime;
      }
      since_check += text.size();
      if (since_check >= bytes_between_checks) {
        since_check = 0;
        if (c->stop_requested()) return fail(errc::cancelled, "cancelled after " + std::to_string(r + 1) + " rounds");
      }
    }
    c->set_output(0, static_cast<std::int64_t>(h));
    return ok();
  });
}

}  // namespace

void add_compute_ops(builtin_table& t) {
  t.add(operator_schema("Hash")
            .inputs(1)
            .outputs(1)
            .arg_with_default("rounds", std::int64_t{1}, "times the input is hashed in a row (>= 1)")
            .doc("int64 64-bit FNV-1a hash of the string input repeated `rounds` times; offloaded (CPU-bound: runs "
                 "on the compute executor), checks for cancellation every 64 KiB")
            .offload()
            .factory(&hash_factory));
}

}  // namespace taskgroup::detail
