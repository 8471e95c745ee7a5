#include "common/virtual_ops.hpp"

namespace tgbench {

vop::~vop() = default;

namespace {

class add_op final : public vop {
 public:
  add_op(const std::int64_t* a, const std::int64_t* b, std::int64_t* out) : a_(a), b_(b), out_(out) {}
  void run() override {
    *out_ = static_cast<std::int64_t>(static_cast<std::uint64_t>(*a_) + static_cast<std::uint64_t>(*b_));
  }

 private:
  const std::int64_t* a_;
  const std::int64_t* b_;
  std::int64_t* out_;
};

class ge_op final : public vop {
 public:
  ge_op(const std::int64_t* a, const std::int64_t* b, bool* out) : a_(a), b_(b), out_(out) {}
  void run() override { *out_ = *a_ >= *b_; }

 private:
  const std::int64_t* a_;
  const std::int64_t* b_;
  bool* out_;
};

}  // namespace

std::unique_ptr<vop> make_add(const std::int64_t* a, const std::int64_t* b, std::int64_t* out) {
  return std::make_unique<add_op>(a, b, out);
}

std::unique_ptr<vop> make_ge(const std::int64_t* a, const std::int64_t* b, bool* out) {
  return std::make_unique<ge_op>(a, b, out);
}

vnet add_chain(counter& c, std::size_t n) {
  vnet net;
  for (std::size_t i = 0; i < n; ++i) net.add(make_add(&c.acc, &c.one, &c.acc));
  return net;
}

}  // namespace tgbench
