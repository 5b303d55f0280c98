// redis+sentinel:// (ADR 0025): URL parsing (no server), then, on 1 primary +
// 1 replica + 3 Sentinels of the test's own on loopback: a client leads on the
// primary the Sentinels name, its writes reach the replica before they count
// (wait_replicas), it follows a failover (kill -9 of the primary, and a
// SENTINEL FAILOVER whose old primary still answers: +switch-master), a
// replica named as the primary is refused (ROLE), and a write no replica
// acknowledges does not count.
#ifdef SIMBA_WITH_REDIS

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "backend/redis/redis_url.h"
#include "backends/redis_servers.h"
#include "backends/simba_testing.h"
#include "simba.h"

namespace {

using namespace simba_testing;
using redis_servers::have_redis_server;
using redis_servers::OwnServer;
using redis_servers::Sync;

// --- the URL ---------------------------------------------------------------------

simba::RedisUrl parsed(const std::string& url) {
  simba::RedisUrl u;
  std::string err;
  EXPECT_TRUE(simba::parse_redis_url(url, &u, &err)) << url << ": " << err;
  return u;
}

std::string refusal(const std::string& url) {
  simba::RedisUrl u;
  std::string err;
  EXPECT_FALSE(simba::parse_redis_url(url, &u, &err)) << url;
  return err;
}

TEST(RedisSentinelUrl, ReadsTheSentinelsTheMasterAndTheOptions) {
  const auto u = parsed(
      "redis+sentinel://:pw@10.0.0.1,sentinel-2:26380,[::1]:26381/mymaster/3?prefix=app&"
      "sentinel_password=spw&sentinel_user=admin&wait_replicas=1&wait_timeout_ms=250");
  EXPECT_TRUE(u.sentinel);
  ASSERT_EQ(u.sentinels.size(), 3u);
  EXPECT_EQ(u.sentinels[0], simba::RedisUrl::Host("10.0.0.1", 26379));
  EXPECT_EQ(u.sentinels[1], simba::RedisUrl::Host("sentinel-2", 26380));
  EXPECT_EQ(u.sentinels[2], simba::RedisUrl::Host("::1", 26381));
  EXPECT_EQ(u.master_name, "mymaster");
  EXPECT_EQ(u.db, 3);
  EXPECT_EQ(u.prefix, "app");
  EXPECT_EQ(u.password, "pw");
  EXPECT_EQ(u.sentinel_user, "admin");
  EXPECT_EQ(u.sentinel_password, "spw");
  EXPECT_EQ(u.wait_replicas, 1);
  EXPECT_EQ(u.wait_timeout_ms, 250);

  const auto plain = parsed("redis+sentinel://127.0.0.1/m");
  EXPECT_EQ(plain.db, 0);
  EXPECT_EQ(plain.wait_replicas, 0);
  EXPECT_FALSE(plain.has_password);
}

TEST(RedisSentinelUrl, RefusesWhatItCannotUseAndSaysWhy) {
  EXPECT_NE(refusal("redis+sentinel://127.0.0.1").find("needs the master's name"),
            std::string::npos);
  EXPECT_NE(refusal("redis+sentinel://127.0.0.1/a b").find("needs the master's name"),
            std::string::npos);
  EXPECT_NE(refusal("redis+sentinel://127.0.0.1,/m").find("has no host"), std::string::npos);
  EXPECT_NE(refusal("redis+sentinel://127.0.0.1:0/m").find("port must be"), std::string::npos);
  EXPECT_NE(refusal("redis+sentinel://h/m/x").find("database number"), std::string::npos);
  EXPECT_NE(refusal("redis+sentinel://h/m?wait_replicas=101").find("wait_replicas"),
            std::string::npos);
  EXPECT_NE(refusal("redis+sentinel://h/m?wait_timeout_ms=0").find("wait_timeout_ms"),
            std::string::npos);
  EXPECT_NE(refusal("redis+sentinel://h/m?tls_ca=x").find("no TLS"), std::string::npos);
  const std::string unknown = refusal("redis+sentinel://h/m?master=m");
  EXPECT_NE(unknown.find("known: prefix, sentinel_user, sentinel_password, wait_replicas"),
            std::string::npos)
      << unknown;
  // wait_replicas is a Sentinel option: a single server has no replica to name.
  EXPECT_NE(refusal("redis://h?wait_replicas=1").find("unknown parameter"), std::string::npos);
}

TEST(RedisSentinelUrl, HidesBothPasswords) {
  const std::string shown =
      simba::redact_url("redis+sentinel://u:secret1@h1,h2/m?sentinel_password=secret2");
  EXPECT_EQ(shown.find("secret1"), std::string::npos) << shown;
  EXPECT_EQ(shown.find("secret2"), std::string::npos) << shown;
  const std::string err = refusal("redis+sentinel://u:secret1@h1/m?sentinel_password=secret2&x=1");
  EXPECT_EQ(err.find("secret"), std::string::npos) << err;
}

// --- a primary, a replica and three Sentinels -------------------------------------

constexpr char kMaster[] = "mymaster";

// The lease's token as a server stores it ("" when absent).
std::string stored_token(int port, const std::string& name) {
  return Sync("127.0.0.1", port).cmd({"HGET", "simba:lease:" + name, "token"});
}

class RedisSentinel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_redis_server()) GTEST_SKIP() << "redis-server not installed";
    // No wait before a full sync (5 s by default, for more replicas to join):
    // either server may be the primary a replica syncs from.
    const std::vector<std::string> durable = {
        "--appendonly", "yes", "--appendfsync", "always", "--repl-diskless-sync-delay", "0"};
    primary_ = std::make_unique<OwnServer>(free_port(), durable);
    ASSERT_TRUE(primary_->start());
    std::vector<std::string> replica_args = durable;
    replica_args.insert(replica_args.end(),
                        {"--replicaof", "127.0.0.1", std::to_string(primary_->port())});
    replica_ = std::make_unique<OwnServer>(free_port(), replica_args);
    ASSERT_TRUE(replica_->start());
    // Down after 400 ms: a failover in about 2 s. The config is the
    // Sentinel's own file (it rewrites it as it learns the topology).
    const std::string config = std::string("sentinel monitor ") + kMaster + " 127.0.0.1 " +
                               std::to_string(primary_->port()) + " 2\n" +
                               "sentinel down-after-milliseconds " + kMaster + " 400\n" +
                               "sentinel failover-timeout " + kMaster + " 4000\n";
    for (int i = 0; i < 3; ++i) {
      sentinels_.push_back(
          std::make_unique<OwnServer>(free_port(), std::vector<std::string>{"--sentinel"}, config));
      ASSERT_TRUE(sentinels_.back()->start());
    }
    // Each Sentinel must know the replica and the two others (hello messages
    // every 2 s) before a failover can be agreed on.
    ASSERT_TRUE(wait_for([&] { return topology_known(); }, 20'000, 100))
        << Sync("127.0.0.1", sentinels_[0]->port()).cmd({"SENTINEL", "master", kMaster});
  }

  bool topology_known() {
    for (auto& s : sentinels_) {
      const std::string m = Sync("127.0.0.1", s->port()).cmd({"SENTINEL", "master", kMaster});
      if (m.find("num-slaves 1") == std::string::npos ||
          m.find("num-other-sentinels 2") == std::string::npos) {
        return false;
      }
    }
    return Sync("127.0.0.1", replica_->port())
               .cmd({"INFO", "replication"})
               .find("master_link_status:up") != std::string::npos;
  }

  std::string url(const std::string& query = "") const {
    std::string u = "redis+sentinel://";
    for (size_t i = 0; i < sentinels_.size(); ++i) {
      u += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(sentinels_[i]->port());
    }
    return u + "/" + kMaster + query;
  }

  // The port the (first) Sentinel names as the primary's now.
  int named_primary() {
    const std::string a = Sync("127.0.0.1", sentinels_[0]->port())
                              .cmd({"SENTINEL", "get-master-addr-by-name", kMaster});
    const size_t sp = a.find(' ');
    return sp == std::string::npos ? -1 : std::atoi(a.c_str() + sp + 1);
  }

  // A lease long enough for a failover (about 2 s, more on a loaded
  // machine) to fit in it: the term outlives the failover only if the
  // promoted replica still holds the session when the client reaches it.
  static Timing timing() {
    Timing t(8000, 800);
    t.margin_ms = 100;
    return t;
  }

  // Waits until the replica has the lease `name` with `token` (and so the
  // session before it: the stream is in order). A replica's link is up as
  // soon as it loaded the primary's snapshot, but the primary holds the
  // writes made since until the replica's first acknowledgement reaches it:
  // a failover before they leave loses them, as it may any asynchronous
  // replica's last writes (WAIT is the remedy: wait_replicas=N). A test about
  // following a failover starts once they are there.
  bool replica_has(const std::string& name, uint64_t token) {
    return wait_for([&] { return stored_token(replica_->port(), name) == std::to_string(token); },
                    10'000, 5);
  }

  // The term lives as long as its session, wherever the primary is; if it
  // does not, the failure says what the servers saw.
  void expect_leading_for(const Election& e, LogCapture& logs, int64_t ms) {
    const int64_t until = mono_ms() + ms;
    while (mono_ms() < until && e.leading())
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const bool kept = e.leading() && e.revoked_count() == 0 && e.elected_count() == 1;
    EXPECT_TRUE(kept) << "leading " << e.leading() << ", revoked " << e.revoked_count()
                      << ", elected " << e.elected_count() << "\n"
                      << logs.all() << (kept ? std::string() : servers_report());
  }

  // What the servers said, for a failure's message: how the replica left
  // its primary and what it holds, and each Sentinel's view of the failover.
  std::string servers_report() const {
    std::string out = "--- replica :" + std::to_string(replica_->port()) + "\n";
    Sync r("127.0.0.1", replica_->port());
    for (const char* section : {"replication", "stats", "keyspace"})
      out += r.cmd({"INFO", section}) + "\n";
    out += tail(replica_->log_text(), 40);
    for (const auto& s : sentinels_)
      out += "--- Sentinel :" + std::to_string(s->port()) + "\n" + tail(s->log_text(), 30);
    return out;
  }

  static std::string tail(const std::string& text, int lines) {
    size_t at = text.size();
    while (lines-- > 0 && at > 0) at = text.rfind('\n', at - 1);
    return text.substr(at == std::string::npos ? 0 : at) + "\n";
  }

  std::unique_ptr<OwnServer> primary_, replica_;
  std::vector<std::unique_ptr<OwnServer>> sentinels_;
};

TEST_F(RedisSentinel, LeadsOnThePrimaryAndTheReplicaHasTheTermBeforeItCounts) {
  LoggedClient c(url("?wait_replicas=1"), timing());
  ASSERT_NE(static_cast<simba_client_t*>(c), nullptr);
  Election e;
  ASSERT_EQ(e.start(c, "job"), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 10'000)) << c.logs.all();
  const std::string token = std::to_string(e.last_elected().token);
  EXPECT_EQ(stored_token(primary_->port(), "job"), token);
  // WAIT answered before the term was granted: the replica has it already.
  EXPECT_EQ(stored_token(replica_->port(), "job"), token);
}

// Without WAIT: once the replica has the session and the lease, the term
// outlives the kill of the primary.
TEST_F(RedisSentinel, AKilledPrimaryIsReplacedAndTheTermOutlivesIt) {
  LoggedClient c(url(), timing());
  Election e;
  ASSERT_EQ(e.start(c, "job"), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 10'000)) << c.logs.all();
  const uint64_t token = e.last_elected().token;
  ASSERT_TRUE(replica_has("job", token)) << servers_report();
  primary_->crash();
  ASSERT_TRUE(wait_for([&] { return named_primary() == replica_->port(); }, 20'000, 50))
      << "no failover";
  // It moved (on +switch-master, or on asking again after a refused connect).
  const std::string moved = "redis 127.0.0.1:" + std::to_string(replica_->port());
  ASSERT_TRUE(wait_for([&] { return c.logs.has(moved); }, 10'000, 20)) << c.logs.all();
  expect_leading_for(e, c.logs, 5000);
  EXPECT_EQ(stored_token(replica_->port(), "job"), std::to_string(token));
}

// SENTINEL FAILOVER: the old primary stays up (Sentinel turns it into a
// replica); +switch-master moves the client, and the term goes on.
TEST_F(RedisSentinel, SwitchMasterMovesAClientWhoseOldPrimaryStillAnswers) {
  LoggedClient c(url(), timing());
  Election e;
  ASSERT_EQ(e.start(c, "job"), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 10'000)) << c.logs.all();
  ASSERT_TRUE(replica_has("job", e.last_elected().token)) << servers_report();
  const std::string moved =
      "Sentinel: the primary moved to 127.0.0.1:" + std::to_string(replica_->port());
  EXPECT_EQ(Sync("127.0.0.1", sentinels_[0]->port()).cmd({"SENTINEL", "FAILOVER", kMaster}), "OK");
  ASSERT_TRUE(wait_for([&] { return c.logs.has(moved); }, 20'000, 20)) << c.logs.all();
  expect_leading_for(e, c.logs, 5000);
  EXPECT_EQ(Sync("127.0.0.1", replica_->port()).cmd({"ROLE"}).compare(0, 6, "master"), 0);
}

// With wait_replicas=1 and the only replica promoted, no write counts until
// the old primary is back as a replica (the price of the guarantee, as with a
// synchronous standby); then the client leads again, its tokens never back.
TEST_F(RedisSentinel, WithWaitWritesStopUntilAReplicaIsBack) {
  LoggedClient c(url("?wait_replicas=1"), timing());
  Election e;
  ASSERT_EQ(e.start(c, "job"), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 10'000)) << c.logs.all();
  const uint64_t first = e.last_elected().token;
  primary_->crash();
  ASSERT_TRUE(wait_for([&] { return named_primary() == replica_->port(); }, 20'000, 50))
      << "no failover";
  ASSERT_TRUE(wait_for([&] { return c.logs.has("0 of 1 replicas acknowledged"); }, 10'000, 20))
      << c.logs.all();
  ASSERT_TRUE(primary_->start());  // Sentinel makes it a replica of the new primary
  ASSERT_TRUE(wait_for([&] { return e.leading() && e.last_elected().token >= first; }, 30'000, 50))
      << c.logs.all();
  uint64_t last = 0;
  for (const auto& t : e.elected()) {
    EXPECT_GT(t.token, last);
    last = t.token;
  }
  EXPECT_EQ(e.pairing_errors(), 0);
}

TEST_F(RedisSentinel, AWriteNoReplicaAcknowledgesDoesNotCount) {
  replica_->signal(SIGSTOP);
  LoggedClient c(url("?wait_replicas=1&wait_timeout_ms=200"), timing());
  Election e;
  ASSERT_EQ(e.start(c, "job"), SIMBA_OK);
  EXPECT_TRUE(wait_for([&] { return c.logs.has("0 of 1 replicas acknowledged"); }, 10'000, 20))
      << c.logs.all();
  EXPECT_EQ(e.elected_count(), 0);
  replica_->signal(SIGCONT);
  EXPECT_TRUE(e.wait_elected(1, 15'000)) << c.logs.all();
}

// A "Sentinel" that names the replica as the primary (a stale Sentinel, or
// one asked mid-failover): what ROLE is there for.
class LyingSentinel {
 public:
  explicit LyingSentinel(int replica_port) : port_(free_port()) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port_));
    const int on = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd_, 16) != 0) return;
    const std::string p = std::to_string(replica_port);
    answer_ = "*2\r\n$9\r\n127.0.0.1\r\n$" + std::to_string(p.size()) + "\r\n" + p + "\r\n";
    thread_ = std::thread([this] { serve(); });
  }
  ~LyingSentinel() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (int fd : conns_) close(fd);
    close(fd_);
  }
  int port() const { return port_; }
  int asked() const { return asked_; }

 private:
  // Every command gets the same answer (a SUBSCRIBE too: the client ignores
  // what is not a +switch-master message).
  void serve() {
    while (!stop_) {
      std::vector<struct pollfd> fds = {{fd_, POLLIN, 0}};
      for (int fd : conns_) fds.push_back({fd, POLLIN, 0});
      if (poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents & POLLIN) conns_.push_back(accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC));
      for (size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
        char buf[512];
        const ssize_t n = read(fds[i].fd, buf, sizeof buf);
        if (n <= 0) continue;
        if (std::string(buf, static_cast<size_t>(n)).find("get-master-addr-by-name") !=
            std::string::npos) {
          ++asked_;
        }
        if (write(fds[i].fd, answer_.data(), answer_.size()) < 0) continue;
      }
    }
  }

  int port_;
  int fd_ = -1;
  std::string answer_;
  std::vector<int> conns_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> asked_{0};
};

TEST_F(RedisSentinel, AReplicaNamedAsThePrimaryIsRefusedAndTheNextSentinelAsked) {
  LyingSentinel liar(replica_->port());
  // The liar first: the client asks it, finds a replica, and moves on.
  const std::string u = "redis+sentinel://127.0.0.1:" + std::to_string(liar.port()) + "," +
                        url().substr(std::strlen("redis+sentinel://"));
  LoggedClient c(u, timing());
  Election e;
  ASSERT_EQ(e.start(c, "job"), SIMBA_OK);
  ASSERT_TRUE(e.wait_elected(1, 10'000)) << c.logs.all();
  EXPECT_GE(liar.asked(), 1);
  EXPECT_TRUE(c.logs.has("is a slave, not the primary")) << c.logs.all();
  EXPECT_EQ(stored_token(primary_->port(), "job"), std::to_string(e.last_elected().token));
}

}  // namespace

#endif  // SIMBA_WITH_REDIS
