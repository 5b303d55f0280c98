// A backend driven directly on a libuv loop of the test's own, as the engine
// drives it but without the core: the test is the caller, so it owns every
// call's timeout and abandons a call itself (backend.h, ADR 0039).
#ifndef SIMBA_TESTS_BACKENDS_BACKEND_ON_LOOP_H
#define SIMBA_TESTS_BACKENDS_BACKEND_ON_LOOP_H

#include <uv.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backends/simba_testing.h"

namespace simba_testing {

// Runs `loop` until `done()` or `limit_ms` passed, waking at least every 5 ms
// on `tick` (an initialised timer of that loop) to look at `done()`.
inline bool run_loop_until(uv_loop_t* loop, uv_timer_t* tick, const std::function<bool()>& done,
                           int64_t limit_ms) {
  const int64_t until = mono_ns() + limit_ms * kMsNs;
  while (!done() && mono_ns() < until) {
    // From now: a tick due already would fire before the poll, which
    // would then wait for I/O without bound.
    uv_update_time(loop);
    uv_timer_start(
        tick, [](uv_timer_t*) {}, 5, 0);
    uv_run(loop, UV_RUN_ONCE);
  }
  return done();
}

class BackendOnLoop {
 public:
  explicit BackendOnLoop(const std::string& url) {
    uv_loop_init(&loop_);
    uv_timer_init(&loop_, &tick_);
    simba::BackendContext ctx;
    ctx.loop = &loop_;
    ctx.log = [this](int, const std::string& line) { logs_.push_back(line); };
    simba::BackendError why = simba::BackendError::kNone;
    backend_ = simba::make_backend(ctx, url, &why, &error_);
  }
  ~BackendOnLoop() {
    bool shut = !backend_;
    if (backend_) backend_->shutdown([&shut] { shut = true; });
    uv_close(reinterpret_cast<uv_handle_t*>(&tick_), nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_TRUE(shut) << "the backend's shutdown never ended";
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle of the backend is still open";
  }
  BackendOnLoop(const BackendOnLoop&) = delete;
  BackendOnLoop& operator=(const BackendOnLoop&) = delete;

  simba::Backend* operator->() const { return backend_.get(); }
  explicit operator bool() const { return backend_ != nullptr; }
  const std::string& error() const { return error_; }

  // Runs the loop until `done()` or `limit_ms` passed; true when done.
  bool run_until(const std::function<bool()>& done, int64_t limit_ms) {
    return run_loop_until(&loop_, &tick_, done, limit_ms);
  }
  void run_for(int64_t ms) {
    run_until([] { return false; }, ms);
  }
  bool logged(const std::string& part) const {
    for (const std::string& l : logs_) {
      if (l.find(part) != std::string::npos) return true;
    }
    return false;
  }

 private:
  uv_loop_t loop_;
  uv_timer_t tick_;
  std::vector<std::string> logs_;
  std::string error_;
  std::unique_ptr<simba::Backend> backend_;
};

}  // namespace simba_testing

#endif  // SIMBA_TESTS_BACKENDS_BACKEND_ON_LOOP_H
