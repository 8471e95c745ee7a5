// taskgroup: a histogram of durations in fixed log-scale buckets, the one
// shape of every latency a session counts (session_metrics).
//
// Threading: a value type (reentrant).
#pragma once

#include <taskgroup/export.hpp>

#include <array>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace taskgroup {

/// Durations counted in 28 buckets whose upper bounds double from 1
/// microsecond: bucket i holds the durations d with
/// `upper_bound(i-1) < d <= upper_bound(i)`, `upper_bound(i)` being 2^i
/// microseconds for i < 27 (1 us, 2 us, 4 us, ..., 2^26 us = 67.1 s), and
/// the last bucket everything longer (+Inf). The bounds are the same for
/// every histogram of every session, so histograms add bucket by bucket.
struct TASKGROUP_API duration_histogram {
  static constexpr std::size_t bucket_count = 28;

  /// The counts per bucket (not cumulative).
  std::array<std::uint64_t, bucket_count> counts{};
  /// The sum of the durations counted.
  std::chrono::nanoseconds sum{0};

  /// The inclusive upper bound of bucket `i`: 2^i microseconds for
  /// `i < bucket_count - 1`; `nanoseconds::max()` for the last (+Inf).
  [[nodiscard]] static constexpr std::chrono::nanoseconds upper_bound(std::size_t i) noexcept {
    if (i + 1 >= bucket_count) return std::chrono::nanoseconds::max();
    return std::chrono::nanoseconds(std::int64_t{1000} << i);
  }
  /// The bucket of `d` (a negative duration counts as 0).
  [[nodiscard]] static constexpr std::size_t bucket_of(std::chrono::nanoseconds d) noexcept {
    if (d.count() <= 1000) return 0;
    if (d > upper_bound(bucket_count - 2)) return bucket_count - 1;
    // d <= 2^i us  <=>  ceil(d / 1 us) <= 2^i.
    const auto us = static_cast<std::uint64_t>((d.count() + 999) / 1000);
    const auto i = static_cast<std::size_t>(std::bit_width(us - 1));
    return i < bucket_count ? i : bucket_count - 1;
  }

  /// Counts `d` (a negative duration as 0).
  constexpr void add(std::chrono::nanoseconds d) noexcept {
    if (d.count() < 0) d = std::chrono::nanoseconds(0);
    ++counts[bucket_of(d)];
    sum += d;
  }
  /// Adds every count of `other`.
  constexpr duration_histogram& operator+=(const duration_histogram& other) noexcept {
    for (std::size_t i = 0; i < bucket_count; ++i) counts[i] += other.counts[i];
    sum += other.sum;
    return *this;
  }
  /// The number of durations counted (the sum of the buckets).
  [[nodiscard]] std::uint64_t count() const noexcept;
  /// The smallest bucket bound below which at least `q` (in [0, 1]) of the
  /// durations lie (`upper_bound` of that bucket): an upper estimate of the
  /// quantile, within a factor of 2; zero when nothing was counted.
  [[nodiscard]] std::chrono::nanoseconds quantile_bound(double q) const noexcept;

  friend bool operator==(const duration_histogram&, const duration_histogram&) = default;
};

}  // namespace taskgroup
