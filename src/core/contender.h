// One election or lock as the core's state machine sees it: a value that its
// owner (the engine's record of the lease, or the simulation's) holds inside
// its own object, and that the Node links while the contender is added
// (ADR 0035). The Node never allocates or frees one.
#ifndef SIMBA_CORE_CONTENDER_H
#define SIMBA_CORE_CONTENDER_H

#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include "core/lease_name.h"
#include "core/term_state.h"
#include "core/time.h"

namespace simba {

using ContenderId = uint64_t;
using CallId = uint64_t;

enum class ContenderKind { kElection, kLock };

// The Node's timers: one ordered map, each entry naming what it is for.
enum class TimerKind { kRenew, kDeadline, kCall, kContender, kReleaseRetry };
struct TimerKey {
  TimerKind kind;
  uint64_t id;
};
using Timers = std::multimap<TimePoint, TimerKey>;
using TimerSlot = std::optional<Timers::iterator>;

enum class ContenderState {
  kWaiting,    // a lock queued behind another lock of this node on the same name
  kCandidate,  // contending: an attempt is scheduled
  kAcquiring,  // one acquire in flight (also once stopped, until it is answered)
  kLeader,     // holds a term
  kDraining,   // handover: term revoked, waiting for its work to exit (or the deadline)
  kReleasing,  // handover: term revoked, release in flight; or, without a term,
               // stopped while acquiring and releasing what that attempt won
  kCooldown,   // stepped down, not contending until the timer
};

// The owner makes it with its name and kind, hands it to Node::add_election or
// Node::add_lock, and keeps it at the same address until the node reports it
// done (Effects::stopped or Effects::lock_failed, also at the close); then it
// may free it, even inside that call. It is added once. The owner reads `id`,
// `name` and `kind`; every other member is the node's.
//
// The 8-byte members first, the narrow ones packed at the end (ADR 0024).
struct Contender {
  Contender(LeaseName lease_name, ContenderKind contender_kind)
      : name(std::move(lease_name)), kind(contender_kind) {}
  Contender(const Contender&) = delete;
  Contender& operator=(const Contender&) = delete;

  ContenderId id = 0;  // set by add_election / add_lock; 0 while not added
  LeaseName name;      // shared with its terms and the owner
  CallId attempt = 0;  // the current acquire call, if kAcquiring
  TermRef term;
  CallId adopted_before = 0;     // keep-alives with an id at or above saw the term
  TimePoint handover_started{};  // when begin_handover revoked the term
  TimePoint cooldown_until;
  TimePoint give_up_at = TimePoint::max();  // locks
  // The given-up acquire of its name (unanswered_by_name_) its next attempt
  // waits for, so that at most one acquire per name is in flight.
  CallId unanswered = 0;
  Contender* next_of_name = nullptr;  // by_name_'s: the next contender of its name
  TimerSlot timer;
  const ContenderKind kind;
  ContenderState state = ContenderState::kCandidate;
  int pending_step_downs = 0;
  bool stopping = false;
  bool with_work = false;     // elections whose terms run leader work
  bool work_running = false;  // the current term's work has not returned yet
  bool try_once = false;
  // A release of the name was broadcast while an acquire was in flight: that
  // acquire may have run before the release, so a Held answer retries at once.
  bool released_in_flight = false;
  bool attempt_queued = false;         // waits in attempt_queue_ for a free slot
  bool attempt_when_answered = false;  // an attempt came due meanwhile
  // Holds the node's watch of its name (Effects::watch): set from an acquire
  // answered Held until it leads, cools down or leaves (ADR 0040).
  bool watching = false;
};
static_assert(sizeof(void*) != 8 || sizeof(Contender) <= 128, "Contender grew past 128");

}  // namespace simba

#endif
