// THREAD mode: a caller that waits for the backend runs the client's loop on
// its own thread while the loop thread is idle (ADR 0014). On memory://, whose
// MemoryFaults::loop_runner names the thread that last made a backend call or
// took in its answer. These tests check who runs the loop, and that borrowing
// it changes nothing a user can see: callbacks of the loop executor and log
// lines stay on the loop thread (a host executor's submit too:
// host_executor_borrow_test.cpp); keep-alives, broadcasts and other threads'
// calls go on during a long wait; a close ends a wait.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend/memory/memory_backend.h"
#include "backends/simba_testing.h"
#include "capi/capi.h"
#include "simba.h"

namespace {

using namespace simba_testing;

using Seen = ThreadsSeen;  // simba_testing.h

class LoopBorrow : public ::testing::Test {
 protected:
  void SetUp() override { url_ = "memory://borrow-" + unique_id(); }

  // Opens a THREAD-mode client; `setup` may change the config first.
  simba_client_t* Open(const std::function<void(simba_config_t*)>& setup = nullptr,
                       int64_t lease_ms = 3000, int64_t renew_ms = 1000) {
    simba_client_t* c = open_live(url_, lease_ms, renew_ms, setup);
    if (c) clients_.push_back(c);
    return c;
  }

  void TearDown() override {
    for (simba_client_t* c : clients_) simba_client_close(c);
  }

  static simba::MemoryFaults& faults(simba_client_t* c) { return *c->impl->memory_faults(); }
  std::string lease(const std::string& s) const { return url_.substr(9) + "." + s; }

  std::string url_;
  std::vector<simba_client_t*> clients_;
};

// The loop thread is idle between calls: the caller's own thread makes the
// call and takes in the answer, also when the answer comes a little later. An
// answer later than a borrow lasts (10 ms) is taken in by the loop thread, which
// took the loop back, and the call still gets it.
TEST_F(LoopBorrow, ABlockingCallRunsTheIdleLoopOnTheCallersThread) {
  simba_client_t* c = Open();
  ASSERT_NE(c, nullptr);
  const std::thread::id me = std::this_thread::get_id();
  for (int64_t delay_ms : {0, 2, 50}) {
    faults(c).reply_delay_ns = delay_ms * 1'000'000;
    sleep_ms(10);  // the loop thread back in its poll
    simba_term_t* t = nullptr;
    ASSERT_EQ(simba_lock_acquire(&t, c, lease("x").c_str(), 5000), SIMBA_OK) << simba_last_error();
    const bool caller_ran_it = faults(c).loop_runner.load() == me;
    EXPECT_EQ(caller_ran_it, delay_ms < 10) << "delay " << delay_ms << " ms: acquire";
    sleep_ms(10);
    ASSERT_EQ(simba_lock_release(t), SIMBA_OK);
    EXPECT_EQ(faults(c).loop_runner.load() == me, delay_ms < 10)
        << "delay " << delay_ms << " ms: release";
  }
}

// callback.executor=direct runs callbacks on the loop thread, and the logger
// is called there: never on a caller that borrowed the loop, even when that
// caller took in the answer that led to them. One thread cycles a lock (it
// borrows the loop nearly all the time) while the test thread starts and
// stops elections and makes the cycling thread's releases fail (a warning).
TEST_F(LoopBorrow, CallbacksOfTheLoopExecutorAndLogLinesStayOnTheLoopThread) {
  Seen callbacks, logs;
  simba_client_t* c = Open(
      [&](simba_config_t* cfg) {
        ASSERT_EQ(simba_config_set(cfg, "callback.executor", "direct"), SIMBA_OK);
        ASSERT_EQ(simba_config_set_logger(
                      cfg, [](void* ud, int, const char*) { static_cast<Seen*>(ud)->note(); },
                      &logs, SIMBA_LOG_DEBUG),
                  SIMBA_OK);
      },
      600, 150);  // a failed release's lease is freed by the next keep-alive
  ASSERT_NE(c, nullptr);
  std::atomic<bool> stop{false};
  std::atomic<int> cycles{0};
  std::thread::id cycler;
  std::mutex cycler_mu;
  std::thread th([&] {
    {
      std::lock_guard<std::mutex> lock(cycler_mu);
      cycler = std::this_thread::get_id();
    }
    while (!stop) {
      simba_term_t* t = nullptr;
      if (simba_lock_acquire(&t, c, lease("cycle").c_str(), 5000) != SIMBA_OK) continue;
      // Every 8th release fails on the backend: the node logs a warning while
      // this thread runs the loop.
      if (cycles % 8 == 7) faults(c).unreachable = true;
      simba_lock_release(t);
      faults(c).unreachable = false;
      ++cycles;
    }
  });
  ThreadGuard guard(th, stop);
  simba_listener_t listener = {
      [](void* ud, simba_term_t*) { static_cast<Seen*>(ud)->note(); },
      [](void* ud, simba_term_t*, simba_revoke_reason_t) { static_cast<Seen*>(ud)->note(); },
      &callbacks};
  for (int i = 0; i < 20; ++i) {
    simba_election_t* e = nullptr;
    const int before = callbacks.count();
    ASSERT_EQ(simba_election_start(&e, c, lease("e" + std::to_string(i)).c_str(), &listener),
              SIMBA_OK);
    ASSERT_TRUE(wait_for([&] { return callbacks.count() > before; }, 5000 * slow_factor()));
    ASSERT_EQ(simba_election_stop_wait(e, 5000 * slow_factor()), SIMBA_OK);
    simba_election_free(e);
  }
  ASSERT_TRUE(wait_for([&] { return cycles >= 64; }, 10000 * slow_factor()));
  guard.join();
  std::thread::id cycler_id;
  {
    std::lock_guard<std::mutex> lock(cycler_mu);
    cycler_id = cycler;
  }
  EXPECT_EQ(callbacks.count(), 40);
  EXPECT_FALSE(callbacks.includes(cycler_id)) << "a direct callback ran on a borrower";
  EXPECT_FALSE(callbacks.includes(std::this_thread::get_id()))
      << "a direct callback ran on a caller";
  EXPECT_GE(logs.count(), 8);
  EXPECT_FALSE(logs.includes(cycler_id)) << "the logger was called on a borrower";
  EXPECT_FALSE(logs.includes(std::this_thread::get_id())) << "the logger was called on a caller";
}

// A caller waiting long for a contended lock runs the loop for its first 10 ms
// and then hands it back to the loop thread: the session's keep-alives go on,
// another thread's calls are answered, and the holder's release reaches the
// waiter through the broadcast.
TEST_F(LoopBorrow, ALongWaitKeepsTheSessionAliveAndSeesTheRelease) {
  simba_client_t* holder = Open();
  simba_client_t* waiter = Open(nullptr, 600, 150);
  ASSERT_NE(holder, nullptr);
  ASSERT_NE(waiter, nullptr);
  simba_term_t* held = nullptr;
  ASSERT_EQ(simba_lock_acquire(&held, holder, lease("z").c_str(), 5000), SIMBA_OK);

  std::atomic<int> rc{1};
  std::atomic<int64_t> acquired_at{0};
  simba_term_t* got = nullptr;
  std::thread th([&] {
    rc = simba_lock_acquire(&got, waiter, lease("z").c_str(), 20000 * slow_factor());
    acquired_at = mono_ms();
  });
  // The waiter borrows the loop from here on.
  ASSERT_TRUE(wait_for([&] { return counter(waiter, "acquires") >= 1; }, 5000 * slow_factor()));
  const int64_t k = counter(waiter, "keep_alives");  // snapshot: another thread's call
  sleep_ms(6 * 150);                                 // 6 renew periods, one lease
  EXPECT_GE(counter(waiter, "keep_alives"), k + 4);
  EXPECT_EQ(simba_client_status(waiter), SIMBA_SESSION_LIVE);
  EXPECT_EQ(rc.load(), 1) << "the lock is still held: the waiter still waits";

  const int64_t released_at = mono_ms();
  ASSERT_EQ(simba_lock_release(held), SIMBA_OK);
  th.join();
  ASSERT_EQ(rc.load(), SIMBA_OK) << simba_last_error();
  // Through the broadcast, not the waiter's retry (a renew period, 150 ms).
  EXPECT_LT(acquired_at - released_at, 100 * slow_factor());
  ASSERT_EQ(simba_lock_release(got), SIMBA_OK);
}

// A close from another thread ends a borrower's wait: the loop goes back to
// the loop thread, which closes the session and cancels the acquire.
TEST_F(LoopBorrow, ACloseEndsABorrowersWait) {
  simba_client_t* holder = Open();
  ASSERT_NE(holder, nullptr);
  simba_term_t* held = nullptr;
  ASSERT_EQ(simba_lock_acquire(&held, holder, lease("c").c_str(), 5000), SIMBA_OK);
  simba_client_t* waiter = Open();
  ASSERT_NE(waiter, nullptr);
  clients_.pop_back();  // closed here
  std::atomic<int> rc{1};
  std::thread th([&] {
    simba_term_t* t = nullptr;
    rc = simba_lock_acquire(&t, waiter, lease("c").c_str(), -1);
  });
  ASSERT_TRUE(wait_for([&] { return counter(waiter, "acquires") >= 1; }, 5000 * slow_factor()));
  EXPECT_EQ(simba_client_close(waiter), SIMBA_OK);
  th.join();
  EXPECT_EQ(rc.load(), SIMBA_ECLOSED);
  ASSERT_EQ(simba_lock_release(held), SIMBA_OK);
}

// Many threads borrowing in turn, with elections and snapshots from others:
// every call completes, and no lease is held twice (run under TSan in CI).
TEST_F(LoopBorrow, ThreadsTakingTurnsOnTheLoop) {
  simba_client_t* c = Open();
  ASSERT_NE(c, nullptr);
  std::atomic<int> failures{0}, cycles{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 100; ++k) {
        simba_term_t* t = nullptr;
        const std::string name = lease("t" + std::to_string(k % 3));
        const int r = simba_lock_acquire(&t, c, name.c_str(), 10000 * slow_factor());
        if (r == SIMBA_EBUSY) continue;  // another lock of this client holds it
        if (r != SIMBA_OK || !simba_term_is_valid(t)) {
          ++failures;
          continue;
        }
        if (i == 0) snapshot(c);
        if (simba_lock_release(t) != SIMBA_OK) ++failures;
        ++cycles;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(cycles.load(), 0);
  EXPECT_EQ(simba_client_status(c), SIMBA_SESSION_LIVE);
}

}  // namespace
