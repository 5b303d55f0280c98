// The engine's permits (ADR 0046) on every backend (memory:// always, each
// server whose SIMBA_TEST_*_URL is set, as the Conformance suite), below the
// C ABI: Client::semaphore_acquire and rwlock_acquire beside lock_acquire,
// their terms (PermitTerm), the size refused with SIMBA_ESTATE's words, a
// waiting writer holding new readers back, and simba_lock_release releasing a
// permit's term. Over a real backend, the engine's own paths: a waiting
// acquire (blocking or async) woken through the backend's watch when another
// client releases, and a client's close revoking each of its terms once.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/simba_testing.h"
#include "capi/capi.h"
#include "engine/client.h"
#include "engine/term.h"
#include "simba.h"

namespace {

using namespace simba_testing;
using simba::ContenderKind;
using simba::RevokeReason;
using simba::engine::Code;
using simba::engine::PermitTerm;
using simba::engine::Term;

// Holder and waiter clients of the tests of wake-ups. A waiter's own retry
// comes renew/2 + jitter (>= 4000 ms here) after the backend answered it Held
// (core/timing.cpp), or just after the holder's session would expire, which
// with this timing is later still: a grant less than renew/2 after the acquire
// started is a wake-up through the backend (its watch or broadcast), never a
// retry; the acquire's own timeout (20 s) is far beyond both.
const Timing kSlowRetry{24'000, 8'000};  // ZooKeeper's test server caps sessions at 30 s
constexpr int64_t kWokenWithinMs = 8'000 / 2;

class EnginePermits : public ::testing::TestWithParam<BackendParam> {
 protected:
  void SetUp() override {
    const std::string skip = backend_skip_reason(GetParam());
    if (!skip.empty()) GTEST_SKIP() << skip;
    id_ = unique_id();
    url_ = backend_test_url(GetParam(), id_, "permits-");
    for (Client* c : {&a_, &b_}) OpenLive(*c, Timing{2000, 400});
  }
  void OpenLive(Client& c, const Timing& t) {
    ASSERT_EQ(c.open(url_, t), SIMBA_OK) << simba_last_error();
    ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  }
  static simba::engine::Client& engine(Client& c) { return *c.get()->impl; }
  simba::engine::Client& a() { return engine(a_); }
  simba::engine::Client& b() { return engine(b_); }
  static const PermitTerm* permit_of(Term* t) { return static_cast<const PermitTerm*>(t); }
  static void release(Term* t) { EXPECT_EQ(simba_lock_release(simba::capi::handle_of(t)), 0); }
  // A name of this test only: runs on a server never share one.
  std::string name(const std::string& suffix) const { return "p." + id_ + "." + suffix; }

  // Waits until `c` has `n` acquires of `name` (of `kind`) answered Held and
  // waiting, then lets their watch settle on the server (not an assertion:
  // a release sent before the watch is in place is only heard by the retry).
  static void WaitWaiting(Client& c, const std::string& name, const char* kind, int n) {
    const std::string entry =
        "{\"name\":\"" + name + "\",\"kind\":\"" + kind + "\",\"state\":\"candidate\"";
    auto count = [&] {
      const std::string s = snapshot(c);
      int k = 0;
      for (size_t at = s.find(entry); at != std::string::npos; at = s.find(entry, at + 1)) ++k;
      return k;
    };
    ASSERT_TRUE(wait_for([&] { return count() == n; }, 5000 * slow_factor())) << snapshot(c);
    sleep_ms(300 * slow_factor());
  }

  std::string id_, url_;
  Client a_, b_;
};

// A reference of the test's own to a term, so that it is read after its
// release freed the caller's (simba_term_retain, simba_term_release).
struct Kept {
  explicit Kept(Term* t) : t(t) { simba_term_retain(simba::capi::handle_of(t)); }
  ~Kept() { simba_term_release(simba::capi::handle_of(t)); }
  Kept(const Kept&) = delete;
  Kept& operator=(const Kept&) = delete;
  Term* const t;
};

// One async acquire's outcome, recorded by its callback.
struct AsyncGrant {
  std::atomic<bool> done{false};
  Code code = Code::kEBackend;
  Term* term = nullptr;
  int64_t at_ms = 0;
  bool others_invalid = true;  // every term of `others` was invalid at the grant
  std::vector<Term*> others;
  // Starts the async acquire on `c` that records here (20 s: far beyond
  // every bound of these tests).
  Code start(Client& c, const simba::engine::Client::LockAsk& ask, const std::string& name) {
    return c.get()->impl->lock_acquire_async(ask, name, 20'000 * slow_factor(), false, fn()).code;
  }
  simba::engine::LockFn fn() {
    return [this](Code c, Term* t, const std::string&) {
      at_ms = mono_ms();
      for (Term* o : others) others_invalid = others_invalid && !o->valid();
      code = c;
      term = t;
      done = true;
    };
  }
};

TEST_P(EnginePermits, ASemaphoreGrantsUpToItsSizeAndRefusesAnotherSize) {
  Term *t1 = nullptr, *t2 = nullptr, *t3 = nullptr, *none = nullptr;
  ASSERT_EQ(a().semaphore_acquire(name("s"), 2, 2000, false, &t1).code, Code::kOk);
  ASSERT_EQ(a().semaphore_acquire(name("s"), 2, 2000, false, &t2).code, Code::kOk);  // side by side
  ASSERT_TRUE(t1 && t2);
  ASSERT_TRUE(t1->as_lock());
  EXPECT_EQ(t1->as_lock()->kind, ContenderKind::kSemaphore);
  EXPECT_GT(permit_of(t1)->permit, 0u);
  EXPECT_EQ(t1->token(), permit_of(t1)->permit);
  EXPECT_GT(t2->token(), t1->token());
  EXPECT_TRUE(t1->valid() && t2->valid());
  EXPECT_EQ(b().semaphore_acquire(name("s"), 2, -1, true, &none).code, Code::kEBusy);
  const simba::engine::Result refused = b().semaphore_acquire(name("s"), 3, 2000, false, &none);
  EXPECT_EQ(refused.code, Code::kEState);
  EXPECT_EQ(refused.detail, "semaphore " + name("s") + " has 2 permits, not 3");
  EXPECT_EQ(b().semaphore_acquire(name("s"), 0, 2000, false, &none).code, Code::kEInval);
  // A lock of the same name is another resource.
  ASSERT_EQ(b().lock_acquire(name("s"), 2000, false, &t3).code, Code::kOk);
  release(t3);
  const uint64_t before = t2->token();
  const Kept k1(t1);
  release(t1);
  EXPECT_FALSE(t1->valid());
  ASSERT_EQ(b().semaphore_acquire(name("s"), 2, 2000 * slow_factor(), false, &t3).code, Code::kOk);
  EXPECT_GT(t3->token(), before);
  release(t2);
  release(t3);
}

TEST_P(EnginePermits, AWaitingWriterHoldsNewReadersBackThenWins) {
  Term *r1 = nullptr, *r2 = nullptr, *none = nullptr;
  ASSERT_EQ(a().rwlock_acquire(name("rw"), false, 2000, false, &r1).code, Code::kOk);
  ASSERT_EQ(b().rwlock_acquire(name("rw"), false, 2000, false, &r2).code, Code::kOk);
  EXPECT_EQ(r1->as_lock()->kind, ContenderKind::kRead);
  EXPECT_EQ(r1->token(), 0u);  // no writer yet: epoch 0
  EXPECT_EQ(b().rwlock_acquire(name("rw"), true, -1, true, &none).code, Code::kEBusy);
  std::atomic<bool> done{false};
  Term* w = nullptr;
  Code got = Code::kEBackend;
  std::thread writer([&] {
    got = b().rwlock_acquire(name("rw"), true, 5000 * slow_factor(), false, &w).code;
    done = true;
  });
  // Once its intent is there, a new reader is held back (a try says busy).
  Code tried = Code::kOk;
  for (int i = 0; i < 200 && tried == Code::kOk; ++i) {
    Term* r = nullptr;
    tried = a().rwlock_acquire(name("rw"), false, -1, true, &r).code;
    if (tried == Code::kOk) {
      release(r);
      sleep_ms(10);
    }
  }
  EXPECT_EQ(tried, Code::kEBusy);
  EXPECT_FALSE(done.load());
  release(r1);
  release(r2);
  writer.join();
  ASSERT_EQ(got, Code::kOk);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->as_lock()->kind, ContenderKind::kWrite);
  EXPECT_GT(w->token(), 0u);
  EXPECT_EQ(a().rwlock_acquire(name("rw"), false, -1, true, &none).code, Code::kEBusy);
  const uint64_t epoch = w->token();
  release(w);
  Term* r3 = nullptr;
  ASSERT_EQ(a().rwlock_acquire(name("rw"), false, 2000 * slow_factor(), false, &r3).code,
            Code::kOk);
  EXPECT_EQ(r3->token(), epoch);  // a reader carries the last writer's token
  EXPECT_NE(snapshot(a_).find("\"kind\":\"read\""), std::string::npos) << snapshot(a_);
  release(r3);
}

// A waiting semaphore acquire, blocking (on a thread) or async (waiting in the
// engine), is granted when another client releases: the release's wake-up
// through the backend, well before the waiter's own retry could.
TEST_P(EnginePermits, WaitingSemaphoreAcquiresAreWokenByAnotherClientsRelease) {
  Client h;  // the holder
  ASSERT_NO_FATAL_FAILURE(OpenLive(h, kSlowRetry));
  Term *t1 = nullptr, *t2 = nullptr;
  ASSERT_EQ(engine(h).semaphore_acquire(name("sw"), 2, 5000 * slow_factor(), false, &t1).code,
            Code::kOk);
  ASSERT_EQ(engine(h).semaphore_acquire(name("sw"), 2, 5000 * slow_factor(), false, &t2).code,
            Code::kOk);
  const Kept k1(t1), k2(t2);  // read by the grants, after their release
  AsyncGrant async;
  async.others = {t1, t2};
  Client w;
  ASSERT_NO_FATAL_FAILURE(OpenLive(w, kSlowRetry));
  const int64_t start_ms = mono_ms();
  std::atomic<bool> blocked_done{false};
  Term* blocked = nullptr;
  Code blocked_code = Code::kEBackend;
  int64_t blocked_at_ms = 0;
  std::thread waiter([&] {
    blocked_code = engine(w).semaphore_acquire(name("sw"), 2, 20'000, false, &blocked).code;
    blocked_at_ms = mono_ms();
    blocked_done = true;
  });
  std::atomic<bool> joined{false};
  ThreadGuard guard(waiter, joined);  // joined also when an ASSERT leaves early
  ASSERT_EQ(async.start(w, simba::engine::Client::semaphore(2), name("sw")), Code::kOk);
  ASSERT_NO_FATAL_FAILURE(WaitWaiting(w, name("sw"), "semaphore", 2));
  EXPECT_FALSE(blocked_done.load() || async.done.load());

  // One permit freed: exactly one waiter wins it.
  const int64_t first_release_ms = mono_ms();
  release(t1);
  ASSERT_TRUE(wait_for([&] { return blocked_done || async.done; }, kWokenWithinMs));
  const int64_t first_ms = mono_ms() - first_release_ms;
  sleep_ms(200);  // a second grant would be a permit too many (not the bound)
  EXPECT_FALSE(blocked_done && async.done) << "two grants for one permit freed";
  release(t2);
  ASSERT_TRUE(wait_for([&] { return blocked_done && async.done; }, kWokenWithinMs));
  waiter.join();
  ASSERT_EQ(blocked_code, Code::kOk);
  ASSERT_EQ(async.code, Code::kOk);
  ASSERT_TRUE(blocked && async.term);
  EXPECT_LT(std::max(blocked_at_ms, async.at_ms) - start_ms, kWokenWithinMs)
      << "granted after " << first_ms << " ms: the waiter's retry, not the release's wake-up";
  EXPECT_GT(std::min(blocked->token(), async.term->token()), t2->token());
  EXPECT_NE(blocked->token(), async.term->token());
  EXPECT_TRUE(blocked->valid() && async.term->valid());
  release(blocked);
  release(async.term);
}

// A writer waiting on another client wins once the readers release, woken
// through the backend; never while a reader's term is valid; its token is the
// new epoch.
TEST_P(EnginePermits, AWaitingWriterOnAnotherClientWinsOnceTheReadersRelease) {
  Client h;  // the holder
  ASSERT_NO_FATAL_FAILURE(OpenLive(h, kSlowRetry));
  Term *r1 = nullptr, *r2 = nullptr, *none = nullptr;
  ASSERT_EQ(engine(h).rwlock_acquire(name("wr"), false, 5000 * slow_factor(), false, &r1).code,
            Code::kOk);
  ASSERT_EQ(engine(h).rwlock_acquire(name("wr"), false, 5000 * slow_factor(), false, &r2).code,
            Code::kOk);
  const uint64_t epoch0 = r1->token();
  const Kept k1(r1), k2(r2);  // read by the grant, after their release
  AsyncGrant writer;
  writer.others = {r1, r2};
  Client w;
  ASSERT_NO_FATAL_FAILURE(OpenLive(w, kSlowRetry));
  const int64_t start_ms = mono_ms();
  ASSERT_EQ(writer.start(w, simba::engine::Client::rwlock(true), name("wr")), Code::kOk);
  ASSERT_NO_FATAL_FAILURE(WaitWaiting(w, name("wr"), "write", 1));
  // Its intent holds a new reader of another client back.
  EXPECT_EQ(b().rwlock_acquire(name("wr"), false, -1, true, &none).code, Code::kEBusy);
  release(r1);
  sleep_ms(200);  // a grant now would be beside r2 (not the bound)
  EXPECT_FALSE(writer.done.load()) << "the writer won beside a valid reader";
  release(r2);
  ASSERT_TRUE(wait_for([&] { return writer.done.load(); }, kWokenWithinMs));
  ASSERT_EQ(writer.code, Code::kOk);
  EXPECT_TRUE(writer.others_invalid) << "a reader was still valid at the writer's grant";
  EXPECT_LT(writer.at_ms - start_ms, kWokenWithinMs)
      << "the writer's retry, not the readers' release, granted it";
  EXPECT_EQ(writer.term->as_lock()->kind, ContenderKind::kWrite);
  EXPECT_GT(writer.term->token(), epoch0);
  EXPECT_EQ(a().rwlock_acquire(name("wr"), false, -1, true, &none).code, Code::kEBusy);
  const uint64_t epoch = writer.term->token();
  release(writer.term);
  Term* r3 = nullptr;
  ASSERT_EQ(b().rwlock_acquire(name("wr"), false, 5000 * slow_factor(), false, &r3).code,
            Code::kOk);
  EXPECT_EQ(r3->token(), epoch);
  release(r3);
}

// A client that closes holding permits revokes each of its terms exactly once
// (one on_revoked each, STOPPED) before the backend frees them; the waiters of
// another client then get them, woken by the close, never beside them.
TEST_P(EnginePermits, ClosingAClientRevokesEachPermitOnceAndWakesTheWaiters) {
  std::mutex mu;  // before the holder: its close runs the callbacks that use them
  std::map<Term*, std::vector<RevokeReason>> revoked;
  Client h;  // the holder
  ASSERT_NO_FATAL_FAILURE(OpenLive(h, kSlowRetry));
  Term *s1 = nullptr, *s2 = nullptr, *wr = nullptr;
  ASSERT_EQ(engine(h).semaphore_acquire(name("cs"), 2, 5000 * slow_factor(), false, &s1).code,
            Code::kOk);
  ASSERT_EQ(engine(h).semaphore_acquire(name("cs"), 2, 5000 * slow_factor(), false, &s2).code,
            Code::kOk);
  ASSERT_EQ(engine(h).rwlock_acquire(name("crw"), true, 5000 * slow_factor(), false, &wr).code,
            Code::kOk);
  const std::vector<Term*> held = {s1, s2, wr};
  for (Term* t : held) {
    ASSERT_TRUE(t->add_on_revoked([&](Term* which, RevokeReason why) {
      std::lock_guard<std::mutex> lock(mu);
      revoked[which].push_back(why);
    }));
  }
  AsyncGrant g1, g2, reader;
  for (AsyncGrant* g : {&g1, &g2, &reader}) g->others = held;
  Client w;
  ASSERT_NO_FATAL_FAILURE(OpenLive(w, kSlowRetry));
  const int64_t start_ms = mono_ms();
  for (AsyncGrant* g : {&g1, &g2}) {
    ASSERT_EQ(g->start(w, simba::engine::Client::semaphore(2), name("cs")), Code::kOk);
  }
  ASSERT_EQ(reader.start(w, simba::engine::Client::rwlock(false), name("crw")), Code::kOk);
  ASSERT_NO_FATAL_FAILURE(WaitWaiting(w, name("cs"), "semaphore", 2));
  ASSERT_NO_FATAL_FAILURE(WaitWaiting(w, name("crw"), "read", 1));

  h.close();
  {
    std::lock_guard<std::mutex> lock(mu);
    for (Term* t : held) {
      EXPECT_FALSE(t->valid());
      ASSERT_EQ(revoked[t].size(), 1u) << "on_revoked calls of one term at the close";
      EXPECT_EQ(revoked[t][0], RevokeReason::kStopped);
    }
  }
  ASSERT_TRUE(
      wait_for([&] { return g1.done && g2.done && reader.done; }, kWokenWithinMs * slow_factor()));
  for (AsyncGrant* g : {&g1, &g2, &reader}) {
    ASSERT_EQ(g->code, Code::kOk);
    EXPECT_TRUE(g->others_invalid) << "granted beside a valid term of the closed client";
    EXPECT_LT(g->at_ms - start_ms, kWokenWithinMs) << "a retry, not the close, granted it";
  }
  EXPECT_GT(std::min(g1.term->token(), g2.term->token()), s2->token());
  EXPECT_EQ(reader.term->token(), wr->token());  // the closed writer's epoch
  // Released after the close: no second revocation.
  for (Term* t : held) release(t);
  for (AsyncGrant* g : {&g1, &g2, &reader}) release(g->term);
  std::lock_guard<std::mutex> lock(mu);
  for (Term* t : held) EXPECT_EQ(revoked[t].size(), 1u);
}

// A holder that stops without a word (its loop frozen): its permits are
// freed for others once the backend expires its session, never while one of
// its terms is still valid by its local deadline; when it runs again, each of
// its terms is revoked exactly once.
TEST_P(EnginePermits, AFrozenHoldersPermitsGoToWaitersAfterItsDeadlineEachRevokedOnce) {
  std::mutex mu;  // before the holder: its callbacks use them until it closes
  std::map<Term*, std::vector<RevokeReason>> revoked;
  FrozenClient f;
  ASSERT_EQ(f.open(url_, Timing{2000, 400}), SIMBA_OK) << simba_last_error();
  simba::engine::Client& fe = *f.get()->impl;
  Term *s = nullptr, *r = nullptr;
  ASSERT_EQ(fe.semaphore_acquire(name("fs"), 1, 5000 * slow_factor(), false, &s).code, Code::kOk);
  ASSERT_EQ(fe.rwlock_acquire(name("frw"), false, 5000 * slow_factor(), false, &r).code, Code::kOk);
  const std::vector<Term*> held = {s, r};
  for (Term* t : held) {
    ASSERT_TRUE(t->add_on_revoked([&](Term* which, RevokeReason why) {
      std::lock_guard<std::mutex> lock(mu);
      revoked[which].push_back(why);
    }));
  }
  AsyncGrant sem, writer;
  sem.others = writer.others = held;
  Client w;  // after the grants: closed first, when an ASSERT leaves early
  ASSERT_NO_FATAL_FAILURE(OpenLive(w, Timing{2000, 400}));
  ASSERT_EQ(sem.start(w, simba::engine::Client::semaphore(1), name("fs")), Code::kOk);
  ASSERT_EQ(writer.start(w, simba::engine::Client::rwlock(true), name("frw")), Code::kOk);
  const int64_t frozen_ns = f.freeze(name("freeze"));
  ASSERT_NE(frozen_ns, 0);
  // The lease (2 s) from the last keep-alive, the backend's expiry (etcd rounds
  // up to a second, ZooKeeper's session timeout), then a retry or a wake-up.
  ASSERT_TRUE(wait_for([&] { return sem.done && writer.done; }, 10'000 * slow_factor()));
  for (AsyncGrant* g : {&sem, &writer}) {
    ASSERT_EQ(g->code, Code::kOk);
    EXPECT_TRUE(g->others_invalid) << "granted while the frozen holder's term was valid";
    EXPECT_GE(g->at_ms, frozen_ns / kMsNs);
  }
  f.thaw();
  ASSERT_TRUE(wait_for(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return revoked[s].size() + revoked[r].size() >= 2;
      },
      5000 * slow_factor()));
  sleep_ms(200);  // a second revocation would come with the first (not a bound)
  {
    std::lock_guard<std::mutex> lock(mu);
    for (Term* t : held) {
      ASSERT_EQ(revoked[t].size(), 1u) << "on_revoked calls of one term";
      EXPECT_TRUE(revoked[t][0] == RevokeReason::kDeadlinePassed ||
                  revoked[t][0] == RevokeReason::kSessionExpired)
          << simba::revoke_reason_name(revoked[t][0]);
    }
  }
  for (Term* t : held) release(t);
  release(sem.term);
  release(writer.term);
}

INSTANTIATE_TEST_SUITE_P(Backends, EnginePermits, ::testing::ValuesIn(ConformanceBackends()),
                         backend_test_name);

}  // namespace
