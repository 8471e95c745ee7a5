#include <taskgroup/duration_histogram.hpp>

#include <algorithm>
#include <cmath>

namespace taskgroup {

std::uint64_t duration_histogram::count() const noexcept {
  std::uint64_t n = 0;
  for (std::uint64_t c : counts) n += c;
  return n;
}

std::chrono::nanoseconds duration_histogram::quantile_bound(double q) const noexcept {
  const std::uint64_t n = count();
  if (n == 0 || !(q >= 0)) return std::chrono::nanoseconds(0);
  // The rank of the quantile among the counted durations, 1-based.
  const double wanted = std::ceil(std::min(q, 1.0) * static_cast<double>(n));
  const std::uint64_t rank = wanted < 1 ? 1 : static_cast<std::uint64_t>(wanted);
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < bucket_count; ++i) {
    seen += counts[i];
    if (seen >= rank) return upper_bound(i);
  }
  return upper_bound(bucket_count - 1);
}

}  // namespace taskgroup
