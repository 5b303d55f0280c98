// Tests of the core Node: closing, the snapshot, and randomized scenarios.
// The fixture is in node_fixture.h.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/node_fixture.h"

namespace simba::node_test {
namespace {

// ===========================================================================
// Closing

TEST_F(NodeTest, CloseRevokesEveryTermWithOneCloseCallAndNoReleases) {
  start_live();
  auto [a, ta] = leader("a", 1);
  auto [b, tb] = leader("b", 2);
  const ContenderId l = add_lock("l", TimePoint::max(), false, now());
  auto tl = win("l", 3);
  const ContenderId w = add_lock("l", TimePoint::max(), false, now());  // waiting
  const ContenderId c = add_election("c", now());
  held("c");
  const ContenderId d = add_election("d", now());  // acquiring
  const FxCall acq_d = take_acquire("d");
  const size_t mark = fx.mark();
  node->close(now());
  // Every term revoked at once (STOPPED); one close call; no release.
  for (const auto& t : {ta, tb, tl}) {
    EXPECT_FALSE(t->valid());
    EXPECT_EQ(t->revoked(), RevokeReason::kStopped);
  }
  EXPECT_EQ(fx.count(Fx::kTermEnded, mark), 3u);
  EXPECT_EQ(fx.count(Fx::kRelease, mark), 0u);
  ASSERT_EQ(fx.count(Fx::kClose, mark), 1u);
  const FxCall cl = fx.of(Fx::kClose, mark)[0];
  EXPECT_EQ(cl.session, "s1");
  EXPECT_EQ(fx.count(Fx::kRevoked, mark), 0u);
  EXPECT_FALSE(fx.closed_seen());
  EXPECT_FALSE(node->closed());
  // Nothing new starts while closing.
  EXPECT_EQ(add_election("e", now()), 0u);
  EXPECT_EQ(add_lock("e", TimePoint::max(), false, now()), 0u);
  EXPECT_FALSE(stop(a, now()));
  EXPECT_FALSE(step_down(a, ms(1), now()));
  answer_acquire(acq_d, Outcome::kOk, 4);  // the close frees it
  EXPECT_EQ(fx.count(Fx::kElected, mark), 0u);
  advance(ms(300));
  answer_close(fx.take(Fx::kClose));
  // revoked() then stopped() per contender, then closed() last.
  for (const auto& [id, t] :
       std::vector<std::pair<ContenderId, TermRef>>{{a, ta}, {b, tb}, {l, tl}}) {
    EXPECT_EQ(kinds_of(id, mark), (std::vector<Fx>{Fx::kTermEnded, Fx::kRevoked, Fx::kStopped}))
        << id;
    EXPECT_EQ(fx.revoked_reason(t), RevokeReason::kStopped);
  }
  EXPECT_EQ(kinds_of(w, mark), (std::vector<Fx>{Fx::kLockFailed}));
  EXPECT_EQ(fx.of(Fx::kLockFailed, mark)[0].failure, LockFailure::kCanceled);
  EXPECT_EQ(kinds_of(c, mark), (std::vector<Fx>{Fx::kStopped}));
  EXPECT_EQ(kinds_of(d, mark), (std::vector<Fx>{Fx::kStopped}));
  EXPECT_EQ(fx.kinds(mark).back(), Fx::kClosed);
  EXPECT_EQ(fx.count(Fx::kClosed), 1u);
  EXPECT_EQ(count_session_event(SessionEvent::kClosed, mark), 1u);
  EXPECT_EQ(node->status(), SessionStatus::kClosed);
  EXPECT_TRUE(node->closed());
  EXPECT_FALSE(node->next_wakeup().has_value());
  // Closing again does nothing.
  const size_t after = fx.mark();
  node->close(now());
  EXPECT_EQ(fx.mark(), after);
}

TEST_F(NodeTest, CloseWhileOpening) {
  make();
  node->start(now());
  const ContenderId a = add_election("a", now());
  EXPECT_EQ(fx.count(Fx::kAcquire), 0u);  // no session yet
  const FxCall open = fx.pending(Fx::kOpen)[0];
  const size_t mark = fx.mark();
  node->close(now());
  EXPECT_EQ(fx.count(Fx::kClose, mark), 0u);
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kStopped}));
  EXPECT_TRUE(fx.closed_seen());
  EXPECT_TRUE(node->closed());
  // The open's late answer is ignored (the RecordingEffects fails on any effect
  // after closed()).
  fx.mark_answered(open.call);
  node->on_open(open.call, OpenReply{Outcome::kOk, "late", kLease, ""}, now());
  EXPECT_TRUE(node->closed());
}

TEST_F(NodeTest, CloseWhileAHandoverIsInFlight) {
  start_live();
  auto [a, ta] = leader("a", 1);
  ASSERT_TRUE(stop(a, now()));
  const FxCall rel = take_release();
  const size_t mark = fx.mark();
  node->close(now());
  EXPECT_EQ(fx.count(Fx::kClose, mark), 1u);
  EXPECT_FALSE(fx.was_revoked(ta));
  answer_close(fx.take(Fx::kClose));
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kRevoked, Fx::kStopped}));
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kStopped);
  EXPECT_TRUE(fx.closed_seen());
  answer_release(rel);  // late: ignored
}

// A close that gets no answer is sent again (ADR 0030), each call ending by
// the session's local deadline; at the deadline the close completes (its
// leases free when the session expires on the backend).
TEST_F(NodeTest, ATimedOutCloseIsSentAgainUntilTheLocalDeadline) {
  const TimePoint t0 = now();
  start_live();
  auto [a, ta] = leader("a", 1);
  const size_t mark = fx.mark();
  node->close(now());
  run_until(t0 + kRenew - k1ns);
  EXPECT_FALSE(fx.closed_seen());
  EXPECT_EQ(fx.count(Fx::kClose, mark), 1u);
  run_until(t0 + kRenew + kMinBackoff);
  const auto closes = fx.of(Fx::kClose, mark);
  ASSERT_EQ(closes.size(), 2u);
  EXPECT_EQ(closes[1].session, closes[0].session);
  EXPECT_EQ(closes[1].timeout, kRenew);
  EXPECT_FALSE(fx.closed_seen());
  run_until(t0 + kValidity - k1ns);
  EXPECT_FALSE(fx.closed_seen());
  for (const FxCall& c : fx.of(Fx::kClose, mark)) EXPECT_LE(c.at + c.timeout, t0 + kValidity);
  run_until(t0 + kValidity);
  EXPECT_TRUE(fx.closed_seen());
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kStopped);
}

// The first close too ends by the local deadline when that is nearer than a
// call timeout (keep-alives unanswered, or a close held back by a drain).
TEST_F(NodeTest, TheFirstCloseEndsByTheLocalDeadlineWhenItIsNear) {
  const TimePoint t0 = now();
  start_live();
  auto [a, ta] = leader("a", 1);
  run_until(t0 + kValidity - kRenew / 2);  // no keep-alive answered
  ASSERT_EQ(node->status(), SessionStatus::kSuspended);
  const size_t mark = fx.mark();
  node->close(now());
  ASSERT_EQ(fx.count(Fx::kClose, mark), 1u);
  const FxCall cl = fx.of(Fx::kClose, mark)[0];
  EXPECT_EQ(cl.timeout, kRenew / 2);
  EXPECT_EQ(cl.at + cl.timeout, t0 + kValidity);
  run_until(t0 + kValidity - k1ns);
  EXPECT_FALSE(fx.closed_seen());
  run_until(t0 + kValidity);
  EXPECT_TRUE(fx.closed_seen());
  EXPECT_EQ(fx.count(Fx::kClose, mark), 1u);
}

// The seed: close() frees every lease of the node at once. A close refused
// at once (its connection just cut, the backend waiting to reconnect) is sent
// again after the minimum backoff.
TEST_F(NodeTest, ACloseRefusedAtOnceIsSentAgain) {
  start_live();
  auto [a, ta] = leader("a", 1);
  const size_t mark = fx.mark();
  node->close(now());
  answer_close(fx.take(Fx::kClose), Outcome::kError);
  EXPECT_FALSE(fx.closed_seen());
  EXPECT_FALSE(ta->valid());         // invalid from the close on, as before
  EXPECT_FALSE(fx.was_revoked(ta));  // onRevoked once the close is answered
  advance(ms(100) - k1ns);
  EXPECT_EQ(fx.count(Fx::kClose, mark), 1u);
  advance(k1ns);
  ASSERT_EQ(fx.count(Fx::kClose, mark), 2u);
  const FxCall again = fx.take(Fx::kClose);
  EXPECT_EQ(again.session, fx.of(Fx::kClose, mark)[0].session);
  EXPECT_EQ(again.timeout, kRenew);
  EXPECT_FALSE(fx.closed_seen());
  answer_close(again);
  EXPECT_TRUE(fx.closed_seen());
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kStopped);
  EXPECT_EQ(node->status(), SessionStatus::kClosed);
}

// Refused every time: sent again with a doubling backoff (100 ms, 200 ms, ...,
// capped at the renew period) while the retry comes before the session's
// local deadline; then the close completes (its leases free at the session's
// expiry).
TEST_F(NodeTest, ACloseRefusedEveryTimeGivesUpAtTheLocalDeadline) {
  const TimePoint t0 = now();
  start_live();
  auto [a, ta] = leader("a", 1);
  const size_t mark = fx.mark();
  node->close(now());
  while (!fx.closed_seen() && now() < t0 + 2 * kLease) {
    if (fx.count(Fx::kClose, mark) > 0 && !fx.of(Fx::kClose, mark).back().answered) {
      answer_close(fx.of(Fx::kClose, mark).back(), Outcome::kError);
    } else {
      advance(ms(1));
    }
  }
  EXPECT_TRUE(fx.closed_seen());
  EXPECT_LT(now(), t0 + kValidity);
  std::vector<Duration> at;
  for (const FxCall& c : fx.of(Fx::kClose, mark)) at.push_back(c.at - t0);
  // The next wait (5 s from 11.3 s) would pass the deadline (14.8 s).
  EXPECT_EQ(at, (std::vector<Duration>{ms(0), ms(100), ms(300), ms(700), ms(1500), ms(3100),
                                       ms(6300), ms(11300)}));
}

TEST_F(NodeTest, ACloseRefusedNearTheDeadlineIsNotSentAgain) {
  const TimePoint t0 = now();
  start_live();
  auto [a, ta] = leader("a", 1);
  run_until(t0 + kValidity - ms(50));  // no keep-alive answered since the start
  ASSERT_TRUE(ta->valid());
  const size_t mark = fx.mark();
  node->close(now());
  answer_close(fx.take(Fx::kClose), Outcome::kError);
  EXPECT_TRUE(fx.closed_seen());
  EXPECT_EQ(fx.count(Fx::kClose, mark), 1u);
}

TEST_F(NodeTest, CloseAfterTheDeadlinePassedSendsNoSecondClose) {
  const TimePoint t0 = now();
  start_live();
  auto [a, ta] = leader("a", 1);
  run_until(t0 + kValidity);
  ASSERT_EQ(fx.revoked_reason(ta), RevokeReason::kDeadlinePassed);
  const size_t mark = fx.mark();
  node->close(now());  // the new session is still opening
  EXPECT_EQ(fx.count(Fx::kClose, mark), 0u);
  EXPECT_TRUE(fx.closed_seen());
}

TEST_F(NodeTest, SnapshotNamesStatusesAndContenderStates) {
  EXPECT_STREQ(session_status_name(SessionStatus::kOpening), "OPENING");
  EXPECT_STREQ(session_status_name(SessionStatus::kLive), "LIVE");
  EXPECT_STREQ(session_status_name(SessionStatus::kSuspended), "SUSPENDED");
  EXPECT_STREQ(session_status_name(SessionStatus::kClosed), "CLOSED");
  start_live();
  auto [a, ta] = leader("a", 5);
  const ContenderId b = add_election("b", now());
  const ContenderId c = add_election("c", now());
  held("c");
  const ContenderId d = add_election("d", now());
  held("d");
  ASSERT_TRUE(step_down(d, ms(1000), now()));
  const ContenderId l = add_lock("a2", TimePoint::max(), false, now());
  auto tl = win("a2", 1);
  const ContenderId w = add_lock("a2", TimePoint::max(), false, now());
  const ContenderId e = add_election("e", now());
  auto te = win("e", 2);
  ASSERT_TRUE(stop(e, now()));
  EXPECT_EQ(view_of(a)->state, "leader");
  EXPECT_EQ(view_of(a)->token, 5u);
  EXPECT_EQ(view_of(a)->remaining, ta->remaining());
  EXPECT_EQ(view_of(a)->kind, ContenderKind::kElection);
  EXPECT_EQ(view_of(b)->state, "acquiring");
  EXPECT_EQ(view_of(b)->token, 0u);
  EXPECT_EQ(view_of(c)->state, "candidate");
  EXPECT_EQ(view_of(d)->state, "cooldown");
  EXPECT_EQ(view_of(l)->state, "leader");
  EXPECT_EQ(view_of(l)->kind, ContenderKind::kLock);
  EXPECT_EQ(view_of(w)->state, "waiting");
  EXPECT_EQ(view_of(e)->state, "releasing");
  EXPECT_EQ(view_of(e)->remaining, Duration::zero());
  const NodeView v = node->view();
  EXPECT_EQ(v.status, SessionStatus::kLive);
  EXPECT_EQ(v.terms, 3u);
  EXPECT_EQ(v.releases, 1u);
  EXPECT_EQ(v.sessions_opened, 1u);
}

// ===========================================================================
// Randomized scenarios: whatever happens, the Effects rules hold (checked by
// RecordingEffects as events arrive) and every elected() gets exactly one
// revoked() once the node is closed.

class NodeRandomTest : public NodeTest, public ::testing::WithParamInterface<int> {};

TEST_P(NodeRandomTest, EffectsRulesHold) {
  std::mt19937_64 rng(static_cast<uint64_t>(GetParam()) * 7919 + 1);
  seed = static_cast<uint64_t>(GetParam());
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  make();
  node->start(now());
  std::map<std::string, uint64_t> next_token;
  std::vector<ContenderId> ids;
  const std::vector<std::string> names = {"a", "b", "c"};
  int session_no = 0;
  std::set<const TermState*> seen_invalid;
  for (int step = 0; step < 400 && !node->closed(); ++step) {
    const int what = pick(100);
    if (what < 8) {
      ids.push_back(add_election(names[pick(3)], now()));
    } else if (what < 14) {
      const int mode = pick(3);
      const TimePoint give_up = mode == 0 ? TimePoint::max() : now() + ms(pick(20000));
      ids.push_back(add_lock(names[pick(3)], give_up, mode == 2, now()));
    } else if (what < 18 && !ids.empty()) {
      stop(ids[pick(static_cast<int>(ids.size()))], now());
    } else if (what < 21 && !ids.empty()) {
      step_down(ids[pick(static_cast<int>(ids.size()))], ms(pick(10000)), now());
    } else if (what < 24) {
      node->on_released(names[pick(3)], now());
    } else if (what < 45) {
      advance(ms(pick(4000)));
    } else {
      // Answer a random pending call (late answers to timed-out calls included).
      std::vector<FxCall> pending;
      for (const FxCall& e : fx.events()) {
        if (e.is_backend_call() && !e.answered) pending.push_back(e);
      }
      if (pending.empty()) continue;
      const FxCall c = pending[pick(static_cast<int>(pending.size()))];
      fx.mark_answered(c.call);
      const int r = pick(10);
      switch (c.kind) {
        case Fx::kOpen:
          if (r < 8) {
            node->on_open(c.call,
                          OpenReply{Outcome::kOk, "r" + std::to_string(++session_no),
                                    r < 6 ? kLease : ms(4000 + pick(8000)), ""},
                          now());
          } else {
            node->on_open(c.call, OpenReply{Outcome::kError, "", Duration::zero(), "x"}, now());
          }
          break;
        case Fx::kKeepAlive: {
          std::vector<OwnedLease> owned = owned_by(c.session);
          if (r == 0 && !owned.empty()) owned.erase(owned.begin());  // taken over
          if (r == 1) owned.push_back({names[pick(3)], 1000 + static_cast<uint64_t>(pick(5))});
          const Outcome o = r < 7 ? Outcome::kOk : r < 9 ? Outcome::kError : Outcome::kExpired;
          node->on_keep_alive(c.call, KeepAliveReply{o, r == 2 ? ms(5000) : kLease, owned, ""},
                              now());
          break;
        }
        case Fx::kAcquire: {
          uint64_t& tok = next_token[c.name];
          if (r < 5) {
            node->on_acquire(c.call, AcquireReply{Outcome::kOk, ++tok, kNever, ""}, now());
          } else if (r == 5) {  // a stale token
            node->on_acquire(c.call, AcquireReply{Outcome::kOk, tok > 1 ? tok - 1 : 1, kNever, ""},
                             now());
          } else if (r < 9) {
            node->on_acquire(c.call, AcquireReply{Outcome::kHeld, 0, ms(pick(3000)) - ms(1000), ""},
                             now());
          } else {
            node->on_acquire(c.call, AcquireReply{Outcome::kError, 0, kNever, "x"}, now());
          }
          break;
        }
        case Fx::kRelease:
          node->on_release(c.call, DoneReply{r < 8 ? Outcome::kOk : Outcome::kError, ""}, now());
          break;
        case Fx::kClose:
          node->on_close(c.call, DoneReply{r < 8 ? Outcome::kOk : Outcome::kError, ""}, now());
          break;
        default:
          break;
      }
    }
    // Safety: a term is never valid past the session's deadline, and a term
    // that reads invalid never reads valid again.
    for (const auto& t : fx.elected_terms()) {
      if (seen_invalid.count(t.get())) {
        EXPECT_FALSE(t->valid()) << t->name() << "/" << t->token();
      } else if (!t->valid()) {
        seen_invalid.insert(t.get());
      }
      if (fx.was_revoked(t)) {
        EXPECT_FALSE(t->valid());
      }
    }
    // One keep-alive per session in flight at a time: a keep-alive is in
    // flight until answered or until its timeout.
    std::map<std::string, int> in_flight;
    for (const FxCall& k : fx.of(Fx::kKeepAlive)) {
      if (!k.answered && now() < k.at + k.timeout) ++in_flight[k.session];
    }
    for (const auto& [session, n] : in_flight) EXPECT_LE(n, 1) << session;
    if (::testing::Test::HasFailure()) break;
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, NodeRandomTest, ::testing::Range(0, 150));

}  // namespace
}  // namespace simba::node_test
