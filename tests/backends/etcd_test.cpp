// The etcd backend's own rules (ADR 0045), beyond the conformance suite: its
// URL, the message codec, and on a real etcd (SIMBA_TEST_ETCD_URL) the lease
// mapping: the TTL rule, the remaining time, the leases a keep-alive lists;
// and permits (ADR 0046): their keys and values, the entries a keep-alive
// lists, racing acquires, the cost of a cycle; candidates (ADR 0047): the
// handoff Txn's guards and the cost of a handover; run records (ADR 0048):
// their values, the key no lease holds, forged tokens, racing starts, the
// cost of a run.
#ifdef SIMBA_WITH_ETCD
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/etcd/etcd_backend.h"
#include "backend/etcd/etcd_messages.h"
#include "backend/etcd/etcd_url.h"
#include "backends/backend_on_loop.h"
#include "backends/simba_testing.h"

namespace {

using namespace simba;
using namespace simba_testing;

TEST(EtcdUrl, DefaultsAndParts) {
  EtcdUrl u;
  std::string err;
  ASSERT_TRUE(parse_etcd_url("etcd://127.0.0.1", &u, &err)) << err;
  ASSERT_EQ(u.endpoints.size(), 1u);
  EXPECT_EQ(u.endpoints[0].host, "127.0.0.1");
  EXPECT_EQ(u.endpoints[0].port, 2379);
  EXPECT_EQ(u.prefix, "/simba");
  EtcdUrl v;
  ASSERT_TRUE(parse_etcd_url("etcd://[::1]:23790,e2,e3:2380/apps/simba-1", &v, &err)) << err;
  ASSERT_EQ(v.endpoints.size(), 3u);
  EXPECT_EQ(v.endpoints[0].host, "::1");
  EXPECT_EQ(v.endpoints[0].port, 23790);
  EXPECT_EQ(v.endpoints[1].host, "e2");
  EXPECT_EQ(v.endpoints[1].port, 2379);
  EXPECT_EQ(v.endpoints[2].port, 2380);
  EXPECT_EQ(v.prefix, "/apps/simba-1");
  EtcdUrl w;
  ASSERT_TRUE(parse_etcd_url("etcd://etcd.example:2379/", &w, &err)) << err;
  EXPECT_EQ(w.prefix, "/simba");
  EXPECT_FALSE(w.tls);
  EXPECT_TRUE(w.user.empty());
  // etcds:// with user:password@ (%-escaped) and the TLS files.
  EtcdUrl t;
  ASSERT_TRUE(
      parse_etcd_url("etcds://root:p%40ss@h1,h2:2380/x?tls_ca=/c%20a.pem&tls_cert=/c.pem"
                     "&tls_key=/k.pem&tls_key_password=kp&tls_server_name=etcd.example",
                     &t, &err))
      << err;
  EXPECT_TRUE(t.tls);
  EXPECT_EQ(t.user, "root");
  EXPECT_EQ(t.password, "p@ss");
  ASSERT_EQ(t.endpoints.size(), 2u);
  EXPECT_EQ(t.prefix, "/x");
  EXPECT_EQ(t.tls_ca, "/c a.pem");
  EXPECT_EQ(t.tls_cert, "/c.pem");
  EXPECT_EQ(t.tls_key, "/k.pem");
  EXPECT_EQ(t.tls_key_password, "kp");
  EXPECT_EQ(t.tls_server_name, "etcd.example");
  // Auth without TLS is allowed (the password then crosses in the clear).
  EtcdUrl a;
  ASSERT_TRUE(parse_etcd_url("etcd://alice:hunter2@h", &a, &err)) << err;
  EXPECT_EQ(a.user, "alice");
  EXPECT_FALSE(a.tls);
}

TEST(EtcdUrl, BadUrlsAreInvalidAndNeverShowThePassword) {
  for (const char* bad : {"etcd://",
                          "etcd://:2379",
                          "etcd://h:",
                          "etcd://h:0",
                          "etcd://h:65536",
                          "etcd://[::1",
                          "etcd://h/a/",
                          "etcd://h/a//b",
                          "etcd://h/a b",
                          "etcd://h1:2379,",
                          "etcd://,h2",
                          "etcd://h?prefix=x",
                          "etcd://alice@hunter2@h:2379",
                          "etcd://hunter2@h",
                          "etcd://alice:@h",
                          "etcd://:hunter2@h",
                          "etcd://h?tls_ca=/ca.pem",
                          "etcds://h?tls_ca=",
                          "etcds://h?tls_cert=/c.pem",
                          "etcds://h?tls_server_name=a/b",
                          "etcds://h?sslmode=verify-full",

                          "etcd://alice:hunter2@h:0"}) {
    EtcdUrl u;
    std::string err;
    EXPECT_FALSE(parse_etcd_url(bad, &u, &err)) << bad;
    EXPECT_FALSE(err.empty()) << bad;
    EXPECT_EQ(err.find("hunter2"), std::string::npos) << err;
    BackendError why = BackendError::kNone;
    BackendContext ctx;
    std::string error;
    EXPECT_EQ(make_backend(ctx, bad, &why, &error), nullptr) << bad;
    EXPECT_EQ(why, BackendError::kInvalid) << bad << ": " << error;
  }
}

TEST(EtcdMessages, KeysSessionIdsAndUndecodableAnswers) {
  using namespace simba::etcd_impl;
  const EtcdKeys k("/p");
  EXPECT_EQ(k.lease("a.b"), "/p/l/a.b");
  EXPECT_EQ(k.token("a.b"), "/p/t/a.b");
  EXPECT_EQ(k.session("00000000000000ff"), "/p/s/00000000000000ff");
  EXPECT_EQ(prefix_end("/p/l/"), "/p/l0");
  EXPECT_EQ(session_id(0x694d7a1b2c3d4e5f), "694d7a1b2c3d4e5f");
  int64_t lease = 0;
  EXPECT_TRUE(parse_session_id("694d7a1b2c3d4e5f", &lease));
  EXPECT_EQ(lease, 0x694d7a1b2c3d4e5f);
  EXPECT_FALSE(parse_session_id("694D7A1B2C3D4E5F", &lease));
  EXPECT_FALSE(parse_session_id("0000000000000000", &lease));
  EXPECT_FALSE(parse_session_id("abc", &lease));
  // A truncated message is refused, not half read.
  const std::string txn = acquire_request(k, "n", "00000000000000ff", 255);
  TxnAnswer t;
  EXPECT_FALSE(decode_txn(reinterpret_cast<const uint8_t*>(txn.data()), txn.size() - 3, &t));
  const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff};
  int64_t ttl = 0;
  EXPECT_FALSE(decode_keep_alive(junk, sizeof junk, &ttl));
  WatchAnswer w;
  EXPECT_FALSE(decode_watch(junk, sizeof junk, &w));
  std::vector<RangeAnswer> snapshot;
  EXPECT_FALSE(decode_snapshot(junk, sizeof junk, &snapshot));
}

// Permit entries and counters (ADR 0046): keys sort by permit id, values
// read back, anything else is refused.
TEST(EtcdMessages, PermitKeysAndValues) {
  using namespace simba::etcd_impl;
  const EtcdKeys k("/p");
  EXPECT_EQ(k.permit("rw/a", 42), "/p/p/rw/a/00000000000000000042");
  EXPECT_EQ(k.counter("sem/a"), "/p/pn/sem/a");
  EXPECT_LT(k.permit("sem/a", 9), k.permit("sem/a", 10));
  std::string r;
  uint64_t permit = 0;
  ASSERT_TRUE(k.parse_permit(k.permit("sem/a.b", 18446744073709551615u), &r, &permit));
  EXPECT_EQ(r, "sem/a.b");
  EXPECT_EQ(permit, 18446744073709551615u);
  for (const char* bad : {"/p/l/a", "/p/p/sem/a/42", "/p/p/00000000000000000042",
                          "/p/p/sem/a/0000000000000000004x", "/p/p/sem/a/99999999999999999999"}) {
    EXPECT_FALSE(k.parse_permit(bad, &r, &permit)) << bad;
  }
  PermitKind kind = PermitKind::kLease;
  std::string sid;
  uint64_t token = 0;
  ASSERT_TRUE(parse_permit_value(permit_value(PermitKind::kIntent, "00000000000000ff", 0), &kind,
                                 &sid, &token));
  EXPECT_EQ(kind, PermitKind::kIntent);
  EXPECT_EQ(sid, "00000000000000ff");
  EXPECT_EQ(token, 0u);
  for (const char* bad :
       {"", "read", "read s", "lease s 1", "read s 1 2", "read  1", "read s -1"}) {
    EXPECT_FALSE(parse_permit_value(bad, &kind, &sid, &token)) << bad;
  }
  PermitCounter c{7, 5, 3}, back;
  ASSERT_TRUE(parse_counter_value(counter_value(c), &back));
  EXPECT_EQ(back.seq, 7u);
  EXPECT_EQ(back.epoch, 5u);
  EXPECT_EQ(back.size, 3u);
  EXPECT_FALSE(parse_counter_value("1 2 4294967296", &back));
  EXPECT_FALSE(parse_counter_value("1 2", &back));
}

// Run records (ADR 0048): the value reads back as written, and its first
// 20 bytes sort as the period ids do (the Txn's value compare relies on it).
TEST(EtcdMessages, RunValuesSortByPeriod) {
  using namespace simba::etcd_impl;
  EXPECT_EQ(EtcdKeys("/p").run("job"), "/p/run/job");
  const int64_t ids[] = {INT64_MIN, -86400000, -1, 0, 1, 1764547200000, INT64_MAX};
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; ++i) {
    EXPECT_EQ(run_period_key(ids[i]).size(), 20u) << ids[i];
    if (i > 0) {
      EXPECT_LT(run_period_key(ids[i - 1]), run_period_key(ids[i])) << ids[i];
    }
    RunRecord r{ids[i], -5, 0, 18446744073709551615u, RunOutcome::kAbandoned}, back;
    ASSERT_TRUE(parse_run_value(run_value(r), &back)) << run_value(r);
    EXPECT_EQ(back, r) << run_value(r);
    // What the end's compares bracket: "{id}" < value < "{id}!".
    EXPECT_GT(run_value(r), run_period_key(ids[i]));
    EXPECT_LT(run_value(r), run_period_key(ids[i]) + "!");
  }
  RunRecord r;
  ASSERT_TRUE(parse_run_value("00000000000000000042 7 9 3 ok", &r));
  EXPECT_EQ(r, (RunRecord{42, 7, 9, 3, RunOutcome::kOk}));
  for (const char* bad :
       {"", "42 7 9 3 ok", "00000000000000000042 7 9 3 done", "00000000000000000042 7 9 3",
        "00000000000000000042 07 9 3 ok", "00000000000000000042 -0 9 3 ok",
        "0000000000000000004x 7 9 3 ok", "09223372036854775808 7 9 3 ok",
        "-9223372036854775808 7 9 3 ok", "00000000000000000042 7 9 -3 ok"}) {
    EXPECT_FALSE(parse_run_value(bad, &r)) << bad;
  }
}

// --- on a real etcd ----------------------------------------------------------

// Candidate keys and values (ADR 0047): a key names its lease and session,
// a value keeps a client name with spaces; anything else is refused.
TEST(EtcdMessages, CandidateKeysAndValues) {
  using namespace simba::etcd_impl;
  const EtcdKeys k("/p");
  EXPECT_EQ(k.candidate("a.b", "00000000000000ff"), "/p/c/a.b/00000000000000ff");
  std::string name, sid;
  ASSERT_TRUE(k.parse_candidate(k.candidate("a.b", "00000000000000ff"), &name, &sid));
  EXPECT_EQ(name, "a.b");
  EXPECT_EQ(sid, "00000000000000ff");
  for (const char* bad : {"/p/l/a", "/p/c/a", "/p/c/00000000000000ff", "/p/c/a/b/00000000000000ff",
                          "/p/c/a/00000000000000FF", "/p/c/a/0000000000000000"}) {
    EXPECT_FALSE(k.parse_candidate(bad, &name, &sid)) << bad;
  }
  CandidateValue v;
  ASSERT_TRUE(parse_candidate_value(candidate_value({"00000000000000ff", "node 1", -3}), &v));
  EXPECT_EQ(v.sid, "00000000000000ff");
  EXPECT_EQ(v.client, "node 1");
  EXPECT_EQ(v.priority, -3);
  ASSERT_TRUE(parse_candidate_value("s 0 ", &v));
  EXPECT_EQ(v.client, "");
  for (const char* bad : {"", "s", "s 1", " 1 c", "s x c", "s 1x c", "s 2147483648 c"}) {
    EXPECT_FALSE(parse_candidate_value(bad, &v)) << bad;
  }
}

struct Parties;  // candidates' tests (below)

class EtcdServer : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* url = std::getenv("SIMBA_TEST_ETCD_URL");
    if (!url || !*url) GTEST_SKIP() << "SIMBA_TEST_ETCD_URL is not set (scripts/test.sh sets it)";
    prefix_ = "/etcd-test-" + unique_id();
    url_ = std::string(url) + prefix_;
  }

  OpenReply open(BackendOnLoop& b, int64_t lease_ms) {
    OpenReply out;
    bool done = false;
    b->open_session(ms(lease_ms), ms(5000), [&](const OpenReply& r) {
      out = r;
      done = true;
    });
    EXPECT_TRUE(b.run_until([&] { return done; }, 5000));
    return out;
  }
  KeepAliveReply keep_alive(BackendOnLoop& b, const std::string& sid, int64_t lease_ms) {
    KeepAliveReply out;
    bool done = false;
    b->keep_alive(sid, ms(lease_ms), ms(5000), [&](const KeepAliveReply& r) {
      out = r;
      done = true;
    });
    EXPECT_TRUE(b.run_until([&] { return done; }, 5000));
    return out;
  }
  // Keep-alives until one lists `n` entries (within 5 s); the last one.
  KeepAliveReply keep_alive_listing(BackendOnLoop& b, const std::string& sid, int64_t lease_ms,
                                    size_t n) {
    KeepAliveReply k;
    b.run_until(
        [&] {
          k = keep_alive(b, sid, lease_ms);
          return k.owned.size() == n;
        },
        5000);
    return k;
  }
  AcquireReply acquire(BackendOnLoop& b, const std::string& sid, const std::string& name) {
    AcquireReply out;
    bool done = false;
    b->acquire(sid, name, ms(5000), [&](const AcquireReply& r) {
      out = r;
      done = true;
    });
    EXPECT_TRUE(b.run_until([&] { return done; }, 5000));
    return out;
  }
  // The reply to the call `start(cb)` makes on `b`, waited for up to 5 s.
  template <typename Reply, typename Start>
  Reply reply_to(BackendOnLoop& b, Start start) {
    Reply out;
    bool done = false;
    start([&](const Reply& r) {
      out = r;
      done = true;
    });
    EXPECT_TRUE(b.run_until([&] { return done; }, 5000));
    return out;
  }
  AcquireReply acquire_permit(BackendOnLoop& b, const std::string& sid, const std::string& name,
                              const PermitAsk& ask) {
    return reply_to<AcquireReply>(
        b, [&](Backend::AcquireCb cb) { b->acquire_permit(sid, name, ask, ms(5000), cb); });
  }
  Outcome release_permit(BackendOnLoop& b, const std::string& sid, const std::string& name,
                         PermitKind kind, uint64_t permit, uint64_t token) {
    Outcome out = Outcome::kTimeout;
    b->release_permit(sid, name, kind, permit, token, ms(5000),
                      [&](const DoneReply& r) { out = r.outcome; });
    EXPECT_TRUE(b.run_until([&] { return out != Outcome::kTimeout; }, 5000));
    return out;
  }
  // `name` with a candidate ask of `client` and `priority` (leaving an entry).
  AcquireReply wait_candidate(BackendOnLoop& b, const std::string& sid, const std::string& name,
                              const std::string& client, int32_t priority = 0) {
    CandidateAsk ask;
    ask.leave = true;
    ask.client = client;
    ask.priority = priority;
    return reply_to<AcquireReply>(
        b, [&](Backend::AcquireCb cb) { b->acquire_candidate(sid, name, ask, ms(5000), cb); });
  }
  ReleaseReply release_handoff(BackendOnLoop& b, const std::string& sid, const std::string& name,
                               uint64_t token, const std::string& target = {}) {
    return reply_to<ReleaseReply>(b, [&](Backend::ReleaseCb cb) {
      b->release_handoff(sid, name, token, target, ms(5000), cb);
    });
  }
  RunReply write_run(BackendOnLoop& b, const std::string& sid, const std::string& name,
                     uint64_t token, const RunRecord& record) {
    return reply_to<RunReply>(
        b, [&](Backend::RunCb cb) { b->write_run(sid, name, token, record, ms(5000), cb); });
  }
  // `p`'s sessions, its holder holding `name`; false on a failure.
  bool start_parties(Parties& p, const std::string& name);
  // etcdctl's output (stdout) on the test's server.
  std::string etcdctl_output(const std::string& args) {
    std::string endpoint = std::getenv("SIMBA_TEST_ETCD_URL");
    endpoint = "http://" + endpoint.substr(std::string("etcd://").size());
    const std::string cmd = "etcdctl --endpoints " + endpoint + " " + args + " 2>/dev/null";
    std::string out;
    if (FILE* f = popen(cmd.c_str(), "r")) {
      char buf[512];
      size_t n = 0;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
      pclose(f);
    }
    return out;
  }
  // etcdctl on the test's server, e.g. {"del", key}.
  int etcdctl(const std::string& args) {
    std::string endpoint = std::getenv("SIMBA_TEST_ETCD_URL");
    endpoint = "http://" + endpoint.substr(std::string("etcd://").size());
    const std::string cmd = "etcdctl --endpoints " + endpoint + " " + args + " >/dev/null 2>&1";
    return std::system(cmd.c_str());
  }

  std::string url_, prefix_;
};

// etcd leases are whole seconds: the TTL is the lease rounded up (the server
// never ends a session before the client's deadline), the remaining time
// reported never exceeds the lease asked for, and a lease under 500 ms is
// refused with the rule's name.
TEST_F(EtcdServer, LeaseDurationMapsToWholeSecondsAndShortLeasesAreRefused) {
  BackendOnLoop b(url_);
  ASSERT_TRUE(b) << b.error();
  const OpenReply refused = open(b, 400);
  EXPECT_EQ(refused.outcome, Outcome::kError);
  EXPECT_NE(refused.error.find("rule lease-duration >= 500 ms"), std::string::npos)
      << refused.error;
  const OpenReply r = open(b, 1500);
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error;
  EXPECT_EQ(r.remaining, ms(1500));
  EXPECT_EQ(r.session_id.size(), 16u);
  const KeepAliveReply k = keep_alive(b, r.session_id, 1500);
  ASSERT_EQ(k.outcome, Outcome::kOk) << k.error;
  EXPECT_EQ(k.remaining, ms(1500));
  EXPECT_TRUE(k.owned.empty());
}

// The keep-alive lists the leases still attached to the session's etcd lease:
// one deleted behind its back (an operator's etcdctl del) is no longer
// listed, and one whose acquire answer never came is listed with its token
// (read from etcd; the core frees it).
TEST_F(EtcdServer, KeepAliveListsTheLeasesTheSessionStillHolds) {
  BackendOnLoop b(url_);
  ASSERT_TRUE(b) << b.error();
  const OpenReply r = open(b, 2000);
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error;
  const AcquireReply a = acquire(b, r.session_id, "kept");
  ASSERT_EQ(a.outcome, Outcome::kOk) << a.error;
  const AcquireReply d = acquire(b, r.session_id, "deleted");
  ASSERT_EQ(d.outcome, Outcome::kOk) << d.error;
  EXPECT_GT(d.token, a.token);
  // A lease key of the session whose acquire answer never came (as if lost):
  // put with the session's lease behind the backend's back.
  ASSERT_EQ(etcdctl("put --lease=" + r.session_id + " " + prefix_ + "/l/unseen " + r.session_id),
            0);
  ASSERT_EQ(etcdctl("del " + prefix_ + "/l/deleted"), 0);
  const KeepAliveReply k = keep_alive_listing(b, r.session_id, 2000, 2);
  ASSERT_EQ(k.owned.size(), 2u) << "leases listed";
  EXPECT_EQ(k.outcome, Outcome::kOk);
  bool kept = false, unseen = false;
  for (const OwnedLease& l : k.owned) {
    if (l.name == "kept") kept = l.token == a.token;
    if (l.name == "unseen") unseen = l.token > d.token;
    EXPECT_NE(l.name, "deleted");
  }
  EXPECT_TRUE(kept);
  EXPECT_TRUE(unseen);
}

// Several endpoints: a call whose connection could not be made moves on to
// the next member at once (it was never sent), and the next connection goes
// there too.
TEST_F(EtcdServer, AnEndpointThatFailsIsLeftForTheNext) {
  const std::string live = std::getenv("SIMBA_TEST_ETCD_URL");
  const std::string url =
      "etcd://127.0.0.1:1," + live.substr(std::string("etcd://").size()) + prefix_;
  BackendOnLoop b(url);
  ASSERT_TRUE(b) << b.error();
  const OpenReply r = open(b, 2000);
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error;
  EXPECT_TRUE(b.logged("connection to 127.0.0.1:1 lost: connect: connection refused"));
  EXPECT_EQ(acquire(b, r.session_id, "n").outcome, Outcome::kOk);
  // Through the client: it retries the open and becomes live.
  Client c;
  ASSERT_EQ(c.open(url, Timing{2000, 400}), SIMBA_OK) << simba_last_error();
  EXPECT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
}

// A session whose etcd lease is gone (revoked by close, or by an operator)
// answers Expired, and an acquire with it never takes a free name.
TEST_F(EtcdServer, ARevokedSessionIsExpired) {
  BackendOnLoop b(url_);
  ASSERT_TRUE(b) << b.error();
  const OpenReply r = open(b, 2000);
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error;
  bool closed = false;
  b->close_session(r.session_id, ms(5000), [&](const DoneReply& d) {
    EXPECT_EQ(d.outcome, Outcome::kOk) << d.error;
    closed = true;
  });
  ASSERT_TRUE(b.run_until([&] { return closed; }, 5000));
  EXPECT_EQ(keep_alive(b, r.session_id, 2000).outcome, Outcome::kExpired);
  EXPECT_EQ(acquire(b, r.session_id, "free").outcome, Outcome::kExpired);
}

// Stream ids run out (here after stream 15, instead of 2^31-1): a new
// connection takes the new calls while the old one drains, with no call
// failing, many times over, and the session, its terms and its watches go on.
TEST_F(EtcdServer, UsedUpStreamIdsMoveTheCallsToANewConnection) {
  ASSERT_EQ(setenv("SIMBA_TEST_ETCD_MAX_STREAM_ID", "15", 1), 0);
  BackendOnLoop b(url_);
  unsetenv("SIMBA_TEST_ETCD_MAX_STREAM_ID");
  ASSERT_TRUE(b) << b.error();
  int released = 0;
  b->on_released([&](const std::string&, const Grant&) { ++released; });
  const OpenReply r = open(b, 3000);
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error;
  const AcquireReply kept = acquire(b, r.session_id, "kept");
  ASSERT_EQ(kept.outcome, Outcome::kOk) << kept.error;
  b->watch("watched");
  int failures = 0, calls = 0;
  for (int i = 0; i < 120; ++i) {
    // Three calls in flight at once, then a keep-alive.
    int pending = 3;
    for (int j = 0; j < 3; ++j) {
      const std::string name = "n" + std::to_string(j);
      b->acquire(r.session_id, name, ms(5000), [&, name](const AcquireReply& a) {
        ++calls;
        if (a.outcome != Outcome::kOk) {
          ++failures;
          ADD_FAILURE() << "acquire " << name << ": " << a.error;
          --pending;
          return;
        }
        b->release(r.session_id, name, a.token, ms(5000), [&, name](const DoneReply& d) {
          ++calls;
          if (d.outcome != Outcome::kOk) {
            ++failures;
            ADD_FAILURE() << "release " << name << ": " << d.error;
          }
          --pending;
        });
      });
    }
    ASSERT_TRUE(b.run_until([&] { return pending == 0; }, 10000));
    if (i % 10 == 0) {
      const KeepAliveReply k = keep_alive(b, r.session_id, 3000);
      ++calls;
      ASSERT_EQ(k.outcome, Outcome::kOk) << k.error;
      ASSERT_EQ(k.owned.size(), 1u);
      EXPECT_EQ(k.owned[0].name, "kept");
      EXPECT_EQ(k.owned[0].token, kept.token);
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_TRUE(b.logged("closed: drained (stream ids used up)"));
  EXPECT_FALSE(b.logged("lost")) << "a connection broke";
  // The watch, made again on each new connection, still delivers: a
  // release of the watched name by another session.
  const int before = released;
  const OpenReply other = open(b, 3000);
  const AcquireReply w = acquire(b, other.session_id, "watched");
  ASSERT_EQ(w.outcome, Outcome::kOk) << w.error;
  bool done = false;
  b->release(other.session_id, "watched", w.token, ms(5000),
             [&](const DoneReply&) { done = true; });
  ASSERT_TRUE(b.run_until([&] { return done && released > before; }, 5000));
  std::printf("%d calls over connections of 8 streams each\n", calls);
}

PermitAsk semaphore(uint32_t size) {
  PermitAsk a;
  a.kind = PermitKind::kSemaphore;
  a.size = size;
  return a;
}

// A permit entry of the session whose acquire answer never came (put behind
// the backend's back) is listed by the keep-alive with its kind, id and token,
// read from etcd, so the core can free it; one deleted behind its back is not.
TEST_F(EtcdServer, KeepAliveListsThePermitEntriesTheSessionStillHolds) {
  BackendOnLoop b(url_);
  ASSERT_TRUE(b) << b.error();
  const OpenReply r = open(b, 2000);
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error;
  const AcquireReply kept = acquire_permit(b, r.session_id, "s", semaphore(3));
  const AcquireReply gone = acquire_permit(b, r.session_id, "s", semaphore(3));
  ASSERT_EQ(kept.outcome, Outcome::kOk) << kept.error;
  ASSERT_EQ(gone.outcome, Outcome::kOk) << gone.error;
  ASSERT_EQ(etcdctl("put --lease=" + r.session_id + " " + prefix_ +
                    "/p/rw/w/00000000000000000007 'write " + r.session_id + " 7'"),
            0);
  ASSERT_EQ(etcdctl("del " + etcd_impl::EtcdKeys(prefix_).permit("sem/s", gone.permit)), 0);
  KeepAliveReply k = keep_alive_listing(b, r.session_id, 2000, 2);
  ASSERT_EQ(k.owned.size(), 2u) << "entries listed";
  EXPECT_NE(std::find(k.owned.begin(), k.owned.end(),
                      OwnedLease{"s", kept.token, PermitKind::kSemaphore, kept.permit}),
            k.owned.end());
  EXPECT_NE(std::find(k.owned.begin(), k.owned.end(), OwnedLease{"w", 7, PermitKind::kWrite, 7}),
            k.owned.end());
  // And it is released as the core would, with what was listed.
  EXPECT_EQ(release_permit(b, r.session_id, "w", PermitKind::kWrite, 7, 7), Outcome::kOk);
  k = keep_alive(b, r.session_id, 2000);
  EXPECT_EQ(k.owned.size(), 1u);
}

// inspect reads the four key directories at one revision: a name is never
// reported free with the token of the acquire that holds it (separate Ranges
// could see a won acquire's token key without its lease key, and an observer
// then saw the name free with that token, then held).
TEST_F(EtcdServer, InspectReadsOneRevision) {
  BackendOnLoop b(url_);
  ASSERT_TRUE(b) << b.error();
  const OpenReply r = open(b, 3000);
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error;
  int read = 0, held_seen = 0;
  for (int cycle = 0; cycle < 40; ++cycle) {
    std::vector<InspectReply> replies;
    AcquireReply won;
    bool acquired = false;
    auto ask = [&] {
      b->inspect({"snap"}, ms(5000), [&](const InspectReply& i) { replies.push_back(i); });
    };
    ask();
    ask();
    b->acquire(r.session_id, "snap", ms(5000), [&](const AcquireReply& a) {
      won = a;
      acquired = true;
    });
    ask();
    ask();
    ASSERT_TRUE(b.run_until([&] { return acquired && replies.size() == 4; }, 10000));
    ASSERT_EQ(won.outcome, Outcome::kOk) << won.error;
    for (const InspectReply& i : replies) {
      ASSERT_EQ(i.outcome, Outcome::kOk) << i.error;
      for (const LeaseInfo& l : i.leases) {
        if (l.name != "snap" || l.token != won.token) continue;
        ++read;
        EXPECT_EQ(l.holder, r.session_id) << "cycle " << cycle << ": free with the held token";
        held_seen += l.holder == r.session_id;
      }
    }
    Outcome released = Outcome::kTimeout;
    b->release(r.session_id, "snap", won.token, ms(5000),
               [&](const DoneReply& d) { released = d.outcome; });
    ASSERT_TRUE(b.run_until([&] { return released != Outcome::kTimeout; }, 5000));
    ASSERT_EQ(released, Outcome::kOk);
  }
  EXPECT_GT(held_seen, 0);
  std::printf("%d reads saw the acquire's token, all with its holder\n", read);
}

// Two clients acquiring at once from views of the resource that the other's
// grants made stale: the counter's guard makes the loser read again, and
// the semaphore never has more holders than its size.
TEST_F(EtcdServer, RacingClientsNeverGrantMoreThanTheSize) {
  BackendOnLoop a(url_), b(url_);
  ASSERT_TRUE(a && b);
  const std::string sa = open(a, 3000).session_id, sb = open(b, 3000).session_id;
  ASSERT_FALSE(sa.empty() || sb.empty());
  int granted = 0, held = 0, other = 0;
  for (int round = 0; round < 5; ++round) {
    int pending = 0;
    std::vector<std::pair<bool, AcquireReply>> won;
    for (int i = 0; i < 6; ++i) {
      BackendOnLoop& on = i % 2 ? b : a;
      ++pending;
      on->acquire_permit(i % 2 ? sb : sa, "race", semaphore(3), ms(5000),
                         [&, i](const AcquireReply& r) {
                           --pending;
                           if (r.outcome == Outcome::kOk) {
                             won.push_back({i % 2 == 1, r});
                           } else if (r.outcome == Outcome::kHeld) {
                             ++held;
                           } else {
                             ++other;
                           }
                         });
    }
    ASSERT_TRUE(a.run_until(
        [&] {
          b.run_for(1);
          return pending == 0;
        },
        10000));
    EXPECT_LE(won.size(), 3u);
    granted += static_cast<int>(won.size());
    for (const auto& [on_b, r] : won) {
      EXPECT_EQ(release_permit(on_b ? b : a, on_b ? sb : sa, "race", PermitKind::kSemaphore,
                               r.permit, r.token),
                Outcome::kOk);
    }
  }
  EXPECT_EQ(other, 0);
  EXPECT_GT(granted, 0);
  std::printf("%d granted, %d held in 5 rounds of 6 racing acquires of 3 permits\n", granted, held);
}

// One permit cycle (acquire + release of a semaphore permit) against a lease
// cycle (the same two Txns of a lock) and one Txn: p50 of 1000 each. One
// client cycling on a name decides from what it saw last: one round trip per
// call.
TEST_F(EtcdServer, APermitCycleIsTwoRoundTrips) {
  BackendOnLoop b(url_);
  ASSERT_TRUE(b) << b.error();
  const OpenReply r = open(b, 5000);
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error;
  const int n = 1000;
  auto p50 = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  auto us_since = [](std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> txn, lease, permit;
  for (int i = 0; i < n; ++i) {
    if (i % 100 == 0) {
      ASSERT_EQ(keep_alive(b, r.session_id, 5000).outcome, Outcome::kOk);
    }
    auto t0 = std::chrono::steady_clock::now();
    const AcquireReply l = acquire(b, r.session_id, "cycle");
    txn.push_back(us_since(t0));
    ASSERT_EQ(l.outcome, Outcome::kOk) << l.error;
    bool done = false;
    b->release(r.session_id, "cycle", l.token, ms(5000), [&](const DoneReply&) { done = true; });
    ASSERT_TRUE(b.run_until([&] { return done; }, 5000));
    lease.push_back(us_since(t0));
    t0 = std::chrono::steady_clock::now();
    const AcquireReply p = acquire_permit(b, r.session_id, "cycle", semaphore(1));
    ASSERT_EQ(p.outcome, Outcome::kOk) << p.error;
    ASSERT_EQ(release_permit(b, r.session_id, "cycle", PermitKind::kSemaphore, p.permit, p.token),
              Outcome::kOk);
    permit.push_back(us_since(t0));
  }
  std::printf("p50 over %d: one Txn %.0f us, lease cycle %.0f us, permit cycle %.0f us\n", n,
              p50(txn), p50(lease), p50(permit));
}

// --- run records (ADR 0048) -----------------------------------------------------

// The run key is attached to no etcd lease (it outlives the holder's
// session), a forged token or another live session is refused as not the
// holder with the record as stored, and a gone session is Expired.
TEST_F(EtcdServer, ARunRecordHasNoLeaseAndAForgedTokenIsRefused) {
  BackendOnLoop b(url_);
  ASSERT_TRUE(b) << b.error();
  const OpenReply r = open(b, 3000), other = open(b, 3000);
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error;
  ASSERT_EQ(other.outcome, Outcome::kOk) << other.error;
  const AcquireReply won = acquire(b, r.session_id, "job");
  ASSERT_EQ(won.outcome, Outcome::kOk) << won.error;
  EXPECT_FALSE(won.run.has_value());
  const RunRecord start{1000, 5, 0, won.token, RunOutcome::kRunning};
  RunReply w = write_run(b, r.session_id, "job", won.token, start);
  ASSERT_EQ(w.outcome, Outcome::kOk) << w.error;
  const std::string fields = etcdctl_output("get " + prefix_ + "/run/job -w fields");
  EXPECT_NE(fields.find("\"Lease\" : 0\n"), std::string::npos) << fields;
  for (auto [sid, token] :
       {std::pair{r.session_id, won.token + 1}, std::pair{r.session_id, won.token - 1},
        std::pair{other.session_id, won.token}}) {
    RunRecord forged = start;
    forged.period_id = 2000;
    w = write_run(b, sid, "job", token, forged);
    EXPECT_EQ(w.outcome, Outcome::kRefused) << w.error;
    EXPECT_EQ(w.refused, RunRefusal::kNotHolder);
    EXPECT_EQ(w.stored, start);
  }
  bool closed = false;
  b->close_session(r.session_id, ms(5000), [&](const DoneReply&) { closed = true; });
  ASSERT_TRUE(b.run_until([&] { return closed; }, 5000));
  w = write_run(b, r.session_id, "job", won.token,
                RunRecord{1000, 5, 6, won.token, RunOutcome::kOk});
  EXPECT_EQ(w.outcome, Outcome::kExpired) << w.error;
  // The record outlived its writer's session: the next term reads it.
  const AcquireReply next = acquire(b, other.session_id, "job");
  ASSERT_EQ(next.outcome, Outcome::kOk) << next.error;
  EXPECT_EQ(next.run, start);
}

// Two clients start the same period at once under one term (the same
// session and token: only the period rule tells them apart): exactly one is
// applied, and the other is refused with the winner's record.
TEST_F(EtcdServer, RacingStartsOfOnePeriodApplyOnce) {
  BackendOnLoop a(url_), b(url_);
  ASSERT_TRUE(a && b);
  const OpenReply r = open(a, 5000);
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error;
  const AcquireReply won = acquire(a, r.session_id, "race-run");
  ASSERT_EQ(won.outcome, Outcome::kOk) << won.error;
  int applied = 0, period_refused = 0;
  for (int round = 0; round < 20; ++round) {
    const int64_t period = 60000 * (round + 1);
    std::vector<std::pair<RunRecord, RunReply>> replies;
    for (int i = 0; i < 2; ++i) {
      const RunRecord rec{period, 100 + i, 0, won.token, RunOutcome::kRunning};
      (i ? b : a)->write_run(r.session_id, "race-run", won.token, rec, ms(5000),
                             [&replies, rec](const RunReply& w) {
                               replies.push_back({rec, w});
                             });
    }
    ASSERT_TRUE(a.run_until(
        [&] {
          b.run_for(1);
          return replies.size() == 2;
        },
        10000));
    int ok = 0;
    for (const auto& [rec, w] : replies) {
      if (w.outcome == Outcome::kOk) {
        ++ok;
        for (const auto& [rec2, w2] : replies) {
          if (w2.outcome == Outcome::kRefused) {
            EXPECT_EQ(w2.stored, rec);
          }
        }
      } else {
        EXPECT_EQ(w.outcome, Outcome::kRefused) << w.error;
        EXPECT_EQ(w.refused, RunRefusal::kPeriod);
        ++period_refused;
      }
    }
    EXPECT_EQ(ok, 1) << "round " << round;
    applied += ok;
  }
  EXPECT_EQ(applied, 20);
  EXPECT_EQ(period_refused, 20);
}

// A run's two writes (start, end) against a lock cycle on a name with a
// record (its acquire reads it) and on one without: p50 of 300 each, one
// Txn per write.
TEST_F(EtcdServer, ARunIsTwoRoundTrips) {
  BackendOnLoop b(url_);
  ASSERT_TRUE(b) << b.error();
  const OpenReply r = open(b, 5000);
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error;
  const int n = 300;
  auto p50 = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  auto us_since = [](std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> lock, plain, run;
  for (int i = 0; i < n; ++i) {
    if (i % 100 == 0) {
      ASSERT_EQ(keep_alive(b, r.session_id, 5000).outcome, Outcome::kOk);
    }
    auto t0 = std::chrono::steady_clock::now();
    const AcquireReply l = acquire(b, r.session_id, "cron");
    const double acquired = us_since(t0);
    ASSERT_EQ(l.outcome, Outcome::kOk) << l.error;
    ASSERT_EQ(l.run.has_value(), i > 0);
    t0 = std::chrono::steady_clock::now();
    RunRecord rec{60000 * (i + 1), i, 0, l.token, RunOutcome::kRunning};
    ASSERT_EQ(write_run(b, r.session_id, "cron", l.token, rec).outcome, Outcome::kOk);
    rec.outcome = RunOutcome::kOk;
    rec.ended_ms = i + 1;
    ASSERT_EQ(write_run(b, r.session_id, "cron", l.token, rec).outcome, Outcome::kOk);
    run.push_back(us_since(t0));
    t0 = std::chrono::steady_clock::now();
    bool done = false;
    b->release(r.session_id, "cron", l.token, ms(5000), [&](const DoneReply&) { done = true; });
    ASSERT_TRUE(b.run_until([&] { return done; }, 5000));
    lock.push_back(acquired + us_since(t0));
    t0 = std::chrono::steady_clock::now();  // the same cycle on a name without a record
    const AcquireReply p = acquire(b, r.session_id, "plain");
    ASSERT_EQ(p.outcome, Outcome::kOk) << p.error;
    done = false;
    b->release(r.session_id, "plain", p.token, ms(5000), [&](const DoneReply&) { done = true; });
    ASSERT_TRUE(b.run_until([&] { return done; }, 5000));
    plain.push_back(us_since(t0));
  }
  std::printf(
      "p50 over %d: run (start + end) %.0f us, lock cycle with a record %.0f us, without %.0f us\n",
      n, p50(run), p50(lock), p50(plain));
}

// --- candidates (ADR 0047) -----------------------------------------------------

// Three sessions on Backends of their own (start_parties: the first holds a name).
struct Parties {
  explicit Parties(const std::string& url) : h(url), a(url), b(url) {}
  BackendOnLoop h, a, b;
  std::string sh, sa, sb;
  uint64_t token = 0;  // h's
};

// Runs `fn` once, between the next release's read of the candidates and its
// handoff Txn (etcd_backend.h); cleared at the end of the scope.
class BeforeHandoff {
 public:
  explicit BeforeHandoff(std::function<void()> fn) {
    etcd_impl::test_before_handoff = [this, fn = std::move(fn)](const std::string&) {
      if (ran_++ == 0) fn();
    };
  }
  ~BeforeHandoff() { etcd_impl::test_before_handoff = nullptr; }
  int ran() const { return ran_; }

 private:
  int ran_ = 0;
};

bool EtcdServer::start_parties(Parties& p, const std::string& name) {
  if (!p.h || !p.a || !p.b) return false;
  p.sh = open(p.h, 3000).session_id;
  p.sa = open(p.a, 3000).session_id;
  p.sb = open(p.b, 3000).session_id;
  if (p.sh.empty() || p.sa.empty() || p.sb.empty()) return false;
  const AcquireReply held = acquire(p.h, p.sh, name);
  p.token = held.token;
  return held.outcome == Outcome::kOk;
}

// A higher-priority candidate that arrives after the release read the
// candidates: the handoff Txn's guard (no candidate key written after the
// read) fails, the release reads again and hands the lease to the newcomer.
TEST_F(EtcdServer, AHandoffSeesACandidateThatCameAfterItsRead) {
  Parties p(url_);
  ASSERT_TRUE(start_parties(p, "came"));
  ASSERT_EQ(wait_candidate(p.a, p.sa, "came", "a", 0).outcome, Outcome::kHeld);
  AcquireReply late;
  BeforeHandoff hook([&] { late = wait_candidate(p.b, p.sb, "came", "b", 9); });
  const ReleaseReply r = release_handoff(p.h, p.sh, "came", p.token);
  EXPECT_EQ(hook.ran(), 2) << "the first handoff Txn should have lost its guard";
  EXPECT_EQ(late.outcome, Outcome::kHeld);
  ASSERT_EQ(r.outcome, Outcome::kOk) << r.error;
  EXPECT_EQ(r.grant.session, p.sb) << "the newcomer of priority 9 was missed";
  EXPECT_GT(r.grant.token, p.token);
  const KeepAliveReply kb = keep_alive(p.b, p.sb, 3000);
  EXPECT_NE(std::find(kb.owned.begin(), kb.owned.end(), OwnedLease{"came", r.grant.token}),
            kb.owned.end());
}

// The chosen candidate withdraws after the read: the guard on its key's
// create_revision fails, and the lease goes to the one still waiting.
TEST_F(EtcdServer, AHandoffSkipsACandidateThatLeftAfterItsRead) {
  Parties p(url_);
  ASSERT_TRUE(start_parties(p, "left"));
  const AcquireReply ea = wait_candidate(p.a, p.sa, "left", "a", 9);
  ASSERT_EQ(ea.outcome, Outcome::kHeld);
  ASSERT_EQ(wait_candidate(p.b, p.sb, "left", "b", 0).outcome, Outcome::kHeld);
  Outcome withdrawn = Outcome::kTimeout;
  BeforeHandoff hook(
      [&] { withdrawn = release_permit(p.a, p.sa, "left", PermitKind::kCandidate, ea.permit, 0); });
  const ReleaseReply r = release_handoff(p.h, p.sh, "left", p.token);
  EXPECT_EQ(withdrawn, Outcome::kOk);
  EXPECT_EQ(hook.ran(), 2);
  EXPECT_EQ(r.grant.session, p.sb) << "handed to a candidate that had left";
  EXPECT_TRUE(keep_alive(p.a, p.sa, 3000).owned.empty());
}

// The target's session ends (its etcd lease revoked, as an expiry does)
// after the read: its key went with its lease, the guard fails, and the
// release chooses as without a target and says so.
TEST_F(EtcdServer, AHandoffSkipsATargetWhoseLeaseEndedAfterItsRead) {
  Parties p(url_);
  ASSERT_TRUE(start_parties(p, "gone"));
  ASSERT_EQ(wait_candidate(p.a, p.sa, "gone", "target", 0).outcome, Outcome::kHeld);
  ASSERT_EQ(wait_candidate(p.b, p.sb, "gone", "b", 0).outcome, Outcome::kHeld);
  int revoked = -1;
  BeforeHandoff hook([&] { revoked = etcdctl("lease revoke " + p.sa); });
  const ReleaseReply r = release_handoff(p.h, p.sh, "gone", p.token, "target");
  EXPECT_EQ(revoked, 0);
  EXPECT_EQ(hook.ran(), 2);
  EXPECT_EQ(r.grant.session, p.sb) << "handed to a session that had ended";
  EXPECT_TRUE(r.target_absent);
  EXPECT_EQ(keep_alive(p.a, p.sa, 3000).outcome, Outcome::kExpired);
}

// A handover to one queued candidate, from the release sent to the grant
// seen by the candidate's watch (a PUT of the lease key), against one idle
// Txn (an acquire of a free name): p50 of 300 each, in the same run. Two
// sessions take turns, each waiting as the other's candidate, so every
// release finds one.
TEST_F(EtcdServer, AHandoverIsARangeATxnAndTheWatchEvent) {
  BackendOnLoop b(url_);
  ASSERT_TRUE(b) << b.error();
  const std::string s[2] = {open(b, 5000).session_id, open(b, 5000).session_id};
  ASSERT_FALSE(s[0].empty() || s[1].empty());
  std::vector<Grant> heard;
  b->on_released([&](const std::string& name, const Grant& g) {
    if (name == "handover") heard.push_back(g);
  });
  b->watch("handover");
  b.run_for(200);
  auto p50 = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  auto us_since = [](std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  };
  const AcquireReply first = acquire(b, s[0], "handover");
  ASSERT_EQ(first.outcome, Outcome::kOk) << first.error;
  uint64_t token = first.token;
  const int n = 300;
  std::vector<double> txn, reply, handover;
  for (int i = 0; i < n; ++i) {
    if (i % 50 == 0) {
      ASSERT_EQ(keep_alive(b, s[0], 5000).outcome, Outcome::kOk);
      ASSERT_EQ(keep_alive(b, s[1], 5000).outcome, Outcome::kOk);
    }
    const std::string &holder = s[i % 2], &waiter = s[(i + 1) % 2];
    auto t0 = std::chrono::steady_clock::now();
    const AcquireReply idle = acquire(b, holder, "idle");
    txn.push_back(us_since(t0));
    ASSERT_EQ(idle.outcome, Outcome::kOk) << idle.error;
    bool freed = false;
    b->release(holder, "idle", idle.token, ms(5000), [&](const DoneReply&) { freed = true; });
    ASSERT_TRUE(b.run_until([&] { return freed; }, 5000));
    ASSERT_EQ(wait_candidate(b, waiter, "handover", "c").outcome, Outcome::kHeld);
    b.run_for(1);
    heard.clear();
    t0 = std::chrono::steady_clock::now();
    ReleaseReply r;
    bool released = false;
    b->release_handoff(holder, "handover", token, {}, ms(5000), [&](const ReleaseReply& x) {
      r = x;
      released = true;
      reply.push_back(us_since(t0));
    });
    ASSERT_TRUE(b.run_until(
        [&] { return released && std::find(heard.begin(), heard.end(), r.grant) != heard.end(); },
        5000));
    handover.push_back(us_since(t0));
    ASSERT_EQ(r.grant.session, waiter);
    ASSERT_GT(r.grant.token, token);
    token = r.grant.token;
  }
  b->unwatch("handover");
  const double t = p50(txn), h = p50(handover);
  std::printf(
      "p50 over %d: one idle Txn %.0f us, handover release reply %.0f us, release to the "
      "candidate's grant seen %.0f us (%.2f x the Txn)\n",
      n, t, p50(reply), h, h / t);
  EXPECT_LT(h, 6 * t) << "a handover should cost about a Range and a Txn";
}

}  // namespace

#endif  // SIMBA_WITH_ETCD
