// redis:// specifics: URL parsing and password redaction, a server that is not
// there at open, a server that stops answering (SIGSTOP) past the lease, a
// session deleted behind the client's back, and a lease taken over by hand.
//
// The URL tests need no server. The others use SIMBA_TEST_REDIS_URL (skipped
// when unset) or a redis-server of their own on a free port (the SIGSTOP and
// unreachable tests: stopping the shared server would disturb other tests).
// Redis is poked with a plain hiredis synchronous connection.
#ifdef SIMBA_WITH_REDIS

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/redis/redis_keys.h"
#include "backend/redis/redis_url.h"
#include "backend/redis/uv_hiredis.h"
#include "backends/backend_on_loop.h"
#include "backends/redis_servers.h"
#include "backends/simba_testing.h"
#include "backends/watching_backend.h"
#include "simba.h"

namespace {

using namespace simba_testing;
using redis_servers::have_redis_server;
using redis_servers::OwnServer;
using redis_servers::Sync;

// --- helpers -----------------------------------------------------------------

// Host and port of a redis://host:port URL (the test servers' simple form).
bool host_port(const std::string& url, std::string* host, int* port) {
  simba::RedisUrl u;
  std::string err;
  if (!simba::parse_redis_url(url, &u, &err)) return false;
  *host = u.host;
  *port = u.port;
  return true;
}

std::string shared_url() {
  const char* u = std::getenv("SIMBA_TEST_REDIS_URL");
  return u && *u ? u : "";
}

// A connection to the server of SIMBA_TEST_REDIS_URL; null when it is not set.
std::unique_ptr<Sync> shared_sync() {
  std::string host;
  int port = 0;
  if (!host_port(shared_url(), &host, &port)) return nullptr;
  return std::make_unique<Sync>(host, port);
}

// A counter of INFO, e.g. info_int(s, "stats", "total_connections_received");
// -1 when absent.
int64_t info_int(Sync& s, const std::string& section, const std::string& field) {
  const std::string info = s.cmd({"INFO", section});
  const size_t at = info.find(field + ":");
  if (at == std::string::npos) return -1;
  return std::strtoll(info.c_str() + at + field.size() + 1, nullptr, 10);
}

// --- the adapter ------------------------------------------------------------------

// A hiredis async context on a Unix socket whose server end the test closes
// right after the connect: its next write fails with EPIPE, as the TLS pump's
// socketpair does when TLS fails (where hiredis' write(2) killed `simba` with
// SIGPIPE: tls_redis, 1 CI run in a few).
class GonePeer {
 public:
  // `connect_first`: the loop handles the connect before the server end
  // closes; without, the first write also completes the connect (hiredis's
  // own write path, with SIGPIPE blocked).
  explicit GonePeer(bool connect_first = true) {
    uv_loop_init(&loop_);
    std::snprintf(addr_.sun_path, sizeof addr_.sun_path, "/tmp/simba-gone-peer-%d.sock",
                  static_cast<int>(getpid()));
    addr_.sun_family = AF_UNIX;
    unlink(addr_.sun_path);
    listener_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bind(listener_, reinterpret_cast<sockaddr*>(&addr_), sizeof addr_);
    listen(listener_, 1);
    ac_ = redisAsyncConnectUnix(addr_.sun_path);
    adapter_ = ac_ && !ac_->err ? simba::uv_hiredis_attach(&loop_, ac_) : nullptr;
    if (!adapter_) return;
    adapter_->on_closed = [this] { closed_ = true; };
    ac_->data = this;
    redisAsyncSetConnectCallback(ac_, [](const redisAsyncContext* c, int status) {
      static_cast<GonePeer*>(c->data)->connected_ = status == REDIS_OK;
    });
    redisAsyncSetDisconnectCallback(ac_, [](const redisAsyncContext* c, int status) {
      static_cast<GonePeer*>(c->data)->disconnect_status_ = status;
    });
    for (int i = 0; i < 100 && connect_first && !connected_; ++i) uv_run(&loop_, UV_RUN_NOWAIT);
    const int server_end = accept(listener_, nullptr, nullptr);
    if (server_end >= 0) close(server_end);
  }
  ~GonePeer() {
    if (!closed_ && adapter_ && adapter_->ac) redisAsyncFree(ac_);
    for (int i = 0; i < 100 && adapter_ && !closed_; ++i) uv_run(&loop_, UV_RUN_NOWAIT);
    uv_loop_close(&loop_);
    close(listener_);
    unlink(addr_.sun_path);
  }
  bool ready() const { return adapter_ != nullptr && connected_; }
  bool attached() const { return adapter_ != nullptr; }
  // Queues a PING and writes it through the adapter; true when hiredis saw
  // the write fail and dropped the connection.
  bool write_fails() {
    redisAsyncCommand(ac_, nullptr, nullptr, "PING");
    simba::uv_hiredis_write(ac_);
    return disconnect_status_ == REDIS_ERR;
  }

 private:
  uv_loop_t loop_;
  sockaddr_un addr_ = {};
  int listener_ = -1;
  redisAsyncContext* ac_ = nullptr;
  simba::UvHiredis* adapter_ = nullptr;
  bool connected_ = false;
  bool closed_ = false;
  int disconnect_status_ = REDIS_OK;
};

bool sigpipe_pending() {
  sigset_t pending;
  sigpending(&pending);
  return sigismember(&pending, SIGPIPE) == 1;
}

TEST(RedisAdapter, AWriteToAGonePeerRaisesNoSigpipe) {
  // The default disposition: a SIGPIPE that escaped would end this process.
  struct sigaction dfl = {}, old = {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &dfl, &old);
  {
    GonePeer peer;
    ASSERT_TRUE(peer.ready());
    EXPECT_TRUE(peer.write_fails());
    EXPECT_FALSE(sigpipe_pending());
  }
  sigaction(SIGPIPE, &old, nullptr);
}

// The write that completes the connect is hiredis's own write(2), with the
// signal blocked on this thread and the SIGPIPE it raised taken back.
TEST(RedisAdapter, AWriteThatCompletesTheConnectRaisesNoSigpipe) {
  struct sigaction dfl = {}, old = {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &dfl, &old);
  {
    GonePeer peer(/*connect_first=*/false);
    ASSERT_TRUE(peer.attached());
    EXPECT_TRUE(peer.write_fails());
    EXPECT_FALSE(sigpipe_pending());
  }
  sigaction(SIGPIPE, &old, nullptr);
}

TEST(RedisAdapter, ASigpipePendingBeforeTheWriteStaysPending) {
  sigset_t pipe_only, old_mask;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old_mask);
  raise(SIGPIPE);  // the host's own, blocked and pending on this thread
  for (const bool connect_first : {true, false}) {
    GonePeer peer(connect_first);
    ASSERT_TRUE(peer.attached());
    EXPECT_TRUE(peer.write_fails());
    EXPECT_TRUE(sigpipe_pending());
  }
  const struct timespec now = {0, 0};
  EXPECT_EQ(sigtimedwait(&pipe_only, nullptr, &now), SIGPIPE);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
}

// --- URL parsing ---------------------------------------------------------------

TEST(RedisUrl, Defaults) {
  simba::RedisUrl u;
  std::string err;
  ASSERT_TRUE(simba::parse_redis_url("redis://localhost", &u, &err)) << err;
  EXPECT_EQ(u.host, "localhost");
  EXPECT_EQ(u.port, 6379);
  EXPECT_EQ(u.db, 0);
  EXPECT_EQ(u.prefix, "simba");
  EXPECT_FALSE(u.has_password);
}

TEST(RedisUrl, EveryPart) {
  simba::RedisUrl u;
  std::string err;
  ASSERT_TRUE(
      simba::parse_redis_url("redis://al%40ice:p%3Ass@10.0.0.1:7000/3?prefix=app.x", &u, &err))
      << err;
  EXPECT_EQ(u.user, "al@ice");
  EXPECT_EQ(u.password, "p:ss");
  EXPECT_TRUE(u.has_password);
  EXPECT_EQ(u.host, "10.0.0.1");
  EXPECT_EQ(u.port, 7000);
  EXPECT_EQ(u.db, 3);
  EXPECT_EQ(u.prefix, "app.x");

  ASSERT_TRUE(simba::parse_redis_url("redis://:secret@[::1]:6380/", &u, &err)) << err;
  EXPECT_EQ(u.user, "");
  EXPECT_EQ(u.password, "secret");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 6380);
  EXPECT_EQ(u.db, 0);

  ASSERT_TRUE(simba::parse_redis_url("redis://h:1/0?", &u, &err)) << err;
  EXPECT_EQ(u.port, 1);
}

TEST(RedisUrl, BadUrlsAreInvalidAndNeverShowThePassword) {
  const char* bad[] = {
      "redis://",           // no host
      "redis://:hunter2@",  // no host
      "redis://h:0",        // port out of range
      "redis://h:65536",
      "redis://h:",  // empty port
      "redis://h:12ab",
      "redis://h/x",  // db not a number
      "redis://h/-1",
      "redis://h?prefix=",     // empty prefix
      "redis://h?prefix=a*b",  // glob character in the prefix
      "redis://h?timeout=5",   // unknown parameter
      "redis://u:hunter2@h:99999",
      "redis://u:hunter2@h/db",
      "redis://u:hunter2@[::1",  // unterminated IPv6
      "redis://hunter2@h",       // userinfo without a colon
      "redis://u:hunt@er2@h",    // '@' unescaped in the password
      "redis://u:hunter2%zz@h",  // bad escape
      "redis://u:@h",            // empty password
      "redis://h h",
  };
  for (const char* url : bad) {
    simba::RedisUrl u;
    std::string err;
    EXPECT_FALSE(simba::parse_redis_url(url, &u, &err)) << url;
    EXPECT_FALSE(err.empty()) << url;
    EXPECT_EQ(err.find("hunter2"), std::string::npos) << url << " -> " << err;
    EXPECT_EQ(err.find("er2"), std::string::npos) << url << " -> " << err;

    // The same through the public API: EINVAL, and no password in the detail.
    simba_client_t* c = nullptr;
    EXPECT_EQ(simba_client_open(&c, url, nullptr), SIMBA_EINVAL) << url;
    EXPECT_EQ(c, nullptr);
    EXPECT_EQ(std::string(simba_last_error()).find("hunter2"), std::string::npos)
        << url << " -> " << simba_last_error();
  }
}

// rediss:// (TLS, ADR 0019): the URL's TLS options parse, belong to rediss://
// only, and a TLS file that cannot be used is refused at open (SIMBA_EINVAL)
// with a message that names it and never shows a password.
TEST(RedisUrl, RedissTlsOptions) {
  simba::RedisUrl u;
  std::string err;
  ASSERT_TRUE(simba::parse_redis_url(
      "rediss://u:hunter2@db.example:6380/1?tls_ca=%2Fetc%2Fca.pem&tls_cert=/c.pem&tls_key=/k.pem"
      "&tls_key_password=s3cr%26t&tls_server_name=redis.example&prefix=app",
      &u, &err))
      << err;
  EXPECT_TRUE(u.tls);
  EXPECT_EQ(u.host, "db.example");
  EXPECT_EQ(u.port, 6380);
  EXPECT_EQ(u.tls_ca, "/etc/ca.pem");
  EXPECT_EQ(u.tls_cert, "/c.pem");
  EXPECT_EQ(u.tls_key, "/k.pem");
  EXPECT_EQ(u.tls_key_password, "s3cr&t");
  EXPECT_EQ(u.tls_server_name, "redis.example");
  EXPECT_EQ(u.prefix, "app");
  for (const char* bad :
       {"redis://h?tls_ca=/ca.pem", "rediss://h?tls_cert=/c.pem",
        "rediss://h?tls_ca=", "rediss://h?tls_server_name=a/b", "rediss://h?tls_verify=no"}) {
    EXPECT_FALSE(simba::parse_redis_url(bad, &u, &err)) << bad;
  }
  EXPECT_EQ(simba::redact_url("rediss://u:hunter2@h?tls_key=/k&tls_key_password=pp"),
            "rediss://u:***@h?tls_key=/k&tls_key_password=***");
#ifdef SIMBA_WITH_REDIS_TLS
  simba_client_t* c = nullptr;
  EXPECT_EQ(simba_client_open(&c,
                              "rediss://u:hunter2@127.0.0.1:6379?tls_ca=/nonexistent.pem"
                              "&tls_key_password=hunter3",
                              nullptr),
            SIMBA_EINVAL);
  const std::string why = simba_last_error();
  EXPECT_NE(why.find("tls_ca=/nonexistent.pem"), std::string::npos) << why;
  EXPECT_EQ(why.find("hunter2"), std::string::npos) << why;
  EXPECT_EQ(why.find("hunter3"), std::string::npos) << why;
#endif
}

// Redaction regressions found by tests/fuzz/ (fuzz_*_url): a password is hidden
// however the parser that reads the URL splits it.
TEST(RedisUrl, RedactionFuzzRegressions) {
  // '/' in a Redis password (the parser takes the last '@' before the query).
  EXPECT_EQ(simba::redact_url("redis://:pass/word1234@host:6379/0"), "redis://:***@host:6379/0");
  // '?' in a password: refused, but the URL quoted in the error hides it.
  EXPECT_EQ(simba::redact_url("redis://u:pa?ss1234@host"), "redis://u:***@host");
  // libpq reads its userinfo to the first '@' before any '/', '?' included.
  EXPECT_EQ(simba::redact_url("postgresql://u:pa?ss=1234word@host/db"),
            "postgresql://u:***@host/db");
  // sslpassword (the client key's passphrase) and any *password parameter.
  EXPECT_EQ(simba::redact_url("postgresql://h/db?sslpassword=k3y&x=1"),
            "postgresql://h/db?sslpassword=***&x=1");
  // A parameter after a second '?' (libpq's query starts after the path).
  EXPECT_EQ(simba::redact_url("postgresql://u?x=a@h/db?password=pw1"),
            "postgresql://u?x=a@h/db?password=***");
  // auth=digest: without a second ':' is all password.
  EXPECT_EQ(simba::redact_url("zookeeper://h?auth=digest:p@wzookee"),
            "zookeeper://h?auth=digest:***");
  // What stays of an auth value is plain words only.
  EXPECT_EQ(simba::redact_url("zookeeper://h/c?auth=digest:al?ice:pw"),
            "zookeeper://h/c?auth=digest:***");
}

// The snapshot shows the URL with the password hidden (nothing listens on the
// port: only what is shown is checked).
TEST(RedisUrl, SnapshotRedactsThePassword) {
  const int port = free_port();
  ASSERT_GT(port, 0);
  Client c;
  ASSERT_EQ(c.open("redis://u:hunter2@127.0.0.1:" + std::to_string(port), Timing{1000, 200}),
            SIMBA_OK)
      << simba_last_error();
  const std::string snap = snapshot(c);
  EXPECT_EQ(snap.find("hunter2"), std::string::npos) << snap;
  EXPECT_NE(snap.find("***"), std::string::npos) << snap;
}

// --- servers ---------------------------------------------------------------------

// Nothing listens at open: the client stays OPENING/SUSPENDED without crashing,
// and becomes LIVE once a server appears on the port.
TEST(Redis, UnreachableAtOpenThenRecovers) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
  const int port = free_port();
  ASSERT_GT(port, 0);
  Client c;
  ASSERT_EQ(c.open("redis://127.0.0.1:" + std::to_string(port), Timing{1000, 200}), SIMBA_OK)
      << simba_last_error();
  sleep_ms(500);  // several failed attempts (not an assertion of timing)
  const simba_session_status_t st = simba_client_status(c);
  EXPECT_TRUE(st == SIMBA_SESSION_OPENING || st == SIMBA_SESSION_SUSPENDED) << st;
  EXPECT_EQ(simba_client_wait_live(c, 100), SIMBA_ETIMEDOUT);

  OwnServer server(port);
  ASSERT_TRUE(server.start()) << "cannot start redis-server on " << port;
  ASSERT_EQ(simba_client_wait_live(c, 10'000 * slow_factor()), SIMBA_OK) << simba_last_error();
  EXPECT_EQ(simba_client_status(c), SIMBA_SESSION_LIVE);
}

// The scripts name keys with the Lua functions of redis_keys.h, made from the
// same parts as RedisKeys: both give the same names (a space in the prefix and
// a colon in the lease name included), run by the real server's Lua.
TEST(Redis, ScriptsAndCodeNameTheSameKeys) {
  const std::unique_ptr<Sync> s = shared_sync();
  if (!s) GTEST_SKIP() << "SIMBA_TEST_REDIS_URL not set";
  ASSERT_TRUE(s->ok());
  const simba::RedisKeys keys("my app");
  const std::string lua =
      simba::redis_lua_keys() +
      "return {session_key(ARGV[1], ARGV[2]), session_key(ARGV[1], ARGV[2]) .. LEASES_SUFFIX, "
      "lease_key(ARGV[1], ARGV[3]), released_channel(ARGV[1], ARGV[3]), "
      "permits_key(ARGV[1], ARGV[4]), permits_key(ARGV[1], ARGV[5])}";
  const std::string sem = simba::permit_resource(simba::PermitKind::kSemaphore, "jobs:nightly");
  const std::string rw = simba::permit_resource(simba::PermitKind::kWrite, "jobs:nightly");
  EXPECT_EQ(s->cmd({"EVAL", lua, "0", "my app", "0af1", "jobs:nightly", sem, rw}),
            keys.session("0af1") + " " + keys.leases("0af1") + " " + keys.lease("jobs:nightly") +
                " " + keys.released("jobs:nightly") + " " + keys.permits(true, "jobs:nightly") +
                " " + keys.permits(false, "jobs:nightly"));
  EXPECT_EQ(keys.permits(true, "jobs:nightly"), "my app:sem:jobs:nightly");
  EXPECT_EQ(keys.permits(false, "jobs:nightly"), "my app:rw:jobs:nightly");
  EXPECT_EQ(keys.lease("jobs:nightly"), "my app:lease:jobs:nightly");
  EXPECT_EQ(keys.leases("0af1"), "my app:session:0af1:leases");
}

// The permits' layout (redis_keys.h) and what only this backend does: a
// session gone from Redis (its key expired; deleted here) leaves its entries
// in the name's hash until the acquire that meets them sweeps them (and
// publishes the resource); a semaphore's size goes with its last holder; a
// released entry stays in the session's set until the next keep-alive.
TEST(Redis, PermitsOfAGoneSessionAreSweptByTheAcquireThatMeetsThem) {
  const std::unique_ptr<Sync> s = shared_sync();
  if (!s) GTEST_SKIP() << "SIMBA_TEST_REDIS_URL not set";
  ASSERT_TRUE(s->ok());
  const std::string prefix = "sweep" + unique_id(), name = "jobs";
  WatchingBackend a(shared_url() + "?prefix=" + prefix), b(shared_url() + "?prefix=" + prefix);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string sa = a.open(), sb = b.open();
  ASSERT_FALSE(sa.empty() || sb.empty());
  simba::PermitAsk sem;
  sem.kind = simba::PermitKind::kSemaphore;
  sem.size = 1;
  simba::PermitAsk write;
  write.kind = simba::PermitKind::kWrite;
  const simba::AcquireReply held = a.acquire_permit(sa, name, sem);
  const simba::AcquireReply w = a.acquire_permit(sa, name, write);
  ASSERT_EQ(held.outcome, simba::Outcome::kOk) << held.error;
  ASSERT_EQ(w.outcome, simba::Outcome::kOk) << w.error;
  const std::string sem_key = prefix + ":sem:" + name, rw_key = prefix + ":rw:" + name;
  const std::string entry = "e:" + std::to_string(held.permit);
  EXPECT_EQ(s->cmd({"HGET", sem_key, entry}), "semaphore " + sa + " " + std::to_string(held.token));
  EXPECT_EQ(s->cmd({"HGET", sem_key, "size"}), "1");
  EXPECT_EQ(s->cmd({"HGET", rw_key, "epoch"}), std::to_string(w.token));
  EXPECT_EQ(s->cmd({"SISMEMBER", prefix + ":session:" + sa + ":leases",
                    "sem/" + name + "/" + std::to_string(held.permit)}),
            "1");
  ASSERT_EQ(b.acquire_permit(sb, name, sem).outcome, simba::Outcome::kHeld);
  const std::string resource = simba::permit_resource(simba::PermitKind::kSemaphore, name);
  b.backend().watch(resource);
  b.run_for(300);
  b.heard.clear();
  ASSERT_EQ(s->cmd({"DEL", prefix + ":session:" + sa}), "1");  // as if it expired
  EXPECT_EQ(s->cmd({"HGET", sem_key, entry}), "semaphore " + sa + " " + std::to_string(held.token))
      << "nothing sweeps before an acquire meets the entry";
  const simba::AcquireReply mine = b.acquire_permit(sb, name, sem);
  ASSERT_EQ(mine.outcome, simba::Outcome::kOk) << mine.error;
  EXPECT_GT(mine.token, w.token);
  EXPECT_EQ(s->cmd({"HEXISTS", sem_key, entry}), "0");
  EXPECT_TRUE(b.run_until([&] { return b.heard_of(resource); }, 3000 * slow_factor()))
      << "the sweep publishes the resource";
  simba::PermitAsk read;
  read.kind = simba::PermitKind::kRead;
  const simba::AcquireReply r = b.acquire_permit(sb, name, read);
  ASSERT_EQ(r.outcome, simba::Outcome::kOk) << "the gone writer was swept";
  EXPECT_EQ(r.token, w.token);
  EXPECT_EQ(a.keep_alive(sa).outcome, simba::Outcome::kExpired);
  // The last holder's release drops the size; the set keeps the entry until
  // the keep-alive, which no longer lists it.
  ASSERT_EQ(b.release_permit(sb, name, simba::PermitKind::kSemaphore, mine.permit, mine.token),
            simba::Outcome::kOk);
  EXPECT_EQ(s->cmd({"HEXISTS", sem_key, "size"}), "0");
  const std::string member = "sem/" + name + "/" + std::to_string(mine.permit);
  EXPECT_EQ(s->cmd({"SISMEMBER", prefix + ":session:" + sb + ":leases", member}), "1");
  const simba::KeepAliveReply ka = b.keep_alive(sb);
  ASSERT_EQ(ka.outcome, simba::Outcome::kOk);
  ASSERT_EQ(ka.owned.size(), 1u);
  EXPECT_EQ(ka.owned[0], (simba::OwnedLease{name, r.token, simba::PermitKind::kRead, r.permit}));
  EXPECT_EQ(s->cmd({"SISMEMBER", prefix + ":session:" + sb + ":leases", member}), "0");
  b.backend().unwatch(resource);
}

// The run record's layout (ADR 0048) and what conformance cannot see: it is
// the run_* fields of the lease's hash, which no release or expiry deletes;
// period ids above 2^53 (where Lua's numbers, doubles, would call 2^53 and
// 2^53 + 1 equal) are compared exactly; a session gone from Redis while the
// hash still names it writes nothing (kExpired), and the next holder's
// acquire answers the record; a record made unreadable by hand neither fails
// a grant nor lets a period start twice.
TEST(Redis, TheRunRecordIsInTheLeaseHashAndComparedExactly) {
  const std::unique_ptr<Sync> s = shared_sync();
  if (!s) GTEST_SKIP() << "SIMBA_TEST_REDIS_URL not set";
  ASSERT_TRUE(s->ok());
  const std::string prefix = "runs" + unique_id(), name = "nightly";
  const std::string key = prefix + ":lease:" + name;
  WatchingBackend a(shared_url() + "?prefix=" + prefix), b(shared_url() + "?prefix=" + prefix);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string sa = a.open(), sb = b.open();
  ASSERT_FALSE(sa.empty() || sb.empty());
  const simba::AcquireReply held = a.acquire(sa, name);
  ASSERT_EQ(held.outcome, simba::Outcome::kOk) << held.error;
  EXPECT_FALSE(held.run.has_value());
  simba::RunRecord first;
  first.period_id = int64_t{1} << 53;
  first.started_ms = 1777629600007;
  first.token = held.token;
  simba::RunReply w = a.write_run(sa, name, held.token, first);
  ASSERT_EQ(w.outcome, simba::Outcome::kOk) << w.error;
  EXPECT_EQ(s->cmd({"HMGET", key, "run_p", "run_s", "run_e", "run_t", "run_o"}),
            "9007199254740992 1777629600007 0 " + std::to_string(held.token) + " running");
  simba::RunRecord next = first;
  next.period_id = first.period_id + 1;
  w = a.write_run(sa, name, held.token, next);
  ASSERT_EQ(w.outcome, simba::Outcome::kOk) << "2^53 + 1 is above 2^53";
  w = a.write_run(sa, name, held.token, first);
  EXPECT_EQ(w.outcome, simba::Outcome::kRefused);
  EXPECT_EQ(w.refused, simba::RunRefusal::kPeriod);
  ASSERT_TRUE(w.stored.has_value());
  EXPECT_EQ(*w.stored, next);
  simba::RunRecord negative = next;  // an end of another period: refused
  negative.period_id = -next.period_id;
  negative.outcome = simba::RunOutcome::kOk;
  EXPECT_EQ(a.write_run(sa, name, held.token, negative).refused, simba::RunRefusal::kPeriod);
  // The session goes (as if its key expired); the hash still names it.
  ASSERT_EQ(s->cmd({"DEL", prefix + ":session:" + sa}), "1");
  EXPECT_EQ(s->cmd({"HGET", key, "session"}), sa);
  simba::RunRecord late = next;
  late.outcome = simba::RunOutcome::kOk;
  late.ended_ms = late.started_ms + 900;
  EXPECT_EQ(a.write_run(sa, name, held.token, late).outcome, simba::Outcome::kExpired);
  EXPECT_EQ(s->cmd({"HGET", key, "run_o"}), "running");
  const simba::AcquireReply taken = b.acquire(sb, name);
  ASSERT_EQ(taken.outcome, simba::Outcome::kOk) << taken.error;
  EXPECT_GT(taken.token, held.token);
  ASSERT_TRUE(taken.run.has_value());
  EXPECT_EQ(*taken.run, next);
  // A release keeps the record: only the holder leaves the hash.
  ASSERT_EQ(b.release(sb, name, taken.token), simba::Outcome::kOk);
  EXPECT_EQ(s->cmd({"HEXISTS", key, "session"}), "0");
  EXPECT_EQ(s->cmd({"HGET", key, "run_p"}), "9007199254740993");
  // A record edited by hand into something unreadable: the grant still
  // counts (without it), and the script still guards the stored period id.
  ASSERT_EQ(s->cmd({"HSET", key, "run_o", "bogus"}), "0");
  const simba::AcquireReply again = b.acquire(sb, name);
  ASSERT_EQ(again.outcome, simba::Outcome::kOk) << again.error;
  EXPECT_FALSE(again.run.has_value());
  w = b.write_run(sb, name, again.token, next);
  EXPECT_EQ(w.outcome, simba::Outcome::kRefused) << w.error;
  EXPECT_EQ(w.refused, simba::RunRefusal::kPeriod);
  EXPECT_FALSE(w.stored.has_value());
  simba::RunRecord after = next;
  after.period_id = next.period_id + 1;
  after.token = again.token;
  w = b.write_run(sb, name, again.token, after);
  ASSERT_EQ(w.outcome, simba::Outcome::kOk) << w.error;
  EXPECT_EQ(*w.stored, after);
  EXPECT_EQ(b.inspect({name}).leases.at(0).run, std::optional<simba::RunRecord>(after));
}

// AUTH (password only, and user + password), SELECT and the key prefix, on a
// server that requires a password; a wrong password never goes live and is
// never shown.
TEST(Redis, AuthSelectAndPrefix) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
  const int port = free_port();
  ASSERT_GT(port, 0);
  OwnServer server(port, {"--requirepass", "s3cr%t:pw"});
  ASSERT_TRUE(server.start());
  Sync s("127.0.0.1", port);
  ASSERT_EQ(s.cmd({"AUTH", "s3cr%t:pw"}), "OK");
  ASSERT_EQ(s.cmd({"ACL", "SETUSER", "alice", "on", ">alicepw", "~*", "&*", "+@all"}), "OK");
  const std::string base = "127.0.0.1:" + std::to_string(port);
  {
    Election e;
    Client c;
    ASSERT_EQ(c.open("redis://:s3cr%25t%3Apw@" + base + "/3?prefix=authtest", Timing{1000, 200}),
              SIMBA_OK)
        << simba_last_error();
    ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
    ASSERT_EQ(e.start(c, "n1"), SIMBA_OK);
    ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
    EXPECT_EQ(snapshot(c).find("s3cr"), std::string::npos) << snapshot(c);
    ASSERT_EQ(s.cmd({"SELECT", "3"}), "OK");
    EXPECT_EQ(s.cmd({"HGET", "authtest:lease:n1", "session"}), session_id(c));
    EXPECT_EQ(s.cmd({"EXISTS", "authtest:session:" + session_id(c)}), "1");
    ASSERT_EQ(s.cmd({"SELECT", "0"}), "OK");
    EXPECT_EQ(s.cmd({"EXISTS", "authtest:lease:n1"}), "0");
  }
  {
    Client c;
    ASSERT_EQ(c.open("redis://alice:alicepw@" + base, Timing{1000, 200}), SIMBA_OK);
    ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
    EXPECT_EQ(s.cmd({"EXISTS", "simba:session:" + session_id(c)}), "1");
  }
  {
    LogCapture logs;
    simba_config_t* cfg = nullptr;
    ASSERT_EQ(simba_config_new(&cfg), SIMBA_OK);
    ASSERT_EQ(simba_config_set_logger(cfg, &LogCapture::fn, &logs, SIMBA_LOG_DEBUG), SIMBA_OK);
    simba_client_t* c = nullptr;
    const std::string url = "redis://:wrongpw1@" + base;
    ASSERT_EQ(simba_client_open(&c, url.c_str(), cfg), SIMBA_OK);
    simba_config_free(cfg);
    EXPECT_EQ(simba_client_wait_live(c, 500), SIMBA_ETIMEDOUT);
    EXPECT_TRUE(wait_for([&] { return logs.has("AUTH failed"); }, 3000));
    EXPECT_FALSE(logs.has("wrongpw1"));
    simba_client_close(c);
  }
}

// A host name is resolved (asynchronously) before connecting.
TEST(Redis, HostNameIsResolved) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
  const int port = free_port();
  ASSERT_GT(port, 0);
  OwnServer server(port);
  ASSERT_TRUE(server.start());
  Client c;
  ASSERT_EQ(c.open("redis://localhost:" + std::to_string(port), Timing{1000, 200}), SIMBA_OK)
      << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
}

// A name that does not resolve: never live, no crash, and close() still returns.
TEST(Redis, UnknownHostNeverLiveClosesCleanly) {
  Client c;
  ASSERT_EQ(c.open("redis://no-such-host.invalid:6379", Timing{1000, 200}), SIMBA_OK)
      << simba_last_error();
  EXPECT_EQ(simba_client_wait_live(c, 500), SIMBA_ETIMEDOUT);
  EXPECT_NE(simba_client_status(c), SIMBA_SESSION_LIVE);
  const int64_t t0 = mono_ms();
  c.close();
  // A lookup still running holds the close up (libuv cannot cancel it): bounded by
  // the resolver's own timeouts.
  EXPECT_LT(mono_ms() - t0, 30000);
}

// The server stops answering (SIGSTOP) for longer than the lease: the session
// reads SUSPENDED, the term ends at its local deadline (never later) with
// DEADLINE_PASSED, and nothing leads while the server stays stopped; after SIGCONT the client opens
// a new session and is elected again with a larger token.
TEST(Redis, StoppedServerPastTheLeaseThenNewSession) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
  const int port = free_port();
  ASSERT_GT(port, 0);
  OwnServer server(port);
  ASSERT_TRUE(server.start()) << "cannot start redis-server on " << port;

  Election e;
  Client c;
  ASSERT_EQ(c.open(server.url(), Timing{1000, 200}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  const std::string sid1 = session_id(c);
  ASSERT_EQ(e.start(c, "redis.stop." + unique_id()), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
  const uint64_t tok1 = e.last_elected().token;
  simba_term_t* term = e.last_elected().term;

  // The deadline is at least now + remaining, and at most one local validity
  // (1000 ms × 0.99 − 50 ms) after the stop: no keep-alive sent after it is
  // answered, and a deadline counts from a keep-alive's sending.
  const int64_t ta = mono_ns();
  const int64_t r0 = simba_term_remaining_ms(term);
  ASSERT_GT(r0, 0);
  const int64_t stop_at = mono_ns();
  server.signal(SIGSTOP);
  const int64_t upper = stop_at + 940 * kMsNs;
  bool saw_suspended = false;
  int64_t invalid_at = 0;
  while (invalid_at == 0) {
    const int64_t before = mono_ns();
    saw_suspended = saw_suspended || simba_client_status(c) == SIMBA_SESSION_SUSPENDED;
    if (!simba_term_is_valid(term)) {
      invalid_at = mono_ns();
    } else {
      ASSERT_LE(before, upper + kMsNs) << "the term still read valid past its latest deadline";
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  EXPECT_GE(invalid_at, ta + r0 * kMsNs) << "the term ended before its local deadline";
  EXPECT_TRUE(saw_suspended) << "the session never read SUSPENDED before the deadline";
  ASSERT_TRUE(e.wait_revoked(1, 5000 * slow_factor()));
  const int64_t took_ms = (e.last_revoked().at_ns - stop_at) / kMsNs;
  EXPECT_EQ(e.last_revoked().reason, SIMBA_REVOKE_DEADLINE_PASSED);
  EXPECT_LE(took_ms, 1000 + 500 * slow_factor()) << "revoked " << took_ms << " ms after SIGSTOP";
  EXPECT_NE(simba_client_status(c), SIMBA_SESSION_LIVE);
  sleep_ms(300);  // a little past the lease, still stopped: nothing leads meanwhile
  EXPECT_EQ(e.elected_count(), 1);
  EXPECT_FALSE(simba_term_is_valid(term));
  EXPECT_NE(simba_client_status(c), SIMBA_SESSION_LIVE);

  server.signal(SIGCONT);
  ASSERT_TRUE(e.wait_elected(2, 10'000 * slow_factor())) << snapshot(c);
  EXPECT_EQ(simba_client_status(c), SIMBA_SESSION_LIVE);
  EXPECT_NE(session_id(c), sid1);
  EXPECT_GT(e.last_elected().token, tok1);
  EXPECT_EQ(e.pairing_errors(), 0);
}

// A server that stops answering (SIGSTOP) is still cut at the call timeout,
// although a call's timer reads the socket before judging: nothing waits in it,
// so the call times out, the command connection is dropped (a late answer can
// never be used) and a new one is made once the server answers again.
TEST(Redis, StoppedServerIsCutAtTheCallTimeout) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
  const int port = free_port();
  ASSERT_GT(port, 0);
  OwnServer server(port);
  ASSERT_TRUE(server.start()) << "cannot start redis-server on " << port;
  LoggedClient c(server.url(), Timing{1000, 200});  // calls time out after 200 ms
  ASSERT_NE(static_cast<simba_client_t*>(c), nullptr) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  Sync s("127.0.0.1", port);
  ASSERT_TRUE(s.ok());
  // This one, the command connection and the subscriber's.
  ASSERT_TRUE(wait_for([&] { return info_int(s, "clients", "connected_clients") == 3; },
                       3000 * slow_factor()));
  const int64_t connections = info_int(s, "stats", "total_connections_received");
  const int64_t stop_at = mono_ns();
  server.signal(SIGSTOP);
  ASSERT_TRUE(wait_for([&] { return c.logs.has("no answer within the call's timeout"); },
                       2000 * slow_factor()))
      << c.logs.all();
  const int64_t cut_ms = (mono_ns() - stop_at) / kMsNs;
  // A keep-alive goes out within a renew interval and is cut 200 ms later.
  EXPECT_LE(cut_ms, 400 + 300 * slow_factor()) << "cut " << cut_ms << " ms after SIGSTOP";
  server.signal(SIGCONT);
  EXPECT_TRUE(
      wait_for([&] { return info_int(s, "stats", "total_connections_received") > connections; },
               5000 * slow_factor()))
      << "no new command connection\n"
      << c.logs.all();
  EXPECT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
}

// ADR 0039, the backend alone, as the core drives it: a call to a server that
// stopped answering (SIGSTOP) is not ended by a timer of the backend's own,
// however long its budget passed. Abandoned, as the core abandons a call
// whose timeout passed, it ends with kError on a later loop turn (never
// kTimeout, never inside abandon()), its stuck connection is dropped, and
// once the server answers again the next call on the same session succeeds.
TEST(Redis, AnAbandonedCallDropsItsStuckConnectionAndTheNextCallSucceeds) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
  const int port = free_port();
  ASSERT_GT(port, 0);
  OwnServer server(port);
  ASSERT_TRUE(server.start()) << "cannot start redis-server on " << port;
  BackendOnLoop b(server.url());
  ASSERT_TRUE(b) << b.error();
  const simba::Duration budget = simba::ms(200);

  std::string sid;
  int opened = 0;
  b->open_session(simba::ms(10000), budget, [&](const simba::OpenReply& r) {
    ++opened;
    if (r.outcome == simba::Outcome::kOk) sid = r.session_id;
  });
  ASSERT_TRUE(b.run_until([&] { return opened > 0; }, 5000 * slow_factor()));
  ASSERT_FALSE(sid.empty());

  server.signal(SIGSTOP);
  int answers = 0;
  simba::AcquireReply got;
  const simba::Backend::CallRef call =
      b->acquire(sid, "stuck", budget, [&](const simba::AcquireReply& r) {
        ++answers;
        got = r;
      });
  ASSERT_NE(call, 0u);
  b.run_until([&] { return answers > 0; }, 3 * 200);
  EXPECT_EQ(answers, 0) << "the backend ended a call by a timer of its own";
  b->abandon(call);
  EXPECT_EQ(answers, 0) << "ended inside abandon()";
  ASSERT_TRUE(b.run_until([&] { return answers > 0; }, 1000 * slow_factor()));
  EXPECT_EQ(got.outcome, simba::Outcome::kError) << got.error;
  EXPECT_TRUE(b.logged("no answer within the call's timeout"))
      << "the connection was not dropped as stuck";
  b->abandon(call);  // already ended: nothing happens
  b.run_for(50);
  EXPECT_EQ(answers, 1);

  server.signal(SIGCONT);
  // The first calls may be refused while the backend waits its reconnect
  // backoff; then one goes out on a new connection and wins. (Another name:
  // the server may still run the abandoned acquire it had read, and then
  // holds "stuck" for this very session, which is why the core waits for an
  // abandoned acquire's answer before it sends the next of its name.)
  simba::AcquireReply next;
  const int64_t until = mono_ns() + 5000 * slow_factor() * kMsNs;
  while (next.outcome != simba::Outcome::kOk && mono_ns() < until) {
    int done = 0;
    b->acquire(sid, "after", simba::ms(2000), [&](const simba::AcquireReply& r) {
      ++done;
      next = r;
    });
    ASSERT_TRUE(b.run_until([&] { return done > 0; }, 5000 * slow_factor()));
    if (next.outcome != simba::Outcome::kOk) b.run_for(50);
  }
  EXPECT_EQ(next.outcome, simba::Outcome::kOk) << next.error;
}

// A call that times out drops the connection it went out on, and the other
// calls on it fail with it. They say why: a keep-alive failed that way suspends
// the session with "connection dropped: another call on it got no answer within
// the call's timeout", not "connection lost", which would send an operator
// looking for a network fault. The acquire goes out right after a keep-alive
// answered, so the next keep-alive is usually sent while it waits.
TEST(Redis, CallsFailedByAnotherCallsTimeoutSayWhy) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
  const int port = free_port();
  ASSERT_GT(port, 0);
  OwnServer server(port);
  ASSERT_TRUE(server.start()) << "cannot start redis-server on " << port;
  struct Events {
    std::mutex mu;
    std::vector<std::string> suspended;
    static void fn(void* ud, simba_event_type_t type, const char* detail) {
      auto* self = static_cast<Events*>(ud);
      std::lock_guard<std::mutex> lock(self->mu);
      if (type == SIMBA_EVENT_SESSION_SUSPENDED) self->suspended.emplace_back(detail);
    }
  } events;
  simba_config_t* cfg = nullptr;
  ASSERT_EQ(simba_config_new(&cfg), SIMBA_OK);
  simba_config_set_ms(cfg, "session.lease-duration", 5000);
  simba_config_set_ms(cfg, "session.renew-interval", 1000);  // and the call timeout
  simba_config_set_event_sink(cfg, &Events::fn, &events);
  simba_client_t* c = nullptr;
  ASSERT_EQ(simba_client_open(&c, server.url().c_str(), cfg), SIMBA_OK) << simba_last_error();
  simba_config_free(cfg);
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  const int64_t answered = counter(c, "keep_alives");
  ASSERT_TRUE(wait_for([&] { return counter(c, "keep_alives") > answered; }, 3000, 1));
  server.signal(SIGSTOP);
  ASSERT_EQ(
      simba_lock_acquire_async(
          c, "cut", 10000, [](void*, int, simba_term_t* t) { simba_term_release(t); }, nullptr),
      SIMBA_OK);
  const bool suspended = wait_for(
      [&] {
        std::lock_guard<std::mutex> lock(events.mu);
        return !events.suspended.empty();
      },
      4000 * slow_factor());
  server.signal(SIGCONT);
  ASSERT_TRUE(suspended);
  {
    std::lock_guard<std::mutex> lock(events.mu);
    // In flight when the acquire timed out: "connection dropped: another call on
    // it got no answer within ..."; sent during the reconnect's backoff:
    // "unreachable (no answer within ...)"; timed out itself: "no answer within
    // ...". Each says what happened.
    EXPECT_NE(events.suspended[0].find("no answer within the call's timeout"), std::string::npos)
        << events.suspended[0];
    EXPECT_EQ(events.suspended[0].find("connection lost"), std::string::npos)
        << events.suspended[0];
  }
  simba_client_close(c);
}

// The seed: close() frees every lease of the node at once. Right after a
// call timed out, the backend waits a backoff before it reconnects and
// refuses calls meanwhile: a close made then is sent again once the backoff
// is over (the core retries a close refused at once), so the lease is free
// when simba_client_close returns, not at the session's expiry.
TEST(Redis, ACloseRightAfterACutStillFreesTheLease) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
  const int port = free_port();
  ASSERT_GT(port, 0);
  OwnServer server(port);
  ASSERT_TRUE(server.start()) << "cannot start redis-server on " << port;
  // Calls time out after 1 s: the retried close has the rest of that second,
  // time enough to reconnect under a sanitizer.
  LoggedClient c(server.url(), Timing{5000, 1000});
  ASSERT_NE(static_cast<simba_client_t*>(c), nullptr) << simba_last_error();
  Election e;
  ASSERT_EQ(e.start(c, "job"), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor())) << c.logs.all();
  Sync s("127.0.0.1", port);
  ASSERT_FALSE(s.cmd({"HGET", "simba:lease:job", "session"}).empty());
  server.signal(SIGSTOP);
  ASSERT_TRUE(wait_for([&] { return c.logs.has("no answer within the call's timeout"); },
                       4000 * slow_factor(), 1))
      << c.logs.all();
  server.signal(SIGCONT);
  e.stop(2000);  // as `simba run` does on SIGTERM: its release may be refused too
  c.close();     // within the backend's backoff, most of the time
  EXPECT_EQ(s.cmd({"HGET", "simba:lease:job", "session"}), "") << c.logs.all();
}

// Issue 44 (ADR 0030): a keep-alive gets no answer (the server stopped), so
// its connection is dropped; then the holder stops and closes as `simba run`
// does on SIGTERM while the server still does not answer. The release and
// the close fail; the close is sent again until the session's local
// deadline, so the lease is freed once the server answers again, not when
// the session expires on it.
TEST(Redis, AStopAndCloseAfterATimedOutKeepAliveFreeTheLeaseOnceTheServerAnswers) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
  const int port = free_port();
  ASSERT_GT(port, 0);
  OwnServer server(port);
  ASSERT_TRUE(server.start()) << "cannot start redis-server on " << port;
  // An 8 s lease; calls time out after 1 s.
  LoggedClient c(server.url(), Timing{8000, 1000});
  ASSERT_NE(static_cast<simba_client_t*>(c), nullptr) << simba_last_error();
  Election e;
  ASSERT_EQ(e.start(c, "job"), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor())) << c.logs.all();
  Sync s("127.0.0.1", port);
  ASSERT_FALSE(s.cmd({"HGET", "simba:lease:job", "session"}).empty());
  const int64_t stopped = mono_ms();
  server.signal(SIGSTOP);
  ASSERT_TRUE(wait_for([&] { return simba_client_status(c) == SIMBA_SESSION_SUSPENDED; },
                       4000 * slow_factor(), 1))
      << c.logs.all();
  const StopCloseTimes t =
      stop_and_close_while_stalled(e, c, 3000, [&] { server.signal(SIGCONT); });
  EXPECT_EQ(s.cmd({"HGET", "simba:lease:job", "session"}), "") << c.logs.all();
  EXPECT_GE(t.closed_ms, t.resumed_ms) << "the close gave up while the server did not answer";
  // The session could expire on the server 7 s after the SIGSTOP at the earliest.
  EXPECT_LT(t.closed_ms - stopped, 7000) << c.logs.all();
}

// Issue 44 (ADR 0030): as above, but the holder only stops its election and
// the client stays open, so no close frees the lease: the failed release is
// sent again (the first is refused or times out while the server is
// stopped), and the lease is free once the server answers again, by the
// retry, not by a keep-alive's orphan release nor the session's expiry.
TEST(Redis, AStopAfterATimedOutKeepAliveFreesTheLeaseByItsRetryWithoutAClose) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
  const int port = free_port();
  ASSERT_GT(port, 0);
  OwnServer server(port);
  ASSERT_TRUE(server.start()) << "cannot start redis-server on " << port;
  // A 20 s lease; keep-alives every 2 s, calls time out after 2 s: twenty
  // times the first retry's backoff.
  const Timing timing{20'000, 2000};
  LoggedClient c(server.url(), timing);
  ASSERT_NE(static_cast<simba_client_t*>(c), nullptr) << simba_last_error();
  Election e;
  ASSERT_EQ(e.start(c, "job"), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor())) << c.logs.all();
  Sync s("127.0.0.1", port);
  ASSERT_FALSE(s.cmd({"HGET", "simba:lease:job", "session"}).empty());
  const int64_t stopped = mono_ms();
  server.signal(SIGSTOP);
  ASSERT_TRUE(wait_for([&] { return simba_client_status(c) == SIMBA_SESSION_SUSPENDED; },
                       6000 * slow_factor(), 1))
      << c.logs.all();
  // Resumed once a retry too got no answer.
  const StopOnlyTimes t = stop_while_stalled(
      e, mono_ms() + 2 * timing.renew_ms + 500, [&] { server.signal(SIGCONT); },
      [&] {
        return s.cmd({"HGET", "simba:lease:job", "session"}).empty();
      },
      4 * timing.renew_ms);
  expect_freed_by_the_retry(t, c, "job", timing.renew_ms);
  // The session could expire on the server 18 s after the SIGSTOP at the earliest.
  EXPECT_LT(t.freed_ms - stopped, 14'000) << c.logs.all();
}

// libuv runs timers before it reads sockets, so after a long loop turn a
// call's timer fires while its answer already waits in the socket. That is a
// slow loop, not a stuck connection: the answer is read and used, and the
// command connection stays (dropping it failed every call on it). An
// EXTERNAL-mode host that does not run the loop for longer than the call
// timeout makes the long turn; the server counts the connections it accepted.
TEST(Redis, AnAnswerWaitingInTheSocketIsNotTakenForATimeout) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
  const int port = free_port();
  ASSERT_GT(port, 0);
  OwnServer server(port);
  ASSERT_TRUE(server.start()) << "cannot start redis-server on " << port;
  Sync s("127.0.0.1", port);
  ASSERT_TRUE(s.ok());
  Timing t{4000, 400};  // calls time out after 400 ms
  t.settings = {{"loop.mode", "external"}};
  LoggedClient c(server.url(), t);
  ASSERT_NE(static_cast<simba_client_t*>(c), nullptr) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  // This one, the command connection and the subscriber's.
  ASSERT_TRUE(wait_for(
      [&] {
        simba_client_process(c);
        return info_int(s, "clients", "connected_clients") == 3;
      },
      3000 * slow_factor()));
  const int64_t connections = info_int(s, "stats", "total_connections_received");
  struct Result {
    int err = -1;
    simba_term_t* term = nullptr;
  } got;
  const int64_t acquires = counter(c, "acquires");
  ASSERT_EQ(simba_lock_acquire_async(
                c, ("redis.late-turn." + unique_id()).c_str(), 5000,
                [](void* ud, int err, simba_term_t* term) {
                  auto* r = static_cast<Result*>(ud);
                  r->err = err;
                  r->term = term;
                },
                &got),
            SIMBA_OK)
      << simba_last_error();
  // The backend writes what a loop turn sent at the turn's end: one turn puts
  // the acquire on the wire.
  ASSERT_EQ(simba_client_process(c), SIMBA_OK) << simba_last_error();
  ASSERT_LT(got.err, 0) << "answered within the turn that sent it";
  sleep_ms(700);  // the host is busy: the answer arrives, its timer expires
  const int64_t until = mono_ns() + 3000 * slow_factor() * kMsNs;
  while (got.err < 0 && mono_ns() < until) {
    ASSERT_EQ(simba_client_process(c), SIMBA_OK) << simba_last_error();
    sleep_ms(1);
  }
  ASSERT_EQ(got.err, SIMBA_OK);
  // The core's own call timeout expired too and it may have tried again (its
  // late answer is released as an orphan): that is the core's rule. The
  // backend's is that the connection was not taken for stuck.
  EXPECT_GE(counter(c, "acquires"), acquires + 1);
  EXPECT_FALSE(c.logs.has("no answer within the call's timeout")) << c.logs.all();
  EXPECT_EQ(info_int(s, "stats", "total_connections_received"), connections) << c.logs.all();
  EXPECT_TRUE(simba_term_is_valid(got.term));
  EXPECT_EQ(simba_lock_release(got.term), SIMBA_OK);  // runs the loop here until answered
}

// The server dies (connections reset) and comes back empty on the same port:
// the calls in flight fail, the client reconnects, finds its session gone
// (SESSION_EXPIRED) and opens a new one.
TEST(Redis, ServerRestartWithoutDataRecovers) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
  const int port = free_port();
  ASSERT_GT(port, 0);
  auto server = std::make_unique<OwnServer>(port);
  ASSERT_TRUE(server->start());
  Election e;
  Client c;
  ASSERT_EQ(c.open(server->url(), Timing{3000, 200}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  const std::string sid = session_id(c);
  ASSERT_EQ(e.start(c, "redis.restart." + unique_id()), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));

  server->signal(SIGKILL);
  server.reset();
  EXPECT_TRUE(wait_for([&] { return simba_client_status(c) == SIMBA_SESSION_SUSPENDED; },
                       2000 * slow_factor()));
  server = std::make_unique<OwnServer>(port);
  ASSERT_TRUE(server->start());
  ASSERT_TRUE(e.wait_revoked(1, 5000 * slow_factor()));
  EXPECT_EQ(e.last_revoked().reason, SIMBA_REVOKE_SESSION_EXPIRED);
  ASSERT_TRUE(e.wait_elected(2, 5000 * slow_factor())) << snapshot(c);
  EXPECT_NE(session_id(c), sid);
  EXPECT_EQ(simba_client_status(c), SIMBA_SESSION_LIVE);
  EXPECT_EQ(e.pairing_errors(), 0);
}

// A warning at connect when maxmemory-policy is allkeys-*.
TEST(Redis, WarnsAboutAllkeysEviction) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
  const int port = free_port();
  ASSERT_GT(port, 0);
  OwnServer server(port);
  ASSERT_TRUE(server.start());
  Sync s("127.0.0.1", port);
  ASSERT_EQ(s.cmd({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}), "OK");
  LogCapture logs;
  simba_config_t* cfg = nullptr;
  ASSERT_EQ(simba_config_new(&cfg), SIMBA_OK);
  ASSERT_EQ(simba_config_set_logger(cfg, &LogCapture::fn, &logs, SIMBA_LOG_DEBUG), SIMBA_OK);
  simba_client_t* c = nullptr;
  ASSERT_EQ(simba_client_open(&c, server.url().c_str(), cfg), SIMBA_OK) << simba_last_error();
  simba_config_free(cfg);
  EXPECT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK);
  EXPECT_TRUE(wait_for([&] { return logs.has("allkeys-lru"); }, 5000));
  simba_client_close(c);
}

// Opens a client on `url` with its log captured, waits until it is live, then
// a little longer (the log sink may trail the loop), and closes it.
void open_live_and_close(const std::string& url, LogCapture* logs) {
  simba_config_t* cfg = nullptr;
  ASSERT_EQ(simba_config_new(&cfg), SIMBA_OK);
  ASSERT_EQ(simba_config_set_logger(cfg, &LogCapture::fn, logs, SIMBA_LOG_DEBUG), SIMBA_OK);
  simba_client_t* c = nullptr;
  ASSERT_EQ(simba_client_open(&c, url.c_str(), cfg), SIMBA_OK) << simba_last_error();
  simba_config_free(cfg);
  EXPECT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << logs->all();
  sleep_ms(300);
  simba_client_close(c);
}

// A warning at connect when persistence is off (no AOF and no RDB save point):
// a restart forgets the leases and tokens go back. Either kind of persistence
// silences it, and so does a server that refuses CONFIG.
TEST(Redis, WarnsWhenPersistenceIsOff) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
  struct Case {
    const char* what;
    std::vector<std::string> extra;  // after OwnServer's --save "" --appendonly no
    bool warns;
  };
  const Case cases[] = {
      {"no AOF, no save point", {}, true},
      {"AOF", {"--appendonly", "yes"}, false},
      {"RDB save point", {"--save", "3600 1"}, false},
      {"CONFIG disabled", {"--rename-command", "CONFIG", ""}, false},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    const int port = free_port();
    ASSERT_GT(port, 0);
    OwnServer server(port, k.extra);
    ASSERT_TRUE(server.start());
    LogCapture logs;
    open_live_and_close(server.url(), &logs);
    EXPECT_EQ(logs.has("persistence is off"), k.warns) << logs.all();
    EXPECT_FALSE(logs.has("maxmemory-policy")) << logs.all();  // the default noeviction
  }
}

// The calls of a command in INFO commandstats ("cmdstat_evalsha:calls=N,...").
int64_t command_calls(Sync& s, const std::string& command) {
  const std::string info = s.cmd({"INFO", "commandstats"});
  const std::string pat = "cmdstat_" + command + ":calls=";
  const size_t at = info.find(pat);
  if (at == std::string::npos) return 0;
  return std::strtoll(info.c_str() + at + pat.size(), nullptr, 10);
}

// Operations run as EVALSHA of the scripts loaded at connect (so the SHA-1s
// computed here match the server's); after SCRIPT FLUSH a NOSCRIPT answer is
// retried with EVAL and everything keeps working.
TEST(Redis, EvalshaAndNoscriptFallback) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
  const int port = free_port();
  ASSERT_GT(port, 0);
  OwnServer server(port);
  ASSERT_TRUE(server.start());
  Sync s("127.0.0.1", port);
  ASSERT_TRUE(s.ok());

  Election e;
  Client c;
  // Calls time out after a renew interval: 300 ms, so that a slow machine (a
  // sanitizer build under load) does not drop the connection, whose successor
  // would load the scripts again and need no EVAL.
  ASSERT_EQ(c.open(server.url(), Timing{1500, 300}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(e.start(c, "redis.sha." + unique_id()), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
  sleep_ms(1000);  // a few keep-alives
  EXPECT_GE(command_calls(s, "evalsha"), 4);
  EXPECT_EQ(command_calls(s, "eval"), 0) << "a SHA-1 did not match: EVALSHA fell back to EVAL";

  ASSERT_EQ(s.cmd({"SCRIPT", "FLUSH"}), "OK");
  ASSERT_EQ(simba_election_step_down(e.handle(), 0, nullptr, nullptr), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(2, 5000 * slow_factor())) << snapshot(c);
  EXPECT_GT(e.last_elected().token, e.elected()[0].token);
  EXPECT_GE(command_calls(s, "eval"), 1);
  sleep_ms(1000);  // keep-alives go on
  EXPECT_TRUE(e.leading());
  EXPECT_EQ(e.revoked_count(), 1);
  EXPECT_EQ(simba_client_status(c), SIMBA_SESSION_LIVE);
}

// Persistence as we recommend it (AOF, appendfsync always): the server is
// killed and restarted on its files. Tokens keep increasing across the restart,
// a session still within its lease survives it, and so does its term.
TEST(Redis, RestartWithAofKeepsTokensIncreasing) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
  const int port = free_port();
  ASSERT_GT(port, 0);
  OwnServer server(port, {"--appendonly", "yes", "--appendfsync", "always"});
  ASSERT_TRUE(server.start());
  const std::string name = "redis.aof." + unique_id();
  Client c;
  ASSERT_EQ(c.open(server.url(), Timing{4000, 500}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  uint64_t last = 0;
  for (int i = 0; i < 3; ++i) {  // a few terms before the crash
    simba_term_t* t = nullptr;
    ASSERT_EQ(simba_lock_acquire(&t, c, name.c_str(), 5000 * slow_factor()), SIMBA_OK);
    EXPECT_GT(simba_term_token(t), last);
    last = simba_term_token(t);
    ASSERT_EQ(simba_lock_release(t), SIMBA_OK);
  }
  Election e;
  const std::string held = name + ".held";
  ASSERT_EQ(e.start(c, held), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
  const std::string sid = session_id(c);

  server.crash();
  ASSERT_TRUE(server.start()) << "cannot restart redis-server on its AOF";
  // The client reconnects; its session and term were on disk.
  ASSERT_TRUE(wait_for(
      [&] { return counter(c, "keep_alives") > 0 && simba_client_status(c) == SIMBA_SESSION_LIVE; },
      5000 * slow_factor()));
  sleep_ms(1000);  // two renew intervals: keep-alives after the restart
  EXPECT_EQ(session_id(c), sid);
  EXPECT_TRUE(e.leading()) << snapshot(c);
  EXPECT_EQ(e.revoked_count(), 0);
  simba_term_t* t = nullptr;
  ASSERT_EQ(simba_lock_acquire(&t, c, name.c_str(), 5000 * slow_factor()), SIMBA_OK)
      << simba_last_error();
  EXPECT_GT(simba_term_token(t), last) << "a token went back across the restart";
  ASSERT_EQ(simba_lock_release(t), SIMBA_OK);
  // And a second process (another client) continues from there too.
  Client d;
  ASSERT_EQ(d.open(server.url(), Timing{4000, 500}), SIMBA_OK);
  ASSERT_EQ(simba_lock_acquire(&t, d, name.c_str(), 5000 * slow_factor()), SIMBA_OK);
  EXPECT_GT(simba_term_token(t), last + 1);
  ASSERT_EQ(simba_lock_release(t), SIMBA_OK);
}

// Every write of a script goes to the AOF and is fsynced before the answer, so
// a lock cycle writes once to acquire (token and holder in one HSET) and once
// to release (HDEL): the name stays in the session's lease set, which the
// next keep-alive cleans. Counted by the server (INFO commandstats counts the
// commands scripts run); the old scripts made four writes and one.
TEST(Redis, AcquireAndReleaseAreOneWriteEach) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
  const int port = free_port();
  ASSERT_GT(port, 0);
  OwnServer server(port);
  ASSERT_TRUE(server.start());
  Client c;
  const Timing t{10000, 4000};  // 20 cycles fit easily between two keep-alives
  ASSERT_EQ(c.open(server.url(), t), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  Sync s("127.0.0.1", port);
  ASSERT_TRUE(s.ok());
  const std::string name = "redis.writes." + unique_id();
  const std::string set = "simba:session:" + session_id(c) + ":leases";
  const int kCycles = 20;
  uint64_t last = 0;
  // Counted between two keep-alives (each also writes, PEXPIRE twice).
  const int64_t k0 = counter(c, "keep_alives");
  ASSERT_TRUE(wait_for([&] { return counter(c, "keep_alives") > k0; }, 8000 * slow_factor()));
  ASSERT_EQ(s.cmd({"CONFIG", "RESETSTAT"}), "OK");
  const int64_t k1 = counter(c, "keep_alives");
  for (int i = 0; i < kCycles; ++i) {
    simba_term_t* term = nullptr;
    ASSERT_EQ(simba_lock_acquire(&term, c, name.c_str(), 5000 * slow_factor()), SIMBA_OK);
    EXPECT_GT(simba_term_token(term), last);
    last = simba_term_token(term);
    ASSERT_EQ(simba_lock_release(term), SIMBA_OK);
  }
  const int64_t k2 = counter(c, "keep_alives");
  ASSERT_EQ(k2, k1) << "a keep-alive ran in the window: its writes would count";
  EXPECT_EQ(command_calls(s, "hset"), kCycles);
  EXPECT_EQ(command_calls(s, "hdel"), kCycles);
  EXPECT_EQ(command_calls(s, "hincrby"), 0);
  EXPECT_EQ(command_calls(s, "srem"), 0);
  EXPECT_EQ(command_calls(s, "pexpire"), 1);  // the first acquire made the set
  EXPECT_EQ(s.cmd({"SISMEMBER", set, name}), "1") << "the release left the name in the set";
  // The next keep-alive drops it; the name is not reported held (the client
  // would release it again) and the set keeps its expiry.
  const int64_t releases = counter(c, "releases");
  ASSERT_TRUE(wait_for([&] { return counter(c, "keep_alives") > k2; }, 8000 * slow_factor()));
  EXPECT_EQ(s.cmd({"SISMEMBER", set, name}), "0");
  EXPECT_EQ(counter(c, "releases"), releases);
  simba_term_t* held = nullptr;
  ASSERT_EQ(simba_lock_acquire(&held, c, (name + ".held").c_str(), 5000 * slow_factor()), SIMBA_OK);
  const int64_t pttl = std::strtoll(s.cmd({"PTTL", set}).c_str(), nullptr, 10);
  EXPECT_GT(pttl, 0) << "a new lease set has no expiry";
  EXPECT_LE(pttl, t.lease_ms);
  ASSERT_EQ(simba_lock_release(held), SIMBA_OK);
}

// Release broadcasts reach only candidates: a client subscribes to a name's
// channel once an acquire of it is answered Held (the core watches it), attempts
// once more when the subscription is confirmed (a release just before it
// reached nobody), does so again on a new subscriber connection, hears the
// release at once, and unsubscribes as soon as it leads or stops (ADR 0040).
// An uncontended lock subscribes to nothing.
TEST(Redis, OnlyCandidatesSubscribeToReleases) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
  const int port = free_port();
  ASSERT_GT(port, 0);
  OwnServer server(port);
  ASSERT_TRUE(server.start());
  Sync s("127.0.0.1", port);
  ASSERT_TRUE(s.ok());
  const std::string name = "redis.sub." + unique_id();
  const std::string channel = "simba:released:" + name;
  const auto subscribers = [&] { return s.cmd({"PUBSUB", "NUMSUB", channel}); };

  // Candidates retry after >= 2 s: anything sooner is the broadcast's doing.
  const Timing slow{10000, 4000};
  Client a;
  ASSERT_EQ(a.open(server.url(), slow), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(a, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  simba_term_t* held = nullptr;
  ASSERT_EQ(simba_lock_acquire(&held, a, name.c_str(), 5000 * slow_factor()), SIMBA_OK);
  EXPECT_EQ(subscribers(), channel + " 0");
  EXPECT_EQ(s.cmd({"PUBSUB", "NUMPAT"}), "0");

  Client b;
  ASSERT_EQ(b.open(server.url(), slow), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(b, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  Election e;
  ASSERT_EQ(e.start(b, name), SIMBA_OK);
  ASSERT_TRUE(wait_for([&] { return subscribers() == channel + " 1"; }, 1500));
  // The confirmation's second attempt, well before the first retry.
  EXPECT_TRUE(wait_for([&] { return counter(b, "acquires") >= 2; }, 1500)) << snapshot(b);
  EXPECT_FALSE(e.leading());

  // The subscriber connection drops: the next one subscribes again, and its
  // confirmation brings one more attempt (a release meanwhile reached nobody).
  const int64_t before = counter(b, "acquires");
  EXPECT_NE(s.cmd({"CLIENT", "KILL", "TYPE", "pubsub"}), "0");
  ASSERT_TRUE(wait_for([&] { return subscribers() == channel + " 0"; }, 1500));
  ASSERT_TRUE(wait_for([&] { return subscribers() == channel + " 1"; }, 1500));
  EXPECT_TRUE(wait_for([&] { return counter(b, "acquires") > before; }, 1500)) << snapshot(b);

  const int64_t t0 = mono_ns();
  ASSERT_EQ(simba_lock_release(held), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 1500));
  EXPECT_LT(e.elected()[0].at_ns - t0, 1500 * kMsNs) << "not taken over through the broadcast";
  // The leader needs no broadcast of its own name.
  EXPECT_TRUE(wait_for([&] { return subscribers() == channel + " 0"; }, 1500 * slow_factor()));

  // A candidate that stops unsubscribes at once (no idle sweep).
  Client c;
  ASSERT_EQ(c.open(server.url(), Timing{1000, 200}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  {
    Election waiting;
    ASSERT_EQ(waiting.start(c, name), SIMBA_OK);
    ASSERT_TRUE(wait_for([&] { return subscribers() == channel + " 1"; }, 1500 * slow_factor()));
  }
  EXPECT_TRUE(wait_for([&] { return subscribers() == channel + " 0"; }, 1500 * slow_factor()));
}

// The backend contract below the core: a watched name is SUBSCRIBEd, again on
// a new subscriber connection (whose confirmation reports the name once: a
// release meanwhile reached nobody), its release is delivered, and unwatch
// UNSUBSCRIBEs at once.
TEST(Redis, AWatchIsSubscribedAgainAfterTheSubscriberReconnects) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
  const int port = free_port();
  ASSERT_GT(port, 0);
  OwnServer server(port);
  ASSERT_TRUE(server.start());
  Sync s("127.0.0.1", port);
  ASSERT_TRUE(s.ok());
  const std::string name = "redis.watch." + unique_id();
  const std::string channel = "simba:released:" + name;
  const auto subscribed = [&](int n) {
    return s.cmd({"PUBSUB", "NUMSUB", channel}) == channel + " " + std::to_string(n);
  };
  WatchingBackend holder(server.url()), watcher(server.url());
  ASSERT_TRUE(holder.ok() && watcher.ok());
  const std::string hs = holder.open(), ws = watcher.open();
  ASSERT_FALSE(hs.empty() || ws.empty());
  const simba::AcquireReply won = holder.acquire(hs, name);
  ASSERT_EQ(won.outcome, simba::Outcome::kOk);
  ASSERT_EQ(watcher.acquire(ws, name).outcome, simba::Outcome::kHeld);
  EXPECT_TRUE(subscribed(0)) << "subscribed without a watch";
  watcher.backend().watch(name);
  ASSERT_TRUE(watcher.run_until([&] { return subscribed(1); }, 1500 * slow_factor()));

  EXPECT_NE(s.cmd({"CLIENT", "KILL", "TYPE", "pubsub"}), "0");
  watcher.heard.clear();
  ASSERT_TRUE(watcher.run_until([&] { return subscribed(1) && watcher.heard_of(name); },
                                3000 * slow_factor()))
      << "not subscribed again, or its confirmation not reported";
  watcher.heard.clear();
  ASSERT_EQ(holder.release(hs, name, won.token), simba::Outcome::kOk);
  EXPECT_TRUE(watcher.run_until([&] { return watcher.heard_of(name); }, 1500 * slow_factor()))
      << "the release after the reconnect was not delivered";

  watcher.backend().unwatch(name);
  EXPECT_TRUE(watcher.run_until([&] { return subscribed(0); }, 1500 * slow_factor()));
}

// Renewal costs one backend call per renew interval whatever the number of
// leases, counted by the server itself (INFO commandstats) on a server of this
// test's own, where this client's keep-alives are the only EVALSHA calls.
TEST(Redis, OneKeepAliveCallPerRenewIntervalCountedByTheServer) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
  const int port = free_port();
  ASSERT_GT(port, 0);
  OwnServer server(port);
  ASSERT_TRUE(server.start());
  const Timing t{2000, 200};
  Client c;
  ASSERT_EQ(c.open(server.url(), t), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  std::vector<simba_term_t*> terms;
  const std::string prefix = "redis.count." + unique_id() + ".";
  for (int i = 0; i < 500; ++i) {
    simba_term_t* term = nullptr;
    ASSERT_EQ(
        simba_lock_acquire(&term, c, (prefix + std::to_string(i)).c_str(), 5000 * slow_factor()),
        SIMBA_OK);
    terms.push_back(term);
  }
  Sync s("127.0.0.1", port);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s.cmd({"CONFIG", "RESETSTAT"}), "OK");
  const int64_t k0 = counter(c, "keep_alives");
  const int64_t t0 = mono_ns();
  sleep_ms(2000);  // the measurement window, not an assertion
  const int64_t calls = command_calls(s, "evalsha");
  const int64_t k1 = counter(c, "keep_alives");
  const double intervals = static_cast<double>(mono_ns() - t0) / kMsNs / t.renew_ms;
  // About 10 intervals: one call each (+1 in flight at either edge), never one
  // per lease (that would be 5000).
  EXPECT_GE(calls, static_cast<int64_t>(intervals) - 3) << calls << " calls in " << intervals;
  EXPECT_LE(calls, static_cast<int64_t>(intervals) + 2) << calls << " calls in " << intervals;
  EXPECT_LE(std::llabs(calls - (k1 - k0)), 1)
      << "server counted " << calls << ", client " << k1 - k0;
  for (simba_term_t* term : terms) {
    EXPECT_TRUE(simba_term_is_valid(term));
    simba_lock_release(term);
  }
}

// Both connections (commands and the release subscriber) have TCP keep-alives,
// so a subscriber whose peer vanished without a reset does not stay silent for
// hours: `ss -o` shows a keepalive timer on each of our sockets to the server.
TEST(Redis, ConnectionsHaveTcpKeepAlives) {
  if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
  if (std::system("command -v ss >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "ss (iproute2) not installed";
  const int port = free_port();
  ASSERT_GT(port, 0);
  OwnServer server(port);
  ASSERT_TRUE(server.start());
  Client c;
  ASSERT_EQ(c.open(server.url(), Timing{2000, 400}), SIMBA_OK);
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK);
  Election e;  // a contender subscribes to release broadcasts
  ASSERT_EQ(e.start(c, "redis.keepalive." + unique_id()), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
  auto sockets = [&](const char* filter) {
    const std::string cmd = "ss -tnoH state established dst 127.0.0.1:" + std::to_string(port) +
                            " | grep -c '" + filter + "'";
    FILE* f = popen(cmd.c_str(), "r");
    int n = 0;
    if (f) {
      if (std::fscanf(f, "%d", &n) != 1) n = 0;
      pclose(f);
    }
    return n;
  };
  ASSERT_TRUE(wait_for([&] { return sockets("") >= 2; }, 3000 * slow_factor()));
  EXPECT_EQ(sockets("keepalive"), sockets("")) << "every connection to the server keeps alive";
}

class RedisShared : public ::testing::Test {
 protected:
  void SetUp() override {
    url_ = shared_url();
    if (url_.empty()) GTEST_SKIP() << "SIMBA_TEST_REDIS_URL is not set (scripts/test.sh sets it)";
    ASSERT_TRUE(host_port(url_, &host_, &port_)) << url_;
  }
  std::string url_, host_;
  int port_ = 0;
};

// The session key disappears behind the client's back: the next keep-alive
// finds it gone and the term ends with SESSION_EXPIRED.
TEST_F(RedisShared, DeletedSessionEndsTheTermWithSessionExpired) {
  Election e;
  Client c;
  ASSERT_EQ(c.open(url_, Timing{1000, 200}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(e.start(c, "redis.del." + unique_id()), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
  const std::string sid = session_id(c);
  ASSERT_FALSE(sid.empty());

  Sync s(host_, port_);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s.cmd({"DEL", "simba:session:" + sid}), "1");
  ASSERT_TRUE(e.wait_revoked(1, 3000 * slow_factor()));
  EXPECT_EQ(e.last_revoked().reason, SIMBA_REVOKE_SESSION_EXPIRED);
  // A new session follows, and the election wins again.
  ASSERT_TRUE(e.wait_elected(2, 5000 * slow_factor()));
  EXPECT_NE(session_id(c), sid);
  EXPECT_GT(e.last_elected().token, e.elected()[0].token);
}

// The lease hash is made to name another session: the next keep-alive no longer
// lists the lease and the term ends with TAKEN_OVER.
TEST_F(RedisShared, RewrittenHolderEndsTheTermWithTakenOver) {
  Election e;
  Client c;
  ASSERT_EQ(c.open(url_, Timing{1000, 200}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  const std::string name = "redis.takeover." + unique_id();
  ASSERT_EQ(e.start(c, name), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));

  Sync s(host_, port_);
  ASSERT_TRUE(s.ok());
  const std::string key = "simba:lease:" + name;
  EXPECT_EQ(s.cmd({"HGET", key, "session"}), session_id(c));
  EXPECT_EQ(s.cmd({"HGET", key, "token"}), std::to_string(e.last_elected().token));
  // Another "session" that lives for a while, so that the lease stays held.
  const std::string intruder = "intruder-" + unique_id();
  ASSERT_EQ(s.cmd({"SET", "simba:session:" + intruder, "x", "PX", "60000"}), "OK");
  ASSERT_EQ(s.cmd({"HSET", key, "session", intruder}), "0");
  ASSERT_TRUE(e.wait_revoked(1, 3000 * slow_factor()));
  EXPECT_EQ(e.last_revoked().reason, SIMBA_REVOKE_TAKEN_OVER);
  EXPECT_FALSE(simba_term_is_valid(e.last_elected().term));
  // Held by the intruder: no new term while its session key lives.
  sleep_ms(300);
  EXPECT_EQ(e.elected_count(), 1);
  ASSERT_EQ(s.cmd({"DEL", "simba:session:" + intruder}), "1");
  ASSERT_TRUE(e.wait_elected(2, 5000 * slow_factor()));
}

}  // namespace

#endif  // SIMBA_WITH_REDIS
