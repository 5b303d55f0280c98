// backend/call_table.h and backend/open_handles.h on a libuv loop of their
// own: each call completes exactly once (answer, preset outcome or timeout),
// never inside the call that started it, a finished call is never found again
// (so a late answer is dropped), and shutdown's done runs after the last
// call's timer closed.
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
                                     events_.push_back("timeout " + c->what);
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

TEST_F(CallTableTest, AnUnansweredCallTimesOutOnceAndAnAnsweredOneNever) {
  TestCall* slow = table_->start(ms(5));
  slow->what = "slow";
  TestCall* answered = table_->start(ms(5));
  answered->what = "answered";
  const uint64_t answered_id = answered->id;
  // Its answer came: the backend finishes it, and its timer never fires.
  table_->finish(answered);
  table_->finish(answered);  // a second finish does nothing
  EXPECT_EQ(table_->find(answered_id), nullptr);
  drain();
  EXPECT_EQ(events_, std::vector<std::string>{"timeout slow"});
}

TEST_F(CallTableTest, AStoppedTimerWaitsForItsRestart) {
  TestCall* c = table_->start(ms(1));
  c->what = "queued";
  table_->stop_timer(c);  // queued behind other statements: not timing out meanwhile
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_TRUE(events_.empty());
  table_->restart_timer(c);  // on the wire: its timeout counts from now
  drain();
  EXPECT_EQ(events_, std::vector<std::string>{"timeout queued"});
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
