// Tests of the core Node: the handover order of a stop or step-down, and
// release broadcasts. The fixture is in node_fixture.h.
#include <gtest/gtest.h>

#include <vector>

#include "core/node_fixture.h"

namespace simba::node_test {
namespace {

// ===========================================================================
// Handover: stop and step-down

TEST_F(NodeTest, StopRevokesFirstThenReleasesWithTheTokenThenDeliversRevoked) {
  start_live();
  auto [a, ta] = leader("a", 7);
  const size_t mark = fx.mark();
  ASSERT_TRUE(stop(a, now()));
  EXPECT_FALSE(ta->valid());
  EXPECT_EQ(ta->revoked(), RevokeReason::kStopped);
  EXPECT_EQ(fx.kinds(mark), (std::vector<Fx>{Fx::kTermEnded, Fx::kRelease}));
  const FxCall rel = fx.of(Fx::kRelease, mark)[0];
  EXPECT_EQ(rel.name, "a");
  EXPECT_EQ(rel.token, 7u);
  EXPECT_EQ(rel.session, "s1");
  EXPECT_EQ(rel.timeout, kRenew);
  EXPECT_EQ(view_of(a)->state, "releasing");
  // Stopping twice is refused.
  EXPECT_FALSE(stop(a, now()));
  advance(ms(500));
  EXPECT_FALSE(fx.was_revoked(ta));
  answer_release(fx.take(Fx::kRelease));
  EXPECT_EQ(fx.kinds(mark),
            (std::vector<Fx>{Fx::kTermEnded, Fx::kRelease, Fx::kRevoked, Fx::kStopped}));
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kStopped);
  EXPECT_FALSE(view_of(a).has_value());
  // Nothing more for it.
  auto_keep_alive = true;
  const size_t after = fx.mark();
  run_until(now() + ms(30000));
  EXPECT_TRUE(fx.for_contender(a, after).empty());
  EXPECT_TRUE(acquires_since(after, "a").empty());
  EXPECT_FALSE(stop(a, now()));
}

// Handover order with leader work (seed, "Handover Order"): revoke, wait for
// the work to exit, THEN release with the token, THEN onRevoked and the stop.
TEST_F(NodeTest, StopWithWorkWaitsForTheWorkBeforeReleasing) {
  start_live();
  auto_keep_alive = true;
  auto [a, ta] = leader("a", 7, /*with_work=*/true);
  const size_t mark = fx.mark();
  ASSERT_TRUE(stop(a, now()));
  EXPECT_FALSE(ta->valid());
  EXPECT_EQ(ta->revoked(), RevokeReason::kStopped);
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kTermEnded}));
  EXPECT_EQ(view_of(a)->state, "draining");
  // The session goes on being renewed while the work finishes: the lease stays
  // held, so no other node starts the same work meanwhile.
  run_until(now() + ms(3000));
  EXPECT_TRUE(releases_since(mark).empty());
  EXPECT_FALSE(stop(a, now()));
  work_done(a, 6, now());  // another term's token: ignored
  EXPECT_TRUE(releases_since(mark).empty());
  work_done(a, 7, now());
  ASSERT_EQ(releases_since(mark).size(), 1u);
  EXPECT_EQ(releases_since(mark)[0].token, 7u);
  EXPECT_FALSE(fx.was_revoked(ta));
  answer_release(take_release());
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kTermEnded, Fx::kRevoked, Fx::kStopped}));
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kStopped);
}

// Work that ignores interruption delays the handover by at most the term's
// remaining time at the stop: renewals during the wait do not extend it.
TEST_F(NodeTest, StopWithWorkReleasesAtTheDeadlineAsItWasAtTheStop) {
  start_live();
  auto_keep_alive = true;
  auto [a, ta] = leader("a", 3, /*with_work=*/true);
  run_until(now() + ms(2000));
  const TimePoint deadline_at_stop = now() + ta->remaining();
  const size_t mark = fx.mark();
  ASSERT_TRUE(step_down(a, ms(0), now()));
  run_until(deadline_at_stop - k1ns);
  EXPECT_TRUE(releases_since(mark).empty()) << fx.dump();
  EXPECT_GT(fx.of(Fx::kKeepAlive, mark).size(), 0u) << "the session was renewed meanwhile";
  run_until(deadline_at_stop);
  ASSERT_EQ(releases_since(mark).size(), 1u);
  answer_release(take_release());
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kSteppedDown);
  // The late work_done of that term changes nothing.
  const size_t after = fx.mark();
  work_done(a, 3, now());
  EXPECT_TRUE(releases_since(after).empty());
}

// A term lost any other way is not waited for.
TEST_F(NodeTest, TermLostOtherwiseIsRevokedAtOnceEvenWithWorkRunning) {
  start_live();
  auto [a, ta] = leader("a", 4, /*with_work=*/true);
  run_until(now() + kRenew);  // the keep-alive goes out
  const size_t mark = fx.mark();
  ka_fail(Outcome::kExpired);
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kSessionExpired);
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kTermEnded, Fx::kRevoked}));
}

// Work that returns while its term is still valid hands the lease over
// (STEPPED_DOWN, released with the token) and the election contends again.
TEST_F(NodeTest, WorkReturningWhileLeaderHandsOverAndContendsAgain) {
  start_live();
  auto [a, ta] = leader("a", 9, /*with_work=*/true);
  const size_t mark = fx.mark();
  work_done(a, 9, now());
  EXPECT_EQ(ta->revoked(), RevokeReason::kSteppedDown);
  ASSERT_EQ(releases_since(mark).size(), 1u);
  answer_release(take_release());
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kSteppedDown);
  EXPECT_FALSE(fx.finished(a));
  EXPECT_EQ(view_of(a)->state, "candidate");
  run_until(now() + kRenew);
  EXPECT_FALSE(acquires_since(mark, "a").empty());
  auto tb = win("a", 10);
  ASSERT_TRUE(tb);
  EXPECT_TRUE(tb->valid());
}

// close() drains too: the session's close (which frees every lease) goes out
// only once every term's work exited, or its deadline at the close passed.
TEST_F(NodeTest, CloseWaitsForWorkBeforeClosingTheSession) {
  start_live();
  auto [a, ta] = leader("a", 1, /*with_work=*/true);
  auto [b, tb] = leader("b", 2);
  auto [c, tc] = leader("c", 3, /*with_work=*/true);
  const TimePoint deadline = now() + tc->remaining();  // as at the close
  const size_t mark = fx.mark();
  node->close(now());
  EXPECT_FALSE(ta->valid());
  EXPECT_FALSE(tb->valid());
  EXPECT_FALSE(tc->valid());
  EXPECT_TRUE(fx.of(Fx::kClose, mark).empty());
  EXPECT_TRUE(releases_since(mark).empty());
  work_done(a, 1, now());
  EXPECT_TRUE(fx.of(Fx::kClose, mark).empty());
  run_until(deadline - k1ns);
  EXPECT_TRUE(fx.of(Fx::kClose, mark).empty());
  run_until(deadline);  // c's work never returned
  ASSERT_EQ(fx.of(Fx::kClose, mark).size(), 1u);
  EXPECT_TRUE(releases_since(mark).empty()) << "the close is the release";
  answer_close(fx.take(Fx::kClose));
  EXPECT_TRUE(node->closed());
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kStopped);
  EXPECT_EQ(fx.revoked_reason(tc), RevokeReason::kStopped);
}

TEST_F(NodeTest, StopDeliversRevokedAfterAFailedOrTimedOutRelease) {
  start_live();
  auto [a, ta] = leader("a", 1);
  auto [b, tb] = leader("b", 2);
  ASSERT_TRUE(stop(a, now()));
  answer_release(take_release(), Outcome::kError);
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kStopped);
  EXPECT_TRUE(fx.finished(a));
  ASSERT_TRUE(stop(b, now()));
  const TimePoint sent = now();
  auto_keep_alive = true;
  run_until(sent + kRenew - k1ns);
  EXPECT_FALSE(fx.was_revoked(tb));
  run_until(sent + kRenew);
  EXPECT_EQ(fx.revoked_reason(tb), RevokeReason::kStopped);
  EXPECT_TRUE(fx.finished(b));
}

// ===========================================================================
// A failed release is sent again (ADR 0030): a release that fails on a cut or
// timed-out connection would leave the lease held until the session expires,
// turning a handover into a failover.

// Keep-alives answered as a store that still holds `owned` for the session.
std::vector<OwnedLease> still(const std::string& name, uint64_t token) {
  return {OwnedLease{name, token}};
}

TEST_F(NodeTest, AFailedReleaseIsSentAgainWithItsTokenAfterABackoff) {
  start_live();
  auto [a, ta] = leader("a", 7);
  const size_t mark = fx.mark();
  ASSERT_TRUE(stop(a, now()));
  const TimePoint t0 = now();
  answer_release(take_release(), Outcome::kError);
  // onRevoked and the stop do not wait for the retries.
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kStopped);
  EXPECT_TRUE(fx.finished(a));
  run_until(t0 + kMinBackoff - k1ns);
  EXPECT_EQ(releases_since(mark).size(), 1u);
  run_until(t0 + kMinBackoff);
  ASSERT_EQ(releases_since(mark).size(), 2u);
  FxCall again = take_release();
  EXPECT_EQ(again.name, "a");
  EXPECT_EQ(again.token, 7u);
  EXPECT_EQ(again.session, "s1");
  EXPECT_EQ(again.timeout, kRenew);
  // Failing again: the wait doubles.
  answer_release(again, Outcome::kError);
  run_until(now() + 2 * kMinBackoff - k1ns);
  EXPECT_EQ(releases_since(mark).size(), 2u);
  run_until(now() + k1ns);
  ASSERT_EQ(releases_since(mark).size(), 3u);
  answer_release(take_release());
  // Answered: nothing more.
  run_until(now() + ms(3000));
  EXPECT_EQ(releases_since(mark).size(), 3u);
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kTermEnded, Fx::kRevoked, Fx::kStopped}));
}

TEST_F(NodeTest, ATimedOutReleaseIsSentAgain) {
  start_live();
  auto [a, ta] = leader("a", 3);
  const size_t mark = fx.mark();
  ASSERT_TRUE(stop(a, now()));
  const TimePoint t0 = now();
  run_until(t0 + kRenew);  // the release's call timeout; a keep-alive goes out
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kStopped);
  ka_ok(kLease, still("a", 3));
  run_until(t0 + kRenew + kMinBackoff);
  const auto rel = releases_since(mark);
  ASSERT_EQ(rel.size(), 2u);
  EXPECT_EQ(rel[1].token, 3u);
  EXPECT_EQ(rel[1].at, t0 + kRenew + kMinBackoff);
  // A late answer to the first one is ignored; the retry's counts.
  answer_release(rel[0]);
  answer_release(rel[1]);
  run_until(now() + ms(10000));
  EXPECT_EQ(releases_since(mark).size(), 2u);
}

// The retries end at the session's local deadline: each call ends by it, and
// none is sent at or after it.
TEST_F(NodeTest, ReleaseRetriesEndAtTheLocalDeadline) {
  const TimePoint t0 = now();
  start_live();
  auto [a, ta] = leader("a", 1);
  const size_t mark = fx.mark();
  ASSERT_TRUE(stop(a, now()));
  // Every release and keep-alive fails at once: no renewal, deadline t0 + 14.8 s.
  while (now() < t0 + kValidity + kRenew) {
    bool answered = false;
    for (const FxCall& c : fx.pending(Fx::kRelease)) {
      answer_release(fx.take(Fx::kRelease), Outcome::kError);
      EXPECT_LE(c.at + c.timeout, t0 + kValidity);
      answered = true;
    }
    if (!fx.pending(Fx::kKeepAlive).empty()) {
      ka_fail(Outcome::kError);
      answered = true;
    }
    if (!answered) advance(ms(10));
  }
  const auto rel = releases_since(mark);
  ASSERT_GE(rel.size(), 6u);
  for (const FxCall& c : rel) {
    EXPECT_EQ(c.token, 1u);
    EXPECT_EQ(c.session, "s1");
    EXPECT_LT(c.at, t0 + kValidity);
  }
}

TEST_F(NodeTest, ACloseSupersedesReleaseRetries) {
  start_live();
  auto [a, ta] = leader("a", 1);
  auto [b, tb] = leader("b", 2);
  ASSERT_TRUE(stop(a, now()));
  answer_release(take_release(), Outcome::kError);
  const size_t mark = fx.mark();
  node->close(now());
  EXPECT_EQ(fx.count(Fx::kClose, mark), 1u);
  run_until(now() + ms(1000));
  EXPECT_TRUE(releases_since(mark).empty()) << "the close frees every lease";
  answer_close(fx.take(Fx::kClose));
  EXPECT_TRUE(node->closed());
}

TEST_F(NodeTest, NothingIsRetriedForASessionThatEnded) {
  const TimePoint t0 = now();
  start_live();
  auto [a, ta] = leader("a", 1);
  ASSERT_TRUE(stop(a, now()));
  answer_release(take_release(), Outcome::kError);
  run_until(t0 + kMinBackoff);
  ASSERT_EQ(fx.pending_count(Fx::kRelease), 1u);  // the retry, in flight
  run_until(t0 + kRenew);                         // the keep-alive goes out
  const size_t mark = fx.mark();
  answer_keep_alive(fx.take_last(Fx::kKeepAlive), Outcome::kExpired, Duration::zero());
  // The retry in flight times out (at t0 + 5.1 s): not sent again.
  run_until(now() + ms(10000));
  EXPECT_TRUE(releases_since(mark).empty());
}

// A retry carries the token of the term it releases: once the election won a
// later term of the name, the retries never free it.
TEST_F(NodeTest, AReleaseRetryNeverReleasesALaterTerm) {
  start_live();
  auto [a, ta] = leader("a", 1);
  const size_t mark = fx.mark();
  ASSERT_TRUE(step_down(a, Duration::zero(), now()));
  answer_release(take_release(), Outcome::kError);
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kSteppedDown);
  // The election contends again and wins token 2 before the retry is answered.
  ASSERT_TRUE(run_until_true([&] { return !fx.pending(Fx::kAcquire).empty(); }, now() + kRenew));
  auto t2 = win("a", 2);
  ASSERT_TRUE(t2);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(run_until_true([&] { return !fx.pending(Fx::kRelease).empty(); }, now() + kRenew));
    answer_release(take_release(), Outcome::kError);
  }
  for (const FxCall& c : releases_since(mark)) EXPECT_EQ(c.token, 1u);
  EXPECT_TRUE(t2->valid());
}

// A keep-alive that still lists the lease leaves it to the retry (no second
// release as an orphan); one sent after the failed release that no longer
// lists it shows it free: the retries stop.
TEST_F(NodeTest, AKeepAliveThatNoLongerListsTheLeaseEndsItsRetry) {
  start_live();
  auto [a, ta] = leader("a", 5);
  const size_t mark = fx.mark();
  ASSERT_TRUE(stop(a, now()));
  answer_release(take_release(), Outcome::kTimeout);
  auto next_call = [&](Fx kind) {
    EXPECT_TRUE(run_until_true([&] { return fx.pending_count(kind) > 0; }, now() + kRenew))
        << fx.dump();
  };
  // A retry fails and waits; the keep-alive then still lists the lease.
  next_call(Fx::kKeepAlive);
  for (const FxCall& c : fx.pending(Fx::kRelease)) answer_release(c, Outcome::kError);
  const size_t sent = releases_since(mark).size();
  ka_ok(kLease, still("a", 5));
  EXPECT_EQ(releases_since(mark).size(), sent) << "released twice";
  // The next retry goes out; the next keep-alive no longer lists the lease.
  next_call(Fx::kRelease);
  const FxCall in_flight = fx.pending(Fx::kRelease).back();
  next_call(Fx::kKeepAlive);
  ka_ok(kLease, std::vector<OwnedLease>{});
  answer_release(in_flight, Outcome::kError);
  const size_t after = releases_since(mark).size();
  auto_keep_alive = true;
  run_until(now() + ms(14000));
  EXPECT_EQ(releases_since(mark).size(), after);
}

// The answer to a timed-out release comes late and says it ran: no retry.
TEST_F(NodeTest, ALateAnswerThatTheReleaseRanEndsItsRetry) {
  start_live();
  auto [a, ta] = leader("a", 9);
  const size_t mark = fx.mark();
  ASSERT_TRUE(stop(a, now()));
  const FxCall first = fx.of(Fx::kRelease, mark)[0];
  run_until(now() + kRenew);  // timed out: a retry in 100 ms
  answer_release(first);      // late, Ok
  run_until(now() + ms(1000));
  EXPECT_EQ(releases_since(mark).size(), 1u);
}

TEST_F(NodeTest, MetricsCountKeepAlivesRevocationsAndHandovers) {
  const TimePoint t0 = now();
  start_live();
  auto [a, ta] = leader("a", 1);
  run_until(t0 + kRenew);
  advance(ms(3));
  ka_ok();  // answered 3 ms after it was sent
  NodeView v = node->view();
  EXPECT_EQ(v.metrics.keep_alive_rtt.count(), 1u);
  EXPECT_NEAR(v.metrics.keep_alive_rtt.sum_seconds(), 0.003, 1e-9);
  EXPECT_EQ(v.metrics.remaining_at_renewal.count(), 1u);
  EXPECT_EQ(v.metrics.keep_alive_failures, 0u);
  EXPECT_EQ(v.leases_held, 1u);
  run_until(t0 + 2 * kRenew + ms(3));
  ka_fail(Outcome::kError);
  EXPECT_EQ(node->view().metrics.keep_alive_failures, 1u);
  ASSERT_TRUE(stop(a, now()));
  advance(ms(7));
  answer_release(take_release());
  v = node->view();
  EXPECT_EQ(v.metrics.revocations[static_cast<int>(RevokeReason::kStopped)], 1u);
  EXPECT_EQ(v.metrics.handover.count(), 1u);
  EXPECT_NEAR(v.metrics.handover.sum_seconds(), 0.007, 1e-9);
  EXPECT_EQ(v.leases_held, 0u);
  // A term lost to a take-over counts under its own reason, with no handover.
  auto [b, tb] = leader("b", 2);
  (void)b;
  auto_keep_alive = false;
  run_until(now() + kRenew);
  ka_ok(kLease, std::vector<OwnedLease>{});
  v = node->view();
  EXPECT_EQ(v.metrics.revocations[static_cast<int>(RevokeReason::kTakenOver)], 1u);
  EXPECT_EQ(v.metrics.handover.count(), 1u);
}

TEST_F(NodeTest, StopOfACandidateElectionStopsAtOnce) {
  start_live();
  const ContenderId a = add_election("a", now());
  held("a");
  size_t mark = fx.mark();
  ASSERT_TRUE(stop(a, now()));
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kStopped}));
  auto_keep_alive = true;
  run_until(now() + ms(20000));
  EXPECT_TRUE(acquires_since(mark, "a").empty());
  EXPECT_FALSE(stop(a, now()));
  EXPECT_FALSE(stop(12345, now()));
}

TEST_F(NodeTest, StepDownRevokesReleasesAcksAndDoesNotContendDuringTheCooldown) {
  start_live();
  auto_keep_alive = true;
  auto [a, ta] = leader("a", 3);
  advance(ms(1000));
  const TimePoint stepped = now();
  const size_t mark = fx.mark();
  ASSERT_TRUE(step_down(a, ms(20000), now()));
  EXPECT_FALSE(ta->valid());
  EXPECT_EQ(ta->revoked(), RevokeReason::kSteppedDown);
  const auto rel = releases_since(mark);
  ASSERT_EQ(rel.size(), 1u);
  EXPECT_EQ(rel[0].token, 3u);
  EXPECT_FALSE(fx.was_revoked(ta));
  advance(ms(1000));
  answer_release(fx.take(Fx::kRelease));
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kTermEnded, Fx::kRevoked, Fx::kSteppedDown}));
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kSteppedDown);
  EXPECT_EQ(view_of(a)->state, "cooldown");
  // No attempt during the cooldown, counted from the step-down, not even on a
  // release broadcast.
  run_until(stepped + ms(10000));
  node->on_released("a", now());
  run_until(stepped + ms(20000) - k1ns);
  EXPECT_TRUE(acquires_since(mark, "a").empty());
  run_until(stepped + ms(20000));
  const auto acq = acquires_since(mark, "a");
  ASSERT_EQ(acq.size(), 1u);
  EXPECT_EQ(acq[0].at, stepped + ms(20000));
  auto t2 = win("a", 4);
  ASSERT_TRUE(t2);
}

TEST_F(NodeTest, StepDownWhenNotLeaderAcksAtOnce) {
  start_live();
  auto_keep_alive = true;
  const ContenderId a = add_election("a", now());
  held("a");
  const TimePoint stepped = now();
  size_t mark = fx.mark();
  ASSERT_TRUE(step_down(a, ms(12000), now()));
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kSteppedDown}));
  run_until(stepped + ms(12000) - k1ns);
  EXPECT_TRUE(acquires_since(mark, "a").empty());
  run_until(stepped + ms(12000));
  ASSERT_EQ(acquires_since(mark, "a").size(), 1u);
  // While acquiring: acked at once; the attempt is abandoned and a late win
  // released.
  const FxCall acq = take_acquire("a");
  mark = fx.mark();
  ASSERT_TRUE(step_down(a, ms(5000), now()));
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kSteppedDown}));
  answer_acquire(acq, Outcome::kOk, 8);
  EXPECT_EQ(fx.count(Fx::kElected, mark), 0u);
  ASSERT_EQ(releases_since(mark).size(), 1u);
  EXPECT_EQ(releases_since(mark)[0].token, 8u);
  // Step-down of a lock is refused.
  const ContenderId l = add_lock("l", TimePoint::max(), false, now());
  EXPECT_FALSE(step_down(l, ms(1000), now()));
  EXPECT_FALSE(step_down(999, ms(1000), now()));
}

TEST_F(NodeTest, StopDuringAStepDownHandover) {
  start_live();
  auto [a, ta] = leader("a", 1);
  const size_t mark = fx.mark();
  ASSERT_TRUE(step_down(a, ms(10000), now()));
  ASSERT_TRUE(stop(a, now()));
  EXPECT_EQ(fx.count(Fx::kRelease, mark), 1u);
  answer_release(take_release());
  EXPECT_EQ(kinds_of(a, mark),
            (std::vector<Fx>{Fx::kTermEnded, Fx::kRevoked, Fx::kSteppedDown, Fx::kStopped}));
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kSteppedDown);
  EXPECT_FALSE(step_down(a, ms(1), now()));
}

TEST_F(NodeTest, StepDownTwiceDuringAHandoverAcksBoth) {
  start_live();
  auto [a, ta] = leader("a", 1);
  const size_t mark = fx.mark();
  ASSERT_TRUE(step_down(a, ms(10000), now()));
  ASSERT_TRUE(step_down(a, ms(10000), now()));
  EXPECT_EQ(fx.count(Fx::kRelease, mark), 1u);
  answer_release(take_release());
  EXPECT_EQ(kinds_of(a, mark),
            (std::vector<Fx>{Fx::kTermEnded, Fx::kRevoked, Fx::kSteppedDown, Fx::kSteppedDown}));
}

TEST_F(NodeTest, AddElectionTwiceForTheSameNameReturnsZero) {
  start_live();
  const ContenderId a = add_election("a", now());
  ASSERT_NE(a, 0u);
  const size_t mark = fx.mark();
  EXPECT_EQ(add_election("a", now()), 0u);
  EXPECT_EQ(add_lock("a", TimePoint::max(), false, now()), 0u);
  EXPECT_EQ(fx.mark(), mark);
  const ContenderId l = add_lock("l", TimePoint::max(), false, now());
  ASSERT_NE(l, 0u);
  EXPECT_EQ(add_election("l", now()), 0u);
  // Ids are never reused.
  EXPECT_NE(add_election("b", now()), a);
}

// ===========================================================================
// Release broadcasts and the holder's remaining time

// The broadcast of this node's own release is an echo: a step-down without
// cooldown does not win the lease straight back on it (the others get the
// first go); it retries at its normal pace. Another release is not ignored.
TEST_F(NodeTest, OwnReleaseBroadcastDoesNotTriggerAnAttempt) {
  start_live();
  auto [a, ta] = leader("a", 5);
  const size_t mark = fx.mark();
  ASSERT_TRUE(step_down(a, ms(0), now()));
  answer_release(take_release());
  EXPECT_EQ(view_of(a)->state, "candidate");
  node->on_released("a", now());  // our own release, echoed
  EXPECT_TRUE(acquires_since(mark, "a").empty());
  run_until(now() + kRenew);
  ASSERT_EQ(acquires_since(mark, "a").size(), 1u) << "the normal retry";
  held("a");
  const size_t later = fx.mark();
  node->on_released("a", now());  // someone else's release
  EXPECT_EQ(acquires_since(later, "a").size(), 1u);
}

TEST_F(NodeTest, ReleaseBroadcastTriggersAnImmediateAttempt) {
  start_live();
  auto_keep_alive = true;
  const ContenderId a = add_election("a", now());
  held("a");
  advance(ms(1000));
  const size_t mark = fx.mark();
  node->on_released("other", now());
  EXPECT_EQ(fx.count(Fx::kAcquire, mark), 0u);
  node->on_released("a", now());
  const auto acq = acquires_since(mark, "a");
  ASSERT_EQ(acq.size(), 1u);
  EXPECT_EQ(acq[0].at, now());
  auto t = win("a", 2);
  ASSERT_TRUE(t);
  // A leader ignores broadcasts of its own name.
  const size_t mark2 = fx.mark();
  node->on_released("a", now());
  EXPECT_EQ(fx.count(Fx::kAcquire, mark2), 0u);
  (void)a;
}

TEST_F(NodeTest, HeldWithTheHoldersRemainingTimeRetriesRightAfterIt) {
  start_live();
  auto_keep_alive = true;
  ASSERT_NE(add_election("a", now()), 0u);
  auto next_delay = [&](Duration holder_remaining) {
    held("a", holder_remaining);
    const TimePoint answered = now();
    const size_t mark = fx.mark();
    EXPECT_TRUE(
        run_until_true([&] { return fx.count(Fx::kAcquire, mark) > 0; }, answered + ms(10000)));
    return fx.of(Fx::kAcquire, mark)[0].at - answered;
  };
  // Sooner than the jitter schedule: at holder_remaining + margin, plus up to
  // an eighth of the retry jitter (RetryAtTheHoldersExpiryIsJittered).
  for (const Duration r : {ms(1000), ms(0), ms(2100)}) {
    const Duration d = next_delay(r);
    EXPECT_GE(d, r + kMargin);
    EXPECT_LT(d, r + kMargin + kJitter / 8);
  }
  // Later than the schedule: the schedule wins.
  for (int i = 0; i < 20; ++i) {
    const Duration d = next_delay(ms(10000));
    EXPECT_GE(d, kRenew / 2);
    EXPECT_LT(d, kRenew / 2 + kJitter);
  }
  // Unknown (negative): the schedule.
  const Duration d = next_delay(kNever);
  EXPECT_GE(d, kRenew / 2);
  EXPECT_LT(d, kRenew / 2 + kJitter);
}

}  // namespace
}  // namespace simba::node_test
