// Tests of the core Node: its session, keep-alives, the local deadline, and a
// backend granting less than the lease. The fixture is in node_fixture.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/node_fixture.h"
#include "core/timing.h"

namespace simba::node_test {
namespace {

// ===========================================================================
// Sessions and the local deadline

TEST_F(NodeTest, StartOpensOneSessionWithTheLeaseAndARenewIntervalTimeout) {
  make();
  EXPECT_EQ(node->status(), SessionStatus::kOpening);
  node->start(now());
  ASSERT_EQ(fx.count(Fx::kOpen), 1u);
  const FxCall o = fx.of(Fx::kOpen)[0];
  EXPECT_EQ(o.lease, kLease);
  EXPECT_EQ(o.timeout, kRenew);
  EXPECT_EQ(node->status(), SessionStatus::kOpening);
  EXPECT_EQ(node->view().remaining, Duration::zero());
}

TEST_F(NodeTest, OpenReplyGoesLiveWithTheDeadlineCountedFromSentAt) {
  make();
  const TimePoint sent = now();
  node->start(sent);
  clock.advance(ms(2000));  // a slow reply
  open_ok(kLease, "s1");
  EXPECT_EQ(node->status(), SessionStatus::kLive);
  const NodeView v = node->view();
  EXPECT_EQ(v.session_id, "s1");
  EXPECT_EQ(v.remaining, sent + kValidity - now());  // 12.8 s, not 14.8 s
  EXPECT_EQ(v.remaining, ms(12800));
  EXPECT_EQ(v.renew_period, kRenew);
  EXPECT_FALSE(v.lease_shortened);
  EXPECT_EQ(v.sessions_opened, 1u);
  EXPECT_EQ(count_session_event(SessionEvent::kOpened), 1u);
  // A term adopted now ends at the same deadline.
  auto [id, term] = leader("a", 1);
  ASSERT_TRUE(term);
  EXPECT_EQ(term->remaining(), sent + kValidity - now());
  EXPECT_EQ(term->session_id(), "s1");
  // The first keep-alive goes out a renew interval after the open was sent.
  run_until(sent + kRenew - k1ns);
  EXPECT_EQ(fx.count(Fx::kKeepAlive), 0u);
  run_until(sent + kRenew);
  ASSERT_EQ(fx.count(Fx::kKeepAlive), 1u);
  EXPECT_EQ(fx.of(Fx::kKeepAlive)[0].at, sent + kRenew);
}

TEST_F(NodeTest, SlowKeepAliveReplyOnlyShortensTheDeadline) {
  const TimePoint t0 = now();
  start_live();
  auto [id, term] = leader("a", 1);
  run_until(t0 + kRenew);
  ASSERT_EQ(fx.pending_count(Fx::kKeepAlive), 1u);
  const FxCall k = fx.pending(Fx::kKeepAlive)[0];
  EXPECT_EQ(k.at, t0 + kRenew);
  EXPECT_EQ(k.session, "s1");
  EXPECT_EQ(k.lease, kLease);
  EXPECT_EQ(k.timeout, kRenew);
  advance(ms(3000));  // the reply takes 3 s
  ka_ok();
  // deadline = sentAt + 14.8 s, whatever the reply time.
  EXPECT_EQ(node->view().remaining, k.at + kValidity - now());
  EXPECT_EQ(term->remaining(), ms(11800));
  // The backend reporting less remaining time shortens it further.
  run_until(t0 + 2 * kRenew);
  const FxCall k2 = ka_ok(ms(14000));
  EXPECT_EQ(k2.at, t0 + 2 * kRenew);  // renewals count from sentAt, not the reply
  EXPECT_EQ(term->remaining(), local_deadline(k2.at, ms(14000), 0.01, kMargin) - now());
  EXPECT_EQ(term->remaining(), ms(13810));
  EXPECT_TRUE(term->valid());
}

TEST_F(NodeTest, OneKeepAlivePerRenewIntervalWhateverTheNumberOfElections) {
  const TimePoint t0 = now();
  start_live();
  std::vector<TermRef> terms;
  for (int i = 0; i < 10; ++i) terms.push_back(leader("lead" + std::to_string(i), 1).second);
  for (int i = 0; i < 10; ++i) ASSERT_NE(add_election("cand" + std::to_string(i), now()), 0u);
  // Candidates keep trying (held elsewhere); keep-alives answered at once.
  auto answer_candidates = [&] {
    for (const FxCall& c : fx.pending(Fx::kAcquire)) {
      answer_acquire(c, Outcome::kHeld, 0, kNever);
    }
  };
  for (int step = 0; step < 100000; ++step) {
    answer_candidates();
    answer_keep_alives();
    const auto w = node->next_wakeup();
    ASSERT_TRUE(w.has_value());
    if (*w > t0 + ms(60000)) break;
    clock.set(std::max(now(), *w));
    node->on_timer(now());
  }
  const auto kas = fx.of(Fx::kKeepAlive);
  ASSERT_EQ(kas.size(), 12u);  // at 5, 10, ..., 60 s
  for (size_t i = 0; i < kas.size(); ++i) {
    EXPECT_EQ(kas[i].at, t0 + kRenew * static_cast<int64_t>(i + 1)) << i;
    EXPECT_EQ(kas[i].session, "s1");
  }
  for (const auto& t : terms) EXPECT_TRUE(t->valid());
  EXPECT_GT(fx.count(Fx::kAcquire), 100u);
  EXPECT_EQ(node->view().keep_alives, 12u);
}

TEST_F(NodeTest, KeepAliveReplyAfterTheDeadlineNeverExtendsIt) {
  const TimePoint t0 = now();
  start_live();
  const TimePoint deadline = t0 + kValidity;
  auto [id, term] = leader("a", 1);
  // Keep-alive at 5 s: no answer; it times out at 10 s; the retry goes at
  // 10 s + (14.8 − 10) / 2 = 12.4 s.
  run_until(t0 + ms(12400));
  const auto kas = fx.of(Fx::kKeepAlive);
  ASSERT_EQ(kas.size(), 2u);
  EXPECT_EQ(kas[1].at, t0 + ms(12400));
  // The engine is late: its loop handles the reply before the deadline timer,
  // after the deadline. Nobody read the term in between.
  clock.set(deadline + ms(200));
  const size_t mark = fx.mark();
  answer_keep_alive(kas[1], Outcome::kOk, kLease);
  // The session ended: it is not revived by the late renewal.
  EXPECT_FALSE(term->valid());
  EXPECT_EQ(term->remaining(), Duration::zero());
  EXPECT_TRUE(fx.was_revoked(term));
  EXPECT_EQ(fx.revoked_reason(term), RevokeReason::kDeadlinePassed);
  EXPECT_EQ(node->status(), SessionStatus::kOpening);
  EXPECT_EQ(fx.count(Fx::kOpen, mark), 1u);
  run_until(now() + ms(1));
  EXPECT_FALSE(term->valid());
}

TEST_F(NodeTest, KeepAliveReplyAfterTheDeadlineAReaderAlreadySawIsIgnored) {
  const TimePoint t0 = now();
  start_live();
  auto [id, term] = leader("a", 1);
  run_until(t0 + ms(12400));
  const auto kas = fx.of(Fx::kKeepAlive);
  ASSERT_EQ(kas.size(), 2u);
  // A process waking from a pause reads the term first: false at once.
  clock.set(t0 + kValidity);
  EXPECT_FALSE(term->valid());
  answer_keep_alive(kas[1], Outcome::kOk, kLease);
  EXPECT_FALSE(term->valid());
  EXPECT_EQ(fx.revoked_reason(term), RevokeReason::kDeadlinePassed);
  EXPECT_EQ(node->status(), SessionStatus::kOpening);
}

TEST_F(NodeTest, KeepAliveReplyAfterTheDeadlineTimerFiredIsIgnored) {
  const TimePoint t0 = now();
  start_live();
  auto [id, term] = leader("a", 1);
  run_until(t0 + ms(12400));
  const FxCall late = fx.of(Fx::kKeepAlive)[1];
  run_until(t0 + kValidity);
  EXPECT_EQ(fx.revoked_reason(term), RevokeReason::kDeadlinePassed);
  ASSERT_EQ(fx.pending_count(Fx::kOpen), 1u);
  const size_t mark = fx.mark();
  answer_keep_alive(late, Outcome::kOk, kLease);
  EXPECT_EQ(node->status(), SessionStatus::kOpening);
  EXPECT_EQ(node->view().session_id, "");
  EXPECT_FALSE(term->valid());
  EXPECT_EQ(fx.count(Fx::kElected, mark), 0u);
  EXPECT_EQ(fx.count(Fx::kRevoked, mark), 0u);
  // The next session is a new one.
  open_ok(kLease, "s2");
  EXPECT_EQ(node->view().session_id, "s2");
  EXPECT_FALSE(term->valid());
}

TEST_F(NodeTest, DeadlinePassedRevokesEveryTermAtOnceClosesAndOpensANewSession) {
  const TimePoint t0 = now();
  start_live();
  auto [a, ta] = leader("a", 1);
  auto [b, tb] = leader("b", 2);
  auto [c, tc] = leader("c", 3);
  // c is being handed over: its release is in flight when the deadline passes.
  ASSERT_TRUE(stop(c, now()));
  const FxCall rel_c = take_release();
  // No keep-alive is answered.
  run_until(t0 + kValidity - k1ns);
  EXPECT_TRUE(ta->valid());
  EXPECT_EQ(ta->remaining(), k1ns);
  EXPECT_EQ(node->status(), SessionStatus::kSuspended);
  const size_t mark = fx.mark();
  run_until(t0 + kValidity);
  EXPECT_FALSE(ta->valid());
  EXPECT_FALSE(tb->valid());
  // Not waited for: revoked at once, no release needed (the session is closed).
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kDeadlinePassed);
  EXPECT_EQ(fx.revoked_reason(tb), RevokeReason::kDeadlinePassed);
  // The handover in progress ends with its own reason.
  EXPECT_EQ(fx.revoked_reason(tc), RevokeReason::kStopped);
  EXPECT_TRUE(fx.finished(c));
  EXPECT_EQ(count_session_event(SessionEvent::kExpired, mark), 1u);
  EXPECT_EQ(fx.count(Fx::kRelease, mark), 0u);
  const auto closes = fx.of(Fx::kClose, mark);
  ASSERT_EQ(closes.size(), 1u);
  EXPECT_EQ(closes[0].session, "s1");
  ASSERT_EQ(fx.count(Fx::kOpen, mark), 1u);
  EXPECT_EQ(node->status(), SessionStatus::kOpening);
  // The late release reply changes nothing.
  answer_release(rel_c);
  // A new session: the elections contend again on it.
  open_ok(kLease, "s2");
  EXPECT_EQ(acquires_since(mark, "a").size(), 1u);
  EXPECT_EQ(acquires_since(mark, "b").size(), 1u);
  EXPECT_EQ(acquires_since(mark, "a")[0].session, "s2");
  EXPECT_EQ(acquires_since(mark, "c").size(), 0u);
  auto ta2 = win("a", 4);
  ASSERT_TRUE(ta2);
  EXPECT_NE(ta2.get(), ta.get());
  EXPECT_TRUE(ta2->valid());
  EXPECT_FALSE(ta->valid());  // the old term stays ended
}

TEST_F(NodeTest, KeepAliveExpiredRevokesEveryTermAndOpensANewSession) {
  const TimePoint t0 = now();
  start_live();
  auto [a, ta] = leader("a", 1);
  auto [b, tb] = leader("b", 2);
  run_until(t0 + kRenew);
  const size_t mark = fx.mark();
  ka_fail(Outcome::kExpired);
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kSessionExpired);
  EXPECT_EQ(fx.revoked_reason(tb), RevokeReason::kSessionExpired);
  EXPECT_FALSE(ta->valid());
  EXPECT_FALSE(tb->valid());
  EXPECT_EQ(count_session_event(SessionEvent::kExpired, mark), 1u);
  EXPECT_EQ(node->status(), SessionStatus::kOpening);
  EXPECT_EQ(fx.count(Fx::kRelease, mark), 0u);
  ASSERT_EQ(fx.count(Fx::kOpen, mark), 1u);
  // Never revived: a new session with a new id, and the elections contend again.
  open_ok(kLease, "s2");
  EXPECT_EQ(node->view().session_id, "s2");
  EXPECT_EQ(acquires_since(mark, "a").size(), 1u);
  EXPECT_EQ(acquires_since(mark, "b").size(), 1u);
  auto ta2 = win("a", 3);
  ASSERT_TRUE(ta2);
  EXPECT_EQ(ta2->session_id(), "s2");
  EXPECT_FALSE(ta->valid());
  EXPECT_EQ(node->view().sessions_opened, 2u);
}

TEST_F(NodeTest, AcquireAnsweredExpiredEndsTheSession) {
  start_live();
  auto [a, ta] = leader("a", 1);
  ASSERT_NE(add_election("b", now()), 0u);
  const size_t mark = fx.mark();
  answer_acquire(take_acquire("b"), Outcome::kExpired);
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kSessionExpired);
  EXPECT_EQ(node->status(), SessionStatus::kOpening);
  EXPECT_EQ(fx.count(Fx::kOpen, mark), 1u);
}

TEST_F(NodeTest, KeepAliveErrorSuspendsAndRetriesWithHalvingBackoffUntilTheDeadline) {
  const TimePoint t0 = now();
  const TimePoint deadline = t0 + kValidity;
  start_live();
  auto [a, ta] = leader("a", 1);
  run_until(t0 + kRenew);
  const size_t mark = fx.mark();
  ka_fail(Outcome::kError);
  EXPECT_EQ(node->status(), SessionStatus::kSuspended);
  EXPECT_EQ(count_session_event(SessionEvent::kSuspended, mark), 1u);
  EXPECT_TRUE(ta->valid());  // suspended is not ended
  // Half the time left, capped at the renew period, at least minBackoff.
  // Left 9.8 s -> 4.9 s, 4.9 -> 2.45, 2.45 -> 1.225, ... then 100 ms steps.
  std::vector<TimePoint> expected;
  TimePoint t = t0 + kRenew;
  for (;;) {
    const Duration left = deadline - t;
    const Duration backoff = std::max(std::min(left / 2, kRenew), kMinBackoff);
    t += backoff;
    if (t >= deadline) break;
    expected.push_back(t);
  }
  ASSERT_GE(expected.size(), 3u);
  EXPECT_EQ(expected[0], t0 + ms(9900));
  EXPECT_EQ(expected[1], t0 + ms(12350));
  EXPECT_EQ(expected[2], t0 + ms(13575));
  for (const TimePoint at : expected) {
    run_until(at - k1ns);
    ASSERT_EQ(fx.pending_count(Fx::kKeepAlive), 0u) << "early keep-alive";
    run_until(at);
    ASSERT_EQ(fx.pending_count(Fx::kKeepAlive), 1u) << "no keep-alive at " << (at - t0).count();
    EXPECT_EQ(fx.pending(Fx::kKeepAlive)[0].at, at);
    ka_fail(Outcome::kError);
    EXPECT_TRUE(ta->valid());
  }
  // One SUSPENDED event, however many failures.
  EXPECT_EQ(count_session_event(SessionEvent::kSuspended, mark), 1u);
  run_until(deadline - k1ns);
  EXPECT_TRUE(ta->valid());
  run_until(deadline);
  EXPECT_FALSE(ta->valid());
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kDeadlinePassed);
  EXPECT_EQ(fx.count(Fx::kKeepAlive, mark), expected.size());
  EXPECT_EQ(node->status(), SessionStatus::kOpening);
}

TEST_F(NodeTest, KeepAliveSuccessAfterAFailureGoesLiveAgain) {
  const TimePoint t0 = now();
  start_live();
  auto [a, ta] = leader("a", 1);
  run_until(t0 + kRenew);
  ka_fail(Outcome::kError);
  ASSERT_EQ(node->status(), SessionStatus::kSuspended);
  run_until(t0 + ms(9900));
  const size_t mark = fx.mark();
  advance(ms(300));
  const FxCall k = ka_ok();
  EXPECT_EQ(k.at, t0 + ms(9900));
  EXPECT_EQ(node->status(), SessionStatus::kLive);
  EXPECT_EQ(count_session_event(SessionEvent::kLive, mark), 1u);
  EXPECT_EQ(ta->remaining(), k.at + kValidity - now());
  // Renewals resume every renew interval from that keep-alive's sentAt.
  run_until(k.at + kRenew - k1ns);
  EXPECT_EQ(fx.count(Fx::kKeepAlive, mark), 0u);
  run_until(k.at + kRenew);
  EXPECT_EQ(fx.count(Fx::kKeepAlive, mark), 1u);
}

TEST_F(NodeTest, KeepAliveThatTimesOutSuspendsAtExactlyTheRenewPeriod) {
  const TimePoint t0 = now();
  start_live();
  run_until(t0 + kRenew);
  ASSERT_EQ(fx.pending_count(Fx::kKeepAlive), 1u);
  EXPECT_EQ(fx.pending(Fx::kKeepAlive)[0].timeout, kRenew);
  run_until(t0 + 2 * kRenew - k1ns);
  EXPECT_EQ(node->status(), SessionStatus::kLive);
  run_until(t0 + 2 * kRenew);
  EXPECT_EQ(node->status(), SessionStatus::kSuspended);
  // The retry: half of the 4.8 s left.
  const size_t mark = fx.mark();
  run_until(t0 + 2 * kRenew + ms(2400) - k1ns);
  EXPECT_EQ(fx.count(Fx::kKeepAlive, mark), 0u);
  run_until(t0 + 2 * kRenew + ms(2400));
  EXPECT_EQ(fx.count(Fx::kKeepAlive, mark), 1u);
}

TEST_F(NodeTest, AcquireThatTimesOutIsNoLongerInFlightAtExactlyTheRenewPeriod) {
  start_live();
  const TimePoint sent = now();
  const ContenderId a = add_election("a", now());
  ASSERT_NE(a, 0u);
  ASSERT_EQ(fx.pending_count(Fx::kAcquire), 1u);
  EXPECT_EQ(fx.pending(Fx::kAcquire)[0].timeout, kRenew);
  // A release broadcast while the attempt is in flight does not start another.
  run_until(sent + kRenew - k1ns);
  node->on_released("a", now());
  EXPECT_EQ(fx.count(Fx::kAcquire), 1u);
  EXPECT_EQ(view_of(a)->state, "acquiring");
  run_until(sent + kRenew);
  EXPECT_EQ(view_of(a)->state, "candidate");
  // Timed out here, but maybe still running on the backend: one acquire per
  // election in flight, so a broadcast does not send another yet...
  node->on_released("a", now());
  EXPECT_EQ(fx.count(Fx::kAcquire), 1u);
  // ...until the backend answers it (as each backend does, by its own timeout).
  answer_acquire(fx.pending(Fx::kAcquire)[0], Outcome::kTimeout);
  EXPECT_EQ(fx.count(Fx::kAcquire), 2u);
}

TEST_F(NodeTest, ATimedOutAcquireNeverAnsweredBlocksTheNextAttemptForTwoCallTimeouts) {
  start_live();
  auto_keep_alive = true;
  const TimePoint sent = now();
  ASSERT_NE(add_election("a", now()), 0u);
  ASSERT_EQ(fx.count(Fx::kAcquire), 1u);
  run_until(sent + 2 * kRenew - k1ns);
  EXPECT_EQ(fx.count(Fx::kAcquire), 1u);
  run_until(sent + 2 * kRenew);
  EXPECT_EQ(fx.count(Fx::kAcquire), 2u);
}

TEST_F(NodeTest, RetryAtTheHoldersExpiryIsJittered) {
  // Candidates told the same holder_remaining do not all retry at one instant.
  start_live();
  auto_keep_alive = true;
  std::set<int64_t> at;
  for (int i = 0; i < 20; ++i) {
    const std::string name = "h" + std::to_string(i);
    ASSERT_NE(add_election(name, now()), 0u);
    held(name, ms(100));
  }
  const TimePoint answered = now();
  run_until(answered + ms(100) + kRenew);
  for (int i = 0; i < 20; ++i) {
    const auto acq = acquires_since(0, "h" + std::to_string(i));
    ASSERT_EQ(acq.size(), 2u);
    EXPECT_GE(acq[1].at, answered + ms(100));
    EXPECT_LT(acq[1].at, answered + ms(100) + cfg.margin + kJitter / 8 + k1ns);
    at.insert((acq[1].at - answered).count());
  }
  EXPECT_GT(at.size(), 10u);
}

// A release broadcast can overtake the answer of an acquire that ran before the
// release (Redis publishes on another connection): the Held answer then retries
// at once instead of waiting for the next jittered attempt.
TEST_F(NodeTest, ReleaseBroadcastDuringAnAcquireRetriesRightAfterItsHeldAnswer) {
  start_live();
  const ContenderId a = add_election("a", now());
  ASSERT_NE(a, 0u);
  ASSERT_EQ(fx.pending_count(Fx::kAcquire), 1u);
  node->on_released("a", now());
  EXPECT_EQ(fx.count(Fx::kAcquire), 1u);  // still one in flight
  answer_acquire(take_acquire("a"), Outcome::kHeld, 0, ms(5000));
  EXPECT_EQ(fx.count(Fx::kAcquire), 2u);  // retried at once
  EXPECT_EQ(view_of(a)->state, "acquiring");
  // Without a broadcast, a Held answer waits for the next attempt.
  answer_acquire(take_acquire("a"), Outcome::kHeld, 0, ms(5000));
  EXPECT_EQ(fx.count(Fx::kAcquire), 2u);
  EXPECT_EQ(view_of(a)->state, "candidate");
}

TEST_F(NodeTest, OpenThatTimesOutIsRetried) {
  make();
  const TimePoint t0 = now();
  node->start(t0);
  run_until(t0 + kRenew - k1ns);
  EXPECT_EQ(fx.count(Fx::kOpen), 1u);
  run_until(t0 + kRenew + kMinBackoff);
  EXPECT_EQ(fx.count(Fx::kOpen), 2u);
  EXPECT_EQ(fx.of(Fx::kOpen)[1].at, t0 + kRenew + kMinBackoff);
  // A late reply to the abandoned open: that session is closed, not used.
  const FxCall first = fx.of(Fx::kOpen)[0];
  fx.mark_answered(first.call);
  const size_t mark = fx.mark();
  node->on_open(first.call, OpenReply{Outcome::kOk, "late", kLease, ""}, now());
  EXPECT_EQ(node->status(), SessionStatus::kOpening);
  ASSERT_EQ(fx.count(Fx::kClose, mark), 1u);
  EXPECT_EQ(fx.of(Fx::kClose, mark)[0].session, "late");
  open_ok(kLease, "s2");
  EXPECT_EQ(node->view().session_id, "s2");
}

TEST_F(NodeTest, OpenFailuresRetryWithDoublingBackoffCappedAtTheRenewInterval) {
  make();
  node->start(now());
  Duration expect = kMinBackoff;
  for (int i = 0; i < 10; ++i) {
    const FxCall o = fx.take_last(Fx::kOpen);
    node->on_open(o.call, OpenReply{Outcome::kError, "", Duration::zero(), "refused"}, now());
    const TimePoint failed = now();
    run_until(failed + expect - k1ns);
    ASSERT_EQ(fx.pending_count(Fx::kOpen), 0u) << i;
    run_until(failed + expect);
    ASSERT_EQ(fx.pending_count(Fx::kOpen), 1u) << i;
    expect = std::min(expect * 2, kRenew);
  }
  EXPECT_EQ(expect, kRenew);
  open_ok();
  EXPECT_EQ(node->status(), SessionStatus::kLive);
}

TEST_F(NodeTest, CallTimeoutsFollowTheShortenedRenewPeriod) {
  start_live(ms(6000));
  const Duration rp = Duration(5'890'000'000 / 3);
  ASSERT_EQ(node->view().renew_period, rp);
  ASSERT_NE(add_election("a", now()), 0u);
  EXPECT_EQ(fx.pending(Fx::kAcquire)[0].timeout, rp);
  const TimePoint opened = fx.of(Fx::kOpen)[0].at;
  run_until(opened + rp);
  ASSERT_EQ(fx.pending_count(Fx::kKeepAlive), 1u);
  EXPECT_EQ(fx.pending(Fx::kKeepAlive)[0].timeout, rp);
  run_until(opened + 2 * rp - k1ns);
  EXPECT_EQ(node->status(), SessionStatus::kLive);
  run_until(opened + 2 * rp);
  EXPECT_EQ(node->status(), SessionStatus::kSuspended);
}

// ===========================================================================
// A backend granting less than the lease

TEST_F(NodeTest, LeaseShortenedEventOncePerSessionAndRenewEveryThirdOfTheValidity) {
  const TimePoint t0 = now();
  start_live(ms(6000));  // e.g. a ZooKeeper maxSessionTimeout of 6 s
  const Duration validity = ms(5890);
  const Duration rp = validity / 3;
  EXPECT_EQ(count_session_event(SessionEvent::kLeaseShortened), 1u);
  EXPECT_TRUE(node->view().lease_shortened);
  EXPECT_EQ(node->view().renew_period, rp);
  auto warnings = [&] {
    size_t n = 0;
    for (const FxCall& l : fx.of(Fx::kLog))
      n += l.level >= 2 && l.detail.find("renewing every") != std::string::npos;
    return n;
  };
  EXPECT_EQ(warnings(), 1u);  // "and a warning"
  grant = ms(6000);
  auto_keep_alive = true;
  auto [a, ta] = leader("a", 1);
  run_until(t0 + ms(60000));
  const auto kas = fx.of(Fx::kKeepAlive);
  ASSERT_EQ(kas.size(), static_cast<size_t>(ms(60000) / rp));
  for (size_t i = 0; i < kas.size(); ++i) {
    EXPECT_EQ(kas[i].at, t0 + rp * static_cast<int64_t>(i + 1)) << i;
  }
  EXPECT_TRUE(ta->valid());
  EXPECT_EQ(count_session_event(SessionEvent::kLeaseShortened), 1u);
  EXPECT_EQ(warnings(), 1u);
  // A new session publishes it again, once.
  auto_keep_alive = false;
  run_until(now() + rp);
  const size_t mark = fx.mark();
  ka_fail(Outcome::kExpired);
  open_ok(ms(6000), "s2");
  EXPECT_EQ(count_session_event(SessionEvent::kLeaseShortened, mark), 1u);
  auto_keep_alive = true;
  run_until(now() + ms(20000));
  EXPECT_EQ(count_session_event(SessionEvent::kLeaseShortened, mark), 1u);
  // A session granted the full lease is not shortened.
  auto_keep_alive = false;
  run_until(now() + rp);
  const size_t mark2 = fx.mark();
  ka_fail(Outcome::kExpired);
  open_ok(kLease, "s3");
  EXPECT_EQ(count_session_event(SessionEvent::kLeaseShortened, mark2), 0u);
  EXPECT_FALSE(node->view().lease_shortened);
  EXPECT_EQ(node->view().renew_period, kRenew);
}

TEST_F(NodeTest, LeaseShortenedByAKeepAliveReply) {
  const TimePoint t0 = now();
  start_live();
  EXPECT_EQ(count_session_event(SessionEvent::kLeaseShortened), 0u);
  run_until(t0 + kRenew);
  const FxCall k = ka_ok(ms(6000));
  EXPECT_EQ(count_session_event(SessionEvent::kLeaseShortened), 1u);
  const Duration rp = ms(5890) / 3;
  EXPECT_EQ(node->view().renew_period, rp);
  // The next keep-alive a third of the validity after that one was sent.
  run_until(k.at + rp - k1ns);
  EXPECT_EQ(fx.pending_count(Fx::kKeepAlive), 0u);
  run_until(k.at + rp);
  ka_ok(ms(6000));
  EXPECT_EQ(count_session_event(SessionEvent::kLeaseShortened), 1u);
}

TEST_F(NodeTest, ConfigThatItselfDoesNotFitTwoRenewalsIsRespected) {
  cfg.lease_duration = ms(10000);
  cfg.renew_interval_set = ms(5000);
  const TimePoint t0 = now();
  start_live(ms(10000));
  EXPECT_EQ(count_session_event(SessionEvent::kLeaseShortened), 0u);
  EXPECT_EQ(node->view().renew_period, ms(5000));
  auto_keep_alive = true;
  grant = ms(10000);
  run_until(t0 + ms(30000));
  const auto kas = fx.of(Fx::kKeepAlive);
  ASSERT_EQ(kas.size(), 6u);
  for (size_t i = 0; i < kas.size(); ++i) {
    EXPECT_EQ(kas[i].at, t0 + ms(5000) * static_cast<int64_t>(i + 1));
  }
  EXPECT_EQ(count_session_event(SessionEvent::kLeaseShortened), 0u);
}

TEST_F(NodeTest, ConfigThatDoesNotFitTwiceIsShortenedWhenTheBackendGrantsLess) {
  cfg.lease_duration = ms(10000);
  cfg.renew_interval_set = ms(5000);
  const TimePoint t0 = now();
  start_live(ms(5000));  // 4.9 s of local validity: a renewal at 5 s would be too late
  EXPECT_EQ(count_session_event(SessionEvent::kLeaseShortened), 1u);
  EXPECT_EQ(node->view().renew_period, ms(4900) / 3);
  auto [a, ta] = leader("a", 1);
  auto_keep_alive = true;
  grant = ms(5000);
  run_until(t0 + ms(60000));
  EXPECT_TRUE(ta->valid());
  EXPECT_FALSE(fx.was_revoked(ta));
  EXPECT_EQ(node->view().sessions_opened, 1u);
}

}  // namespace
}  // namespace simba::node_test
