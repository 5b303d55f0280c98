// The simulation layer: thousands of random schedules per run, each checked
// against the seed's invariants after every event (see sim.h).
//
//   SIMBA_SIM_SEED=N       run only schedule N, printing its event trace
//   SIMBA_SIM_SCHEDULES=K  run K schedules (default 10000; fewer under a
//                          sanitizer or valgrind)
//   SIMBA_SIM_BASE=B       first seed (default 1): schedules B .. B+K-1
//   SIMBA_SIM_THREADS=T    worker threads (default 2)
#include "sim/sim.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

namespace simba::sim {
namespace {

uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  return std::strtoull(v, nullptr, 10);
}

uint64_t default_schedules() {
  if (std::getenv("SIMBA_VALGRIND")) return 100;
  if (const char* s = std::getenv("SIMBA_SANITIZER")) {
    return std::string(s) == "thread" ? 500 : 2000;
  }
  return 10000;
}

std::string replay_hint(uint64_t seed, bool permits) {
  return "replay with its trace: SIMBA_SIM_SEED=" + std::to_string(seed) +
         " ./test_sim --gtest_filter='Sim." + (permits ? "PermitSchedules" : "RandomSchedules") +
         "'";
}

// Runs the schedules the environment names (see the top of this file), with
// or without permits, and reports them.
void run_schedules(bool permits) {
  if (std::getenv("SIMBA_SIM_SEED")) {
    const uint64_t seed = env_u64("SIMBA_SIM_SEED", 1);
    const Result r = run_schedule(seed, &std::cout, permits);
    std::cout << "schedule " << seed << ": " << r.stats.summary() << "\n";
    EXPECT_TRUE(r.ok) << "schedule " << seed << ": " << r.failure;
    return;
  }
  const uint64_t n = env_u64("SIMBA_SIM_SCHEDULES", default_schedules());
  const uint64_t base = env_u64("SIMBA_SIM_BASE", 1);
  const unsigned threads =
      static_cast<unsigned>(std::max<uint64_t>(1, env_u64("SIMBA_SIM_THREADS", 2)));

  std::atomic<uint64_t> next{0};
  std::mutex mu;
  Stats total;
  std::vector<Result> failures;
  const auto started = std::chrono::steady_clock::now();
  auto work = [&] {
    Stats mine;
    std::vector<Result> bad;
    for (uint64_t i; (i = next++) < n;) {
      Result r = run_schedule(base + i, nullptr, permits);
      mine.add(r.stats);
      if (!r.ok) bad.push_back(std::move(r));
    }
    std::lock_guard<std::mutex> lock(mu);
    total.add(mine);
    for (Result& r : bad) failures.push_back(std::move(r));
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(work);
  for (std::thread& t : pool) t.join();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  std::cout << (permits ? "[sim permits] seeds " : "[sim] seeds ") << base << ".." << base + n - 1
            << " in " << secs << " s: " << total.summary() << "\n";
  EXPECT_EQ(total.schedules, n);
  std::sort(failures.begin(), failures.end(),
            [](const Result& a, const Result& b) { return a.seed < b.seed; });
  if (!failures.empty()) {
    std::cout << (permits ? "[sim permits] " : "[sim] ") << failures.size()
              << " schedules failed\n";
  }
  for (size_t i = 0; i < failures.size() && i < 10; ++i) {
    ADD_FAILURE() << "schedule " << failures[i].seed << " violated an invariant "
                  << failures[i].failure << "\n  " << replay_hint(failures[i].seed, permits);
  }
}

TEST(Sim, RandomSchedules) { run_schedules(false); }

// The same worlds, whose application also takes semaphore and read/write
// permits (ADR 0046; sim.h lists what is checked).
TEST(Sim, PermitSchedules) { run_schedules(true); }

// A schedule is a function of its seed: the same seed gives the same trace.
TEST(Sim, SameSeedSameSchedule) {
  for (uint64_t seed : {3u, 17u, 4242u}) {
    std::ostringstream a, b;
    const Result ra = run_schedule(seed, &a);
    const Result rb = run_schedule(seed, &b);
    EXPECT_EQ(ra.ok, rb.ok);
    EXPECT_EQ(ra.stats.events, rb.stats.events);
    EXPECT_EQ(ra.stats.terms, rb.stats.terms);
    EXPECT_TRUE(a.str() == b.str()) << "schedule " << seed << " is not reproducible";
  }
}

TEST(Sim, SameSeedSamePermitSchedule) {
  for (uint64_t seed : {3u, 17u}) {
    std::ostringstream a, b;
    const Result ra = run_schedule(seed, &a, true);
    const Result rb = run_schedule(seed, &b, true);
    EXPECT_EQ(ra.stats.permit_terms, rb.stats.permit_terms);
    EXPECT_TRUE(a.str() == b.str()) << "permit schedule " << seed << " is not reproducible";
  }
}

}  // namespace
}  // namespace simba::sim
