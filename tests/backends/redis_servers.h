// Redis servers and a synchronous connection for the Redis-specific tests
// (redis_test.cpp, redis_sentinel_test.cpp): each test starts the servers it
// needs on free loopback ports and stops them.
#ifndef SIMBA_TESTS_BACKENDS_REDIS_SERVERS_H
#define SIMBA_TESTS_BACKENDS_REDIS_SERVERS_H

#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/simba_testing.h"

namespace redis_servers {

using simba_testing::wait_for;

// A synchronous hiredis connection, for poking at the server.
class Sync {
 public:
  explicit Sync(const std::string& host, int port) {
    struct timeval tv = {2, 0};
    c_ = redisConnectWithTimeout(host.c_str(), port, tv);
    if (c_ && !c_->err) redisSetTimeout(c_, tv);
  }
  ~Sync() {
    if (c_) redisFree(c_);
  }
  bool ok() const { return c_ && !c_->err; }
  // Runs a command; returns the reply as text ("" for nil, "ERR..." for errors,
  // an array's elements joined by spaces).
  std::string cmd(const std::vector<std::string>& args) {
    if (!ok()) return "!not connected";
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c_, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (!r) return "!no reply";
    const std::string out = text(r);
    freeReplyObject(r);
    return out;
  }

 private:
  static std::string text(const redisReply* r) {
    if (r->type == REDIS_REPLY_INTEGER) return std::to_string(r->integer);
    if (r->type == REDIS_REPLY_ARRAY) {
      std::string out;
      for (size_t i = 0; i < r->elements; ++i) out += (i ? " " : "") + text(r->element[i]);
      return out;
    }
    return r->str ? std::string(r->str, r->len) : std::string();
  }

 private:
  redisContext* c_ = nullptr;
};

// A redis-server of the test's own, on 127.0.0.1:port, stopped at the end.
// `config`, when given, is written to a file the server reads first (what a
// Sentinel needs: it rewrites its file), `extra` follows the defaults.
class OwnServer {
 public:
  explicit OwnServer(int port, std::vector<std::string> extra = {}, std::string config = "")
      : port_(port), extra_(std::move(extra)), config_(std::move(config)) {}
  ~OwnServer() { stop(); }
  bool start() {
    if (dir_.empty()) {
      char dir_tmpl[] = "/tmp/simba-redis-test.XXXXXX";
      if (!mkdtemp(dir_tmpl)) return false;
      dir_ = dir_tmpl;
    }
    if (!config_.empty()) {
      FILE* f = std::fopen((dir_ + "/redis.conf").c_str(), "w");
      if (!f) return false;
      std::fputs(config_.c_str(), f);
      std::fclose(f);
    }
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      const std::string port = std::to_string(port_);
      const std::string log = dir_ + "/redis.log";
      std::vector<std::string> args = {"redis-server"};
      if (!config_.empty()) args.push_back(dir_ + "/redis.conf");
      args.insert(args.end(), {"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly",
                               "no", "--dir", dir_, "--logfile", log, "--daemonize", "no"});
      args.insert(args.end(), extra_.begin(), extra_.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(&a[0]);
      argv.push_back(nullptr);
      execvp("redis-server", argv.data());
      _exit(127);
    }
    // PONG, or NOAUTH when the server wants a password: it answers either way.
    return wait_for(
        [&] {
          const std::string r = Sync("127.0.0.1", port_).cmd({"PING"});
          return r == "PONG" || r.compare(0, 6, "NOAUTH") == 0;
        },
        10'000, 20);
  }
  void signal(int sig) {
    if (pid_ > 0) kill(pid_, sig);
  }
  // SIGKILL, keeping the data dir: the next start() restarts on the same files.
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
      kill(pid_, SIGTERM);
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
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  std::string log_text() const {
    std::string out;
    if (FILE* f = std::fopen((dir_ + "/redis.log").c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
      std::fclose(f);
    }
    return out;
  }

 private:
  int port_;
  std::vector<std::string> extra_;
  std::string config_;
  pid_t pid_ = -1;
  std::string dir_;
};

inline bool have_redis_server() {
  return std::system("command -v redis-server >/dev/null 2>&1") == 0;
}

}  // namespace redis_servers

#endif
