// Tests of the seed's timing formulas (src/core/timing.*): the local deadline,
// the renew period in effect, the keep-alive backoff and the candidates' retry
// delay. Every expectation is in whole nanoseconds.
#include "core/timing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "core/config.h"
#include "core/time.h"

namespace simba {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1'000'000'000;

Duration ns(int64_t n) { return Duration(n); }
TimePoint at(int64_t n) { return TimePoint(Duration(n)); }

Config defaults() { return Config{}; }

// ---------------------------------------------------------------------------
// deadline = sentAt + remaining × (1 − drift) − margin

TEST(LocalDeadline, DefaultConfigIsExact) {
  // 15 s × 0.99 − 50 ms = 14.8 s, to the nanosecond (not one binary rounding
  // error off).
  EXPECT_EQ(local_validity(ms(15000), 0.01, ms(50)), ns(14'800'000'000));
  EXPECT_EQ(local_deadline(at(7 * kS), ms(15000), 0.01, ms(50)), at(7 * kS + 14'800'000'000));
}

TEST(LocalDeadline, ExactForDecimalDrifts) {
  struct Case {
    int64_t remaining_ns;
    double drift;
    int64_t margin_ns;
    int64_t expected_ns;
  };
  const Case cases[] = {
      {6000 * kMs, 0.01, 50 * kMs, 5'890'000'000},
      {10 * kS, 0.1, 0, 9 * kS},
      {1 * kS, 0.3, 0, 700 * kMs},
      {15 * kS, 0.0, 0, 15 * kS},
      {15 * kS, 0.0, 50 * kMs, 14'950'000'000},
      {3 * kS, 0.25, 1 * kMs, 2'249'000'000},
      {123'456'789, 0.001, 0, 123'333'332},  // 123456789 × 0.999 = 123333332.211
      {1'000'000'000'000'000'000, 0.01, 0, 990'000'000'000'000'000},  // 10^12 ms, no overflow
      {7 * kS, 0.49, 0, 3'570'000'000},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(local_validity(ns(c.remaining_ns), c.drift, ns(c.margin_ns)), ns(c.expected_ns))
        << c.remaining_ns << " ns, drift " << c.drift << ", margin " << c.margin_ns;
    EXPECT_EQ(local_deadline(at(5 * kS), ns(c.remaining_ns), c.drift, ns(c.margin_ns)),
              at(5 * kS + c.expected_ns));
  }
}

TEST(LocalDeadline, CountsFromSentAtSoALaterSendOnlyMovesItByTheSameAmount) {
  const TimePoint sent = at(100 * kS);
  const TimePoint d1 = local_deadline(sent, ms(15000), 0.01, ms(50));
  const TimePoint d2 = local_deadline(sent + ms(1234), ms(15000), 0.01, ms(50));
  EXPECT_EQ(d2 - d1, ms(1234));
  // A backend that reports less remaining time (the reply was slow) shortens it.
  EXPECT_LT(local_deadline(sent, ms(14000), 0.01, ms(50)), d1);
}

TEST(LocalDeadline, NeverLongerThanTheGrant) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int64_t> rem(0, 3600 * kS);
  std::uniform_real_distribution<double> dr(0.0, 0.4999);
  std::uniform_int_distribution<int64_t> mar(0, 10 * kS);
  for (int i = 0; i < 20000; ++i) {
    const Duration r = ns(rem(rng));
    const double d = dr(rng);
    const Duration m = ns(mar(rng));
    const Duration v = local_validity(r, d, m);
    EXPECT_LE(v, r - m) << r.count() << " " << d << " " << m.count();
    // Within one nanosecond of the real-valued formula.
    const long double exact = static_cast<long double>(r.count()) * (1.0L - d) - m.count();
    EXPECT_LE(std::abs(static_cast<long double>(v.count()) - exact), 1.0L)
        << r.count() << " " << d << " " << m.count();
  }
}

TEST(LocalDeadline, TooSmallAGrantGivesAValidityAtOrBelowZero) {
  EXPECT_EQ(local_validity(ms(50), 0.0, ms(50)), Duration::zero());
  EXPECT_EQ(local_validity(ms(10), 0.0, ms(50)), ms(-40));
  EXPECT_EQ(local_validity(Duration::zero(), 0.01, ms(50)), ms(-50));
}

// ---------------------------------------------------------------------------
// The renew period in effect

TEST(RenewPeriod, RenewIntervalWhileTwoRenewalsFit) {
  const Config cfg = defaults();  // 15 s lease, renew 5 s, validity 14.8 s
  const RenewPeriod full = renew_period(cfg, ns(14'800'000'000));
  EXPECT_EQ(full.period, ms(5000));
  EXPECT_FALSE(full.shortened);
  // Exactly two renewals fit: still the renew interval.
  const RenewPeriod edge = renew_period(cfg, ms(10000));
  EXPECT_EQ(edge.period, ms(5000));
  EXPECT_FALSE(edge.shortened);
}

TEST(RenewPeriod, AThirdOfTheValidityWhenTwoRenewalsNoLongerFit) {
  const Config cfg = defaults();
  // One nanosecond short of two renewals.
  const RenewPeriod just = renew_period(cfg, ns(10 * kS - 1));
  EXPECT_TRUE(just.shortened);
  EXPECT_EQ(just.period, ns((10 * kS - 1) / 3));
  // A ZooKeeper server capping the session at 6 s: 6 × 0.99 − 0.05 = 5.89 s.
  const Duration zk = local_validity(ms(6000), cfg.drift, cfg.margin);
  const RenewPeriod capped = renew_period(cfg, zk);
  EXPECT_TRUE(capped.shortened);
  EXPECT_EQ(capped.period, ns(5'890'000'000 / 3));
  // Three renewals fit in the validity it grants.
  EXPECT_LE(capped.period * 3, zk);
}

TEST(RenewPeriod, ConfigThatItselfDoesNotFitTwiceIsRespected) {
  // renew × 2 ≤ lease holds (10 s ≤ 10 s) but the local validity of the full
  // lease (9.85 s) does not fit two renewals: the configuration is kept.
  Config cfg;
  cfg.lease_duration = ms(10000);
  cfg.renew_interval_set = ms(5000);
  ASSERT_EQ(cfg.validate(), "");
  const Duration full = local_validity(cfg.lease_duration, cfg.drift, cfg.margin);
  ASSERT_LT(full, ms(10000));
  const RenewPeriod rp = renew_period(cfg, full);
  EXPECT_EQ(rp.period, ms(5000));
  EXPECT_FALSE(rp.shortened);
}

TEST(RenewPeriod, ConfigThatDoesNotFitTwiceIsShortenedWhenTheBackendGrantsLessThanTheLease) {
  // The same configuration, but the backend grants 5 s: a renewal every 5 s
  // would come after the 4.9 s deadline, and every term would end with
  // DEADLINE_PASSED. Renew every third of the validity instead.
  Config cfg;
  cfg.lease_duration = ms(10000);
  cfg.renew_interval_set = ms(5000);
  const Duration granted = local_validity(ms(5000), cfg.drift, cfg.margin);
  ASSERT_EQ(granted, ms(4900));
  const RenewPeriod rp = renew_period(cfg, granted);
  EXPECT_TRUE(rp.shortened);
  EXPECT_EQ(rp.period, ns(4'900'000'000 / 3));
}

TEST(RenewPeriod, ExplicitRenewIntervalIsUsed) {
  Config cfg;
  cfg.renew_interval_set = ms(2000);
  const RenewPeriod rp =
      renew_period(cfg, local_validity(cfg.lease_duration, cfg.drift, cfg.margin));
  EXPECT_EQ(rp.period, ms(2000));
  EXPECT_FALSE(rp.shortened);
  // Shortened only below 4 s of validity.
  EXPECT_FALSE(renew_period(cfg, ms(4000)).shortened);
  EXPECT_TRUE(renew_period(cfg, ms(3999)).shortened);
  EXPECT_EQ(renew_period(cfg, ms(3999)).period, ms(1333));
}

// ---------------------------------------------------------------------------
// Backoff after a failed keep-alive: clamp(time_left / 2, minBackoff, period)

TEST(KeepAliveBackoff, HalfTheTimeLeft) {
  const Config cfg = defaults();
  EXPECT_EQ(keep_alive_backoff(cfg, ms(5000), ms(9800)), ms(4900));
  EXPECT_EQ(keep_alive_backoff(cfg, ms(5000), ms(4900)), ms(2450));
  EXPECT_EQ(keep_alive_backoff(cfg, ms(5000), ns(2'450'000'001)), ns(1'225'000'000));
}

TEST(KeepAliveBackoff, CappedAtTheRenewPeriodInEffect) {
  const Config cfg = defaults();
  EXPECT_EQ(keep_alive_backoff(cfg, ms(5000), ms(14000)), ms(5000));
  EXPECT_EQ(keep_alive_backoff(cfg, ms(5000), ms(10000)), ms(5000));
  // A shortened period caps lower.
  EXPECT_EQ(keep_alive_backoff(cfg, ms(1963), ms(5000)), ms(1963));
}

TEST(KeepAliveBackoff, AtLeastMinBackoff) {
  Config cfg = defaults();
  EXPECT_EQ(keep_alive_backoff(cfg, ms(5000), ms(199)), ms(100));
  EXPECT_EQ(keep_alive_backoff(cfg, ms(5000), ms(200)), ms(100));
  EXPECT_EQ(keep_alive_backoff(cfg, ms(5000), ms(201)), ns(100'500'000));
  EXPECT_EQ(keep_alive_backoff(cfg, ms(5000), ns(1)), ms(100));
  EXPECT_EQ(keep_alive_backoff(cfg, ms(5000), Duration::zero()), ms(100));
  cfg.min_backoff = ms(250);
  EXPECT_EQ(keep_alive_backoff(cfg, ms(5000), ms(400)), ms(250));
  // minBackoff above a (shortened) period: the lower bound wins.
  EXPECT_EQ(keep_alive_backoff(cfg, ms(200), ms(1000)), ms(250));
}

// ---------------------------------------------------------------------------
// Candidates retry after renewInterval / 2 plus a jitter in [0, retryJitter)

TEST(CandidateRetryDelay, HalfTheRenewIntervalPlusTheDraw) {
  Config cfg = defaults();
  EXPECT_EQ(cfg.retry_jitter(), ms(2500));
  EXPECT_EQ(candidate_retry_delay(cfg, Duration::zero()), ms(2500));
  EXPECT_EQ(candidate_retry_delay(cfg, ns(1)), ns(2'500'000'001));
  EXPECT_EQ(candidate_retry_delay(cfg, ms(2500) - ns(1)), ms(5000) - ns(1));
  cfg.renew_interval_set = ms(3000);
  EXPECT_EQ(candidate_retry_delay(cfg, ms(7)), ms(1507));
  cfg.lease_duration = ms(9000);
  cfg.renew_interval_set.reset();
  EXPECT_EQ(candidate_retry_delay(cfg, Duration::zero()), ms(1500));
}

}  // namespace
}  // namespace simba
