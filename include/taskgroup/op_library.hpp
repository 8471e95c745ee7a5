// taskgroup: operator libraries, shared objects that register operators at
// run time (Caffe2's `dyndep.InitOpsLibrary`).
//
// An op library is a shared object (built with `shared_module()` in Meson,
// `add_library(... MODULE ...)` in CMake) linked against the shared
// libtaskgroup, that defines the entry point with `TASKGROUP_OP_LIBRARY`:
//
//   #include <taskgroup/op_library.hpp>
//
//   TASKGROUP_OP_LIBRARY(registry) {
//     return registry.add(taskgroup::operator_schema("Upper").inputs(1).outputs(1).sync(...));
//   }
//
// A program loads it with `load_op_library(path, registry)`; `taskgroup
// run|check|graph|ops --load LIB.so` loads it into the global registry
// before it reads the plan.
//
// The entry point is one C symbol, `taskgroup_op_library` (no C++ name
// mangling, so that the loader finds it by name), returning a pointer to an
// `op_library_entry`: the library's ABI version, then its registration
// function. The ABI rule: the registration function is called with C++
// objects (`operator_registry`, `operator_schema`, `status`) whose layout
// is fixed only within one ABI version, so the loader reads the version
// first (the first member of the entry, which never moves) and calls
// nothing in a library built for another version. `op_library_abi_version`
// changes with every release that changes the layout or the behaviour of a
// type an op library uses (those of operator.hpp, blob.hpp, error.hpp,
// workspace.hpp, and the standard library they hold); a library must then
// be rebuilt against the new headers. The library and the program must
// also share one C++ standard library (same compiler family).
//
// Threading: `load_op_library` is thread-safe (the registry is, and
// dlopen() is); a registration function runs on the loading thread.
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/error.hpp>
#include <taskgroup/operator.hpp>

#include <cstdint>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

namespace taskgroup {

/// The ABI version of op libraries this taskgroup loads, baked into every
/// library built with `TASKGROUP_OP_LIBRARY` against these headers.
inline constexpr std::uint32_t op_library_abi_version = 2;

/// The name of the entry point's symbol.
inline constexpr const char* op_library_entry_symbol = "taskgroup_op_library";

/// What the entry point returns (a pointer to a static object of the
/// library). Layout rule: `abi_version` is first in every ABI version, so a
/// loader of any version can read it; what follows it is only valid for
/// that version.
struct TASKGROUP_API op_library_entry {
  /// The `op_library_abi_version` the library was built with.
  std::uint32_t abi_version;
  /// Registers the library's operators into `registry` (a fresh one: the
  /// loader moves them into its target only when every one fits). Returns
  /// the library's own failure, if any; must not throw (the macro's
  /// wrapper turns an exception into an error).
  status (*register_ops)(operator_registry& registry) noexcept;
};

/// What a loaded library added: its path (as given) and the types of the
/// operators it registered, sorted. A value type. The library itself stays
/// loaded until the process exits: its code is reached by schemas, by
/// kernels of nets and by blob values that no handle tracks, so unloading
/// it could never be safe; destroying this object unloads nothing.
struct TASKGROUP_API op_library {
  std::filesystem::path path;
  std::uint32_t abi_version = 0;
  std::vector<std::string> operators;
};

/// Loads the op library at `path` (a file path; a bare name is taken in the
/// current directory, never searched in the system's library path), checks
/// its ABI version, runs its registration into a fresh registry, then adds
/// every operator it registered to `registry` at once, or none. On every
/// error nothing is added to `registry` and the library is unloaded again.
/// Completes with the description of what was added.
///
/// Errors, each starting with `op library "PATH": `:
/// `errc::op_library_failed` when the file does not exist or dlopen()
/// refuses it (dlopen's text: not a shared object, missing symbols), when
/// it has no `taskgroup_op_library` symbol (not a taskgroup op library),
/// when it was built for another ABI version (naming both versions), when
/// its registration function fails or throws (its message);
/// `errc::duplicate_operator` naming the operator when one of its types is
/// already in `registry` or registered twice by the library. Not
/// cancellable (it runs to its end on the calling thread).
TASKGROUP_API result<op_library> load_op_library(const std::filesystem::path& path, operator_registry& registry);

namespace detail {
// The wrapper the macro emits around the library's registration body: it
// runs it and turns an exception into an error (an exception must not
// cross the C entry point).
template <status (*Body)(operator_registry&)>
status run_op_library_body(operator_registry& registry) noexcept {
  try {
    return Body(registry);
  } catch (const std::exception& e) {
    return fail(errc::op_library_failed, std::string("registration threw: ") + e.what());
  } catch (...) {
    return fail(errc::op_library_failed, "registration threw a non-standard exception");
  }
}
}  // namespace detail

}  // namespace taskgroup

/// Defines the op library's entry point, with `op_library_abi_version` of
/// these headers baked in, followed by the body of its registration
/// function: `TASKGROUP_OP_LIBRARY(registry) { ...; return taskgroup::ok(); }`
/// where `registry` names the `taskgroup::operator_registry&` to add the
/// library's schemas to, and the body returns a `taskgroup::status` (the
/// first failed `registry.add(...)`, or the library's own reason to refuse
/// loading). Use it once per library, at namespace scope. The symbol is
/// exported even when the library is built with hidden visibility.
#define TASKGROUP_OP_LIBRARY(registry)                                                                               \
  static ::taskgroup::status taskgroup_op_library_body(::taskgroup::operator_registry& registry);                    \
  extern "C" __attribute__((visibility("default"))) const ::taskgroup::op_library_entry* taskgroup_op_library() {    \
    static const ::taskgroup::op_library_entry entry{                                                                \
        ::taskgroup::op_library_abi_version, &::taskgroup::detail::run_op_library_body<&taskgroup_op_library_body>}; \
    return &entry;                                                                                                   \
  }                                                                                                                  \
  static ::taskgroup::status taskgroup_op_library_body(::taskgroup::operator_registry& registry)
