// Tests of the seed's SimbaConfig (src/core/config.*) and of MonotonicClock
// (src/core/time.*).
#include "core/config.h"

#include <gtest/gtest.h>

#include <chrono>
#include <clocale>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "core/time.h"

namespace simba {
namespace {

using std::chrono::nanoseconds;

constexpr const char* kDurationKeys[] = {"session.lease-duration", "session.renew-interval",
                                         "session.margin", "session.retry-jitter",
                                         "session.min-backoff"};

bool one_line(const std::string& s) {
  return s.find('\n') == std::string::npos && s.find('\r') == std::string::npos;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// ---------------------------------------------------------------------------
// Defaults and derived values

TEST(ConfigDefaults, SeedDefaults) {
  Config c;
  EXPECT_EQ(c.lease_duration, ms(15000));
  EXPECT_EQ(c.renew_interval(), ms(5000));
  EXPECT_EQ(c.retry_jitter(), ms(2500));
  EXPECT_DOUBLE_EQ(c.drift, 0.01);
  EXPECT_EQ(c.margin, ms(50));
  EXPECT_EQ(c.min_backoff, ms(100));
  EXPECT_FALSE(c.renew_interval_set.has_value());
  EXPECT_FALSE(c.retry_jitter_set.has_value());
  EXPECT_EQ(c.executor, ExecutorKind::kPool);
  EXPECT_EQ(c.callback_threads, 2);
  EXPECT_EQ(c.loop_mode, LoopMode::kThread);
  EXPECT_EQ(c.client_name, "");
  EXPECT_EQ(c.validate(), "");
}

TEST(ConfigDefaults, GetDurationReadsEveryDurationKey) {
  Config c;
  EXPECT_EQ(c.get_duration("session.lease-duration"), ms(15000));
  EXPECT_EQ(c.get_duration("session.renew-interval"), ms(5000));
  EXPECT_EQ(c.get_duration("session.margin"), ms(50));
  EXPECT_EQ(c.get_duration("session.retry-jitter"), ms(2500));
  EXPECT_EQ(c.get_duration("session.min-backoff"), ms(100));
}

TEST(ConfigDefaults, GetDurationRejectsOtherKeys) {
  Config c;
  for (const char* key : {"session.drift", "callback.threads", "callback.executor", "loop.mode",
                          "client.name", "", "session.lease-duration ", "SESSION.LEASE-DURATION",
                          "lease-duration", "session.leaseDuration"}) {
    EXPECT_FALSE(c.get_duration(key).has_value()) << key;
  }
}

TEST(ConfigDefaults, GetNumber) {
  Config c;
  EXPECT_EQ(c.get_number("session.drift"), 0.01);
  EXPECT_EQ(c.get_number("callback.threads"), 2.0);
  for (const char* key : {"session.lease-duration", "session.renew-interval", "session.margin",
                          "session.retry-jitter", "session.min-backoff", "callback.executor",
                          "loop.mode", "client.name", "", "session.drift "}) {
    EXPECT_FALSE(c.get_number(key).has_value()) << key;
  }
  ASSERT_EQ(c.set("callback.threads", "17"), "");
  ASSERT_EQ(c.set("session.drift", "0.125"), "");
  EXPECT_EQ(c.get_number("callback.threads"), 17.0);
  EXPECT_EQ(c.get_number("session.drift"), 0.125);
}

TEST(ConfigDerived, RenewIntervalFollowsLeaseDurationWhileUnset) {
  Config c;
  ASSERT_EQ(c.set("session.lease-duration", "30s"), "");
  EXPECT_EQ(c.renew_interval(), ms(10000));
  EXPECT_EQ(c.retry_jitter(), ms(5000));
  EXPECT_EQ(c.get_duration("session.renew-interval"), ms(10000));
  EXPECT_EQ(c.get_duration("session.retry-jitter"), ms(5000));
  EXPECT_FALSE(c.renew_interval_set.has_value());

  ASSERT_EQ(c.set("session.lease-duration", "3s"), "");
  EXPECT_EQ(c.renew_interval(), ms(1000));
  EXPECT_EQ(c.retry_jitter(), ms(500));
}

TEST(ConfigDerived, DerivedValuesKeepNanosecondPrecision) {
  Config c;
  ASSERT_EQ(c.set("session.lease-duration", "10s"), "");
  EXPECT_EQ(c.renew_interval(), nanoseconds(3'333'333'333));
  EXPECT_EQ(c.retry_jitter(), nanoseconds(1'666'666'666));
  ASSERT_EQ(c.set_duration("session.lease-duration", nanoseconds(7)), "");
  EXPECT_EQ(c.renew_interval(), nanoseconds(2));
  EXPECT_EQ(c.retry_jitter(), nanoseconds(1));
}

TEST(ConfigDerived, ExplicitRenewIntervalNoLongerFollowsLease) {
  Config c;
  ASSERT_EQ(c.set("session.renew-interval", "4s"), "");
  EXPECT_TRUE(c.renew_interval_set.has_value());
  EXPECT_EQ(c.renew_interval(), ms(4000));
  EXPECT_EQ(c.retry_jitter(), ms(2000));  // jitter follows the explicit renew interval
  ASSERT_EQ(c.set("session.lease-duration", "60s"), "");
  EXPECT_EQ(c.renew_interval(), ms(4000));
  EXPECT_EQ(c.retry_jitter(), ms(2000));
}

TEST(ConfigDerived, RetryJitterFollowsRenewIntervalWhileUnset) {
  Config c;
  ASSERT_EQ(c.set("session.renew-interval", "3s"), "");
  EXPECT_EQ(c.retry_jitter(), ms(1500));
  ASSERT_EQ(c.set("session.renew-interval", "1001ms"), "");
  EXPECT_EQ(c.retry_jitter(), nanoseconds(500'500'000));
}

TEST(ConfigDerived, ExplicitRetryJitterStays) {
  Config c;
  ASSERT_EQ(c.set("session.retry-jitter", "700ms"), "");
  EXPECT_EQ(c.retry_jitter(), ms(700));
  ASSERT_EQ(c.set("session.renew-interval", "3s"), "");
  ASSERT_EQ(c.set("session.lease-duration", "1m"), "");
  EXPECT_EQ(c.retry_jitter(), ms(700));
  EXPECT_EQ(c.get_duration("session.retry-jitter"), ms(700));
}

TEST(ConfigDerived, RetryJitterZeroIsAValue) {
  Config c;
  ASSERT_EQ(c.set("session.retry-jitter", "0"), "");
  EXPECT_EQ(c.retry_jitter(), Duration(0));
  EXPECT_TRUE(c.retry_jitter_set.has_value());
  EXPECT_EQ(c.validate(), "");
}

// ---------------------------------------------------------------------------
// parse_duration

TEST(ParseDuration, AcceptedForms) {
  EXPECT_EQ(parse_duration("250ms"), ms(250));
  EXPECT_EQ(parse_duration("15s"), ms(15000));
  EXPECT_EQ(parse_duration("2m"), ms(120000));
  EXPECT_EQ(parse_duration("250"), ms(250));
  EXPECT_EQ(parse_duration("0"), ms(0));
  EXPECT_EQ(parse_duration("0ms"), ms(0));
  EXPECT_EQ(parse_duration("0s"), ms(0));
  EXPECT_EQ(parse_duration("0m"), ms(0));
  EXPECT_EQ(parse_duration("1"), ms(1));
  EXPECT_EQ(parse_duration("1s"), ms(1000));
  EXPECT_EQ(parse_duration("1m"), ms(60000));
  EXPECT_EQ(parse_duration("007s"), ms(7000));
  EXPECT_EQ(parse_duration("000000000000000000000000000001ms"), ms(1));
  EXPECT_EQ(parse_duration("90m"), ms(5'400'000));
}

TEST(ParseDuration, UpperBound) {
  const Duration max = ms(1'000'000'000'000);
  EXPECT_EQ(parse_duration("1000000000000"), max);
  EXPECT_EQ(parse_duration("1000000000000ms"), max);
  EXPECT_EQ(parse_duration("1000000000s"), max);
  EXPECT_EQ(parse_duration("16666666m"), ms(999'999'960'000));
  EXPECT_FALSE(parse_duration("1000000000001"));
  EXPECT_FALSE(parse_duration("1000000000001ms"));
  EXPECT_FALSE(parse_duration("1000000001s"));
  EXPECT_FALSE(parse_duration("16666667m"));
  EXPECT_FALSE(parse_duration("9223372036854775807"));
  EXPECT_FALSE(parse_duration("9223372036854775808ms"));
  EXPECT_FALSE(parse_duration("18446744073709551617s"));
  EXPECT_FALSE(parse_duration("99999999999999999999999999999999999999m"));
}

TEST(ParseDuration, Malformed) {
  const std::vector<std::string> bad = {"",     "ms",  "s",    "m",     " 5s",   "5s ",
                                        "5 s",  "\t5", "5\n",  "+5",    "+5s",   "-5",
                                        "-5s",  "-0",  "1.5s", "1.0",   ".5s",   "5.",
                                        "1,5s", "5S",  "5MS",  "5Ms",   "5M",    "5h",
                                        "5d",   "5us", "5ns",  "5sec",  "5min",  "5ms5",
                                        "5mss", "5sm", "5ss",  "5mm",   "0x10",  "1e3",
                                        "5m s", "s5",  "ms5",  "5_000", "5'000", "\xEF\xBC\x95s",
                                        "inf",  "nan", "five", "PT5S",  "5s5s"};
  for (const std::string& s : bad) EXPECT_FALSE(parse_duration(s).has_value()) << '"' << s << '"';
  EXPECT_FALSE(parse_duration(std::string_view("5\0s", 3)));
  EXPECT_FALSE(parse_duration(std::string_view("5s\0", 3)));
  EXPECT_FALSE(parse_duration(std::string_view("\0", 1)));
}

TEST(ParseDuration, UsesOnlyTheViewNotTheBuffer) {
  const char buf[] = "15sXYZ";
  EXPECT_EQ(parse_duration(std::string_view(buf, 3)), ms(15000));
  EXPECT_EQ(parse_duration(std::string_view(buf, 2)), ms(15));
}

// ---------------------------------------------------------------------------
// set() of duration keys

TEST(ConfigSet, EveryDurationKey) {
  Config c;
  ASSERT_EQ(c.set("session.lease-duration", "20s"), "");
  ASSERT_EQ(c.set("session.renew-interval", "6s"), "");
  ASSERT_EQ(c.set("session.margin", "75ms"), "");
  ASSERT_EQ(c.set("session.retry-jitter", "1s"), "");
  ASSERT_EQ(c.set("session.min-backoff", "250"), "");
  EXPECT_EQ(c.lease_duration, ms(20000));
  EXPECT_EQ(c.renew_interval_set, ms(6000));
  EXPECT_EQ(c.margin, ms(75));
  EXPECT_EQ(c.retry_jitter_set, ms(1000));
  EXPECT_EQ(c.min_backoff, ms(250));
  EXPECT_EQ(c.get_duration("session.lease-duration"), ms(20000));
  EXPECT_EQ(c.get_duration("session.renew-interval"), ms(6000));
  EXPECT_EQ(c.get_duration("session.margin"), ms(75));
  EXPECT_EQ(c.get_duration("session.retry-jitter"), ms(1000));
  EXPECT_EQ(c.get_duration("session.min-backoff"), ms(250));
  EXPECT_EQ(c.validate(), "");
}

TEST(ConfigSet, MalformedDurationIsRejectedAndLeavesValue) {
  for (const char* key : kDurationKeys) {
    for (const char* value :
         {"", "abc", "-1s", "1.5s", " 1s", "1s ", "1h", "+1", "1000000000001"}) {
      Config c;
      const auto before = c.get_duration(key);
      const bool was_set_renew = c.renew_interval_set.has_value();
      std::string err = c.set(key, value);
      EXPECT_FALSE(err.empty()) << key << "=" << value;
      EXPECT_TRUE(contains(err, key)) << err;
      EXPECT_TRUE(contains(err, std::string("\"") + value + "\"")) << err;
      EXPECT_TRUE(contains(err, "ms")) << err;  // says what is accepted
      EXPECT_TRUE(one_line(err)) << err;
      EXPECT_EQ(c.get_duration(key), before) << key;
      EXPECT_EQ(c.renew_interval_set.has_value(), was_set_renew);
      EXPECT_FALSE(c.retry_jitter_set.has_value());
    }
  }
}

TEST(ConfigSet, ZeroDurationIsSettableButValidateJudgesIt) {
  Config c;
  EXPECT_EQ(c.set("session.lease-duration", "0"), "");
  EXPECT_EQ(c.lease_duration, Duration(0));
  EXPECT_FALSE(c.validate().empty());
}

TEST(ConfigSet, ValueWithControlCharactersIsQuotedOnOneLine) {
  Config c;
  std::string err = c.set("session.margin", "5\nms");
  EXPECT_TRUE(one_line(err)) << err;
  EXPECT_TRUE(contains(err, "\\x0A")) << err;
  err = c.set("session.margin", std::string_view("5\0", 2));
  EXPECT_TRUE(contains(err, "\\x00")) << err;
  err = c.set("session.margin", std::string(1000, '9'));
  EXPECT_TRUE(one_line(err));
  EXPECT_LT(err.size(), 600u) << "a long value is cut in the message";
}

// ---------------------------------------------------------------------------
// set_duration

TEST(ConfigSetDuration, EveryDurationKey) {
  Config c;
  ASSERT_EQ(c.set_duration("session.lease-duration", ms(12000)), "");
  ASSERT_EQ(c.set_duration("session.renew-interval", ms(3000)), "");
  ASSERT_EQ(c.set_duration("session.margin", ms(0)), "");
  ASSERT_EQ(c.set_duration("session.retry-jitter", ms(10)), "");
  ASSERT_EQ(c.set_duration("session.min-backoff", nanoseconds(1)), "");
  EXPECT_EQ(c.lease_duration, ms(12000));
  EXPECT_EQ(c.renew_interval(), ms(3000));
  EXPECT_EQ(c.margin, Duration(0));
  EXPECT_EQ(c.retry_jitter(), ms(10));
  EXPECT_EQ(c.min_backoff, nanoseconds(1));
  EXPECT_EQ(c.validate(), "");
}

TEST(ConfigSetDuration, NegativeIsRejected) {
  for (const char* key : kDurationKeys) {
    Config c;
    const auto before = c.get_duration(key);
    for (Duration d : {nanoseconds(-1), ms(-1), ms(-15000), Duration::min()}) {
      std::string err = c.set_duration(key, d);
      EXPECT_FALSE(err.empty()) << key;
      EXPECT_TRUE(contains(err, key)) << err;
      EXPECT_TRUE(contains(err, "negative")) << err;
      EXPECT_TRUE(one_line(err));
    }
    EXPECT_EQ(c.get_duration(key), before);
    EXPECT_FALSE(c.renew_interval_set.has_value());
    EXPECT_FALSE(c.retry_jitter_set.has_value());
  }
}

TEST(ConfigSetDuration, ZeroAndUpperBound) {
  for (const char* key : kDurationKeys) {
    Config c;
    EXPECT_EQ(c.set_duration(key, Duration(0)), "") << key;
    EXPECT_EQ(c.get_duration(key), Duration(0));
    EXPECT_EQ(c.set_duration(key, ms(1'000'000'000'000)), "") << key;
    EXPECT_EQ(c.get_duration(key), ms(1'000'000'000'000));
    EXPECT_FALSE(c.set_duration(key, ms(1'000'000'000'000) + nanoseconds(1)).empty()) << key;
    EXPECT_FALSE(c.set_duration(key, Duration::max()).empty()) << key;
    EXPECT_EQ(c.get_duration(key), ms(1'000'000'000'000));
  }
}

TEST(ConfigSetDuration, OnlyDurationKeys) {
  Config c;
  for (const char* key : {"session.drift", "callback.threads", "callback.executor", "loop.mode",
                          "client.name", "", "session.lease_duration", "nope"}) {
    std::string err = c.set_duration(key, ms(10));
    EXPECT_FALSE(err.empty()) << key;
    EXPECT_TRUE(contains(err, "duration")) << err;
    EXPECT_TRUE(one_line(err));
  }
  EXPECT_EQ(c.drift, 0.01);
  EXPECT_EQ(c.callback_threads, 2);
}

// ---------------------------------------------------------------------------
// session.drift

TEST(ConfigDrift, AcceptedValues) {
  struct Case {
    const char* text;
    double value;
  };
  for (Case k : std::vector<Case>{{"0", 0.0},
                                  {"0.0", 0.0},
                                  {"0.01", 0.01},
                                  {"0.1", 0.1},
                                  {"0.25", 0.25},
                                  {"0.4999", 0.4999},
                                  {"0.49999999999999994", 0.49999999999999994},
                                  {".25", 0.25},
                                  {"1e-2", 0.01},
                                  {"1E-2", 0.01},
                                  {"2.5e-1", 0.25},
                                  {"000.3", 0.3},
                                  {"0.000001", 0.000001}}) {
    Config c;
    EXPECT_EQ(c.set("session.drift", k.text), "") << k.text;
    EXPECT_EQ(c.drift, k.value) << k.text;
    EXPECT_EQ(c.get_number("session.drift"), k.value) << k.text;
  }
}

TEST(ConfigDrift, NegativeZeroReadsAsZero) {
  Config c;
  ASSERT_EQ(c.set("session.drift", "-0"), "");
  EXPECT_EQ(c.drift, 0.0);
  EXPECT_FALSE(std::signbit(c.drift));
}

TEST(ConfigDrift, OutOfRangeMessage) {
  Config c;
  EXPECT_EQ(c.set("session.drift", "0.7"), "session.drift: \"0.7\" is out of range [0, 0.5)");
}

TEST(ConfigDrift, Rejected) {
  for (const char* text :
       {"0.5",      "0.50",     "5e-1",    "0.7",    "1",     "2",     "1e300", "-0.1",
        "-0.0001",  "-1",       "-1e-300", "nan",    "NaN",   "-nan",  "inf",   "-inf",
        "Infinity", "infinity", "INF",     "",       " ",     " 0.1",  "0.1 ",  "\t0.1",
        "+0.1",     "0.1x",     "0x0.1",   "0X1p-4", "0,1",   "1e",    "0.1.2", ".",
        "e",        "-",        "1e400",   "1e-400", "0.1\n", "0.01%", "1/100"}) {
    Config c;
    std::string err = c.set("session.drift", text);
    EXPECT_FALSE(err.empty()) << '"' << text << '"';
    EXPECT_TRUE(contains(err, "session.drift")) << err;
    EXPECT_TRUE(contains(err, "[0, 0.5)")) << err;
    EXPECT_TRUE(one_line(err)) << err;
    EXPECT_EQ(c.drift, 0.01) << "unchanged after " << text;
  }
  Config c;
  EXPECT_FALSE(c.set("session.drift", std::string_view("0.1\0", 4)).empty());
  EXPECT_FALSE(c.set("session.drift", std::string_view("\0"
                                                       "0.1",
                                                       4))
                   .empty());
  EXPECT_EQ(c.drift, 0.01);
}

TEST(ConfigDrift, NonFiniteValuesAreCalledSo) {
  for (const char* text : {"nan", "inf", "-inf", "infinity"}) {
    Config c;
    std::string err = c.set("session.drift", text);
    EXPECT_TRUE(contains(err, "not a finite number")) << err;
  }
}

TEST(ConfigDrift, ParseUsesOnlyTheView) {
  const char buf[] = "0.25999";
  Config c;
  ASSERT_EQ(c.set("session.drift", std::string_view(buf, 4)), "");
  EXPECT_EQ(c.drift, 0.25);
}

TEST(ConfigDrift, LocaleIndependent) {
  const char* old = std::setlocale(LC_NUMERIC, nullptr);
  std::string saved = old ? old : "C";
  const char* names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8"};
  bool switched = false;
  for (const char* n : names) {
    if (std::setlocale(LC_NUMERIC, n)) {
      switched = true;
      break;
    }
  }
  if (!switched) GTEST_SKIP() << "no locale with a decimal comma is installed";
  Config c;
  std::string ok = c.set("session.drift", "0.25");
  std::string comma = c.set("session.drift", "0,3");
  std::setlocale(LC_NUMERIC, saved.c_str());
  EXPECT_EQ(ok, "");
  EXPECT_FALSE(comma.empty());
  EXPECT_EQ(c.drift, 0.25);
}

// ---------------------------------------------------------------------------
// callback.threads, callback.executor, loop.mode, client.name

TEST(ConfigThreads, Accepted) {
  for (auto [text, n] :
       std::vector<std::pair<const char*, int>>{{"1", 1},
                                                {"2", 2},
                                                {"8", 8},
                                                {"63", 63},
                                                {"64", 64},
                                                {"01", 1},
                                                {"064", 64},
                                                {"0000000000000000000000000007", 7}}) {
    Config c;
    EXPECT_EQ(c.set("callback.threads", text), "") << text;
    EXPECT_EQ(c.callback_threads, n);
    EXPECT_EQ(c.get_number("callback.threads"), static_cast<double>(n));
  }
}

TEST(ConfigThreads, Rejected) {
  for (const char* text :
       {"0", "00", "65", "100", "-1", "+1", "1.0", "1e1", " 1", "1 ", "", "abc", "4294967297",
        "4294967360", "99999999999999999999", "0x10", "2 ", "sixty"}) {
    Config c;
    std::string err = c.set("callback.threads", text);
    EXPECT_FALSE(err.empty()) << '"' << text << '"';
    EXPECT_TRUE(contains(err, "callback.threads")) << err;
    EXPECT_TRUE(contains(err, "[1, 64]")) << err;
    EXPECT_TRUE(one_line(err));
    EXPECT_EQ(c.callback_threads, 2);
  }
}

TEST(ConfigExecutor, PoolAndDirect) {
  Config c;
  ASSERT_EQ(c.set("callback.executor", "direct"), "");
  EXPECT_EQ(c.executor, ExecutorKind::kDirect);
  ASSERT_EQ(c.set("callback.executor", "pool"), "");
  EXPECT_EQ(c.executor, ExecutorKind::kPool);
  c.executor = ExecutorKind::kHost;
  ASSERT_EQ(c.set("callback.executor", "pool"), "");
  EXPECT_EQ(c.executor, ExecutorKind::kPool);
}

TEST(ConfigExecutor, HostIsNotSettableByText) {
  Config c;
  std::string err = c.set("callback.executor", "host");
  EXPECT_FALSE(err.empty());
  EXPECT_TRUE(contains(err, "callback.executor")) << err;
  EXPECT_TRUE(contains(err, "simba_config_set_executor")) << err;
  EXPECT_EQ(c.executor, ExecutorKind::kPool);
}

TEST(ConfigExecutor, Rejected) {
  for (const char* text :
       {"", "Pool", "POOL", "DIRECT", " pool", "pool ", "threads", "virtual", "loop"}) {
    Config c;
    c.executor = ExecutorKind::kDirect;
    std::string err = c.set("callback.executor", text);
    EXPECT_FALSE(err.empty()) << text;
    EXPECT_TRUE(contains(err, "callback.executor")) << err;
    EXPECT_TRUE(contains(err, "\"pool\"") && contains(err, "\"direct\"")) << err;
    EXPECT_EQ(c.executor, ExecutorKind::kDirect);
  }
}

TEST(ConfigLoopMode, ThreadAndExternal) {
  Config c;
  ASSERT_EQ(c.set("loop.mode", "external"), "");
  EXPECT_EQ(c.loop_mode, LoopMode::kExternal);
  ASSERT_EQ(c.set("loop.mode", "thread"), "");
  EXPECT_EQ(c.loop_mode, LoopMode::kThread);
}

TEST(ConfigLoopMode, Rejected) {
  for (const char* text : {"", "Thread", "EXTERNAL", "ext", "threads", " thread", "host"}) {
    Config c;
    std::string err = c.set("loop.mode", text);
    EXPECT_FALSE(err.empty()) << text;
    EXPECT_TRUE(contains(err, "loop.mode")) << err;
    EXPECT_TRUE(contains(err, "\"thread\"") && contains(err, "\"external\"")) << err;
    EXPECT_EQ(c.loop_mode, LoopMode::kThread);
  }
}

TEST(ConfigClientName, Accepted) {
  Config c;
  ASSERT_EQ(c.set("client.name", "node-1"), "");
  EXPECT_EQ(c.client_name, "node-1");
  ASSERT_EQ(c.set("client.name", "web 3 (eu-west) #2 \"blue\" ~/x\\y"), "");
  EXPECT_EQ(c.client_name, "web 3 (eu-west) #2 \"blue\" ~/x\\y");
  ASSERT_EQ(c.set("client.name", ""), "");
  EXPECT_EQ(c.client_name, "");
  ASSERT_EQ(c.set("client.name", std::string(128, 'x')), "");
  EXPECT_EQ(c.client_name, std::string(128, 'x'));
  std::string all;
  for (int ch = 0x20; ch <= 0x7e; ++ch) all += static_cast<char>(ch);
  ASSERT_EQ(all.size(), 95u);
  ASSERT_EQ(c.set("client.name", all), "");
  EXPECT_EQ(c.client_name, all);
}

TEST(ConfigClientName, Rejected) {
  std::vector<std::string> bad = {std::string(129, 'x'),
                                  std::string(1000, 'y'),
                                  "a\nb",
                                  "\t",
                                  "a\rb",
                                  "caf\xC3\xA9",
                                  "\x7f",
                                  "\x1b[31m",
                                  std::string("a\0b", 3),
                                  "\xff"};
  for (const std::string& v : bad) {
    Config c;
    ASSERT_EQ(c.set("client.name", "keep"), "");
    std::string err = c.set("client.name", v);
    EXPECT_FALSE(err.empty()) << v;
    EXPECT_TRUE(contains(err, "client.name")) << err;
    EXPECT_TRUE(contains(err, "128")) << err;
    EXPECT_TRUE(one_line(err)) << err;
    EXPECT_EQ(c.client_name, "keep");
  }
  Config c;
  EXPECT_TRUE(contains(c.set("client.name", std::string(129, 'x')), "129"));
  EXPECT_TRUE(contains(c.set("client.name", "ab\x01"), "\\x01"));
}

// ---------------------------------------------------------------------------
// Unknown keys

TEST(ConfigKeys, UnknownKeysAreRejected) {
  for (std::string key :
       {std::string(""), std::string("session"), std::string("session."),
        std::string("lease-duration"), std::string("session.Lease-duration"),
        std::string("session.lease_duration"), std::string("session.leaseDuration"),
        std::string("simba.session.lease-duration"), std::string(" session.drift"),
        std::string("session.drift "), std::string("callback.thread"), std::string("client.Name"),
        std::string("loop"), std::string("session.lease-duration\0", 23)}) {
    Config c;
    std::string err = c.set(key, "1");
    EXPECT_FALSE(err.empty()) << key;
    EXPECT_TRUE(contains(err, "unknown key")) << err;
    EXPECT_TRUE(contains(err, "session.lease-duration")) << "lists the known keys: " << err;
    EXPECT_TRUE(one_line(err)) << err;
    EXPECT_EQ(c.lease_duration, ms(15000));
  }
  Config c;
  EXPECT_TRUE(contains(c.set("nope", "1"), "\"nope\""));
  EXPECT_TRUE(contains(c.set(std::string_view("a\0b", 3), "1"), "\\x00"));
  EXPECT_TRUE(one_line(c.set("a\nb", "1")));
}

TEST(ConfigKeys, EveryKnownKeyIsSettable) {
  const std::vector<std::pair<const char*, const char*>> keys = {
      {"session.lease-duration", "20s"}, {"session.renew-interval", "5s"},
      {"session.drift", "0.02"},         {"session.margin", "10ms"},
      {"session.retry-jitter", "1s"},    {"session.min-backoff", "50ms"},
      {"callback.executor", "direct"},   {"callback.threads", "4"},
      {"loop.mode", "external"},         {"client.name", "n1"}};
  Config c;
  for (auto [key, value] : keys) EXPECT_EQ(c.set(key, value), "") << key;
  EXPECT_EQ(c.lease_duration, ms(20000));
  EXPECT_EQ(c.renew_interval(), ms(5000));
  EXPECT_EQ(c.drift, 0.02);
  EXPECT_EQ(c.margin, ms(10));
  EXPECT_EQ(c.retry_jitter(), ms(1000));
  EXPECT_EQ(c.min_backoff, ms(50));
  EXPECT_EQ(c.executor, ExecutorKind::kDirect);
  EXPECT_EQ(c.callback_threads, 4);
  EXPECT_EQ(c.loop_mode, LoopMode::kExternal);
  EXPECT_EQ(c.client_name, "n1");
  EXPECT_EQ(c.validate(), "");
}

// ---------------------------------------------------------------------------
// validate(): rule renew-interval * 2 <= lease-duration

constexpr const char* kRule1 = "renew-interval * 2 <= lease-duration";
constexpr const char* kRule2 = "lease-duration * (1 - drift) - margin > renew-interval";

TEST(ConfigValidate, RenewTwiceEqualToLeaseIsValid) {
  Config c;
  ASSERT_EQ(c.set("session.lease-duration", "10s"), "");
  ASSERT_EQ(c.set("session.renew-interval", "5s"), "");
  EXPECT_EQ(c.validate(), "");
  ASSERT_EQ(c.set_duration("session.lease-duration", nanoseconds(10)), "");
  ASSERT_EQ(c.set_duration("session.renew-interval", nanoseconds(5)), "");
  ASSERT_EQ(c.set("session.margin", "0"), "");
  ASSERT_EQ(c.set("session.drift", "0"), "");
  EXPECT_EQ(c.validate(), "");
}

TEST(ConfigValidate, RenewTwiceAboveLeaseIsInvalid) {
  Config c;
  ASSERT_EQ(c.set("session.lease-duration", "10s"), "");
  ASSERT_EQ(c.set_duration("session.renew-interval", ms(5000) + nanoseconds(1)), "");
  std::string err = c.validate();
  EXPECT_TRUE(contains(err, kRule1)) << err;
  EXPECT_TRUE(contains(err, "5000.000001 ms")) << err;
  EXPECT_TRUE(contains(err, "10000 ms")) << err;
  EXPECT_TRUE(one_line(err));

  ASSERT_EQ(c.set("session.renew-interval", "5001ms"), "");
  err = c.validate();
  EXPECT_TRUE(contains(err, kRule1)) << err;
  EXPECT_TRUE(contains(err, "5001 ms")) << err;
}

TEST(ConfigValidate, RenewIntervalSetAboveDerivedDefault) {
  Config c;
  ASSERT_EQ(c.set("session.renew-interval", "8s"), "");  // lease stays 15 s
  EXPECT_TRUE(contains(c.validate(), kRule1));
  ASSERT_EQ(c.set("session.lease-duration", "16s"), "");  // 8 * 2 == 16, rule 2 holds
  EXPECT_EQ(c.validate(), "");
}

TEST(ConfigValidate, Rule1DoesNotOverflow) {
  Config c;
  c.lease_duration = Duration::max();
  c.renew_interval_set = Duration::max();
  EXPECT_TRUE(contains(c.validate(), kRule1));
  c.renew_interval_set = Duration::max() / 2;
  c.margin = Duration(0);
  EXPECT_EQ(c.validate(), "");
}

// validate(): rule lease-duration * (1 - drift) - margin > renew-interval (strict)

TEST(ConfigValidate, Rule2ExactBoundaryIsInvalidWithZeroDrift) {
  Config c;
  ASSERT_EQ(c.set("session.lease-duration", "1000ms"), "");
  ASSERT_EQ(c.set("session.renew-interval", "500ms"), "");
  ASSERT_EQ(c.set("session.drift", "0"), "");
  ASSERT_EQ(c.set("session.margin", "500ms"), "");  // 1000 - 500 == 500: not >
  std::string err = c.validate();
  EXPECT_TRUE(contains(err, kRule2)) << err;
  EXPECT_FALSE(contains(err, kRule1)) << err;
  EXPECT_TRUE(contains(err, "1000 ms")) << err;
  EXPECT_TRUE(contains(err, "500 ms")) << err;
  EXPECT_TRUE(one_line(err));

  ASSERT_EQ(c.set_duration("session.margin", ms(500) - nanoseconds(1)), "");
  EXPECT_EQ(c.validate(), "");
  ASSERT_EQ(c.set("session.margin", "499ms"), "");
  EXPECT_EQ(c.validate(), "");
}

TEST(ConfigValidate, Rule2ExactBoundaryWithBinaryExactDrift) {
  Config c;
  ASSERT_EQ(c.set("session.lease-duration", "1000ms"), "");
  ASSERT_EQ(c.set("session.renew-interval", "500ms"), "");
  ASSERT_EQ(c.set("session.drift", "0.25"), "");
  ASSERT_EQ(c.set("session.margin", "250ms"), "");  // 1000 * 0.75 - 250 == 500
  EXPECT_TRUE(contains(c.validate(), kRule2)) << c.validate();
  ASSERT_EQ(c.set("session.margin", "249ms"), "");
  EXPECT_EQ(c.validate(), "");
}

TEST(ConfigValidate, Rule2ExactBoundaryWithDefaultDrift) {
  // 15000 * (1 - 0.01) = 14850 ms; 14850 - 9850 = 5000 == renew: invalid.
  Config c;
  ASSERT_EQ(c.set("session.margin", "9850ms"), "");
  std::string err = c.validate();
  EXPECT_TRUE(contains(err, kRule2)) << err;
  EXPECT_TRUE(contains(err, "0.01")) << err;
  EXPECT_TRUE(contains(err, "9850 ms")) << err;
  EXPECT_TRUE(contains(err, "5000 ms")) << err;
  ASSERT_EQ(c.set("session.margin", "9849ms"), "");
  EXPECT_EQ(c.validate(), "");
  ASSERT_EQ(c.set_duration("session.margin", ms(9850) - nanoseconds(1)), "");
  EXPECT_EQ(c.validate(), "");
}

TEST(ConfigValidate, Rule2FailsWhenDriftEatsTheLease) {
  Config c;
  ASSERT_EQ(c.set("session.lease-duration", "10s"), "");
  ASSERT_EQ(c.set("session.renew-interval", "5s"), "");
  ASSERT_EQ(c.set("session.margin", "0"), "");
  ASSERT_EQ(c.set("session.drift", "0.4999"), "");  // 10 s * 0.5001 = 5001 ms > 5000 ms
  EXPECT_EQ(c.validate(), "");
  ASSERT_EQ(c.set("session.margin", "1ms"), "");  // 5000 ms, not > 5000 ms
  EXPECT_TRUE(contains(c.validate(), kRule2));
}

TEST(ConfigValidate, DefaultMarginTooLargeForShortLease) {
  Config c;
  ASSERT_EQ(c.set("session.lease-duration", "100ms"), "");
  ASSERT_EQ(c.set("session.margin", "70ms"), "");
  // 100 * 0.99 - 70 = 29 ms, renew = 33.333333 ms.
  std::string err = c.validate();
  EXPECT_TRUE(contains(err, kRule2)) << err;
  EXPECT_TRUE(contains(err, "33.333333 ms")) << err;
}

// validate(): positivity and ranges

TEST(ConfigValidate, DurationsMustBePositive) {
  {
    Config c;
    ASSERT_EQ(c.set("session.lease-duration", "0"), "");
    std::string err = c.validate();
    EXPECT_TRUE(contains(err, "session.lease-duration")) << err;
    EXPECT_TRUE(contains(err, "> 0")) << err;
  }
  {
    Config c;
    ASSERT_EQ(c.set("session.renew-interval", "0"), "");
    std::string err = c.validate();
    EXPECT_TRUE(contains(err, "session.renew-interval")) << err;
  }
  {
    Config c;  // derived renew interval truncates to 0
    ASSERT_EQ(c.set_duration("session.lease-duration", nanoseconds(2)), "");
    EXPECT_TRUE(contains(c.validate(), "session.renew-interval")) << c.validate();
  }
  {
    Config c;
    ASSERT_EQ(c.set("session.min-backoff", "0"), "");
    EXPECT_TRUE(contains(c.validate(), "session.min-backoff")) << c.validate();
  }
  {
    Config c;
    ASSERT_EQ(c.set("session.margin", "0"), "");
    EXPECT_EQ(c.validate(), "");  // margin may be 0
  }
  {
    Config c;
    ASSERT_EQ(c.set("session.retry-jitter", "0"), "");
    EXPECT_EQ(c.validate(), "");  // jitter may be 0
  }
}

TEST(ConfigValidate, FieldsWrittenDirectlyAreChecked) {
  {
    Config c;
    c.lease_duration = nanoseconds(-1);
    EXPECT_TRUE(contains(c.validate(), "session.lease-duration"));
  }
  {
    Config c;
    c.renew_interval_set = ms(-5);
    EXPECT_TRUE(contains(c.validate(), "session.renew-interval"));
  }
  {
    Config c;
    c.retry_jitter_set = nanoseconds(-1);
    EXPECT_TRUE(contains(c.validate(), "session.retry-jitter"));
  }
  {
    Config c;
    c.margin = nanoseconds(-1);
    EXPECT_TRUE(contains(c.validate(), "session.margin"));
  }
  {
    Config c;
    c.min_backoff = nanoseconds(-1);
    EXPECT_TRUE(contains(c.validate(), "session.min-backoff"));
  }
  for (double d :
       {0.5, 0.7, -0.01, -1e-300, std::numeric_limits<double>::quiet_NaN(),
        std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()}) {
    Config c;
    c.drift = d;
    std::string err = c.validate();
    EXPECT_TRUE(contains(err, "session.drift")) << d;
    EXPECT_TRUE(contains(err, "[0, 0.5)")) << err;
  }
  for (double d : {0.0, 0.4999, std::nextafter(0.5, 0.0)}) {
    Config c;
    c.drift = d;
    c.margin = Duration(0);
    EXPECT_EQ(c.validate(), "") << d;
  }
  for (int n : {0, -1, 65}) {
    Config c;
    c.callback_threads = n;
    EXPECT_TRUE(contains(c.validate(), "callback.threads")) << n;
  }
}

TEST(ConfigValidate, MessagesAreOneLine) {
  Config c;
  c.lease_duration = Duration(0);
  EXPECT_TRUE(one_line(c.validate()));
  EXPECT_FALSE(c.validate().empty());
}

// ---------------------------------------------------------------------------
// Value semantics

TEST(ConfigCopy, CopyIsIndependent) {
  Config a;
  ASSERT_EQ(a.set("session.lease-duration", "30s"), "");
  ASSERT_EQ(a.set("client.name", "alpha"), "");
  Config b = a;
  EXPECT_EQ(b.lease_duration, ms(30000));
  EXPECT_EQ(b.renew_interval(), ms(10000));
  EXPECT_EQ(b.client_name, "alpha");

  ASSERT_EQ(b.set("session.renew-interval", "7s"), "");
  ASSERT_EQ(b.set("client.name", "beta"), "");
  ASSERT_EQ(b.set("session.drift", "0.2"), "");
  EXPECT_EQ(a.renew_interval(), ms(10000));
  EXPECT_FALSE(a.renew_interval_set.has_value());
  EXPECT_EQ(a.client_name, "alpha");
  EXPECT_EQ(a.drift, 0.01);

  ASSERT_EQ(a.set("session.lease-duration", "60s"), "");
  EXPECT_EQ(b.lease_duration, ms(30000));
  EXPECT_EQ(b.renew_interval(), ms(7000));
  EXPECT_EQ(a.renew_interval(), ms(20000));
}

TEST(ConfigCopy, CopyKeepsDerivedValuesDerived) {
  Config a;
  Config b = a;
  ASSERT_EQ(b.set("session.lease-duration", "9s"), "");
  EXPECT_EQ(b.renew_interval(), ms(3000));
  EXPECT_EQ(b.retry_jitter(), ms(1500));
  EXPECT_EQ(a.renew_interval(), ms(5000));
}

TEST(ConfigCopy, AssignmentAndMove) {
  Config a;
  ASSERT_EQ(a.set("callback.executor", "direct"), "");
  ASSERT_EQ(a.set("session.retry-jitter", "123ms"), "");
  Config b;
  b = a;
  EXPECT_EQ(b.executor, ExecutorKind::kDirect);
  EXPECT_EQ(b.retry_jitter(), ms(123));
  ASSERT_EQ(a.set("callback.executor", "pool"), "");
  EXPECT_EQ(b.executor, ExecutorKind::kDirect);
  Config m = std::move(b);
  EXPECT_EQ(m.retry_jitter(), ms(123));
  EXPECT_EQ(m.validate(), "");
}

// ---------------------------------------------------------------------------
// MonotonicClock (src/core/time.cpp) and the time helpers

TEST(MonotonicClock, InstanceIsOneObject) {
  EXPECT_EQ(&MonotonicClock::instance(), &MonotonicClock::instance());
  const Clock& c = MonotonicClock::instance();
  EXPECT_GT(c.now().time_since_epoch().count(), 0);
}

TEST(MonotonicClock, NeverGoesBackAndAdvances) {
  const Clock& c = MonotonicClock::instance();
  TimePoint prev = c.now();
  for (int i = 0; i < 10000; ++i) {
    TimePoint t = c.now();
    ASSERT_GE(t, prev);
    prev = t;
  }
  TimePoint before = c.now();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  Duration slept = c.now() - before;
  EXPECT_GE(slept, ms(20));
  EXPECT_LT(slept, ms(5000));
}

TEST(MonotonicClock, AgreesWithSteadyClock) {
  // libstdc++'s steady_clock is CLOCK_MONOTONIC on Linux.
  auto s1 = std::chrono::steady_clock::now().time_since_epoch();
  auto m = MonotonicClock::instance().now().time_since_epoch();
  auto s2 = std::chrono::steady_clock::now().time_since_epoch();
  EXPECT_GE(m, s1);
  EXPECT_LE(m, s2);
}

TEST(TimeHelpers, Conversions) {
  EXPECT_EQ(ms(1).count(), 1'000'000);
  EXPECT_EQ(to_ms(nanoseconds(1'999'999)), 1);
  EXPECT_EQ(to_ms_ceil(nanoseconds(1'000'001)), 2);
  EXPECT_EQ(to_ms_ceil(nanoseconds(1)), 1);
  EXPECT_EQ(to_ms_ceil(Duration(0)), 0);
  EXPECT_EQ(to_ms_ceil(ms(5)), 5);
}

}  // namespace
}  // namespace simba
