// taskgroup: the error messages the built-in operators share.
#include "ops/builtins.hpp"

#include <string>

namespace taskgroup::detail {

std::string input_where(const op_context& ctx, std::size_t i) {
  return "input #" + std::to_string(i) + " " + quote(ctx.def().inputs[i]) + ": ";
}

[[gnu::cold]] error input_type_error(const op_context& ctx, std::size_t i, std::string_view expected) {
  const blob& b = ctx.input_blob(i);
  std::string where = input_where(ctx, i);
  if (!b.has_value()) {
    return {errc::blob_empty, where + "expected " + std::string(expected) + ", but the blob has no value"};
  }
  return {errc::type_mismatch, where + "expected " + std::string(expected) + ", got " + b.type_name()};
}

[[gnu::cold]] error empty_input_error(const op_context& ctx, std::size_t i) {
  return {errc::blob_empty, input_where(ctx, i) + "the blob has no value"};
}

}  // namespace taskgroup::detail
