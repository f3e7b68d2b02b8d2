// histogram.cpp -- the log-linear bucket arithmetic.
//
// Values below 2 * kSubBuckets (256) have one bucket each. A larger value v, whose highest set bit
// is m (2^m <= v < 2^(m+1), m >= 8), falls in one of kSubBuckets buckets of width 2^(m-7) that
// split [2^m, 2^(m+1)): its top 8 bits (v >> (m - 7), in [128, 256)) pick the bucket.

#include "histogram.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>

namespace cm::load {
namespace {

constexpr unsigned kSubBucketBits = 7;
constexpr std::uint64_t kSubBuckets = 1u << kSubBucketBits;  // 128 per power of two
constexpr std::uint64_t kExactBelow = 2 * kSubBuckets;       // 0..255 are exact
constexpr unsigned kMaxBit = 40;                             // 2^41 µs is about 25 days
constexpr std::size_t kBuckets = kExactBelow + (kMaxBit - kSubBucketBits) * kSubBuckets;

}  // namespace

Histogram::Histogram() : counts_(kBuckets, 0) {}

std::size_t Histogram::bucket_of(std::uint64_t v) noexcept {
  if (v < kExactBelow) return static_cast<std::size_t>(v);
  unsigned m = static_cast<unsigned>(std::bit_width(v)) - 1;  // 2^m <= v
  if (m > kMaxBit) return kBuckets - 1;
  unsigned shift = m - kSubBucketBits;
  std::uint64_t sub = (v >> shift) - kSubBuckets;  // 0..127
  return static_cast<std::size_t>(kExactBelow + (m - kSubBucketBits - 1) * kSubBuckets + sub);
}

std::uint64_t Histogram::highest_in_bucket(std::size_t b) noexcept {
  if (b < kExactBelow) return b;
  std::size_t above = b - kExactBelow;
  unsigned m = static_cast<unsigned>(above / kSubBuckets) + kSubBucketBits + 1;
  std::uint64_t sub = above % kSubBuckets + kSubBuckets;
  unsigned shift = m - kSubBucketBits;
  return ((sub + 1) << shift) - 1;
}

void Histogram::record(std::uint64_t v) noexcept {
  ++counts_[bucket_of(v)];
  ++count_;
  min_ = std::min(min_, v);
  max_ = std::max(max_, v);
  sum_ += static_cast<long double>(v);
}

void Histogram::merge(const Histogram& other) noexcept {
  for (std::size_t i = 0; i < kBuckets; ++i)
    counts_[i] += other.counts_[i];
  count_ += other.count_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  sum_ += other.sum_;
}

std::vector<std::pair<std::size_t, std::uint64_t>> Histogram::buckets() const {
  std::vector<std::pair<std::size_t, std::uint64_t>> out;
  for (std::size_t b = 0; b < kBuckets; ++b)
    if (counts_[b]) out.emplace_back(b, counts_[b]);
  return out;
}

std::size_t Histogram::bucket_count() noexcept { return kBuckets; }

Histogram Histogram::from_buckets(const std::vector<std::pair<std::size_t, std::uint64_t>>& buckets,
                                  std::uint64_t min, std::uint64_t max, long double sum) {
  Histogram h;
  for (const auto& [b, n] : buckets) {
    if (b >= kBuckets) throw std::invalid_argument("a histogram bucket this layout does not have");
    h.counts_[b] += n;
    h.count_ += n;
  }
  if (h.count_ == 0) return h;
  h.min_ = min;
  h.max_ = max;
  h.sum_ = sum;
  return h;
}

double Histogram::mean() const noexcept {
  return count_ ? static_cast<double>(sum_ / static_cast<long double>(count_)) : 0.0;
}

std::uint64_t Histogram::percentile(double q) const noexcept {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  // The rank of the value asked for, 1-based: the p50 of 1..100 is the 50th value.
  auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(count_)));
  rank = std::max<std::uint64_t>(rank, 1);
  std::uint64_t seen = 0;
  for (std::size_t b = 0; b < kBuckets; ++b) {
    seen += counts_[b];
    if (seen >= rank) return std::clamp(highest_in_bucket(b), min(), max_);
  }
  return max_;
}

}  // namespace cm::load
