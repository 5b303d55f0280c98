// The engine's permits (ADR 0046) on memory://, below the C ABI that gains
// them next: Client::semaphore_acquire and rwlock_acquire beside
// lock_acquire, their terms (PermitTerm), the size refused with SIMBA_ESTATE's
// words, a waiting writer holding new readers back, and simba_lock_release
// releasing a permit's term.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "backends/simba_testing.h"
#include "capi/capi.h"
#include "engine/client.h"
#include "engine/term.h"
#include "simba.h"

namespace {

using namespace simba_testing;
using simba::ContenderKind;
using simba::engine::Code;
using simba::engine::PermitTerm;
using simba::engine::Term;

class EnginePermits : public ::testing::Test {
 protected:
  void SetUp() override {
    url_ = "memory://permits-" + unique_id();
    for (Client* c : {&a_, &b_}) {
      ASSERT_EQ(c->open(url_, Timing{2000, 400}), SIMBA_OK) << simba_last_error();
      ASSERT_EQ(simba_client_wait_live(*c, 5000 * slow_factor()), SIMBA_OK);
    }
  }
  simba::engine::Client& a() { return *a_.get()->impl; }
  simba::engine::Client& b() { return *b_.get()->impl; }
  static const PermitTerm* permit_of(Term* t) { return static_cast<const PermitTerm*>(t); }
  static void release(Term* t) { EXPECT_EQ(simba_lock_release(simba::capi::handle_of(t)), 0); }
  std::string name(const std::string& suffix) const { return "p." + suffix; }

  std::string url_;
  Client a_, b_;
};

TEST_F(EnginePermits, ASemaphoreGrantsUpToItsSizeAndRefusesAnotherSize) {
  Term *t1 = nullptr, *t2 = nullptr, *t3 = nullptr, *none = nullptr;
  ASSERT_EQ(a().semaphore_acquire(name("s"), 2, 2000, false, &t1).code, Code::kOk);
  ASSERT_EQ(a().semaphore_acquire(name("s"), 2, 2000, false, &t2).code, Code::kOk);  // side by side
  ASSERT_TRUE(t1 && t2);
  ASSERT_TRUE(t1->as_lock());
  EXPECT_EQ(t1->as_lock()->kind, ContenderKind::kSemaphore);
  EXPECT_GT(permit_of(t1)->permit, 0u);
  EXPECT_EQ(t1->token(), permit_of(t1)->permit);
  EXPECT_GT(t2->token(), t1->token());
  EXPECT_TRUE(t1->valid() && t2->valid());
  EXPECT_EQ(b().semaphore_acquire(name("s"), 2, -1, true, &none).code, Code::kEBusy);
  const simba::engine::Result refused = b().semaphore_acquire(name("s"), 3, 2000, false, &none);
  EXPECT_EQ(refused.code, Code::kEState);
  EXPECT_EQ(refused.detail, "semaphore p.s has 2 permits, not 3");
  EXPECT_EQ(b().semaphore_acquire(name("s"), 0, 2000, false, &none).code, Code::kEInval);
  // A lock of the same name is another resource.
  ASSERT_EQ(b().lock_acquire(name("s"), 2000, false, &t3).code, Code::kOk);
  release(t3);
  const uint64_t before = t2->token();
  release(t1);
  EXPECT_FALSE(t1->valid());
  ASSERT_EQ(b().semaphore_acquire(name("s"), 2, 2000 * slow_factor(), false, &t3).code, Code::kOk);
  EXPECT_GT(t3->token(), before);
  release(t2);
  release(t3);
}

TEST_F(EnginePermits, AWaitingWriterHoldsNewReadersBackThenWins) {
  Term *r1 = nullptr, *r2 = nullptr, *none = nullptr;
  ASSERT_EQ(a().rwlock_acquire(name("rw"), false, 2000, false, &r1).code, Code::kOk);
  ASSERT_EQ(b().rwlock_acquire(name("rw"), false, 2000, false, &r2).code, Code::kOk);
  EXPECT_EQ(r1->as_lock()->kind, ContenderKind::kRead);
  EXPECT_EQ(r1->token(), 0u);  // no writer yet: epoch 0
  EXPECT_EQ(b().rwlock_acquire(name("rw"), true, -1, true, &none).code, Code::kEBusy);
  std::atomic<bool> done{false};
  Term* w = nullptr;
  Code got = Code::kEBackend;
  std::thread writer([&] {
    got = b().rwlock_acquire(name("rw"), true, 5000 * slow_factor(), false, &w).code;
    done = true;
  });
  // Once its intent is there, a new reader is held back (a try says busy).
  Code tried = Code::kOk;
  for (int i = 0; i < 200 && tried == Code::kOk; ++i) {
    Term* r = nullptr;
    tried = a().rwlock_acquire(name("rw"), false, -1, true, &r).code;
    if (tried == Code::kOk) {
      release(r);
      sleep_ms(10);
    }
  }
  EXPECT_EQ(tried, Code::kEBusy);
  EXPECT_FALSE(done.load());
  release(r1);
  release(r2);
  writer.join();
  ASSERT_EQ(got, Code::kOk);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->as_lock()->kind, ContenderKind::kWrite);
  EXPECT_GT(w->token(), 0u);
  EXPECT_EQ(a().rwlock_acquire(name("rw"), false, -1, true, &none).code, Code::kEBusy);
  const uint64_t epoch = w->token();
  release(w);
  Term* r3 = nullptr;
  ASSERT_EQ(a().rwlock_acquire(name("rw"), false, 2000 * slow_factor(), false, &r3).code,
            Code::kOk);
  EXPECT_EQ(r3->token(), epoch);  // a reader carries the last writer's token
  EXPECT_NE(snapshot(a_).find("\"kind\":\"read\""), std::string::npos) << snapshot(a_);
  release(r3);
}

}  // namespace
