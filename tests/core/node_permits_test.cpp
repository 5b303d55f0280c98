// Tests of the core Node: permits of semaphores and read/write locks
// (ADR 0046): grants as terms, the size refused, several permits of one
// session, a waiting writer's intent, the reconcile by entry, the session's
// end. The fixture is in node_fixture.h.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/node_fixture.h"

namespace simba::node_test {
namespace {

class PermitTest : public NodeTest {
 protected:
  // 0 when the node refuses it.
  ContenderId add_permit(ContenderKind kind, const std::string& name, uint32_t size = 0,
                         TimePoint give_up_at = TimePoint::max(), bool try_once = false) {
    auto c = std::make_unique<Contender>(LeaseName(name), kind);
    if (kind == ContenderKind::kSemaphore) c->set_size(size);
    if (!node->add_lock(*c, give_up_at, try_once, now())) return 0;
    return keep(std::move(c));
  }
  void answer_permit(const FxCall& c, Outcome o, uint64_t permit, uint64_t token = 0,
                     uint32_t size = 0) {
    fx.mark_answered(c.call);
    AcquireReply r{o, token, kNever, ""};
    r.permit = permit;
    r.size = size;
    node->on_acquire(c.call, r, now());
  }
  // Grants the pending acquire of `name` as permit `permit` with `token`.
  TermRef grant(const std::string& name, uint64_t permit, uint64_t token) {
    const size_t before = fx.elected_terms().size();
    answer_permit(take_acquire(name), Outcome::kOk, permit, token);
    if (fx.elected_terms().size() != before + 1) {
      ADD_FAILURE() << "no term adopted for " << name << "\n" << fx.dump();
      return nullptr;
    }
    return fx.last_term();
  }
  // What the backend lists for `session`: every unrevoked term's entry.
  std::vector<OwnedLease> listed(const std::string& session) const {
    std::vector<OwnedLease> v;
    for (const auto& [id, c] : contenders) {
      if (c->term && c->term->session_id() == session && !fx.was_revoked(c->term)) {
        v.push_back(
            {c->term->name().str(), c->term->token(), permit_kind_of(c->kind), c->permit()});
      }
    }
    return v;
  }
  std::vector<FxCall> permit_releases(size_t mark, PermitKind kind) const {
    std::vector<FxCall> out;
    for (const FxCall& r : fx.of(Fx::kRelease, mark)) {
      if (r.entry.kind == kind) out.push_back(r);
    }
    return out;
  }
};

TEST_F(PermitTest, ASemaphorePermitIsATermReleasedWithItsEntry) {
  start_live();
  const ContenderId s = add_permit(ContenderKind::kSemaphore, "s", 3);
  ASSERT_NE(s, 0u);
  const FxCall a = fx.pending(Fx::kAcquire).back();
  EXPECT_EQ(a.ask.kind, PermitKind::kSemaphore);
  EXPECT_EQ(a.ask.size, 3u);
  EXPECT_FALSE(a.ask.leave_intent);
  auto t = grant("s", 7, 7);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->token(), 7u);
  EXPECT_EQ(contender(s)->permit(), 7u);
  EXPECT_EQ(view_of(s)->state, "leader");
  const size_t mark = fx.mark();
  ASSERT_TRUE(stop(s, now()));
  const FxCall r = take_release();
  EXPECT_EQ(r.entry.kind, PermitKind::kSemaphore);
  EXPECT_EQ(r.entry.permit, 7u);
  EXPECT_EQ(r.token, 7u);
  answer_release(r);
  EXPECT_EQ(kinds_of(s, mark), (std::vector<Fx>{Fx::kTermEnded, Fx::kRevoked, Fx::kStopped}));
  EXPECT_EQ(fx.revoked_reason(t), RevokeReason::kStopped);
}

TEST_F(PermitTest, ASemaphoreOfAnotherSizeIsRefusedAndSaysItsSize) {
  start_live();
  const ContenderId s = add_permit(ContenderKind::kSemaphore, "s", 3);
  const size_t mark = fx.mark();
  answer_permit(take_acquire("s"), Outcome::kRefused, 0, 0, 5);
  EXPECT_EQ(kinds_of(s, mark), (std::vector<Fx>{Fx::kLockFailed}));
  EXPECT_EQ(fx.of(Fx::kLockFailed, mark)[0].failure, LockFailure::kRefused);
  // The engine words SIMBA_ESTATE's message from it: "has 5 permits, not 3".
  EXPECT_EQ(contender(s)->size(), 5u);
  EXPECT_EQ(fx.count(Fx::kRelease, mark), 0u);
  // A size of 0 is no semaphore.
  EXPECT_EQ(add_permit(ContenderKind::kSemaphore, "s", 0), 0u);
}

TEST_F(PermitTest, PermitsOfOneNameContendSideBySideAndApartFromALock) {
  start_live();
  const ContenderId l = add_lock("x", TimePoint::max(), false, now());
  ASSERT_TRUE(win("x", 1));
  const size_t mark = fx.mark();
  const ContenderId s1 = add_permit(ContenderKind::kSemaphore, "x", 2);
  const ContenderId s2 = add_permit(ContenderKind::kSemaphore, "x", 2);
  const ContenderId r1 = add_permit(ContenderKind::kRead, "x");
  // None queues behind the lock or behind each other: three acquires at once.
  EXPECT_EQ(acquires_since(mark, "x").size(), 3u);
  const std::vector<FxCall> p = fx.pending(Fx::kAcquire);
  ASSERT_EQ(p.size(), 3u);
  answer_permit(p[0], Outcome::kOk, 1, 1);
  answer_permit(p[1], Outcome::kOk, 2, 2);
  answer_permit(p[2], Outcome::kOk, 1, 0);  // a reader before any writer: token 0
  for (ContenderId id : {l, s1, s2, r1}) EXPECT_EQ(view_of(id)->state, "leader") << id;
  EXPECT_EQ(fx.live_terms(), 4u);
  // A keep-alive listing every entry keeps every term.
  advance(kRenew);
  const FxCall k = fx.take_last(Fx::kKeepAlive);
  answer_keep_alive(k, Outcome::kOk, kLease, listed(k.session));
  EXPECT_EQ(fx.live_terms(), 4u);
  EXPECT_EQ(fx.count(Fx::kRelease, mark), 0u);
  // Releasing one permit leaves the other and the lock.
  ASSERT_TRUE(stop(s1, now()));
  answer_release(take_release());
  EXPECT_EQ(fx.live_terms(), 3u);
  EXPECT_EQ(view_of(s2)->state, "leader");
}

TEST_F(PermitTest, AWaitingWriterLeavesAnIntentPassesItAndForgetsItWhenGranted) {
  start_live();
  const ContenderId w = add_permit(ContenderKind::kWrite, "rw");
  FxCall a = take_acquire("rw");
  EXPECT_EQ(a.ask.kind, PermitKind::kWrite);
  EXPECT_TRUE(a.ask.leave_intent);
  EXPECT_EQ(a.ask.intent, 0u);
  answer_permit(a, Outcome::kHeld, 9);
  EXPECT_EQ(contender(w)->intent(), 9u);
  // Watched as its resource, not as a lease of the same name.
  EXPECT_TRUE(fx.watching("rw/rw"));
  EXPECT_FALSE(fx.watching("rw"));
  const size_t mark = fx.mark();
  node->on_released("rw/rw", now());  // a reader let go: attempt at once
  ASSERT_EQ(acquires_since(mark, "rw").size(), 1u);
  a = take_acquire("rw");
  EXPECT_EQ(a.ask.intent, 9u);
  answer_permit(a, Outcome::kHeld, 9);  // kept
  node->on_released("rw/rw", now());
  auto t = grant("rw", 11, 11);
  ASSERT_TRUE(t);
  EXPECT_FALSE(fx.watching("rw/rw"));
  EXPECT_EQ(contender(w)->intent(), 0u);
  EXPECT_EQ(contender(w)->permit(), 11u);
  // Stopping releases the write permit, and no intent (the grant deleted it).
  const size_t before = fx.mark();
  ASSERT_TRUE(stop(w, now()));
  const FxCall r = take_release();
  EXPECT_EQ(r.entry.kind, PermitKind::kWrite);
  EXPECT_EQ(r.entry.permit, 11u);
  answer_release(r);
  EXPECT_TRUE(permit_releases(before, PermitKind::kIntent).empty());
}

TEST_F(PermitTest, AWriterThatGivesUpWithdrawsItsIntentAndRetriesAFailedWithdrawal) {
  start_live();
  const ContenderId w = add_permit(ContenderKind::kWrite, "rw", 0, now() + ms(2000));
  answer_permit(take_acquire("rw"), Outcome::kHeld, 9);
  const size_t mark = fx.mark();
  run_until(now() + ms(2000));
  EXPECT_EQ(fx.of(Fx::kLockFailed, mark).at(0).failure, LockFailure::kTimeout);
  std::vector<FxCall> rs = permit_releases(mark, PermitKind::kIntent);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].entry.permit, 9u);
  EXPECT_EQ(rs[0].token, 0u);
  EXPECT_FALSE(fx.watching("rw/rw"));
  // A failed withdrawal is sent again within the session (ADR 0030).
  answer_release(take_release(), Outcome::kError);
  run_until(now() + kMinBackoff);
  rs = permit_releases(mark, PermitKind::kIntent);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[1].entry.permit, 9u);
  answer_release(take_release());
  (void)w;
}

TEST_F(PermitTest, AStoppedWriterWithdrawsItsIntent) {
  start_live();
  const ContenderId w = add_permit(ContenderKind::kWrite, "rw");
  answer_permit(take_acquire("rw"), Outcome::kHeld, 4);
  const size_t mark = fx.mark();
  ASSERT_TRUE(stop(w, now()));
  EXPECT_EQ(fx.of(Fx::kLockFailed, mark).at(0).failure, LockFailure::kCanceled);
  const std::vector<FxCall> rs = permit_releases(mark, PermitKind::kIntent);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].entry.permit, 4u);
  answer_release(take_release());
}

TEST_F(PermitTest, ATryWriteLeavesNoIntent) {
  start_live();
  const ContenderId w = add_permit(ContenderKind::kWrite, "rw", 0, TimePoint::max(), true);
  const FxCall a = take_acquire("rw");
  EXPECT_FALSE(a.ask.leave_intent);
  const size_t mark = fx.mark();
  answer_permit(a, Outcome::kHeld, 0);
  EXPECT_EQ(kinds_of(w, mark), (std::vector<Fx>{Fx::kLockFailed}));
  EXPECT_EQ(fx.of(Fx::kLockFailed, mark)[0].failure, LockFailure::kBusy);
  EXPECT_EQ(fx.count(Fx::kRelease, mark), 0u);
}

TEST_F(PermitTest, TheReconcileReleasesAnOrphanIntentButNotAWaitingWritersOne) {
  start_live();
  add_permit(ContenderKind::kWrite, "rw");
  answer_permit(take_acquire("rw"), Outcome::kHeld, 3);
  advance(kRenew);
  // Its retries, answered: an acquire of the resource in flight would
  // explain any entry of it.
  for (const FxCall& a : fx.pending(Fx::kAcquire)) answer_permit(a, Outcome::kHeld, 3);
  const size_t mark = fx.mark();
  const FxCall k = fx.take_last(Fx::kKeepAlive);
  // The writer's intent 3, and intent 5 that nobody explains (an answer lost).
  answer_keep_alive(k, Outcome::kOk, kLease,
                    std::vector<OwnedLease>{{"rw", 0, PermitKind::kIntent, 3},
                                            {"rw", 0, PermitKind::kIntent, 5}});
  const std::vector<FxCall> rs = permit_releases(mark, PermitKind::kIntent);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].entry.permit, 5u);
  EXPECT_EQ(rs[0].session, k.session);
  answer_release(rs[0]);
}

TEST_F(PermitTest, TheReconcileReleasesAnOrphanPermitByItsEntry) {
  start_live();
  const ContenderId r = add_permit(ContenderKind::kRead, "rw");
  auto t = grant("rw", 4, 2);
  ASSERT_TRUE(t);
  advance(kRenew);
  const size_t mark = fx.mark();
  const FxCall k = fx.take_last(Fx::kKeepAlive);
  // The term's read #4, and read #6 with the same token (another reader's
  // entry of this session that no term holds), and a lease "rw" token 2.
  answer_keep_alive(k, Outcome::kOk, kLease,
                    std::vector<OwnedLease>{{"rw", 2, PermitKind::kRead, 4},
                                            {"rw", 2, PermitKind::kRead, 6},
                                            {"rw", 2, PermitKind::kLease, 0}});
  EXPECT_EQ(view_of(r)->state, "leader");
  const std::vector<FxCall> rel = releases_since(mark);
  ASSERT_EQ(rel.size(), 2u);
  EXPECT_EQ(rel[0].entry.kind, PermitKind::kLease);  // in the order the backend sorts
  EXPECT_EQ(rel[1].entry.kind, PermitKind::kRead);
  EXPECT_EQ(rel[1].entry.permit, 6u);
  for (const FxCall& c : rel) answer_release(c);
}

TEST_F(PermitTest, APermitTheKeepAliveDoesNotListIsTakenOver) {
  start_live();
  const ContenderId a = add_permit(ContenderKind::kSemaphore, "s", 2);
  const ContenderId b = add_permit(ContenderKind::kSemaphore, "s", 2);
  const std::vector<FxCall> p = fx.pending(Fx::kAcquire);
  ASSERT_EQ(p.size(), 2u);
  answer_permit(p[0], Outcome::kOk, 1, 1);
  answer_permit(p[1], Outcome::kOk, 2, 2);
  advance(kRenew);
  const FxCall k = fx.take_last(Fx::kKeepAlive);
  // Permit 2 listed with the token of permit 1's entry is not permit 2.
  answer_keep_alive(k, Outcome::kOk, kLease,
                    std::vector<OwnedLease>{{"s", 1, PermitKind::kSemaphore, 1},
                                            {"s", 2, PermitKind::kSemaphore, 3}});
  EXPECT_EQ(view_of(a)->state, "leader");
  EXPECT_FALSE(view_of(b));
  EXPECT_EQ(fx.revoked_reason(fx.elected_terms()[1]), RevokeReason::kTakenOver);
  // The unexplained entry #3 is released as an orphan.
  const std::vector<FxCall> rs = permit_releases(0, PermitKind::kSemaphore);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].entry.permit, 3u);
  answer_release(rs[0]);
}

TEST_F(PermitTest, ASessionThatExpiresRevokesEveryPermitSessionExpired) {
  start_live();
  add_permit(ContenderKind::kSemaphore, "s", 2);
  add_permit(ContenderKind::kSemaphore, "s", 2);
  add_permit(ContenderKind::kRead, "rw");
  const ContenderId w = add_permit(ContenderKind::kWrite, "rw2");
  const std::vector<FxCall> p = fx.pending(Fx::kAcquire);
  ASSERT_EQ(p.size(), 4u);
  answer_permit(p[0], Outcome::kOk, 1, 1);
  answer_permit(p[1], Outcome::kOk, 2, 2);
  answer_permit(p[2], Outcome::kOk, 1, 0);
  answer_permit(p[3], Outcome::kHeld, 8);  // a writer waiting with its intent
  EXPECT_EQ(contender(w)->intent(), 8u);
  advance(kRenew);
  const size_t mark = fx.mark();
  ka_fail(Outcome::kExpired);
  ASSERT_EQ(fx.of(Fx::kRevoked, mark).size(), 3u);
  for (const FxCall& r : fx.of(Fx::kRevoked, mark)) {
    EXPECT_EQ(r.reason, RevokeReason::kSessionExpired);
  }
  // The intent went with the session: forgotten, not released.
  EXPECT_EQ(contender(w)->intent(), 0u);
  EXPECT_TRUE(permit_releases(mark, PermitKind::kIntent).empty());
  // The writer contends on the next session without it.
  open_ok();
  ASSERT_TRUE(
      run_until_true([&] { return !acquires_since(mark, "rw2").empty(); }, now() + ms(5000)));
  EXPECT_EQ(acquires_since(mark, "rw2").back().ask.intent, 0u);
}

TEST_F(PermitTest, ALateGrantIsReleasedAndALateIntentNobodyKeepsToo) {
  start_live();
  const ContenderId s = add_permit(ContenderKind::kSemaphore, "s", 1, now() + ms(1000));
  const FxCall a = take_acquire("s");
  const ContenderId w = add_permit(ContenderKind::kWrite, "rw", 0, now() + ms(1000));
  const FxCall b = take_acquire("rw");
  const size_t mark = fx.mark();
  run_until(now() + ms(1000));  // both give up with their attempts in flight
  EXPECT_EQ(fx.count(Fx::kLockFailed, mark), 2u);
  answer_permit(a, Outcome::kOk, 5, 5);
  answer_permit(b, Outcome::kHeld, 6);
  const std::vector<FxCall> rs = releases_since(mark);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].entry.kind, PermitKind::kSemaphore);
  EXPECT_EQ(rs[0].entry.permit, 5u);
  EXPECT_EQ(rs[0].token, 5u);
  EXPECT_EQ(rs[1].entry.kind, PermitKind::kIntent);
  EXPECT_EQ(rs[1].entry.permit, 6u);
  for (const FxCall& c : rs) answer_release(c);
  EXPECT_EQ(fx.live_terms(), 0u);
  (void)s;
  (void)w;
}

}  // namespace
}  // namespace simba::node_test
