// One internal Backend (backend/backend.h) on a libuv loop of its own, driven
// call by call from a test thread: for the backend contract's watches
// (Backend::watch / unwatch, ADR 0040), which the C API does not expose.
// Every release broadcast it delivers is kept in `heard`.
#ifndef SIMBA_TESTS_BACKENDS_WATCHING_BACKEND_H
#define SIMBA_TESTS_BACKENDS_WATCHING_BACKEND_H

#include <uv.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"

namespace simba_testing {

class WatchingBackend {
 public:
  explicit WatchingBackend(const std::string& url) {
    uv_loop_init(&loop_);
    simba::BackendContext ctx;
    ctx.loop = &loop_;
    ctx.client_name = "watch-test";
    simba::BackendError why = simba::BackendError::kNone;
    b_ = simba::make_backend(ctx, url, &why, &error);
    if (b_) {
      b_->on_released([this](const std::string& name, const simba::Grant& grant) {
        heard.push_back(name);
        grants.push_back(grant);
      });
    }
  }
  ~WatchingBackend() {
    if (b_) {
      bool done = false;
      b_->shutdown([&] { done = true; });
      for (int i = 0; i < 100000 && !done; ++i) uv_run(&loop_, UV_RUN_NOWAIT);
      b_.reset();
    }
    uv_run(&loop_, UV_RUN_NOWAIT);
    uv_loop_close(&loop_);
  }
  WatchingBackend(const WatchingBackend&) = delete;
  WatchingBackend& operator=(const WatchingBackend&) = delete;

  bool ok() const { return b_ != nullptr; }
  simba::Backend& backend() { return *b_; }

  // Runs the loop until `pred` holds or `ms` pass; returns pred().
  bool run_until(const std::function<bool()>& pred, int ms) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (!pred() && std::chrono::steady_clock::now() < until) {
      uv_run(&loop_, UV_RUN_NOWAIT);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return pred();
  }
  // Runs the loop for `ms`.
  void run_for(int ms) {
    run_until([] { return false; }, ms);
  }

  // A new session valid for `lease` ("" on failure).
  std::string open(simba::Duration lease = kLease) {
    bool got = false;
    simba::OpenReply r;
    b_->open_session(lease, kTimeout, [&](const simba::OpenReply& rep) {
      r = rep;
      got = true;
    });
    run_until([&] { return got; }, kWaitMs);
    return r.outcome == simba::Outcome::kOk ? r.session_id : std::string();
  }
  simba::AcquireReply acquire(const std::string& session, const std::string& name) {
    bool got = false;
    simba::AcquireReply r;
    r.outcome = simba::Outcome::kTimeout;
    b_->acquire(session, name, kTimeout, [&](const simba::AcquireReply& rep) {
      r = rep;
      got = true;
    });
    run_until([&] { return got; }, kWaitMs);
    return r;
  }
  simba::Outcome release(const std::string& session, const std::string& name, uint64_t token) {
    bool got = false;
    simba::DoneReply r;
    r.outcome = simba::Outcome::kTimeout;
    b_->release(session, name, token, kTimeout, [&](const simba::DoneReply& rep) {
      r = rep;
      got = true;
    });
    run_until([&] { return got; }, kWaitMs);
    return r.outcome;
  }
  // Candidates (ADR 0047).
  simba::AcquireReply acquire_candidate(const std::string& session, const std::string& name,
                                        const simba::CandidateAsk& ask) {
    return wait<simba::AcquireReply>(
        [&](auto cb) { b_->acquire_candidate(session, name, ask, kTimeout, cb); });
  }
  simba::ReleaseReply release_handoff(const std::string& session, const std::string& name,
                                      uint64_t token, const std::string& target = {}) {
    return wait<simba::ReleaseReply>(
        [&](auto cb) { b_->release_handoff(session, name, token, target, kTimeout, cb); });
  }
  // Permits (ADR 0046).
  simba::AcquireReply acquire_permit(const std::string& session, const std::string& name,
                                     const simba::PermitAsk& ask) {
    return wait<simba::AcquireReply>(
        [&](auto cb) { b_->acquire_permit(session, name, ask, kTimeout, cb); });
  }
  simba::Outcome release_permit(const std::string& session, const std::string& name,
                                simba::PermitKind kind, uint64_t permit, uint64_t token) {
    return wait<simba::DoneReply>([&](auto cb) {
             b_->release_permit(session, name, kind, permit, token, kTimeout, cb);
           })
        .outcome;
  }
  // Run records (ADR 0048).
  simba::RunReply write_run(const std::string& session, const std::string& name, uint64_t token,
                            const simba::RunRecord& record) {
    return wait<simba::RunReply>(
        [&](auto cb) { b_->write_run(session, name, token, record, kTimeout, cb); });
  }
  simba::KeepAliveReply keep_alive(const std::string& session) {
    return wait<simba::KeepAliveReply>(
        [&](auto cb) { b_->keep_alive(session, kLease, kTimeout, cb); });
  }
  simba::Outcome close_session(const std::string& session) {
    return wait<simba::DoneReply>([&](auto cb) { b_->close_session(session, kTimeout, cb); })
        .outcome;
  }
  simba::InspectReply inspect(const std::vector<std::string>& names) {
    return wait<simba::InspectReply>([&](auto cb) { b_->inspect(names, kTimeout, cb); });
  }

  bool heard_of(const std::string& name) const {
    for (const std::string& n : heard) {
      if (n == name) return true;
    }
    return false;
  }

  std::vector<std::string> heard;
  std::vector<simba::Grant> grants;  // each broadcast's grant, as `heard`
  std::string error;                 // make_backend's, when !ok()

 private:
  // Starts a call with `start(cb)` and runs the loop until it is answered
  // (kTimeout if it is not within kWaitMs).
  template <typename Reply, typename Start>
  Reply wait(Start start) {
    bool got = false;
    Reply r;
    r.outcome = simba::Outcome::kTimeout;
    start([&](const Reply& rep) {
      r = rep;
      got = true;
    });
    run_until([&] { return got; }, kWaitMs);
    return r;
  }

  static constexpr simba::Duration kLease = std::chrono::milliseconds(20000);
  static constexpr simba::Duration kTimeout = std::chrono::milliseconds(5000);
  static constexpr int kWaitMs = 8000;
  uv_loop_t loop_;
  std::unique_ptr<simba::Backend> b_;
};

}  // namespace simba_testing

#endif
