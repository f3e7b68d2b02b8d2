#pragma once
/// \file histogram.hpp
/// A log-linear histogram of microsecond values: exact below 256 µs, then 128 equal sub-buckets per
/// power of two, so any recorded value is known within 1/128 (< 0.8%) of itself. Fixed size, no
/// allocation after construction, merged by adding counts: one per client thread, summed at the
/// end.

#include <cstdint>
#include <utility>
#include <vector>

namespace cm::load {

/// Counts of microsecond values; percentiles within 1/128 of the true value, exact min/max/mean.
class Histogram {
 public:
  Histogram();

  /// Counts one value (µs). Values beyond about 2^40 µs (12 days) land in the last bucket.
  void record(std::uint64_t value_us) noexcept;
  /// Adds every count of `other` to this one.
  void merge(const Histogram& other) noexcept;

  /// Values recorded.
  std::uint64_t count() const noexcept { return count_; }
  /// Smallest value recorded (0 when empty).
  std::uint64_t min() const noexcept { return count_ ? min_ : 0; }
  /// Largest value recorded, exact (0 when empty).
  std::uint64_t max() const noexcept { return max_; }
  /// Arithmetic mean of the values recorded, exact (0 when empty).
  double mean() const noexcept;
  /// The value at quantile `q` in [0, 1]: the smallest bucket holding at least q of the values,
  /// reported as the highest value that bucket can hold (clamped to max()). 0 when empty.
  std::uint64_t percentile(double q) const noexcept;

  /// The buckets that hold a value, as (bucket, count) in bucket order: with min(), max() and
  /// sum(), all a histogram is, and what cm-load's JSON keeps so that runs can be merged.
  std::vector<std::pair<std::size_t, std::uint64_t>> buckets() const;
  /// The sum of the values recorded (exact).
  long double sum() const noexcept { return sum_; }
  /// The histogram that buckets(), min(), max() and sum() describe. Throws std::invalid_argument
  /// for a bucket this layout does not have.
  static Histogram from_buckets(const std::vector<std::pair<std::size_t, std::uint64_t>>& buckets,
                                std::uint64_t min, std::uint64_t max, long double sum);
  /// Buckets of this layout (a JSON of another layout is refused by its size).
  static std::size_t bucket_count() noexcept;

  /// The bucket index of a value, and the highest value of a bucket (exposed for the tests).
  static std::size_t bucket_of(std::uint64_t value_us) noexcept;
  static std::uint64_t highest_in_bucket(std::size_t bucket) noexcept;

 private:
  std::vector<std::uint64_t> counts_;
  std::uint64_t count_ = 0;
  std::uint64_t min_ = UINT64_MAX;
  std::uint64_t max_ = 0;
  long double sum_ = 0;  ///< exact for any realistic run (2^64 µs of latency sum)
};

}  // namespace cm::load
