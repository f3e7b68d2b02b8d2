// histogram_test.cpp -- the log-linear histogram: exact where it claims to be, within 1/128
// elsewhere, and percentiles of known data.

#include <gtest/gtest.h>

#include <random>
#include <stdexcept>

#include "histogram.hpp"

namespace cm::load {
namespace {

TEST(Histogram, EmptyReportsZeros) {
  Histogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.percentile(0.5), 0u);
  EXPECT_EQ(h.max(), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.mean(), 0.0);
}

TEST(Histogram, ExactBelow256Microseconds) {
  Histogram h;
  for (std::uint64_t v = 0; v < 256; ++v)
    h.record(v);
  EXPECT_EQ(h.percentile(0.5), 127u);  // the 128th of 0..255
  EXPECT_EQ(h.percentile(0.0), 0u);
  EXPECT_EQ(h.percentile(1.0), 255u);
  EXPECT_EQ(h.percentile(0.9), 230u);  // ceil(0.9 * 256) = 231st value
  EXPECT_DOUBLE_EQ(h.mean(), 127.5);
}

TEST(Histogram, PercentilesOfOneToTenThousand) {
  Histogram h;
  for (std::uint64_t v = 1; v <= 10'000; ++v)
    h.record(v);
  EXPECT_EQ(h.count(), 10'000u);
  EXPECT_EQ(h.min(), 1u);
  EXPECT_EQ(h.max(), 10'000u);  // exact, not a bucket bound
  EXPECT_DOUBLE_EQ(h.mean(), 5000.5);
  for (auto [q, exact] : {std::pair{0.5, 5000.0}, {0.9, 9000.0}, {0.99, 9900.0}, {0.999, 9990.0}}) {
    double got = static_cast<double>(h.percentile(q));
    EXPECT_GE(got, exact) << "q=" << q;  // the highest value of the bucket holding it
    EXPECT_LE(got, exact * (1 + 1.0 / 128)) << "q=" << q;
  }
  EXPECT_EQ(h.percentile(1.0), 10'000u);
}

TEST(Histogram, EveryValueWithinOneBucketWidth) {
  std::mt19937_64 rng(42);
  std::size_t previous_bucket = 0;
  for (std::uint64_t v = 0; v < 100'000; ++v) {
    std::size_t b = Histogram::bucket_of(v);
    ASSERT_GE(b, previous_bucket) << v;  // monotone
    previous_bucket = b;
    std::uint64_t high = Histogram::highest_in_bucket(b);
    ASSERT_GE(high, v);
    ASSERT_LE(static_cast<double>(high - v), static_cast<double>(v) / 128.0) << v;
  }
  for (int i = 0; i < 10'000; ++i) {
    std::uint64_t v = rng() >> 26;  // up to 2^38 µs
    std::uint64_t high = Histogram::highest_in_bucket(Histogram::bucket_of(v));
    ASSERT_GE(high, v);
    ASSERT_LE(static_cast<double>(high - v), static_cast<double>(v) / 128.0) << v;
  }
}

TEST(Histogram, SkewedDataHasTheRightTail) {
  Histogram h;
  for (int i = 0; i < 990; ++i)
    h.record(10'000);  // 10 ms
  for (int i = 0; i < 10; ++i)
    h.record(500'000);  // 500 ms: the top 1%
  EXPECT_LE(h.percentile(0.99), 10'000u * 129 / 128);
  EXPECT_GE(h.percentile(0.99), 10'000u);
  EXPECT_GE(h.percentile(0.991), 500'000u);
  EXPECT_EQ(h.max(), 500'000u);
}

TEST(Histogram, MergeEqualsRecordingEverything) {
  Histogram a, b, all;
  for (std::uint64_t v = 0; v < 5000; v += 3) {
    (v % 2 ? a : b).record(v * 7);
    all.record(v * 7);
  }
  a.merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.min(), all.min());
  EXPECT_EQ(a.max(), all.max());
  EXPECT_DOUBLE_EQ(a.mean(), all.mean());
  for (double q : {0.1, 0.5, 0.9, 0.99, 0.999})
    EXPECT_EQ(a.percentile(q), all.percentile(q));
}

// What cm-load's JSON keeps of a histogram (buckets, min, max, sum) is all of it: read back and
// merged, two halves of a run's answers give the histogram of the whole, count for count.
TEST(Histogram, BucketsReadBackAndMergedAreTheWholeCountForCount) {
  std::mt19937 rng(7);
  std::lognormal_distribution<double> latency(7.0, 1.5);
  Histogram whole, a, b;
  for (int i = 0; i < 200'000; ++i) {
    const auto v = static_cast<std::uint64_t>(latency(rng));
    whole.record(v);
    (i % 3 ? a : b).record(v);
  }
  Histogram merged = Histogram::from_buckets(a.buckets(), a.min(), a.max(), a.sum());
  merged.merge(Histogram::from_buckets(b.buckets(), b.min(), b.max(), b.sum()));
  EXPECT_EQ(merged.buckets(), whole.buckets());
  EXPECT_EQ(merged.count(), whole.count());
  EXPECT_EQ(merged.min(), whole.min());
  EXPECT_EQ(merged.max(), whole.max());
  EXPECT_DOUBLE_EQ(merged.mean(), whole.mean());
  for (double q : {0.5, 0.9, 0.99, 0.999})
    EXPECT_EQ(merged.percentile(q), whole.percentile(q)) << q;
  EXPECT_THROW(Histogram::from_buckets({{Histogram::bucket_count(), 1}}, 0, 0, 0),
               std::invalid_argument);
}

TEST(Histogram, HugeValuesAreClampedNotLost) {
  Histogram h;
  h.record(1ull << 50);
  EXPECT_EQ(h.count(), 1u);
  EXPECT_EQ(h.max(), 1ull << 50);
  EXPECT_EQ(h.percentile(0.5), 1ull << 50);  // clamped to the exact max
}

}  // namespace
}  // namespace cm::load
