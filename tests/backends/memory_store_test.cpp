// MemoryStore: the memory:// backend's state, driven directly with a fake clock.
#include "backend/memory/memory_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/fake_clock.h"

namespace simba {
namespace {

using ::simba::testing::FakeClock;

constexpr Duration kLease = ms(1000);

bool is_lower_hex_32(const std::string& id) {
  return id.size() == 32 && std::all_of(id.begin(), id.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

class MemoryStoreTest : public ::testing::Test {
 protected:
  std::string open(Duration lease = kLease) {
    OpenReply r = store.open_session(lease);
    EXPECT_EQ(r.outcome, Outcome::kOk) << r.error;
    return r.session_id;
  }
  uint64_t acquire_ok(const std::string& session, const std::string& name) {
    AcquireReply r = store.acquire(session, name);
    EXPECT_EQ(r.outcome, Outcome::kOk) << outcome_name(r.outcome);
    return r.token;
  }
  // Records every broadcast release, in order.
  void record_releases() {
    store.subscribe([this](const std::string& name) {
      std::lock_guard<std::mutex> lock(released_mu);
      released.push_back(name);
    });
  }
  std::vector<std::string> take_released() {
    std::lock_guard<std::mutex> lock(released_mu);
    std::vector<std::string> out;
    out.swap(released);
    return out;
  }

  FakeClock clock;
  MemoryStore store{clock};
  std::mutex released_mu;
  std::vector<std::string> released;
};

TEST(OutcomeNameTest, NamesEveryOutcome) {
  EXPECT_STREQ(outcome_name(Outcome::kOk), "ok");
  EXPECT_STREQ(outcome_name(Outcome::kHeld), "held");
  EXPECT_STREQ(outcome_name(Outcome::kExpired), "expired");
  EXPECT_STREQ(outcome_name(Outcome::kError), "error");
  EXPECT_STREQ(outcome_name(Outcome::kTimeout), "timeout");
  EXPECT_STREQ(outcome_name(static_cast<Outcome>(99)), "unknown");
}

TEST_F(MemoryStoreTest, OpenGivesDistinct32HexIdsAndGrantsTheLease) {
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) {
    OpenReply r = store.open_session(kLease);
    ASSERT_EQ(r.outcome, Outcome::kOk);
    EXPECT_TRUE(is_lower_hex_32(r.session_id)) << r.session_id;
    EXPECT_EQ(r.remaining, kLease);
    EXPECT_TRUE(ids.insert(r.session_id).second) << "reused id " << r.session_id;
  }
  EXPECT_EQ(store.live_sessions().size(), 1000u);
  // Two stores share no state but still never hand out the same id.
  FakeClock other_clock;
  MemoryStore other(other_clock);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(ids.count(other.open_session(kLease).session_id), 0u);
  }
}

TEST_F(MemoryStoreTest, NonPositiveLeaseIsAnError) {
  EXPECT_EQ(store.open_session(Duration::zero()).outcome, Outcome::kError);
  EXPECT_EQ(store.open_session(ms(-5)).outcome, Outcome::kError);
  EXPECT_TRUE(store.live_sessions().empty());
  const std::string s = open();
  KeepAliveReply r = store.keep_alive(s, Duration::zero());
  EXPECT_EQ(r.outcome, Outcome::kError);
  EXPECT_FALSE(r.error.empty());
  EXPECT_TRUE(store.session_live(s));
}

TEST_F(MemoryStoreTest, HugeLeaseSaturatesInsteadOfOverflowing) {
  const std::string s = open(Duration::max());
  clock.advance(std::chrono::hours(24 * 365));
  EXPECT_TRUE(store.session_live(s));
  EXPECT_EQ(store.keep_alive(s, Duration::max()).outcome, Outcome::kOk);
}

TEST_F(MemoryStoreTest, KeepAliveExtendsAndListsOwnedLeasesSortedWithTokens) {
  const std::string s = open();
  const std::string other = open();
  acquire_ok(s, "b");
  acquire_ok(s, "a");
  acquire_ok(other, "z");
  // Give "c" a later token: two terms before this one.
  store.release(s, "c", acquire_ok(s, "c"));
  store.release(s, "c", acquire_ok(s, "c"));
  EXPECT_EQ(acquire_ok(s, "c"), 3u);

  clock.advance(ms(900));
  KeepAliveReply r = store.keep_alive(s, kLease);
  ASSERT_EQ(r.outcome, Outcome::kOk);
  EXPECT_EQ(r.remaining, kLease);
  EXPECT_EQ(r.owned, (std::vector<OwnedLease>{{"a", 1}, {"b", 1}, {"c", 3}}));

  // Without that keep-alive the session would have ended at 1000 ms.
  clock.advance(ms(900));
  EXPECT_TRUE(store.session_live(s));
  EXPECT_FALSE(store.session_live(other));
  // A different lease duration on renewal is honoured.
  r = store.keep_alive(s, ms(200));
  ASSERT_EQ(r.outcome, Outcome::kOk);
  EXPECT_EQ(r.remaining, ms(200));
  clock.advance(ms(200));
  EXPECT_FALSE(store.session_live(s));
}

TEST_F(MemoryStoreTest, KeepAliveStopsListingReleasedLeases) {
  const std::string s = open();
  const uint64_t t = acquire_ok(s, "a");
  acquire_ok(s, "b");
  store.release(s, "a", t);
  EXPECT_EQ(store.keep_alive(s, kLease).owned, (std::vector<OwnedLease>{{"b", 1}}));
  EXPECT_EQ(acquire_ok(s, "a"), 2u);
  EXPECT_EQ(store.keep_alive(s, kLease).owned, (std::vector<OwnedLease>{{"a", 2}, {"b", 1}}));
}

TEST_F(MemoryStoreTest, SessionExpiresExactlyAtExpiresAt) {
  const std::string s = open();
  clock.advance(kLease - Duration(1));
  EXPECT_TRUE(store.session_live(s));
  clock.advance(Duration(1));  // now == expires_at
  EXPECT_FALSE(store.session_live(s));
  EXPECT_TRUE(store.live_sessions().empty());
}

TEST_F(MemoryStoreTest, KeepAliveAtExpiresAtIsTooLateAndNeverRevives) {
  const std::string s = open();
  acquire_ok(s, "x");
  record_releases();
  clock.advance(kLease);
  KeepAliveReply r = store.keep_alive(s, kLease);
  EXPECT_EQ(r.outcome, Outcome::kExpired);
  EXPECT_TRUE(r.owned.empty());
  EXPECT_EQ(take_released(), std::vector<std::string>{"x"});
  EXPECT_EQ(store.lease("x").holder, "");
  // Still expired on every later call; its acquires are refused.
  EXPECT_EQ(store.keep_alive(s, kLease).outcome, Outcome::kExpired);
  EXPECT_EQ(store.acquire(s, "x").outcome, Outcome::kExpired);
  EXPECT_EQ(store.acquire(s, "fresh").outcome, Outcome::kExpired);
  EXPECT_EQ(store.lease("fresh").token, 0u);
  EXPECT_TRUE(take_released().empty());
}

TEST_F(MemoryStoreTest, UnknownSessionIsExpired) {
  EXPECT_EQ(store.keep_alive("0123456789abcdef0123456789abcdef", kLease).outcome,
            Outcome::kExpired);
  EXPECT_EQ(store.acquire("nope", "x").outcome, Outcome::kExpired);
  EXPECT_FALSE(store.session_live("nope"));
}

TEST_F(MemoryStoreTest, AcquireContendAndHeldWithHolderRemaining) {
  const std::string a = open();
  const std::string b = open(ms(5000));
  EXPECT_EQ(acquire_ok(a, "x"), 1u);
  clock.advance(ms(300));

  AcquireReply r = store.acquire(b, "x");
  EXPECT_EQ(r.outcome, Outcome::kHeld);
  EXPECT_EQ(r.holder_remaining, ms(700));
  EXPECT_EQ(r.token, 0u);

  // The holder itself gets Held too, with its own remaining time.
  r = store.acquire(a, "x");
  EXPECT_EQ(r.outcome, Outcome::kHeld);
  EXPECT_EQ(r.holder_remaining, ms(700));

  MemoryStore::LeaseView v = store.lease("x");
  EXPECT_EQ(v.holder, a);
  EXPECT_EQ(v.token, 1u);
  EXPECT_EQ(store.keep_alive(b, ms(5000)).owned, std::vector<OwnedLease>{});
}

TEST_F(MemoryStoreTest, ExpiredHoldersLeaseIsTakenWithNextToken) {
  const std::string a = open();
  const std::string b = open(ms(10000));
  EXPECT_EQ(acquire_ok(a, "x"), 1u);
  EXPECT_EQ(acquire_ok(a, "y"), 1u);
  record_releases();
  clock.advance(ms(999));
  EXPECT_EQ(store.acquire(b, "x").outcome, Outcome::kHeld);
  clock.advance(ms(1));
  EXPECT_EQ(acquire_ok(b, "x"), 2u);
  // The expired session's other lease is freed and broadcast; "x" went
  // straight to b, so it is not announced as free.
  EXPECT_EQ(take_released(), std::vector<std::string>{"y"});
  EXPECT_EQ(store.lease("x").holder, b);
  EXPECT_EQ(store.lease("y").holder, "");
  EXPECT_EQ(store.lease("y").token, 1u);
  EXPECT_FALSE(store.session_live(a));
  EXPECT_EQ(store.keep_alive(a, kLease).outcome, Outcome::kExpired);
  EXPECT_EQ(store.keep_alive(b, kLease).owned, (std::vector<OwnedLease>{{"x", 2}}));
}

TEST_F(MemoryStoreTest, LeaseViewShowsAnExpiredHolderAsFree) {
  const std::string a = open();
  acquire_ok(a, "x");
  record_releases();
  clock.advance(kLease);
  MemoryStore::LeaseView v = store.lease("x");
  EXPECT_EQ(v.holder, "");
  EXPECT_EQ(v.token, 1u);
  EXPECT_EQ(take_released(), std::vector<std::string>{"x"});
  EXPECT_EQ(store.lease("never").holder, "");
  EXPECT_EQ(store.lease("never").token, 0u);
}

TEST_F(MemoryStoreTest, TokensStrictlyIncreaseAcrossTermsAndSessionsAndNeverReset) {
  uint64_t last = 0;
  auto next = [&](uint64_t token) {
    EXPECT_GT(token, last);
    last = token;
  };
  const std::string a = open(ms(100000));
  for (int i = 0; i < 5; ++i) {
    const uint64_t t = acquire_ok(a, "x");
    next(t);
    store.release(a, "x", t);
  }
  const std::string b = open();
  next(acquire_ok(b, "x"));
  store.close_session(b);
  next(acquire_ok(a, "x"));
  store.expire_session(a);
  const std::string c = open();
  next(acquire_ok(c, "x"));
  next(store.hand_over("x", "elsewhere"));
  store.hand_over("x", c);
  clock.advance(kLease);  // every session is gone now
  EXPECT_TRUE(store.live_sessions().empty());
  const std::string d = open();
  next(acquire_ok(d, "x"));
  EXPECT_EQ(last, 11u);  // consecutive on this backend: +1 per term
  // Another name counts on its own, from 1.
  EXPECT_EQ(acquire_ok(d, "other"), 1u);
}

TEST_F(MemoryStoreTest, ReleaseNeedsBothSessionAndToken) {
  const std::string a = open();
  const std::string b = open();
  const uint64_t t = acquire_ok(a, "x");
  record_releases();

  EXPECT_EQ(store.release(a, "x", t + 1).outcome, Outcome::kOk);  // wrong token
  EXPECT_EQ(store.release(a, "x", 0).outcome, Outcome::kOk);
  EXPECT_EQ(store.release(b, "x", t).outcome, Outcome::kOk);  // wrong session
  EXPECT_EQ(store.release(a, "unknown", t).outcome, Outcome::kOk);
  EXPECT_EQ(store.lease("x").holder, a);
  EXPECT_TRUE(take_released().empty());

  EXPECT_EQ(store.release(a, "x", t).outcome, Outcome::kOk);
  EXPECT_EQ(store.lease("x").holder, "");
  EXPECT_EQ(take_released(), std::vector<std::string>{"x"});

  // A late duplicate of that release frees nothing, not even a later term.
  const uint64_t t2 = acquire_ok(a, "x");
  EXPECT_EQ(store.release(a, "x", t).outcome, Outcome::kOk);
  EXPECT_EQ(store.lease("x").holder, a);
  EXPECT_EQ(store.lease("x").token, t2);
  EXPECT_TRUE(take_released().empty());
}

TEST_F(MemoryStoreTest, ReleaseByAnExpiredSessionIsHarmless) {
  const std::string a = open();
  const std::string b = open(ms(10000));
  const uint64_t t = acquire_ok(a, "x");
  clock.advance(kLease);
  const uint64_t t2 = acquire_ok(b, "x");
  EXPECT_EQ(store.release(a, "x", t).outcome, Outcome::kOk);
  EXPECT_EQ(store.release(a, "x", t2).outcome, Outcome::kOk);
  EXPECT_EQ(store.lease("x").holder, b);
  EXPECT_EQ(store.release("never-opened", "x", t2).outcome, Outcome::kOk);
  EXPECT_EQ(store.lease("x").holder, b);
}

TEST_F(MemoryStoreTest, CloseFreesEveryLeaseAtOnceAndBroadcastsEach) {
  const std::string a = open();
  const std::string b = open();
  for (const char* n : {"c", "a", "b"}) acquire_ok(a, n);
  acquire_ok(b, "d");
  record_releases();

  EXPECT_EQ(store.close_session(a).outcome, Outcome::kOk);
  std::vector<std::string> got = take_released();
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_FALSE(store.session_live(a));
  EXPECT_EQ(store.keep_alive(a, kLease).outcome, Outcome::kExpired);
  for (const char* n : {"a", "b", "c"}) EXPECT_EQ(acquire_ok(b, n), 2u);
  EXPECT_EQ(store.lease("d").holder, b);

  // Closing again, or closing an unknown session, is fine and frees nothing.
  EXPECT_EQ(store.close_session(a).outcome, Outcome::kOk);
  EXPECT_EQ(store.close_session("unknown").outcome, Outcome::kOk);
  EXPECT_TRUE(take_released().empty());
}

TEST_F(MemoryStoreTest, SubscribersRunForEveryReleaseAndStopAfterUnsubscribe) {
  const std::string a = open();
  std::vector<std::string> first, second;
  const uint64_t id1 = store.subscribe([&](const std::string& n) { first.push_back(n); });
  const uint64_t id2 = store.subscribe([&](const std::string& n) { second.push_back(n); });
  EXPECT_NE(id1, id2);
  store.release(a, "x", acquire_ok(a, "x"));
  store.unsubscribe(id1);
  store.release(a, "y", acquire_ok(a, "y"));
  store.unsubscribe(12345);  // unknown id: no-op
  EXPECT_EQ(first, std::vector<std::string>{"x"});
  EXPECT_EQ(second, (std::vector<std::string>{"x", "y"}));
}

// A subscriber of watched names only (memory:// clients, ADR 0040) hears the
// releases of the names it watches, once per watch, and nothing else; watch()
// tells whether the name is free at that moment (a release it may have missed).
TEST_F(MemoryStoreTest, AWatchingSubscriberHearsOnlyTheNamesItWatches) {
  record_releases();
  const std::string a = open();
  std::vector<std::string> w1, w2;
  const uint64_t id1 = store.subscribe([&](const std::string& n) { w1.push_back(n); }, false);
  const uint64_t id2 = store.subscribe([&](const std::string& n) { w2.push_back(n); }, false);
  const uint64_t x = acquire_ok(a, "x"), y = acquire_ok(a, "y");
  EXPECT_FALSE(store.watch(id1, "x"));  // held
  EXPECT_FALSE(store.watch(id2, "x"));
  EXPECT_FALSE(store.watch(id2, "y"));
  EXPECT_TRUE(store.watch(id1, "z"));  // free
  store.unwatch(id2, "x");
  store.release(a, "x", x);
  store.release(a, "y", y);
  EXPECT_EQ(w1, std::vector<std::string>{"x"});
  EXPECT_EQ(w2, std::vector<std::string>{"y"});
  // Unsubscribe drops every watch of its id.
  store.unsubscribe(id1);
  store.release(a, "z", acquire_ok(a, "z"));
  EXPECT_EQ(w1, std::vector<std::string>{"x"});
  EXPECT_EQ(take_released(), (std::vector<std::string>{"x", "y", "z"}));  // every name
  // A holder whose session expired counts as free.
  const std::string b = open(ms(100));
  acquire_ok(b, "e");
  EXPECT_FALSE(store.watch(id2, "e"));
  store.unwatch(id2, "e");
  clock.advance(ms(200));
  EXPECT_TRUE(store.watch(id2, "e"));
}

TEST_F(MemoryStoreTest, SubscriberMayCallBackIntoTheStore) {
  const std::string a = open();
  const std::string b = open();
  AcquireReply taken;
  std::vector<std::string> seen_in_callback;
  uint64_t self = 0;
  self = store.subscribe([&](const std::string& name) {
    // Every kind of call from inside a broadcast: none may deadlock.
    taken = store.acquire(b, name);
    seen_in_callback.push_back(store.lease(name).holder);
    EXPECT_TRUE(store.session_live(b));
    EXPECT_EQ(store.keep_alive(b, kLease).outcome, Outcome::kOk);
    store.unsubscribe(self);
    store.subscribe([](const std::string&) {});
  });
  store.release(a, "x", acquire_ok(a, "x"));
  EXPECT_EQ(taken.outcome, Outcome::kOk);
  EXPECT_EQ(taken.token, 2u);
  EXPECT_EQ(seen_in_callback, std::vector<std::string>{b});
  EXPECT_EQ(store.lease("x").holder, b);

  // A broadcast from inside a broadcast (the subscriber's own release).
  int depth = 0;
  store.subscribe([&](const std::string& name) {
    if (name == "x" && ++depth == 1) {
      const uint64_t t = acquire_ok(a, "nested");
      store.release(a, "nested", t);
    }
  });
  store.release(b, "x", taken.token);
  EXPECT_EQ(depth, 1);
  EXPECT_EQ(store.lease("nested").token, 1u);
  EXPECT_EQ(store.lease("nested").holder, "");
}

TEST_F(MemoryStoreTest, HandOverTakesTheLeaseFromItsHolder) {
  const std::string a = open();
  const std::string b = open(ms(100000));
  EXPECT_EQ(acquire_ok(a, "x"), 1u);
  acquire_ok(a, "y");
  record_releases();

  EXPECT_EQ(store.hand_over("x", "foreign-node"), 2u);
  EXPECT_TRUE(take_released().empty());  // taken over, not released
  EXPECT_EQ(store.keep_alive(a, kLease).owned, (std::vector<OwnedLease>{{"y", 1}}));
  EXPECT_EQ(store.lease("x").holder, "foreign-node");
  EXPECT_EQ(store.lease("x").token, 2u);

  // The old holder's release of its term frees nothing.
  store.release(a, "x", 1);
  EXPECT_EQ(store.lease("x").holder, "foreign-node");

  // A foreign holder never expires on this store.
  clock.advance(ms(50000));
  AcquireReply r = store.acquire(b, "x");
  EXPECT_EQ(r.outcome, Outcome::kHeld);
  EXPECT_LT(r.holder_remaining, Duration::zero());  // unknown
  EXPECT_EQ(store.lease("x").holder, "foreign-node");

  // Handing it to a session of the store makes it that session's lease.
  EXPECT_EQ(store.hand_over("x", b), 3u);
  EXPECT_EQ(store.keep_alive(b, ms(100000)).owned, (std::vector<OwnedLease>{{"x", 3}}));
  EXPECT_EQ(store.acquire(b, "x").outcome, Outcome::kHeld);
  store.release(b, "x", 3);
  EXPECT_EQ(take_released(), std::vector<std::string>{"x"});
  EXPECT_EQ(store.lease("x").holder, "");

  // A never-acquired name starts its tokens at 1.
  EXPECT_EQ(store.hand_over("fresh", "foreign-node"), 1u);
}

// ADR 0024: a lease record points at its holder's session id, and a session
// lists its records. Handing a lease over to "" frees it (token counted), a
// session stops listing what it lost, and a session that expired after its id
// was shared by its records frees them all.
TEST_F(MemoryStoreTest, HandOverToNobodyFreesAndTheLosersListForgetsIt) {
  const std::string a = open();
  EXPECT_EQ(acquire_ok(a, "x"), 1u);
  EXPECT_EQ(acquire_ok(a, "y"), 1u);
  EXPECT_EQ(store.hand_over("x", ""), 2u);
  EXPECT_EQ(store.lease("x").holder, "");
  EXPECT_EQ(store.lease("x").token, 2u);
  KeepAliveReply r = store.keep_alive(a, kLease);
  ASSERT_EQ(r.outcome, Outcome::kOk);
  EXPECT_EQ(r.owned, (std::vector<OwnedLease>{{"y", 1}}));
  // Free: the next acquire takes it with the next token.
  const std::string b = open();
  EXPECT_EQ(acquire_ok(b, "x"), 3u);
  EXPECT_EQ(store.lease("x").holder, b);
  store.expire_session(b);
  EXPECT_EQ(store.lease("x").holder, "");
  EXPECT_EQ(store.lease("y").holder, a);
  store.close_session(a);
  EXPECT_EQ(store.lease("y").holder, "");
  EXPECT_EQ(acquire_ok(open(), "y"), 2u);
}

TEST_F(MemoryStoreTest, HandedOverLeaseIsFreedWhenTheNewHolderExpires) {
  const std::string a = open();
  const std::string b = open(ms(100000));
  acquire_ok(b, "x");
  store.hand_over("x", a);
  EXPECT_EQ(store.keep_alive(b, ms(100000)).owned, std::vector<OwnedLease>{});
  clock.advance(kLease);
  EXPECT_EQ(acquire_ok(b, "x"), 3u);
}

TEST_F(MemoryStoreTest, ExpireSessionHookEndsItNowAndFreesItsLeases) {
  const std::string a = open();
  const std::string b = open();
  acquire_ok(a, "x");
  acquire_ok(a, "y");
  record_releases();
  store.expire_session(a);
  std::vector<std::string> got = take_released();
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"x", "y"}));
  EXPECT_FALSE(store.session_live(a));
  EXPECT_EQ(store.live_sessions(), std::vector<std::string>{b});
  EXPECT_EQ(store.keep_alive(a, kLease).outcome, Outcome::kExpired);
  EXPECT_EQ(acquire_ok(b, "x"), 2u);
  store.expire_session("unknown");  // no-op
}

// Permits (ADR 0046): an expired holder's permits and intents are swept by
// the acquire that meets them, and a watch of a permit resource says whether
// an acquire could go now.
TEST_F(MemoryStoreTest, AnExpiredSessionsPermitsAndIntentsGoWithIt) {
  record_releases();
  const std::string a = open(), b = open(ms(5000));
  PermitAsk sem;
  sem.kind = PermitKind::kSemaphore;
  sem.size = 1;
  PermitAsk read;
  read.kind = PermitKind::kRead;
  PermitAsk write;
  write.kind = PermitKind::kWrite;
  write.leave_intent = true;
  ASSERT_EQ(store.acquire_permit(a, "x", sem).outcome, Outcome::kOk);
  ASSERT_EQ(store.acquire_permit(b, "y", read).outcome, Outcome::kOk);
  const AcquireReply intent = store.acquire_permit(a, "y", write);
  ASSERT_EQ(intent.outcome, Outcome::kHeld);
  ASSERT_GT(intent.permit, 0u);
  EXPECT_EQ(store.acquire_permit(b, "x", sem).outcome, Outcome::kHeld);
  EXPECT_EQ(store.acquire_permit(b, "y", read).outcome, Outcome::kHeld);
  EXPECT_FALSE(store.watch(99, "sem/x"));
  clock.advance(kLease);  // a expires; b lives on
  take_released();
  EXPECT_EQ(store.acquire_permit(b, "x", sem).outcome, Outcome::kOk);
  EXPECT_EQ(store.acquire_permit(b, "y", read).outcome, Outcome::kOk);
  const std::vector<std::string> heard = take_released();
  EXPECT_NE(std::find(heard.begin(), heard.end(), "sem/x"), heard.end());
  EXPECT_NE(std::find(heard.begin(), heard.end(), "rw/y"), heard.end());
  // A size is the first holder's only while it holds: b's permit keeps 1.
  sem.size = 2;
  const AcquireReply refused = store.acquire_permit(b, "x", sem);
  EXPECT_EQ(refused.outcome, Outcome::kRefused);
  EXPECT_EQ(refused.size, 1u);
  const KeepAliveReply ka = store.keep_alive(b, kLease);
  EXPECT_EQ(ka.owned.size(), 3u);  // sem x, read y twice
  EXPECT_EQ(store.acquire_permit(a, "x", sem).outcome, Outcome::kExpired);
  EXPECT_STREQ(outcome_name(Outcome::kRefused), "refused");
}

TEST_F(MemoryStoreTest, LiveSessionsListsOnlyLiveOnes) {
  const std::string a = open(ms(100));
  const std::string b = open(ms(300));
  const std::string c = open(ms(200));
  std::vector<std::string> all{a, b, c};
  std::sort(all.begin(), all.end());
  EXPECT_EQ(store.live_sessions(), all);
  clock.advance(ms(150));
  std::vector<std::string> two{b, c};
  std::sort(two.begin(), two.end());
  EXPECT_EQ(store.live_sessions(), two);
  store.close_session(b);
  EXPECT_EQ(store.live_sessions(), std::vector<std::string>{c});
}

// The records sit in a hash index over packed names (ADR 0024): thousands
// of names, some of them longer than a block of names, held by two sessions
// in turns, released from the middle of a session's list, each found again
// with its own token after the index grew.
TEST_F(MemoryStoreTest, ThousandsOfRecordsKeepTheirNamesTokensAndHolders) {
  const std::string a = open(ms(100000));
  const std::string b = open(ms(100000));
  constexpr int kNames = 5000;
  auto name_of = [](int i) {
    // Every 1000th name is 70,000 characters long, more than a block of names.
    return i % 1000 == 7 ? std::string(70000, static_cast<char>('a' + i % 26)) + std::to_string(i)
                         : "lease-" + std::to_string(i);
  };
  for (int i = 0; i < kNames; ++i) acquire_ok(i % 2 ? b : a, name_of(i));
  // Every third name is released by its holder: from the middle of its list.
  for (int i = 0; i < kNames; i += 3) {
    store.release(i % 2 ? b : a, name_of(i), 1);
    EXPECT_EQ(store.acquire(i % 2 ? a : b, name_of(i)).token, 2u) << i;
  }
  std::map<std::string, uint64_t> want_a, want_b;
  for (int i = 0; i < kNames; ++i) {
    const bool moved = i % 3 == 0;
    const std::string& holder = (i % 2 ? b : a) == a ? (moved ? b : a) : (moved ? a : b);
    const MemoryStore::LeaseView view = store.lease(name_of(i));
    EXPECT_EQ(view.holder, holder) << i;
    EXPECT_EQ(view.token, moved ? 2u : 1u) << i;
    (holder == a ? want_a : want_b)[name_of(i)] = view.token;
  }
  for (const auto& [session, want] : {std::pair{a, want_a}, std::pair{b, want_b}}) {
    const KeepAliveReply r = store.keep_alive(session, ms(100000));
    ASSERT_EQ(r.outcome, Outcome::kOk);
    std::map<std::string, uint64_t> got;
    std::string previous;
    for (const OwnedLease& l : r.owned) {
      EXPECT_LT(previous, l.name);  // sorted by name
      previous = l.name;
      got[l.name] = l.token;
    }
    EXPECT_EQ(got, want);
  }
  // A name never leased has no record.
  EXPECT_EQ(store.lease("lease-" + std::to_string(kNames)).token, 0u);
  EXPECT_EQ(store.inspect({}).leases.size(), static_cast<size_t>(kNames));
  // Closing frees every lease of the session, and only those.
  store.close_session(a);
  for (int i = 0; i < kNames; ++i) {
    EXPECT_EQ(store.lease(name_of(i)).holder, want_b.count(name_of(i)) ? b : "") << i;
  }
}

// A barrier for the concurrency tests (C++17 has no std::barrier).
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return gen_ != gen; });
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int n_;
  int count_ = 0;
  uint64_t gen_ = 0;
};

constexpr int kThreads = 8;

// Every round, 8 sessions race for a free lease: exactly one wins, with the
// next token; it releases before the next round.
TEST(MemoryStoreConcurrencyTest, RacingAcquiresHaveExactlyOneWinnerPerRound) {
  FakeClock clock;
  MemoryStore store(clock);
  const int rounds = 3000;
  std::vector<std::string> sessions;
  for (int i = 0; i < kThreads; ++i) sessions.push_back(store.open_session(ms(1000000)).session_id);
  Barrier start(kThreads), end(kThreads);
  std::atomic<int> winners{0};
  std::atomic<int> bad_rounds{0};
  std::vector<uint64_t> tokens(rounds, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int round = 0; round < rounds; ++round) {
        start.wait();
        AcquireReply r = store.acquire(sessions[i], "x");
        if (r.outcome == Outcome::kOk) {
          winners.fetch_add(1);
          tokens[round] = r.token;
        } else if (r.outcome != Outcome::kHeld) {
          bad_rounds.fetch_add(1);
        }
        end.wait();
        if (i == 0) {
          if (winners.exchange(0) != 1) bad_rounds.fetch_add(1);
        }
        if (r.outcome == Outcome::kOk) store.release(sessions[i], "x", r.token);
        end.wait();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad_rounds.load(), 0);
  for (int round = 0; round < rounds; ++round) {
    ASSERT_EQ(tokens[round], static_cast<uint64_t>(round + 1)) << "round " << round;
  }
}

// Free-running: threads acquire and release as fast as they can. Holding the
// lease must be exclusive, and tokens, recorded while held, strictly increase.
TEST(MemoryStoreConcurrencyTest, FreeRunningAcquiresAreExclusiveWithUniqueTokens) {
  FakeClock clock;
  MemoryStore store(clock);
  const int terms_per_thread = 500;
  std::vector<std::string> sessions;
  for (int i = 0; i < kThreads; ++i) sessions.push_back(store.open_session(ms(1000000)).session_id);
  std::atomic<int> holders{0};
  std::atomic<int> overlaps{0};
  std::mutex order_mu;
  std::vector<uint64_t> order;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      int won = 0;
      while (won < terms_per_thread) {
        AcquireReply r = store.acquire(sessions[i], "x");
        if (r.outcome != Outcome::kOk) {
          std::this_thread::yield();
          continue;
        }
        ++won;
        if (holders.fetch_add(1) != 0) overlaps.fetch_add(1);
        {
          std::lock_guard<std::mutex> lock(order_mu);
          order.push_back(r.token);
        }
        holders.fetch_sub(1);
        store.release(sessions[i], "x", r.token);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  ASSERT_EQ(order.size(), static_cast<size_t>(kThreads * terms_per_thread));
  for (size_t k = 0; k < order.size(); ++k) {
    ASSERT_EQ(order[k], k + 1) << "token out of order at " << k;
  }
}

// Every operation at once, including a subscriber that calls back into the
// store, for the thread sanitizer; then the store's views must agree.
TEST(MemoryStoreConcurrencyTest, MixedOperationsKeepTheStoreConsistent) {
  FakeClock clock;
  MemoryStore store(clock);
  const std::vector<std::string> names{"a", "b", "c", "d"};
  std::atomic<uint64_t> broadcasts{0};
  store.subscribe([&](const std::string& name) {
    broadcasts.fetch_add(1);
    store.lease(name);
  });
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      std::string session = store.open_session(ms(50)).session_id;
      for (int step = 0; step < 2000; ++step) {
        const std::string& name = names[(step + i) % names.size()];
        switch ((step * 7 + i) % 9) {
          case 0:
            if (store.keep_alive(session, ms(50)).outcome == Outcome::kExpired) {
              session = store.open_session(ms(50)).session_id;
            }
            break;
          case 1:
          case 2: {
            AcquireReply r = store.acquire(session, name);
            if (r.outcome == Outcome::kOk && step % 2 == 0) store.release(session, name, r.token);
            break;
          }
          case 3:
            if (i == 0) clock.advance(ms(1));
            break;
          case 4:
            if (step % 50 == 0) store.close_session(session);
            break;
          case 5:
            if (step % 97 == 0) store.hand_over(name, step % 2 ? "foreign" : session);
            break;
          case 6:
            if (step % 131 == 0) store.expire_session(session);
            break;
          case 7:
            store.live_sessions();
            break;
          default: {
            const uint64_t id = store.subscribe([](const std::string&) {});
            store.unsubscribe(id);
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_GT(broadcasts.load(), 0u);
  // Each lease's holder, when a live session, lists it in its keep-alive.
  for (const std::string& name : names) {
    const MemoryStore::LeaseView v = store.lease(name);
    if (v.holder.empty() || !store.session_live(v.holder)) continue;
    const KeepAliveReply r = store.keep_alive(v.holder, ms(50));
    ASSERT_EQ(r.outcome, Outcome::kOk);
    EXPECT_NE(std::find(r.owned.begin(), r.owned.end(), OwnedLease{name, v.token}), r.owned.end())
        << name;
  }
}

TEST(MemoryStoreNamedTest, SameNameSameStore) {
  std::shared_ptr<MemoryStore> a = MemoryStore::named("memory-store-test-a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(MemoryStore::named("memory-store-test-a"), a);
  EXPECT_NE(MemoryStore::named("memory-store-test-b"), a);

  // Shared state: a session opened through one handle is live through another.
  const OpenReply r = a->open_session(ms(60000));
  ASSERT_EQ(r.outcome, Outcome::kOk);
  EXPECT_TRUE(MemoryStore::named("memory-store-test-a")->session_live(r.session_id));
  EXPECT_FALSE(MemoryStore::named("memory-store-test-b")->session_live(r.session_id));

  // Kept while nobody holds it, and one store for racing first users.
  const MemoryStore* raw = a.get();
  a.reset();
  EXPECT_EQ(MemoryStore::named("memory-store-test-a").get(), raw);
  std::vector<std::shared_ptr<MemoryStore>> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] { got[i] = MemoryStore::named("memory-store-test-race"); });
  }
  for (auto& t : threads) t.join();
  for (const auto& s : got) EXPECT_EQ(s, got[0]);
}

}  // namespace
}  // namespace simba
