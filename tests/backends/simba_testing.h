// Helpers for tests/backends: the public C API (simba.h) only, so the same
// helpers serve the conformance suite on every backend. Time is measured with
// CLOCK_MONOTONIC; waits are bounded polls on a condition, never fixed sleeps
// used as assertions.
#ifndef SIMBA_TESTS_BACKENDS_SIMBA_TESTING_H
#define SIMBA_TESTS_BACKENDS_SIMBA_TESTING_H

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "simba.h"

namespace simba_testing {

// ---------------------------------------------------------------------------
// Time

inline int64_t mono_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<int64_t>(ts.tv_nsec);
}
inline int64_t mono_ms() { return mono_ns() / 1'000'000; }
constexpr int64_t kMsNs = 1'000'000;

inline void sleep_ms(int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Polls `pred` every `poll_ms` until it holds or `timeout_ms` passed; returns
// whether it held (checked once more at the end).
template <typename Pred>
bool wait_for(Pred pred, int64_t timeout_ms, int64_t poll_ms = 2) {
  const int64_t until = mono_ns() + timeout_ms * kMsNs;
  for (;;) {
    if (pred()) return true;
    if (mono_ns() >= until) return pred();
    sleep_ms(poll_ms);
  }
}

// Under a sanitizer everything runs slower: scale the generous timeouts, never
// the bounds a test proves.
inline int64_t slow_factor() {
  const char* s = std::getenv("SIMBA_SANITIZER");
  if (s && std::string(s) == "thread") return 4;
  if (s && *s) return 2;
  return 1;
}

// Joins a thread when leaving scope (also when an ASSERT returns early), after
// setting its stop flag.
class ThreadGuard {
 public:
  ThreadGuard(std::thread& th, std::atomic<bool>& stop) : th_(th), stop_(stop) {}
  ThreadGuard(const ThreadGuard&) = delete;
  ThreadGuard& operator=(const ThreadGuard&) = delete;
  ~ThreadGuard() { join(); }
  void join() {
    stop_ = true;
    if (th_.joinable()) th_.join();
  }

 private:
  std::thread& th_;
  std::atomic<bool>& stop_;
};

// The threads a kind of callback (or a host's submit) was called on, and how often.
struct ThreadsSeen {
  std::mutex mu;
  std::set<std::thread::id> threads;
  int calls = 0;
  void note() {
    std::lock_guard<std::mutex> lock(mu);
    threads.insert(std::this_thread::get_id());
    ++calls;
  }
  bool includes(std::thread::id id) {
    std::lock_guard<std::mutex> lock(mu);
    return threads.count(id) != 0;
  }
  size_t distinct() {
    std::lock_guard<std::mutex> lock(mu);
    return threads.size();
  }
  int count() {
    std::lock_guard<std::mutex> lock(mu);
    return calls;
  }
};

// ---------------------------------------------------------------------------
// Unique names, so that tests (and runs against a persistent server) never share
// a lease name or a memory store.

inline std::string unique_id() {
  static std::atomic<unsigned> counter{0};
  static const unsigned nonce = [] {
    std::random_device rd;
    return static_cast<unsigned>(rd());
  }();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%ld-%08x-%u", static_cast<long>(getpid()), nonce,
                counter.fetch_add(1));
  return buf;
}

// ---------------------------------------------------------------------------
// The backends a suite runs on (Conformance, EnginePermits): memory:// always,
// each real server when its URL is in the environment (scripts/test.sh starts
// the servers and sets them).

struct BackendParam {
  std::string label;  // test name suffix
  std::string env;    // the variable that names the server ("" for memory)
  std::string url;    // "" when the variable is unset: the tests skip
};

inline std::vector<BackendParam> ConformanceBackends() {
  std::vector<BackendParam> out;
  out.push_back({"memory", "", "memory://"});
  const struct {
    const char* label;
    const char* env;
  } servers[] = {
      {"redis", "SIMBA_TEST_REDIS_URL"},
      {"postgresql", "SIMBA_TEST_POSTGRES_URL"},
      {"zookeeper", "SIMBA_TEST_ZOOKEEPER_URL"},
      {"redis_sentinel", "SIMBA_TEST_REDIS_SENTINEL_URL"},
      {"etcd", "SIMBA_TEST_ETCD_URL"},
  };
  for (const auto& s : servers) {
    const char* url = std::getenv(s.env);
    out.push_back({s.label, s.env, url && *url ? url : ""});
  }
  return out;
}

// Names the backend in gtest's messages instead of dumping the struct's bytes.
inline void PrintTo(const BackendParam& p, std::ostream* os) { *os << p.label; }
inline std::string backend_test_name(const ::testing::TestParamInfo<BackendParam>& info) {
  return info.param.label;
}

// Why a test on `p` is skipped ("" when it runs): its variable is unset, or
// the library was built without the backend's client library (a URL in the
// environment does not make such a backend fail every test).
inline std::string backend_skip_reason(const BackendParam& p) {
  if (p.url.empty()) {
    return p.env + " is not set: no " + p.label + " server to test (scripts/test.sh starts one)";
  }
  static std::mutex mu;
  static std::map<std::string, bool> known;
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(p.label);
  if (it == known.end()) {
    simba_client_t* c = nullptr;
    const bool ok = simba_client_open(&c, p.url.c_str(), nullptr) != SIMBA_EUNSUPPORTED;
    simba_client_close(c);
    it = known.emplace(p.label, ok).first;
  }
  return it->second ? "" : p.label + " is not built into this library (" + p.env + " is set)";
}

// The URL a test of `id` uses: memory:// clients of one process share a store
// per NAME, so one per test; a server's URL as it is.
inline std::string backend_test_url(const BackendParam& p, const std::string& id,
                                    const std::string& prefix) {
  return p.label == "memory" ? "memory://" + prefix + id : p.url;
}

// ---------------------------------------------------------------------------
// Snapshot JSON (flat lookups are enough: the keys used here are unique).

inline std::string snapshot(simba_client_t* c) {
  char* s = simba_client_snapshot_json(c);
  if (!s) return {};
  std::string out(s);
  simba_free(s);
  return out;
}

// The string value of the first "key":"..." in `json`; empty if absent.
inline std::string json_string(const std::string& json, const std::string& key) {
  const std::string pat = "\"" + key + "\":\"";
  const size_t at = json.find(pat);
  if (at == std::string::npos) return {};
  const size_t start = at + pat.size();
  const size_t end = json.find('"', start);
  return end == std::string::npos ? std::string() : json.substr(start, end - start);
}

// The integer value of the first "key":N in `json`; -1 if absent.
inline int64_t json_int(const std::string& json, const std::string& key) {
  const std::string pat = "\"" + key + "\":";
  const size_t at = json.find(pat);
  if (at == std::string::npos) return -1;
  return std::strtoll(json.c_str() + at + pat.size(), nullptr, 10);
}

inline std::string session_id(simba_client_t* c) { return json_string(snapshot(c), "id"); }
inline int64_t counter(simba_client_t* c, const char* name) { return json_int(snapshot(c), name); }

// ---------------------------------------------------------------------------
// Configuration

struct Timing {
  Timing() = default;
  Timing(int64_t lease, int64_t renew) : lease_ms(lease), renew_ms(renew) {}

  int64_t lease_ms = 1000;
  int64_t renew_ms = 200;
  int64_t margin_ms = -1;       // -1: default (50 ms)
  int64_t min_backoff_ms = -1;  // -1: default (100 ms)
  double drift = -1;            // <0: default (0.01)
  // Any other simba_config_set() keys, e.g. {"loop.mode", "external"}.
  std::vector<std::pair<std::string, std::string>> settings;
};

// ---------------------------------------------------------------------------
// Client: RAII over simba_client_t.

class Client {
 public:
  Client() = default;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client() { close(); }

  // Opens on `url` with `timing`; returns the simba_client_open code.
  int open(const std::string& url, const Timing& timing, const char* name = nullptr) {
    simba_config_t* cfg = nullptr;
    int rc = simba_config_new(&cfg);
    if (rc != SIMBA_OK) return rc;
    rc = simba_config_set_ms(cfg, "session.lease-duration", timing.lease_ms);
    if (rc == SIMBA_OK) rc = simba_config_set_ms(cfg, "session.renew-interval", timing.renew_ms);
    if (rc == SIMBA_OK && timing.margin_ms >= 0) {
      rc = simba_config_set_ms(cfg, "session.margin", timing.margin_ms);
    }
    if (rc == SIMBA_OK && timing.min_backoff_ms >= 0) {
      rc = simba_config_set_ms(cfg, "session.min-backoff", timing.min_backoff_ms);
    }
    if (rc == SIMBA_OK && timing.drift >= 0) {
      rc = simba_config_set(cfg, "session.drift", std::to_string(timing.drift).c_str());
    }
    for (const auto& kv : timing.settings) {
      if (rc == SIMBA_OK) rc = simba_config_set(cfg, kv.first.c_str(), kv.second.c_str());
    }
    if (rc == SIMBA_OK && name) rc = simba_config_set(cfg, "client.name", name);
    // SIMBA_TEST_LOG=1 prints the clients' log lines, for debugging a failure.
    if (rc == SIMBA_OK && std::getenv("SIMBA_TEST_LOG")) {
      rc = simba_config_set_logger(cfg, &Client::log_line, nullptr, SIMBA_LOG_DEBUG);
    }
    if (rc == SIMBA_OK) rc = simba_client_open(&c_, url.c_str(), cfg);
    simba_config_free(cfg);
    return rc;
  }

  void close() {
    if (c_) {
      simba_client_close(c_);
      c_ = nullptr;
    }
  }

  static void log_line(void*, int level, const char* msg) {
    std::fprintf(stderr, "[simba %lld.%03lld L%d] %s\n", static_cast<long long>(mono_ms() / 1000),
                 static_cast<long long>(mono_ms() % 1000), level, msg);
  }

  simba_client_t* get() const { return c_; }
  operator simba_client_t*() const { return c_; }

 private:
  simba_client_t* c_ = nullptr;
};

// A client on `url` with that timing, waited live; `setup` may change the
// config first. Null, after a failed EXPECT, when it did not open.
inline simba_client_t* open_live(const std::string& url, int64_t lease_ms, int64_t renew_ms,
                                 const std::function<void(simba_config_t*)>& setup = nullptr) {
  simba_config_t* cfg = nullptr;
  EXPECT_EQ(simba_config_new(&cfg), SIMBA_OK);
  EXPECT_EQ(simba_config_set_ms(cfg, "session.lease-duration", lease_ms), SIMBA_OK);
  EXPECT_EQ(simba_config_set_ms(cfg, "session.renew-interval", renew_ms), SIMBA_OK);
  if (setup) setup(cfg);
  simba_client_t* c = nullptr;
  EXPECT_EQ(simba_client_open(&c, url.c_str(), cfg), SIMBA_OK) << simba_last_error();
  simba_config_free(cfg);
  if (c) {
    EXPECT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  }
  return c;
}

// ---------------------------------------------------------------------------
// Session events.

class EventLog {
 public:
  struct Event {
    simba_event_type_t type;
    std::string detail;
    int64_t at_ns;
  };

  // Installs the sink on `c`. The log must outlive the client's close.
  int attach(simba_client_t* c) { return simba_client_on_event(c, &EventLog::sink, this); }

  std::vector<Event> events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  int count(simba_event_type_t type) const {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const Event& e : events_) n += e.type == type;
    return n;
  }
  bool wait(simba_event_type_t type, int n, int64_t timeout_ms) const {
    return wait_for([&] { return count(type) >= n; }, timeout_ms);
  }
  // Waits for an event of `type` at or after index `from` (events reach the sink
  // on their own thread, so they may trail the listener's callbacks).
  bool wait_from(simba_event_type_t type, int from, int64_t timeout_ms) const {
    return wait_for([&] { return index_of(type, from) >= 0; }, timeout_ms);
  }
  // Index of the first event of `type` at or after index `from`; -1 if none.
  int index_of(simba_event_type_t type, int from = 0) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = static_cast<size_t>(from); i < events_.size(); ++i) {
      if (events_[i].type == type) return static_cast<int>(i);
    }
    return -1;
  }

 private:
  static void sink(void* ud, simba_event_type_t type, const char* detail) {
    auto* self = static_cast<EventLog*>(ud);
    std::lock_guard<std::mutex> lock(self->mu_);
    self->events_.push_back({type, detail ? detail : "", mono_ns()});
  }

  mutable std::mutex mu_;
  std::vector<Event> events_;
};

// ---------------------------------------------------------------------------
// Election: starts an election and records every callback. Every elected term is
// retained until the recorder is destroyed, so tests (and other threads) may
// read it at any time. Declare it before the client it runs on, or stop it
// before the client closes: its callbacks use it until then.

class Election {
 public:
  struct Elected {
    simba_term_t* term;
    uint64_t token;
    int64_t at_ns;
  };
  struct Revoked {
    simba_term_t* term;
    simba_revoke_reason_t reason;
    int64_t at_ns;
  };

  Election() = default;
  Election(const Election&) = delete;
  Election& operator=(const Election&) = delete;
  ~Election() {
    stop(10'000);
    std::lock_guard<std::mutex> lock(mu_);
    for (const Elected& e : elected_) simba_term_release(e.term);
  }

  int start(simba_client_t* c, const std::string& name) {
    name_ = name;
    simba_listener_t l;
    l.on_elected = &Election::on_elected;
    l.on_revoked = &Election::on_revoked;
    l.ud = this;
    return simba_election_start(&e_, c, name.c_str(), &l);
  }

  // Blocking stop, then free. Returns the stop_wait code (SIMBA_OK if not started).
  int stop(int64_t timeout_ms) {
    if (!e_) return SIMBA_OK;
    const int rc = simba_election_stop_wait(e_, timeout_ms);
    simba_election_free(e_);
    e_ = nullptr;
    return rc;
  }

  simba_election_t* handle() const { return e_; }
  const std::string& name() const { return name_; }

  int elected_count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(elected_.size());
  }
  int revoked_count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(revoked_.size());
  }
  bool wait_elected(int n, int64_t timeout_ms) const {
    return wait_for([&] { return elected_count() >= n; }, timeout_ms);
  }
  bool wait_revoked(int n, int64_t timeout_ms) const {
    return wait_for([&] { return revoked_count() >= n; }, timeout_ms);
  }
  std::vector<Elected> elected() const {
    std::lock_guard<std::mutex> lock(mu_);
    return elected_;
  }
  std::vector<Revoked> revoked() const {
    std::lock_guard<std::mutex> lock(mu_);
    return revoked_;
  }
  Elected last_elected() const {
    std::lock_guard<std::mutex> lock(mu_);
    return elected_.empty() ? Elected{nullptr, 0, 0} : elected_.back();
  }
  Revoked last_revoked() const {
    std::lock_guard<std::mutex> lock(mu_);
    return revoked_.empty() ? Revoked{nullptr, SIMBA_REVOKE_NONE, 0} : revoked_.back();
  }
  // The terms elected so far (retained by this recorder).
  std::vector<simba_term_t*> terms() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<simba_term_t*> out;
    for (const Elected& e : elected_) out.push_back(e.term);
    return out;
  }
  // True if the latest term is currently valid.
  bool leading() const {
    simba_term_t* t = last_elected().term;
    return t && simba_term_is_valid(t);
  }
  // Callback-order violations seen: a revoke without a preceding elected of the
  // same term, a second revoke of a term, an elected while a term was pending.
  int pairing_errors() const { return pairing_errors_.load(); }
  // Every elected term revoked exactly once.
  bool all_revoked_once() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (revoked_.size() != elected_.size()) return false;
    for (size_t i = 0; i < elected_.size(); ++i) {
      if (revoked_[i].term != elected_[i].term) return false;
    }
    return true;
  }

 private:
  static void on_elected(void* ud, simba_term_t* t) {
    auto* self = static_cast<Election*>(ud);
    simba_term_retain(t);
    std::lock_guard<std::mutex> lock(self->mu_);
    if (self->revoked_.size() != self->elected_.size()) self->pairing_errors_++;
    self->elected_.push_back({t, simba_term_token(t), mono_ns()});
  }
  static void on_revoked(void* ud, simba_term_t* t, simba_revoke_reason_t reason) {
    auto* self = static_cast<Election*>(ud);
    std::lock_guard<std::mutex> lock(self->mu_);
    if (self->revoked_.size() >= self->elected_.size() ||
        self->elected_[self->revoked_.size()].term != t) {
      self->pairing_errors_++;
    }
    self->revoked_.push_back({t, reason, mono_ns()});
  }

  std::string name_;
  simba_election_t* e_ = nullptr;
  mutable std::mutex mu_;
  std::vector<Elected> elected_;
  std::vector<Revoked> revoked_;
  std::atomic<int> pairing_errors_{0};
};

// ---------------------------------------------------------------------------
// Servers and logs, for the backend-specific tests.

// A TCP port on 127.0.0.1 that nothing is bound to now, as simba_free_port
// (scripts/lib/servers.sh) picks one: below the kernel's ephemeral range, where
// no outgoing connection takes its local port, and never one this process was
// given before (a test may pick several servers' ports before the first binds).
inline int free_port() {
  static std::mutex mu;
  static std::set<int> given;
  static std::mt19937 random{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mu);
  int lo = 32768;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d", &lo) != 1) lo = 32768;
    std::fclose(f);
  }
  const int base = lo - 20000 >= 2000 ? 20000 : 10000;
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port = base + static_cast<int>(random() % static_cast<unsigned>(lo - base));
    if (given.count(port)) continue;
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    struct sockaddr_in a;
    std::memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool bound = bind(fd, reinterpret_cast<struct sockaddr*>(&a), sizeof a) == 0;
    close(fd);
    if (bound) {
      given.insert(port);
      return port;
    }
  }
  return -1;
}

// Captures a client's log lines (simba_config_set_logger(cfg, LogCapture::fn, &cap, ...)).
struct LogCapture {
  std::mutex mu;
  std::vector<std::string> lines;
  static void fn(void* ud, int, const char* msg) {
    auto* self = static_cast<LogCapture*>(ud);
    std::lock_guard<std::mutex> lock(self->mu);
    self->lines.push_back(msg);
  }
  bool has(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& l : lines) {
      if (l.find(what) != std::string::npos) return true;
    }
    return false;
  }
  std::string all() {
    std::lock_guard<std::mutex> lock(mu);
    std::string out;
    for (const auto& l : lines) out += l + "\n";
    return out;
  }
};

// A client whose log lines go to its own LogCapture; closed before the capture
// goes away, also when an ASSERT leaves the test early.
class LoggedClient {
 public:
  LoggedClient(const std::string& url, const Timing& t) {
    simba_config_t* cfg = nullptr;
    if (simba_config_new(&cfg) != SIMBA_OK) return;
    simba_config_set_logger(cfg, &LogCapture::fn, &logs, SIMBA_LOG_DEBUG);
    simba_config_set_ms(cfg, "session.lease-duration", t.lease_ms);
    simba_config_set_ms(cfg, "session.renew-interval", t.renew_ms);
    for (const auto& [key, value] : t.settings) simba_config_set(cfg, key.c_str(), value.c_str());
    if (simba_client_open(&c_, url.c_str(), cfg) != SIMBA_OK) c_ = nullptr;
    simba_config_free(cfg);
  }
  ~LoggedClient() { close(); }
  LoggedClient(const LoggedClient&) = delete;
  LoggedClient& operator=(const LoggedClient&) = delete;
  void close() {
    simba_client_close(c_);
    c_ = nullptr;
  }
  operator simba_client_t*() const { return c_; }

  LogCapture logs;

 private:
  simba_client_t* c_ = nullptr;
};

// ---------------------------------------------------------------------------
// Issue 44 (ADR 0030): what `simba run` does on SIGTERM, while the backend
// does not answer: stop the election (its release), then close the client.
// Both run on a thread, since both may block until the backend answers again;
// `resume` (SIGCONT of the server) runs `resume_after_ms` later on this one.
// Returns when the close returned.

struct StopCloseTimes {
  int64_t resumed_ms = 0;  // mono_ms() of resume()
  int64_t closed_ms = 0;   // mono_ms() when the close returned
};

inline StopCloseTimes stop_and_close_while_stalled(Election& e, LoggedClient& c,
                                                   int64_t resume_after_ms,
                                                   const std::function<void()>& resume) {
  StopCloseTimes t;
  std::atomic<int64_t> closed{0};
  std::thread closer([&] {
    e.stop(60'000);
    c.close();
    closed = mono_ms();
  });
  sleep_ms(resume_after_ms);
  resume();
  t.resumed_ms = mono_ms();
  closer.join();
  t.closed_ms = closed.load();
  return t;
}

// Issue 44 (ADR 0030): the holder stops its election while the backend does
// not answer, and the client stays open: no close frees the lease, so the
// release sent again must, before a keep-alive finds the lease held without a
// term and releases it as an orphan (ADR 0005). The stop returns once the
// first release failed; `resume` (SIGCONT, a heal) runs at `resume_at_ms`
// (mono_ms) or then, whichever is later; `is_free` (a read on the server) is
// then polled for up to `wait_ms`.
struct StopOnlyTimes {
  int64_t resumed_ms = 0;  // mono_ms() of resume()
  int64_t freed_ms = 0;    // mono_ms() when is_free() first held; 0: not within wait_ms
};

inline StopOnlyTimes stop_while_stalled(Election& e, int64_t resume_at_ms,
                                        const std::function<void()>& resume,
                                        const std::function<bool()>& is_free, int64_t wait_ms) {
  StopOnlyTimes t;
  e.stop(60'000);
  sleep_ms(std::max<int64_t>(0, resume_at_ms - mono_ms()));
  resume();
  t.resumed_ms = mono_ms();
  if (wait_for(is_free, wait_ms, 10)) t.freed_ms = mono_ms();
  return t;
}

// The lease `name` was freed by its release sent again: the first release
// failed and was retried, no keep-alive released the lease as an orphan (as
// the next one does without the retry), it was free within a renew period
// (the retry backoff's cap) and a reconnect of the server answering again,
// and the session lives on.
inline void expect_freed_by_the_retry(const StopOnlyTimes& t, LoggedClient& c,
                                      const std::string& name, int64_t renew_ms) {
  ASSERT_NE(t.freed_ms, 0) << "the lease stayed held\n" << c.logs.all();
  bool retried = false;
  bool orphaned = false;
  {
    std::lock_guard<std::mutex> lock(c.logs.mu);
    for (const std::string& l : c.logs.lines) {
      retried = retried || (l.find("release of " + name + " token") != std::string::npos &&
                            l.find("trying again in") != std::string::npos);
      orphaned = orphaned || l.find("releasing lease " + name + " (") != std::string::npos;
    }
  }
  EXPECT_TRUE(retried) << "the failed release was not sent again\n" << c.logs.all();
  EXPECT_FALSE(orphaned) << "a keep-alive released the lease as an orphan\n" << c.logs.all();
  EXPECT_LE(t.freed_ms - t.resumed_ms, renew_ms + 1000) << c.logs.all();
  EXPECT_TRUE(wait_for([&] { return simba_client_status(c) == SIMBA_SESSION_LIVE; }, 3 * renew_ms))
      << c.logs.all();
}

// ---------------------------------------------------------------------------
// GroupProbe: members of one partition group record here which partitions
// they lead, and every work start checks that no other valid term of the same
// partition exists at that instant (the group's safety invariant). Every term
// a member's work received is also kept until the probe goes, so that a
// poller can check the invariant at any instant (multi_holders()).

class GroupProbe {
 public:
  struct Member {
    GroupProbe* probe;
    int id;
  };
  GroupProbe() = default;
  GroupProbe(const GroupProbe&) = delete;
  GroupProbe& operator=(const GroupProbe&) = delete;
  ~GroupProbe() {
    for (auto& [name, terms] : seen_) {
      for (simba_term_t* t : terms) simba_term_release(t);
    }
  }
  Member* member(int id) {
    std::lock_guard<std::mutex> lock(mu_);
    members_.push_back(std::make_unique<Member>(Member{this, id}));
    return members_.back().get();
  }
  // The simba_work_fn: holds the partition until its term is revoked.
  static void work(void* ud, simba_term_t* t) {
    auto* m = static_cast<Member*>(ud);
    GroupProbe* p = m->probe;
    const std::string name = simba_term_name(t);
    simba_term_retain(t);
    {
      std::lock_guard<std::mutex> lock(p->mu_);
      simba_term_retain(t);
      p->seen_[name].push_back(t);
      for (simba_term_t* other : p->running_[name]) {
        // Read the other first: a term that reads valid later was valid then.
        if (simba_term_is_valid(other) && simba_term_is_valid(t)) ++p->violations_;
      }
      p->running_[name].push_back(t);
      ++p->held_[m->id];
      ++p->starts_;
    }
    while (simba_term_wait_revoked(t, 1000) != SIMBA_OK) {
    }
    {
      std::lock_guard<std::mutex> lock(p->mu_);
      auto& v = p->running_[name];
      v.erase(std::find(v.begin(), v.end(), t));
      --p->held_[m->id];
    }
    simba_term_release(t);
  }
  int held(int member) {
    std::lock_guard<std::mutex> lock(mu_);
    return held_[member];
  }
  int violations() {
    std::lock_guard<std::mutex> lock(mu_);
    return violations_;
  }
  int starts() {
    std::lock_guard<std::mutex> lock(mu_);
    return starts_;
  }
  // One sample of the invariant over every term any member's work received
  // (of every member, whether it still runs, left or died): the number of
  // partitions with two or more valid terms at one instant, each named in
  // `*what` if given. The terms are listed before any is read, so each existed
  // at the first read; validity never comes back, so every term that reads
  // valid was valid at every read before it: two valid reads mean two valid
  // holders at the instant of the first.
  int multi_holders(std::string* what = nullptr) {
    std::vector<std::pair<std::string, std::vector<simba_term_t*>>> all;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [name, terms] : seen_) all.emplace_back(name, terms);
    }
    int bad = 0;
    for (const auto& [name, terms] : all) {
      int valid = 0;
      for (simba_term_t* t : terms) valid += simba_term_is_valid(t);
      if (valid > 1) {
        ++bad;
        if (what) *what += name + ": " + std::to_string(valid) + " valid terms; ";
      }
    }
    return bad;
  }
  // True when the given members hold every partition, each floor(n/m) or ceil(n/m).
  bool balanced(const std::vector<int>& ids, int n) {
    std::lock_guard<std::mutex> lock(mu_);
    const int m = static_cast<int>(ids.size());
    int total = 0;
    for (int id : ids) {
      const int h = held_[id];
      if (h < n / m || h > (n + m - 1) / m) return false;
      total += h;
    }
    return total == n;
  }
  std::string dump() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string s;
    for (const auto& [id, h] : held_)
      s += "member " + std::to_string(id) + ": " + std::to_string(h) + "; ";
    return s;
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<Member>> members_;
  std::map<std::string, std::vector<simba_term_t*>> running_;
  std::map<std::string, std::vector<simba_term_t*>> seen_;  // retained until ~GroupProbe
  std::map<int, int> held_;
  int violations_ = 0;
  int starts_ = 0;
};

// ---------------------------------------------------------------------------
// FrozenClient: a node that stops without a word, on any backend. Its client
// runs its callbacks on the loop ("callback.executor" = "direct"); freeze()
// starts an election of its own whose on_elected blocks, so the loop stops:
// from then on the node sends nothing, no keep-alive, no release, no close, as
// the backend and the other nodes see a crashed (or paused) process. Its terms
// still end at its local deadline (term accessors need no loop) and the
// backend expires its session after the lease duration. thaw() lets the loop
// go on; the destructor thaws, then stops and closes everything.

class FrozenClient {
 public:
  FrozenClient() = default;
  FrozenClient(const FrozenClient&) = delete;
  FrozenClient& operator=(const FrozenClient&) = delete;
  ~FrozenClient() {
    thaw();
    if (e_) {
      simba_election_stop_wait(e_, 10'000);
      simba_election_free(e_);
    }
    c_.close();
  }

  // Opens on `url` and waits until LIVE; returns the first failing code.
  int open(const std::string& url, Timing timing) {
    timing.settings.emplace_back("callback.executor", "direct");
    int rc = c_.open(url, timing);
    if (rc == SIMBA_OK) rc = simba_client_wait_live(c_, 5000 * slow_factor());
    return rc;
  }
  simba_client_t* get() const { return c_.get(); }
  operator simba_client_t*() const { return c_.get(); }

  // Stops the loop (through an election on `name`, which no one else may use)
  // and returns the instant it stopped, or 0 if it did not within the timeout.
  int64_t freeze(const std::string& name) {
    simba_listener_t l;
    l.on_elected = &FrozenClient::block;
    l.on_revoked = nullptr;
    l.ud = this;
    if (simba_election_start(&e_, c_, name.c_str(), &l) != SIMBA_OK) return 0;
    wait_for([&] { return frozen_at_.load() != 0; }, 5000 * slow_factor(), 1);
    return frozen_at_.load();
  }
  // Lets the loop go on (it finds its deadline passed and recovers).
  void thaw() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      thawed_ = true;
    }
    cv_.notify_all();
  }

 private:
  static void block(void* ud, simba_term_t*) {
    auto* self = static_cast<FrozenClient*>(ud);
    self->frozen_at_ = mono_ns();
    std::unique_lock<std::mutex> lock(self->mu_);
    self->cv_.wait(lock, [&] { return self->thawed_; });
  }

  Client c_;
  simba_election_t* e_ = nullptr;
  std::atomic<int64_t> frozen_at_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool thawed_ = false;
};

}  // namespace simba_testing

#endif
