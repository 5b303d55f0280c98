// Tests of what a term's accessors read (src/core/term_state.*): the session's
// sticky local deadline and a term's first-reason-wins revocation, including a
// multi-thread stress test of "once any thread saw the term invalid, no thread
// ever sees it valid again".
#include "core/term_state.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/time.h"
#include "support/fake_clock.h"

namespace simba {
namespace {

using testing::FakeClock;

TimePoint at_ms(int64_t n) { return TimePoint(ms(n)); }

// ---------------------------------------------------------------------------
// SessionClock

TEST(SessionClock, NotValidBeforeTheFirstDeadline) {
  FakeClock clock(at_ms(1000));
  SessionClock s(clock);
  EXPECT_FALSE(s.valid());
  EXPECT_EQ(s.remaining(), Duration::zero());
}

TEST(SessionClock, RemainingCountsDownToTheDeadline) {
  FakeClock clock(at_ms(1000));
  SessionClock s(clock);
  ASSERT_TRUE(s.set_deadline(at_ms(5000)));
  EXPECT_EQ(s.deadline(), at_ms(5000));
  EXPECT_TRUE(s.valid());
  EXPECT_EQ(s.remaining(), ms(4000));
  clock.advance(ms(3999));
  EXPECT_EQ(s.remaining(), ms(1));
  clock.advance(ms(1) - Duration(1));
  EXPECT_EQ(s.remaining(), Duration(1));
  EXPECT_TRUE(s.valid());
  EXPECT_FALSE(s.ended());
  // At the deadline itself no time is left.
  clock.advance(Duration(1));
  EXPECT_FALSE(s.valid());
  EXPECT_EQ(s.remaining(), Duration::zero());
}

TEST(SessionClock, AReaderThatSeesTheDeadlinePassedEndsItForGood) {
  FakeClock clock(at_ms(1000));
  SessionClock s(clock);
  ASSERT_TRUE(s.set_deadline(at_ms(2000)));
  clock.set(at_ms(2500));
  EXPECT_FALSE(s.ended());
  EXPECT_FALSE(s.valid());  // this read ends it
  EXPECT_TRUE(s.ended());
  // A late renewal cannot extend it...
  EXPECT_FALSE(s.set_deadline(at_ms(10000)));
  EXPECT_FALSE(s.valid());
  EXPECT_EQ(s.remaining(), Duration::zero());
  // ...not even if the clock were read earlier than the old deadline again.
  clock.set(at_ms(1500));
  EXPECT_FALSE(s.valid());
  EXPECT_EQ(s.remaining(), Duration::zero());
  EXPECT_FALSE(s.set_deadline(at_ms(20000)));
  EXPECT_TRUE(s.ended());
}

TEST(SessionClock, ExtendingBeforeTheDeadlineWorks) {
  FakeClock clock(at_ms(1000));
  SessionClock s(clock);
  ASSERT_TRUE(s.set_deadline(at_ms(2000)));
  clock.set(at_ms(1999));
  EXPECT_TRUE(s.valid());
  ASSERT_TRUE(s.set_deadline(at_ms(3000)));
  EXPECT_EQ(s.deadline(), at_ms(3000));
  clock.set(at_ms(2500));
  EXPECT_TRUE(s.valid());
  EXPECT_EQ(s.remaining(), ms(500));
  // A shorter deadline (a slow reply) is applied as well.
  ASSERT_TRUE(s.set_deadline(at_ms(2600)));
  EXPECT_EQ(s.remaining(), ms(100));
  clock.set(at_ms(2600));
  EXPECT_FALSE(s.valid());
  EXPECT_TRUE(s.ended());
}

TEST(SessionClock, SettingADeadlineAlreadyPassedEndsItOnTheFirstRead) {
  FakeClock clock(at_ms(5000));
  SessionClock s(clock);
  ASSERT_TRUE(s.set_deadline(at_ms(9000)));
  ASSERT_TRUE(s.set_deadline(at_ms(4000)));
  EXPECT_FALSE(s.valid());
  EXPECT_FALSE(s.set_deadline(at_ms(9000)));
  EXPECT_FALSE(s.valid());
}

TEST(SessionClock, EndIsStickyAndIdempotent) {
  FakeClock clock(at_ms(1000));
  SessionClock s(clock);
  ASSERT_TRUE(s.set_deadline(at_ms(60000)));
  EXPECT_TRUE(s.valid());
  s.end();
  EXPECT_TRUE(s.ended());
  EXPECT_FALSE(s.valid());
  EXPECT_EQ(s.remaining(), Duration::zero());
  s.end();
  EXPECT_TRUE(s.ended());
  EXPECT_FALSE(s.set_deadline(at_ms(90000)));
  EXPECT_FALSE(s.valid());
  // The deadline last set is still readable.
  EXPECT_EQ(s.deadline(), at_ms(60000));
}

// ---------------------------------------------------------------------------
// TermState

std::shared_ptr<SessionClock> live_session(const Clock& clock, TimePoint deadline,
                                           const std::string& id = "s") {
  auto s = std::make_shared<SessionClock>(clock, id);
  EXPECT_TRUE(s->set_deadline(deadline));
  return s;
}

TEST(TermState, CarriesNameTokenSessionAndTheSessionsDeadline) {
  FakeClock clock(at_ms(1000));
  auto s = live_session(clock, at_ms(15000), "sess-1");
  TermState t("report", 7, s);
  EXPECT_EQ(t.name(), "report");
  EXPECT_EQ(t.token(), 7u);
  EXPECT_EQ(t.session_id(), "sess-1");
  EXPECT_EQ(&t.session(), s.get());
  EXPECT_TRUE(t.valid());
  EXPECT_EQ(t.remaining(), ms(14000));
  EXPECT_EQ(t.revoked(), RevokeReason::kNone);
  // Renewing the session extends the term.
  ASSERT_TRUE(s->set_deadline(at_ms(20000)));
  EXPECT_EQ(t.remaining(), ms(19000));
}

TEST(TermState, RevokeFirstReasonWins) {
  FakeClock clock(at_ms(1000));
  auto s = live_session(clock, at_ms(15000));
  TermState t("a", 1, s);
  EXPECT_TRUE(t.revoke(RevokeReason::kTakenOver));
  EXPECT_EQ(t.revoked(), RevokeReason::kTakenOver);
  EXPECT_FALSE(t.revoke(RevokeReason::kStopped));
  EXPECT_FALSE(t.revoke(RevokeReason::kDeadlinePassed));
  EXPECT_EQ(t.revoked(), RevokeReason::kTakenOver);
}

TEST(TermState, RemainingIsZeroOnceRevokedThoughTheSessionLives) {
  FakeClock clock(at_ms(1000));
  auto s = live_session(clock, at_ms(15000));
  TermState t("a", 1, s);
  TermState other("b", 2, s);
  ASSERT_TRUE(t.revoke(RevokeReason::kStopped));
  EXPECT_FALSE(t.valid());
  EXPECT_EQ(t.remaining(), Duration::zero());
  // The session and its other terms are untouched.
  EXPECT_TRUE(s->valid());
  EXPECT_TRUE(other.valid());
  EXPECT_EQ(other.remaining(), ms(14000));
  // Renewing the session does not bring the revoked term back.
  ASSERT_TRUE(s->set_deadline(at_ms(30000)));
  EXPECT_FALSE(t.valid());
  EXPECT_EQ(t.remaining(), Duration::zero());
}

TEST(TermState, EndsWithItsSessionAndNeverComesBack) {
  FakeClock clock(at_ms(1000));
  auto s = live_session(clock, at_ms(2000));
  TermState a("a", 1, s);
  TermState b("b", 2, s);
  EXPECT_TRUE(a.valid());
  // A process that wakes from a long pause sees false on its first read, with
  // no watchdog having run.
  clock.set(at_ms(9000));
  EXPECT_FALSE(a.valid());
  EXPECT_FALSE(b.valid());
  EXPECT_EQ(a.revoked(), RevokeReason::kNone);  // the reason is the engine's to set
  EXPECT_FALSE(s->set_deadline(at_ms(20000)));
  EXPECT_FALSE(a.valid());
  // Re-elected: a new term on a new session; the old one stays ended.
  auto s2 = live_session(clock, at_ms(20000), "s2");
  TermState a2("a", 3, s2);
  EXPECT_EQ(a2.session_id(), "s2");
  EXPECT_EQ(a.session_id(), "s");
  EXPECT_TRUE(a2.valid());
  EXPECT_FALSE(a.valid());
  EXPECT_EQ(a.remaining(), Duration::zero());
}

TEST(TermState, RevokeReasonNames) {
  EXPECT_STREQ(revoke_reason_name(RevokeReason::kStopped), "STOPPED");
  EXPECT_STREQ(revoke_reason_name(RevokeReason::kSteppedDown), "STEPPED_DOWN");
  EXPECT_STREQ(revoke_reason_name(RevokeReason::kDeadlinePassed), "DEADLINE_PASSED");
  EXPECT_STREQ(revoke_reason_name(RevokeReason::kSessionExpired), "SESSION_EXPIRED");
  EXPECT_STREQ(revoke_reason_name(RevokeReason::kTakenOver), "TAKEN_OVER");
  EXPECT_STREQ(revoke_reason_name(RevokeReason::kNone), "NONE");
}

// ---------------------------------------------------------------------------
// Stress: readers on any thread never see a term valid again once some thread
// saw it invalid, while the loop keeps extending the deadline racing the clock.
//
// Each round is one session and one term. A writer thread extends the round's
// deadline by a few microseconds at random moments, so that the deadline often
// passes between two extensions; the round ends when an extension fails (a
// reader ended the session) or after a revocation. Four readers hammer valid()
// and remaining() of the current round. Per round, a flag records "some thread
// saw it invalid": a reader loads the flag, then reads the term; a valid read
// after a set flag is a violation.

struct Round {
  std::shared_ptr<SessionClock> session;
  TermRef term;
  std::atomic<bool> seen_invalid{false};
};

struct StressResult {
  int rounds = 0;
  int ended_by_readers = 0;
  int revoked = 0;
  long extensions = 0;
  long late_extensions = 0;  // extensions made after the previous deadline had passed
  long reads = 0;
  long violations = 0;
};

// `clock` is the clock the terms read; `fake` is non-null when it is a fake
// clock, which the writer then moves forward by each of its pauses.
StressResult stress(const Clock& clock, FakeClock* fake, std::chrono::milliseconds run_for) {
  constexpr int kMaxRounds = 200000;
  constexpr int kReaders = 4;
  auto rounds = std::make_unique<Round[]>(kMaxRounds);
  std::atomic<int> current{0};
  std::atomic<bool> done{false};
  std::atomic<long> reads{0}, violations{0};

  auto make_round = [&](int i) {
    rounds[i].session = std::make_shared<SessionClock>(clock, "s" + std::to_string(i));
    rounds[i].session->set_deadline(clock.now() + std::chrono::microseconds(50));
    rounds[i].term =
        TermRef(new TermState("stress", static_cast<uint64_t>(i + 1), rounds[i].session));
  };
  make_round(0);

  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&] {
      long n = 0, bad = 0;
      while (!done.load(std::memory_order_relaxed)) {
        Round& round = rounds[current.load()];
        for (int k = 0; k < 64; ++k) {
          const bool flag = round.seen_invalid.load();
          const bool valid = round.term->valid();
          if (flag && valid) ++bad;
          const bool flag2 = round.seen_invalid.load();
          const Duration left = round.term->remaining();
          if (flag2 && left != Duration::zero()) ++bad;
          const bool flag3 = round.seen_invalid.load();
          const bool session_valid = round.session->valid();
          if (flag3 && session_valid && round.term->revoked() == RevokeReason::kNone) ++bad;
          if (!valid || left == Duration::zero()) round.seen_invalid.store(true);
          if (!session_valid) round.seen_invalid.store(true);
          n += 3;
        }
        // Two cores are shared by six threads: let the writer run often.
        std::this_thread::yield();
      }
      reads += n;
      violations += bad;
    });
  }

  StressResult res;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> extend_us(1, 400);
  std::uniform_int_distribution<int> pause_us(0, 80);
  std::uniform_int_distribution<int> one_in(0, 15);
  const auto stop_at = std::chrono::steady_clock::now() + run_for;
  int i = 0;
  while (std::chrono::steady_clock::now() < stop_at && i + 1 < kMaxRounds) {
    Round& round = rounds[i];
    const bool revoke_this_round = one_in(rng) == 0;
    int steps = 0;
    for (;;) {
      // Pause, racing the clock towards the deadline. A fake clock moves by the
      // pause at once; the readers then race the extension in real time.
      const auto pause = std::chrono::microseconds(pause_us(rng));
      if (fake) fake->advance(pause);
      const auto until = std::chrono::steady_clock::now() + pause;
      while (std::chrono::steady_clock::now() < until) std::this_thread::yield();
      if (revoke_this_round && ++steps > 3) {
        round.term->revoke(RevokeReason::kStopped);
        ++res.revoked;
        // No reader may see it valid from now on: mark it as a reader would.
        round.seen_invalid.store(true);
        break;
      }
      const TimePoint before = round.session->deadline();
      const TimePoint now = clock.now();
      if (!round.session->set_deadline(now + std::chrono::microseconds(extend_us(rng)))) {
        ++res.ended_by_readers;
        break;
      }
      ++res.extensions;
      if (now >= before) ++res.late_extensions;
      if (std::chrono::steady_clock::now() >= stop_at) break;
    }
    make_round(i + 1);
    current.store(i + 1);
    ++i;
  }
  done = true;
  for (auto& t : readers) t.join();
  res.rounds = i;
  res.reads = reads.load();
  res.violations = violations.load();
  return res;
}

TEST(TermStateStress, NoReaderSeesValidAfterAnyThreadSawInvalid_MonotonicClock) {
  const StressResult r =
      stress(MonotonicClock::instance(), nullptr, std::chrono::milliseconds(500));
  RecordProperty("rounds", r.rounds);
  EXPECT_EQ(r.violations, 0) << r.rounds << " rounds, " << r.reads << " reads";
  // The race was exercised: readers ended sessions the writer then failed to extend.
  EXPECT_GT(r.rounds, 10);
  EXPECT_GT(r.ended_by_readers, 0);
  EXPECT_GT(r.reads, 1000);
}

TEST(TermStateStress, NoReaderSeesValidAfterAnyThreadSawInvalid_FakeClock) {
  FakeClock clock;
  const StressResult r = stress(clock, &clock, std::chrono::milliseconds(500));
  EXPECT_EQ(r.violations, 0) << r.rounds << " rounds, " << r.reads << " reads";
  EXPECT_GT(r.rounds, 10);
  EXPECT_GT(r.ended_by_readers, 0);
  EXPECT_GT(r.reads, 1000);
}

}  // namespace
}  // namespace simba
