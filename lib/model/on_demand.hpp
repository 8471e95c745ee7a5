// Internal: fields that few objects set, kept in a block made on first
// write, so that the many objects that never set them stay small (a plan
// may hold 10^5 tasks and steps and more).
#pragma once

#include <memory>

namespace taskgroup::detail {

/// A `T` made on the first `edit()`; `view()` reads a default `T` until
/// then. Threading: as `T` (not thread-safe for writers).
template <class T>
class on_demand {
 public:
  /// The block, made now if it was not.
  T& edit() {
    if (!block_) block_ = std::make_unique<T>();
    return *block_;
  }
  /// The block, or a default `T` when none was made.
  [[nodiscard]] const T& view() const noexcept {
    static const T none;
    return block_ ? *block_ : none;
  }
  /// The block when it was made, else null.
  [[nodiscard]] T* get() noexcept { return block_.get(); }
  [[nodiscard]] const T* get() const noexcept { return block_.get(); }

 private:
  std::unique_ptr<T> block_;
};

}  // namespace taskgroup::detail
