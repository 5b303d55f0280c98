// Backend conformance: the same behaviour on every backend, through the public
// C API (simba.h), so that every assertion here holds for memory://,
// redis://, postgresql:// and zookeeper:// alike; the backend contract's
// watches, which the C API does not expose, through the internal Backend
// (watching_backend.h).
//
// One suite, parameterized by backend. memory:// always runs; a real server runs
// when its URL is in the environment (scripts/test.sh starts the servers and sets
// them):
//   SIMBA_TEST_REDIS_URL      redis://127.0.0.1:PORT
//   SIMBA_TEST_POSTGRES_URL   postgresql://USER@127.0.0.1:PORT/DB
//   SIMBA_TEST_ZOOKEEPER_URL  zookeeper://127.0.0.1:PORT/simba-test
//   SIMBA_TEST_REDIS_SENTINEL_URL  redis+sentinel://127.0.0.1:P1,P2,P3/simba?wait_replicas=1
//   SIMBA_TEST_ETCD_URL       etcd://127.0.0.1:PORT
// A backend whose variable is unset is reported as skipped.
//
// Every test uses lease names of its own (and, on memory://, a store of its own),
// so tests never interfere, also with leftovers of earlier runs on a server.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "backends/simba_testing.h"
#include "backends/watching_backend.h"
#include "simba.h"

namespace {

using namespace simba_testing;

class Conformance : public ::testing::TestWithParam<BackendParam> {
 protected:
  void SetUp() override {
    const std::string skip = backend_skip_reason(GetParam());
    if (!skip.empty()) GTEST_SKIP() << skip;
    id_ = unique_id();
    url_ = backend_test_url(GetParam(), id_, "conf-");
  }

  const std::string& url() const { return url_; }
  // The same backend in a namespace of this test only (a Redis key prefix, a
  // PostgreSQL schema, a ZooKeeper chroot, an etcd key prefix), for checks
  // that list "everything": the shared namespace holds every name the suite
  // ever used, in every stage.
  std::string isolated_url() const {
    const std::string label = GetParam().label;
    std::string tag = "conf_" + id_;
    std::replace(tag.begin(), tag.end(), '-', '_');
    const char* sep = url_.find('?') == std::string::npos ? "?" : "&";
    if (label == "redis" || label == "redis_sentinel") return url_ + sep + "prefix=" + tag;
    if (label == "postgresql") return url_ + sep + "schema=" + tag;
    if (label == "zookeeper") return url_ + "/" + tag;
    if (label == "etcd") {  // one more prefix component, before etcds://'s query
      const size_t q = std::min(url_.find('?'), url_.size());
      return url_.substr(0, q) + "/" + tag + url_.substr(q);
    }
    return url_;  // memory://: already one store per test
  }
  // A lease name of this test only.
  std::string lease(const std::string& suffix) const { return "conf." + id_ + "." + suffix; }

  // Opens `c` and waits until its session is LIVE.
  void OpenLive(Client& c, const Timing& t) {
    ASSERT_EQ(c.open(url(), t), SIMBA_OK) << simba_last_error();
    ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  }

 private:
  std::string id_;
  std::string url_;
};

// ---------------------------------------------------------------------------

TEST_P(Conformance, OpensAndBecomesLive) {
  Client c;
  ASSERT_EQ(c.open(url(), Timing{1000, 200}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  EXPECT_EQ(simba_client_status(c), SIMBA_SESSION_LIVE);
  const std::string snap = snapshot(c);
  EXPECT_EQ(json_string(snap, "status"), "LIVE") << snap;
  EXPECT_FALSE(json_string(snap, "id").empty()) << snap;
  EXPECT_GT(json_int(snap, "remaining_ms"), 0) << snap;
  EXPECT_LE(json_int(snap, "remaining_ms"), 1000) << snap;
  EXPECT_EQ(json_int(snap, "renew_period_ms"), 200) << snap;
  EXPECT_EQ(json_int(snap, "sessions_opened"), 1) << snap;
  c.close();
}

// One keep-alive per renew interval for the whole node, whether it holds one
// lease or fifty: renewal cost does not depend on the number of leases.
TEST_P(Conformance, KeepAliveCadenceIsPerNodeNotPerLease) {
  const Timing t{1000, 100};
  std::vector<std::unique_ptr<Election>> many(50);
  Election one;
  Client a, b;
  OpenLive(a, t);
  OpenLive(b, t);
  ASSERT_EQ(one.start(a, lease("one")), SIMBA_OK) << simba_last_error();
  for (size_t i = 0; i < many.size(); ++i) {
    many[i] = std::make_unique<Election>();
    ASSERT_EQ(many[i]->start(b, lease("many." + std::to_string(i))), SIMBA_OK)
        << simba_last_error();
  }
  ASSERT_TRUE(one.wait_elected(1, 5000 * slow_factor()));
  for (auto& e : many) ASSERT_TRUE(e->wait_elected(1, 5000 * slow_factor())) << e->name();

  // Measure both clients over the same window.
  const int64_t a0 = counter(a, "keep_alives"), b0 = counter(b, "keep_alives");
  const int64_t t0 = mono_ns();
  sleep_ms(2000);  // the measurement window, not an assertion
  const int64_t a1 = counter(a, "keep_alives"), b1 = counter(b, "keep_alives");
  const double window_ms = static_cast<double>(mono_ns() - t0) / kMsNs;
  const int64_t da = a1 - a0, db = b1 - b0;
  // About window / renew (= 20) each; never more than one per renew period
  // (+1 for the one in flight at the edges), and not starved.
  const int64_t most = static_cast<int64_t>(window_ms / 100) + 2;
  EXPECT_GE(da, 12) << "1 lease: " << da << " keep-alives in " << window_ms << " ms";
  EXPECT_LE(da, std::min<int64_t>(25, most)) << "1 lease: " << da << " in " << window_ms << " ms";
  EXPECT_GE(db, 12) << "50 leases: " << db << " keep-alives in " << window_ms << " ms";
  EXPECT_LE(db, std::min<int64_t>(25, most)) << "50 leases: " << db << " in " << window_ms << " ms";
  EXPECT_LE(std::llabs(da - db), 4) << "1 lease: " << da << ", 50 leases: " << db;

  // Every term survived the window: the keep-alives kept them all.
  EXPECT_TRUE(one.leading());
  for (auto& e : many) {
    EXPECT_TRUE(e->leading()) << e->name();
    EXPECT_EQ(e->revoked_count(), 0) << e->name();
  }
}

// A burst of acquires (1500 elections started at once on one client) must not
// cost the session: the keep-alive goes ahead of queued calls, and a call
// waiting in a queue is not mistaken for a connection that stopped answering.
TEST_P(Conformance, BurstOfAcquiresKeepsTheSession) {
  // The keep-alive goes ahead of the burst; under a sanitizer each of the
  // 1,500 acquires costs more loop time, so the lease scales with it. etcd
  // 3.4 answers a renewal only once the writes it committed before have
  // been applied (ADR 0045, `waitAppliedIndex`): the burst's fsync'd writes
  // delay the renewal on the server, which no client can avoid, and at load
  // 5 that lost a 1 s session. Its lease is 3 s: the test is about the
  // client's queues.
  const int lease_ms = GetParam().label == std::string("etcd") ? 3000 : 1000;
  const Timing t{lease_ms * slow_factor(), lease_ms / 5 * slow_factor()};
  Client c;
  OpenLive(c, t);
  constexpr int kN = 1500;
  std::vector<std::unique_ptr<Election>> es(kN);
  for (int i = 0; i < kN; ++i) {
    es[i] = std::make_unique<Election>();
    ASSERT_EQ(es[i]->start(c, lease("burst." + std::to_string(i))), SIMBA_OK);
  }
  for (auto& e : es) ASSERT_TRUE(e->wait_elected(1, 30'000 * slow_factor())) << snapshot(c);
  EXPECT_EQ(counter(c, "sessions_opened"), 1) << "the burst cost the session";
  for (auto& e : es) EXPECT_EQ(e->revoked_count(), 0);
}

TEST_P(Conformance, ElectionAcquireContendRelease) {
  const Timing t{1000, 200};
  Election ea, eb;
  Client a, b;
  OpenLive(a, t);
  OpenLive(b, t);
  const std::string name = lease("leader");

  ASSERT_EQ(ea.start(a, name), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(ea.wait_elected(1, 5000 * slow_factor()));
  simba_term_t* ta = ea.last_elected().term;
  const uint64_t tok_a = simba_term_token(ta);
  EXPECT_GT(tok_a, 0u);
  EXPECT_STREQ(simba_term_name(ta), name.c_str());
  EXPECT_TRUE(simba_term_is_valid(ta));
  EXPECT_GT(simba_term_remaining_ms(ta), 0);
  EXPECT_LE(simba_term_remaining_ms(ta), 1000);
  EXPECT_EQ(simba_term_ensure_valid(ta, 0), SIMBA_OK);
  EXPECT_EQ(simba_term_ensure_valid(ta, 60'000), SIMBA_EEXPIRED);
  EXPECT_EQ(simba_term_revoke_reason(ta), SIMBA_REVOKE_NONE);

  // B contends but does not win while A holds the lease: several of its
  // attempts (every renew/2 + jitter) and several keep-alives of A pass.
  ASSERT_EQ(eb.start(b, name), SIMBA_OK) << simba_last_error();
  const int64_t acquires0 = counter(b, "acquires");
  ASSERT_TRUE(
      wait_for([&] { return counter(b, "acquires") >= acquires0 + 3; }, 5000 * slow_factor()));
  EXPECT_EQ(eb.elected_count(), 0);
  EXPECT_TRUE(simba_term_is_valid(ta));
  EXPECT_EQ(simba_term_token(ta), tok_a);  // constant within the term

  // A stops: its term is revoked (STOPPED) before the lease is released, and B
  // takes over with a larger token.
  ASSERT_EQ(ea.stop(5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  EXPECT_FALSE(simba_term_is_valid(ta));
  EXPECT_EQ(simba_term_remaining_ms(ta), 0);
  EXPECT_EQ(simba_term_revoke_reason(ta), SIMBA_REVOKE_STOPPED);
  ASSERT_EQ(ea.revoked_count(), 1);
  EXPECT_EQ(ea.last_revoked().reason, SIMBA_REVOKE_STOPPED);
  EXPECT_EQ(ea.pairing_errors(), 0);

  ASSERT_TRUE(eb.wait_elected(1, 3000 * slow_factor()));
  simba_term_t* tb = eb.last_elected().term;
  EXPECT_GT(simba_term_token(tb), tok_a);
  EXPECT_TRUE(simba_term_is_valid(tb));

  ASSERT_EQ(eb.stop(5000 * slow_factor()), SIMBA_OK);
  EXPECT_EQ(eb.last_revoked().reason, SIMBA_REVOKE_STOPPED);
  EXPECT_TRUE(eb.all_revoked_once());
  EXPECT_EQ(eb.pairing_errors(), 0);
}

TEST_P(Conformance, LockAcquireContendRelease) {
  const Timing t{1000, 200};
  Client a, b;
  OpenLive(a, t);
  OpenLive(b, t);
  const std::string name = lease("lock");

  simba_term_t* la = nullptr;
  ASSERT_EQ(simba_lock_acquire(&la, a, name.c_str(), 5000 * slow_factor()), SIMBA_OK)
      << simba_last_error();
  const uint64_t tok_a = simba_term_token(la);
  EXPECT_GT(tok_a, 0u);
  EXPECT_TRUE(simba_term_is_valid(la));

  // Held elsewhere: a try fails with EBUSY, a bounded acquire times out.
  simba_term_t* lb = nullptr;
  EXPECT_EQ(simba_lock_try_acquire(&lb, b, name.c_str()), SIMBA_EBUSY) << simba_last_error();
  EXPECT_EQ(lb, nullptr);
  EXPECT_EQ(simba_lock_acquire(&lb, b, name.c_str(), 300), SIMBA_ETIMEDOUT);
  EXPECT_EQ(lb, nullptr);
  EXPECT_TRUE(simba_term_is_valid(la));

  // Released: the lease is free on return, so a single try now wins.
  simba_term_retain(la);  // keep it readable after the release
  ASSERT_EQ(simba_lock_release(la), SIMBA_OK);
  EXPECT_FALSE(simba_term_is_valid(la));
  EXPECT_EQ(simba_term_revoke_reason(la), SIMBA_REVOKE_STOPPED);
  simba_term_release(la);

  ASSERT_EQ(simba_lock_try_acquire(&lb, b, name.c_str()), SIMBA_OK) << simba_last_error();
  EXPECT_GT(simba_term_token(lb), tok_a);
  EXPECT_TRUE(simba_term_is_valid(lb));
  EXPECT_EQ(simba_lock_release(lb), SIMBA_OK);
}

// Tokens strictly increase across terms of a name: within one session, across
// clients, and across a client that closed and a new one (a new session).
TEST_P(Conformance, TokensStrictlyIncreaseAcrossTermsAndSessions) {
  const Timing t{1000, 200};
  const std::string name = lease("tokens");
  std::vector<uint64_t> tokens;

  {
    Election e;
    Client a;
    OpenLive(a, t);
    ASSERT_EQ(e.start(a, name), SIMBA_OK) << simba_last_error();
    ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
    // Step down twice: each re-election is a new term with a larger token.
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(simba_election_step_down(e.handle(), 0, nullptr, nullptr), SIMBA_OK);
      ASSERT_TRUE(e.wait_elected(i + 2, 5000 * slow_factor()));
    }
    ASSERT_EQ(e.stop(5000 * slow_factor()), SIMBA_OK);
    for (const auto& el : e.elected()) tokens.push_back(el.token);
    std::vector<simba_revoke_reason_t> reasons;
    for (const auto& r : e.revoked()) reasons.push_back(r.reason);
    EXPECT_EQ(reasons,
              (std::vector<simba_revoke_reason_t>{
                  SIMBA_REVOKE_STEPPED_DOWN, SIMBA_REVOKE_STEPPED_DOWN, SIMBA_REVOKE_STOPPED}));
    EXPECT_EQ(e.pairing_errors(), 0);

    // Locks on the same name, same client.
    for (int i = 0; i < 2; ++i) {
      simba_term_t* l = nullptr;
      ASSERT_EQ(simba_lock_acquire(&l, a, name.c_str(), 5000 * slow_factor()), SIMBA_OK)
          << simba_last_error();
      tokens.push_back(simba_term_token(l));
      ASSERT_EQ(simba_lock_release(l), SIMBA_OK);
    }
  }  // a closes: its session ends

  // A new client, a new session: its token continues above all of them.
  {
    Election e;
    Client c;
    OpenLive(c, t);
    ASSERT_EQ(e.start(c, name), SIMBA_OK) << simba_last_error();
    ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
    tokens.push_back(e.last_elected().token);
    c.close();
    EXPECT_EQ(e.last_revoked().reason, SIMBA_REVOKE_STOPPED);
  }
  // And once more after a close that freed a held lease.
  {
    Client d;
    OpenLive(d, t);
    simba_term_t* l = nullptr;
    ASSERT_EQ(simba_lock_acquire(&l, d, name.c_str(), 5000 * slow_factor()), SIMBA_OK)
        << simba_last_error();
    tokens.push_back(simba_term_token(l));
    ASSERT_EQ(simba_lock_release(l), SIMBA_OK);
  }

  ASSERT_EQ(tokens.size(), 7u);
  for (size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_GT(tokens[i], 0u) << "term " << i;
    if (i > 0) {
      EXPECT_GT(tokens[i], tokens[i - 1]) << "term " << i;
    }
  }
}

// A clean stop of the leader is taken over at once by a waiting candidate (release
// broadcast), well before the candidate's next attempt would have found it.
TEST_P(Conformance, CleanStopIsTakenOverAtOnce) {
  // Candidates retry every renew/2 + jitter in [0, renew/2): at least 500 ms here.
  const Timing t{3000, 1000};
  Election ea, eb;
  Client a, b;
  OpenLive(a, t);
  OpenLive(b, t);
  const std::string name = lease("broadcast");

  ASSERT_EQ(ea.start(a, name), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(ea.wait_elected(1, 5000 * slow_factor()));
  ASSERT_EQ(eb.start(b, name), SIMBA_OK) << simba_last_error();
  // B's first attempt found the lease held; it now waits for its next attempt.
  ASSERT_TRUE(wait_for([&] { return json_string(snapshot(b), "state") == "candidate"; },
                       5000 * slow_factor()));
  sleep_ms(50);  // let B settle into its retry wait (not an assertion)
  ASSERT_EQ(eb.elected_count(), 0);

  const int64_t stop_at = mono_ns();
  ASSERT_EQ(ea.stop(5000 * slow_factor()), SIMBA_OK);
  ASSERT_TRUE(eb.wait_elected(1, 5000 * slow_factor()));
  const int64_t took_ms = (eb.last_elected().at_ns - stop_at) / kMsNs;
  // Under 400 ms: only the broadcast explains it (a loaded CI machine can add
  // a few hundred ms of scheduling to the release and acquire round trips).
  EXPECT_LT(took_ms, 400) << "a clean stop was taken over after " << took_ms
                          << " ms; the candidate's own retry comes after >= 500 ms";
  EXPECT_GT(eb.last_elected().token, ea.last_elected().token);
  // The old term was revoked before its lease was released.
  EXPECT_EQ(simba_term_revoke_reason(ea.last_elected().term), SIMBA_REVOKE_STOPPED);
  EXPECT_EQ(ea.last_revoked().reason, SIMBA_REVOKE_STOPPED);
}

// A stop that lands while the election's first acquire is in flight completes
// only once that acquire is answered and what it won released: right after the
// stop, the same client can lock the name (the acquire does not find it held).
TEST_P(Conformance, StopDuringTheFirstAttemptLeavesTheNameFree) {
  const Timing t{3000, 1000};
  Client a;
  OpenLive(a, t);
  for (int i = 0; i < 10; i++) {
    const std::string name = lease("stop-first-" + std::to_string(i));
    Election e;
    ASSERT_EQ(e.start(a, name), SIMBA_OK) << simba_last_error();
    ASSERT_EQ(e.stop(5000 * slow_factor()), SIMBA_OK) << simba_last_error();
    // If the attempt won before the stop, the term was revoked and released.
    EXPECT_EQ(e.revoked_count(), e.elected_count());
    simba_term_t* term = nullptr;
    ASSERT_EQ(simba_lock_try_acquire(&term, a, name.c_str()), SIMBA_OK)
        << "round " << i << ": " << simba_last_error();
    EXPECT_TRUE(simba_term_is_valid(term));
    ASSERT_EQ(simba_lock_release(term), SIMBA_OK) << simba_last_error();
  }
}

// An observer sees a name taken, released and taken over, each within one
// broadcast or one poll, with the holder's session, client name and token.
TEST_P(Conformance, ObserverSeesEachHolderWithinOnePoll) {
  const Timing t{3000, 1000};
  struct Seen {
    std::mutex mu;
    std::vector<std::tuple<std::string, std::string, uint64_t, int64_t>> changes;
  } seen;
  auto fn = [](void* ud, const char* name, const char* holder, const char* client, uint64_t token) {
    (void)name;
    auto* s = static_cast<Seen*>(ud);
    std::lock_guard<std::mutex> lock(s->mu);
    s->changes.emplace_back(holder ? holder : "", client ? client : "?", token, mono_ns());
  };
  auto count = [&] {
    std::lock_guard<std::mutex> lock(seen.mu);
    return seen.changes.size();
  };
  auto change = [&](size_t i) {
    std::lock_guard<std::mutex> lock(seen.mu);
    return seen.changes.at(i);
  };
  Client w, a, b;
  OpenLive(w, t);
  OpenLive(a, t);
  OpenLive(b, t);
  const std::string name = lease("observed");
  const int64_t poll_ms = 300;
  simba_observer_t* o = nullptr;
  ASSERT_EQ(simba_observe_start(&o, w, name.c_str(), poll_ms, fn, &seen), SIMBA_OK)
      << simba_last_error();
  ASSERT_TRUE(wait_for([&] { return count() >= 1; }, 5000 * slow_factor()));
  EXPECT_EQ(std::get<0>(change(0)), "");  // free at the start

  const int64_t bound_ms = (poll_ms + 1000) * slow_factor();  // a poll plus a read
  Election ea, eb;
  ASSERT_EQ(ea.start(a, name), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(ea.wait_elected(1, 5000 * slow_factor()));
  ASSERT_TRUE(wait_for([&] { return count() >= 2; }, bound_ms)) << "holder A not seen";
  EXPECT_EQ(std::get<0>(change(1)), json_string(snapshot(a), "id"));
  EXPECT_EQ(std::get<2>(change(1)), ea.last_elected().token);

  // B waits as a candidate; A stops: B takes over at once (release broadcast).
  ASSERT_EQ(eb.start(b, name), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(wait_for([&] { return json_string(snapshot(b), "state") == "candidate"; },
                       5000 * slow_factor()));
  ASSERT_EQ(ea.stop(5000 * slow_factor()), SIMBA_OK);
  ASSERT_TRUE(eb.wait_elected(1, 5000 * slow_factor()));
  const int64_t b_at = eb.last_elected().at_ns;
  ASSERT_TRUE(wait_for(
      [&] {
        std::lock_guard<std::mutex> lock(seen.mu);
        return !seen.changes.empty() &&
               std::get<2>(seen.changes.back()) == eb.last_elected().token &&
               !std::get<0>(seen.changes.back()).empty();
      },
      bound_ms))
      << "holder B not seen";
  const auto last = change(count() - 1);
  EXPECT_EQ(std::get<0>(last), json_string(snapshot(b), "id"));
  EXPECT_LE((std::get<3>(last) - b_at) / kMsNs, bound_ms);
  // Tokens seen never go back.
  {
    std::lock_guard<std::mutex> lock(seen.mu);
    for (size_t i = 1; i < seen.changes.size(); ++i) {
      EXPECT_GE(std::get<2>(seen.changes[i]), std::get<2>(seen.changes[i - 1]));
    }
  }
  simba_observer_free(o);
  const size_t after_free = count();
  ASSERT_EQ(eb.stop(5000 * slow_factor()), SIMBA_OK);
  sleep_ms(2 * poll_ms);
  EXPECT_EQ(count(), after_free) << "a callback after simba_observer_free";
}

// A program the host executes (`simba run`'s command) inherits no descriptor of
// the client: every socket it opened is close-on-exec.
TEST_P(Conformance, ClientSocketsAreCloseOnExec) {
  auto sockets_without_cloexec = [] {
    std::vector<std::string> bad;
    DIR* d = opendir("/proc/self/fd");
    if (!d) return bad;
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const int fd = atoi(e->d_name);
      char target[256] = {0};
      const std::string link = std::string("/proc/self/fd/") + e->d_name;
      if (readlink(link.c_str(), target, sizeof target - 1) <= 0) continue;
      if (std::string(target).rfind("socket:", 0) != 0) continue;
      const int flags = fcntl(fd, F_GETFD);
      if (flags >= 0 && !(flags & FD_CLOEXEC)) bad.push_back(std::to_string(fd) + " " + target);
    }
    closedir(d);
    return bad;
  };
  const std::vector<std::string> before = sockets_without_cloexec();
  const Timing t{3000, 1000};
  Client c;
  OpenLive(c, t);
  Election e;  // an election too: Redis opens its subscriber connection for it
  ASSERT_EQ(e.start(c, lease("cloexec")), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
  std::vector<std::string> after = sockets_without_cloexec();
  for (const std::string& b : before)
    after.erase(std::remove(after.begin(), after.end(), b), after.end());
  EXPECT_TRUE(after.empty()) << "sockets without FD_CLOEXEC: " << ::testing::PrintToString(after);
}

// close() closes the session: the backend frees every lease of the node at once.
TEST_P(Conformance, CloseFreesEveryLeaseAtOnce) {
  const Timing t{3000, 1000};  // candidate retries come after >= 500 ms
  constexpr int kNames = 5;
  std::vector<std::unique_ptr<Election>> held(kNames), waiting(kNames);
  Client a, b;
  OpenLive(a, t);
  OpenLive(b, t);
  for (int i = 0; i < kNames; ++i) {
    held[i] = std::make_unique<Election>();
    ASSERT_EQ(held[i]->start(a, lease("close." + std::to_string(i))), SIMBA_OK);
  }
  for (auto& e : held) ASSERT_TRUE(e->wait_elected(1, 5000 * slow_factor())) << e->name();
  for (int i = 0; i < kNames; ++i) {
    waiting[i] = std::make_unique<Election>();
    ASSERT_EQ(waiting[i]->start(b, lease("close." + std::to_string(i))), SIMBA_OK);
  }
  ASSERT_TRUE(wait_for(
      [&] {
        const std::string s = snapshot(b);
        size_t n = 0;
        for (size_t at = s.find("\"candidate\""); at != std::string::npos;
             at = s.find("\"candidate\"", at + 1)) {
          ++n;
        }
        return n == kNames;
      },
      5000 * slow_factor()));
  sleep_ms(50);  // let B settle into its retry waits (not an assertion)

  const int64_t close_at = mono_ns();
  a.close();
  // Every term of A was revoked (STOPPED) by the close.
  for (auto& e : held) {
    EXPECT_EQ(e->revoked_count(), 1) << e->name();
    EXPECT_EQ(e->last_revoked().reason, SIMBA_REVOKE_STOPPED) << e->name();
    EXPECT_FALSE(simba_term_is_valid(e->last_elected().term)) << e->name();
  }
  for (auto& e : waiting) ASSERT_TRUE(e->wait_elected(1, 5000 * slow_factor())) << e->name();
  int64_t last = 0;
  for (int i = 0; i < kNames; ++i) {
    last = std::max(last, waiting[i]->last_elected().at_ns);
    EXPECT_GT(waiting[i]->last_elected().token, held[i]->last_elected().token);
  }
  const int64_t took_ms = (last - close_at) / kMsNs;
  EXPECT_LT(took_ms, 350) << "all " << kNames << " leases were taken over " << took_ms
                          << " ms after the close; candidate retries come after >= 500 ms";
}

// Two clients are never both valid owners of one name at any instant, through
// handovers by step-down and by stop/restart.
// inspect: what `simba status` shows. One client holds a lease; another reads
// the backend: the holder's session (with its client name), the lease with its
// token and holder, a free lease after release, and a name never used.
TEST_P(Conformance, InspectShowsSessionsAndLeases) {
  const Timing t{2000, 400};
  Client a, b;
  const std::string ns = isolated_url();
  ASSERT_EQ(a.open(ns, t, "inspect-holder"), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(a, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(b.open(ns, t), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(b, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  const std::string held = lease("held"), never = lease("never");
  simba_term_t* term = nullptr;
  ASSERT_EQ(simba_lock_acquire(&term, a, held.c_str(), 5000 * slow_factor()), SIMBA_OK)
      << simba_last_error();
  const std::string sid = session_id(a);
  const std::string token = std::to_string(simba_term_token(term));

  auto inspect = [&](std::vector<const char*> names) {
    char* json = nullptr;
    const int rc = simba_client_inspect_json(b, names.empty() ? nullptr : names.data(),
                                             names.size(), 5000 * slow_factor(), &json);
    EXPECT_EQ(rc, SIMBA_OK) << simba_last_error();
    std::string out = json ? json : "";
    simba_free(json);
    return out;
  };
  std::string j = inspect({held.c_str(), never.c_str()});
  EXPECT_NE(j.find("{\"id\":\"" + sid + "\",\"client\":\"inspect-holder\",\"remaining_ms\":"),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("\"own\":true"), std::string::npos) << "b's own session is marked: " << j;
  EXPECT_NE(j.find("{\"name\":\"" + held + "\",\"token\":" + token + ",\"holder\":\"" + sid +
                   "\",\"holder_client\":\"inspect-holder\",\"remaining_ms\":"),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("{\"name\":\"" + never + "\",\"token\":0,\"holder\":null}"), std::string::npos)
      << j;
  // Sorted by name, and exactly the names asked for.
  EXPECT_LT(j.find(held), j.find(never)) << j;
  EXPECT_EQ(j.find(lease("other")), std::string::npos) << j;

  // Every lease when no name is given (this test's lease among them).
  j = inspect({});
  EXPECT_NE(j.find("\"name\":\"" + held + "\""), std::string::npos) << j;

  ASSERT_EQ(simba_lock_release(term), SIMBA_OK);
  j = inspect({held.c_str()});
  EXPECT_NE(j.find("{\"name\":\"" + held + "\",\"token\":" + token + ",\"holder\":null}"),
            std::string::npos)
      << j;

  // Bad arguments.
  char* out = nullptr;
  EXPECT_EQ(simba_client_inspect_json(b, nullptr, 1, 1000, &out), SIMBA_EINVAL);
  const char* bad[] = {"no spaces allowed"};
  EXPECT_EQ(simba_client_inspect_json(b, bad, 1, 1000, &out), SIMBA_EINVAL);
  EXPECT_EQ(simba_client_inspect_json(b, nullptr, 0, 0, &out), SIMBA_EINVAL);
  EXPECT_EQ(simba_client_inspect_json(b, nullptr, 0, 1000, nullptr), SIMBA_EINVAL);
  EXPECT_EQ(simba_client_inspect_json(nullptr, nullptr, 0, 1000, &out), SIMBA_EINVAL);
  EXPECT_EQ(out, nullptr);
}

// Leader work and the handover order on every backend: a stop revokes the
// term, waits for the work to exit, releases, and only then may another node's
// work start; the next term's token is larger.
namespace work {
struct Log {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> runs;  // [start, end] in mono ns
  std::vector<uint64_t> tokens;
  std::atomic<int> started{0};  // work calls begun
};
struct Ctx {
  Log* log;
  int64_t cleanup_ms;
};
void cooperative(void* ud, simba_term_t* t) {
  auto* c = static_cast<Ctx*>(ud);
  const int64_t start = mono_ns();
  ++c->log->started;
  while (simba_term_wait_revoked(t, 1000) != SIMBA_OK) {
  }
  sleep_ms(c->cleanup_ms);  // finishing the step under way
  std::lock_guard<std::mutex> lock(c->log->mu);
  c->log->runs.emplace_back(start, mono_ns());
  c->log->tokens.push_back(simba_term_token(t));
}
}  // namespace work

TEST_P(Conformance, TaskStopWaitsForWorkThenHandsOver) {
  const Timing t{2000, 400};
  Client a, b;
  OpenLive(a, t);
  OpenLive(b, t);
  work::Log log;
  work::Ctx ca{&log, 150}, cb{&log, 0};
  const std::string name = lease("task");
  simba_task_t* ta = nullptr;
  simba_task_t* tb = nullptr;
  ASSERT_EQ(simba_run_while_leader(&ta, a, name.c_str(), work::cooperative, &ca), SIMBA_OK);
  ASSERT_TRUE(wait_for([&] { return json_string(snapshot(a), "state") == "leader"; },
                       5000 * slow_factor()));
  ASSERT_EQ(simba_run_while_leader(&tb, b, name.c_str(), work::cooperative, &cb), SIMBA_OK);
  sleep_ms(300);
  EXPECT_NE(json_string(snapshot(b), "state"), "leader");
  const int64_t stop_at = mono_ns();
  ASSERT_EQ(simba_task_close(ta), SIMBA_OK);  // blocking: stop, work returned
  const int64_t closed_at = mono_ns();
  EXPECT_GE((closed_at - stop_at) / kMsNs, 140) << "close returned before the work exited";
  // The release broadcast hands the lease over at once (well under the retry interval).
  ASSERT_TRUE(wait_for([&] { return json_string(snapshot(b), "state") == "leader"; },
                       5000 * slow_factor()));
  EXPECT_LT((mono_ns() - closed_at) / kMsNs, 150 * slow_factor());
  // b's work runs on a thread of its own: a stop before that thread started
  // it would leave nothing to run (work starts on a valid term only).
  ASSERT_TRUE(wait_for([&] { return log.started.load() == 2; }, 5000 * slow_factor()));
  ASSERT_EQ(simba_task_close(tb), SIMBA_OK);
  std::lock_guard<std::mutex> lock(log.mu);
  ASSERT_EQ(log.runs.size(), 2u);
  // b's work started only after a's ended: never two at once.
  EXPECT_GE(log.runs[1].first, log.runs[0].second);
  EXPECT_GT(log.tokens[1], log.tokens[0]);
}

// Partition groups: members joining and leaving; at every instant each
// partition has at most one valid holder, and after settling each member holds
// floor(N/m) or ceil(N/m).
TEST_P(Conformance, PartitionGroupBalancesAsMembersJoinAndLeave) {
  const Timing t{1000, 200};
  constexpr int kN = 7;
  const std::string group = lease("group");
  GroupProbe probe;
  Client c[3];
  simba_task_t* task[3] = {nullptr, nullptr, nullptr};
  for (auto& client : c) OpenLive(client, t);
  auto join = [&](int i) {
    ASSERT_EQ(
        simba_group_join(&task[i], c[i], group.c_str(), kN, GroupProbe::work, probe.member(i)),
        SIMBA_OK)
        << simba_last_error();
  };
  const int64_t settle = 10'000 * slow_factor();
  join(0);
  ASSERT_TRUE(wait_for([&] { return probe.balanced({0}, kN); }, settle)) << probe.dump();
  join(1);
  ASSERT_TRUE(wait_for([&] { return probe.balanced({0, 1}, kN); }, settle)) << probe.dump();
  join(2);
  ASSERT_TRUE(wait_for([&] { return probe.balanced({0, 1, 2}, kN); }, settle)) << probe.dump();
  // Settled: nothing moves any more.
  const int starts = probe.starts();
  sleep_ms(600);
  EXPECT_EQ(probe.starts(), starts) << "partitions moved while balanced: " << probe.dump();
  // A member leaves (close: its partitions are handed over in handover order).
  ASSERT_EQ(simba_task_close(task[1]), SIMBA_OK);
  task[1] = nullptr;
  EXPECT_EQ(probe.held(1), 0);
  ASSERT_TRUE(wait_for([&] { return probe.balanced({0, 2}, kN); }, settle)) << probe.dump();
  ASSERT_EQ(simba_task_step_down(task[0], 30'000, nullptr, nullptr), SIMBA_OK);
  ASSERT_TRUE(wait_for([&] { return probe.balanced({2}, kN); }, settle)) << probe.dump();
  EXPECT_EQ(probe.violations(), 0);
  for (auto* tk : task) EXPECT_EQ(simba_task_close(tk), SIMBA_OK);
  EXPECT_EQ(probe.violations(), 0);
}

TEST_P(Conformance, NeverTwoValidOwners) {
  const Timing t{600, 200};
  const std::string name = lease("exclusive");
  Election e[2];
  Client c[2];
  OpenLive(c[0], t);
  OpenLive(c[1], t);
  ASSERT_EQ(e[0].start(c[0], name), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(e[1].start(c[1], name), SIMBA_OK) << simba_last_error();

  std::atomic<bool> done{false};
  std::atomic<int64_t> checks{0}, violations{0};
  std::thread poller([&] {
    auto any_valid = [](const std::vector<simba_term_t*>& ts) {
      for (simba_term_t* term : ts) {
        if (simba_term_is_valid(term)) return true;
      }
      return false;
    };
    while (!done.load()) {
      for (int x = 0; x < 2; ++x) {
        const int y = 1 - x;
        // X's terms are listed before Y is read, so each existed then. A term
        // valid later was valid at every earlier instant of its life (validity
        // never comes back), so "X valid after Y was seen valid" means both
        // were valid at the instant Y was read.
        const std::vector<simba_term_t*> xs = e[x].terms();
        const bool y_valid = any_valid(e[y].terms());
        const bool x_valid = any_valid(xs);
        if (y_valid && x_valid) violations++;
        checks++;
      }
    }
  });
  ThreadGuard poller_guard(poller, done);

  // Drive handovers: the current leader steps down (or stops and restarts),
  // and the other client must take over.
  int handovers = 0;
  const int64_t until = mono_ns() + 2000 * kMsNs;
  const int64_t hard_until = until + 8000 * slow_factor() * kMsNs;  // for 4 handovers under load
  while ((mono_ns() < until || handovers < 4) && mono_ns() < hard_until) {
    int leader = -1;
    ASSERT_TRUE(wait_for(
        [&] {
          for (int i = 0; i < 2; ++i) {
            if (e[i].leading()) leader = i;
          }
          return leader >= 0;
        },
        5000 * slow_factor()))
        << "nobody leads after " << handovers << " handovers";
    const int other = 1 - leader;
    // The other client must be contending, not cooling down from its own step-down.
    ASSERT_TRUE(wait_for([&] { return json_string(snapshot(c[other]), "state") != "cooldown"; },
                         5000 * slow_factor()));
    const int before = e[other].elected_count();
    const int leader_before = e[leader].elected_count();
    const bool restart = handovers % 3 == 2;
    if (restart) {
      ASSERT_EQ(e[leader].stop(5000 * slow_factor()), SIMBA_OK);
    } else {
      ASSERT_EQ(simba_election_step_down(e[leader].handle(), 150, nullptr, nullptr), SIMBA_OK);
    }
    // The other client takes over; on a loaded machine the old leader may win
    // again after its 150 ms cooldown instead, which is no handover but no
    // failure either: what this test proves is the poller's count.
    ASSERT_TRUE(wait_for(
        [&] {
          return e[other].elected_count() > before ||
                 (!restart && e[leader].elected_count() > leader_before);
        },
        5000 * slow_factor()))
        << "nobody took over after handover " << handovers << "\nleader " << leader << ": "
        << snapshot(c[leader]) << "\nother: " << snapshot(c[other]);
    if (e[other].elected_count() == before) continue;
    if (restart) {
      ASSERT_EQ(e[leader].start(c[leader], name), SIMBA_OK) << simba_last_error();
    }
    ++handovers;
  }
  poller_guard.join();
  EXPECT_GE(handovers, 4);
  EXPECT_GT(checks.load(), 1000);
  EXPECT_EQ(violations.load(), 0) << "both clients held a valid term of " << name << " at once ("
                                  << violations.load() << " of " << checks.load() << " checks)";
  // Tokens increase across all terms of both clients, in the order they began.
  std::vector<std::pair<int64_t, uint64_t>> all;
  for (auto& el : e) {
    for (const auto& x : el.elected()) all.emplace_back(x.at_ns, x.token);
    EXPECT_EQ(el.pairing_errors(), 0);
  }
  std::sort(all.begin(), all.end());
  for (size_t i = 1; i < all.size(); ++i) EXPECT_GT(all[i].second, all[i - 1].second);
}

// Work that ignores revocation: the handover order waits for it at most until
// the term's local deadline as it was at the stop, then releases anyway, and
// no other node's work starts before that instant.
namespace deaf {
struct Run {
  bool ignores = false;  // keeps working after the revocation, until let_go
  std::atomic<bool> let_go{false};
  std::atomic<int> runs{0};
  std::atomic<simba_term_t*> term{nullptr};  // the first run's, retained
  std::atomic<int64_t> start_ns{0}, saw_revoked_ns{0}, end_ns{0};
};
void work(void* ud, simba_term_t* t) {
  auto* r = static_cast<Run*>(ud);
  const int64_t start = mono_ns();
  if (r->runs.fetch_add(1) == 0) {
    simba_term_retain(t);
    r->term = t;
    r->start_ns = start;
  }
  if (!r->ignores) {
    while (simba_term_wait_revoked(t, 1000) != SIMBA_OK) {
    }
    r->saw_revoked_ns = mono_ns();
  } else {
    // Sees the revocation (and records when) but goes on with its step; the
    // bound only ends a run the test forgot to let go.
    const int64_t bound = start + 30'000 * kMsNs;
    while (!r->let_go.load() && mono_ns() < bound) {
      if (r->saw_revoked_ns.load() == 0 && !simba_term_is_valid(t)) r->saw_revoked_ns = mono_ns();
      sleep_ms(1);
    }
  }
  r->end_ns = mono_ns();
}
struct Done {
  std::atomic<int64_t> at_ns{0};
  std::atomic<int> err{1};
  static void fn(void* ud, int err) {
    auto* d = static_cast<Done*>(ud);
    d->err = err;
    d->at_ns = mono_ns();
  }
};
}  // namespace deaf

TEST_P(Conformance, StopWaitsForWorkIgnoringRevocationAtMostTheRemainingTime) {
  const Timing t{1000, 200};
  Client a, b;
  OpenLive(a, t);
  OpenLive(b, t);
  deaf::Run ra, rb;
  ra.ignores = true;
  const std::string name = lease("deaf");
  simba_task_t* ta = nullptr;
  simba_task_t* tb = nullptr;
  ASSERT_EQ(simba_run_while_leader(&ta, a, name.c_str(), deaf::work, &ra), SIMBA_OK);
  ASSERT_TRUE(wait_for([&] { return ra.term.load() != nullptr; }, 5000 * slow_factor()));
  simba_term_t* term = ra.term;
  ASSERT_EQ(simba_run_while_leader(&tb, b, name.c_str(), deaf::work, &rb), SIMBA_OK);
  ASSERT_TRUE(wait_for([&] { return json_string(snapshot(b), "state") == "candidate"; },
                       5000 * slow_factor()));

  // Stop right after a keep-alive moved the deadline on, so that the next one
  // (a renew interval away) cannot move it between the read and the stop:
  // then the deadline at the stop D is in [before + rem, after + rem + 1 ms].
  int64_t prev = simba_term_remaining_ms(term);
  ASSERT_TRUE(wait_for(
      [&] {
        const int64_t r = simba_term_remaining_ms(term);
        const bool renewed = r > prev + t.renew_ms / 4;
        prev = r;
        return renewed;
      },
      5000 * slow_factor(), 1));
  deaf::Done done;
  const int64_t before = mono_ns();
  const int64_t rem = simba_term_remaining_ms(term);
  ASSERT_EQ(simba_task_stop(ta, deaf::Done::fn, &done), SIMBA_OK);
  const int64_t stop_at = mono_ns();
  const int64_t deadline_lo = before + rem * kMsNs;
  const int64_t deadline_hi = stop_at + (rem + 1) * kMsNs;
  ASSERT_GT(rem, t.lease_ms / 2) << "just renewed";
  EXPECT_EQ(rb.runs.load(), 0) << "b's work started while a led";

  // The term is revoked at once; the work sees it and ignores it.
  ASSERT_TRUE(wait_for([&] { return ra.saw_revoked_ns.load() != 0; }, 1000 * slow_factor(), 1));
  EXPECT_LT((ra.saw_revoked_ns.load() - stop_at) / kMsNs, 100 * slow_factor());
  EXPECT_EQ(simba_term_revoke_reason(term), SIMBA_REVOKE_STOPPED);

  // The stop completes (after the release) once the deadline at the stop
  // passed, not later by more than a round trip: the work still runs.
  const int64_t slack_ms = 150 * slow_factor();
  ASSERT_TRUE(wait_for([&] { return done.at_ns.load() != 0; }, rem + 5000 * slow_factor(), 1));
  EXPECT_EQ(done.err.load(), SIMBA_OK);
  EXPECT_GE(done.at_ns.load(), deadline_lo) << "released before the work exited or the deadline";
  EXPECT_LE((done.at_ns.load() - deadline_hi) / kMsNs, slack_ms)
      << "the handover took " << (done.at_ns.load() - stop_at) / kMsNs << " ms after the stop; "
      << rem << " ms remained";
  EXPECT_EQ(ra.end_ns.load(), 0) << "the work was to ignore the revocation";

  // B's work starts only then, with a larger token; a's run never exited so far.
  // (PostgreSQL candidates find the free lease at their next attempt: within a
  // renew interval.)
  ASSERT_TRUE(wait_for([&] { return rb.term.load() != nullptr; }, 5000 * slow_factor(), 1));
  EXPECT_GE(rb.start_ns.load(), deadline_lo) << "b's work started before a's deadline passed";
  EXPECT_EQ(ra.end_ns.load(), 0);
  EXPECT_LE((rb.start_ns.load() - deadline_hi) / kMsNs, t.renew_ms + slack_ms)
      << "b's work started " << (rb.start_ns.load() - stop_at) / kMsNs << " ms after the stop";
  EXPECT_GT(simba_term_token(rb.term), simba_term_token(term));
  EXPECT_TRUE(simba_term_is_valid(rb.term));

  ra.let_go = true;
  EXPECT_EQ(simba_task_close(ta), SIMBA_OK);  // waits for the run to return
  EXPECT_NE(ra.end_ns.load(), 0);
  EXPECT_EQ(ra.runs.load(), 1);
  EXPECT_EQ(simba_task_close(tb), SIMBA_OK);
  EXPECT_EQ(rb.runs.load(), 1);
  simba_term_release(term);
  simba_term_release(rb.term);
}

// A partition group through members joining, one dying (its node freezes: no
// keep-alive, no release, its session expires on the backend) and one leaving.
// A poller samples every term any member received, about every millisecond:
// at no sample does a partition have two valid holders, not only when work
// starts; after each change settles every member holds floor(N/m) or ceil(N/m).
TEST_P(Conformance, PartitionGroupOneHolderAtEveryInstantAsMembersJoinDieAndLeave) {
  const Timing t{1000, 200};
  constexpr int kN = 7;
  const std::string group = lease("pgroup");
  GroupProbe probe;
  Client c[2];
  simba_task_t* task[2] = {nullptr, nullptr};
  simba_task_t* dying_task = nullptr;
  FrozenClient dying;  // member 2; closed before the probe goes
  for (auto& client : c) OpenLive(client, t);
  ASSERT_EQ(dying.open(url(), t), SIMBA_OK) << simba_last_error();

  std::atomic<bool> done{false};
  std::atomic<int64_t> samples{0}, bad{0};
  std::string first_bad;  // poller only, until joined
  std::thread poller([&] {
    while (!done.load()) {
      std::string what;
      if (probe.multi_holders(&what) > 0 && bad++ == 0) first_bad = what;
      samples++;
      sleep_ms(1);
    }
  });
  ThreadGuard poller_guard(poller, done);

  const int64_t settle = 10'000 * slow_factor();
  ASSERT_EQ(simba_group_join(&task[0], c[0], group.c_str(), kN, GroupProbe::work, probe.member(0)),
            SIMBA_OK)
      << simba_last_error();
  ASSERT_EQ(
      simba_group_join(&dying_task, dying, group.c_str(), kN, GroupProbe::work, probe.member(2)),
      SIMBA_OK)
      << simba_last_error();
  ASSERT_TRUE(wait_for([&] { return probe.balanced({0, 2}, kN); }, settle)) << probe.dump();
  // A member joins: the others hand their excess over.
  ASSERT_EQ(simba_group_join(&task[1], c[1], group.c_str(), kN, GroupProbe::work, probe.member(1)),
            SIMBA_OK)
      << simba_last_error();
  ASSERT_TRUE(wait_for([&] { return probe.balanced({0, 1, 2}, kN); }, settle)) << probe.dump();
  ASSERT_GE(probe.held(2), 2) << probe.dump();

  // Member 2 dies holding its partitions: its work ends at its local deadline;
  // the others take its partitions once the backend expired its session.
  const int64_t died_at = dying.freeze(lease("freeze"));
  ASSERT_NE(died_at, 0) << "the loop did not stop";
  ASSERT_TRUE(wait_for([&] { return probe.held(2) == 0; }, t.lease_ms + 2000 * slow_factor()))
      << probe.dump();
  EXPECT_LE((mono_ns() - died_at) / kMsNs, t.lease_ms + 200 * slow_factor())
      << "a dead member's work ran past its local deadline";
  ASSERT_TRUE(wait_for([&] { return probe.balanced({0, 1}, kN); }, settle)) << probe.dump();

  // Member 0 leaves (stop: its partitions go over in handover order).
  ASSERT_EQ(simba_task_stop(task[0], nullptr, nullptr), SIMBA_OK);
  ASSERT_TRUE(wait_for([&] { return probe.balanced({1}, kN); }, settle)) << probe.dump();
  EXPECT_EQ(probe.held(0), 0);

  poller_guard.join();
  EXPECT_EQ(bad.load(), 0) << "two valid holders of a partition at once in " << bad.load() << " of "
                           << samples.load() << " samples; first: " << first_bad;
  EXPECT_GT(samples.load(), 500);
  EXPECT_EQ(probe.violations(), 0);
  for (auto* tk : task) EXPECT_EQ(simba_task_close(tk), SIMBA_OK);
  EXPECT_EQ(simba_task_stop(dying_task, nullptr, nullptr), SIMBA_OK);
  dying.thaw();
  EXPECT_EQ(simba_task_close(dying_task), SIMBA_OK);
}

// Schedules of two nodes on one name: runs happen only on the node whose term
// is valid, never at once on both; after the leader's stop the other node's
// schedule starts on its new term with its initial delay, then keeps the
// fixed delay between runs.
namespace sched {
struct Run {
  int node;
  int64_t start_ns, end_ns;
  uint64_t token;
  bool valid;  // the term read valid when the run began
};
struct Log {
  std::mutex mu;
  std::vector<Run> runs;
  int count(int node) {
    std::lock_guard<std::mutex> lock(mu);
    return static_cast<int>(
        std::count_if(runs.begin(), runs.end(), [&](const Run& r) { return r.node == node; }));
  }
};
struct Ctx {
  Log* log;
  int node;
};
void run(void* ud, simba_term_t* t) {
  auto* c = static_cast<Ctx*>(ud);
  const int64_t start = mono_ns();
  const bool valid = simba_term_is_valid(t);
  sleep_ms(5);  // one step of work
  std::lock_guard<std::mutex> lock(c->log->mu);
  c->log->runs.push_back({c->node, start, mono_ns(), simba_term_token(t), valid});
}
}  // namespace sched

TEST_P(Conformance, ScheduleRunsOnlyOnTheValidTermAndRestartsWithInitialDelay) {
  const Timing t{1000, 200};
  constexpr int64_t kInitial = 300, kPeriod = 30;
  Client a, b;
  OpenLive(a, t);
  OpenLive(b, t);
  sched::Log log;
  sched::Ctx ca{&log, 0}, cb{&log, 1};
  const std::string name = lease("schedule");
  simba_task_t* ta = nullptr;
  simba_task_t* tb = nullptr;
  const int64_t started_at = mono_ns();
  ASSERT_EQ(simba_schedule(&ta, a, name.c_str(), kInitial, kPeriod, sched::run, &ca), SIMBA_OK);
  ASSERT_TRUE(wait_for([&] { return json_string(snapshot(a), "state") == "leader"; },
                       5000 * slow_factor()));
  ASSERT_EQ(simba_schedule(&tb, b, name.c_str(), kInitial, kPeriod, sched::run, &cb), SIMBA_OK);
  ASSERT_TRUE(wait_for([&] { return log.count(0) >= 5; }, 5000 * slow_factor()));
  EXPECT_EQ(log.count(1), 0) << "b ran while a led";

  deaf::Done done;
  const int64_t stop_at = mono_ns();
  ASSERT_EQ(simba_task_stop(ta, deaf::Done::fn, &done), SIMBA_OK);
  ASSERT_TRUE(wait_for([&] { return done.at_ns.load() != 0; }, 5000 * slow_factor()));
  const int a_runs = log.count(0);
  ASSERT_TRUE(wait_for([&] { return log.count(1) >= 3; }, 5000 * slow_factor()));
  EXPECT_EQ(log.count(0), a_runs) << "a ran after its stop completed";
  ASSERT_EQ(simba_task_close(tb), SIMBA_OK);
  EXPECT_EQ(simba_task_close(ta), SIMBA_OK);

  std::lock_guard<std::mutex> lock(log.mu);
  const std::vector<sched::Run>& runs = log.runs;
  ASSERT_GE(runs.size(), 8u);
  size_t first_b = 0;
  while (first_b < runs.size() && runs[first_b].node == 0) ++first_b;
  ASSERT_LT(first_b, runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    const sched::Run& r = runs[i];
    EXPECT_TRUE(r.valid) << "run " << i << " of node " << r.node << " began on an invalid term";
    // Each node's runs are one term's (a before the stop, b after it).
    EXPECT_EQ(r.node, i < first_b ? 0 : 1) << "run " << i;
    EXPECT_EQ(r.token, runs[i < first_b ? 0 : first_b].token) << "run " << i;
    if (i + 1 < runs.size()) {
      // Never two at once, and a fixed delay between one run and the next.
      EXPECT_GE(runs[i + 1].start_ns, r.end_ns) << "runs " << i << " and " << i + 1 << " overlap";
      if (i + 1 != first_b) {
        EXPECT_GE((runs[i + 1].start_ns - r.end_ns) / kMsNs, kPeriod - 1) << "run " << i + 1;
      }
    }
  }
  EXPECT_GT(runs[first_b].token, runs[0].token);
  // Each term's first run comes after its initial delay: a's counted from no
  // earlier than its start, b's from no earlier than a's stop (b's term begins
  // after a's release), and b's starts promptly after that.
  EXPECT_GE((runs[0].start_ns - started_at) / kMsNs, kInitial);
  EXPECT_LT(runs[first_b - 1].start_ns, done.at_ns.load());
  EXPECT_GE((runs[first_b].start_ns - stop_at) / kMsNs, kInitial)
      << "b's first run did not wait for the initial delay on its new term";
  EXPECT_LE((runs[first_b].start_ns - done.at_ns.load()) / kMsNs,
            kInitial + t.renew_ms + 200 * slow_factor());
}

// EXTERNAL mode: a host that sleeps in poll() on simba_client_fd() for
// simba_client_timeout_ms(), then calls simba_client_process(), sees every
// change the backend made to its watches in a callback (a new connection, a
// command to write). libuv hands such changes to epoll only at its next poll
// (libuv issue #1565): the timeout must read 0 until they are applied. A host
// sleeping on a stale set would wait for a call's timeout (the renew period,
// 5 s here) before the session opened or the lease was won.
TEST_P(Conformance, AnExternalHostLoopSeesEveryWatchChange) {
  Timing t(15000, 5000);
  t.settings = {{"loop.mode", "external"}};
  // By name: the connection then starts in the resolver's callback.
  std::string by_name = url();
  const size_t ip = by_name.find("127.0.0.1");
  if (ip != std::string::npos) by_name.replace(ip, 9, "localhost");
  Client c;
  ASSERT_EQ(c.open(by_name, t), SIMBA_OK) << simba_last_error();
  auto host_loop_until = [&](const std::function<bool()>& done) {
    const int64_t end = mono_ms() + 1000 * slow_factor();
    while (!done()) {
      const int64_t left = end - mono_ms();
      if (left <= 0) return false;
      int64_t timeout = simba_client_timeout_ms(c);
      if (timeout < 0 || timeout > left) timeout = left;
      struct pollfd p = {simba_client_fd(c), POLLIN, 0};
      poll(&p, 1, static_cast<int>(timeout));
      EXPECT_EQ(simba_client_process(c), SIMBA_OK) << simba_last_error();
    }
    return true;
  };
  EXPECT_TRUE(host_loop_until([&] { return simba_client_status(c) == SIMBA_SESSION_LIVE; }))
      << "status " << simba_client_status(c);
  Election e;
  ASSERT_EQ(e.start(c, lease("host")), SIMBA_OK) << simba_last_error();
  EXPECT_TRUE(host_loop_until([&] { return e.elected_count() == 1; }));
  EXPECT_EQ(e.stop(5000 * slow_factor()), SIMBA_OK) << simba_last_error();
}

// --- The backend contract's watches (ADR 0040) ----------------------------------
// Below the C API: two Backends of the URL (WatchingBackend), one holding names,
// the other finding them Held and watching some. The broadcast a backend may
// send right after a watch (a release it cannot rule out) is let pass first.

// A release of a watched name is delivered.
TEST_P(Conformance, AWatchedNamesReleaseIsDelivered) {
  WatchingBackend holder(url()), watcher(url());
  ASSERT_TRUE(holder.ok() && watcher.ok()) << holder.error << watcher.error;
  const std::string hs = holder.open(), ws = watcher.open();
  ASSERT_FALSE(hs.empty() || ws.empty());
  const std::string name = lease("watched");
  const simba::AcquireReply won = holder.acquire(hs, name);
  ASSERT_EQ(won.outcome, simba::Outcome::kOk);
  ASSERT_EQ(watcher.acquire(ws, name).outcome, simba::Outcome::kHeld);
  watcher.backend().watch(name);
  watcher.run_for(300);
  watcher.heard.clear();
  ASSERT_EQ(holder.release(hs, name, won.token), simba::Outcome::kOk);
  EXPECT_TRUE(watcher.run_until([&] { return watcher.heard_of(name); }, 3000 * slow_factor()))
      << "the release of a watched name was not delivered";
}

// A release of a name never watched, or watched and then unwatched, is not:
// both are released before a watched one, whose delivery proves the others'
// would have come by then (one connection, in order).
TEST_P(Conformance, AnUnwatchedNamesReleaseIsNotDelivered) {
  WatchingBackend holder(url()), watcher(url());
  ASSERT_TRUE(holder.ok() && watcher.ok()) << holder.error << watcher.error;
  const std::string hs = holder.open(), ws = watcher.open();
  ASSERT_FALSE(hs.empty() || ws.empty());
  const std::string never = lease("never"), unwatched = lease("unwatched"),
                    watched = lease("watched");
  std::map<std::string, uint64_t> tokens;
  for (const std::string& n : {never, unwatched, watched}) {
    const simba::AcquireReply won = holder.acquire(hs, n);
    ASSERT_EQ(won.outcome, simba::Outcome::kOk) << n;
    tokens[n] = won.token;
    ASSERT_EQ(watcher.acquire(ws, n).outcome, simba::Outcome::kHeld) << n;
  }
  watcher.backend().watch(unwatched);
  watcher.backend().watch(watched);
  watcher.run_for(300);
  watcher.backend().unwatch(unwatched);
  watcher.heard.clear();
  for (const std::string& n : {never, unwatched, watched}) {
    ASSERT_EQ(holder.release(hs, n, tokens[n]), simba::Outcome::kOk) << n;
  }
  ASSERT_TRUE(watcher.run_until([&] { return watcher.heard_of(watched); }, 3000 * slow_factor()));
  watcher.run_for(100);
  EXPECT_FALSE(watcher.heard_of(never)) << "a name never watched was delivered";
  EXPECT_FALSE(watcher.heard_of(unwatched)) << "an unwatched name was delivered";
}

// --- Permits: semaphores and read/write locks (ADR 0046) ------------------------
// Below the C API, through the Backend of the URL. Every backend has them: a
// probe that is not granted fails the test (no skip).

using simba::AcquireReply;
using simba::Outcome;
using simba::PermitAsk;
using simba::PermitKind;

PermitAsk ask_semaphore(uint32_t size) {
  PermitAsk a;
  a.kind = PermitKind::kSemaphore;
  a.size = size;
  return a;
}
PermitAsk ask_read() {
  PermitAsk a;
  a.kind = PermitKind::kRead;
  return a;
}
PermitAsk ask_write(bool wait, uint64_t intent = 0) {
  PermitAsk a;
  a.kind = PermitKind::kWrite;
  a.leave_intent = wait;
  a.intent = intent;
  return a;
}
// Whether `owned` lists the entry (kind, permit, token) of `name`.
bool lists(const std::vector<simba::OwnedLease>& owned, const std::string& name, PermitKind kind,
           uint64_t permit, uint64_t token) {
  return std::find(owned.begin(), owned.end(), simba::OwnedLease{name, token, kind, permit}) !=
         owned.end();
}

// Two Backends of the URL, each with a session, for the permit tests.
struct PermitPair {
  std::unique_ptr<WatchingBackend> a_, b_;
  std::string sa_, sb_;
  std::string error;  // why start() returned false
  bool start(const std::string& url, const std::string& probe) {
    a_ = std::make_unique<WatchingBackend>(url);
    b_ = std::make_unique<WatchingBackend>(url);
    if (!a_->ok() || !b_->ok()) return error = a_->error + b_->error, false;
    sa_ = a_->open();
    sb_ = b_->open();
    if (sa_.empty() || sb_.empty()) return error = "no session", false;
    const AcquireReply r = a_->acquire_permit(sa_, probe, ask_read());
    if (r.outcome != Outcome::kOk) return error = "probe: " + r.error, false;
    return true;
  }
  WatchingBackend& a() { return *a_; }
  WatchingBackend& b() { return *b_; }
  const std::string& sa() const { return sa_; }
  const std::string& sb() const { return sb_; }
};
// Starts `p`, or fails the test.
#define PERMITS_START(p) \
  PermitPair p;          \
  if (!p.start(url(), lease("probe"))) FAIL() << p.error;

// Up to N permits, tokens strictly increasing, a session's own counted; a
// release frees one; the size is fixed by the first holder.
TEST_P(Conformance, Permits_ASemaphoreGrantsUpToItsSizeWithIncreasingTokens) {
  PERMITS_START(pp);
  const std::string name = lease("sem");
  const AcquireReply p1 = pp.a().acquire_permit(pp.sa(), name, ask_semaphore(2));
  ASSERT_EQ(p1.outcome, Outcome::kOk) << p1.error;
  EXPECT_GT(p1.permit, 0u);
  EXPECT_EQ(p1.token, p1.permit);
  const AcquireReply p2 =
      pp.a().acquire_permit(pp.sa(), name, ask_semaphore(2));  // the same session
  ASSERT_EQ(p2.outcome, Outcome::kOk) << p2.error;
  EXPECT_GT(p2.token, p1.token);
  EXPECT_NE(p2.permit, p1.permit);
  EXPECT_EQ(pp.b().acquire_permit(pp.sb(), name, ask_semaphore(2)).outcome, Outcome::kHeld);
  const AcquireReply other = pp.b().acquire_permit(pp.sb(), name, ask_semaphore(3));
  EXPECT_EQ(other.outcome, Outcome::kRefused);
  EXPECT_EQ(other.size, 2u);
  // Listed by the keep-alive as entries, beside nothing of the lease namespace.
  const simba::KeepAliveReply ka = pp.a().keep_alive(pp.sa());
  ASSERT_EQ(ka.outcome, Outcome::kOk);
  EXPECT_TRUE(lists(ka.owned, name, PermitKind::kSemaphore, p1.permit, p1.token));
  EXPECT_TRUE(lists(ka.owned, name, PermitKind::kSemaphore, p2.permit, p2.token));
  // Semaphore NAME and lock NAME are unrelated.
  EXPECT_EQ(pp.b().acquire(pp.sb(), name).outcome, Outcome::kOk);
  ASSERT_EQ(pp.a().release_permit(pp.sa(), name, PermitKind::kSemaphore, p1.permit, p1.token),
            Outcome::kOk);
  const AcquireReply p3 = pp.b().acquire_permit(pp.sb(), name, ask_semaphore(2));
  ASSERT_EQ(p3.outcome, Outcome::kOk) << p3.error;
  EXPECT_GT(p3.token, p2.token);
  // Without holders the size goes: the next first holder sets another.
  ASSERT_EQ(pp.a().release_permit(pp.sa(), name, PermitKind::kSemaphore, p2.permit, p2.token),
            Outcome::kOk);
  ASSERT_EQ(pp.b().release_permit(pp.sb(), name, PermitKind::kSemaphore, p3.permit, p3.token),
            Outcome::kOk);
  const AcquireReply p4 = pp.a().acquire_permit(pp.sa(), name, ask_semaphore(5));
  EXPECT_EQ(p4.outcome, Outcome::kOk) << p4.error;
  EXPECT_GT(p4.token, p3.token);
}

// A release frees an entry only where session, permit and token all match.
TEST_P(Conformance, Permits_AReleaseNeedsTheSessionThePermitAndTheToken) {
  PERMITS_START(pp);
  const std::string name = lease("sem1");
  const AcquireReply p = pp.a().acquire_permit(pp.sa(), name, ask_semaphore(1));
  ASSERT_EQ(p.outcome, Outcome::kOk) << p.error;
  EXPECT_EQ(pp.b().release_permit(pp.sb(), name, PermitKind::kSemaphore, p.permit, p.token),
            Outcome::kOk);
  EXPECT_EQ(pp.a().release_permit(pp.sa(), name, PermitKind::kSemaphore, p.permit, p.token + 1),
            Outcome::kOk);
  EXPECT_EQ(pp.a().release_permit(pp.sa(), name, PermitKind::kRead, p.permit, p.token),
            Outcome::kOk);
  EXPECT_EQ(pp.b().acquire_permit(pp.sb(), name, ask_semaphore(1)).outcome, Outcome::kHeld);
  ASSERT_EQ(pp.a().release_permit(pp.sa(), name, PermitKind::kSemaphore, p.permit, p.token),
            Outcome::kOk);
  EXPECT_EQ(pp.b().acquire_permit(pp.sb(), name, ask_semaphore(1)).outcome, Outcome::kOk);
}

// Readers share, carrying the write epoch; a waiting writer's intent holds
// new readers back; the writer's token is above every earlier one and
// becomes the epoch.
TEST_P(Conformance, Permits_ReadersShareAndAWaitingWritersIntentHoldsNewReadersBack) {
  PERMITS_START(pp);
  const std::string name = lease("rw");
  const AcquireReply r1 = pp.a().acquire_permit(pp.sa(), name, ask_read());
  const AcquireReply r2 = pp.b().acquire_permit(pp.sb(), name, ask_read());
  ASSERT_EQ(r1.outcome, Outcome::kOk) << r1.error;
  ASSERT_EQ(r2.outcome, Outcome::kOk) << r2.error;
  EXPECT_EQ(r1.token, r2.token);  // the epoch: no writer yet
  EXPECT_NE(r1.permit, r2.permit);
  // A try-write leaves nothing; a blocking one leaves an intent, and keeps it.
  const AcquireReply tried = pp.b().acquire_permit(pp.sb(), name, ask_write(false));
  EXPECT_EQ(tried.outcome, Outcome::kHeld);
  EXPECT_EQ(tried.permit, 0u);
  EXPECT_EQ(pp.a().acquire_permit(pp.sa(), name, ask_read()).outcome,
            Outcome::kOk);  // no intent yet
  const AcquireReply w = pp.b().acquire_permit(pp.sb(), name, ask_write(true));
  ASSERT_EQ(w.outcome, Outcome::kHeld);
  ASSERT_GT(w.permit, 0u);
  EXPECT_EQ(pp.b().acquire_permit(pp.sb(), name, ask_write(true, w.permit)).permit, w.permit);
  const simba::KeepAliveReply ka = pp.b().keep_alive(pp.sb());
  EXPECT_TRUE(lists(ka.owned, name, PermitKind::kIntent, w.permit, 0));
  EXPECT_EQ(pp.a().acquire_permit(pp.sa(), name, ask_read()).outcome, Outcome::kHeld);
  // The readers go (the session's own read included: no upgrade): the writer wins.
  for (const simba::OwnedLease& e : pp.a().keep_alive(pp.sa()).owned) {
    ASSERT_EQ(pp.a().release_permit(pp.sa(), e.name, e.kind, e.permit, e.token), Outcome::kOk);
  }
  ASSERT_EQ(pp.b().release_permit(pp.sb(), name, PermitKind::kRead, r2.permit, r2.token),
            Outcome::kOk);
  const AcquireReply won = pp.b().acquire_permit(pp.sb(), name, ask_write(true, w.permit));
  ASSERT_EQ(won.outcome, Outcome::kOk) << won.error;
  EXPECT_EQ(won.token, won.permit);
  EXPECT_GT(won.token, w.permit);
  EXPECT_FALSE(lists(pp.b().keep_alive(pp.sb()).owned, name, PermitKind::kIntent, w.permit, 0))
      << "the grant deletes the writer's intent";
  EXPECT_EQ(pp.a().acquire_permit(pp.sa(), name, ask_read()).outcome, Outcome::kHeld);
  EXPECT_EQ(pp.a().acquire_permit(pp.sa(), name, ask_write(false)).outcome, Outcome::kHeld);
  ASSERT_EQ(pp.b().release_permit(pp.sb(), name, PermitKind::kWrite, won.permit, won.token),
            Outcome::kOk);
  const AcquireReply after = pp.a().acquire_permit(pp.sa(), name, ask_read());
  ASSERT_EQ(after.outcome, Outcome::kOk);
  EXPECT_EQ(after.token, won.token);  // the epoch is the last writer's token
}

// An intent withdrawn (released with token 0) lets readers in again.
TEST_P(Conformance, Permits_AWithdrawnIntentLetsReadersIn) {
  PERMITS_START(pp);
  const std::string name = lease("intent");
  const AcquireReply r = pp.a().acquire_permit(pp.sa(), name, ask_read());
  ASSERT_EQ(r.outcome, Outcome::kOk);
  const AcquireReply w = pp.b().acquire_permit(pp.sb(), name, ask_write(true));
  ASSERT_EQ(w.outcome, Outcome::kHeld);
  ASSERT_EQ(pp.a().acquire_permit(pp.sa(), name, ask_read()).outcome, Outcome::kHeld);
  ASSERT_EQ(pp.b().release_permit(pp.sb(), name, PermitKind::kIntent, w.permit, 0), Outcome::kOk);
  EXPECT_FALSE(lists(pp.b().keep_alive(pp.sb()).owned, name, PermitKind::kIntent, w.permit, 0));
  EXPECT_EQ(pp.a().acquire_permit(pp.sa(), name, ask_read()).outcome, Outcome::kOk);
}

// A session's permits and intents go with it.
TEST_P(Conformance, Permits_AClosedSessionsPermitsAndIntentsAreFreed) {
  PERMITS_START(pp);
  const std::string sem = lease("csem"), rw = lease("crw");
  ASSERT_EQ(pp.a().acquire_permit(pp.sa(), sem, ask_semaphore(1)).outcome, Outcome::kOk);
  ASSERT_EQ(pp.b().acquire_permit(pp.sb(), rw, ask_read()).outcome, Outcome::kOk);
  ASSERT_EQ(pp.a().acquire_permit(pp.sa(), rw, ask_write(true)).outcome, Outcome::kHeld);
  ASSERT_EQ(pp.b().acquire_permit(pp.sb(), sem, ask_semaphore(1)).outcome, Outcome::kHeld);
  ASSERT_EQ(pp.a().close_session(pp.sa()), Outcome::kOk);
  EXPECT_EQ(pp.b().acquire_permit(pp.sb(), sem, ask_semaphore(1)).outcome, Outcome::kOk);
  EXPECT_EQ(pp.b().acquire_permit(pp.sb(), rw, ask_read()).outcome, Outcome::kOk)
      << "the closed session's intent still holds readers back";
}

// A release is broadcast under the permit's resource (permit_resource), not
// under the lease name.
TEST_P(Conformance, Permits_AReleaseIsBroadcastUnderItsResource) {
  PERMITS_START(pp);
  const std::string name = lease("bcast");
  const std::string sem = simba::permit_resource(PermitKind::kSemaphore, name);
  const std::string rw = simba::permit_resource(PermitKind::kRead, name);
  const AcquireReply s = pp.a().acquire_permit(pp.sa(), name, ask_semaphore(1));
  const AcquireReply r = pp.a().acquire_permit(pp.sa(), name, ask_read());
  ASSERT_EQ(s.outcome, Outcome::kOk);
  ASSERT_EQ(r.outcome, Outcome::kOk);
  ASSERT_EQ(pp.b().acquire_permit(pp.sb(), name, ask_semaphore(1)).outcome, Outcome::kHeld);
  pp.b().backend().watch(sem);
  pp.b().backend().watch(rw);
  pp.b().run_for(300);
  pp.b().heard.clear();
  ASSERT_EQ(pp.a().release_permit(pp.sa(), name, PermitKind::kSemaphore, s.permit, s.token),
            Outcome::kOk);
  EXPECT_TRUE(pp.b().run_until([&] { return pp.b().heard_of(sem); }, 3000 * slow_factor()));
  ASSERT_EQ(pp.a().release_permit(pp.sa(), name, PermitKind::kRead, r.permit, r.token),
            Outcome::kOk);
  EXPECT_TRUE(pp.b().run_until([&] { return pp.b().heard_of(rw); }, 3000 * slow_factor()));
  EXPECT_FALSE(pp.b().heard_of(name));
  pp.b().backend().unwatch(sem);
  pp.b().backend().unwatch(rw);
}

// inspect lists each permit as a row with its kind and id.
TEST_P(Conformance, Permits_InspectListsPermits) {
  PERMITS_START(pp);
  const std::string name = lease("insp");
  const AcquireReply s = pp.a().acquire_permit(pp.sa(), name, ask_semaphore(2));
  const AcquireReply w = pp.b().acquire_permit(pp.sb(), name, ask_write(true));
  ASSERT_EQ(s.outcome, Outcome::kOk);
  ASSERT_EQ(w.outcome, Outcome::kOk);
  const simba::InspectReply in = pp.a().inspect({name});
  ASSERT_EQ(in.outcome, Outcome::kOk) << in.error;
  int found = 0;
  for (const simba::LeaseInfo& l : in.leases) {
    if (l.name != name) continue;
    if (l.kind == PermitKind::kSemaphore && l.permit == s.permit) {
      EXPECT_EQ(l.holder, pp.sa());
      EXPECT_EQ(l.token, s.token);
      ++found;
    }
    if (l.kind == PermitKind::kWrite && l.permit == w.permit) {
      EXPECT_EQ(l.holder, pp.sb());
      ++found;
    }
  }
  EXPECT_EQ(found, 2);
}

// --- Candidates and handoff (ADR 0047) --------------------------------------------
// Below the C API: a holder and candidates, each a Backend of the URL with a
// session. A backend answering kCandidatesNotSupportedYet skips (ADR 0047
// step 2 brings the others).

using simba::CandidateAsk;
using simba::Grant;
using simba::ReleaseReply;

CandidateAsk ask_candidate(const std::string& client, int32_t priority = 0, uint64_t id = 0) {
  CandidateAsk a;
  a.leave = true;
  a.id = id;
  a.priority = priority;
  a.client = client;
  return a;
}
// The kCandidate entries of `name` that `owned` lists.
std::vector<uint64_t> candidate_ids(const std::vector<simba::OwnedLease>& owned,
                                    const std::string& name) {
  std::vector<uint64_t> ids;
  for (const simba::OwnedLease& o : owned) {
    if (o.kind == PermitKind::kCandidate && o.name == name) ids.push_back(o.permit);
  }
  return ids;
}

// Backends of the URL, each with a session; the first (0) holds `name`.
class HeldName {
 public:
  WatchingBackend& b(int i) { return *b_[i]; }
  const std::string& s(int i) const { return s_[i]; }
  uint64_t token() const { return token_; }
  std::string skip, error;  // why start() returned false: a skip or a failure

 protected:
  // `n` Backends; false with `error` on failure. `*held`: the holder's answer.
  bool open(const std::string& url, const std::string& name, int n, AcquireReply* held) {
    name_ = name;
    for (int i = 0; i < n; ++i) {
      b_.push_back(std::make_unique<WatchingBackend>(url));
      if (!b_[i]->ok()) return error = b_[i]->error, false;
      s_.push_back(b_[i]->open());
      if (s_[i].empty()) return error = "no session", false;
    }
    *held = b_[0]->acquire(s_[0], name);
    if (held->outcome != Outcome::kOk) return error = "holder: " + held->error, false;
    token_ = held->token;
    return true;
  }
  std::string name_;
  std::vector<std::unique_ptr<WatchingBackend>> b_;
  std::vector<std::string> s_;
  uint64_t token_ = 0;
};
// Starts `var` (a HeldName) with `start(url(), name)`, or skips, or fails the test.
#define HELD_START(Type, var, name)                  \
  Type var;                                          \
  if (!var.start(url(), name)) {                     \
    if (!var.skip.empty()) GTEST_SKIP() << var.skip; \
    FAIL() << var.error;                             \
  }

// A holder (0) of `name` and three more Backends (1..3), each with a session.
class Candidates : public HeldName {
 public:
  // False with `skip` set when the backend has no candidates, `error` on failure.
  // `consecutive`: the backend's tokens count per name (etcd's are global
  // revisions, so a grant's token is only above the holder's).
  bool start(const std::string& url, const std::string& name, bool consecutive) {
    consecutive_ = consecutive;
    AcquireReply held;
    if (!open(url, name, 4, &held)) return false;
    const AcquireReply probe = b_[3]->acquire_candidate(s_[3], name + ".probe", ask_candidate("p"));
    if (probe.outcome == Outcome::kError && probe.error == simba::kCandidatesNotSupportedYet) {
      return skip = probe.error, false;
    }
    if (probe.outcome != Outcome::kOk) return error = "probe: " + probe.error, false;
    return true;
  }
  // The token a handoff of the holder's term gives, as `seen` (a grant's):
  // the name's next one, or on etcd any above the holder's.
  uint64_t next(uint64_t seen) const {
    if (consecutive_) return token_ + 1;
    EXPECT_GT(seen, token_);
    return seen;
  }
  // `i` waits as a candidate of client "c{i}": its id, or 0 (a failure).
  uint64_t wait(int i, int32_t priority = 0) {
    const AcquireReply r =
        b_[i]->acquire_candidate(s_[i], name_, ask_candidate(client(i), priority));
    EXPECT_EQ(r.outcome, Outcome::kHeld) << r.error;
    EXPECT_GT(r.permit, 0u);
    return r.permit;
  }
  static std::string client(int i) { return "c" + std::to_string(i); }
  ReleaseReply release(const std::string& target = {}) {
    return b_[0]->release_handoff(s_[0], name_, token_, target);
  }

 private:
  bool consecutive_ = true;
};
#define CANDIDATES_START(c, name)                                       \
  Candidates c;                                                         \
  if (!c.start(url(), name, GetParam().label != std::string("etcd"))) { \
    if (!c.skip.empty()) GTEST_SKIP() << c.skip;                        \
    FAIL() << c.error;                                                  \
  }

// Whether `w`'s keep-alive lists lease `name` with `token`.
bool holds(WatchingBackend& w, const std::string& session, const std::string& name,
           uint64_t token) {
  const simba::KeepAliveReply ka = w.keep_alive(session);
  return ka.outcome == Outcome::kOk && lists(ka.owned, name, PermitKind::kLease, 0, token);
}

// A Held acquire leaves one entry, listed by the keep-alive; naming it again
// leaves no second; an ask that does not leave one leaves none.
TEST_P(Conformance, Candidates_AHeldAcquireLeavesOneEntryListedByTheKeepAlive) {
  const std::string name = lease("cand");
  CANDIDATES_START(c, name);
  const uint64_t id = c.wait(1, 3);
  const AcquireReply again = c.b(1).acquire_candidate(c.s(1), name, ask_candidate("c1", 3, id));
  EXPECT_EQ(again.outcome, Outcome::kHeld);
  EXPECT_EQ(again.permit, id);
  const simba::KeepAliveReply ka = c.b(1).keep_alive(c.s(1));
  ASSERT_EQ(ka.outcome, Outcome::kOk);
  EXPECT_EQ(candidate_ids(ka.owned, name), std::vector<uint64_t>{id});
  EXPECT_TRUE(lists(ka.owned, name, PermitKind::kCandidate, id, 0));
  CandidateAsk no_entry;  // a try-once attempt
  const AcquireReply once = c.b(2).acquire_candidate(c.s(2), name, no_entry);
  EXPECT_EQ(once.outcome, Outcome::kHeld);
  EXPECT_EQ(once.permit, 0u);
  EXPECT_TRUE(candidate_ids(c.b(2).keep_alive(c.s(2)).owned, name).empty());
  // Arrival order gives increasing ids.
  EXPECT_GT(c.wait(2), id);
}

// The release hands the lease to the earliest candidate in the same call: the
// next token, held by its session (listed, its entry gone), the broadcast says
// who; its next attempt naming its entry answers Ok with that token.
TEST_P(Conformance, Candidates_AReleaseHandsToTheEarliestCandidate) {
  const std::string name = lease("hand");
  CANDIDATES_START(c, name);
  const uint64_t id1 = c.wait(1);
  const uint64_t id2 = c.wait(2);
  c.b(1).backend().watch(name);
  c.b(1).run_for(200);
  c.b(1).heard.clear();
  c.b(1).grants.clear();
  const ReleaseReply r = c.release();
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error;
  EXPECT_FALSE(r.target_absent);
  const uint64_t next = c.next(r.grant.token);
  EXPECT_EQ(r.grant, (Grant{c.s(1), next}));
  const simba::KeepAliveReply ka = c.b(1).keep_alive(c.s(1));
  EXPECT_TRUE(lists(ka.owned, name, PermitKind::kLease, 0, next));
  EXPECT_TRUE(candidate_ids(ka.owned, name).empty()) << "the grant keeps the entry";
  EXPECT_EQ(candidate_ids(c.b(2).keep_alive(c.s(2)).owned, name), std::vector<uint64_t>{id2});
  ASSERT_TRUE(c.b(1).run_until([&] { return c.b(1).heard_of(name); }, 3000 * slow_factor()));
  for (size_t i = 0; i < c.b(1).heard.size(); ++i) {
    if (c.b(1).heard[i] == name) {
      EXPECT_EQ(c.b(1).grants[i], (Grant{c.s(1), next}));
    }
  }
  const AcquireReply adopt = c.b(1).acquire_candidate(c.s(1), name, ask_candidate("c1", 0, id1));
  EXPECT_EQ(adopt.outcome, Outcome::kOk) << adopt.error;
  EXPECT_EQ(adopt.token, next);
  EXPECT_EQ(c.b(0).acquire(c.s(0), name).outcome, Outcome::kHeld);
  EXPECT_EQ(c.b(1).inspect({name}).leases.at(0).holder, c.s(1));
  c.b(1).backend().unwatch(name);
}

// A higher priority beats an earlier arrival.
TEST_P(Conformance, Candidates_PriorityBeatsArrival) {
  const std::string name = lease("prio");
  CANDIDATES_START(c, name);
  c.wait(1, 0);
  c.wait(2, 5);
  c.wait(3, 5);
  const ReleaseReply r = c.release();
  EXPECT_EQ(r.grant, (Grant{c.s(2), c.next(r.grant.token)}));
}

// A target's candidate wins over a higher priority.
TEST_P(Conformance, Candidates_ATargetBeatsPriority) {
  const std::string name = lease("target");
  CANDIDATES_START(c, name);
  c.wait(1, 0);
  c.wait(2, 5);
  const ReleaseReply r = c.release(Candidates::client(1));
  EXPECT_EQ(r.grant, (Grant{c.s(1), c.next(r.grant.token)}));
  EXPECT_FALSE(r.target_absent);
}

// A target without a live candidate: the release chooses as without one and
// says so; with nobody waiting, the lease is freed, and says so too.
TEST_P(Conformance, Candidates_AnAbsentTargetFallsBackAndSaysSo) {
  const std::string name = lease("absent");
  CANDIDATES_START(c, name);
  c.wait(1, 0);
  c.wait(2, 5);
  const ReleaseReply r = c.release("nobody");
  EXPECT_EQ(r.outcome, Outcome::kOk);
  EXPECT_TRUE(r.target_absent);
  EXPECT_EQ(r.grant, (Grant{c.s(2), c.next(r.grant.token)}));
  const std::string alone = lease("absent.alone");
  const AcquireReply held = c.b(3).acquire(c.s(3), alone);
  ASSERT_EQ(held.outcome, Outcome::kOk);
  const ReleaseReply freed = c.b(3).release_handoff(c.s(3), alone, held.token, "nobody");
  EXPECT_EQ(freed.outcome, Outcome::kOk);
  EXPECT_TRUE(freed.target_absent);
  EXPECT_TRUE(freed.grant.empty());
  EXPECT_EQ(c.b(0).acquire(c.s(0), alone).outcome, Outcome::kOk);
}

// A candidate whose session died is skipped, even as the target.
TEST_P(Conformance, Candidates_ADeadCandidatesSessionIsSkipped) {
  const std::string name = lease("dead");
  CANDIDATES_START(c, name);
  // etcd: leases of whole seconds (ADR 0045), ended up to 500 ms late.
  const bool etcd = GetParam().label == std::string("etcd");
  const std::string short_lived = c.b(1).open(std::chrono::milliseconds(etcd ? 1000 : 300));
  ASSERT_FALSE(short_lived.empty());
  const AcquireReply left = c.b(1).acquire_candidate(short_lived, name, ask_candidate("c1", 9));
  ASSERT_EQ(left.outcome, Outcome::kHeld) << left.error;
  c.wait(2, 0);
  c.b(1).run_for(etcd ? 2500 : 900);  // no keep-alive: the session ends
  const ReleaseReply r = c.release(Candidates::client(1));
  EXPECT_TRUE(r.target_absent);
  EXPECT_EQ(r.grant, (Grant{c.s(2), c.next(r.grant.token)}));
}

// A withdrawn candidate is not chosen.
TEST_P(Conformance, Candidates_AWithdrawnCandidateIsNotChosen) {
  const std::string name = lease("withdrawn");
  CANDIDATES_START(c, name);
  const uint64_t id = c.wait(1, 9);
  c.wait(2, 0);
  ASSERT_EQ(c.b(1).release_permit(c.s(1), name, PermitKind::kCandidate, id, 0), Outcome::kOk);
  EXPECT_TRUE(candidate_ids(c.b(1).keep_alive(c.s(1)).owned, name).empty());
  const ReleaseReply r = c.release();
  EXPECT_EQ(r.grant, (Grant{c.s(2), c.next(r.grant.token)}));
}

// A session's close hands its leases over as a release would; its own
// candidate entries go with it.
TEST_P(Conformance, Candidates_ACloseHandsOver) {
  const std::string name = lease("close");
  CANDIDATES_START(c, name);
  c.wait(1);
  const std::string other = lease("close.other");
  ASSERT_EQ(c.b(2).acquire(c.s(2), other).outcome, Outcome::kOk);
  c.b(0).acquire_candidate(c.s(0), other, ask_candidate("c0"));  // the closing one waits too
  c.b(1).backend().watch(name);
  c.b(1).run_for(200);
  c.b(1).heard.clear();
  c.b(1).grants.clear();
  ASSERT_EQ(c.b(0).close_session(c.s(0)), Outcome::kOk);
  const simba::InspectReply now = c.b(1).inspect({name});
  ASSERT_EQ(now.outcome, Outcome::kOk);
  const uint64_t next = c.next(now.leases.at(0).token);
  EXPECT_TRUE(holds(c.b(1), c.s(1), name, next));
  ASSERT_TRUE(c.b(1).run_until([&] { return c.b(1).heard_of(name); }, 3000 * slow_factor()));
  EXPECT_EQ(c.b(1).grants.at(0), (Grant{c.s(1), next}));
  // The closed session's candidate of `other` is gone: a release there frees it.
  const simba::InspectReply in = c.b(2).inspect({other});
  ASSERT_EQ(in.outcome, Outcome::kOk);
  const ReleaseReply r = c.b(2).release_handoff(c.s(2), other, in.leases.at(0).token);
  EXPECT_TRUE(r.grant.empty());
  c.b(1).backend().unwatch(name);
}

// With no candidates a release frees the lease as before: an empty grant in
// the reply and the broadcast, the next acquire takes the next token.
TEST_P(Conformance, Candidates_APlainReleaseBehavesAsBefore) {
  const std::string name = lease("plain");
  CANDIDATES_START(c, name);
  ASSERT_EQ(c.b(1).acquire(c.s(1), name).outcome, Outcome::kHeld);
  c.b(1).backend().watch(name);
  c.b(1).run_for(200);
  c.b(1).heard.clear();
  c.b(1).grants.clear();
  const ReleaseReply r = c.release();
  EXPECT_EQ(r.outcome, Outcome::kOk);
  EXPECT_TRUE(r.grant.empty());
  EXPECT_FALSE(r.target_absent);
  ASSERT_TRUE(c.b(1).run_until([&] { return c.b(1).heard_of(name); }, 3000 * slow_factor()));
  EXPECT_TRUE(c.b(1).grants.at(0).empty());
  const AcquireReply next = c.b(1).acquire(c.s(1), name);
  EXPECT_EQ(next.outcome, Outcome::kOk);
  EXPECT_EQ(next.token, c.next(next.token));
  c.b(1).backend().unwatch(name);
}

// --- Run records (ADR 0048) --------------------------------------------------------
// Below the C API: a schedule's last run, written under the lease's token. A
// backend answering kRunRecordNotSupportedYet skips (ADR 0048's later steps
// bring the others).

using simba::RunOutcome;
using simba::RunRecord;
using simba::RunRefusal;
using simba::RunReply;

RunRecord run_record(int64_t period, uint64_t token, RunOutcome outcome = RunOutcome::kRunning) {
  RunRecord r;
  r.period_id = period;
  r.started_ms = period + 7;
  r.ended_ms = outcome == RunOutcome::kRunning ? 0 : period + 900;
  r.token = token;
  r.outcome = outcome;
  return r;
}
// 2026-05-01T10:00Z: a period id as a schedule names them.
constexpr int64_t kPeriod = 1777629600000;

// Two Backends of the URL, each with a session; the first holds `name`.
class RunPair : public HeldName {
 public:
  // False with `skip` set when the backend has no run records, `error` on failure.
  bool start(const std::string& url, const std::string& name) {
    AcquireReply held;
    if (!open(url, name, 2, &held)) return false;
    if (held.run) return error = "a new name has a run record", false;
    const RunReply probe = b_[0]->write_run(s_[0], name, token_, run_record(1, token_));
    if (probe.outcome == Outcome::kError && probe.error == simba::kRunRecordNotSupportedYet) {
      return skip = probe.error, false;
    }
    if (probe.outcome != Outcome::kOk) return error = "probe: " + probe.error, false;
    return true;
  }
  // Writes `r` as the holder (0), under its token.
  RunReply write(const RunRecord& r) { return b_[0]->write_run(s_[0], name_, token_, r); }
};
#define RUNS_START(r, name) HELD_START(RunPair, r, name)

// Each check of a write's answer: its outcome, why it was refused, what is stored.
void expect_run_reply(const RunReply& got, Outcome outcome, RunRefusal refused,
                      const RunRecord& stored) {
  EXPECT_EQ(got.outcome, outcome) << simba::outcome_name(got.outcome) << " " << got.error;
  EXPECT_EQ(got.refused, refused);
  ASSERT_TRUE(got.stored.has_value());
  EXPECT_EQ(*got.stored, stored);
}

// The holder's start is applied, and answered with the stored record.
TEST_P(Conformance, RunRecord_AStartByTheHolderIsApplied) {
  const std::string name = lease("run.start");
  RUNS_START(r, name);
  const RunRecord start = run_record(kPeriod, r.token());
  expect_run_reply(r.write(start), Outcome::kOk, RunRefusal::kNone, start);
}

// A write under a token that does not hold the lease, or from a session that
// does not, is refused and changes nothing; a gone session is kExpired.
TEST_P(Conformance, RunRecord_AStaleTokenOrAnotherSessionIsRefused) {
  const std::string name = lease("run.stale");
  RUNS_START(r, name);
  const RunRecord first = run_record(kPeriod, r.token());
  ASSERT_EQ(r.write(first).outcome, Outcome::kOk);
  const RunRecord next = run_record(kPeriod + 60000, r.token());
  expect_run_reply(r.b(0).write_run(r.s(0), name, r.token() + 1, next), Outcome::kRefused,
                   RunRefusal::kNotHolder, first);
  expect_run_reply(r.b(1).write_run(r.s(1), name, r.token(), next), Outcome::kRefused,
                   RunRefusal::kNotHolder, first);
  // The lease moves on: the old term's token no longer writes, the new one does.
  ASSERT_EQ(r.b(0).release(r.s(0), name, r.token()), Outcome::kOk);
  const AcquireReply taken = r.b(1).acquire(r.s(1), name);
  ASSERT_EQ(taken.outcome, Outcome::kOk);
  expect_run_reply(r.write(next), Outcome::kRefused, RunRefusal::kNotHolder, first);
  const RunRecord theirs = run_record(kPeriod + 60000, taken.token);
  expect_run_reply(r.b(1).write_run(r.s(1), name, taken.token, theirs), Outcome::kOk,
                   RunRefusal::kNone, theirs);
  ASSERT_EQ(r.b(0).close_session(r.s(0)), Outcome::kOk);
  EXPECT_EQ(r.b(0).write_run(r.s(0), name, r.token(), next).outcome, Outcome::kExpired);
}

// A start at or below the stored period id is refused: at most one start per
// period, and never an older one after a newer.
TEST_P(Conformance, RunRecord_AStartAtOrBelowTheStoredPeriodIsRefused) {
  const std::string name = lease("run.period");
  RUNS_START(r, name);
  const RunRecord start = run_record(kPeriod, r.token());
  ASSERT_EQ(r.write(start).outcome, Outcome::kOk);
  const RunRecord again = run_record(kPeriod, r.token());
  expect_run_reply(r.write(again), Outcome::kRefused, RunRefusal::kPeriod, start);
  expect_run_reply(r.write(run_record(kPeriod - 60000, r.token())), Outcome::kRefused,
                   RunRefusal::kPeriod, start);
  const RunRecord later = run_record(kPeriod + 60000, r.token());
  expect_run_reply(r.write(later), Outcome::kOk, RunRefusal::kNone, later);
}

// The outcome under the same token is applied to the stored period; an end
// of another period is refused.
TEST_P(Conformance, RunRecord_TheOutcomeUnderTheSameTokenIsApplied) {
  const std::string name = lease("run.outcome");
  RUNS_START(r, name);
  const RunRecord start = run_record(kPeriod, r.token());
  ASSERT_EQ(r.write(start).outcome, Outcome::kOk);
  const RunRecord other = run_record(kPeriod + 60000, r.token(), RunOutcome::kOk);
  expect_run_reply(r.write(other), Outcome::kRefused, RunRefusal::kPeriod, start);
  for (const RunOutcome o : {RunOutcome::kFailed, RunOutcome::kOk}) {
    const RunRecord end = run_record(kPeriod, r.token(), o);
    expect_run_reply(r.write(end), Outcome::kOk, RunRefusal::kNone, end);
  }
}

// A new holder's acquire answers the record in the same call, and inspect
// shows it (simba status); the new holder marks an unfinished run abandoned.
TEST_P(Conformance, RunRecord_ANewHoldersAcquireReadsTheRecord) {
  const std::string name = lease("run.read");
  RUNS_START(r, name);
  const RunRecord start = run_record(kPeriod, r.token());
  ASSERT_EQ(r.write(start).outcome, Outcome::kOk);
  ASSERT_EQ(r.b(0).release(r.s(0), name, r.token()), Outcome::kOk);
  const AcquireReply taken = r.b(1).acquire(r.s(1), name);
  ASSERT_EQ(taken.outcome, Outcome::kOk) << taken.error;
  ASSERT_TRUE(taken.run.has_value());
  EXPECT_EQ(*taken.run, start);
  const simba::InspectReply in = r.b(1).inspect({name});
  ASSERT_EQ(in.outcome, Outcome::kOk) << in.error;
  ASSERT_EQ(in.leases.size(), 1u);
  ASSERT_TRUE(in.leases[0].run.has_value());
  EXPECT_EQ(*in.leases[0].run, start);
  RunRecord abandoned = start;  // the run's own token, under the new term's guard
  abandoned.outcome = RunOutcome::kAbandoned;
  abandoned.ended_ms = start.started_ms + 5000;
  expect_run_reply(r.b(1).write_run(r.s(1), name, taken.token, abandoned), Outcome::kOk,
                   RunRefusal::kNone, abandoned);
}

// The record is per name: it survives the lease's release and its holder's
// expiry.
TEST_P(Conformance, RunRecord_TheRecordSurvivesTheReleaseAndTheExpiry) {
  const std::string name = lease("run.survive");
  RUNS_START(r, name);
  const RunRecord first = run_record(kPeriod, r.token(), RunOutcome::kOk);
  ASSERT_EQ(r.write(run_record(kPeriod, r.token())).outcome, Outcome::kOk);
  ASSERT_EQ(r.write(first).outcome, Outcome::kOk);
  ASSERT_EQ(r.b(0).release(r.s(0), name, r.token()), Outcome::kOk);
  simba::InspectReply in = r.b(1).inspect({name});
  ASSERT_EQ(in.outcome, Outcome::kOk) << in.error;
  ASSERT_EQ(in.leases.size(), 1u);
  EXPECT_EQ(in.leases[0].holder, "");
  ASSERT_TRUE(in.leases[0].run.has_value());
  EXPECT_EQ(*in.leases[0].run, first);
  // A short-lived holder starts the next period and expires mid-run.
  // etcd: leases of whole seconds (ADR 0045), ended up to 500 ms late.
  const bool etcd = GetParam().label == std::string("etcd");
  const std::string short_lived = r.b(1).open(std::chrono::milliseconds(etcd ? 1000 : 300));
  ASSERT_FALSE(short_lived.empty());
  const AcquireReply held = r.b(1).acquire(short_lived, name);
  ASSERT_EQ(held.outcome, Outcome::kOk) << held.error;
  ASSERT_TRUE(held.run.has_value());
  EXPECT_EQ(*held.run, first);
  const RunRecord second = run_record(kPeriod + 60000, held.token);
  ASSERT_EQ(r.b(1).write_run(short_lived, name, held.token, second).outcome, Outcome::kOk);
  r.b(1).run_for(etcd ? 2500 : 900);  // no keep-alive: the session ends
  const AcquireReply next = r.b(1).acquire(r.s(1), name);
  ASSERT_EQ(next.outcome, Outcome::kOk) << next.error;
  EXPECT_GT(next.token, held.token);
  ASSERT_TRUE(next.run.has_value());
  EXPECT_EQ(*next.run, second);
}

INSTANTIATE_TEST_SUITE_P(Backends, Conformance, ::testing::ValuesIn(ConformanceBackends()),
                         backend_test_name);

}  // namespace
