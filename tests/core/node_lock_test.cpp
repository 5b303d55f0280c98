// Tests of the core Node: locks (queues on a name, try_once, give-up times).
// The fixture is in node_fixture.h.
#include <gtest/gtest.h>

#include <vector>

#include "core/node_fixture.h"

namespace simba::node_test {
namespace {

// ===========================================================================
// Locks

TEST_F(NodeTest, LockAcquiresAndReleases) {
  start_live();
  const ContenderId l = add_lock("l", TimePoint::max(), false, now());
  ASSERT_NE(l, 0u);
  auto t = win("l", 4);
  ASSERT_TRUE(t);
  EXPECT_EQ(view_of(l)->kind, ContenderKind::kLock);
  const size_t mark = fx.mark();
  ASSERT_TRUE(stop(l, now()));
  EXPECT_EQ(fx.kinds(mark), (std::vector<Fx>{Fx::kTermEnded, Fx::kRelease}));
  EXPECT_EQ(fx.of(Fx::kRelease, mark)[0].token, 4u);
  answer_release(take_release());
  EXPECT_EQ(kinds_of(l, mark), (std::vector<Fx>{Fx::kTermEnded, Fx::kRevoked, Fx::kStopped}));
  EXPECT_EQ(fx.revoked_reason(t), RevokeReason::kStopped);
}

TEST_F(NodeTest, LockRetriesWhileHeldElsewhere) {
  start_live();
  auto_keep_alive = true;
  const ContenderId l = add_lock("l", TimePoint::max(), false, now());
  held("l");
  ASSERT_TRUE(run_until_true([&] { return fx.pending_count(Fx::kAcquire) > 0; }, now() + ms(5000)));
  auto t = win("l", 2);
  ASSERT_TRUE(t);
  EXPECT_EQ(view_of(l)->state, "leader");
}

TEST_F(NodeTest, LockQueuesBehindAnotherLockOfTheNodeOnTheSameName) {
  start_live();
  const ContenderId l1 = add_lock("l", TimePoint::max(), false, now());
  auto t1 = win("l", 1);
  ASSERT_TRUE(t1);
  size_t mark = fx.mark();
  const ContenderId l2 = add_lock("l", TimePoint::max(), false, now());
  const ContenderId l3 = add_lock("l", TimePoint::max(), false, now());
  ASSERT_NE(l2, 0u);
  ASSERT_NE(l3, 0u);
  EXPECT_EQ(fx.count(Fx::kAcquire, mark), 0u);
  EXPECT_EQ(view_of(l2)->state, "waiting");
  // A broadcast of the name does not wake a waiting lock.
  node->on_released("l", now());
  EXPECT_EQ(fx.count(Fx::kAcquire, mark), 0u);
  ASSERT_TRUE(stop(l1, now()));
  EXPECT_EQ(fx.count(Fx::kAcquire, mark), 0u);  // not before l1's revoked()
  answer_release(take_release());
  // l1 revoked and stopped, then l2 (first in line) acquires at once.
  const auto ks = fx.kinds(mark);
  ASSERT_GE(ks.size(), 5u);
  EXPECT_EQ(
      std::vector<Fx>(ks.begin(), ks.begin() + 5),
      (std::vector<Fx>{Fx::kTermEnded, Fx::kRelease, Fx::kRevoked, Fx::kStopped, Fx::kAcquire}));
  EXPECT_EQ(fx.count(Fx::kAcquire, mark), 1u);
  auto t2 = win("l", 2);
  ASSERT_TRUE(t2);
  EXPECT_EQ(fx.of(Fx::kElected).back().who, l2);
  EXPECT_EQ(view_of(l3)->state, "waiting");
  // Cancelling the one in front hands over to the next.
  mark = fx.mark();
  ASSERT_TRUE(stop(l2, now()));
  answer_release(take_release());
  EXPECT_EQ(fx.count(Fx::kAcquire, mark), 1u);
  auto t3 = win("l", 3);
  ASSERT_TRUE(t3);
  EXPECT_EQ(fx.of(Fx::kElected).back().who, l3);
}

// The per-name index (a multimap whose keys view the contenders' own names,
// ADR 0024): a lock that leaves from the middle of a name's queue keeps the
// others in arrival order, a name whose contenders all left is free for an
// election, and names that share a prefix stay apart.
TEST_F(NodeTest, NameQueueKeepsArrivalOrderWhenOneInTheMiddleLeaves) {
  start_live();
  const ContenderId l1 = add_lock("q", TimePoint::max(), false, now());
  auto t1 = win("q", 1);
  ASSERT_TRUE(t1);
  const ContenderId l2 = add_lock("q", TimePoint::max(), false, now());
  const ContenderId l3 = add_lock("q", TimePoint::max(), false, now());
  const ContenderId l4 = add_lock("q", TimePoint::max(), false, now());
  const ContenderId other = add_lock("q.", TimePoint::max(), false, now());
  auto t_other = win("q.", 1);  // another name: not queued behind "q"
  ASSERT_TRUE(t_other);
  // An election cannot take a name that locks use, queued or not.
  EXPECT_EQ(add_election("q", now()), 0u);
  size_t mark = fx.mark();
  ASSERT_TRUE(stop(l3, now()));  // from the middle of the queue
  EXPECT_EQ(kinds_of(l3, mark), (std::vector<Fx>{Fx::kLockFailed}));
  EXPECT_EQ(fx.count(Fx::kAcquire, mark), 0u);
  ContenderId holder = l1;
  for (ContenderId next : {l2, l4}) {
    mark = fx.mark();
    ASSERT_TRUE(stop(holder, now()));
    answer_release(take_release());
    EXPECT_EQ(fx.count(Fx::kAcquire, mark), 1u);
    ASSERT_TRUE(win("q", next == l2 ? 2 : 3));
    EXPECT_EQ(fx.of(Fx::kElected).back().who, next);
    holder = next;
  }
  EXPECT_FALSE(view_of(l1).has_value());
  // The last lock of "q" leaves: the name is free for an election.
  ASSERT_TRUE(stop(l4, now()));
  answer_release(take_release());
  const ContenderId e = add_election("q", now());
  EXPECT_NE(e, 0u);
  ASSERT_TRUE(win("q", 4));
  EXPECT_EQ(fx.of(Fx::kElected).back().who, e);
  EXPECT_EQ(view_of(other)->state, "leader");
  // A broadcast of "q." wakes nothing of "q", and the other way round.
  mark = fx.mark();
  node->on_released("q.", now());
  node->on_released("q", now());
  EXPECT_EQ(fx.count(Fx::kAcquire, mark), 0u);
}

TEST_F(NodeTest, TryOnceFailsBusyWhenTheNodeHoldsTheName) {
  start_live();
  const ContenderId l1 = add_lock("l", TimePoint::max(), false, now());
  auto t1 = win("l", 1);
  const size_t mark = fx.mark();
  const ContenderId l2 = add_lock("l", TimePoint::max(), true, now());
  ASSERT_NE(l2, 0u);
  const auto failed = fx.of(Fx::kLockFailed, mark);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].who, l2);
  EXPECT_EQ(failed[0].failure, LockFailure::kBusy);
  EXPECT_EQ(fx.count(Fx::kAcquire, mark), 0u);
  EXPECT_FALSE(view_of(l2).has_value());
  EXPECT_EQ(view_of(l1)->state, "leader");
}

TEST_F(NodeTest, TryOnceFailsBusyWhenHeldElsewhereAndDoesNotRetry) {
  start_live();
  auto_keep_alive = true;
  const ContenderId l = add_lock("l", TimePoint::max(), true, now());
  const size_t mark = fx.mark();
  held("l", ms(3000));
  ASSERT_EQ(fx.count(Fx::kLockFailed, mark), 1u);
  EXPECT_EQ(fx.of(Fx::kLockFailed, mark)[0].failure, LockFailure::kBusy);
  EXPECT_EQ(fx.of(Fx::kLockFailed, mark)[0].who, l);
  run_until(now() + ms(20000));
  EXPECT_EQ(fx.count(Fx::kAcquire, mark), 0u);
}

TEST_F(NodeTest, TryOnceThatWinsHoldsTheLock) {
  start_live();
  const ContenderId l = add_lock("l", TimePoint::max(), true, now());
  auto t = win("l", 1);
  ASSERT_TRUE(t);
  EXPECT_EQ(view_of(l)->state, "leader");
}

TEST_F(NodeTest, LockGivesUpAtGiveUpAtWithTimeout) {
  start_live();
  auto_keep_alive = true;
  const TimePoint give_up = now() + ms(3000);
  const ContenderId l = add_lock("l", give_up, false, now());
  // Held elsewhere, again and again.
  ASSERT_TRUE(run_until_true(
      [&] {
        for (const FxCall& c : fx.pending(Fx::kAcquire)) answer_acquire(c, Outcome::kHeld);
        return fx.finished(l);
      },
      give_up + ms(1)));
  const auto failed = fx.of(Fx::kLockFailed);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].who, l);
  EXPECT_EQ(failed[0].failure, LockFailure::kTimeout);
  EXPECT_EQ(failed[0].at, give_up);
  for (const FxCall& c : fx.of(Fx::kAcquire)) EXPECT_LT(c.at, give_up);
}

TEST_F(NodeTest, LockGivesUpWhileAcquiringAndALateWinIsReleased) {
  start_live();
  auto_keep_alive = true;
  const TimePoint give_up = now() + ms(1000);
  const ContenderId l = add_lock("l", give_up, false, now());
  const FxCall acq = take_acquire("l");
  run_until(give_up - k1ns);
  EXPECT_FALSE(fx.finished(l));
  run_until(give_up);
  ASSERT_EQ(fx.count(Fx::kLockFailed), 1u);
  EXPECT_EQ(fx.of(Fx::kLockFailed)[0].failure, LockFailure::kTimeout);
  const size_t mark = fx.mark();
  answer_acquire(acq, Outcome::kOk, 6);
  EXPECT_EQ(fx.count(Fx::kElected, mark), 0u);
  ASSERT_EQ(releases_since(mark).size(), 1u);
  EXPECT_EQ(releases_since(mark)[0].token, 6u);
}

TEST_F(NodeTest, QueuedLockGivesUpAtGiveUpAt) {
  start_live();
  auto_keep_alive = true;
  const ContenderId l1 = add_lock("l", TimePoint::max(), false, now());
  auto t1 = win("l", 1);
  const TimePoint give_up = now() + ms(2000);
  const ContenderId l2 = add_lock("l", give_up, false, now());
  run_until(give_up - k1ns);
  EXPECT_FALSE(fx.finished(l2));
  run_until(give_up);
  ASSERT_EQ(fx.count(Fx::kLockFailed), 1u);
  EXPECT_EQ(fx.of(Fx::kLockFailed)[0].who, l2);
  EXPECT_EQ(fx.of(Fx::kLockFailed)[0].failure, LockFailure::kTimeout);
  EXPECT_EQ(view_of(l1)->state, "leader");
}

TEST_F(NodeTest, GiveUpAtAlreadyPassedFailsAtOnce) {
  start_live();
  const ContenderId l = add_lock("l", now(), false, now());
  ASSERT_NE(l, 0u);
  ASSERT_EQ(fx.count(Fx::kLockFailed), 1u);
  EXPECT_EQ(fx.of(Fx::kLockFailed)[0].failure, LockFailure::kTimeout);
  EXPECT_EQ(fx.count(Fx::kAcquire), 0u);
}

TEST_F(NodeTest, ALockThatGaveUpDuringItsAttemptHoldsBackTheNextAcquireOfTheName) {
  start_live();
  auto_keep_alive = true;
  add_lock("l", now() + ms(300), false, now());
  const FxCall acq = take_acquire("l");
  size_t mark = fx.mark();
  advance(ms(300));
  ASSERT_EQ(fx.count(Fx::kLockFailed, mark), 1u);
  EXPECT_EQ(fx.of(Fx::kLockFailed, mark)[0].failure, LockFailure::kTimeout);
  // The given-up acquire may still win on the backend: the next lock of the
  // name waits for its answer instead of finding the name held by itself.
  mark = fx.mark();
  const ContenderId t = add_lock("l", TimePoint::max(), true, now());
  ASSERT_NE(t, 0u);
  advance(ms(100));
  EXPECT_TRUE(acquires_since(mark, "l").empty());
  answer_acquire(acq, Outcome::kOk, 3);
  const auto rel = releases_since(mark);
  ASSERT_EQ(rel.size(), 1u);  // the late win, released
  EXPECT_EQ(rel[0].token, 3u);
  ASSERT_EQ(acquires_since(mark, "l").size(), 1u);  // then the new attempt
  auto term = win("l", 4);
  ASSERT_NE(term, nullptr);
  EXPECT_TRUE(term->valid());

  // Never answered: the next attempt goes out two call timeouts after it was sent.
  add_lock("m", now() + ms(200), false, now());
  const FxCall lost = take_acquire("m");
  const TimePoint sent = now();
  advance(ms(200));
  mark = fx.mark();
  add_lock("m", TimePoint::max(), false, now());
  ASSERT_TRUE(
      run_until_true([&] { return !acquires_since(mark, "m").empty(); }, sent + 3 * kRenew));
  EXPECT_GE(now(), sent + 2 * kRenew);
  (void)lost;
}

// ADR 0039: the node's timeout is a call's only one. A call is abandoned
// (Effects::abandon) once, when its timeout passes unanswered, even when its
// contender gave up before (its late answer is still awaited until then, so
// a late win is released); a call answered in time never is.
TEST_F(NodeTest, ACallIsAbandonedOnceWhenItsTimeoutPasses) {
  start_live();
  auto_keep_alive = true;
  add_lock("l", now() + ms(300), false, now());
  const FxCall acq = take_acquire("l");
  const TimePoint sent = now();
  advance(ms(300));
  ASSERT_EQ(fx.count(Fx::kLockFailed), 1u);
  EXPECT_TRUE(fx.abandoned().empty()) << "abandoned when its contender gave up";
  run_until(sent + kRenew - k1ns);
  EXPECT_TRUE(fx.abandoned().empty());
  run_until(sent + kRenew);
  EXPECT_EQ(fx.abandoned(), std::vector<CallId>{acq.call});
  advance(3 * kLease);  // the tombstone's life, keep-alives answered meanwhile
  EXPECT_EQ(fx.abandoned(), std::vector<CallId>{acq.call});
  EXPECT_GT(fx.count(Fx::kKeepAlive), 2u);
}

TEST_F(NodeTest, StopOnAPendingLockCancelsIt) {
  start_live();
  // Acquiring: canceled at once, a late win released.
  const ContenderId l = add_lock("l", TimePoint::max(), false, now());
  const FxCall acq = take_acquire("l");
  size_t mark = fx.mark();
  ASSERT_TRUE(stop(l, now()));
  ASSERT_EQ(fx.count(Fx::kLockFailed, mark), 1u);
  EXPECT_EQ(fx.of(Fx::kLockFailed, mark)[0].failure, LockFailure::kCanceled);
  answer_acquire(acq, Outcome::kOk, 2);
  EXPECT_EQ(fx.count(Fx::kElected, mark), 0u);
  EXPECT_EQ(releases_since(mark).size(), 1u);
  // Waiting behind another lock of the node: canceled, the holder untouched.
  const ContenderId h = add_lock("m", TimePoint::max(), false, now());
  auto th = win("m", 1);
  const ContenderId w = add_lock("m", TimePoint::max(), false, now());
  mark = fx.mark();
  ASSERT_TRUE(stop(w, now()));
  EXPECT_EQ(kinds_of(w, mark), (std::vector<Fx>{Fx::kLockFailed}));
  EXPECT_EQ(fx.of(Fx::kLockFailed, mark)[0].failure, LockFailure::kCanceled);
  EXPECT_TRUE(th->valid());
  EXPECT_EQ(view_of(h)->state, "leader");
  // A candidate lock (held elsewhere, waiting to retry): canceled too.
  const ContenderId c = add_lock("n", TimePoint::max(), false, now());
  held("n");
  mark = fx.mark();
  ASSERT_TRUE(stop(c, now()));
  EXPECT_EQ(kinds_of(c, mark), (std::vector<Fx>{Fx::kLockFailed}));
}

TEST_F(NodeTest, LockTermLostToTheDeadlineIsRevokedAndStopped) {
  const TimePoint t0 = now();
  start_live();
  const ContenderId l = add_lock("l", TimePoint::max(), false, now());
  auto t = win("l", 1);
  const ContenderId l2 = add_lock("l", TimePoint::max(), false, now());
  const size_t mark = fx.mark();
  run_until(t0 + kValidity);
  EXPECT_EQ(kinds_of(l, mark), (std::vector<Fx>{Fx::kTermEnded, Fx::kRevoked, Fx::kStopped}));
  EXPECT_EQ(fx.revoked_reason(t), RevokeReason::kDeadlinePassed);
  // The next lock in line contends once a new session is open.
  open_ok(kLease, "s2");
  const auto acq = acquires_since(mark, "l");
  ASSERT_EQ(acq.size(), 1u);
  EXPECT_EQ(acq[0].session, "s2");
  auto t2 = win("l", 2);
  ASSERT_TRUE(t2);
  EXPECT_EQ(fx.of(Fx::kElected).back().who, l2);
}

TEST_F(NodeTest, LockTermTakenOverIsRevokedAndStopped) {
  const TimePoint t0 = now();
  start_live();
  const ContenderId l = add_lock("l", TimePoint::max(), false, now());
  auto t = win("l", 1);
  run_until(t0 + kRenew);
  const size_t mark = fx.mark();
  ka_ok(kLease, std::vector<OwnedLease>{});
  EXPECT_EQ(kinds_of(l, mark), (std::vector<Fx>{Fx::kTermEnded, Fx::kRevoked, Fx::kStopped}));
  EXPECT_EQ(fx.revoked_reason(t), RevokeReason::kTakenOver);
}

}  // namespace
}  // namespace simba::node_test
