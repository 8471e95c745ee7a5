// An allocator that counts what it allocates and frees: bound to a
// handler, it shows whether an operation allocates its state with the
// handler's associated allocator.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

namespace taskgroup::test {

struct allocation_counts {
  std::atomic<int> allocated{0};
  std::atomic<int> freed{0};
};

template <class T>
struct counting_allocator {
  using value_type = T;
  allocation_counts* counts;
  explicit counting_allocator(allocation_counts* c) noexcept : counts(c) {}
  template <class U>
  counting_allocator(const counting_allocator<U>& o) noexcept : counts(o.counts) {}  // NOLINT
  T* allocate(std::size_t n) {
    ++counts->allocated;
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    ++counts->freed;
    std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const counting_allocator<U>& o) const noexcept {
    return counts == o.counts;
  }
};

}  // namespace taskgroup::test
