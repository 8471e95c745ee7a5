// An op library built for another ABI version: its entry point is written by
// hand, as `TASKGROUP_OP_LIBRARY` would be by another release's headers. The
// loader must read the version and call nothing else (register_ops would
// abort the test if it ran).
#include <taskgroup/op_library.hpp>

#include <cstdlib>

namespace {
taskgroup::status never_called(taskgroup::operator_registry& /*registry*/) noexcept { std::abort(); }
}  // namespace

extern "C" __attribute__((visibility("default"))) const taskgroup::op_library_entry* taskgroup_op_library() {
  static const taskgroup::op_library_entry entry{taskgroup::op_library_abi_version + 98, &never_called};
  return &entry;
}
