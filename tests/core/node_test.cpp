// Tests of the core state machine (src/core/node.*) against the seed, event by
// event, on a virtual clock. The node's only outputs are Effects calls; a
// RecordingEffects records them (and checks the rules every scenario must keep:
// see tests/support/recording_effects.h). Backend calls are answered by the
// test through Node::on_*, with the call id the node gave them. Time moves only
// through run_until(), which fires the node's timers in order as the engine's
// loop does.
//
// Every test ends (TearDown) by closing the node and checking that every
// elected() was followed by exactly one revoked() for the same term.
#include "core/node.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/backend_types.h"
#include "core/config.h"
#include "core/term_state.h"
#include "core/time.h"
#include "core/timing.h"
#include "support/fake_clock.h"
#include "support/recording_effects.h"

namespace simba {
namespace {

using testing::FakeClock;
using testing::Fx;
using testing::FxCall;
using testing::RecordingEffects;

// The seed's defaults.
const Duration kLease = ms(15000);
const Duration kRenew = ms(5000);      // leaseDuration / 3
const Duration kValidity = ms(14800);  // 15 s × (1 − 0.01) − 50 ms
const Duration kMargin = ms(50);
const Duration kJitter = ms(2500);  // renewInterval / 2
const Duration kMinBackoff = ms(100);
const Duration kNever = Duration(-1);  // holder_remaining: unknown
const Duration k1ns = Duration(1);

class NodeTest : public ::testing::Test {
 protected:
  Config cfg;
  FakeClock clock;
  RecordingEffects fx{&clock};
  std::unique_ptr<Node> node;
  uint64_t seed = 1;
  // When set, run_until() answers every keep-alive at once with kOk and the
  // leases of this node's unrevoked terms.
  bool auto_keep_alive = false;
  Duration grant = kLease;
  int sessions = 0;

  void TearDown() override {
    if (!node) return;
    if (!node->closed()) {
      node->close(now());
      // Terms whose work never returned hold the close until their deadline.
      if (fx.pending(Fx::kClose).empty() && !node->closed()) run_until(now() + kLease);
      for (const FxCall& c : fx.pending(Fx::kClose)) {
        fx.mark_answered(c.call);
        node->on_close(c.call, DoneReply{Outcome::kOk, ""}, now());
      }
    }
    EXPECT_TRUE(node->closed());
    EXPECT_TRUE(fx.closed_seen());
    fx.expect_all_revoked();
  }

  TimePoint now() const { return clock.now(); }

  Node& make() {
    EXPECT_EQ(cfg.validate(), "");
    node = std::make_unique<Node>(cfg, fx, clock, seed);
    return *node;
  }

  // A node with a LIVE session opened at the current time, its open answered at once.
  void start_live(Duration remaining = kLease) {
    make();
    node->start(now());
    open_ok(remaining);
    ASSERT_EQ(node->status(), SessionStatus::kLive);
  }

  // --- Time ---------------------------------------------------------------------

  // Fires every timer due up to `t`, in order, moving the clock to each; ends at `t`.
  void run_until(TimePoint t) {
    for (int guard = 0; guard < 1'000'000; ++guard) {
      if (auto_keep_alive) answer_keep_alives();
      const std::optional<TimePoint> w = node->next_wakeup();
      if (!w || *w > t) break;
      if (*w > now()) clock.set(*w);
      node->on_timer(now());
    }
    if (t > now()) clock.set(t);
    if (auto_keep_alive) answer_keep_alives();
  }
  void advance(Duration d) { run_until(now() + d); }
  // Runs timers until `pred` holds (checked after every timer), up to `limit`.
  bool run_until_true(const std::function<bool()>& pred, TimePoint limit) {
    for (int guard = 0; guard < 1'000'000; ++guard) {
      if (auto_keep_alive) answer_keep_alives();
      if (pred()) return true;
      const std::optional<TimePoint> w = node->next_wakeup();
      if (!w || *w > limit) break;
      if (*w > now()) clock.set(*w);
      node->on_timer(now());
    }
    if (auto_keep_alive) answer_keep_alives();
    return pred();
  }

  // --- Answers --------------------------------------------------------------------

  FxCall open_ok(Duration remaining = kLease, std::string id = "") {
    const FxCall c = fx.take_last(Fx::kOpen);
    if (id.empty()) id = "s" + std::to_string(++sessions);
    node->on_open(c.call, OpenReply{Outcome::kOk, id, remaining, ""}, now());
    return c;
  }

  // The leases of this node's terms on `session` that were not revoked() yet
  // (a term being handed over still holds its lease).
  std::vector<OwnedLease> owned_by(const std::string& session) const {
    std::vector<OwnedLease> v;
    for (const auto& t : fx.elected_terms()) {
      if (t->session_id() == session && !fx.was_revoked(t)) v.push_back({t->name(), t->token()});
    }
    return v;
  }

  void answer_keep_alive(const FxCall& c, Outcome o, Duration remaining,
                         std::optional<std::vector<OwnedLease>> owned = std::nullopt) {
    fx.mark_answered(c.call);
    node->on_keep_alive(
        c.call, KeepAliveReply{o, remaining, owned ? *owned : owned_by(c.session), ""}, now());
  }
  FxCall ka_ok(Duration remaining = kLease,
               std::optional<std::vector<OwnedLease>> owned = std::nullopt) {
    const FxCall c = fx.take_last(Fx::kKeepAlive);
    answer_keep_alive(c, Outcome::kOk, remaining, owned);
    return c;
  }
  FxCall ka_fail(Outcome o) {
    const FxCall c = fx.take_last(Fx::kKeepAlive);
    node->on_keep_alive(c.call, KeepAliveReply{o, Duration::zero(), {}, "down"}, now());
    return c;
  }
  void answer_keep_alives() {
    for (const FxCall& c : fx.pending(Fx::kKeepAlive)) answer_keep_alive(c, Outcome::kOk, grant);
  }

  // The newest acquire of `name` not answered yet.
  FxCall take_acquire(const std::string& name) {
    const std::vector<FxCall> p = fx.pending(Fx::kAcquire);
    for (auto it = p.rbegin(); it != p.rend(); ++it) {
      if (it->name == name) {
        fx.mark_answered(it->call);
        return *it;
      }
    }
    ADD_FAILURE() << "no pending acquire of " << name << "\n" << fx.dump();
    return FxCall{};
  }
  void answer_acquire(const FxCall& c, Outcome o, uint64_t token = 0,
                      Duration holder_remaining = kNever) {
    fx.mark_answered(c.call);
    node->on_acquire(c.call, AcquireReply{o, token, holder_remaining, ""}, now());
  }
  std::shared_ptr<TermState> win(const std::string& name, uint64_t token) {
    const size_t before = fx.elected_terms().size();
    answer_acquire(take_acquire(name), Outcome::kOk, token);
    if (fx.elected_terms().size() != before + 1) {
      ADD_FAILURE() << "no term adopted for " << name << "\n" << fx.dump();
      return nullptr;
    }
    auto t = fx.last_term();
    EXPECT_EQ(t->name(), name);
    EXPECT_EQ(t->token(), token);
    return t;
  }
  void held(const std::string& name, Duration holder_remaining = kNever) {
    answer_acquire(take_acquire(name), Outcome::kHeld, 0, holder_remaining);
  }
  // A new election that wins `token` at once.
  std::pair<ContenderId, std::shared_ptr<TermState>> leader(const std::string& name,
                                                            uint64_t token, bool with_work = false) {
    const ContenderId id = node->add_election(name, now(), with_work);
    EXPECT_NE(id, 0u);
    return {id, win(name, token)};
  }

  FxCall take_release() { return fx.take(Fx::kRelease); }
  void answer_release(const FxCall& c, Outcome o = Outcome::kOk) {
    fx.mark_answered(c.call);
    node->on_release(c.call, DoneReply{o, ""}, now());
  }
  void answer_close(const FxCall& c, Outcome o = Outcome::kOk) {
    fx.mark_answered(c.call);
    node->on_close(c.call, DoneReply{o, ""}, now());
  }

  // --- Reading --------------------------------------------------------------------

  std::optional<ContenderView> view_of(ContenderId id) const {
    for (const ContenderView& v : node->view().contenders) {
      if (v.id == id) return v;
    }
    return std::nullopt;
  }
  std::vector<FxCall> releases_since(size_t mark) const { return fx.of(Fx::kRelease, mark); }
  std::vector<FxCall> acquires_since(size_t mark, const std::string& name) const {
    std::vector<FxCall> out;
    for (const FxCall& c : fx.of(Fx::kAcquire, mark)) {
      if (c.name == name) out.push_back(c);
    }
    return out;
  }
  size_t count_session_event(SessionEvent ev, size_t since = 0) const {
    const auto evs = fx.session_events(since);
    return static_cast<size_t>(std::count(evs.begin(), evs.end(), ev));
  }
  // The events of one contender, as kinds, from `mark` on.
  std::vector<Fx> kinds_of(ContenderId who, size_t mark = 0) const {
    std::vector<Fx> out;
    for (const FxCall& e : fx.for_contender(who, mark)) out.push_back(e.kind);
    return out;
  }
};

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
  std::vector<std::shared_ptr<TermState>> terms;
  for (int i = 0; i < 10; ++i) terms.push_back(leader("lead" + std::to_string(i), 1).second);
  for (int i = 0; i < 10; ++i) ASSERT_NE(node->add_election("cand" + std::to_string(i), now()), 0u);
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
  ASSERT_TRUE(node->stop(c, now()));
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
  ASSERT_NE(node->add_election("b", now()), 0u);
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
  const ContenderId a = node->add_election("a", now());
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
  ASSERT_NE(node->add_election("a", now()), 0u);
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
    ASSERT_NE(node->add_election(name, now()), 0u);
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
  const ContenderId a = node->add_election("a", now());
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
  ASSERT_NE(node->add_election("a", now()), 0u);
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

// ===========================================================================
// Candidates

TEST_F(NodeTest, CandidateAttemptsAtOnceThenEveryHalfRenewIntervalPlusJitter) {
  start_live();
  auto_keep_alive = true;
  const ContenderId a = node->add_election("a", now());
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
  ASSERT_NE(node->add_election("a", now()), 0u);
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
  for (int i = 0; i < 100; ++i) node->add_election("b" + std::to_string(i), now());
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
  for (int i = 0; i < 3; ++i) ids.push_back(node->add_election("e" + std::to_string(i), now()));
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
  const ContenderId a = node->add_election("report", now());
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
  ASSERT_TRUE(node->step_down(a, Duration::zero(), now()));
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
  ASSERT_NE(node->add_election("a", now()), 0u);
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
  ASSERT_NE(node->add_election("a", now()), 0u);
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
  ASSERT_TRUE(node->step_down(a, Duration::zero(), now()));
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
  ASSERT_NE(node->add_election("a", now()), 0u);
  const size_t mark = fx.mark();
  answer_acquire(take_acquire("a"), Outcome::kOk, 0);
  EXPECT_EQ(fx.count(Fx::kElected, mark), 0u);
}

TEST_F(NodeTest, LateReplyToATimedOutAttemptReleasesWhatItWon) {
  start_live();
  auto_keep_alive = true;
  const ContenderId a = node->add_election("a", now());
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
  const ContenderId a = node->add_election("a", now());
  const FxCall acq = take_acquire("a");
  const size_t mark = fx.mark();
  ASSERT_TRUE(node->stop(a, now()));
  // Not stopped yet: the attempt may have won the lease on the backend.
  EXPECT_TRUE(kinds_of(a, mark).empty());
  EXPECT_EQ(node->add_election("a", now()), 0u);
  EXPECT_FALSE(node->stop(a, now()));
  answer_acquire(acq, Outcome::kOk, 4);
  EXPECT_EQ(fx.count(Fx::kElected, mark), 0u);
  const auto rel = releases_since(mark);
  ASSERT_EQ(rel.size(), 1u);
  EXPECT_EQ(rel[0].token, 4u);
  EXPECT_TRUE(kinds_of(a, mark).empty());
  // Stopped once the release is answered; the name is free on this node again.
  answer_release(take_release());
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kStopped}));
  EXPECT_NE(node->add_election("a", now()), 0u);
}

TEST_F(NodeTest, StopDuringAnAttemptCompletesEvenIfTheReleaseFails) {
  start_live();
  const ContenderId a = node->add_election("a", now());
  const FxCall acq = take_acquire("a");
  const size_t mark = fx.mark();
  ASSERT_TRUE(node->stop(a, now()));
  answer_acquire(acq, Outcome::kOk, 4);
  answer_release(take_release(), Outcome::kError);
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kStopped}));
}

TEST_F(NodeTest, StopDuringAnAttemptThatFindsTheNameHeldCompletesAtTheAnswer) {
  start_live();
  const ContenderId a = node->add_election("a", now());
  const FxCall acq = take_acquire("a");
  const size_t mark = fx.mark();
  ASSERT_TRUE(node->stop(a, now()));
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
  const ContenderId a = node->add_election("a", now());
  const FxCall acq = take_acquire("a");
  const TimePoint stopped_at = now();
  const size_t mark = fx.mark();
  ASSERT_TRUE(node->stop(a, now()));
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
  const ContenderId a = node->add_election("a", now());
  take_acquire("a");
  const size_t mark = fx.mark();
  ASSERT_TRUE(node->stop(a, now()));
  advance(kRenew);
  ka_fail(Outcome::kExpired);
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kStopped}));
  EXPECT_EQ(fx.count(Fx::kElected, mark), 0u);
}

TEST_F(NodeTest, StopWhileReleasingWhatAStoppedAttemptWonCompletesWhenTheSessionEnds) {
  start_live();
  const ContenderId a = node->add_election("a", now());
  const FxCall acq = take_acquire("a");
  const size_t mark = fx.mark();
  ASSERT_TRUE(node->stop(a, now()));
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
  ASSERT_NE(node->add_election("b", now()), 0u);  // its acquire is in flight at 5 s
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
  ASSERT_TRUE(node->stop(a, now()));
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
  ASSERT_NE(node->add_election("a", now()), 0u);
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
  ASSERT_NE(node->add_election("a", now()), 0u);
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

// ===========================================================================
// Handover: stop and step-down

TEST_F(NodeTest, StopRevokesFirstThenReleasesWithTheTokenThenDeliversRevoked) {
  start_live();
  auto [a, ta] = leader("a", 7);
  const size_t mark = fx.mark();
  ASSERT_TRUE(node->stop(a, now()));
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
  EXPECT_FALSE(node->stop(a, now()));
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
  EXPECT_FALSE(node->stop(a, now()));
}

// Handover order with leader work (seed, "Handover Order"): revoke, wait for
// the work to exit, THEN release with the token, THEN onRevoked and the stop.
TEST_F(NodeTest, StopWithWorkWaitsForTheWorkBeforeReleasing) {
  start_live();
  auto_keep_alive = true;
  auto [a, ta] = leader("a", 7, /*with_work=*/true);
  const size_t mark = fx.mark();
  ASSERT_TRUE(node->stop(a, now()));
  EXPECT_FALSE(ta->valid());
  EXPECT_EQ(ta->revoked(), RevokeReason::kStopped);
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kTermEnded}));
  EXPECT_EQ(view_of(a)->state, "draining");
  // The session goes on being renewed while the work finishes: the lease stays
  // held, so no other node starts the same work meanwhile.
  run_until(now() + ms(3000));
  EXPECT_TRUE(releases_since(mark).empty());
  EXPECT_FALSE(node->stop(a, now()));
  node->work_done(a, 6, now());  // another term's token: ignored
  EXPECT_TRUE(releases_since(mark).empty());
  node->work_done(a, 7, now());
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
  ASSERT_TRUE(node->step_down(a, ms(0), now()));
  run_until(deadline_at_stop - k1ns);
  EXPECT_TRUE(releases_since(mark).empty()) << fx.dump();
  EXPECT_GT(fx.of(Fx::kKeepAlive, mark).size(), 0u) << "the session was renewed meanwhile";
  run_until(deadline_at_stop);
  ASSERT_EQ(releases_since(mark).size(), 1u);
  answer_release(take_release());
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kSteppedDown);
  // The late work_done of that term changes nothing.
  const size_t after = fx.mark();
  node->work_done(a, 3, now());
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
  node->work_done(a, 9, now());
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
  node->work_done(a, 1, now());
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
  ASSERT_TRUE(node->stop(a, now()));
  answer_release(take_release(), Outcome::kError);
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kStopped);
  EXPECT_TRUE(fx.finished(a));
  ASSERT_TRUE(node->stop(b, now()));
  const TimePoint sent = now();
  auto_keep_alive = true;
  run_until(sent + kRenew - k1ns);
  EXPECT_FALSE(fx.was_revoked(tb));
  run_until(sent + kRenew);
  EXPECT_EQ(fx.revoked_reason(tb), RevokeReason::kStopped);
  EXPECT_TRUE(fx.finished(b));
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
  ASSERT_TRUE(node->stop(a, now()));
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
  const ContenderId a = node->add_election("a", now());
  held("a");
  size_t mark = fx.mark();
  ASSERT_TRUE(node->stop(a, now()));
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kStopped}));
  auto_keep_alive = true;
  run_until(now() + ms(20000));
  EXPECT_TRUE(acquires_since(mark, "a").empty());
  EXPECT_FALSE(node->stop(a, now()));
  EXPECT_FALSE(node->stop(12345, now()));
}

TEST_F(NodeTest, StepDownRevokesReleasesAcksAndDoesNotContendDuringTheCooldown) {
  start_live();
  auto_keep_alive = true;
  auto [a, ta] = leader("a", 3);
  advance(ms(1000));
  const TimePoint stepped = now();
  const size_t mark = fx.mark();
  ASSERT_TRUE(node->step_down(a, ms(20000), now()));
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
  const ContenderId a = node->add_election("a", now());
  held("a");
  const TimePoint stepped = now();
  size_t mark = fx.mark();
  ASSERT_TRUE(node->step_down(a, ms(12000), now()));
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kSteppedDown}));
  run_until(stepped + ms(12000) - k1ns);
  EXPECT_TRUE(acquires_since(mark, "a").empty());
  run_until(stepped + ms(12000));
  ASSERT_EQ(acquires_since(mark, "a").size(), 1u);
  // While acquiring: acked at once; the attempt is abandoned and a late win
  // released.
  const FxCall acq = take_acquire("a");
  mark = fx.mark();
  ASSERT_TRUE(node->step_down(a, ms(5000), now()));
  EXPECT_EQ(kinds_of(a, mark), (std::vector<Fx>{Fx::kSteppedDown}));
  answer_acquire(acq, Outcome::kOk, 8);
  EXPECT_EQ(fx.count(Fx::kElected, mark), 0u);
  ASSERT_EQ(releases_since(mark).size(), 1u);
  EXPECT_EQ(releases_since(mark)[0].token, 8u);
  // Step-down of a lock is refused.
  const ContenderId l = node->add_lock("l", TimePoint::max(), false, now());
  EXPECT_FALSE(node->step_down(l, ms(1000), now()));
  EXPECT_FALSE(node->step_down(999, ms(1000), now()));
}

TEST_F(NodeTest, StopDuringAStepDownHandover) {
  start_live();
  auto [a, ta] = leader("a", 1);
  const size_t mark = fx.mark();
  ASSERT_TRUE(node->step_down(a, ms(10000), now()));
  ASSERT_TRUE(node->stop(a, now()));
  EXPECT_EQ(fx.count(Fx::kRelease, mark), 1u);
  answer_release(take_release());
  EXPECT_EQ(kinds_of(a, mark),
            (std::vector<Fx>{Fx::kTermEnded, Fx::kRevoked, Fx::kSteppedDown, Fx::kStopped}));
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kSteppedDown);
  EXPECT_FALSE(node->step_down(a, ms(1), now()));
}

TEST_F(NodeTest, StepDownTwiceDuringAHandoverAcksBoth) {
  start_live();
  auto [a, ta] = leader("a", 1);
  const size_t mark = fx.mark();
  ASSERT_TRUE(node->step_down(a, ms(10000), now()));
  ASSERT_TRUE(node->step_down(a, ms(10000), now()));
  EXPECT_EQ(fx.count(Fx::kRelease, mark), 1u);
  answer_release(take_release());
  EXPECT_EQ(kinds_of(a, mark),
            (std::vector<Fx>{Fx::kTermEnded, Fx::kRevoked, Fx::kSteppedDown, Fx::kSteppedDown}));
}

TEST_F(NodeTest, AddElectionTwiceForTheSameNameReturnsZero) {
  start_live();
  const ContenderId a = node->add_election("a", now());
  ASSERT_NE(a, 0u);
  const size_t mark = fx.mark();
  EXPECT_EQ(node->add_election("a", now()), 0u);
  EXPECT_EQ(node->add_lock("a", TimePoint::max(), false, now()), 0u);
  EXPECT_EQ(fx.mark(), mark);
  const ContenderId l = node->add_lock("l", TimePoint::max(), false, now());
  ASSERT_NE(l, 0u);
  EXPECT_EQ(node->add_election("l", now()), 0u);
  // Ids are never reused.
  EXPECT_NE(node->add_election("b", now()), a);
}

// ===========================================================================
// Locks

TEST_F(NodeTest, LockAcquiresAndReleases) {
  start_live();
  const ContenderId l = node->add_lock("l", TimePoint::max(), false, now());
  ASSERT_NE(l, 0u);
  auto t = win("l", 4);
  ASSERT_TRUE(t);
  EXPECT_EQ(view_of(l)->kind, ContenderKind::kLock);
  const size_t mark = fx.mark();
  ASSERT_TRUE(node->stop(l, now()));
  EXPECT_EQ(fx.kinds(mark), (std::vector<Fx>{Fx::kTermEnded, Fx::kRelease}));
  EXPECT_EQ(fx.of(Fx::kRelease, mark)[0].token, 4u);
  answer_release(take_release());
  EXPECT_EQ(kinds_of(l, mark), (std::vector<Fx>{Fx::kTermEnded, Fx::kRevoked, Fx::kStopped}));
  EXPECT_EQ(fx.revoked_reason(t), RevokeReason::kStopped);
}

TEST_F(NodeTest, LockRetriesWhileHeldElsewhere) {
  start_live();
  auto_keep_alive = true;
  const ContenderId l = node->add_lock("l", TimePoint::max(), false, now());
  held("l");
  ASSERT_TRUE(run_until_true([&] { return fx.pending_count(Fx::kAcquire) > 0; }, now() + ms(5000)));
  auto t = win("l", 2);
  ASSERT_TRUE(t);
  EXPECT_EQ(view_of(l)->state, "leader");
}

TEST_F(NodeTest, LockQueuesBehindAnotherLockOfTheNodeOnTheSameName) {
  start_live();
  const ContenderId l1 = node->add_lock("l", TimePoint::max(), false, now());
  auto t1 = win("l", 1);
  ASSERT_TRUE(t1);
  size_t mark = fx.mark();
  const ContenderId l2 = node->add_lock("l", TimePoint::max(), false, now());
  const ContenderId l3 = node->add_lock("l", TimePoint::max(), false, now());
  ASSERT_NE(l2, 0u);
  ASSERT_NE(l3, 0u);
  EXPECT_EQ(fx.count(Fx::kAcquire, mark), 0u);
  EXPECT_EQ(view_of(l2)->state, "waiting");
  // A broadcast of the name does not wake a waiting lock.
  node->on_released("l", now());
  EXPECT_EQ(fx.count(Fx::kAcquire, mark), 0u);
  ASSERT_TRUE(node->stop(l1, now()));
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
  ASSERT_TRUE(node->stop(l2, now()));
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
  const ContenderId l1 = node->add_lock("q", TimePoint::max(), false, now());
  auto t1 = win("q", 1);
  ASSERT_TRUE(t1);
  const ContenderId l2 = node->add_lock("q", TimePoint::max(), false, now());
  const ContenderId l3 = node->add_lock("q", TimePoint::max(), false, now());
  const ContenderId l4 = node->add_lock("q", TimePoint::max(), false, now());
  const ContenderId other = node->add_lock("q.", TimePoint::max(), false, now());
  auto t_other = win("q.", 1);  // another name: not queued behind "q"
  ASSERT_TRUE(t_other);
  // An election cannot take a name that locks use, queued or not.
  EXPECT_EQ(node->add_election("q", now()), 0u);
  size_t mark = fx.mark();
  ASSERT_TRUE(node->stop(l3, now()));  // from the middle of the queue
  EXPECT_EQ(kinds_of(l3, mark), (std::vector<Fx>{Fx::kLockFailed}));
  EXPECT_EQ(fx.count(Fx::kAcquire, mark), 0u);
  ContenderId holder = l1;
  for (ContenderId next : {l2, l4}) {
    mark = fx.mark();
    ASSERT_TRUE(node->stop(holder, now()));
    answer_release(take_release());
    EXPECT_EQ(fx.count(Fx::kAcquire, mark), 1u);
    ASSERT_TRUE(win("q", next == l2 ? 2 : 3));
    EXPECT_EQ(fx.of(Fx::kElected).back().who, next);
    holder = next;
  }
  EXPECT_FALSE(view_of(l1).has_value());
  // The last lock of "q" leaves: the name is free for an election.
  ASSERT_TRUE(node->stop(l4, now()));
  answer_release(take_release());
  const ContenderId e = node->add_election("q", now());
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
  const ContenderId l1 = node->add_lock("l", TimePoint::max(), false, now());
  auto t1 = win("l", 1);
  const size_t mark = fx.mark();
  const ContenderId l2 = node->add_lock("l", TimePoint::max(), true, now());
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
  const ContenderId l = node->add_lock("l", TimePoint::max(), true, now());
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
  const ContenderId l = node->add_lock("l", TimePoint::max(), true, now());
  auto t = win("l", 1);
  ASSERT_TRUE(t);
  EXPECT_EQ(view_of(l)->state, "leader");
}

TEST_F(NodeTest, LockGivesUpAtGiveUpAtWithTimeout) {
  start_live();
  auto_keep_alive = true;
  const TimePoint give_up = now() + ms(3000);
  const ContenderId l = node->add_lock("l", give_up, false, now());
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
  const ContenderId l = node->add_lock("l", give_up, false, now());
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
  const ContenderId l1 = node->add_lock("l", TimePoint::max(), false, now());
  auto t1 = win("l", 1);
  const TimePoint give_up = now() + ms(2000);
  const ContenderId l2 = node->add_lock("l", give_up, false, now());
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
  const ContenderId l = node->add_lock("l", now(), false, now());
  ASSERT_NE(l, 0u);
  ASSERT_EQ(fx.count(Fx::kLockFailed), 1u);
  EXPECT_EQ(fx.of(Fx::kLockFailed)[0].failure, LockFailure::kTimeout);
  EXPECT_EQ(fx.count(Fx::kAcquire), 0u);
}

TEST_F(NodeTest, ALockThatGaveUpDuringItsAttemptHoldsBackTheNextAcquireOfTheName) {
  start_live();
  auto_keep_alive = true;
  node->add_lock("l", now() + ms(300), false, now());
  const FxCall acq = take_acquire("l");
  size_t mark = fx.mark();
  advance(ms(300));
  ASSERT_EQ(fx.count(Fx::kLockFailed, mark), 1u);
  EXPECT_EQ(fx.of(Fx::kLockFailed, mark)[0].failure, LockFailure::kTimeout);
  // The given-up acquire may still win on the backend: the next lock of the
  // name waits for its answer instead of finding the name held by itself.
  mark = fx.mark();
  const ContenderId t = node->add_lock("l", TimePoint::max(), true, now());
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
  node->add_lock("m", now() + ms(200), false, now());
  const FxCall lost = take_acquire("m");
  const TimePoint sent = now();
  advance(ms(200));
  mark = fx.mark();
  node->add_lock("m", TimePoint::max(), false, now());
  ASSERT_TRUE(run_until_true([&] { return !acquires_since(mark, "m").empty(); }, sent + 3 * kRenew));
  EXPECT_GE(now(), sent + 2 * kRenew);
  (void)lost;
}

TEST_F(NodeTest, StopOnAPendingLockCancelsIt) {
  start_live();
  // Acquiring: canceled at once, a late win released.
  const ContenderId l = node->add_lock("l", TimePoint::max(), false, now());
  const FxCall acq = take_acquire("l");
  size_t mark = fx.mark();
  ASSERT_TRUE(node->stop(l, now()));
  ASSERT_EQ(fx.count(Fx::kLockFailed, mark), 1u);
  EXPECT_EQ(fx.of(Fx::kLockFailed, mark)[0].failure, LockFailure::kCanceled);
  answer_acquire(acq, Outcome::kOk, 2);
  EXPECT_EQ(fx.count(Fx::kElected, mark), 0u);
  EXPECT_EQ(releases_since(mark).size(), 1u);
  // Waiting behind another lock of the node: canceled, the holder untouched.
  const ContenderId h = node->add_lock("m", TimePoint::max(), false, now());
  auto th = win("m", 1);
  const ContenderId w = node->add_lock("m", TimePoint::max(), false, now());
  mark = fx.mark();
  ASSERT_TRUE(node->stop(w, now()));
  EXPECT_EQ(kinds_of(w, mark), (std::vector<Fx>{Fx::kLockFailed}));
  EXPECT_EQ(fx.of(Fx::kLockFailed, mark)[0].failure, LockFailure::kCanceled);
  EXPECT_TRUE(th->valid());
  EXPECT_EQ(view_of(h)->state, "leader");
  // A candidate lock (held elsewhere, waiting to retry): canceled too.
  const ContenderId c = node->add_lock("n", TimePoint::max(), false, now());
  held("n");
  mark = fx.mark();
  ASSERT_TRUE(node->stop(c, now()));
  EXPECT_EQ(kinds_of(c, mark), (std::vector<Fx>{Fx::kLockFailed}));
}

TEST_F(NodeTest, LockTermLostToTheDeadlineIsRevokedAndStopped) {
  const TimePoint t0 = now();
  start_live();
  const ContenderId l = node->add_lock("l", TimePoint::max(), false, now());
  auto t = win("l", 1);
  const ContenderId l2 = node->add_lock("l", TimePoint::max(), false, now());
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
  const ContenderId l = node->add_lock("l", TimePoint::max(), false, now());
  auto t = win("l", 1);
  run_until(t0 + kRenew);
  const size_t mark = fx.mark();
  ka_ok(kLease, std::vector<OwnedLease>{});
  EXPECT_EQ(kinds_of(l, mark), (std::vector<Fx>{Fx::kTermEnded, Fx::kRevoked, Fx::kStopped}));
  EXPECT_EQ(fx.revoked_reason(t), RevokeReason::kTakenOver);
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
  ASSERT_TRUE(node->step_down(a, ms(0), now()));
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
  const ContenderId a = node->add_election("a", now());
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
  ASSERT_NE(node->add_election("a", now()), 0u);
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

// ===========================================================================
// Closing

TEST_F(NodeTest, CloseRevokesEveryTermWithOneCloseCallAndNoReleases) {
  start_live();
  auto [a, ta] = leader("a", 1);
  auto [b, tb] = leader("b", 2);
  const ContenderId l = node->add_lock("l", TimePoint::max(), false, now());
  auto tl = win("l", 3);
  const ContenderId w = node->add_lock("l", TimePoint::max(), false, now());  // waiting
  const ContenderId c = node->add_election("c", now());
  held("c");
  const ContenderId d = node->add_election("d", now());  // acquiring
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
  EXPECT_EQ(node->add_election("e", now()), 0u);
  EXPECT_EQ(node->add_lock("e", TimePoint::max(), false, now()), 0u);
  EXPECT_FALSE(node->stop(a, now()));
  EXPECT_FALSE(node->step_down(a, ms(1), now()));
  answer_acquire(acq_d, Outcome::kOk, 4);  // the close frees it
  EXPECT_EQ(fx.count(Fx::kElected, mark), 0u);
  advance(ms(300));
  answer_close(fx.take(Fx::kClose));
  // revoked() then stopped() per contender, then closed() last.
  for (const auto& [id, t] :
       std::vector<std::pair<ContenderId, std::shared_ptr<TermState>>>{{a, ta}, {b, tb}, {l, tl}}) {
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
  const ContenderId a = node->add_election("a", now());
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
  ASSERT_TRUE(node->stop(a, now()));
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

TEST_F(NodeTest, CloseCompletesWhenTheCloseCallTimesOut) {
  start_live();
  auto [a, ta] = leader("a", 1);
  const TimePoint closed_at = now();
  node->close(now());
  run_until(closed_at + kRenew - k1ns);
  EXPECT_FALSE(fx.closed_seen());
  run_until(closed_at + kRenew);
  EXPECT_TRUE(fx.closed_seen());
  EXPECT_EQ(fx.revoked_reason(ta), RevokeReason::kStopped);
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
  const ContenderId b = node->add_election("b", now());
  const ContenderId c = node->add_election("c", now());
  held("c");
  const ContenderId d = node->add_election("d", now());
  held("d");
  ASSERT_TRUE(node->step_down(d, ms(1000), now()));
  const ContenderId l = node->add_lock("a2", TimePoint::max(), false, now());
  auto tl = win("a2", 1);
  const ContenderId w = node->add_lock("a2", TimePoint::max(), false, now());
  const ContenderId e = node->add_election("e", now());
  auto te = win("e", 2);
  ASSERT_TRUE(node->stop(e, now()));
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
      ids.push_back(node->add_election(names[pick(3)], now()));
    } else if (what < 14) {
      const int mode = pick(3);
      const TimePoint give_up = mode == 0 ? TimePoint::max() : now() + ms(pick(20000));
      ids.push_back(node->add_lock(names[pick(3)], give_up, mode == 2, now()));
    } else if (what < 18 && !ids.empty()) {
      node->stop(ids[pick(static_cast<int>(ids.size()))], now());
    } else if (what < 21 && !ids.empty()) {
      node->step_down(ids[pick(static_cast<int>(ids.size()))], ms(pick(10000)), now());
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
          node->on_close(c.call, DoneReply{Outcome::kOk, ""}, now());
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
}  // namespace simba
