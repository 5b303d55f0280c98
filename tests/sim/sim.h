// Deterministic simulation of Simba: 3-5 core Nodes and one MemoryStore on a
// virtual clock, driven from one event queue ordered by (virtual time, sequence
// number). Everything random comes from one std::mt19937_64 seeded with the
// schedule's seed (each Node's seed is drawn from it), so a schedule is replayed
// from its number alone.
//
// The world of one schedule:
//  * config: lease 250-400 ms, renew lease/3 or lease/4..0.45 lease, drift 0 to
//    0.2 (mostly 0.01), margin 5-10 ms, within the config rules;
//  * the store's clock runs at a constant rate within 1 ± drift of the nodes'
//    (often exactly 1 + drift, the fastest the configuration allows);
//  * every backend call is two messages: the request is applied when it reaches
//    the store, the answer travels back. Each leg may be dropped, slow but in
//    time, or late (beyond the call timeout); the store may answer an error
//    before or after applying the request. Release broadcasts reach every node
//    that watches the name when it is released (Effects::watch), after a
//    delay (or get lost); watches are balanced and none is left at closed();
//  * a node may pause (no timers, no messages) for up to 2.5 leases; its loop
//    may take messages before timers already due;
//  * hooks: expire_session ends a live session early, hand_over gives a lease to
//    a foreign holder (who lets go once any term it took over has ended);
//  * backend variants: a capped session timeout (the node renews faster), an
//    idempotent acquire for the session already holding the lease;
//  * the application: 1-3 elections per node over 2-3 shared names, stops and
//    restarts, step-downs with cooldowns, locks (try_once, give_up_at, or no
//    limit, also queued on one node), releases, and closes that replace a node.
// A schedule is chaos, then (mostly) a 2 s stretch without faults or actions,
// then every node closes.
//
// Checked after every event (a violation ends the schedule with a message):
//  1. at no instant two valid terms of one name (TermState validity on the
//     shared clock), except against a term of a session the store ended early
//     through expire_session (that is the fault fencing tokens exist for);
//  2. tokens strictly increase per name in the order terms are elected;
//  3. elected/term_ended/revoked pair up per term, nothing follows stopped(),
//     lock_failed() or closed(), and closed() comes with everything ended;
//  4. a term once invalid never becomes valid again; a revoked term is invalid;
//  5. elected() only inside on_acquire of the contender's current attempt: not
//     abandoned (stop, step-down, end of its session, close), not timed out,
//     and at most one attempt in flight per contender;
//  8. a close that completes more than a renew period (or minBackoff) before
//     its session's local deadline has freed every lease of the session in
//     the store: a failed close is sent again until near that deadline (ADR 0030);
// and in the stretch without faults: every started election's name has a
// leader at its end (6), no lease stays held by a live session whose node has
// no term for it for more than 2 leases + 2 renew periods (7), no session ends
// and no term is lost once the faults' after-effects settled, and every stop,
// step-down and close requested before it completed.
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
  uint64_t nodes = 0;            // node instances created (replacements included)
  uint64_t sessions = 0;         // sessions opened on the store
  uint64_t terms = 0;            // elected() calls
  uint64_t lock_terms = 0;       // of which locks
  uint64_t revoked = 0;          // revoked() calls
  uint64_t taken_over = 0;       // revoked with TAKEN_OVER
  uint64_t deadline_passed = 0;  // revoked with DEADLINE_PASSED
  uint64_t session_expired = 0;  // revoked with SESSION_EXPIRED
  uint64_t stepped_down = 0;     // revoked with STEPPED_DOWN
  uint64_t late_replies = 0;     // replies delivered after their call timed out
  uint64_t dropped = 0;          // requests and replies dropped
  uint64_t pauses = 0, long_pauses = 0;
  uint64_t expiries = 0;        // expire_session hooks
  uint64_t handovers = 0;       // hand_over hooks
  uint64_t closes = 0;          // nodes closed by the application (then replaced)
  uint64_t quiet_checks = 0;    // liveness checks run (schedules with a quiet stretch)
  uint64_t orphans_seen = 0;    // orphan leases noticed (then freed in time)
  uint64_t orphan_max_ms = 0;   // the longest an orphan lasted into a quiet stretch
  uint64_t drifting_store = 0;  // schedules whose store clock runs at a rate != 1
  // The permit scenario (ADR 0046); the summary names them only when there are any.
  uint64_t permit_terms = 0;    // elected() of semaphore, read and write permits
  uint64_t write_terms = 0;     // of which writes
  uint64_t permit_refused = 0;  // semaphore acquires refused (another size)

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
// With `permits`, the application also takes semaphore and read/write permits
// of names of their own (ADR 0046), checked after every event: never more than
// N valid permits of a semaphore of size N, never a valid write term beside
// any other valid term of its name; in the quiet stretch, no permit or intent
// held by a live session without a term or a waiting writer for it beyond
// invariant 7's bound. Without, a schedule is what it always was.
Result run_schedule(uint64_t seed, std::ostream* trace = nullptr, bool permits = false);

}  // namespace simba::sim

#endif
