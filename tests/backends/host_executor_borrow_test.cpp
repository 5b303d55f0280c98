// A client with a host executor lends its idle loop to a caller waiting for
// the backend, as any THREAD-mode client does (ADR 0014), while the host's
// submit() is still called from the loop thread only: a borrower hands a
// submit, and an election's onElected with what follows it, to the loop thread
// (ADR 0029). On memory://, whose MemoryFaults::loop_runner names the thread
// that last made a backend call or took in its answer: a submit (or a log
// line) on the loop thread while loop_runner names another thread was handed
// over by a borrower that took in the answer behind it.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend/memory/memory_backend.h"
#include "backend/memory/memory_store.h"
#include "backends/simba_testing.h"
#include "capi/capi.h"
#include "simba.h"

namespace {

using namespace simba_testing;

// The threads a host's submit() was called on, and how many submits came on
// the loop thread after a borrower took in the answer behind them (handed over).
struct SubmitLog {
  ThreadsSeen threads;
  std::atomic<simba::MemoryFaults*> faults{nullptr};
  std::atomic<int> handed{0};
  void note() {
    threads.note();
    simba::MemoryFaults* f = faults.load();
    if (f && f->loop_runner.load() != std::this_thread::get_id()) ++handed;
  }
};

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
  SubmitLog submits;

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
  SubmitLog submits;
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

void record_done(void* ud, int) { static_cast<Record*>(ud)->add('D'); }

// The "rejected onElected" log lines, per lease name, and how many of them the
// loop thread logged for an answer a borrower took in (the announcement was
// handed over: the loop thread runs handed-over work first in its turn).
struct Rejections {
  static constexpr const char* kPrefix = "rejected onElected of ";
  std::atomic<simba::MemoryFaults*> faults{nullptr};
  std::mutex mu;
  std::map<std::string, int> lines;
  std::set<std::string> handed;

  static void log(void* ud, int, const char* msg) {
    auto* self = static_cast<Rejections*>(ud);
    const std::string s(msg);
    const size_t at = s.find(kPrefix);
    if (at == std::string::npos) return;
    const size_t from = at + std::string(kPrefix).size();
    const std::string name = s.substr(from, s.find(" token ", from) - from);
    simba::MemoryFaults* f = self->faults.load();
    std::lock_guard<std::mutex> lock(self->mu);
    ++self->lines[name];
    if (f && f->loop_runner.load() != std::this_thread::get_id()) self->handed.insert(name);
  }
  int of(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = lines.find(name);
    return it == lines.end() ? 0 : it->second;
  }
  bool was_handed(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu);
    return handed.count(name) != 0;
  }
  size_t handed_count() {
    std::lock_guard<std::mutex> lock(mu);
    return handed.size();
  }
};

// Holds a borrower inside the memory store's release broadcast of one name,
// which it runs synchronously while it owns the loop: answers become due and
// commands wait meanwhile, and the borrower takes them all in, in its next turn.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  std::string name;
  std::thread::id thread;
  bool entered = false;
  bool open = true;
  void arm(const std::string& n) {
    std::lock_guard<std::mutex> lock(mu);
    name = n;
    thread = std::this_thread::get_id();
    entered = false;
    open = false;
  }
  // The store's subscriber: blocks the armed thread (only if it runs the release).
  void pass(const std::string& n) {
    std::unique_lock<std::mutex> lock(mu);
    if (open || n != name || std::this_thread::get_id() != thread) return;
    entered = true;
    cv.notify_all();
    cv.wait(lock, [this] { return open; });
  }
  bool wait_entered(int64_t timeout_ms) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] { return entered; });
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu);
      open = true;
    }
    cv.notify_all();
  }
};

class HostExecutorBorrow : public ::testing::Test {
 protected:
  void SetUp() override {
    url_ = "memory://hostborrow-" + unique_id();
    store_ = simba::MemoryStore::named(url_.substr(9));
  }

  // Opens a client with `submit`; `submits` learns its memory faults.
  simba_client_t* Open(simba_submit_fn submit, void* ctx, SubmitLog* submits,
                       bool log_rejections = false) {
    simba_client_t* c = open_live(url_, 3000, 1000, [&](simba_config_t* cfg) {
      EXPECT_EQ(simba_config_set_executor(cfg, submit, ctx), SIMBA_OK);
      if (log_rejections) {
        EXPECT_EQ(simba_config_set_logger(cfg, &Rejections::log, &rejections_, SIMBA_LOG_WARN),
                  SIMBA_OK);
      }
    });
    if (c) {
      clients_.push_back(c);
      submits->faults = &faults(c);
      rejections_.faults = &faults(c);
    }
    return c;
  }

  // Everything the clients' threads may still use (executors, records, the
  // gate) is a member, so it outlives the clients closed here; threads end
  // first, also after a failed ASSERT.
  void TearDown() override {
    StopCycler();
    gate_.release();
    for (std::thread* t : {&gated_, &stopper_}) {
      if (t->joinable()) t->join();
    }
    for (simba_client_t* c : clients_) simba_client_close(c);
    clients_.clear();
    if (subscription_) store_->unsubscribe(subscription_);
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

  Record& NewRecord() { return records_.emplace_back(); }
  static simba::MemoryFaults& faults(simba_client_t* c) { return *c->impl->memory_faults(); }
  std::string lease(const std::string& s) const { return url_.substr(9) + "." + s; }

  std::string url_;
  std::shared_ptr<simba::MemoryStore> store_;
  uint64_t subscription_ = 0;
  QueueExecutor queue_executor_;
  RejectingExecutor rejecting_;
  Rejections rejections_;
  std::deque<Record> records_;  // elements never move
  Gate gate_;
  std::thread gated_;
  std::thread stopper_;
  std::vector<simba_client_t*> clients_;
  std::thread cycler_;
  std::mutex cycler_mu_;
  std::thread::id cycler_id_;
  std::atomic<bool> stop_{false};
  std::atomic<int> cycles_{0};
};

// The lock cycle of a host-executor client runs on the caller's thread: the
// call and its answer need no thread wake-up (issue 36: 4-7 x the default
// pool's cycle before). A lock cycle has no callback: lending the loop costs
// the host nothing, not a submit.
TEST_F(HostExecutorBorrow, AClientWithAHostExecutorLendsItsLoop) {
  simba_client_t* c = Open(&QueueExecutor::submit, &queue_executor_, &queue_executor_.submits);
  ASSERT_NE(c, nullptr);
  const std::thread::id me = std::this_thread::get_id();
  const int submits_before = queue_executor_.submits.threads.count();
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
  EXPECT_EQ(queue_executor_.submits.threads.count(), submits_before);
}

// Elections of a client whose loop a caller borrows nearly all the time: their
// answers are taken in by the borrower, yet submit() is called from one thread
// (the loop thread) only, and each election's callbacks come in order: on_elected,
// on_revoked, then the stop's done.
TEST_F(HostExecutorBorrow, SubmitStaysOnTheLoopThreadAndCallbacksInOrder) {
  SubmitLog& submits = queue_executor_.submits;
  simba_client_t* c = Open(&QueueExecutor::submit, &queue_executor_, &submits);
  ASSERT_NE(c, nullptr);
  StartCycler(c);
  ASSERT_TRUE(wait_for([&] { return cycles_ >= 10; }, 5000 * slow_factor()));
  constexpr int kElections = 30;
  for (int i = 0; i < kElections; ++i) {
    Record& rec = NewRecord();
    simba_listener_t listener = kRecording;
    listener.ud = &rec;
    simba_election_t* e = nullptr;
    ASSERT_EQ(simba_election_start(&e, c, lease("e" + std::to_string(i)).c_str(), &listener),
              SIMBA_OK);
    ASSERT_TRUE(wait_for([&] { return rec.get() == "E"; }, 5000 * slow_factor())) << rec.get();
    ASSERT_EQ(simba_election_stop(e, &record_done, &rec), SIMBA_OK);
    ASSERT_TRUE(wait_for([&] { return rec.get().size() >= 3; }, 5000 * slow_factor()));
    simba_election_free(e);
    EXPECT_EQ(rec.get(), "ERD") << "election " << i;
  }
  const std::thread::id cycler = StopCycler();
  EXPECT_GE(cycles_.load(), 10);
  // One drain may run several tasks of a queue: at least one submit per election.
  EXPECT_GE(submits.threads.count(), kElections);
  // The hand-off ran: the cycler took in answers whose callbacks' submits the
  // loop thread then made (30 elections x 3 callbacks; most are handed over).
  EXPECT_GT(submits.handed.load(), 0) << "no borrower took in an election's answer";
  EXPECT_EQ(submits.threads.distinct(), 1u) << "submit() ran on more than the loop thread";
  EXPECT_FALSE(submits.threads.includes(cycler)) << "submit() ran on a borrower";
  EXPECT_FALSE(submits.threads.includes(std::this_thread::get_id()));
}

// A host that rejects onElected: nobody learns of the term and the election
// steps down (ADR 0002), also when a borrower took in the acquire's answer and
// handed the announcement to the loop thread. Nothing else is lost: the other
// tasks run on the loop instead, and every stop completes.
TEST_F(HostExecutorBorrow, ARejectedOnElectedStillStepsDownWhenABorrowerTookTheAnswer) {
  SubmitLog& submits = rejecting_.submits;
  simba_client_t* c = Open(&RejectingExecutor::submit, &rejecting_, &submits, true);
  ASSERT_NE(c, nullptr);
  StartCycler(c);
  ASSERT_TRUE(wait_for([&] { return cycles_ >= 10; }, 5000 * slow_factor()));
  constexpr int kElections = 20;
  std::vector<Record*> records;
  std::vector<simba_election_t*> elections;
  for (int i = 0; i < kElections; ++i) {
    const std::string name = lease("r" + std::to_string(i));
    records.push_back(&NewRecord());
    simba_listener_t listener = kRecording;
    listener.ud = records.back();
    simba_election_t* e = nullptr;
    ASSERT_EQ(simba_election_start(&e, c, name.c_str(), &listener), SIMBA_OK);
    elections.push_back(e);
    // One at a time (its own rejection, not an earlier election's), so that
    // the cycler takes in most of the answers.
    ASSERT_TRUE(wait_for([&] { return rejections_.of(name) >= 1; }, 5000 * slow_factor()))
        << "election " << i;
  }
  for (simba_election_t* e : elections) {
    EXPECT_EQ(simba_election_stop_wait(e, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
    simba_election_free(e);
  }
  const std::thread::id cycler = StopCycler();
  for (int i = 0; i < kElections; ++i) EXPECT_EQ(records[i]->get(), "") << "election " << i;
  EXPECT_GT(rejections_.handed_count(), 0u) << "no borrower took in an election's answer";
  EXPECT_GE(submits.threads.count(), kElections);
  EXPECT_EQ(submits.threads.distinct(), 1u) << "submit() ran on more than the loop thread";
  EXPECT_FALSE(submits.threads.includes(cycler)) << "submit() ran on a borrower";
  EXPECT_FALSE(submits.threads.includes(std::this_thread::get_id()));
}

// An election stopped while its handed-over announcement still waits for the
// loop thread, with a host that rejects onElected: a borrower held in the
// store's release broadcast (Gate) takes in, in one turn, the election's
// acquire answer (the announcement goes to the loop thread) and then the stop
// posted meanwhile. The announcement then runs after the stop: rejected, no
// step-down (the election is stopping), no onRevoked, and the stop completes.
TEST_F(HostExecutorBorrow, AStopWhileTheHandedOffAnnouncementWaits) {
  simba_client_t* c = Open(&RejectingExecutor::submit, &rejecting_, &rejecting_.submits, true);
  ASSERT_NE(c, nullptr);
  subscription_ = store_->subscribe([this](const std::string& name) { gate_.pass(name); });
  const int64_t delay_ms = 200 * slow_factor();
  int hits = 0;
  int attempts = 0;
  while (hits == 0 && attempts < 10) {
    const std::string name = lease("s" + std::to_string(attempts));
    const std::string gate = lease("gate" + std::to_string(attempts));
    ++attempts;
    const int64_t stepped_down = json_int(snapshot(c), "STEPPED_DOWN");
    ASSERT_GE(stepped_down, 0) << snapshot(c);
    Record& rec = NewRecord();
    simba_listener_t listener = kRecording;
    listener.ud = &rec;
    simba_election_t* e = nullptr;
    // The acquire applies now; its answer is due delay_ms later.
    faults(c).reply_delay_ns = delay_ms * kMsNs;
    ASSERT_EQ(simba_election_start(&e, c, name.c_str(), &listener), SIMBA_OK);
    const bool sent = wait_for([&] { return store_->lease(name).token > 0; }, delay_ms / 2, 1);
    const int64_t due_ms = mono_ms() + delay_ms;
    faults(c).reply_delay_ns = 0;
    ASSERT_TRUE(sent);
    // A borrower that releases `gate` and is held there, owning the loop.
    gated_ = std::thread([this, c, gate] {
      simba_term_t* t = nullptr;
      if (simba_lock_acquire(&t, c, gate.c_str(), 5000) != SIMBA_OK) return;
      sleep_ms(2);  // the loop thread back in its poll, off its standby
      gate_.arm(gate);
      simba_lock_release(t);
    });
    const bool held = gate_.wait_entered(delay_ms / 2);
    // The stop is posted (the loop is lent) and waits for the borrower.
    stopper_ = std::thread([e, &rec] { simba_election_stop(e, &record_done, &rec); });
    while (mono_ms() < due_ms + 20 * slow_factor()) sleep_ms(5);
    gate_.release();
    gated_.join();
    stopper_.join();
    EXPECT_TRUE(wait_for([&] { return rec.get() == "D"; }, 5000 * slow_factor()))
        << "attempt " << attempts << ": " << rec.get();
    simba_election_free(e);
    // Not held (the loop thread ran the release): the stop may have come first.
    if (!held) continue;
    EXPECT_EQ(rejections_.of(name), 1) << "attempt " << attempts;
    // The borrower took in the acquire answer and the stop ran before the
    // announcement: it found the election stopping and did not step down.
    const bool stopped_first = json_int(snapshot(c), "STEPPED_DOWN") == stepped_down;
    hits += rejections_.was_handed(name) && stopped_first;
  }
  EXPECT_GT(hits, 0) << "in " << attempts << " attempts";
  EXPECT_EQ(rejecting_.submits.threads.distinct(), 1u);
}

}  // namespace
