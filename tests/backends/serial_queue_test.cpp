// SerialQueue (src/engine/executor.*) as ADR 0024 changed it: its tasks are a
// vector read from a head index, released when the queue empties and compacted
// when it does not, and its waiters share one condition variable with every
// other queue of the process. Its lock is a word of the queue (ADR 0043): a
// sleep on a shared slot when contended, recursive for a host executor that
// runs a drain inside submit().
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/executor.h"

namespace simba::engine {
namespace {

using namespace std::chrono_literals;

TEST(SerialQueueTest, ABurstPostedWhileDrainingRunsOnceEachInOrder) {
  PoolExecutor pool(2);
  PoolExecutor fallback(1);
  const auto executors = QueueExecutors::make(&pool, &fallback);
  auto q = SerialQueue::make(executors);
  std::mutex mu;
  std::vector<int> order;
  // The first task posts the others while the queue drains: the vector is
  // consumed from its head and compacted past 32 while more arrive.
  constexpr int kTasks = 500;
  ASSERT_TRUE(q->post([&] {
    for (int i = 1; i < kTasks; ++i) {
      ASSERT_TRUE(q->post([&, i] {
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(i);
      }));
    }
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(0);
  }));
  q->wait_drained(false);
  std::vector<int> expected(kTasks);
  for (int i = 0; i < kTasks; ++i) expected[i] = i;
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(order, expected);
  // Empty again, it runs what comes next.
  std::atomic<bool> ran{false};
  ASSERT_TRUE(q->post([&] { ran = true; }));
  q->wait_drained(false);
  EXPECT_TRUE(ran);
  pool.shutdown();
  fallback.shutdown();
}

TEST(SerialQueueTest, AWaiterIsNotReleasedByAnotherQueuesDrains) {
  PoolExecutor pool(2);
  PoolExecutor fallback(1);
  const auto executors = QueueExecutors::make(&pool, &fallback);
  auto slow = SerialQueue::make(executors);
  auto busy = SerialQueue::make(executors);
  std::atomic<bool> release{false}, slow_done{false}, started{false};
  ASSERT_TRUE(slow->post([&] {
    started = true;
    while (!release) std::this_thread::sleep_for(1ms);
    slow_done = true;
  }));
  while (!started) std::this_thread::sleep_for(1ms);
  std::atomic<bool> waited{false};
  std::thread waiter([&] {
    slow->wait_idle();  // woken by every drain of `busy` too: it must re-check
    EXPECT_TRUE(slow_done);
    waited = true;
  });
  // Drains of another queue, each notifying the shared condition variable
  // while `slow` still runs its task.
  std::thread other_waiter([&] {
    for (int i = 0; i < 50; ++i) {
      ASSERT_TRUE(busy->post([] {}));
      busy->wait_drained(false);
    }
  });
  other_waiter.join();
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(waited);
  release = true;
  waiter.join();
  EXPECT_TRUE(waited);
  pool.shutdown();
  fallback.shutdown();
}

TEST(SerialQueueTest, WaitDrainedRunsQueuedTasksHereWhenNobodyElseDoes) {
  // An executor that never runs what it accepts (a host's, drained only by
  // the thread that now waits): wait_drained(true) runs the tasks itself.
  class Idle final : public Executor {
   public:
    bool submit(std::function<void()> fn) override {
      held.push_back(std::move(fn));
      return true;
    }
    void shutdown() override {}
    std::vector<std::function<void()>> held;
  };
  Idle ex, fallback;
  const auto executors = QueueExecutors::make(&ex, &fallback);
  auto q = SerialQueue::make(executors);
  int ran = 0;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(q->post([&] { ++ran; }));
  q->wait_drained(true);
  EXPECT_EQ(ran, 3);
  // The drain the executor holds finds the queue empty when it runs.
  for (auto& fn : ex.held) fn();
  EXPECT_EQ(ran, 3);
  q->close();
  EXPECT_FALSE(q->post([&] { ++ran; }));
}

// An election is its queue's owner (ADR 0024, ADR 0042): the drain the
// executor holds keeps the whole owner alive, so the owner may lose its last
// other reference while a task of its queue is queued or running.
TEST(SerialQueueTest, AnEmbeddedQueuesDrainKeepsItsOwnerAlive) {
  // As engine::Election: the queue is a base, and counts the owner's references.
  struct Owner final : SerialQueue {
    Owner(const RefPtr<QueueExecutors>& executors, std::atomic<int>& destroyed)
        : SerialQueue(executors), destroyed(destroyed) {}
    ~Owner() override { ++destroyed; }
    void retain() override { ++refs; }
    void release() override {
      if (--refs == 0) delete this;
    }
    SerialQueue& queue() { return *this; }
    std::atomic<int> refs{0};
    std::atomic<int>& destroyed;
  };
  PoolExecutor pool(1);
  PoolExecutor fallback(1);
  const auto executors = QueueExecutors::make(&pool, &fallback);
  std::atomic<int> destroyed{0};
  std::atomic<bool> go{false}, ran{false};
  {
    RefPtr<Owner> owner(new Owner(executors, destroyed));
    ASSERT_TRUE(owner->queue().post([&] {
      while (!go) std::this_thread::sleep_for(1ms);
    }));
    ASSERT_TRUE(owner->queue().post([&] { ran = true; }));
  }  // the last reference but the drain's
  EXPECT_EQ(destroyed, 0);
  go = true;
  pool.shutdown();  // waits for the drain: both tasks ran, then the owner went
  EXPECT_TRUE(ran);
  EXPECT_EQ(destroyed, 1);
  fallback.shutdown();
}

// Many threads post to one queue while its drain runs: the lock word is
// contended (spins, sleeps and wake-ups), and every task runs once, those of
// one thread in the order posted, one at a time.
TEST(SerialQueueTest, PostsFromManyThreadsRunOnceEachInOrderOneAtATime) {
  PoolExecutor pool(2);
  PoolExecutor fallback(1);
  const auto executors = QueueExecutors::make(&pool, &fallback);
  auto q = SerialQueue::make(executors);
  constexpr int kThreads = 6;
  constexpr int kTasks = 3000;
  std::vector<int> next(kThreads, 0);  // written by the tasks only
  std::atomic<int> running{0}, overlaps{0}, out_of_order{0}, ran{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kTasks; ++i) {
        ASSERT_TRUE(q->post([&, t, i] {
          if (running.fetch_add(1) != 0) ++overlaps;
          if (next[t] != i) ++out_of_order;
          next[t] = i + 1;
          ++ran;
          running.fetch_sub(1);
        }));
        if (i % 500 == 0) q->wait_idle();  // a waiter on the shared condition variable
      }
    });
  }
  for (auto& th : threads) th.join();
  q->wait_drained(false);
  EXPECT_EQ(ran, kThreads * kTasks);
  EXPECT_EQ(overlaps, 0);
  EXPECT_EQ(out_of_order, 0);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(next[t], kTasks);
  pool.shutdown();
  fallback.shutdown();
}

// A host executor that wrongly runs the drain inside submit(): the post that
// submits still holds the queue's lock, so the drain takes it again on the
// same thread, and its tasks, run under it, post to their own queue and to
// another (whose own drain runs inline too) without deadlock, in order.
TEST(SerialQueueTest, AnExecutorRunningTheDrainInsideSubmitDoesNotDeadlock) {
  class Inline final : public Executor {
   public:
    bool submit(std::function<void()> fn) override {
      fn();
      return true;
    }
    void shutdown() override {}
  };
  Inline ex, fallback;
  const auto executors = QueueExecutors::make(&ex, &fallback);
  auto a = SerialQueue::make(executors);
  auto b = SerialQueue::make(executors);
  std::vector<std::string> order;
  std::thread other([&] {
    // Another thread does the same on its own queues meanwhile.
    auto c = SerialQueue::make(executors);
    auto d = SerialQueue::make(executors);
    for (int i = 0; i < 200; ++i) {
      ASSERT_TRUE(c->post([&] { ASSERT_TRUE(d->post([] {})); }));
    }
  });
  ASSERT_TRUE(a->post([&] {
    order.push_back("a1");
    ASSERT_TRUE(a->post([&] { order.push_back("a2"); }));  // after a1: queued
    ASSERT_TRUE(b->post([&] {
      order.push_back("b1");
      ASSERT_TRUE(a->post([&] { order.push_back("a3"); }));
    }));
  }));
  other.join();
  a->wait_drained(false);
  b->wait_drained(false);
  const std::vector<std::string> expected{"a1", "b1", "a2", "a3"};
  EXPECT_EQ(order, expected);
  // The queues are idle again: a post from here runs at once.
  ASSERT_TRUE(a->post([&] { order.push_back("a4"); }));
  EXPECT_EQ(order.back(), "a4");
}

}  // namespace
}  // namespace simba::engine
