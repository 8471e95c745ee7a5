// taskgroup_bench: the virtual-call baseline, shaped like Caffe2's SimpleNet.
//
// An abstract op with `virtual void run()`, concrete ops holding raw
// pointers resolved once at construction (as a Caffe2 operator holds its
// input and output tensors), and a net that calls them in order. The
// concrete classes live in virtual_ops.cpp, out of sight of the loops that
// call them, so the compiler cannot devirtualize or fold the calls.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace tgbench {

class vop {
 public:
  vop() = default;
  vop(const vop&) = delete;
  vop& operator=(const vop&) = delete;
  virtual ~vop();
  virtual void run() = 0;
};

/// `*out = *a + *b` (int64, wrapping like the library's Add).
std::unique_ptr<vop> make_add(const std::int64_t* a, const std::int64_t* b, std::int64_t* out);
/// `*out = *a >= *b`.
std::unique_ptr<vop> make_ge(const std::int64_t* a, const std::int64_t* b, bool* out);

/// Ops constructed once, run in order (Caffe2 SimpleNet::Run).
class vnet {
 public:
  void add(std::unique_ptr<vop> op) {
    ptrs_.push_back(op.get());
    owned_.push_back(std::move(op));
  }
  void run() {
    for (vop* op : ptrs_) op->run();
  }
  [[nodiscard]] std::size_t size() const noexcept { return ptrs_.size(); }

 private:
  std::vector<vop*> ptrs_;
  std::vector<std::unique_ptr<vop>> owned_;
};

/// One accumulator and its increment, on a cache line of their own (so
/// concurrent substeps of the threaded baselines do not share lines).
struct alignas(64) counter {
  std::int64_t acc = 0;
  std::int64_t one = 1;
};

/// A net of `n` ops `c.acc = c.acc + c.one`.
vnet add_chain(counter& c, std::size_t n);

}  // namespace tgbench
