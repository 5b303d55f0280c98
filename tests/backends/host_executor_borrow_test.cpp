// A client with a host executor lends its idle loop to a caller waiting for
// the backend, as any THREAD-mode client does (ADR 0014), while the host's
// submit() is still called from the loop thread only: a borrower hands a
// submit, and an election's onElected with what follows it, to the loop thread
// (ADR 0029). On memory://, whose MemoryFaults::loop_runner names the thread
// that last made a backend call or took in its answer.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
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

// The threads a host's submit() was called on: ThreadsSeen (simba_testing.h).
using SubmitThreads = ThreadsSeen;

// A one-thread queue: the host executor of issue 36's C program.
class QueueExecutor {
 public:
  QueueExecutor() : th_([this] { work(); }) {}
  ~QueueExecutor() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    th_.join();
  }
  static int submit(void* ctx, void (*run)(void*), void* arg) {
    auto* q = static_cast<QueueExecutor*>(ctx);
    q->submits.note();
    {
      std::lock_guard<std::mutex> lock(q->mu_);
      q->tasks_.emplace_back(run, arg);
    }
    q->cv_.notify_one();
    return 0;
  }
  SubmitThreads submits;

 private:
  void work() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      auto [run, arg] = tasks_.front();
      tasks_.pop_front();
      lock.unlock();
      run(arg);
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<void (*)(void*), void*>> tasks_;
  bool stop_ = false;
  std::thread th_;
};

// A host executor that rejects every task.
struct RejectingExecutor {
  SubmitThreads submits;
  static int submit(void* ctx, void (*)(void*), void*) {
    static_cast<RejectingExecutor*>(ctx)->submits.note();
    return 1;
  }
};

// What one election's callbacks saw, in order: E elected, R revoked, D done.
struct Record {
  std::mutex mu;
  std::string events;
  void add(char c) {
    std::lock_guard<std::mutex> lock(mu);
    events += c;
  }
  std::string get() {
    std::lock_guard<std::mutex> lock(mu);
    return events;
  }
};

const simba_listener_t kRecording = {
    [](void* ud, simba_term_t*) { static_cast<Record*>(ud)->add('E'); },
    [](void* ud, simba_term_t*, simba_revoke_reason_t) { static_cast<Record*>(ud)->add('R'); },
    nullptr};

class HostExecutorBorrow : public ::testing::Test {
 protected:
  void SetUp() override { url_ = "memory://hostborrow-" + unique_id(); }

  simba_client_t* Open(simba_submit_fn submit, void* ctx,
                       const std::function<void(simba_config_t*)>& setup = nullptr) {
    simba_client_t* c = open_live(url_, 3000, 1000, [&](simba_config_t* cfg) {
      EXPECT_EQ(simba_config_set_executor(cfg, submit, ctx), SIMBA_OK);
      if (setup) setup(cfg);
    });
    if (c) clients_.push_back(c);
    return c;
  }

  void TearDown() override {
    for (simba_client_t* c : clients_) simba_client_close(c);
  }

  // A thread cycling a lock of `c` until stopped: it borrows the loop nearly
  // all the time, so it takes in most answers of the client's elections too.
  void StartCycler(simba_client_t* c) {
    cycler_ = std::thread([this, c] {
      {
        std::lock_guard<std::mutex> lock(cycler_mu_);
        cycler_id_ = std::this_thread::get_id();
      }
      while (!stop_) {
        simba_term_t* t = nullptr;
        if (simba_lock_acquire(&t, c, lease("cycle").c_str(), 5000) != SIMBA_OK) continue;
        simba_lock_release(t);
        ++cycles_;
      }
    });
  }
  std::thread::id StopCycler() {
    stop_ = true;
    if (cycler_.joinable()) cycler_.join();
    std::lock_guard<std::mutex> lock(cycler_mu_);
    return cycler_id_;
  }

  static simba::MemoryFaults& faults(simba_client_t* c) { return *c->impl->memory_faults(); }
  std::string lease(const std::string& s) const { return url_.substr(9) + "." + s; }

  std::string url_;
  std::vector<simba_client_t*> clients_;
  std::thread cycler_;
  std::mutex cycler_mu_;
  std::thread::id cycler_id_;
  std::atomic<bool> stop_{false};
  std::atomic<int> cycles_{0};
};

// The lock cycle of a host-executor client runs on the caller's thread: the
// call and its answer need no thread wake-up (issue 36: 4-7 x the default
// pool's cycle before), and submit() is not called there.
TEST_F(HostExecutorBorrow, AClientWithAHostExecutorLendsItsLoop) {
  QueueExecutor executor;
  simba_client_t* c = Open(&QueueExecutor::submit, &executor);
  ASSERT_NE(c, nullptr);
  const std::thread::id me = std::this_thread::get_id();
  int borrowed = 0;
  for (int i = 0; i < 20; ++i) {
    sleep_ms(2);  // the loop thread back in its poll, off its standby
    simba_term_t* t = nullptr;
    ASSERT_EQ(simba_lock_acquire(&t, c, lease("h").c_str(), 5000), SIMBA_OK) << simba_last_error();
    borrowed += faults(c).loop_runner.load() == me;
    ASSERT_EQ(simba_lock_release(t), SIMBA_OK);
    borrowed += faults(c).loop_runner.load() == me;
  }
  // Every call may borrow; a loaded machine may keep the loop thread in a turn
  // now and then.
  EXPECT_GE(borrowed, 20);
  EXPECT_FALSE(executor.submits.includes(me));
  simba_client_close(c);
  clients_.clear();
}

// Elections of a client whose loop a caller borrows nearly all the time: their
// answers are taken in by the borrower, yet submit() is called from one thread
// (the loop thread) only, and each election's callbacks come in order: on_elected,
// on_revoked, then the stop's done.
TEST_F(HostExecutorBorrow, SubmitStaysOnTheLoopThreadAndCallbacksInOrder) {
  QueueExecutor executor;
  simba_client_t* c = Open(&QueueExecutor::submit, &executor);
  ASSERT_NE(c, nullptr);
  StartCycler(c);
  ASSERT_TRUE(wait_for([&] { return cycles_ >= 10; }, 5000 * slow_factor()));
  constexpr int kElections = 30;
  std::vector<Record> records(kElections);
  for (int i = 0; i < kElections; ++i) {
    Record& rec = records[i];
    simba_listener_t listener = kRecording;
    listener.ud = &rec;
    simba_election_t* e = nullptr;
    ASSERT_EQ(simba_election_start(&e, c, lease("e" + std::to_string(i)).c_str(), &listener),
              SIMBA_OK);
    ASSERT_TRUE(wait_for([&] { return rec.get() == "E"; }, 5000 * slow_factor())) << rec.get();
    ASSERT_EQ(simba_election_stop(
                  e, [](void* ud, int) { static_cast<Record*>(ud)->add('D'); }, &rec),
              SIMBA_OK);
    ASSERT_TRUE(wait_for([&] { return rec.get().size() >= 3; }, 5000 * slow_factor()));
    simba_election_free(e);
    EXPECT_EQ(rec.get(), "ERD") << "election " << i;
  }
  const std::thread::id cycler = StopCycler();
  EXPECT_GE(cycles_.load(), 10);
  // One drain may run several tasks of a queue: at least one submit per election.
  EXPECT_GE(executor.submits.count(), kElections);
  EXPECT_EQ(executor.submits.distinct(), 1u) << "submit() ran on more than the loop thread";
  EXPECT_FALSE(executor.submits.includes(cycler)) << "submit() ran on a borrower";
  EXPECT_FALSE(executor.submits.includes(std::this_thread::get_id()));
  simba_client_close(c);
  clients_.clear();
}

// A host that rejects onElected: nobody learns of the term and the election
// steps down (ADR 0002), also when a borrower took in the acquire's answer and
// handed the announcement to the loop thread. Nothing else is lost: the other
// tasks run on the loop instead, and every stop completes.
TEST_F(HostExecutorBorrow, ARejectedOnElectedStillStepsDownWhenABorrowerTookTheAnswer) {
  RejectingExecutor executor;
  std::atomic<int> rejected_logs{0};
  simba_client_t* c = Open(&RejectingExecutor::submit, &executor, [&](simba_config_t* cfg) {
    ASSERT_EQ(simba_config_set_logger(
                  cfg,
                  [](void* ud, int, const char* msg) {
                    if (std::string(msg).find("rejected onElected") != std::string::npos) {
                      ++*static_cast<std::atomic<int>*>(ud);
                    }
                  },
                  &rejected_logs, SIMBA_LOG_WARN),
              SIMBA_OK);
  });
  ASSERT_NE(c, nullptr);
  StartCycler(c);
  ASSERT_TRUE(wait_for([&] { return cycles_ >= 10; }, 5000 * slow_factor()));
  constexpr int kElections = 20;
  std::vector<Record> records(kElections);
  std::vector<simba_election_t*> elections;
  for (int i = 0; i < kElections; ++i) {
    simba_listener_t listener = kRecording;
    listener.ud = &records[i];
    simba_election_t* e = nullptr;
    ASSERT_EQ(simba_election_start(&e, c, lease("r" + std::to_string(i)).c_str(), &listener),
              SIMBA_OK);
    elections.push_back(e);
    // One at a time, so that the cycler takes in most of the answers.
    ASSERT_TRUE(wait_for([&] { return rejected_logs > i; }, 5000 * slow_factor()))
        << rejected_logs.load();
  }
  for (simba_election_t* e : elections) {
    EXPECT_EQ(simba_election_stop_wait(e, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
    simba_election_free(e);
  }
  const std::thread::id cycler = StopCycler();
  for (int i = 0; i < kElections; ++i) EXPECT_EQ(records[i].get(), "") << "election " << i;
  EXPECT_GE(executor.submits.count(), kElections);
  EXPECT_EQ(executor.submits.distinct(), 1u) << "submit() ran on more than the loop thread";
  EXPECT_FALSE(executor.submits.includes(cycler)) << "submit() ran on a borrower";
  EXPECT_FALSE(executor.submits.includes(std::this_thread::get_id()));
  simba_client_close(c);  // before the executor goes
  clients_.clear();
}

}  // namespace
