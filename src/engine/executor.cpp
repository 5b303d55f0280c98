#include "engine/executor.h"

namespace simba::engine {

namespace {
thread_local int tl_callback_depth = 0;
thread_local int tl_work_depth = 0;
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

namespace {
struct HostTask {
  HostExecutor* owner;
  std::function<void()> fn;
};
}  // namespace

bool HostExecutor::submit(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    ++outstanding_;
  }
  auto* task = new HostTask{this, std::move(fn)};
  if (submit_(ctx_, &HostExecutor::trampoline, task) != 0) {
    delete task;
    std::lock_guard<std::mutex> lock(mu_);
    --outstanding_;
    cv_.notify_all();
    return false;
  }
  return true;
}

void HostExecutor::trampoline(void* arg) {
  auto* task = static_cast<HostTask*>(arg);
  HostExecutor* self = task->owner;
  task->fn();
  delete task;
  std::lock_guard<std::mutex> lock(self->mu_);
  if (--self->outstanding_ == 0) self->cv_.notify_all();
}

void HostExecutor::shutdown() {
  std::unique_lock<std::mutex> lock(mu_);
  stopping_ = true;
  cv_.wait(lock, [this] { return outstanding_ == 0; });
}

bool SerialQueue::post(std::function<void()> task) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (closed_) return false;
  tasks_.push_back(std::move(task));
  if (scheduled_) return true;
  scheduled_ = true;
  auto self = shared_from_this();
  if (!ex_.submit([self] { self->drain(); }) && !fallback_.submit([self] { self->drain(); })) {
    scheduled_ = false;  // nobody will drain: the tasks stay queued
  }
  return true;
}

SerialQueue::Posted SerialQueue::post_or_reject(std::function<void()> task) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (closed_) return Posted::kClosed;
  tasks_.push_back(std::move(task));
  if (scheduled_) return Posted::kQueued;  // a drain already accepted will run it
  scheduled_ = true;
  auto self = shared_from_this();
  if (ex_.submit([self] { self->drain(); })) return Posted::kQueued;
  tasks_.pop_back();
  scheduled_ = false;
  // Earlier tasks left waiting by a failed submit still need a drain.
  if (!tasks_.empty()) {
    scheduled_ = true;
    if (!fallback_.submit([self] { self->drain(); })) scheduled_ = false;
  }
  return Posted::kRejected;
}

void SerialQueue::close() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  closed_ = true;
}

void SerialQueue::drain() {
  for (;;) {
    std::function<void()> task;
    {
      std::lock_guard<std::recursive_mutex> lock(mu_);
      if (tasks_.empty()) {
        scheduled_ = false;
        return;
      }
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    CallbackScope scope;
    task();
  }
}

}  // namespace simba::engine
