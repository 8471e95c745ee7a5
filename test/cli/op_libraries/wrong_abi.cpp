// An op library built for another ABI version: its entry point is written by
// hand, as `TASKGROUP_OP_LIBRARY` would be by another release's headers. The
// loader must read the version and call nothing else (register_ops would
// abort the test if it ran).
#include <taskgroup/op_library.hpp>

#include <cstdint>
#include <cstdlib>

namespace {
// The version test/cli/op_libraries.py expects in the loader's message.
constexpr std::uint32_t other_version = 99;
static_assert(other_version != taskgroup::op_library_abi_version);

taskgroup::status never_called(taskgroup::operator_registry& /*registry*/) noexcept { std::abort(); }
}  // namespace

extern "C" __attribute__((visibility("default"))) const taskgroup::op_library_entry* taskgroup_op_library() {
  static const taskgroup::op_library_entry entry{other_version, &never_called};
  return &entry;
}
