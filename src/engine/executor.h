// Where callbacks run: the callback executor (a pool owned by the client, the
// loop itself, or a host's submit function) and the serial dispatcher that
// runs the callbacks of one election one at a time, in order, over it.
#ifndef SIMBA_ENGINE_EXECUTOR_H
#define SIMBA_ENGINE_EXECUTOR_H

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/ref_ptr.h"

namespace simba::engine {

class Client;
class SerialQueue;
// A queue counts its own references (an election's queue counts its election's).
using QueueRef = RefPtr<SerialQueue>;

// True while this thread runs a simba callback (blocking calls then refuse).
bool in_callback();

class CallbackScope {
 public:
  CallbackScope();
  ~CallbackScope();
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;
};

// True while this thread runs leader work (simba_run_while_leader, schedules):
// blocking close calls then do not wait, since they would wait for the work.
bool in_work();

class WorkScope {
 public:
  WorkScope();
  ~WorkScope();
  WorkScope(const WorkScope&) = delete;
  WorkScope& operator=(const WorkScope&) = delete;
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs `fn` later, once, on a thread of the executor. False if rejected.
  virtual bool submit(std::function<void()> fn) = 0;
  // Rejects new tasks and waits until every accepted task has run. Never call
  // it from a task of this executor.
  virtual void shutdown() = 0;
};

// A fixed pool of threads owned by the client.
class PoolExecutor final : public Executor {
 public:
  explicit PoolExecutor(int threads);
  ~PoolExecutor() override;
  bool submit(std::function<void()> fn) override;
  void shutdown() override;

 private:
  void work();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// A host's executor: submit(ctx, run, arg) from simba_config_set_executor.
// shutdown() runs, on the closing thread, every task the host has not started
// yet (the closing thread may be the host's only one draining its executor, so
// waiting for the host would wait forever), and waits only for tasks running
// on another thread. The host's later run(arg) of such a task just frees it.
class HostExecutor final : public Executor {
 public:
  using SubmitFn = int (*)(void* ctx, void (*run)(void*), void* arg);
  HostExecutor(SubmitFn submit, void* ctx) : submit_(submit), ctx_(ctx) {}
  bool submit(std::function<void()> fn) override;
  void shutdown() override;

 private:
  struct Task;
  // What a task the host runs after the close still reaches: it outlives the
  // executor for as long as one of its tasks is not freed.
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::set<Task*> pending;  // submitted, not started by anyone
    int running = 0;          // started by the host, not returned
    bool stopping = false;
  };
  static void trampoline(void* arg);
  SubmitFn submit_;
  void* ctx_;
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
};

// A host's executor whose submit() is promised one thread, the loop's: while
// `away()` holds (a caller borrowed the loop, ADR 0014), a submit is handed to
// `hand_off`, which makes it on the loop thread in a later turn; a task the
// host rejects then runs there at once, as the loop executor would (ADR 0029).
class HandOffExecutor final : public Executor {
 public:
  using HandOff = std::function<bool(std::function<void()>)>;
  HandOffExecutor(std::unique_ptr<Executor> inner, std::function<bool()> away, HandOff hand_off)
      : inner_(std::move(inner)), away_(std::move(away)), hand_off_(std::move(hand_off)) {}
  bool submit(std::function<void()> fn) override;
  void shutdown() override { inner_->shutdown(); }

 private:
  std::unique_ptr<Executor> inner_;
  std::function<bool()> away_;
  HandOff hand_off_;
};

// Runs tasks on the client's loop thread, after the current loop event: the
// engine supplies `defer`, which queues a task for the loop.
class LoopExecutor final : public Executor {
 public:
  explicit LoopExecutor(std::function<bool(std::function<void()>)> defer)
      : defer_(std::move(defer)) {}
  bool submit(std::function<void()> fn) override { return defer_(std::move(fn)); }
  void shutdown() override {}

 private:
  std::function<bool(std::function<void()>)> defer_;
};

// Where a SerialQueue's drains run: `ex`, or `fallback` when `ex` rejects.
// Every queue of a client shares one (one pointer per queue: ADR 0024), and
// holds a reference to it, since a queue may outlive its client (a term the
// user retains). close() closes every queue of the client at once, so that the
// client keeps no list of its queues (ADR 0042).
class QueueExecutors {
 public:
  static RefPtr<QueueExecutors> make(Executor* ex, Executor* fallback) {
    return RefPtr<QueueExecutors>(new QueueExecutors(ex, fallback));
  }
  QueueExecutors(const QueueExecutors&) = delete;
  QueueExecutors& operator=(const QueueExecutors&) = delete;
  // Set before the first queue is made.
  void set(Executor* ex, Executor* fallback) {
    ex_ = ex;
    fallback_ = fallback;
  }
  // Rejects every post from now on, and returns once no post is submitting:
  // no executor's submit() starts after it (tasks already posted still run).
  void close();
  // The client whose queues these are: empty once it is gone.
  std::shared_ptr<Client> client() const { return client_.lock(); }
  void set_client(std::weak_ptr<Client> c) { client_ = std::move(c); }
  // How many queues use it (a test hook: the queues left to close).
  size_t queues() const { return queues_.load(); }
  // A post about to submit: false once closed. Pair with leave().
  bool enter();
  void leave() { submitting_.fetch_sub(1); }

  void retain() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

 private:
  friend class SerialQueue;
  QueueExecutors(Executor* ex, Executor* fallback) : ex_(ex), fallback_(fallback) {}
  Executor* ex_;
  Executor* fallback_;
  std::weak_ptr<Client> client_;
  std::atomic<int> refs_{0};
  std::atomic<int> submitting_{0};
  std::atomic<bool> closed_{false};
  std::atomic<size_t> queues_{0};
};

// Runs its tasks one at a time, in order, on an executor, holding no lock
// while a task runs. If the executor rejects, the fallback runs them instead.
// It counts references as its owner does: a queue of its own (make) counts
// itself; a queue that is the base of another object (an election, ADR 0042)
// counts that object's. A submitted drain holds one, so that the queue (and
// its owner) outlives it.
class SerialQueue {
 public:
  // A queue of its own.
  static QueueRef make(const RefPtr<QueueExecutors>& executors);
  SerialQueue(const SerialQueue&) = delete;
  SerialQueue& operator=(const SerialQueue&) = delete;
  virtual void retain() = 0;
  virtual void release() = 0;
  const RefPtr<QueueExecutors>& executors() const { return executors_; }
  // False once closed: the task will not run. A task the executor rejects
  // runs on the fallback executor.
  bool post(std::function<void()> task);
  enum class Posted { kQueued, kRejected, kClosed };
  // Like post(), but when the executor rejects the task (a host's submit said
  // no), the task is dropped instead of falling back: kRejected.
  Posted post_or_reject(std::function<void()> task);
  // Rejects tasks posted from now on; tasks already posted still run (its
  // client's close does it for all: QueueExecutors::close).
  void close();
  // Blocks until no task of this queue is running on another thread (the
  // caller's own task, if it runs one, does not count). Tasks still queued may
  // run later.
  void wait_idle();
  // Blocks until `done()` (read under the queue's lock) holds, and no task
  // runs on another thread. With `may_run_here`, tasks that wait while no
  // other thread drains the queue run on this thread (the executor may have
  // nobody else to run them: a host's executor drained only by this thread);
  // without, it waits for the executor. `done` is checked again at least
  // every 50 ms, for conditions set outside the queue.
  void wait_until(const std::function<bool()>& done, bool may_run_here);
  // Blocks until every task posted so far has run (as wait_until).
  void wait_drained(bool may_run_here);

 protected:
  explicit SerialQueue(RefPtr<QueueExecutors> executors) : executors_(std::move(executors)) {
    executors_->queues_.fetch_add(1, std::memory_order_relaxed);
  }
  virtual ~SerialQueue() { executors_->queues_.fetch_sub(1, std::memory_order_relaxed); }

 private:
  // Holds the queue's lock (state_) for its scope; unlock()/lock() may release
  // it meanwhile. Recursive: a guard taken by the thread that already holds the
  // lock (a host executor that wrongly runs a drain inside submit()) owns
  // nothing, and its unlock() releases nothing, as a recursive mutex's inner
  // level would.
  class Lock;
  void drain();
  // Runs queued tasks on this thread until the queue is empty; `lock` held on
  // entry and exit, released while a task runs.
  void run_queued(Lock& lock);
  // Waits on the condition variable every queue shares (below), as one of
  // this queue's waiters; `for_at_most` bounds the wait (zero: no bound).
  void wait_for_change(Lock& lock, std::chrono::milliseconds for_at_most);
  bool has_tasks() const { return pending_ && pending_->head < pending_->tasks.size(); }
  // The thread running this queue's tasks, if any.
  std::thread::id draining() const { return pending_ ? pending_->draining : std::thread::id(); }
  void push(std::function<void()> task);
  // Frees the tasks' block once it holds nothing: no task, no drain.
  void trim() {
    if (pending_ && !has_tasks() && pending_->draining == std::thread::id()) pending_.reset();
  }
  const RefPtr<QueueExecutors> executors_;
  // Tasks not yet run are tasks[head...]. A vector, not a deque: every
  // election has a queue, mostly idle, and an empty libstdc++ deque holds 576
  // bytes (ADR 0024); in a block of its own, made when a task comes and freed
  // when the queue is empty and no drain runs, so that an idle queue holds one
  // pointer, not 40 bytes (ADR 0042). The draining thread is recorded there
  // too: a drain runs only while the block exists.
  struct Pending {
    std::vector<std::function<void()>> tasks;
    size_t head = 0;
    std::thread::id draining;  // the thread running this queue's tasks, if any
  };
  std::unique_ptr<Pending> pending_;
  // The queue's lock and its flags in one word, instead of a 40-byte
  // recursive mutex and four fields (an election is a queue, ADR 0042): the
  // owner is the address of a 16-aligned thread-local of the holding thread
  // (kOwner bits; zero when free), then the flags. kParked: a thread sleeps
  // for the lock on a slot of queue_parking_for(this) (engine/parking.h).
  // The other flags change only under the lock, by atomic read-modify-write
  // since a parking thread sets kParked meanwhile.
  // Submitting happens under the lock so that close() cannot slip between a
  // post's check and its submit (the executor is gone after the client closed).
  static constexpr uintptr_t kParked = 1;
  static constexpr uintptr_t kScheduled = 2;  // a drain was submitted and has not ended
  static constexpr uintptr_t kClosed = 4;     // close() ran: posts are refused
  // A thread waits on the shared condition variable for this queue. Waiters
  // of every queue of the process share one condition variable (waiting is
  // rare: a free, a release, a drain that found another thread running the
  // tasks), which the end of a drain notifies only when this is set, and
  // clears: every waiter sets it again before it waits again.
  static constexpr uintptr_t kWaiting = 8;
  static constexpr uintptr_t kOwner = ~uintptr_t{15};
  bool is(uintptr_t flag) const { return (state_.load(std::memory_order_relaxed) & flag) != 0; }
  void set(uintptr_t flag, bool on) {
    if (on) {
      state_.fetch_or(flag, std::memory_order_relaxed);
    } else {
      state_.fetch_and(~flag, std::memory_order_relaxed);
    }
  }
  std::atomic<uintptr_t> state_{0};
};

}  // namespace simba::engine

#endif
