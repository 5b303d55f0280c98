#include "engine/executor.h"

#include <chrono>

#include "engine/parking.h"

namespace simba::engine {

// Four words: its vtable, executors, tasks' block and lock word (ADR 0042).
static_assert(sizeof(void*) != 8 || sizeof(SerialQueue) <= 32, "engine::SerialQueue grew past 32");

namespace {
thread_local int tl_callback_depth = 0;
thread_local int tl_work_depth = 0;

// What every SerialQueue's waiters wait on (see SerialQueue::kWaiting). A
// condition_variable_any may be waited on with different locks: each waiter
// holds its own queue's lock, and a drain notifies while holding the lock of
// its queue, so no wake-up of that queue is lost; other queues' notifications
// are spurious wake-ups, which every wait re-checks. Never destroyed: a queue
// may outlive static destruction on a host's thread.
std::condition_variable_any& queue_idle_cv() {
  static std::condition_variable_any& cv = *new std::condition_variable_any;
  return cv;
}
}  // namespace

bool in_callback() { return tl_callback_depth > 0; }
CallbackScope::CallbackScope() { ++tl_callback_depth; }
CallbackScope::~CallbackScope() { --tl_callback_depth; }

bool in_work() { return tl_work_depth > 0; }
WorkScope::WorkScope() { ++tl_work_depth; }
WorkScope::~WorkScope() { --tl_work_depth; }

PoolExecutor::PoolExecutor(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
}

PoolExecutor::~PoolExecutor() { shutdown(); }

bool PoolExecutor::submit(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    tasks_.push_back(std::move(fn));
  }
  cv_.notify_one();
  return true;
}

void PoolExecutor::work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void PoolExecutor::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

struct HostExecutor::Task {
  std::shared_ptr<Shared> shared;
  std::function<void()> fn;
  bool claimed = false;  // under shared->mu: started by the host or by shutdown()
};

bool HostExecutor::submit(std::function<void()> fn) {
  auto* task = new Task{shared_, std::move(fn)};
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (shared_->stopping) {
      delete task;
      return false;
    }
    shared_->pending.insert(task);
  }
  if (submit_(ctx_, &HostExecutor::trampoline, task) != 0) {
    // Rejected: it never runs, unless shutdown() already ran it meanwhile.
    std::lock_guard<std::mutex> lock(shared_->mu);
    const bool ran = shared_->pending.erase(task) == 0;
    delete task;
    return ran;
  }
  return true;
}

void HostExecutor::trampoline(void* arg) {
  std::unique_ptr<Task> task(static_cast<Task*>(arg));
  const std::shared_ptr<Shared> shared = task->shared;
  {
    std::lock_guard<std::mutex> lock(shared->mu);
    // Claimed by shutdown(), which ran it on the closing thread: the client may
    // be gone by now, and only this block is left to free.
    if (task->claimed) return;
    task->claimed = true;
    shared->pending.erase(task.get());
    ++shared->running;
  }
  task->fn();
  task.reset();
  std::lock_guard<std::mutex> lock(shared->mu);
  if (--shared->running == 0) shared->cv.notify_all();
}

void HostExecutor::shutdown() {
  std::unique_lock<std::mutex> lock(shared_->mu);
  shared_->stopping = true;
  while (!shared_->pending.empty()) {
    Task* task = *shared_->pending.begin();
    shared_->pending.erase(shared_->pending.begin());
    task->claimed = true;  // the host's run(arg) now only frees the block
    std::function<void()> fn = std::move(task->fn);
    lock.unlock();
    fn();
    lock.lock();
  }
  shared_->cv.wait(lock, [this] { return shared_->running == 0; });
}

bool HandOffExecutor::submit(std::function<void()> fn) {
  if (!away_()) return inner_->submit(std::move(fn));
  return hand_off_([this, fn = std::move(fn)] {
    if (!inner_->submit(fn)) fn();  // rejected: the loop thread runs it
  });
}

bool QueueExecutors::enter() {
  submitting_.fetch_add(1);
  if (!closed_.load()) return true;
  leave();
  return false;
}

void QueueExecutors::close() {
  closed_.store(true);
  // Seq-cst with enter(): a post either saw closed_ or counts in submitting_.
  while (submitting_.load() > 0) std::this_thread::yield();
}

namespace {
class OwnQueue final : public SerialQueue {
 public:
  explicit OwnQueue(RefPtr<QueueExecutors> executors) : SerialQueue(std::move(executors)) {}
  void retain() override { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() override {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

 private:
  std::atomic<int> refs_{0};
};
}  // namespace

QueueRef SerialQueue::make(const RefPtr<QueueExecutors>& executors) {
  return QueueRef(new OwnQueue(executors));
}

namespace {
// A post between QueueExecutors::enter() and leave().
struct Submitting {
  explicit Submitting(QueueExecutors& e) : e(e) {}
  ~Submitting() { e.leave(); }
  QueueExecutors& e;
};
}  // namespace

// The queue's lock word (SerialQueue::state_): a compare-and-swap when free, a
// short spin, then a sleep on a slot of queue_parking_for(queue) that unlock()
// wakes when kParked is set. A slot's mutex is held only here, never while
// taking another lock, and a thread sleeping for the word holds no slot's
// mutex: which threads wait for which queues is what it was with a mutex per
// queue, with one leaf lock more.
class SerialQueue::Lock {
 public:
  explicit Lock(SerialQueue& q) : q_(q) { lock(); }
  ~Lock() { unlock(); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

  void lock() {
    const uintptr_t me = self();
    uintptr_t s = q_.state_.load(std::memory_order_relaxed);
    if ((s & kOwner) == me) return;  // held further out on this thread: owns nothing
    for (int spins = 0;; ++spins) {
      if ((s & kOwner) == 0) {
        if (q_.state_.compare_exchange_weak(s, s | me, std::memory_order_acquire,
                                            std::memory_order_relaxed)) {
          owns_ = true;
          return;
        }
        continue;  // s reloaded
      }
      if (spins >= kSpins) break;
      relax();
      s = q_.state_.load(std::memory_order_relaxed);
    }
    Parking& slot = queue_parking_for(&q_);
    std::unique_lock<std::mutex> parked(slot.mu);
    s = q_.state_.load(std::memory_order_relaxed);
    for (;;) {
      if ((s & kOwner) == 0) {
        if (q_.state_.compare_exchange_weak(s, s | me, std::memory_order_acquire,
                                            std::memory_order_relaxed)) {
          owns_ = true;
          return;
        }
        continue;
      }
      // Set under the slot's mutex, which unlock() takes to notify: no lost wake-up.
      if ((s & kParked) == 0 &&
          !q_.state_.compare_exchange_weak(s, s | kParked, std::memory_order_relaxed)) {
        continue;
      }
      // Every sleeper of the slot wakes at an unlock that saw kParked; those
      // that lose the word set it again.
      slot.cv.wait(parked);
      s = q_.state_.load(std::memory_order_relaxed);
    }
  }

  void unlock() {
    if (!owns_) return;
    owns_ = false;
    const uintptr_t was = q_.state_.fetch_and(~(kOwner | kParked), std::memory_order_release);
    if ((was & kParked) != 0) {
      Parking& slot = queue_parking_for(&q_);
      std::lock_guard<std::mutex> parked(slot.mu);
      slot.cv.notify_all();
    }
  }

 private:
  static constexpr int kSpins = 64;
  // The calling thread: the address of a thread-local, 16-aligned so that the
  // flags fit below it. Unique among live threads, and never zero.
  static uintptr_t self() {
    alignas(16) static thread_local char tag;
    return reinterpret_cast<uintptr_t>(&tag);
  }
  static void relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }
  SerialQueue& q_;
  bool owns_ = false;
};

void SerialQueue::wait_for_change(Lock& lock, std::chrono::milliseconds for_at_most) {
  set(kWaiting, true);
  if (for_at_most.count() > 0) {
    queue_idle_cv().wait_for(lock, for_at_most);
  } else {
    queue_idle_cv().wait(lock);
  }
}

bool SerialQueue::post(std::function<void()> task) {
  const Lock lock(*this);
  if (is(kClosed) || !executors_->enter()) return false;
  const Submitting submitting(*executors_);
  push(std::move(task));
  if (is(kScheduled)) return true;
  set(kScheduled, true);
  const QueueRef self(this);
  if (!executors_->ex_->submit([self] { self->drain(); }) &&
      !executors_->fallback_->submit([self] { self->drain(); })) {
    set(kScheduled, false);  // nobody will drain: the tasks stay queued
  }
  return true;
}

SerialQueue::Posted SerialQueue::post_or_reject(std::function<void()> task) {
  const Lock lock(*this);
  if (is(kClosed) || !executors_->enter()) return Posted::kClosed;
  const Submitting submitting(*executors_);
  push(std::move(task));
  if (is(kScheduled)) return Posted::kQueued;  // a drain already accepted will run it
  set(kScheduled, true);
  const QueueRef self(this);
  if (executors_->ex_->submit([self] { self->drain(); })) return Posted::kQueued;
  if (has_tasks()) pending_->tasks.pop_back();
  trim();
  set(kScheduled, false);
  // Earlier tasks left waiting by a failed submit still need a drain.
  if (has_tasks()) {
    set(kScheduled, true);
    if (!executors_->fallback_->submit([self] { self->drain(); })) set(kScheduled, false);
  }
  return Posted::kRejected;
}

void SerialQueue::close() {
  const Lock lock(*this);
  set(kClosed, true);
}

void SerialQueue::wait_idle() {
  Lock lock(*this);
  const auto me = std::this_thread::get_id();
  while (draining() != std::thread::id() && draining() != me) {
    wait_for_change(lock, std::chrono::milliseconds(0));
  }
}

void SerialQueue::wait_until(const std::function<bool()>& done, bool may_run_here) {
  Lock lock(*this);
  const auto me = std::this_thread::get_id();
  for (;;) {
    const std::thread::id draining_now = draining();
    const bool idle = draining_now == std::thread::id() || draining_now == me;
    if (idle && done()) return;
    if (draining_now == std::thread::id() && has_tasks() && may_run_here) {
      // The drain submitted for these tasks has not started (and may never):
      // run them here. That drain finds the queue empty when it comes.
      run_queued(lock);
      continue;
    }
    wait_for_change(lock, std::chrono::milliseconds(50));
  }
}

void SerialQueue::wait_drained(bool may_run_here) {
  {
    const Lock lock(*this);
    if (draining() == std::this_thread::get_id()) return;  // from one of its own tasks
  }
  wait_until([this] { return !has_tasks(); }, may_run_here);
}

void SerialQueue::push(std::function<void()> task) {
  if (!pending_) pending_ = std::make_unique<Pending>();
  pending_->tasks.push_back(std::move(task));
}

void SerialQueue::run_queued(Lock& lock) {
  if (has_tasks()) {
    pending_->draining = std::this_thread::get_id();
    // The block stays while the drain runs (trim() leaves it): it records the drain.
    while (has_tasks()) {
      Pending& p = *pending_;
      std::function<void()> task = std::move(p.tasks[p.head++]);
      if (p.head == p.tasks.size()) {
        p.tasks.clear();
        p.head = 0;
      } else if (p.head >= 32 && 2 * p.head >= p.tasks.size()) {
        // A queue that never empties does not grow without bound.
        p.tasks.erase(p.tasks.begin(), p.tasks.begin() + static_cast<std::ptrdiff_t>(p.head));
        p.head = 0;
      }
      lock.unlock();
      {
        CallbackScope scope;
        task();
      }
      lock.lock();
    }
    pending_->draining = std::thread::id();
    trim();  // empty: give the block back (an idle queue holds none)
  }
  if (is(kWaiting)) {
    set(kWaiting, false);  // every waiter wakes, and sets it again to wait again
    queue_idle_cv().notify_all();
  }
}

void SerialQueue::drain() {
  Lock lock(*this);
  // Another thread (a waiter in wait_drained) may be running the tasks: they
  // stay one at a time, in order, so this drain waits for it.
  while (draining() != std::thread::id()) wait_for_change(lock, std::chrono::milliseconds(0));
  run_queued(lock);
  set(kScheduled, false);
}

}  // namespace simba::engine
