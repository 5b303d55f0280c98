// Tests of the core Node: which names it watches for release broadcasts
// (Effects::watch / unwatch; ADR 0040). A contender watches its name from an
// acquire answered Held until it leads, cools down or leaves; a lock queue
// shares one watch. RecordingEffects also checks, in every core test, that
// watches are balanced and that none is left at closed().
// The fixture is in node_fixture.h.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/node_fixture.h"

namespace simba::node_test {
namespace {

using Watches = std::vector<std::string>;

TEST_F(NodeTest, AnUncontendedLeaderWatchesNothing) {
  start_live();
  auto [id, t] = leader("a", 1);
  ASSERT_TRUE(t);
  ASSERT_TRUE(stop(id, now()));
  answer_release(take_release());
  EXPECT_EQ(fx.watches(), Watches{});
}

TEST_F(NodeTest, ACandidateWatchesFromAHeldAnswerUntilItLeads) {
  start_live();
  const ContenderId a = add_election("a", now());
  EXPECT_EQ(fx.watches(), Watches{});  // not while its first acquire is out
  held("a");
  EXPECT_EQ(fx.watches(), Watches{"+a"});
  EXPECT_TRUE(fx.watching("a"));
  // The broadcast brings the next attempt; another Held keeps the one watch.
  node->on_released("a", now());
  held("a");
  node->on_released("a", now());
  const size_t mark = fx.watches().size();
  auto t = win("a", 7);
  ASSERT_TRUE(t);
  EXPECT_EQ(fx.watches_since(mark), Watches{"-a"});
  EXPECT_EQ(view_of(a)->state, "leader");
  EXPECT_EQ(fx.watches(), (Watches{"+a", "-a"}));
}

TEST_F(NodeTest, AWatchOutlivesFailedAttemptsAndTheEndOfASession) {
  start_live();
  add_election("a", now());
  held("a");
  node->on_released("a", now());
  answer_acquire(take_acquire("a"), Outcome::kError);
  EXPECT_TRUE(fx.watching("a"));
  // The session ends: the candidate contends again on the next one, still watching.
  node->on_released("a", now());
  answer_acquire(take_acquire("a"), Outcome::kExpired);
  EXPECT_NE(node->status(), SessionStatus::kLive);
  EXPECT_EQ(fx.watches(), Watches{"+a"});
}

TEST_F(NodeTest, ACandidateThatStopsUnwatches) {
  start_live();
  const ContenderId a = add_election("a", now());
  held("a");
  ASSERT_TRUE(stop(a, now()));
  EXPECT_TRUE(fx.finished(a));
  EXPECT_EQ(fx.watches(), (Watches{"+a", "-a"}));
}

TEST_F(NodeTest, ACandidateStoppedDuringAnAttemptUnwatchesWhenItCompletes) {
  start_live();
  const ContenderId a = add_election("a", now());
  held("a");
  node->on_released("a", now());  // the next attempt goes out
  ASSERT_TRUE(stop(a, now()));
  EXPECT_EQ(fx.watches(), Watches{"+a"});  // it waits for the attempt's answer
  held("a");
  EXPECT_TRUE(fx.finished(a));
  EXPECT_EQ(fx.watches(), (Watches{"+a", "-a"}));
}

TEST_F(NodeTest, ACandidateThatCoolsDownUnwatchesAndWatchesAgainWhenHeldAfter) {
  start_live();
  const ContenderId a = add_election("a", now());
  held("a");
  ASSERT_TRUE(step_down(a, ms(1000), now()));
  EXPECT_EQ(view_of(a)->state, "cooldown");
  EXPECT_EQ(fx.watches(), (Watches{"+a", "-a"}));
  advance(ms(1000));
  held("a");
  EXPECT_EQ(fx.watches(), (Watches{"+a", "-a", "+a"}));
}

// Its own release was echoed to nobody (it did not watch the name then): the
// first broadcast after its watch is someone else's, and is acted on at once.
TEST_F(NodeTest, AReleaseHeardAfterAWatchIsNotTakenForTheEchoOfAnOwnRelease) {
  start_live();
  auto_keep_alive = true;
  auto [a, ta] = leader("a", 5);
  ASSERT_TRUE(step_down(a, ms(0), now()));
  answer_release(take_release());
  ASSERT_TRUE(run_until_true([&] { return fx.pending_count(Fx::kAcquire) > 0; }, now() + kRenew));
  held("a");
  EXPECT_EQ(fx.watches(), Watches{"+a"});
  const size_t mark = fx.mark();
  node->on_released("a", now());
  EXPECT_EQ(acquires_since(mark, "a").size(), 1u) << "taken for the echo of its own release";
}

TEST_F(NodeTest, ATryOnceLockFoundHeldWatchesNothing) {
  start_live();
  add_lock("l", TimePoint::max(), true, now());
  held("l");
  EXPECT_EQ(fx.watches(), Watches{});
}

TEST_F(NodeTest, ALockQueueSharesOneWatchOfItsName) {
  start_live();
  const ContenderId l1 = add_lock("l", now() + ms(1000), false, now());
  held("l");
  const ContenderId l2 = add_lock("l", TimePoint::max(), false, now());
  EXPECT_EQ(view_of(l2)->state, "waiting");
  EXPECT_EQ(fx.watches(), Watches{"+l"});
  // l1 gives up: l2, next in line, contends under the same watch.
  advance(ms(1000));
  EXPECT_TRUE(fx.finished(l1));
  EXPECT_EQ(fx.watches(), Watches{"+l"});
  held("l");
  EXPECT_EQ(fx.watches(), Watches{"+l"});
  node->on_released("l", now());
  auto t = win("l", 3);
  ASSERT_TRUE(t);
  EXPECT_EQ(fx.watches(), (Watches{"+l", "-l"}));
}

TEST_F(NodeTest, ALockQueuedBehindALockOfTheNodeWatchesNothing) {
  start_live();
  const ContenderId l1 = add_lock("l", TimePoint::max(), false, now());
  auto t1 = win("l", 1);
  ASSERT_TRUE(t1);
  add_lock("l", TimePoint::max(), false, now());
  ASSERT_TRUE(stop(l1, now()));
  answer_release(take_release());
  auto t2 = win("l", 2);  // the queued lock goes at once, without a broadcast
  ASSERT_TRUE(t2);
  EXPECT_EQ(fx.watches(), Watches{});
}

TEST_F(NodeTest, TheCloseUnwatchesEveryWatchedNameBeforeClosed) {
  start_live();
  add_election("a", now());
  add_lock("l", TimePoint::max(), false, now());
  add_lock("l", TimePoint::max(), false, now());  // queued behind it
  held("a");
  held("l");
  EXPECT_EQ(fx.watches(), (Watches{"+a", "+l"}));
  node->close(now());
  answer_close(fx.take(Fx::kClose));
  ASSERT_TRUE(node->closed());
  EXPECT_EQ(fx.watches(), (Watches{"+a", "+l", "-a", "-l"}));
}

}  // namespace
}  // namespace simba::node_test
