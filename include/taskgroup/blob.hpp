// taskgroup: blobs, the typed values that operators read and write.
//
// A blob holds one value of any movable C++ type (move-only types included)
// or nothing. Typed access checks the type and, on a mismatch, reports the
// expected and the actual type by name ("int64", "vector<double>", or the
// demangled C++ name for other types).
//
// Threading: a blob is not synchronised (thread-bound). Blobs of a workspace
// are only touched from that workspace's node strand.
#pragma once

#include <taskgroup/export.hpp>

#include <taskgroup/error.hpp>

#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace taskgroup {

namespace detail {
TASKGROUP_API std::string demangle(const char* mangled);
template <class T>
struct type_name_of {
  static std::string get() { return demangle(typeid(T).name()); }
};
// clang-format off
template <> struct type_name_of<std::int64_t> { static std::string get() { return "int64"; } };
template <> struct type_name_of<double> { static std::string get() { return "double"; } };
template <> struct type_name_of<bool> { static std::string get() { return "bool"; } };
template <> struct type_name_of<std::string> { static std::string get() { return "string"; } };
// clang-format on
template <class T>
struct type_name_of<std::vector<T>> {
  static std::string get() { return "vector<" + type_name_of<T>::get() + ">"; }
};
}  // namespace detail

/// The name used for `T` in messages: `int64`, `double`, `bool`, `string`,
/// `vector<...>` of those, or the demangled C++ name.
template <class T>
std::string type_name() {
  return detail::type_name_of<std::remove_cv_t<T>>::get();
}

namespace detail {
// Out of line: the slow path of blob::holds (a type held through another
// copy of the vtable, e.g. across shared libraries with hidden symbols).
TASKGROUP_API bool same_type(const std::type_info& a, const std::type_info& b) noexcept;
struct TASKGROUP_API blob_vtable {
  const std::type_info& type;
  std::string (*name)();
  void (*destroy)(void*) noexcept;
  void* (*clone)(const void*);  // null when the type is not copyable
};
template <class T>
inline const blob_vtable blob_vtable_for{
    typeid(T),
    &type_name<T>,
    [](void* p) noexcept { delete static_cast<T*>(p); },
    std::is_copy_constructible_v<T> ? +[](const void* p) -> void* {
      if constexpr (std::is_copy_constructible_v<T>) {
        return new T(*static_cast<const T*>(p));
      } else {
        return nullptr;
      }
    }
                                    : nullptr,
};
}  // namespace detail

/// A type-erased, movable value holder, possibly empty.
///
/// Storage is one heap object per value; `set` of a value of the type
/// already held assigns in place and allocates nothing, so a hot loop that
/// rewrites an int64 blob does not allocate.
class TASKGROUP_API blob {
 public:
  /// An empty blob (no value).
  blob() noexcept = default;

  /// A blob holding `value`.
  template <class T, class = std::enable_if_t<!std::is_same_v<std::decay_t<T>, blob>>>
  explicit blob(T&& value) {
    set(std::forward<T>(value));
  }

  blob(blob&& other) noexcept : vt_(std::exchange(other.vt_, nullptr)), data_(std::exchange(other.data_, nullptr)) {}
  blob& operator=(blob&& other) noexcept {
    if (this != &other) {
      reset();
      vt_ = std::exchange(other.vt_, nullptr);
      data_ = std::exchange(other.data_, nullptr);
    }
    return *this;
  }
  blob(const blob&) = delete;
  blob& operator=(const blob&) = delete;
  ~blob() { reset(); }

  /// True when the blob holds a value.
  [[nodiscard]] bool has_value() const noexcept { return data_ != nullptr; }

  /// The type held, or `typeid(void)` when empty.
  [[nodiscard]] const std::type_info& type() const noexcept { return vt_ ? vt_->type : typeid(void); }

  /// The message name of the type held (`int64`, ...), or `empty`.
  [[nodiscard]] std::string type_name() const { return vt_ ? vt_->name() : "empty"; }

  /// True when the blob holds a `T`.
  template <class T>
  [[nodiscard]] bool holds() const noexcept {
    // One pointer compare on the hot path; ops check their input types on
    // every run.
    if (vt_ == &detail::blob_vtable_for<T>) [[likely]]
      return true;
    return vt_ != nullptr && detail::same_type(vt_->type, typeid(T));
  }

  /// The value when the blob holds a `T` through this program's own vtable
  /// for `T` (one pointer compare, nothing out of line), null otherwise;
  /// null does not prove another type (see `holds`). For the fast paths of
  /// kernels, which fall back to `try_get`.
  template <class T>
  [[nodiscard]] T* exact() noexcept {
    if (vt_ != &detail::blob_vtable_for<T>) return nullptr;
    held();
    return static_cast<T*>(data_);
  }
  template <class T>
  [[nodiscard]] const T* exact() const noexcept {
    if (vt_ != &detail::blob_vtable_for<T>) return nullptr;
    held();
    return static_cast<const T*>(data_);
  }

  /// The value as a `T`, or null when empty or of another type. Never throws.
  template <class T>
  [[nodiscard]] T* try_get() noexcept {
    return holds<T>() ? static_cast<T*>(data_) : nullptr;
  }
  template <class T>
  [[nodiscard]] const T* try_get() const noexcept {
    return holds<T>() ? static_cast<const T*>(data_) : nullptr;
  }

  /// The value as a `T`. Errors: `errc::blob_empty` when there is no value,
  /// `errc::type_mismatch` naming the expected and actual types.
  template <class T>
  [[nodiscard]] result<T*> get() noexcept {
    if (T* p = try_get<T>()) return p;
    return mismatch(taskgroup::type_name<T>());
  }
  template <class T>
  [[nodiscard]] result<const T*> get() const noexcept {
    if (const T* p = try_get<T>()) return p;
    return mismatch(taskgroup::type_name<T>());
  }

  /// The value as a `T&`; throws `taskgroup::system_error` where `get`
  /// returns an error.
  template <class T>
  [[nodiscard]] T& as() {
    return *get<T>().value();
  }
  template <class T>
  [[nodiscard]] const T& as() const {
    return *get<T>().value();
  }

  /// Stores `value`; assigns in place when a value of the same type is held.
  template <class T>
  std::decay_t<T>& set(T&& value) {
    using U = std::decay_t<T>;
    if (U* p = try_get<U>()) {
      if constexpr (std::is_move_assignable_v<U>) {
        *p = std::forward<T>(value);
        return *p;
      }
    }
    return emplace<U>(std::forward<T>(value));
  }

  /// Replaces the value with a `T` built from `args`.
  template <class T, class... Args>
  T& emplace(Args&&... args) {
    T* p = new T(std::forward<Args>(args)...);
    reset();
    vt_ = &detail::blob_vtable_for<T>;
    data_ = p;
    return *p;
  }

  /// Drops the value; the blob becomes empty.
  void reset() noexcept {
    if (data_ != nullptr) vt_->destroy(data_);
    data_ = nullptr;
    vt_ = nullptr;
  }

  /// A copy of this blob. Errors: `errc::type_mismatch` when the held type
  /// is not copyable (move-only values cannot be duplicated).
  [[nodiscard]] result<blob> clone() const;
  /// True when `clone` would copy the value: the blob holds one, of a
  /// copyable type.
  [[nodiscard]] bool copyable() const noexcept { return vt_ != nullptr && vt_->clone != nullptr; }

 private:
  [[nodiscard]] error mismatch(std::string expected) const;

  // Tells the optimizer the invariant "a vtable means a value" (so a
  // caller's null test of `exact` is the vtable compare alone).
  void held() const noexcept {
#if defined(__GNUC__)
    if (data_ == nullptr) __builtin_unreachable();
#endif
  }

  const detail::blob_vtable* vt_ = nullptr;
  void* data_ = nullptr;
};

}  // namespace taskgroup
