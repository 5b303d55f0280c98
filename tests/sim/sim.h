// Deterministic simulation of Simba: N core Nodes and one MemoryStore on a
// virtual clock, driven from one event queue ordered by (virtual time, sequence
// number). Backend calls travel as events with random delays, drops, errors and
// late replies; nodes pause like a GC pause; the store's test hooks expire
// sessions and hand leases to foreign holders. The seed's invariants are checked
// after every event. Everything random comes from one std::mt19937_64 seeded
// with the schedule's seed, so a schedule is replayed from its number alone.
#ifndef SIMBA_TESTS_SIM_SIM_H
#define SIMBA_TESTS_SIM_SIM_H

#include <cstdint>
#include <ostream>
#include <string>

#include "core/time.h"

namespace simba::sim {

// Counters of one schedule (summed over a run for the report line).
struct Stats {
  uint64_t schedules = 0;
  uint64_t events = 0;
  uint64_t virtual_ms = 0;
  uint64_t nodes = 0;           // node instances created (replacements included)
  uint64_t sessions = 0;        // sessions opened on the store
  uint64_t terms = 0;           // elected() calls
  uint64_t lock_terms = 0;      // of which locks
  uint64_t revoked = 0;         // revoked() calls
  uint64_t taken_over = 0;      // revoked with TAKEN_OVER
  uint64_t deadline_passed = 0; // revoked with DEADLINE_PASSED
  uint64_t session_expired = 0; // revoked with SESSION_EXPIRED
  uint64_t stepped_down = 0;    // revoked with STEPPED_DOWN
  uint64_t late_replies = 0;    // replies delivered after their call timed out
  uint64_t dropped = 0;         // requests and replies dropped
  uint64_t pauses = 0, long_pauses = 0;
  uint64_t expiries = 0;        // expire_session hooks
  uint64_t handovers = 0;       // hand_over hooks
  uint64_t closes = 0;          // node closes (replaced later)
  uint64_t quiet_checks = 0;    // liveness checks run (schedules with a quiet stretch)
  uint64_t orphans_seen = 0;    // orphan leases noticed (then freed in time)
  uint64_t drifting_store = 0;  // schedules whose store clock runs at a rate != 1

  void add(const Stats& o);
  std::string summary() const;
};

struct Result {
  uint64_t seed = 0;
  bool ok = true;
  std::string failure;  // the violated invariant, with context
  Stats stats;
};

// Runs schedule `seed`. With `trace`, every event, call and callback is printed.
Result run_schedule(uint64_t seed, std::ostream* trace = nullptr);

}  // namespace simba::sim

#endif
