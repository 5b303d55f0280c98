// Tests of the core Node: candidates, their attempts and the terms they adopt,
// and what keep-alive replies list. The fixture is in node_fixture.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "core/node_fixture.h"

namespace simba::node_test {
namespace {

// ===========================================================================
// Candidates

TEST_F(NodeTest, CandidateAttemptsAtOnceThenEveryHalfRenewIntervalPlusJitter) {
  start_live();
  auto_keep_alive = true;
  const ContenderId a = add_election("a", now());
  ASSERT_NE(a, 0u);
  ASSERT_EQ(fx.pending_count(Fx::kAcquire), 1u);
  const FxCall first = fx.pending(Fx::kAcquire)[0];
  EXPECT_EQ(first.at, now());
  EXPECT_EQ(first.session, "s1");
  EXPECT_EQ(first.name, "a");
  EXPECT_EQ(first.timeout, kRenew);
  std::vector<Duration> delays;
  for (int i = 0; i < 200; ++i) {
    held("a");
    const TimePoint answered = now();
    const size_t mark = fx.mark();
    ASSERT_TRUE(
        run_until_true([&] { return fx.count(Fx::kAcquire, mark) > 0; }, answered + ms(10000)));
    ASSERT_EQ(fx.count(Fx::kAcquire, mark), 1u);
    delays.push_back(fx.of(Fx::kAcquire, mark)[0].at - answered);
  }
  const Duration lo = *std::min_element(delays.begin(), delays.end());
  const Duration hi = *std::max_element(delays.begin(), delays.end());
  EXPECT_GE(lo, kRenew / 2);
  EXPECT_LT(hi, kRenew / 2 + kJitter);
  // The jitter spreads the attempts over [0, retryJitter).
  EXPECT_LT(lo, kRenew / 2 + kJitter / 10);
  EXPECT_GT(hi, kRenew / 2 + kJitter * 9 / 10);
  std::set<int64_t> distinct;
  for (Duration d : delays) distinct.insert(d.count());
  EXPECT_GT(distinct.size(), 190u);
}

TEST_F(NodeTest, RetryJitterZeroMeansExactlyHalfTheRenewInterval) {
  cfg.retry_jitter_set = Duration::zero();
  start_live();
  auto_keep_alive = true;
  ASSERT_NE(add_election("a", now()), 0u);
  for (int i = 0; i < 5; ++i) {
    held("a");
    const TimePoint answered = now();
    const size_t mark = fx.mark();
    ASSERT_TRUE(
        run_until_true([&] { return fx.count(Fx::kAcquire, mark) > 0; }, answered + ms(10000)));
    EXPECT_EQ(fx.of(Fx::kAcquire, mark)[0].at - answered, kRenew / 2);
  }
}

// A burst of elections sends at most 64 acquires at once; the others go out as
// answers free slots, oldest first, so none waits in a backend queue until it
// times out.
TEST_F(NodeTest, AtMost64AcquiresInFlightPerNode) {
  start_live();
  const size_t mark = fx.mark();
  for (int i = 0; i < 100; ++i) add_election("b" + std::to_string(i), now());
  EXPECT_EQ(fx.of(Fx::kAcquire, mark).size(), 64u);
  // Each answer lets one more out.
  held("b0");
  EXPECT_EQ(fx.of(Fx::kAcquire, mark).size(), 65u);
  EXPECT_EQ(fx.of(Fx::kAcquire, mark).back().name, "b64");
  win("b1", 1);
  EXPECT_EQ(fx.of(Fx::kAcquire, mark).size(), 66u);
  // Timeouts free slots too.
  run_until(now() + kRenew);
  EXPECT_EQ(acquires_since(mark, "b99").size(), 1u);
}

TEST_F(NodeTest, AtMostOneAcquirePerElectionInFlight) {
  start_live();
  auto_keep_alive = true;
  std::vector<ContenderId> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(add_election("e" + std::to_string(i), now()));
  EXPECT_EQ(fx.count(Fx::kAcquire), 3u);
  // Nothing is ever answered: each election's next attempt only after its
  // previous one timed out and went unanswered for two call timeouts (a
  // backend answers by its own timeout; here none does).
  run_until(now() + ms(120000));
  for (int i = 0; i < 3; ++i) {
    const auto acq = acquires_since(0, "e" + std::to_string(i));
    ASSERT_GE(acq.size(), 10u);
    for (size_t k = 1; k < acq.size(); ++k) {
      EXPECT_EQ(acq[k].at - acq[k - 1].at, 2 * kRenew);
    }
  }
  // Broadcasts while in flight do not start a second attempt.
  for (int i = 0; i < 3; ++i) {
    const size_t mark = fx.mark();
    const std::string name = "e" + std::to_string(i);
    if (view_of(ids[i])->state == "acquiring") {
      node->on_released(name, now());
      EXPECT_EQ(acquires_since(mark, name).size(), 0u);
    }
  }
}

TEST_F(NodeTest, AdoptedTermCarriesNameTokenSessionAndTheSessionDeadline) {
  const TimePoint t0 = now();
  start_live();
  const ContenderId a = add_election("report", now());
  advance(ms(700));
  const size_t mark = fx.mark();
  answer_acquire(take_acquire("report"), Outcome::kOk, 7);
  const auto el = fx.of(Fx::kElected, mark);
  ASSERT_EQ(el.size(), 1u);
  EXPECT_EQ(el[0].who, a);
  const auto term = el[0].term;
  EXPECT_EQ(term->name(), "report");
  EXPECT_EQ(term->token(), 7u);
  EXPECT_EQ(term->session_id(), "s1");
  EXPECT_TRUE(term->valid());
  EXPECT_EQ(term->remaining(), t0 + kValidity - now());
  const auto v = view_of(a);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->state, "leader");
  EXPECT_EQ(v->token, 7u);
  EXPECT_EQ(node->view().terms, 1u);
  // A leader does not attempt again.
  auto_keep_alive = true;
  run_until(now() + ms(30000));
  EXPECT_EQ(acquires_since(mark, "report").size(), 0u);
  EXPECT_TRUE(term->valid());
}

TEST_F(NodeTest, WinningTheSameNameTwiceGivesTwoTermObjects) {
  start_live();
  auto_keep_alive = true;
  auto [a, t1] = leader("a", 1);
  ASSERT_TRUE(step_down(a, Duration::zero(), now()));
  answer_release(take_release());
  ASSERT_TRUE(
      run_until_true([&] { return fx.pending_count(Fx::kAcquire) > 0; }, now() + ms(10000)));
  auto t2 = win("a", 2);
  ASSERT_TRUE(t2);
  EXPECT_NE(t1.get(), t2.get());
  EXPECT_FALSE(t1->valid());
  EXPECT_TRUE(t2->valid());
}

TEST_F(NodeTest, AcquireReplyAfterTheLocalDeadlineIsNotAdoptedButReleased) {
  const TimePoint t0 = now();
  start_live();
  ASSERT_NE(add_election("a", now()), 0u);
  const FxCall acq = take_acquire("a");
  // The reply arrives after the deadline, before the loop ran any timer.
  clock.set(t0 + kValidity + ms(1));
  const size_t mark = fx.mark();
  answer_acquire(acq, Outcome::kOk, 3);
  EXPECT_EQ(fx.count(Fx::kElected, mark), 0u);
  const auto rel = releases_since(mark);
  ASSERT_EQ(rel.size(), 1u);
  EXPECT_EQ(rel[0].name, "a");
  EXPECT_EQ(rel[0].token, 3u);
  EXPECT_EQ(rel[0].session, "s1");
}

TEST_F(NodeTest, AcquireReplyAfterTheSessionEndedIsReleasedWithItsSession) {
  const TimePoint t0 = now();
  start_live();
  // Suspended from 5 s; the attempt goes out at 12 s, its reply comes after
  // the deadline timer ended the session.
  run_until(t0 + kRenew);
  ka_fail(Outcome::kError);
  run_until(t0 + ms(12000));
  ASSERT_NE(add_election("a", now()), 0u);
  const FxCall acq = take_acquire("a");
  run_until(t0 + kValidity + ms(10));
  ASSERT_EQ(node->status(), SessionStatus::kOpening);
  const size_t mark = fx.mark();
  answer_acquire(acq, Outcome::kOk, 5);
  EXPECT_EQ(fx.count(Fx::kElected, mark), 0u);
  const auto rel = releases_since(mark);
  ASSERT_EQ(rel.size(), 1u);
  EXPECT_EQ(rel[0].session, "s1");
  EXPECT_EQ(rel[0].token, 5u);
  // The new session contends afresh.
  open_ok(kLease, "s2");
  auto t = win("a", 6);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->session_id(), "s2");
}

TEST_F(NodeTest, TermIsAdoptedOnlyWithATokenAboveEveryTokenThisSessionReleased) {
  start_live();
  auto_keep_alive = true;
  auto [a, t5] = leader("a", 5);
  ASSERT_TRUE(step_down(a, Duration::zero(), now()));
  const FxCall rel = take_release();
  EXPECT_EQ(rel.token, 5u);
  answer_release(rel);
  EXPECT_EQ(fx.revoked_reason(t5), RevokeReason::kSteppedDown);
  auto next_attempt = [&] {
    ASSERT_TRUE(
        run_until_true([&] { return fx.pending_count(Fx::kAcquire) > 0; }, now() + ms(10000)));
  };
  // A backend answering with the released token (or a lower one) is not trusted.
  for (uint64_t stale : {5u, 4u, 1u}) {
    next_attempt();
    const size_t mark = fx.mark();
    answer_acquire(take_acquire("a"), Outcome::kOk, stale);
    EXPECT_EQ(fx.count(Fx::kElected, mark), 0u) << stale;
    const auto r = releases_since(mark);
    ASSERT_EQ(r.size(), 1u) << stale;
    EXPECT_EQ(r[0].token, stale);
    answer_release(r[0]);
    EXPECT_EQ(view_of(a)->state, "candidate");
  }
  next_attempt();
  auto t6 = win("a", 6);
  ASSERT_TRUE(t6);
  EXPECT_TRUE(t6->valid());
}

TEST_F(NodeTest, TokenZeroIsNeverAdopted) {
  start_live();
  ASSERT_NE(add_election("a", now()), 0u);
  const size_t mark = fx.mark();
  answer_acquire(take_acquire("a"), Outcome::kOk, 0);
  EXPECT_EQ(fx.count(Fx::kElected, mark), 0u);
}

TEST_F(NodeTest, LateReplyToATimedOutAttemptReleasesWhatItWon) {
  start_live();
  auto_keep_alive = true;
  const ContenderId a = add_election("a", now());
  const FxCall first = fx.pending(Fx::kAcquire)[0];
  run_until(first.at + kRenew);  // timed out
  EXPECT_EQ(view_of(a)->state, "candidate");
  advance(ms(1000));
  const size_t mark = fx.mark();
  answer_acquire(first, Outcome::kOk, 9);
  EXPECT_EQ(fx.count(Fx::kElected, mark), 0u);
  const auto rel = releases_since(mark);
  ASSERT_EQ(rel.size(), 1u);
  EXPECT_EQ(rel[0].name, "a");
  EXPECT_EQ(rel[0].token, 9u);
  EXPECT_EQ(rel[0].session, "s1");
  answer_release(rel[0]);
  // The election carries on with a new attempt.
  ASSERT_TRUE(
      run_until_true([&] { return fx.pending_count(Fx::kAcquire) > 0; }, now() + ms(10000)));
  auto t = win("a", 10);
  ASSERT_TRUE(t);
}

TEST_F(NodeTest, StopDuringAnAttemptReleasesWhatItWonBeforeItCompletes) {
  start_live();
  const ContenderId a = add_election("a", now());
  const FxCall acq = take_acquire("a");
  const size_t mark = fx.mark();
  ASSERT_TRUE(stop(a, now()));
  // Not stopped yet: the attempt may have won the lease on the backend.
  EXPECT_TRUE(kinds_of(a, mark).empty());
  EXPECT_EQ(add_election("a", now()), 0u);
  EXPECT_FALSE(stop(a, now()));
  answer_acquire(acq, Outcome::kOk, 4);
  EXPECT_EQ(fx.count(Fx::kElected, mark), 0u);
  const auto rel = releases_since(mark);
  ASSERT_EQ(rel.size(), 1u);
  EXPECT_EQ(rel[0].token, 4u);
  EXPECT_TRUE(kinds_of(a, mark).empty());
  // Stopped once the release is answered; the name is free on this node again.
  answer_release(take_release());
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kStopped}));
  EXPECT_NE(add_election("a", now()), 0u);
}

TEST_F(NodeTest, StopDuringAnAttemptCompletesEvenIfTheReleaseFails) {
  start_live();
  const ContenderId a = add_election("a", now());
  const FxCall acq = take_acquire("a");
  const size_t mark = fx.mark();
  ASSERT_TRUE(stop(a, now()));
  answer_acquire(acq, Outcome::kOk, 4);
  answer_release(take_release(), Outcome::kError);
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kStopped}));
}

TEST_F(NodeTest, StopDuringAnAttemptThatFindsTheNameHeldCompletesAtTheAnswer) {
  start_live();
  const ContenderId a = add_election("a", now());
  const FxCall acq = take_acquire("a");
  const size_t mark = fx.mark();
  ASSERT_TRUE(stop(a, now()));
  answer_acquire(acq, Outcome::kHeld, 0, ms(100));
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kStopped}));
  EXPECT_EQ(fx.count(Fx::kRelease, mark), 0u);
  auto_keep_alive = true;
  run_until(now() + ms(20000));
  EXPECT_TRUE(acquires_since(mark, "a").empty());
}

TEST_F(NodeTest, StopDuringAnAttemptNeverAnsweredCompletesAtItsTimeoutAndALateWinIsReleased) {
  start_live();
  auto_keep_alive = true;
  const ContenderId a = add_election("a", now());
  const FxCall acq = take_acquire("a");
  const TimePoint stopped_at = now();
  const size_t mark = fx.mark();
  ASSERT_TRUE(stop(a, now()));
  ASSERT_TRUE(run_until_true([&] { return !kinds_of(a, mark).empty(); }, now() + kLease));
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kStopped}));
  EXPECT_LE(now() - stopped_at, kRenew);  // within one call timeout
  EXPECT_TRUE(acquires_since(mark, "a").empty());
  // The answer comes after all: what it won is released, nothing is elected.
  answer_acquire(acq, Outcome::kOk, 7);
  EXPECT_EQ(fx.count(Fx::kElected, mark), 0u);
  const auto rel = releases_since(mark);
  ASSERT_EQ(rel.size(), 1u);
  EXPECT_EQ(rel[0].token, 7u);
}

TEST_F(NodeTest, StopDuringAnAttemptCompletesWhenTheSessionEnds) {
  start_live();
  const ContenderId a = add_election("a", now());
  take_acquire("a");
  const size_t mark = fx.mark();
  ASSERT_TRUE(stop(a, now()));
  advance(kRenew);
  ka_fail(Outcome::kExpired);
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kStopped}));
  EXPECT_EQ(fx.count(Fx::kElected, mark), 0u);
}

TEST_F(NodeTest, StopWhileReleasingWhatAStoppedAttemptWonCompletesWhenTheSessionEnds) {
  start_live();
  const ContenderId a = add_election("a", now());
  const FxCall acq = take_acquire("a");
  const size_t mark = fx.mark();
  ASSERT_TRUE(stop(a, now()));
  answer_acquire(acq, Outcome::kOk, 4);
  ASSERT_EQ(releases_since(mark).size(), 1u);
  advance(kRenew);
  ka_fail(Outcome::kExpired);
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kStopped}));
}

// ===========================================================================
// Keep-alive replies and what they list

TEST_F(NodeTest, TakenOverWhenAKeepAliveSentAfterAdoptionDoesNotListTheLease) {
  const TimePoint t0 = now();
  start_live();
  auto [a, ta] = leader("a", 1);
  auto [b, tb] = leader("b", 2);
  run_until(t0 + kRenew);
  const size_t mark = fx.mark();
  ka_ok(kLease, std::vector<OwnedLease>{{"b", 2}});
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kTakenOver);
  EXPECT_FALSE(ta->valid());
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kTermEnded, Fx::kRevoked}));
  // Not waited for, and nothing to release: the lease is someone else's.
  EXPECT_EQ(fx.count(Fx::kRelease, mark), 0u);
  // b is listed and stays.
  EXPECT_TRUE(tb->valid());
  EXPECT_FALSE(fx.was_revoked(tb));
  // a contends again.
  EXPECT_EQ(view_of(a)->state, "candidate");
  auto_keep_alive = true;
  ASSERT_TRUE(
      run_until_true([&] { return !acquires_since(mark, "a").empty(); }, now() + ms(10000)));
}

TEST_F(NodeTest, TakenOverWhenListedWithAnotherToken) {
  const TimePoint t0 = now();
  start_live();
  auto [a, ta] = leader("a", 1);
  run_until(t0 + kRenew);
  ka_ok(kLease, std::vector<OwnedLease>{});
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kTakenOver);
}

TEST_F(NodeTest, NotTakenOverForATermAdoptedAfterTheKeepAliveWasSent) {
  const TimePoint t0 = now();
  start_live();
  run_until(t0 + kRenew);
  ASSERT_EQ(fx.pending_count(Fx::kKeepAlive), 1u);
  const FxCall k1 = fx.pending(Fx::kKeepAlive)[0];
  advance(ms(100));
  auto [a, ta] = leader("a", 1);  // adopted while k1 is in flight
  advance(ms(100));
  answer_keep_alive(k1, Outcome::kOk, kLease, std::vector<OwnedLease>{});
  EXPECT_TRUE(ta->valid());
  EXPECT_FALSE(fx.was_revoked(ta));
  // The next keep-alive was sent after the adoption: it must list the lease.
  run_until(t0 + 2 * kRenew);
  ka_ok(kLease, std::vector<OwnedLease>{});
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kTakenOver);
}

TEST_F(NodeTest, AKeepAliveListingALeaseWithNoTermAndNoCallReleasesIt) {
  const TimePoint t0 = now();
  start_live();
  auto [a, ta] = leader("a", 1);
  advance(ms(1000));
  ASSERT_NE(add_election("b", now()), 0u);  // its acquire is in flight at 5 s
  run_until(t0 + kRenew);
  const size_t mark = fx.mark();
  ka_ok(kLease, std::vector<OwnedLease>{{"a", 1}, {"x", 9}, {"b", 4}});
  const auto rel = releases_since(mark);
  ASSERT_EQ(rel.size(), 1u);
  EXPECT_EQ(rel[0].name, "x");
  EXPECT_EQ(rel[0].token, 9u);
  EXPECT_EQ(rel[0].session, "s1");
  EXPECT_TRUE(ta->valid());
}

TEST_F(NodeTest, AKeepAliveListingALeaseBeingReleasedDoesNotReleaseItTwice) {
  const TimePoint t0 = now();
  start_live();
  auto [a, ta] = leader("a", 1);
  run_until(t0 + kRenew);
  const FxCall k = fx.pending(Fx::kKeepAlive)[0];
  ASSERT_TRUE(stop(a, now()));
  ASSERT_EQ(fx.pending_count(Fx::kRelease), 1u);
  const size_t mark = fx.mark();
  answer_keep_alive(k, Outcome::kOk, kLease, std::vector<OwnedLease>{{"a", 1}});
  EXPECT_EQ(fx.count(Fx::kRelease, mark), 0u);
  answer_release(take_release());
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kStopped);
}

TEST_F(NodeTest, AnOrphanFromALostAcquireReplyIsReleasedSoonAfterTheAttemptTimedOut) {
  // ADR 0005: a lease won by an acquire whose answer was lost is released by
  // the first keep-alive listing it once no call in flight explains it: about
  // one renew period plus a call timeout, not the tombstone's life.
  const TimePoint t0 = now();
  start_live();
  advance(ms(1000));
  ASSERT_NE(add_election("a", now()), 0u);
  const FxCall lost = take_acquire("a");  // applied by the backend (a/3), answer lost
  const std::vector<OwnedLease> listed = {{"a", 3}};
  // Later attempts find the lease held (by this very session).
  auto answer_all = [&] {
    for (const FxCall& c : fx.pending(Fx::kAcquire)) {
      if (c.call != lost.call) answer_acquire(c, Outcome::kHeld, 0, kNever);
    }
    for (const FxCall& k : fx.pending(Fx::kKeepAlive)) {
      answer_keep_alive(k, Outcome::kOk, kLease, listed);
    }
  };
  // The keep-alive at 5 s is sent while the attempt is in flight: explained.
  ASSERT_FALSE(run_until_true(
      [&] {
        answer_all();
        return fx.count(Fx::kRelease) > 0;
      },
      t0 + ms(6000) - k1ns));
  // The attempt times out at 6 s; the keep-alive at 10 s releases the orphan.
  ASSERT_TRUE(run_until_true(
      [&] {
        answer_all();
        return fx.count(Fx::kRelease) > 0;
      },
      t0 + ms(6000) + kRenew));
  const FxCall rel = fx.of(Fx::kRelease)[0];
  EXPECT_EQ(rel.name, "a");
  EXPECT_EQ(rel.token, 3u);
  EXPECT_EQ(rel.session, "s1");
  EXPECT_LE(rel.at, t0 + ms(10000));
  EXPECT_EQ(fx.count(Fx::kElected), 0u);
}

TEST_F(NodeTest, ALateReplyWithTheTokenOfTheLiveTermDoesNotReleaseIt) {
  // A backend that answers a re-acquire by the holding session with its current
  // token (ZooKeeper: the node this session's first, unanswered attempt made):
  // the second attempt adopts that lease (ADR 0015), and the first attempt's
  // late reply must not free the live term.
  start_live();
  auto_keep_alive = true;
  ASSERT_NE(add_election("a", now()), 0u);
  const FxCall first = take_acquire("a");
  run_until(first.at + kRenew);  // timed out, never answered
  ASSERT_TRUE(
      run_until_true([&] { return fx.pending_count(Fx::kAcquire) > 0; }, now() + ms(10000)));
  EXPECT_GE(fx.pending(Fx::kAcquire)[0].at, first.at + 2 * kRenew);
  auto t = win("a", 7);
  ASSERT_TRUE(t);
  const size_t mark = fx.mark();
  answer_acquire(first, Outcome::kOk, 7);
  EXPECT_EQ(fx.count(Fx::kRelease, mark), 0u);
  EXPECT_TRUE(t->valid());
  EXPECT_FALSE(fx.was_revoked(t));
}

}  // namespace
}  // namespace simba::node_test
