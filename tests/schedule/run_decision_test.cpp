// src/schedule/run_decision: what a leader does with the stored run record
// (ADR 0048), on a virtual clock: handovers mid-period, a crash mid-run, both
// missed-run policies, daylight-saving periods, nodes whose tz data disagree.
#include "schedule/run_decision.h"

#include <date/date.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

namespace simba::schedule {
namespace {

using Verdict = RunDecision::Verdict;
constexpr Millis kSec = 1000;
constexpr Millis kMin = 60 * kSec;

// "2026-03-08T07:00" or "2026-03-08T07:00:30" (UTC) as epoch ms.
Millis utc(const char* text) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  EXPECT_GE(std::sscanf(text, "%d-%d-%dT%d:%d:%d", &y, &mo, &d, &h, &mi, &s), 5) << text;
  const date::sys_days day = date::year{y} / mo / d;
  return ((day.time_since_epoch().count() * 1440LL + h * 60 + mi) * 60 + s) * kSec;
}

Schedule cron(const char* expr, const char* zone = "") {
  Schedule::Made made = Schedule::cron(expr, zone);
  EXPECT_TRUE(made.error.empty()) << made.error;
  return made.schedule ? *made.schedule : *Schedule::fixed_rate(kMin, 0).schedule;
}

RunRecord record(Millis period, uint64_t token, RunOutcome outcome = RunOutcome::kOk) {
  RunRecord r;
  r.period_id = period;
  r.started_ms = period;
  r.ended_ms = outcome == RunOutcome::kRunning ? 0 : period + kMin;
  r.token = token;
  r.outcome = outcome;
  return r;
}

RunPolicy skip(Millis misfire) { return RunPolicy{MissedRuns::kSkip, misfire}; }
RunPolicy catch_up() { return RunPolicy{MissedRuns::kCatchUp, 0}; }

void expect_run(const RunDecision& d, Millis period) {
  EXPECT_EQ(d.verdict, Verdict::kRun);
  EXPECT_EQ(d.period_id, period);
}
void expect_wait(const RunDecision& d, Millis wake) {
  EXPECT_EQ(d.verdict, Verdict::kWait);
  ASSERT_TRUE(d.wake.has_value());
  EXPECT_EQ(*d.wake, wake);
}

// --- One decision ---------------------------------------------------------------

TEST(RunDecision, AFirstLeaderRunsTheCurrentPeriodWhenOnTime) {
  const Schedule hourly = cron("@hourly");
  expect_run(decide_run(std::nullopt, 1, hourly, utc("2026-05-01T10:00:05"), skip(15 * kSec)),
             utc("2026-05-01T10:00"));
  // Exactly the threshold late still runs; one ms more skips to the next period.
  expect_run(decide_run(std::nullopt, 1, hourly, utc("2026-05-01T10:00:15"), skip(15 * kSec)),
             utc("2026-05-01T10:00"));
  const RunDecision late =
      decide_run(std::nullopt, 1, hourly, utc("2026-05-01T10:00:15") + 1, skip(15 * kSec));
  expect_wait(late, utc("2026-05-01T11:00"));
  EXPECT_TRUE(late.missed);
}

// A handover mid-period: the new leader reads the period as run and waits for
// the next, never counting from its own term's start.
TEST(RunDecision, ANewLeaderMidPeriodWaitsForTheNextPeriod) {
  const Schedule hourly = cron("0 * * * *");
  for (const RunOutcome o : {RunOutcome::kOk, RunOutcome::kFailed}) {
    const RunDecision d = decide_run(record(utc("2026-05-01T10:00"), 5, o), 6, hourly,
                                     utc("2026-05-01T10:30"), skip(15 * kSec));
    expect_wait(d, utc("2026-05-01T11:00"));
    EXPECT_FALSE(d.abandon);
    EXPECT_FALSE(d.missed);
  }
  // At the next period it runs, with either policy.
  expect_run(decide_run(record(utc("2026-05-01T10:00"), 5), 6, hourly, utc("2026-05-01T11:00"),
                        skip(15 * kSec)),
             utc("2026-05-01T11:00"));
  expect_run(decide_run(record(utc("2026-05-01T10:00"), 5), 6, hourly, utc("2026-05-01T11:00"),
                        catch_up()),
             utc("2026-05-01T11:00"));
}

// A failover that crosses a period boundary: within the misfire threshold
// (default one lease duration) the interrupted period still runs.
TEST(RunDecision, AFailoverAcrossABoundaryRunsThePeriodWithinTheThreshold) {
  const Schedule hourly = cron("@hourly");
  const RunRecord last = record(utc("2026-05-01T10:00"), 5);
  const Millis now = utc("2026-05-01T11:00:12");  // the old term ended at 10:59:58
  expect_run(decide_run(last, 6, hourly, now, skip(15 * kSec)), utc("2026-05-01T11:00"));
  expect_wait(decide_run(last, 6, hourly, now, skip(10 * kSec)), utc("2026-05-01T12:00"));
}

// A crash mid-run: the record says running with an older token. The new
// leader marks it abandoned (an end write of that period, first) and does not
// run the period again, under either policy.
TEST(RunDecision, ACrashMidRunIsAbandonedAndItsPeriodNotRerun) {
  const Schedule hourly = cron("@hourly");
  const RunRecord crashed = record(utc("2026-05-01T10:00"), 5, RunOutcome::kRunning);
  const Millis now = utc("2026-05-01T10:00:40");
  for (const RunPolicy& p : {skip(15 * kSec), catch_up()}) {
    const RunDecision d = decide_run(crashed, 6, hourly, now, p);
    expect_wait(d, utc("2026-05-01T11:00"));
    ASSERT_TRUE(d.abandon);
    EXPECT_EQ(d.abandon->period_id, crashed.period_id);
    EXPECT_EQ(d.abandon->token, 5u);  // the run's token; the write's guard is the new term's
    EXPECT_EQ(d.abandon->started_ms, crashed.started_ms);
    EXPECT_EQ(d.abandon->ended_ms, now);
    EXPECT_EQ(d.abandon->outcome, RunOutcome::kAbandoned);
  }
  // Found a period later: abandoned, and the current period runs.
  const RunDecision later = decide_run(crashed, 6, hourly, utc("2026-05-01T11:00:05"), catch_up());
  expect_run(later, utc("2026-05-01T11:00"));
  EXPECT_TRUE(later.abandon);
}

// `running` under this term's own token is its own run, and under a newer
// token a newer term's (this leader is stale): neither is abandoned.
TEST(RunDecision, OnlyAnOlderTermsRunIsAbandoned) {
  const Schedule hourly = cron("@hourly");
  const Millis now = utc("2026-05-01T10:20");
  const RunRecord mine = record(utc("2026-05-01T10:00"), 6, RunOutcome::kRunning);
  const RunRecord newer = record(utc("2026-05-01T10:00"), 7, RunOutcome::kRunning);
  EXPECT_FALSE(decide_run(mine, 6, hourly, now, catch_up()).abandon);
  EXPECT_FALSE(decide_run(newer, 6, hourly, now, catch_up()).abandon);
  expect_wait(decide_run(newer, 6, hourly, now, catch_up()), utc("2026-05-01T11:00"));
  // An ended run of an older term is history, not abandoned.
  EXPECT_FALSE(decide_run(record(utc("2026-05-01T09:00"), 5, RunOutcome::kFailed), 6, hourly, now,
                          catch_up())
                   .abandon);
}

// Missed periods: skip runs none of them and the current one only if on
// time; catch_up runs the current one once at once, standing for all.
TEST(RunDecision, MissedPeriodsUnderEachPolicy) {
  const Schedule every5 = cron("*/5 * * * *");
  const RunRecord old = record(utc("2026-05-01T07:00"), 3);
  const Millis now = utc("2026-05-01T10:07");  // 2 minutes into 10:05
  const RunDecision skipped = decide_run(old, 4, every5, now, skip(30 * kSec));
  expect_wait(skipped, utc("2026-05-01T10:10"));
  EXPECT_TRUE(skipped.missed);
  expect_run(decide_run(old, 4, every5, now, skip(3 * kMin)), utc("2026-05-01T10:05"));
  const RunDecision caught = decide_run(old, 4, every5, now, catch_up());
  expect_run(caught, utc("2026-05-01T10:05"));
  EXPECT_FALSE(caught.missed);
  // Having run it, catch_up waits: one run for the 37 missed periods.
  expect_wait(decide_run(record(utc("2026-05-01T10:05"), 4), 4, every5, now + kSec, catch_up()),
              utc("2026-05-01T10:10"));
  // No record at all: catch_up runs at once, skip only when on time.
  expect_run(decide_run(std::nullopt, 1, every5, now, catch_up()), utc("2026-05-01T10:05"));
  expect_wait(decide_run(std::nullopt, 1, every5, now, skip(kMin)), utc("2026-05-01T10:10"));
}

TEST(RunDecision, FixedRatePeriods) {
  const Schedule rate = *Schedule::fixed_rate(90 * kSec, 30 * kSec).schedule;
  const Millis p = utc("2026-05-01T10:00:30");  // 30 s + k * 90 s
  ASSERT_EQ(rate.period_containing(p), p);
  expect_run(decide_run(record(p - 90 * kSec, 2), 3, rate, p + 5 * kSec, skip(10 * kSec)), p);
  expect_wait(decide_run(record(p - 90 * kSec, 2), 3, rate, p + 11 * kSec, skip(10 * kSec)),
              p + 90 * kSec);
  expect_wait(decide_run(record(p, 2), 3, rate, p + 11 * kSec, catch_up()), p + 90 * kSec);
}

// Two nodes whose tz data disagree (a rolling tzdata upgrade) name other
// instants for one period: a stored id above this node's current period means
// the period ran, so it waits; a stored id in its future waits past it.
TEST(RunDecision, AStoredPeriodAboveTheCurrentOneMeansWait) {
  const Schedule daily = cron("0 9 * * *", "Europe/Berlin");  // 07:00Z in summer
  const Millis mine = utc("2026-07-01T07:00");
  ASSERT_EQ(daily.period_containing(utc("2026-07-01T08:30")), mine);
  // Another node's tz data put the same period an hour later.
  const RunRecord other = record(mine + 60 * kMin, 8);
  for (const RunPolicy& p : {skip(kMin), catch_up()}) {
    expect_wait(decide_run(other, 9, daily, utc("2026-07-01T08:30"), p), utc("2026-07-02T07:00"));
  }
  // A stored id ahead of this node's clock (a writer's clock was ahead).
  const RunRecord ahead = record(utc("2026-07-02T07:00"), 8);
  expect_wait(decide_run(ahead, 9, daily, utc("2026-07-01T08:30"), catch_up()),
              utc("2026-07-03T07:00"));
}

// Daylight saving (America/New_York, 2026): a local time skipped by the
// spring-forward runs once at 03:00 EDT; one repeated by the fall-back runs at
// its first occurrence only, and a leader that reads that run during the
// repeated hour waits for the next day.
TEST(RunDecision, DaylightSavingPeriodsRunOnce) {
  const Schedule spring = cron("30 2 * * *", "America/New_York");
  const RunRecord day_before = record(utc("2026-03-07T07:30"), 1);  // 02:30 EST
  const Millis gap_run = utc("2026-03-08T07:00");                   // 03:00 EDT
  expect_run(decide_run(day_before, 2, spring, gap_run + 5 * kSec, skip(kMin)), gap_run);
  expect_wait(decide_run(record(gap_run, 2), 3, spring, gap_run + 30 * kMin, skip(kMin)),
              utc("2026-03-09T06:30"));

  const Schedule fall = cron("30 1 * * *", "America/New_York");
  const Millis first = utc("2026-11-01T05:30");  // 01:30 EDT
  expect_run(decide_run(record(utc("2026-10-31T05:30"), 1), 2, fall, first, skip(kMin)), first);
  // 01:40 EST, the repeated hour, after a handover: the period ran.
  const RunDecision repeated =
      decide_run(record(first, 2), 3, fall, utc("2026-11-01T06:40"), catch_up());
  expect_wait(repeated, utc("2026-11-02T06:30"));
}

// --- Leaders in turn on a virtual clock ----------------------------------------
// One leader at a time (the lease's guarantee); each writes the record as a
// guarded write would once applied. A term that ends mid-run crashed: its run
// never reports.

struct Turns {
  Schedule schedule;
  RunPolicy policy;
  Millis run_ms = 0;
  std::optional<RunRecord> stored{};
  std::vector<Millis> started{};
  std::vector<Millis> abandoned{};

  void term(uint64_t token, Millis from, Millis to) {
    Millis now = from;
    while (now < to) {
      const RunDecision d = decide_run(stored, token, schedule, now, policy);
      if (d.abandon) {
        stored = *d.abandon;
        abandoned.push_back(d.abandon->period_id);
      }
      if (d.verdict == Verdict::kRun) {
        started.push_back(d.period_id);
        stored = RunRecord{d.period_id, now, 0, token, RunOutcome::kRunning};
        if (now + run_ms >= to) return;  // the term ends mid-run
        now += run_ms;
        stored->ended_ms = now;
        stored->outcome = RunOutcome::kOk;
        continue;
      }
      if (!d.wake || *d.wake >= to) return;
      now = *d.wake;
    }
  }
};

// Every due time from `from` (inclusive) to `to` (exclusive).
std::vector<Millis> due_times(const Schedule& s, Millis from, Millis to) {
  std::vector<Millis> out;
  for (std::optional<Millis> t = s.next_after(from - 1); t && *t < to; t = s.next_after(*t)) {
    out.push_back(*t);
  }
  return out;
}

// Two days of hourly runs in Europe/London across the spring-forward, with
// a handover every 47 minutes and 20 s without a leader each time: every
// period starts exactly once, none twice, none lost (threshold 1 minute).
TEST(RunDecisionTurns, HandoversEveryFewMinutesStartEachPeriodOnce) {
  Turns t{cron("@hourly", "Europe/London"), skip(kMin), 5 * kMin};
  const Millis from = utc("2026-03-28T00:00"), to = utc("2026-03-30T00:00");
  uint64_t token = 1;
  for (Millis at = from; at < to; at += 47 * kMin) {
    t.term(token++, at, std::min(at + 47 * kMin - 20 * kSec, to));
  }
  const std::vector<Millis> want = due_times(t.schedule, from, to);
  EXPECT_EQ(want.size(), 48u);
  EXPECT_EQ(t.started, want);  // a run cut by its term's end counts: it started
}

// Terms that end mid-run: each crashed run is abandoned by the next leader
// and never rerun; no period starts twice, under either policy.
TEST(RunDecisionTurns, CrashesMidRunAreAbandonedNotRerun) {
  for (const RunPolicy& p : {skip(kMin), catch_up()}) {
    Turns t{cron("*/10 * * * *", "America/New_York"), p, 4 * kMin};
    // Fall-back night: 2026-11-01 04:00Z to 08:00Z. Terms of 23 minutes: some
    // end while a run is in progress.
    const Millis from = utc("2026-11-01T04:00"), to = utc("2026-11-01T08:00");
    uint64_t token = 10;
    for (Millis at = from; at < to; at += 23 * kMin) t.term(token++, at, at + 23 * kMin);
    std::set<Millis> unique(t.started.begin(), t.started.end());
    EXPECT_EQ(unique.size(), t.started.size()) << "a period started twice";
    EXPECT_FALSE(t.abandoned.empty());
    for (const Millis a : t.abandoned) {
      EXPECT_EQ(std::count(t.started.begin(), t.started.end(), a), 1) << a;
    }
    // The repeated hour 01:00-02:00 EST runs nothing (its times ran in EDT).
    for (const Millis s : t.started) {
      EXPECT_FALSE(s >= utc("2026-11-01T06:00") && s < utc("2026-11-01T07:00")) << s;
    }
  }
}

// A long outage: skip loses the periods it missed, catch_up runs once for them.
TEST(RunDecisionTurns, AnOutageUnderEachPolicy) {
  const Millis from = utc("2026-05-01T10:00"), back = utc("2026-05-01T13:20");
  for (const MissedRuns m : {MissedRuns::kSkip, MissedRuns::kCatchUp}) {
    Turns t{cron("@hourly"), RunPolicy{m, kMin}, kMin};
    t.term(1, from, from + 30 * kMin);
    t.term(2, back, utc("2026-05-01T15:30"));  // no leader from 10:30 to 13:20
    const std::vector<Millis> skipped = {from, utc("2026-05-01T14:00"), utc("2026-05-01T15:00")};
    const std::vector<Millis> caught = {from, utc("2026-05-01T13:00"), utc("2026-05-01T14:00"),
                                        utc("2026-05-01T15:00")};
    EXPECT_EQ(t.started, m == MissedRuns::kSkip ? skipped : caught);
  }
}

}  // namespace
}  // namespace simba::schedule
