// zookeeper:// specifics: URL parsing and password redaction; on the shared
// server (SIMBA_TEST_ZOOKEEPER_URL, skipped when unset) the token as the lease
// node's czxid, a lease node deleted by another client (TAKEN_OVER), the
// watch-based takeover after a clean stop, a session expired from outside
// (SESSION_EXPIRED) and the digest ACL; on servers of the tests' own a
// maxSessionTimeout below the lease (SessionLeaseShortened), a server stopped
// (SIGSTOP) past the session timeout, and a quick server restart the session
// survives. Permits (ADR 0046): the plan on a view of a resource node, an
// entry as an ephemeral node of its session, a stale view.
//
// Two servers of our own serve the whole binary (a JVM takes a second or two to
// start): they start together, on first use, and stop at the end of the suite.
// ZooKeeper is poked with a plain single-threaded C client driven by poll().
#ifdef SIMBA_WITH_ZOOKEEPER

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/zookeeper/zookeeper_results.h"
#include "backend/zookeeper/zookeeper_url.h"
#include "backends/simba_testing.h"
#include "backends/watching_backend.h"
#include "simba.h"

namespace {

using namespace simba_testing;

// --- helpers -----------------------------------------------------------------

// The answer of a four-letter word on 127.0.0.1:port ("" when none).
std::string four_letter(int port, const char* word) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  struct sockaddr_in a;
  std::memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  struct timeval tv = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  if (connect(fd, reinterpret_cast<struct sockaddr*>(&a), sizeof a) == 0 &&
      write(fd, word, std::strlen(word)) == static_cast<ssize_t>(std::strlen(word))) {
    char buf[512];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

// A ZooKeeper 3.8 server of the test's own (the Debian package's jar), on
// 127.0.0.1:port with a 100 ms tick and the given session timeout bounds.
class OwnZk {
 public:
  OwnZk(int min_session_ms, int max_session_ms)
      : min_ms_(min_session_ms), max_ms_(max_session_ms) {}
  ~OwnZk() { stop(); }

  // Forks the JVM; ready() says when it answers.
  bool launch() {
    if (dir_.empty()) {
      port_ = free_port();
      char tmpl[] = "/tmp/simba-zk-test.XXXXXX";
      if (port_ <= 0 || !mkdtemp(tmpl)) return false;
      dir_ = tmpl;
      std::ofstream cfg(dir_ + "/zoo.cfg");
      cfg << "tickTime=100\ndataDir=" << dir_ << "/data\nclientPort=" << port_
          << "\nclientPortAddress=127.0.0.1\nminSessionTimeout=" << min_ms_
          << "\nmaxSessionTimeout=" << max_ms_
          << "\nadmin.enableServer=false\n4lw.commands.whitelist=ruok,srvr\npreAllocSize=1024\n";
      if (!cfg) return false;
    }
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      const std::string log = dir_ + "/zookeeper.log";
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      const std::string cp =
          dir_ + ":/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar";
      const std::string cfg = dir_ + "/zoo.cfg";
      execlp("java", "java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp.c_str(),
             "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg.c_str(),
             static_cast<char*>(nullptr));
      _exit(127);
    }
    return true;
  }
  bool ready(int64_t timeout_ms) {
    return wait_for([&] { return four_letter(port_, "ruok") == "imok"; }, timeout_ms, 50);
  }
  void signal(int sig) {
    if (pid_ > 0) kill(pid_, sig);
  }
  // SIGKILL, keeping the data dir: the next launch() restarts on the same files.
  void crash() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      int st = 0;
      waitpid(pid_, &st, 0);
      pid_ = -1;
    }
  }
  void stop() {
    if (pid_ > 0) {
      kill(pid_, SIGCONT);
      kill(pid_, SIGKILL);
      int st = 0;
      waitpid(pid_, &st, 0);
      pid_ = -1;
    }
    if (!dir_.empty()) {
      const std::string rm = "rm -rf '" + dir_ + "'";
      if (std::system(rm.c_str()) != 0) {
        // Nothing more to do: a leftover temp dir.
      }
      dir_.clear();
    }
  }
  int port() const { return port_; }
  std::string hosts() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string url() const { return "zookeeper://" + hosts() + "/simba-own"; }

 private:
  int min_ms_, max_ms_;
  int port_ = -1;
  pid_t pid_ = -1;
  std::string dir_;
};

bool have_zookeeper() {
  return access("/usr/share/java/zookeeper.jar", R_OK) == 0 &&
         std::system("command -v java >/dev/null 2>&1") == 0;
}

std::string shared_url() {
  const char* u = std::getenv("SIMBA_TEST_ZOOKEEPER_URL");
  return u && *u ? u : "";
}

// "host:port,..." and the chroot of a zookeeper:// URL.
bool hosts_of(const std::string& url, std::string* hosts, std::string* chroot) {
  simba::ZookeeperUrl z;
  std::string err;
  if (!simba::parse_zookeeper_url(url, &z, &err)) return false;
  hosts->clear();
  for (const auto& h : z.hosts) {
    *hosts += (hosts->empty() ? "" : ",") + h.host + ":" + std::to_string(h.port);
  }
  *chroot = z.chroot;
  return true;
}

// The password a ZooKeeper server gives session `id`: the server derives it
// with java.util.Random seeded with id ^ 0xB3415C00 (ZooKeeperServer's
// generatePasswd), so a test can take a session over as Curator's KillSession
// does: connect with its id and password, then close.
void session_password(int64_t id, char out[16]) {
  const uint64_t mask = (uint64_t{1} << 48) - 1;
  uint64_t seed = (static_cast<uint64_t>(id ^ 0xB3415C00LL) ^ 0x5DEECE66DULL) & mask;
  auto next32 = [&] {
    seed = (seed * 0x5DEECE66DULL + 0xBULL) & mask;
    return static_cast<int32_t>(seed >> 16);
  };
  for (int i = 0; i < 16;) {
    int32_t rnd = next32();
    for (int n = 0; n < 4 && i < 16; ++n, rnd >>= 8) out[i++] = static_cast<char>(rnd);
  }
}

// A plain single-threaded ZooKeeper client, driven by poll() in the calling
// thread: what "another client" does to our nodes.
class RawZk {
 public:
  explicit RawZk(const std::string& hosts, const clientid_t* id = nullptr) {
    // Library logging stays as the backend set it (off: its buffers are shared).
    zoo_set_debug_level(static_cast<ZooLogLevel>(0));
    zh_ = zookeeper_init(hosts.c_str(), &RawZk::watcher, 10'000, id, this, 0);
  }
  ~RawZk() {
    if (zh_) zookeeper_close(zh_);
  }
  RawZk(const RawZk&) = delete;
  RawZk& operator=(const RawZk&) = delete;

  bool connected(int64_t timeout_ms = 5000) {
    return drive([&] { return zh_ && zoo_state(zh_) == ZOO_CONNECTED_STATE; }, timeout_ms);
  }
  int add_auth(const std::string& user, const std::string& password) {
    const std::string cred = user + ":" + password;
    Result r;
    zoo_add_auth(zh_, "digest", cred.data(), static_cast<int>(cred.size()), &RawZk::void_cb, &r);
    return finish(r);
  }
  int remove(const std::string& path) {
    Result r;
    const int rc = zoo_adelete(zh_, path.c_str(), -1, &RawZk::void_cb, &r);
    return rc != ZOK ? rc : finish(r);
  }
  int exists(const std::string& path, struct Stat* st) {
    Result r;
    const int rc = zoo_aexists(zh_, path.c_str(), 0, &RawZk::stat_cb, &r);
    if (rc != ZOK) return rc;
    const int out = finish(r);
    *st = r.stat;
    return out;
  }
  int create(const std::string& path, const std::string& data) {
    Result r;
    const int rc = zoo_acreate(zh_, path.c_str(), data.data(), static_cast<int>(data.size()),
                               &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, &RawZk::string_cb, &r);
    return rc != ZOK ? rc : finish(r);
  }
  // Drives the client until `pred` holds or `timeout_ms` passed.
  bool drive(const std::function<bool()>& pred, int64_t timeout_ms) {
    const int64_t until = mono_ms() + timeout_ms;
    while (!pred()) {
      if (mono_ms() >= until || !zh_) return false;
      int fd = -1, interest = 0;
      struct timeval tv = {0, 0};
      const int rc = zookeeper_interest(zh_, &fd, &interest, &tv);
      if (rc != ZOK) fd = -1;
      struct pollfd p = {fd, 0, 0};
      if (interest & ZOOKEEPER_READ) p.events |= POLLIN;
      if (interest & ZOOKEEPER_WRITE) p.events |= POLLOUT;
      const int64_t wait_ms = std::min<int64_t>(10, tv.tv_sec * 1000 + tv.tv_usec / 1000);
      int events = 0;
      if (fd >= 0 && poll(&p, 1, static_cast<int>(wait_ms)) > 0) {
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) events |= ZOOKEEPER_READ;
        if (p.revents & (POLLOUT | POLLHUP | POLLERR)) events |= ZOOKEEPER_WRITE;
      } else if (fd < 0) {
        sleep_ms(wait_ms);
      }
      zookeeper_process(zh_, events);
    }
    return true;
  }

 private:
  struct Result {
    bool done = false;
    int rc = ZSYSTEMERROR;
    struct Stat stat {};
  };
  int finish(Result& r) {
    return drive([&] { return r.done; }, 5000) ? r.rc : ZOPERATIONTIMEOUT;
  }
  static void watcher(zhandle_t*, int, int, const char*, void*) {}
  static void void_cb(int rc, const void* data) {
    auto* r = static_cast<Result*>(const_cast<void*>(data));
    r->rc = rc;
    r->done = true;
  }
  static void string_cb(int rc, const char*, const void* data) { void_cb(rc, data); }
  static void stat_cb(int rc, const struct Stat* st, const void* data) {
    auto* r = static_cast<Result*>(const_cast<void*>(data));
    if (st) r->stat = *st;
    void_cb(rc, data);
  }

  zhandle_t* zh_ = nullptr;
};

// --- URL parsing -----------------------------------------------------------------

TEST(ZookeeperUrl, Defaults) {
  simba::ZookeeperUrl u;
  std::string err;
  ASSERT_TRUE(simba::parse_zookeeper_url("zookeeper://zk1", &u, &err)) << err;
  ASSERT_EQ(u.hosts.size(), 1u);
  EXPECT_EQ(u.hosts[0].host, "zk1");
  EXPECT_EQ(u.hosts[0].port, 2181);
  EXPECT_EQ(u.chroot, "/simba");
  EXPECT_FALSE(u.has_auth);
  ASSERT_TRUE(simba::parse_zookeeper_url("zookeeper://zk1/", &u, &err)) << err;
  EXPECT_EQ(u.chroot, "/simba");
}

TEST(ZookeeperUrl, EveryPart) {
  simba::ZookeeperUrl u;
  std::string err;
  ASSERT_TRUE(simba::parse_zookeeper_url(
      "zookeeper://a.example:2182,10.0.0.2,[::1]:2183/team/app.locks?auth=digest:alice:s%3Acr:et",
      &u, &err))
      << err;
  ASSERT_EQ(u.hosts.size(), 3u);
  EXPECT_EQ(u.hosts[0].host, "a.example");
  EXPECT_EQ(u.hosts[0].port, 2182);
  EXPECT_EQ(u.hosts[1].host, "10.0.0.2");
  EXPECT_EQ(u.hosts[1].port, 2181);
  EXPECT_EQ(u.hosts[2].host, "::1");
  EXPECT_EQ(u.hosts[2].port, 2183);
  EXPECT_EQ(u.chroot, "/team/app.locks");
  EXPECT_TRUE(u.has_auth);
  EXPECT_EQ(u.user, "alice");
  EXPECT_EQ(u.password, "s:cr:et");  // the password may hold ':' (raw or escaped)
}

TEST(ZookeeperUrl, BadUrlsAreInvalidAndNeverShowThePassword) {
  const char* bad[] = {
      "zookeeper://",
      "zookeeper://h:0",
      "zookeeper://h:99999",
      "zookeeper://h:",
      "zookeeper://h,,g",
      "zookeeper://[::1",
      "zookeeper://h/a//b",
      "zookeeper://h/a/../b",
      "zookeeper://h/zookeeper",
      "zookeeper://h/a b",
      "zookeeper://h/x?prefix=y",
      "zookeeper://h/x?auth=sasl:alice:topsecret",
      "zookeeper://h/x?auth=digest:alice",
      "zookeeper://h/x?auth=digest::topsecret",
      "zookeeper://h/x?auth=digest:alice:%zztopsecret",
      "zookeeper://alice:topsecret@h/x",
  };
  for (const char* url : bad) {
    simba::ZookeeperUrl u;
    std::string err;
    EXPECT_FALSE(simba::parse_zookeeper_url(url, &u, &err)) << url;
    EXPECT_FALSE(err.empty()) << url;
    EXPECT_EQ(err.find("topsecret"), std::string::npos) << err;
    // Through the public API: EINVAL, and the message hides the password too.
    simba_client_t* c = nullptr;
    EXPECT_EQ(simba_client_open(&c, url, nullptr), SIMBA_EINVAL) << url;
    EXPECT_EQ(std::string(simba_last_error()).find("topsecret"), std::string::npos)
        << simba_last_error();
  }
}

TEST(ZookeeperUrl, RedactsTheAuthPassword) {
  EXPECT_EQ(simba::redact_url("zookeeper://h:1/c?auth=digest:alice:topsecret"),
            "zookeeper://h:1/c?auth=digest:alice:***");
  EXPECT_EQ(simba::redact_url("zookeeper://h/c?x=1&auth=digest:alice:top:secret&y=2"),
            "zookeeper://h/c?x=1&auth=digest:alice:***&y=2");
  EXPECT_EQ(simba::redact_url("zookeeper://h/c?auth=weird:topsecret"),
            "zookeeper://h/c?auth=weird:***");
  EXPECT_EQ(simba::redact_url("zookeeper://h/c?auth=topsecret"), "zookeeper://h/c?auth=***");
  EXPECT_EQ(simba::redact_url("zookeeper://h/c"), "zookeeper://h/c");
}

// The snapshot and the log name the backend with the password hidden, even
// while the server is unreachable.
TEST(ZookeeperUrl, SnapshotAndLogNeverShowThePassword) {
  const int port = free_port();
  ASSERT_GT(port, 0);
  const std::string url =
      "zookeeper://127.0.0.1:" + std::to_string(port) + "/x?auth=digest:alice:topsecret";
  LogCapture logs;
  simba_config_t* cfg = nullptr;
  ASSERT_EQ(simba_config_new(&cfg), SIMBA_OK);
  ASSERT_EQ(simba_config_set_ms(cfg, "session.lease-duration", 1000), SIMBA_OK);
  ASSERT_EQ(simba_config_set_logger(cfg, &LogCapture::fn, &logs, SIMBA_LOG_DEBUG), SIMBA_OK);
  simba_client_t* c = nullptr;
  ASSERT_EQ(simba_client_open(&c, url.c_str(), cfg), SIMBA_OK) << simba_last_error();
  simba_config_free(cfg);
  sleep_ms(600);  // a few failed opens: their messages are logged
  const std::string snap = snapshot(c);
  EXPECT_NE(snap.find("auth=digest:alice:***"), std::string::npos) << snap;
  EXPECT_EQ(snap.find("topsecret"), std::string::npos) << snap;
  simba_client_close(c);
  std::lock_guard<std::mutex> lock(logs.mu);
  EXPECT_FALSE(logs.lines.empty());
  for (const auto& l : logs.lines) EXPECT_EQ(l.find("topsecret"), std::string::npos) << l;
}

// --- permits: the plan on a view (ADR 0046) ---------------------------------------

simba::PermitAsk permit_ask(simba::PermitKind kind, uint32_t size = 0, bool wait = false,
                            uint64_t intent = 0) {
  simba::PermitAsk a;
  a.kind = kind;
  a.size = size;
  a.leave_intent = wait;
  a.intent = intent;
  return a;
}

TEST(ZookeeperPermitPlan, EntryNamesCarryTheKindAndThePermit) {
  using simba::PermitKind;
  EXPECT_EQ(simba::zk_permit_child(PermitKind::kIntent, 42), "intent-0000000042");
  for (PermitKind k :
       {PermitKind::kSemaphore, PermitKind::kRead, PermitKind::kWrite, PermitKind::kIntent}) {
    const auto e = simba::parse_zk_permit_child(simba::zk_permit_child(k, 2147483647));
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->kind, k);
    EXPECT_EQ(e->permit, 2147483647u);
  }
  for (const char* foreign : {"lock-0000000001", "read-", "read-0000000000", "sem-12x", "write",
                              "read-1234567890123456789"}) {
    EXPECT_FALSE(simba::parse_zk_permit_child(foreign).has_value()) << foreign;
  }
}

TEST(ZookeeperPermitPlan, ASemaphoreCountsItsEntriesAndKeepsItsSize) {
  using simba::PermitKind;
  using simba::ZkPermitPlan;
  const auto ask2 = permit_ask(PermitKind::kSemaphore, 2);
  ZkPermitPlan p = simba::plan_zk_permit(ask2, 0, "", {});
  ASSERT_EQ(p.what, ZkPermitPlan::kGrant);
  EXPECT_EQ(p.permit, 1u);
  EXPECT_EQ(p.token, 1u);
  EXPECT_EQ(p.data, "2");
  // Foreign children count for nothing; entries do.
  p = simba::plan_zk_permit(ask2, 7, "2", {"sem-0000000003", "junk", "sem-0000000007"});
  EXPECT_EQ(p.what, ZkPermitPlan::kHeld);
  EXPECT_EQ(p.permit, 0u);
  p = simba::plan_zk_permit(permit_ask(PermitKind::kSemaphore, 3), 7, "2", {"sem-0000000003"});
  EXPECT_EQ(p.what, ZkPermitPlan::kRefused);
  EXPECT_EQ(p.size, 2u);
  // Without holders the stored size is no one's: the first holder sets it.
  p = simba::plan_zk_permit(permit_ask(PermitKind::kSemaphore, 5), 7, "2", {});
  ASSERT_EQ(p.what, ZkPermitPlan::kGrant);
  EXPECT_EQ(p.permit, 8u);
  EXPECT_EQ(p.data, "5");
  EXPECT_EQ(simba::plan_zk_permit(permit_ask(PermitKind::kSemaphore, 0), 0, "", {}).what,
            ZkPermitPlan::kError);
  EXPECT_EQ(simba::plan_zk_permit(ask2, 3, "two", {}).what, ZkPermitPlan::kError);
  EXPECT_EQ(simba::plan_zk_permit(ask2, INT32_MAX, "2", {}).what, ZkPermitPlan::kError);
}

TEST(ZookeeperPermitPlan, ReadersCarryTheEpochAndWritersLeaveKeepAndDropIntents) {
  using simba::PermitKind;
  using simba::ZkPermitPlan;
  const auto read = permit_ask(PermitKind::kRead);
  ZkPermitPlan p = simba::plan_zk_permit(read, 9, "6", {"read-0000000008"});
  ASSERT_EQ(p.what, ZkPermitPlan::kGrant);
  EXPECT_EQ(p.permit, 10u);
  EXPECT_EQ(p.token, 6u);  // the epoch, unchanged
  EXPECT_EQ(p.data, "6");
  // A try-write leaves nothing; a blocking one leaves an intent, then keeps it.
  EXPECT_EQ(simba::plan_zk_permit(permit_ask(PermitKind::kWrite), 9, "6", {"read-0000000008"}).what,
            ZkPermitPlan::kHeld);
  p = simba::plan_zk_permit(permit_ask(PermitKind::kWrite, 0, true), 9, "6", {"read-0000000008"});
  ASSERT_EQ(p.what, ZkPermitPlan::kIntent);
  EXPECT_EQ(p.permit, 10u);
  EXPECT_EQ(p.data, "6");
  const std::vector<std::string> waiting = {"read-0000000008", "intent-0000000010"};
  p = simba::plan_zk_permit(permit_ask(PermitKind::kWrite, 0, true, 10), 10, "6", waiting);
  EXPECT_EQ(p.what, ZkPermitPlan::kHeld);
  EXPECT_EQ(p.permit, 10u);
  // An intent holds readers back, even a reader of the intent's own session.
  EXPECT_EQ(simba::plan_zk_permit(read, 10, "6", waiting).what, ZkPermitPlan::kHeld);
  // The readers gone, the writer wins, becomes the epoch, drops its intent.
  p = simba::plan_zk_permit(permit_ask(PermitKind::kWrite, 0, true, 10), 10, "6",
                            {"intent-0000000010"});
  ASSERT_EQ(p.what, ZkPermitPlan::kGrant);
  EXPECT_EQ(p.permit, 11u);
  EXPECT_EQ(p.token, 11u);
  EXPECT_EQ(p.data, "11");
  EXPECT_TRUE(p.drop_intent);
  // Another writer's intent does not stop a writer.
  p = simba::plan_zk_permit(permit_ask(PermitKind::kWrite), 10, "6", {"intent-0000000010"});
  EXPECT_EQ(p.what, ZkPermitPlan::kGrant);
  EXPECT_FALSE(p.drop_intent);
  EXPECT_EQ(simba::plan_zk_permit(read, 11, "11", {"write-0000000011"}).what, ZkPermitPlan::kHeld);
}

// --- the shared server ---------------------------------------------------------

class ZookeeperShared : public ::testing::Test {
 protected:
  void SetUp() override {
    url_ = shared_url();
    if (url_.empty()) {
      GTEST_SKIP() << "SIMBA_TEST_ZOOKEEPER_URL is not set: no zookeeper server to test "
                      "(scripts/test.sh starts one)";
    }
    ASSERT_TRUE(hosts_of(url_, &hosts_, &chroot_)) << url_;
  }
  std::string lease_path(const std::string& name) const { return chroot_ + "/leases/" + name; }

  std::string url_, hosts_, chroot_;
};

// The token is the lease node's czxid, and the node is an ephemeral of the
// holding session whose data is the session id.
TEST_F(ZookeeperShared, TokenIsTheLeaseNodesCzxid) {
  Election e;
  Client c;
  ASSERT_EQ(c.open(url_, Timing{2000, 500}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  const std::string name = "zk.czxid." + unique_id();
  ASSERT_EQ(e.start(c, name), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
  RawZk raw(hosts_);
  ASSERT_TRUE(raw.connected());
  struct Stat st {};
  ASSERT_EQ(raw.exists(lease_path(name), &st), ZOK);
  EXPECT_EQ(static_cast<uint64_t>(st.czxid), e.last_elected().token);
  char sid[24];
  std::snprintf(sid, sizeof sid, "%016llx", static_cast<unsigned long long>(st.ephemeralOwner));
  EXPECT_EQ(session_id(c), sid);
}

// Someone deletes our lease node: the next keep-alive no longer lists it and
// the term ends with TAKEN_OVER; the election then wins a new term with a
// larger token.
TEST_F(ZookeeperShared, LeaseNodeDeletedByAnotherClientIsTakenOver) {
  Election e;
  Client c;
  ASSERT_EQ(c.open(url_, Timing{2000, 400}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  const std::string name = "zk.deleted." + unique_id();
  ASSERT_EQ(e.start(c, name), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
  const uint64_t tok1 = e.last_elected().token;

  RawZk raw(hosts_);
  ASSERT_TRUE(raw.connected());
  const int64_t deleted_at = mono_ns();
  ASSERT_EQ(raw.remove(lease_path(name)), ZOK);
  ASSERT_TRUE(e.wait_revoked(1, 5000 * slow_factor()));
  EXPECT_EQ(e.last_revoked().reason, SIMBA_REVOKE_TAKEN_OVER);
  const int64_t took_ms = (e.last_revoked().at_ns - deleted_at) / kMsNs;
  // Seen at the next keep-alive: within one renew period (and its answer).
  EXPECT_LE(took_ms, 400 + 300 * slow_factor()) << took_ms;
  ASSERT_TRUE(e.wait_elected(2, 5000 * slow_factor())) << snapshot(c);
  EXPECT_GT(e.last_elected().token, tok1);
  EXPECT_EQ(simba_client_status(c), SIMBA_SESSION_LIVE);
  EXPECT_EQ(e.pairing_errors(), 0);
}

// A clean stop deletes the lease node; the candidate's exists-watch fires and it
// acquires at once, far sooner than its next attempt (>= renewInterval / 2).
TEST_F(ZookeeperShared, CleanStopIsTakenOverThroughTheWatch) {
  const Timing t{4000, 1000};  // candidates retry after 500..1000 ms
  Election a, b;
  Client ca, cb;
  ASSERT_EQ(ca.open(url_, t), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(cb.open(url_, t), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(ca, 5000 * slow_factor()), SIMBA_OK);
  ASSERT_EQ(simba_client_wait_live(cb, 5000 * slow_factor()), SIMBA_OK);
  const std::string name = "zk.watch." + unique_id();
  ASSERT_EQ(a.start(ca, name), SIMBA_OK);
  ASSERT_TRUE(a.wait_elected(1, 5000 * slow_factor()));
  ASSERT_EQ(b.start(cb, name), SIMBA_OK);
  // b has tried once (Held) and holds its watch: wait out its first attempt.
  ASSERT_TRUE(wait_for([&] { return json_int(snapshot(cb), "acquires") >= 1; }, 5000));
  sleep_ms(100);
  std::vector<int64_t> handover_ms;
  for (int round = 0; round < 3; ++round) {
    Election& from = round % 2 == 0 ? a : b;
    Election& to = round % 2 == 0 ? b : a;
    Client& from_c = round % 2 == 0 ? ca : cb;
    const int before = to.elected_count();
    const int64_t t0 = mono_ns();
    ASSERT_EQ(from.stop(5000 * slow_factor()), SIMBA_OK);
    ASSERT_TRUE(to.wait_elected(before + 1, 5000 * slow_factor()));
    handover_ms.push_back((to.last_elected().at_ns - t0) / kMsNs);
    // The stopped side contends again, and waits on its own watch.
    ASSERT_EQ(from.start(from_c, name), SIMBA_OK);
    sleep_ms(150);
  }
  for (int64_t ms : handover_ms) {
    EXPECT_LT(ms, 250 * slow_factor())
        << "handover took " << ms << " ms; the next attempt would come after >= 500 ms";
  }
}

// Another connection takes the session over with its id and password and
// closes it: the server ends the session; our client learns it at its next
// call: every term ends with SESSION_EXPIRED, and a new session contends again.
TEST_F(ZookeeperShared, SessionClosedFromOutsideEndsWithSessionExpired) {
  EventLog events;  // outlives the client's close
  Election e;
  Client c;
  ASSERT_EQ(c.open(url_, Timing{3000, 300}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(events.attach(c), SIMBA_OK);
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  const std::string sid = session_id(c);
  const std::string name = "zk.expired." + unique_id();
  ASSERT_EQ(e.start(c, name), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
  const uint64_t tok1 = e.last_elected().token;

  clientid_t id;
  id.client_id = static_cast<int64_t>(std::strtoull(sid.c_str(), nullptr, 16));
  session_password(id.client_id, id.passwd);
  // Our client reconnects as soon as the server moves the session to the
  // killer's connection, and may move it back before the killer's close
  // arrives: try again until the session is gone.
  bool killed = false;
  for (int attempt = 0; attempt < 10 && !killed; ++attempt) {
    {
      RawZk killer(hosts_, &id);
      if (!killer.connected()) break;  // expired already: the server refused it
    }                                  // zookeeper_close: the server closes the session
    killed = e.wait_revoked(1, 1000 * slow_factor());
  }
  ASSERT_TRUE(e.wait_revoked(1, 5000 * slow_factor()));
  EXPECT_EQ(e.last_revoked().reason, SIMBA_REVOKE_SESSION_EXPIRED);
  ASSERT_TRUE(e.wait_elected(2, 5000 * slow_factor())) << snapshot(c);
  EXPECT_NE(session_id(c), sid);
  EXPECT_GT(e.last_elected().token, tok1);
  EXPECT_EQ(simba_client_status(c), SIMBA_SESSION_LIVE);
  EXPECT_EQ(events.count(SIMBA_EVENT_SESSION_OPENED), 2);
  EXPECT_GE(events.count(SIMBA_EVENT_SESSION_EXPIRED), 1);
}

// A thousand elections started at once on one client: the acquires queue in
// the client (a bounded number in flight), so that the session's keep-alive is
// never stuck behind them, and every election is won on the first session.
TEST_F(ZookeeperShared, ThousandElectionsKeepTheSession) {
  EventLog events;
  std::vector<std::unique_ptr<Election>> many(1000);
  Client c;
  ASSERT_EQ(c.open(url_, Timing{2000, 500}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(events.attach(c), SIMBA_OK);
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  const std::string sid = session_id(c);
  const std::string base = "zk.many." + unique_id() + ".";
  for (size_t i = 0; i < many.size(); ++i) {
    many[i] = std::make_unique<Election>();
    ASSERT_EQ(many[i]->start(c, base + std::to_string(i)), SIMBA_OK) << simba_last_error();
  }
  for (auto& e : many) ASSERT_TRUE(e->wait_elected(1, 30'000 * slow_factor())) << e->name();
  sleep_ms(1000);  // two renew periods: every term survives them
  for (auto& e : many) EXPECT_EQ(e->revoked_count(), 0) << e->name();
  EXPECT_EQ(session_id(c), sid);
  EXPECT_EQ(events.count(SIMBA_EVENT_SESSION_EXPIRED), 0);
  c.close();
  for (auto& e : many) EXPECT_TRUE(e->all_revoked_once()) << e->name();
}

// A close while requests are in flight (elections just started) frees the
// lease at once, not when the session expires: zookeeper_close() waits for
// the close's answer only until anything is readable, so closing the handle
// with answers still due reset the connection, and the server could drop it
// before it read the close (the session, 30 s here, then kept the lease).
TEST_F(ZookeeperShared, CloseWithRequestsInFlightFreesTheLeaseAtOnce) {
  RawZk raw(hosts_);
  ASSERT_TRUE(raw.connected());
  for (int round = 0; round < 10; ++round) {
    std::vector<std::unique_ptr<Election>> many(20);
    Election held;
    Client c;
    ASSERT_EQ(c.open(url_, Timing{30000, 5000}), SIMBA_OK) << simba_last_error();
    ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
    const std::string name = "zk.closebusy." + unique_id();
    ASSERT_EQ(held.start(c, name), SIMBA_OK) << simba_last_error();
    ASSERT_TRUE(held.wait_elected(1, 5000 * slow_factor()));
    for (size_t i = 0; i < many.size(); ++i) {
      many[i] = std::make_unique<Election>();
      ASSERT_EQ(many[i]->start(c, name + "." + std::to_string(i)), SIMBA_OK);
    }
    c.close();
    struct Stat st {};
    EXPECT_TRUE(wait_for([&] { return raw.exists(lease_path(name), &st) == ZNONODE; },
                         2000 * slow_factor()))
        << "round " << round << ": the lease node outlived its session's close";
  }
}

// A host name goes through uv_getaddrinfo (the client library would resolve
// it with a blocking call): "localhost" works like 127.0.0.1 (the server
// listens on 127.0.0.1 only, so an IPv6 address of the name fails and the
// library moves on to the next one).
TEST_F(ZookeeperShared, HostNameIsResolved) {
  std::string port = hosts_.substr(hosts_.rfind(':') + 1);
  const std::string url = "zookeeper://localhost:" + port + chroot_;
  Election e;
  Client c;
  ASSERT_EQ(c.open(url, Timing{2000, 500}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 10'000 * slow_factor()), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(e.start(c, "zk.hostname." + unique_id()), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
}

// A name that does not resolve: every open fails, nothing blocks (the lookup
// runs on libuv's thread pool), and the client closes cleanly.
TEST_F(ZookeeperShared, UnknownHostNeverLiveClosesCleanly) {
  LogCapture logs;
  simba_config_t* cfg = nullptr;
  ASSERT_EQ(simba_config_new(&cfg), SIMBA_OK);
  ASSERT_EQ(simba_config_set_ms(cfg, "session.lease-duration", 1000), SIMBA_OK);
  ASSERT_EQ(simba_config_set_logger(cfg, &LogCapture::fn, &logs, SIMBA_LOG_DEBUG), SIMBA_OK);
  simba_client_t* c = nullptr;
  ASSERT_EQ(simba_client_open(&c, "zookeeper://no-such-host.invalid:2181/x", cfg), SIMBA_OK)
      << simba_last_error();
  simba_config_free(cfg);
  EXPECT_NE(simba_client_wait_live(c, 1500), SIMBA_OK);
  const int64_t t0 = mono_ns();
  simba_client_close(c);
  EXPECT_LT((mono_ns() - t0) / kMsNs, 2000 * slow_factor());
  // "cannot resolve ..." when the resolver answers within the open's timeout,
  // else the open timed out: either way it failed, and said so.
  EXPECT_TRUE(logs.has("opening a session failed"));
}

// With auth=digest:..., our nodes carry an ACL: another identity (or none) can
// read them but neither delete our lease node nor acquire the lease.
TEST_F(ZookeeperShared, DigestAclKeepsOtherIdentitiesOut) {
  const std::string chroot = "/simba-acl-" + unique_id();
  const std::string alice = "zookeeper://" + hosts_ + chroot + "?auth=digest:alice:alice-pw";
  const std::string bob = "zookeeper://" + hosts_ + chroot + "?auth=digest:bob:bob-pw";
  Election held, other;
  Client ca, cb;
  ASSERT_EQ(ca.open(alice, Timing{2000, 400}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(ca, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  const std::string name = "zk.acl." + unique_id();
  ASSERT_EQ(held.start(ca, name), SIMBA_OK);
  ASSERT_TRUE(held.wait_elected(1, 5000 * slow_factor()));

  const std::string node = chroot + "/leases/" + name;
  {
    RawZk raw(hosts_);
    ASSERT_TRUE(raw.connected());
    ASSERT_EQ(raw.add_auth("bob", "bob-pw"), ZOK);
    struct Stat st {};
    EXPECT_EQ(raw.exists(node, &st), ZOK) << "anyone may read";
    EXPECT_EQ(raw.remove(node), ZNOAUTH);
    EXPECT_EQ(raw.create(chroot + "/leases/intruder", "x"), ZNOAUTH);
  }
  {
    RawZk anonymous(hosts_);
    ASSERT_TRUE(anonymous.connected());
    EXPECT_EQ(anonymous.remove(node), ZNOAUTH);
  }
  // Another Simba identity opens a session (its marker goes under sessions/,
  // which it may not create in either) or fails to; it never wins the lease.
  ASSERT_EQ(cb.open(bob, Timing{2000, 400}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(other.start(cb, name), SIMBA_OK);
  sleep_ms(800);
  EXPECT_EQ(other.elected_count(), 0);
  EXPECT_TRUE(held.leading());
  EXPECT_EQ(held.revoked_count(), 0);
  // The lease is still alice's: a clean stop frees it.
  ASSERT_EQ(held.stop(5000 * slow_factor()), SIMBA_OK);
  RawZk check(hosts_);
  ASSERT_TRUE(check.connected());
  struct Stat st {};
  EXPECT_EQ(check.exists(node, &st), ZNONODE);
}

// --- servers of our own ----------------------------------------------------------

// Two Backends of the shared server, each with a session, for permits.
class ZookeeperPermits : public ZookeeperShared {
 protected:
  void SetUp() override {
    ZookeeperShared::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    a_ = std::make_unique<simba_testing::WatchingBackend>(url_);
    b_ = std::make_unique<simba_testing::WatchingBackend>(url_);
    ASSERT_TRUE(a_->ok() && b_->ok()) << a_->error << b_->error;
    sa = a_->open();
    sb = b_->open();
    ASSERT_FALSE(sa.empty() || sb.empty());
  }
  simba_testing::WatchingBackend& a() { return *a_; }
  simba_testing::WatchingBackend& b() { return *b_; }

  std::unique_ptr<simba_testing::WatchingBackend> a_, b_;
  std::string sa, sb;
};

// A permit is an ephemeral node of its session, named by its kind and id, its
// data the token. Deleted by someone else, it leaves the keep-alive's list
// (its term ends TAKEN_OVER) and its room is free.
TEST_F(ZookeeperPermits, APermitIsAnEphemeralNodeOfItsSession) {
  using simba::PermitKind;
  const std::string name = "zk.permit." + unique_id();
  const simba::AcquireReply p = a().acquire_permit(sa, name, permit_ask(PermitKind::kSemaphore, 1));
  ASSERT_EQ(p.outcome, simba::Outcome::kOk) << p.error;
  const std::string node =
      chroot_ + "/sem/" + name + "/" + simba::zk_permit_child(PermitKind::kSemaphore, p.permit);
  RawZk raw(hosts_);
  ASSERT_TRUE(raw.connected());
  struct Stat st {};
  ASSERT_EQ(raw.exists(node, &st), ZOK) << node;
  char sid[24];
  std::snprintf(sid, sizeof sid, "%016llx", static_cast<unsigned long long>(st.ephemeralOwner));
  EXPECT_EQ(sa, sid);
  EXPECT_EQ(st.dataLength, static_cast<int>(std::to_string(p.token).size()));
  ASSERT_EQ(b().acquire_permit(sb, name, permit_ask(PermitKind::kSemaphore, 1)).outcome,
            simba::Outcome::kHeld);
  ASSERT_EQ(raw.remove(node), ZOK);
  a().run_for(200);
  const simba::KeepAliveReply ka = a().keep_alive(sa);
  ASSERT_EQ(ka.outcome, simba::Outcome::kOk);
  for (const simba::OwnedLease& o : ka.owned) EXPECT_NE(o.permit, p.permit) << "still listed";
  const simba::AcquireReply q = b().acquire_permit(sb, name, permit_ask(PermitKind::kSemaphore, 1));
  ASSERT_EQ(q.outcome, simba::Outcome::kOk) << q.error;
  EXPECT_GT(q.token, p.token);
}

// Each session plans on its own view of a resource node: a view made stale by
// another session's grant loses the version guard and is decided again on
// what the same round trip read; a view stale the other way (an entry gone)
// gets one more round. Never two permits of a semaphore of one.
TEST_F(ZookeeperPermits, AStaleViewLosesTheGuardAndIsDecidedAgain) {
  using simba::Outcome;
  using simba::PermitKind;
  const std::string name = "zk.stale." + unique_id();
  const auto one = permit_ask(PermitKind::kSemaphore, 1);
  const simba::AcquireReply b1 = b().acquire_permit(sb, name, one);
  ASSERT_EQ(b1.outcome, Outcome::kOk) << b1.error;
  ASSERT_EQ(b().release_permit(sb, name, PermitKind::kSemaphore, b1.permit, b1.token),
            Outcome::kOk);
  // b's view: free at version 1. a takes the permit: b's view is stale.
  const simba::AcquireReply a1 = a().acquire_permit(sa, name, one);
  ASSERT_EQ(a1.outcome, Outcome::kOk) << a1.error;
  EXPECT_EQ(b().acquire_permit(sb, name, one).outcome, Outcome::kHeld);
  // b's view now lists a's entry; a releases: b's view is stale the other way.
  ASSERT_EQ(a().release_permit(sa, name, PermitKind::kSemaphore, a1.permit, a1.token),
            Outcome::kOk);
  const simba::AcquireReply b2 = b().acquire_permit(sb, name, one);
  ASSERT_EQ(b2.outcome, Outcome::kOk) << b2.error;
  EXPECT_GT(b2.token, a1.token);
  EXPECT_EQ(a().acquire_permit(sa, name, one).outcome, Outcome::kHeld);
}

// A session that ends on the server (closed from outside here, as an expiry)
// takes its permits and intents with it: the waiters hear it through the
// children watch and win.
TEST_F(ZookeeperPermits, ADeadSessionsEntriesGoWithItsZookeeperSession) {
  using simba::Outcome;
  using simba::PermitKind;
  const std::string name = "zk.dead." + unique_id();
  const std::string sem = simba::permit_resource(PermitKind::kSemaphore, name);
  ASSERT_EQ(a().acquire_permit(sa, name, permit_ask(PermitKind::kSemaphore, 1)).outcome,
            Outcome::kOk);
  ASSERT_EQ(b().acquire_permit(sb, name, permit_ask(PermitKind::kRead)).outcome, Outcome::kOk);
  ASSERT_EQ(a().acquire_permit(sa, name, permit_ask(PermitKind::kWrite, 0, true)).outcome,
            Outcome::kHeld);
  ASSERT_EQ(b().acquire_permit(sb, name, permit_ask(PermitKind::kRead)).outcome, Outcome::kHeld);
  ASSERT_EQ(b().acquire_permit(sb, name, permit_ask(PermitKind::kSemaphore, 1)).outcome,
            Outcome::kHeld);
  b().backend().watch(sem);
  b().run_for(100);
  b().heard.clear();
  clientid_t id;
  id.client_id = static_cast<int64_t>(std::strtoull(sa.c_str(), nullptr, 16));
  session_password(id.client_id, id.passwd);
  {
    RawZk killer(hosts_, &id);  // a's loop does not run: it does not reconnect meanwhile
    ASSERT_TRUE(killer.connected());
  }  // zookeeper_close: the server ends the session and deletes its nodes
  EXPECT_TRUE(b().run_until([&] { return b().heard_of(sem); }, 3000 * slow_factor()));
  EXPECT_EQ(b().acquire_permit(sb, name, permit_ask(PermitKind::kSemaphore, 1)).outcome,
            Outcome::kOk);
  EXPECT_EQ(b().acquire_permit(sb, name, permit_ask(PermitKind::kRead)).outcome, Outcome::kOk)
      << "the dead session's intent still holds readers back";
  b().backend().unwatch(sem);
}

class ZookeeperOwn : public ::testing::Test {
 protected:
  // "small" grants at most 1200 ms; "big" up to 30 s. Started together on first
  // use, shared by every test of the suite, stopped after the last one.
  static void SetUpTestSuite() {
    if (!have_zookeeper()) return;
    small_ = new OwnZk(200, 1200);
    big_ = new OwnZk(200, 30'000);
    launched_ = small_->launch() && big_->launch();
  }
  static void TearDownTestSuite() {
    delete small_;
    delete big_;
    small_ = big_ = nullptr;
  }
  void SetUp() override {
    if (!have_zookeeper()) GTEST_SKIP() << "zookeeper (or java) not installed";
    ASSERT_TRUE(launched_) << "cannot start zookeeper";
  }
  static OwnZk& small() { return *small_; }
  static OwnZk& big() { return *big_; }
  // Runs `call` on a thread while the big server is stopped, until the handle
  // of `c` drops the silent connection, then resumes the server: it applies
  // what `call` sent, whose answer is lost. False if nothing was dropped.
  // Whether the backend read back a write whose answer was lost (the case the
  // two tests below are for), as a line of the test's output.
  static void note_lost_answer_read_back(LoggedClient& c) {
    std::printf("[ note     ] %s\n", c.logs.has("whose answer was lost")
                                         ? "the lost answer's write was read back"
                                         : "the server never applied the write: not read back");
  }
  static bool across_a_dropped_connection(LoggedClient& c, const std::function<void()>& call) {
    big().signal(SIGSTOP);
    std::thread waiter(call);
    const bool dropped = wait_for([&] { return c.logs.has("connection lost, reconnecting"); },
                                  20'000 * slow_factor(), 1);
    big().signal(SIGCONT);
    waiter.join();
    return dropped;
  }

  static OwnZk* small_;
  static OwnZk* big_;
  static bool launched_;
};
OwnZk* ZookeeperOwn::small_ = nullptr;
OwnZk* ZookeeperOwn::big_ = nullptr;
bool ZookeeperOwn::launched_ = false;

// The server grants 1200 ms of the 3000 asked for: two keep-alives at the
// renew interval (1000 ms) no longer fit, so the client renews every third of
// the validity it has, says so once (event and warning), and no term ends
// while the server is healthy, for more than twice the granted time.
TEST_F(ZookeeperOwn, MaxSessionTimeoutBelowTheLeaseShortensTheRenewPeriod) {
  ASSERT_TRUE(small().ready(30'000 * slow_factor())) << "zookeeper did not start";
  LogCapture logs;
  EventLog events;
  Election e;
  simba_config_t* cfg = nullptr;
  ASSERT_EQ(simba_config_new(&cfg), SIMBA_OK);
  ASSERT_EQ(simba_config_set_ms(cfg, "session.lease-duration", 3000), SIMBA_OK);
  ASSERT_EQ(simba_config_set_ms(cfg, "session.renew-interval", 1000), SIMBA_OK);
  ASSERT_EQ(simba_config_set_logger(cfg, &LogCapture::fn, &logs, SIMBA_LOG_DEBUG), SIMBA_OK);
  simba_client_t* c = nullptr;
  const int opened = simba_client_open(&c, small().url().c_str(), cfg);
  simba_config_free(cfg);
  ASSERT_EQ(opened, SIMBA_OK) << simba_last_error();
  // Closed before `logs`, `events` and `e` go out of scope.
  std::unique_ptr<simba_client_t, int (*)(simba_client_t*)> owner(c, &simba_client_close);
  ASSERT_EQ(events.attach(c), SIMBA_OK);
  ASSERT_EQ(simba_client_wait_live(c, 10'000 * slow_factor()), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(e.start(c, "zk.shortened." + unique_id()), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
  const std::string snap = snapshot(c);
  EXPECT_LE(json_int(snap, "remaining_ms"), 1200) << snap;
  const int64_t period = json_int(snap, "renew_period_ms");
  EXPECT_GT(period, 300) << snap;  // about (1200 × 0.99 − 50) / 3
  EXPECT_LT(period, 400) << snap;
  const int64_t ka0 = counter(c, "keep_alives");
  sleep_ms(3000);  // 2.5 × the granted timeout
  const int64_t ka1 = counter(c, "keep_alives");
  EXPECT_EQ(e.revoked_count(), 0) << snapshot(c);
  EXPECT_TRUE(e.leading());
  EXPECT_EQ(simba_client_status(c), SIMBA_SESSION_LIVE);
  EXPECT_GE(ka1 - ka0, 6) << "renewing every third of 1.2 s";
  EXPECT_EQ(events.count(SIMBA_EVENT_SESSION_LEASE_SHORTENED), 1);
  EXPECT_EQ(events.count(SIMBA_EVENT_SESSION_EXPIRED), 0);
  EXPECT_EQ(events.count(SIMBA_EVENT_SESSION_OPENED), 1);
  // The warning goes to the logger once too, naming what was granted.
  EXPECT_TRUE(logs.has("less than two renew intervals")) << logs.all();
  int warnings = 0;
  {
    std::lock_guard<std::mutex> lock(logs.mu);
    for (const std::string& l : logs.lines)
      warnings += l.find("renewing every") != std::string::npos;
  }
  EXPECT_EQ(warnings, 1) << logs.all();
}

// The server stops answering (SIGSTOP) past the session timeout: the term ends
// with DEADLINE_PASSED within about the lease, nothing blocks the client's
// loop meanwhile, and after SIGCONT a new session wins a new term.
TEST_F(ZookeeperOwn, StoppedServerPastTheTimeoutThenNewSession) {
  ASSERT_TRUE(small().ready(30'000 * slow_factor())) << "zookeeper did not start";
  Election e;
  Client c;
  ASSERT_EQ(c.open(small().url(), Timing{1000, 300}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 10'000 * slow_factor()), SIMBA_OK) << simba_last_error();
  const std::string sid1 = session_id(c);
  ASSERT_EQ(e.start(c, "zk.stop." + unique_id()), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
  const uint64_t tok1 = e.last_elected().token;

  const int64_t stop_at = mono_ns();
  small().signal(SIGSTOP);
  ASSERT_TRUE(e.wait_revoked(1, 5000 * slow_factor()));
  const int64_t took_ms = (e.last_revoked().at_ns - stop_at) / kMsNs;
  EXPECT_EQ(e.last_revoked().reason, SIMBA_REVOKE_DEADLINE_PASSED);
  EXPECT_LE(took_ms, 1000 + 500 * slow_factor()) << "revoked " << took_ms << " ms after SIGSTOP";
  // The loop is not blocked (a snapshot is answered by it).
  const int64_t s0 = mono_ns();
  EXPECT_NE(simba_client_status(c), SIMBA_SESSION_LIVE);
  EXPECT_FALSE(snapshot(c).empty());
  EXPECT_LT((mono_ns() - s0) / kMsNs, 200 * slow_factor());
  sleep_ms(800);  // past the session timeout on the server's clock too, still stopped

  small().signal(SIGCONT);
  ASSERT_TRUE(e.wait_elected(2, 15'000 * slow_factor())) << snapshot(c);
  EXPECT_EQ(simba_client_status(c), SIMBA_SESSION_LIVE);
  EXPECT_NE(session_id(c), sid1);
  EXPECT_GT(e.last_elected().token, tok1);
  EXPECT_EQ(e.pairing_errors(), 0);
}

// Issue 44 (ADR 0030): a keep-alive gets no answer (the server stopped);
// then the holder stops and closes as `simba run` does on SIGTERM while the
// server still does not answer. The release times out; the close is not
// reported done until the server has closed the session (a handle closed on a
// connection that does not answer would leave it to expire): it is sent again
// until the session's local deadline, so the lease node goes once the server
// answers again, not when the session expires.
TEST_F(ZookeeperOwn, AStopAndCloseAfterATimedOutKeepAliveFreeTheLeaseOnceTheServerAnswers) {
  ASSERT_TRUE(big().ready(30'000 * slow_factor())) << "zookeeper did not start";
  const std::string name = "zk.stall." + unique_id();
  // A 12 s session; calls time out after 1 s.
  LoggedClient c(big().url(), Timing{12'000, 1000});
  ASSERT_NE(static_cast<simba_client_t*>(c), nullptr) << simba_last_error();
  Election e;
  ASSERT_EQ(e.start(c, name), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(e.wait_elected(1, 10'000 * slow_factor())) << c.logs.all();
  const std::string node = "/simba-own/leases/" + name;
  {
    RawZk raw(big().hosts());
    ASSERT_TRUE(raw.connected());
    struct Stat st {};
    ASSERT_EQ(raw.exists(node, &st), ZOK);
  }
  const int64_t stopped = mono_ms();
  big().signal(SIGSTOP);
  ASSERT_TRUE(wait_for([&] { return simba_client_status(c) == SIMBA_SESSION_SUSPENDED; },
                       4000 * slow_factor(), 1))
      << c.logs.all();
  const StopCloseTimes t = stop_and_close_while_stalled(e, c, 3000, [&] { big().signal(SIGCONT); });
  RawZk raw(big().hosts());
  ASSERT_TRUE(raw.connected());
  struct Stat st {};
  EXPECT_EQ(raw.exists(node, &st), ZNONODE) << c.logs.all();
  EXPECT_GE(t.closed_ms, t.resumed_ms) << "the close gave up while the server did not answer";
  // The session could expire on the server 11 s after the SIGSTOP at the earliest.
  EXPECT_LT(t.closed_ms - stopped, 11'000) << c.logs.all();
}

// tests/support/cut_proxy.py in front of 127.0.0.1:`target`: cut() stalls
// the connections open and closes new ones; heal() closes those it stalled,
// so what they carried is lost (a SIGSTOPped server reads it when resumed),
// and lets new ones pass.
class CutProxy {
 public:
  explicit CutProxy(int target) {
    const std::string here = __FILE__;
    const std::string script = here.substr(0, here.rfind('/')) + "/../support/cut_proxy.py";
    const std::string port = std::to_string(target);
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      close(out[0]);
      close(out[1]);
      execlp("python3", "python3", script.c_str(), port.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    if (FILE* f = fdopen(out[0], "r")) {
      if (pid_ > 0 && fscanf(f, "%d", &port_) != 1) port_ = 0;
      fclose(f);
    } else {
      close(out[0]);
    }
  }
  ~CutProxy() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
  CutProxy(const CutProxy&) = delete;
  CutProxy& operator=(const CutProxy&) = delete;
  int port() const { return port_; }
  void cut() { kill(pid_, SIGUSR1); }
  void heal() { kill(pid_, SIGUSR2); }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

// Issue 44 (ADR 0030): as above, but the holder only stops its election and
// the client stays open, so no close frees the lease: the release that timed
// out is sent again. A SIGSTOPped ZooKeeper still runs that release once
// resumed (it reads what its socket buffered), so the connection is cut by a
// proxy instead, which loses it: the lease node goes by a retry on the
// reconnected session, not by a keep-alive's orphan release nor the
// session's expiry.
TEST_F(ZookeeperOwn, AStopAfterACutKeepAliveFreesTheLeaseByItsRetryWithoutAClose) {
  ASSERT_TRUE(big().ready(30'000 * slow_factor())) << "zookeeper did not start";
  CutProxy proxy(big().port());
  ASSERT_GT(proxy.port(), 0) << "cannot start tests/support/cut_proxy.py";
  const std::string name = "zk.cut.stop." + unique_id();
  // A 16 s session; keep-alives every 2 s, calls time out after 2 s: twenty
  // times the first retry's backoff.
  const Timing timing{16'000, 2000};
  LoggedClient c("zookeeper://127.0.0.1:" + std::to_string(proxy.port()) + "/simba-own", timing);
  ASSERT_NE(static_cast<simba_client_t*>(c), nullptr) << simba_last_error();
  Election e;
  ASSERT_EQ(e.start(c, name), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(e.wait_elected(1, 10'000 * slow_factor())) << c.logs.all();
  const std::string node = "/simba-own/leases/" + name;
  {
    RawZk raw(big().hosts());
    ASSERT_TRUE(raw.connected());
    struct Stat st {};
    ASSERT_EQ(raw.exists(node, &st), ZOK);
  }
  const int64_t cut = mono_ms();
  proxy.cut();
  ASSERT_TRUE(wait_for([&] { return simba_client_status(c) == SIMBA_SESSION_SUSPENDED; },
                       6000 * slow_factor(), 1))
      << c.logs.all();
  std::unique_ptr<RawZk> raw;
  // Healed once a retry too got no answer, before the handle gives up on
  // the connection (two thirds of the session timeout).
  const StopOnlyTimes t = stop_while_stalled(
      e, mono_ms() + 2 * timing.renew_ms + 500, [&] { proxy.heal(); },
      [&] {
        if (!raw) raw = std::make_unique<RawZk>(big().hosts());
        struct Stat st {};
        return raw->connected() && raw->exists(node, &st) == ZNONODE;
      },
      4 * timing.renew_ms);
  expect_freed_by_the_retry(t, c, name, timing.renew_ms);
  // The session could expire on the server 14 s after the cut at the earliest.
  EXPECT_LT(t.freed_ms - cut, 12'000) << c.logs.all();
}

// The server stops answering: the ZooKeeper client drops the connection and
// the local deadline passes (a 4 s margin puts it well before the server's
// expiry of the session, 8 s after its last request). The session's one close
// cannot reach the server. When the server resumes, the handle reconnects to
// the old session: it must close it then, not keep it alive holding the lease
// node of a revoked term (for as long as the client lives, since the handle
// pings it) nor leave it to expire, and the client's new session wins the
// name at once (ADR 0030).
TEST_F(ZookeeperOwn, AnOldSessionWhoseCloseFailedIsClosedWhenItReconnects) {
  ASSERT_TRUE(big().ready(30'000 * slow_factor())) << "zookeeper did not start";
  const std::string name = "zk.old-session." + unique_id();
  Timing timing{8000, 1000};
  timing.margin_ms = 4000;
  LoggedClient c(big().url(), timing);
  ASSERT_NE(static_cast<simba_client_t*>(c), nullptr) << simba_last_error();
  Election e;
  ASSERT_EQ(e.start(c, name), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(e.wait_elected(1, 10'000 * slow_factor())) << c.logs.all();
  const std::string sid1 = session_id(c);
  big().signal(SIGSTOP);
  const bool revoked = e.wait_revoked(1, 10'000 * slow_factor());
  const bool dropped =
      revoked && wait_for([&] { return c.logs.has("connection lost, reconnecting"); },
                          5000 * slow_factor(), 1);
  big().signal(SIGCONT);  // before the server could expire the session
  ASSERT_TRUE(revoked) << c.logs.all();
  ASSERT_TRUE(dropped) << c.logs.all();
  EXPECT_EQ(e.last_revoked().reason, SIMBA_REVOKE_DEADLINE_PASSED);
  const int64_t resumed = mono_ms();
  ASSERT_TRUE(e.wait_elected(2, 15'000 * slow_factor())) << c.logs.all();
  EXPECT_NE(session_id(c), sid1);
  // Before the old session's expiry could have freed the name.
  EXPECT_LT(mono_ms() - resumed, 2000 * slow_factor()) << c.logs.all();
  EXPECT_EQ(e.pairing_errors(), 0);
}

// A permit grant the server applied but whose answer was lost with the
// connection (ZCONNECTIONLOSS): the entry is an ephemeral node of the live
// session, so the session's keep-alive must list it and the core release it
// (ADR 0005), as on the other backends. The grant is sent while the server is
// stopped (it reads its socket's buffer when resumed, after the handle gave
// up on the connection and before the session's expiry). If the backend
// forgets it, the entry fills the semaphore of size 1 until the session ends,
// and the waiting acquire of the same client never wins.
TEST_F(ZookeeperOwn, APermitGrantWhoseAnswerWasLostIsReleasedNotLeaked) {
  ASSERT_TRUE(big().ready(30'000 * slow_factor())) << "zookeeper did not start";
  const std::string name = "zk.lost-grant." + unique_id();
  // A 24 s session: the handle drops a silent connection after 16 s, well
  // before the local deadline and the server's expiry.
  LoggedClient c(big().url(), Timing{24'000, 2000});
  ASSERT_NE(static_cast<simba_client_t*>(c), nullptr) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 10'000 * slow_factor()), SIMBA_OK) << simba_last_error();
  // A first permit and its release: the resource's view is known, so the
  // next acquire sends its grant at once (one multi).
  simba_term_t* first = nullptr;
  ASSERT_EQ(simba_semaphore_acquire(&first, c, name.c_str(), 1, 5000), SIMBA_OK)
      << simba_last_error();
  ASSERT_EQ(simba_lock_release(first), SIMBA_OK);
  sleep_ms(300);  // the entry's delete event reached the view
  int rc = -1000;
  simba_term_t* won = nullptr;
  ASSERT_TRUE(across_a_dropped_connection(c, [&] {
    rc = simba_semaphore_acquire(&won, c, name.c_str(), 1, 30'000 * slow_factor());
  })) << c.logs.all();
  EXPECT_EQ(simba_client_status(c), SIMBA_SESSION_LIVE);
  // What holds the semaphore, when it is not ours.
  std::string rows;
  if (rc != SIMBA_OK) {
    const char* names[] = {name.c_str()};
    char* json = nullptr;
    if (simba_client_inspect_json(c, names, 1, 5000, &json) == SIMBA_OK) rows = json;
    simba_free(json);
  }
  EXPECT_EQ(rc, SIMBA_OK) << "session " << session_id(c) << " and the entries " << rows << "\n"
                          << c.logs.all();
  // Whether the case happened is the server's race: it may see the closed
  // connection before the buffered write, and then never applies it (the
  // acquire is simply sent again). Said, not asserted: it failed so once at
  // load 2 while every check above passed.
  note_lost_answer_read_back(c);
  if (won) {
    simba_lock_release(won);
  }
}

// The same for a lease: an acquire's multi the server applied but whose
// answer was lost leaves the lease node of our live session. The backend reads
// it back once reconnected and lists it, so the next attempt is answered with
// it (ADR 0011) or the core releases it (ADR 0005). Forgotten, every attempt
// found the node "held" and the name stayed blocked for the session's life.
TEST_F(ZookeeperOwn, ALeaseAcquireWhoseAnswerWasLostIsListedNotLeaked) {
  ASSERT_TRUE(big().ready(30'000 * slow_factor())) << "zookeeper did not start";
  const std::string name = "zk.lost-lease." + unique_id();
  // A 24 s session, as above: the handle drops the silent connection after 16 s.
  LoggedClient c(big().url(), Timing{24'000, 2000});
  ASSERT_NE(static_cast<simba_client_t*>(c), nullptr) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 10'000 * slow_factor()), SIMBA_OK) << simba_last_error();
  // A first term and its release: the token node exists, so the next
  // acquire is one multi.
  simba_term_t* first = nullptr;
  ASSERT_EQ(simba_lock_acquire(&first, c, name.c_str(), 5000), SIMBA_OK) << simba_last_error();
  const uint64_t first_token = simba_term_token(first);
  ASSERT_EQ(simba_lock_release(first), SIMBA_OK);
  // The release answered before the stop (an inspect is answered after it on
  // the same connection), so the next acquire is sent to the stopped server
  // rather than held back behind the release.
  const char* names[] = {name.c_str()};
  ASSERT_TRUE(wait_for(
      [&] {
        char* json = nullptr;
        const bool free = simba_client_inspect_json(c, names, 1, 5000, &json) == SIMBA_OK &&
                          std::string(json).find("\"holder\":null") != std::string::npos;
        simba_free(json);
        return free;
      },
      5000 * slow_factor(), 20))
      << c.logs.all();
  const std::string session = session_id(c);
  int rc = -1000;
  simba_term_t* won = nullptr;
  ASSERT_TRUE(across_a_dropped_connection(c, [&] {
    rc = simba_lock_acquire(&won, c, name.c_str(), 30'000 * slow_factor());
  })) << c.logs.all();
  // The acquire may be answered before a keep-alive follows the reconnection.
  EXPECT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << c.logs.all();
  EXPECT_EQ(session_id(c), session) << "the session must survive for the case to mean anything";
  EXPECT_EQ(rc, SIMBA_OK) << c.logs.all();
  // Whether the case happened is the server's race: it may see the closed
  // connection before the buffered write, and then never applies it (the
  // acquire is simply sent again). Said, not asserted: it failed so once at
  // load 2 while every check above passed.
  note_lost_answer_read_back(c);
  if (won) {
    EXPECT_GT(simba_term_token(won), first_token);
    simba_lock_release(won);
  }
}

// The server is killed and restarted on the same data within the session
// timeout: the client reconnects to the same session (the server re-arms it
// from its log), and the term never ends.
TEST_F(ZookeeperOwn, QuickServerRestartKeepsTheSessionAndTheTerm) {
  ASSERT_TRUE(big().ready(30'000 * slow_factor())) << "zookeeper did not start";
  EventLog events;
  Election e;
  Client c;
  // A lease comfortably longer than a JVM restart on a busy machine.
  ASSERT_EQ(c.open(big().url(), Timing{12'000, 1000}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(events.attach(c), SIMBA_OK);
  ASSERT_EQ(simba_client_wait_live(c, 10'000 * slow_factor()), SIMBA_OK) << simba_last_error();
  const std::string sid = session_id(c);
  ASSERT_EQ(e.start(c, "zk.restart." + unique_id()), SIMBA_OK) << simba_last_error();
  ASSERT_TRUE(e.wait_elected(1, 5000 * slow_factor()));
  const int64_t keep_alives = counter(c, "keep_alives");

  const int64_t t0 = mono_ns();
  big().crash();
  ASSERT_TRUE(big().launch());
  ASSERT_TRUE(big().ready(30'000 * slow_factor())) << "zookeeper did not restart";
  const int64_t restart_ms = (mono_ns() - t0) / kMsNs;
  // A keep-alive succeeds again on the same session.
  ASSERT_TRUE(wait_for(
      [&] {
        return simba_client_status(c) == SIMBA_SESSION_LIVE &&
               counter(c, "keep_alives") >= keep_alives + 2;
      },
      10'000 * slow_factor()))
      << snapshot(c);
  sleep_ms(1200);  // one more renew period: still fine
  EXPECT_EQ(session_id(c), sid) << "restart took " << restart_ms << " ms";
  EXPECT_EQ(e.revoked_count(), 0) << snapshot(c);
  EXPECT_EQ(e.elected_count(), 1);
  EXPECT_TRUE(e.leading());
  EXPECT_EQ(events.count(SIMBA_EVENT_SESSION_EXPIRED), 0);
  EXPECT_EQ(events.count(SIMBA_EVENT_SESSION_OPENED), 1);
}

}  // namespace

#endif  // SIMBA_WITH_ZOOKEEPER
