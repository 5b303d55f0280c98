// backend/call_table.h and backend/open_handles.h on a libuv loop of their
// own: each call completes exactly once (answer, preset outcome, or the
// backend's hook once its caller abandoned it), never inside the call that
// started it nor inside abandon(); no call ends by a timer of its own (ADR
// 0039); a finished call is never found again (so a late answer is dropped),
// and shutdown's done runs after the last call's timer closed.
#include "backend/call_table.h"

#include <gtest/gtest.h>
#include <uv.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/open_handles.h"

namespace simba {
namespace {

struct TestCall : CallBase {
  std::string what;
};

// A table whose hooks record what completed, and finish the call as a
// backend does.
class CallTableTest : public ::testing::Test {
 protected:
  CallTableTest() {
    uv_loop_init(&loop_);
    table_ = std::make_unique<CallTable<TestCall>>(
        &loop_, &handles_,
        CallTable<TestCall>::Hooks{[this](TestCall* c) {
                                     events_.push_back("abandoned " + c->what);
                                     table_->finish(c);
                                   },
                                   [this](TestCall* c, Outcome o, const std::string& err) {
                                     events_.push_back("preset " + c->what + " " +
                                                       std::to_string(static_cast<int>(o)) + " " +
                                                       err);
                                     table_->finish(c);
                                   }});
  }
  ~CallTableTest() override {
    table_->drop_all();
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a call's timer is still open";
  }

  // Runs the loop until nothing is left on it.
  void drain() { uv_run(&loop_, UV_RUN_DEFAULT); }

  uv_loop_t loop_;
  OpenHandles handles_;
  std::unique_ptr<CallTable<TestCall>> table_;
  std::vector<std::string> events_;
};

TEST_F(CallTableTest, APresetOutcomeIsDeliveredOnALaterLoopTurnOnce) {
  TestCall* c = table_->start(ms(10'000));
  c->what = "a";
  const uint64_t id = c->id;
  table_->preset(c, Outcome::kExpired, "gone");
  EXPECT_TRUE(events_.empty()) << "completed inside the call that preset it";
  EXPECT_EQ(table_->find(id), c);
  uv_run(&loop_, UV_RUN_NOWAIT);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0],
            "preset a " + std::to_string(static_cast<int>(Outcome::kExpired)) + " gone");
  EXPECT_EQ(table_->find(id), nullptr) << "a finished call is found again";
  drain();
  EXPECT_EQ(events_.size(), 1u);
}

// The caller owns the timeout: a call whose budget passed still waits for its
// answer until its caller abandons it; then the hook runs once, on a later
// loop turn. Abandoning a call that was answered does nothing.
TEST_F(CallTableTest, ACallEndsByAbandonNotByItsBudgetAndOnlyOnce) {
  TestCall* slow = table_->start(ms(1));
  slow->what = "slow";
  TestCall* answered = table_->start(ms(1));
  answered->what = "answered";
  const uint64_t slow_id = slow->id;
  const uint64_t answered_id = answered->id;
  uv_sleep(20);  // both budgets passed
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_TRUE(events_.empty()) << "a call ended by a timer of its own";
  EXPECT_EQ(table_->find(slow_id), slow);
  // Its answer came: the backend finishes it; an abandon after finds nothing.
  table_->finish(answered);
  table_->finish(answered);  // a second finish does nothing
  EXPECT_EQ(table_->find(answered_id), nullptr);
  table_->abandon(slow);
  EXPECT_TRUE(events_.empty()) << "ended inside abandon()";
  table_->abandon(slow);  // twice: still once
  drain();
  EXPECT_EQ(events_, std::vector<std::string>{"abandoned slow"});
  EXPECT_EQ(table_->find(slow_id), nullptr);
}

// An abandon may wait (PostgreSQL: a call abandoned in its connection's queue
// is judged a budget after it went on the wire); a preset outcome due first
// completes the call instead, once.
TEST_F(CallTableTest, ADelayedAbandonWaitsAndAPresetOutcomeWinsOverIt) {
  TestCall* c = table_->start(ms(10'000));
  c->what = "queued";
  table_->abandon(c, 30);
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_TRUE(events_.empty()) << "a delayed abandon ran at once";
  drain();
  EXPECT_EQ(events_, std::vector<std::string>{"abandoned queued"});
  events_.clear();
  TestCall* p = table_->start(ms(10'000));
  p->what = "preset";
  table_->preset(p, Outcome::kError, "gone");
  table_->abandon(p);
  drain();
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0],
            "preset preset " + std::to_string(static_cast<int>(Outcome::kError)) + " gone");
}

TEST_F(CallTableTest, ForEachSeesPendingCallsInTheOrderTheyStarted) {
  std::vector<uint64_t> started;
  for (int i = 0; i < 3; ++i) started.push_back(table_->start(ms(10'000))->id);
  table_->finish(table_->find(started[1]));
  std::vector<uint64_t> seen;
  table_->for_each([&](TestCall* c) { seen.push_back(c->id); });
  EXPECT_EQ(seen, (std::vector<uint64_t>{started[0], started[2]}));
}

TEST_F(CallTableTest, ShutdownDropsPendingCallsAndEndsAfterTheLastTimerClosed) {
  for (int i = 0; i < 3; ++i) table_->preset(table_->start(ms(10'000)), Outcome::kError, "x");
  int done = 0;
  handles_.opened();  // the backend's own handle, closed below
  handles_.begin_shutdown([&] { ++done; });
  EXPECT_TRUE(handles_.closing());
  table_->drop_all();
  EXPECT_EQ(done, 0) << "ended before the timers closed";
  drain();
  EXPECT_TRUE(events_.empty()) << "a dropped call completed";
  EXPECT_EQ(done, 0) << "ended while the backend's own handle is open";
  handles_.closed();
  EXPECT_EQ(done, 1);
}

}  // namespace
}  // namespace simba
