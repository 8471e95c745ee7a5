// taskgroup: loading op libraries (dlopen, the entry point, the ABI check,
// the all-or-nothing registration).
#include <taskgroup/op_library.hpp>

#include <dlfcn.h>

#include <memory>
#include <string>
#include <system_error>
#include <utility>

namespace taskgroup {

namespace {

// Closes a handle unless released: the library is unloaded again on every
// error, and stays loaded for good once its operators are registered.
struct dl_closer {
  void operator()(void* handle) const noexcept { ::dlclose(handle); }
};
using dl_handle = std::unique_ptr<void, dl_closer>;

std::string dl_error_text() {
  const char* text = ::dlerror();
  return text != nullptr ? text : "unknown dlopen error";
}

}  // namespace

result<op_library> load_op_library(const std::filesystem::path& path, operator_registry& registry) {
  const std::string where = "op library " + quote(path.string());
  auto failed = [&](const std::string& what) { return fail(errc::op_library_failed, where + ": " + what); };

  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return failed(ec ? "cannot access: " + ec.message() : "no such file");
  // An absolute path: dlopen() would search the library path for a name
  // without a slash, and could then load another file of the same name.
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  if (ec) return failed("cannot resolve the path: " + ec.message());

  // RTLD_NOW: a missing symbol is an error here, not a crash at the first
  // call. RTLD_LOCAL: two libraries' own symbols do not collide.
  dl_handle handle(::dlopen(absolute.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!handle) return failed("cannot load: " + dl_error_text());

  (void)::dlerror();  // clear, so that a null symbol is told from an error
  void* symbol = ::dlsym(handle.get(), op_library_entry_symbol);
  if (symbol == nullptr) {
    return failed(std::string("not a taskgroup op library (no ") + op_library_entry_symbol +
                  " entry point; define it with TASKGROUP_OP_LIBRARY)");
  }
  // POSIX guarantees that a dlsym() result converts to a function pointer.
  using entry_fn = const op_library_entry* (*)();
  auto entry_point = reinterpret_cast<entry_fn>(symbol);
  const op_library_entry* entry = entry_point();
  if (entry == nullptr) return failed(std::string(op_library_entry_symbol) + " returned no entry");
  // Only the first member is read before the version is known to match.
  if (entry->abi_version != op_library_abi_version) {
    return failed("built for op library ABI version " + std::to_string(entry->abi_version) +
                  ", this taskgroup loads version " + std::to_string(op_library_abi_version) +
                  " (rebuild the library against this taskgroup's headers)");
  }
  if (entry->register_ops == nullptr) return failed("the entry has no registration function");

  op_library loaded{path, entry->abi_version, {}};
  {
    // The staging registry (and every schema in it) is gone before the
    // handle closes on an error: its factories are the library's code.
    operator_registry staged;
    if (status st = entry->register_ops(staged); !st) return fail(st.error().with_context(where));
    if (status st = registry.merge(staged); !st) return fail(st.error().with_context(where));
    loaded.operators = staged.types();
  }
  (void)handle.release();  // registered: loaded until the process exits
  return loaded;
}

}  // namespace taskgroup
