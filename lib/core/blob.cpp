#include <taskgroup/blob.hpp>

#include <boost/core/demangle.hpp>

namespace taskgroup {

std::string detail::demangle(const char* mangled) { return boost::core::demangle(mangled); }

bool detail::same_type(const std::type_info& a, const std::type_info& b) noexcept { return a == b; }

result<blob> blob::clone() const {
  blob copy;
  if (data_ == nullptr) return copy;
  if (vt_->clone == nullptr) {
    return fail(errc::type_mismatch, "a blob of type " + vt_->name() + " cannot be copied (move-only type)");
  }
  copy.data_ = vt_->clone(data_);
  copy.vt_ = vt_;
  return copy;
}

error blob::mismatch(std::string expected) const {
  if (data_ == nullptr) return {errc::blob_empty, "expected " + expected + ", but the blob has no value"};
  return {errc::type_mismatch, "expected " + expected + ", got " + vt_->name()};
}

}  // namespace taskgroup
