// The callback queues a client's close has to close (engine/client.cpp): an
// election's queue lives in the election's block (ADR 0024); the client keeps
// no list of them (ADR 0042), so a freed election leaves nothing behind.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "backends/simba_testing.h"
#include "capi/capi.h"
#include "simba.h"

namespace {

using namespace simba_testing;

TEST(EngineQueues, FreedElectionsLeaveTheListOfQueuesToClose) {
  Client c;
  ASSERT_EQ(c.open("memory://queues-" + unique_id(), Timing{}), SIMBA_OK) << simba_last_error();
  ASSERT_EQ(simba_client_wait_live(c, 5000 * slow_factor()), SIMBA_OK) << simba_last_error();
  std::atomic<int> elected{0};
  simba_listener_t listener{};
  listener.ud = &elected;
  listener.on_elected = [](void* ud, simba_term_t*) { ++*static_cast<std::atomic<int>*>(ud); };
  constexpr int kElections = 200;
  std::vector<simba_election_t*> elections(kElections);
  const std::string prefix = "queues." + unique_id() + ".";
  for (int i = 0; i < kElections; ++i) {
    ASSERT_EQ(
        simba_election_start(&elections[i], c, (prefix + std::to_string(i)).c_str(), &listener),
        SIMBA_OK)
        << simba_last_error();
  }
  ASSERT_TRUE(wait_for([&] { return elected == kElections; }, 10000 * slow_factor()));
  const size_t listed = c.get()->impl->queues_listed();
  EXPECT_GT(listed, static_cast<size_t>(kElections));  // theirs and the client's own
  // Each free waits for its stop; no new queue is made meanwhile.
  for (simba_election_t* e : elections) simba_election_free(e);
  EXPECT_LE(c.get()->impl->queues_listed(), listed / 2);
}

}  // namespace
