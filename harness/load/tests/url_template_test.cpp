// url_template_test.cpp -- parsing the target, substituting {ms}, and what a correct answer to
// each kind of path looks like; --delay parsing.

#include <gtest/gtest.h>

#include "load.hpp"
#include "url_template.hpp"

namespace cm::load {
namespace {

TEST(UrlTemplate, ParsesHostPortAndTemplate) {
  auto t = UrlTemplate::parse("http://127.0.0.1:8080/delay/{ms}");
  EXPECT_EQ(t.host, "127.0.0.1");
  EXPECT_EQ(t.port, 8080);
  EXPECT_TRUE(t.has_ms);
  EXPECT_EQ(t.path(0), "/delay/0");
  EXPECT_EQ(t.path(37), "/delay/37");
  EXPECT_EQ(t.authority(), "127.0.0.1:8080");
}

TEST(UrlTemplate, TemplateMayHaveASuffix) {
  auto t = UrlTemplate::parse("http://localhost:9/a/{ms}/b?x=1");
  EXPECT_EQ(t.path(5), "/a/5/b?x=1");
}

TEST(UrlTemplate, FixedPathAndDefaults) {
  auto t = UrlTemplate::parse("http://example");
  EXPECT_EQ(t.port, 80);
  EXPECT_FALSE(t.has_ms);
  EXPECT_EQ(t.path(99), "/");
}

TEST(UrlTemplate, RejectsWhatItCannotSend) {
  for (const char* bad : {"https://127.0.0.1/", "127.0.0.1:80/", "http://", "http://:80/",
                          "http://h:0/", "http://h:70000/", "http://h:8x/", "http://h/{ms}/{ms}",
                          "http://h/{us}", "http://h/a b", "http://u@h/", "http://h/#f"}) {
    EXPECT_THROW(UrlTemplate::parse(bad), std::invalid_argument) << bad;
  }
}

TEST(Expectation, DelayTemplateChecksAgainstEachRequestsDelay) {
  auto e = default_expectation(UrlTemplate::parse("http://h:1/delay/{ms}"));
  EXPECT_TRUE(e.body_is_delay);
  EXPECT_TRUE(e.min_latency_is_delay);
}

TEST(Expectation, FixedNumbersAreNormalised) {
  auto delay = default_expectation(UrlTemplate::parse("http://h:1/delay/007"));
  EXPECT_EQ(delay.body, "7");
  EXPECT_EQ(delay.min_latency_ms, 7u);
  auto block = default_expectation(UrlTemplate::parse("http://h:1/block/100"));
  EXPECT_EQ(block.body, "100");
  EXPECT_EQ(block.min_latency_ms, 100u);
  auto cpu = default_expectation(UrlTemplate::parse("http://h:1/cpu/50"));
  EXPECT_EQ(cpu.body, "50");
  EXPECT_EQ(cpu.min_latency_ms, 0u);  // µs of CPU: no lower bound in ms
}

TEST(Expectation, PlaintextAndOtherPaths) {
  EXPECT_EQ(default_expectation(UrlTemplate::parse("http://h:1/plaintext")).body, "Hello, World!");
  auto other = default_expectation(UrlTemplate::parse("http://h:1/echo"));
  EXPECT_FALSE(other.body);
  EXPECT_FALSE(other.body_is_delay);
  EXPECT_EQ(other.min_latency_ms, 0u);
  EXPECT_FALSE(default_expectation(UrlTemplate::parse("http://h:1/delay/x")).body);
}

TEST(DelayRange, FixedAndRange) {
  auto fixed = DelayRange::parse("10");
  EXPECT_EQ(fixed.min_ms, 10u);
  EXPECT_EQ(fixed.max_ms, 10u);
  auto range = DelayRange::parse("10:90");
  EXPECT_EQ(range.min_ms, 10u);
  EXPECT_EQ(range.max_ms, 90u);
  EXPECT_DOUBLE_EQ(range.mean(), 50.0);
  for (const char* bad : {"", "abc", "-1", "10:", ":10", "90:10", "60001", "1.5", "10:20:30"})
    EXPECT_THROW(DelayRange::parse(bad), std::invalid_argument) << bad;
}

}  // namespace
}  // namespace cm::load
