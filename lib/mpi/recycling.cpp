// taskgroup: the recycled storage of the large values rank 0 receives.
#include "mpi/recycling.hpp"

#include "model/task_access.hpp"

namespace taskgroup::detail::mpi {

void value_recycler::give(const std::string& tag, std::unique_ptr<blob> b) noexcept {
  std::unique_ptr<blob> replaced;
  std::lock_guard lock(m_);
  for (auto& [t, spare] : spares_) {
    if (t == tag) {
      replaced = std::exchange(spare, std::move(b));
      return;
    }
  }
  try {
    spares_.emplace_back(tag, std::move(b));
  } catch (...) {  // b is freed with the failed element
  }
}

std::unique_ptr<blob> value_recycler::take(const std::string& tag) noexcept {
  std::lock_guard lock(m_);
  for (auto& [t, spare] : spares_) {
    if (t == tag) return std::move(spare);
  }
  return nullptr;
}

void received_value::operator()(const blob* b) const noexcept {
  std::unique_ptr<blob> owned(const_cast<blob*>(b));  // NOLINT: made mutable, see reception_blob
  if (auto r = recycler.lock()) r->give(tag, std::move(owned));
}

std::shared_ptr<const blob> take_reusable(const task& t, const std::string& name) {
  for (const auto& out : detail::task_access::outputs(t)) {
    for (std::size_t i = 0; i < out->blobs.size() && i < out->values.size(); ++i) {
      const auto& v = out->values[i];
      if (out->blobs[i] != name || v.use_count() != 1 || std::get_deleter<received_value>(v) == nullptr) continue;
      std::shared_ptr<const blob> taken = v;
      out->values.clear();
      out->set = false;
      return taken;
    }
  }
  return nullptr;
}

std::shared_ptr<const blob> reception_blob(const std::shared_ptr<value_recycler>& recycler, const std::string& tag,
                                           std::shared_ptr<const blob> reuse) {
  if (reuse) return reuse;
  auto storage = recycler->take(tag);
  if (!storage) storage = std::make_unique<blob>();
  return std::shared_ptr<const blob>(storage.release(), received_value{recycler, tag});
}

}  // namespace taskgroup::detail::mpi
