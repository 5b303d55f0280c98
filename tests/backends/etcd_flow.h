// Calls in flight on a BackendOnLoop, for the etcd tests that stop or
// replace connections under them: every outcome is counted, and a keep-alive
// must list every name held since before it was sent.
#ifndef SIMBA_TESTS_BACKENDS_ETCD_FLOW_H
#define SIMBA_TESTS_BACKENDS_ETCD_FLOW_H

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend_on_loop.h"
#include "backends/simba_testing.h"

namespace simba_testing {

using simba::ms;

// Many calls in flight on one loop: each outcome is counted, and a keep-alive
// must list every name held since before it was sent.
struct Flow {
  explicit Flow(BackendOnLoop& b, std::string sid) : b(b), sid(std::move(sid)) {}
  BackendOnLoop& b;
  std::string sid;
  std::map<std::string, uint64_t> held;  // name -> token, adopted
  int pending = 0, ok = 0, keep_alives = 0;
  std::vector<std::string> failures;

  void acquire(const std::string& name, bool keep) {
    ++pending;
    b->acquire(sid, name, ms(10000), [this, name, keep](const simba::AcquireReply& r) {
      --pending;
      if (r.outcome != simba::Outcome::kOk) {
        failures.push_back("acquire " + name + ": " +
                           (r.outcome == simba::Outcome::kHeld ? "held" : r.error));
        return;
      }
      ++ok;
      if (keep) {
        held[name] = r.token;
      } else {
        release(name, r.token);
      }
    });
  }
  void release(const std::string& name, uint64_t token) {
    ++pending;
    b->release(sid, name, token, ms(10000), [this, name](const simba::DoneReply& r) {
      --pending;
      if (r.outcome != simba::Outcome::kOk) failures.push_back("release " + name + ": " + r.error);
      ++ok;
    });
  }
  void keep_alive() {
    ++pending;
    const std::map<std::string, uint64_t> before = held;
    b->keep_alive(sid, ms(6000), ms(10000), [this, before](const simba::KeepAliveReply& r) {
      --pending;
      if (r.outcome != simba::Outcome::kOk) {
        failures.push_back("keep-alive: " + r.error);
        return;
      }
      ++keep_alives;
      std::set<std::pair<std::string, uint64_t>> listed;
      for (const simba::OwnedLease& l : r.owned) listed.insert({l.name, l.token});
      for (const auto& [name, token] : before) {
        if (!listed.count({name, token})) {
          failures.push_back("keep-alive did not list " + name + " " + std::to_string(token));
        }
      }
    });
  }
};

inline simba::OpenReply open_session(BackendOnLoop& b, int64_t lease_ms = 6000) {
  simba::OpenReply out;
  bool done = false;
  b->open_session(ms(lease_ms), ms(10000), [&](const simba::OpenReply& r) {
    out = r;
    done = true;
  });
  EXPECT_TRUE(b.run_until([&] { return done; }, 10000));
  return out;
}

}  // namespace simba_testing

#endif  // SIMBA_TESTS_BACKENDS_ETCD_FLOW_H
