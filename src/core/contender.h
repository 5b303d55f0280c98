// One election or lock as the core's state machine sees it: a value that its
// owner (the engine's record of the lease, or the simulation's) holds inside
// its own object, and that the Node links while the contender is added
// (ADR 0035). The Node never allocates or frees one.
#ifndef SIMBA_CORE_CONTENDER_H
#define SIMBA_CORE_CONTENDER_H

#include <cassert>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include "core/backend_types.h"
#include "core/lease_name.h"
#include "core/term_state.h"
#include "core/time.h"

namespace simba {

using ContenderId = uint64_t;
using CallId = uint64_t;

// A lock, or a permit of a semaphore or a read/write lock (ADR 0046): these
// take the lock's path (a give-up time, try-once), but permits of one name
// contend side by side, not in the per-node queue of a name.
enum class ContenderKind : uint8_t { kElection, kLock, kSemaphore, kRead, kWrite };
inline bool is_permit(ContenderKind k) { return k >= ContenderKind::kSemaphore; }
// "election", "lock", "semaphore", "read", "write": for snapshots and logs.
inline const char* contender_kind_name(ContenderKind k) {
  switch (k) {
    case ContenderKind::kElection:
      return "election";
    case ContenderKind::kLock:
      return "lock";
    case ContenderKind::kSemaphore:
      return "semaphore";
    case ContenderKind::kRead:
      return "read";
    case ContenderKind::kWrite:
      return "write";
  }
  return "?";
}
// The entry a contender of kind `k` holds on the backend.
inline PermitKind permit_kind_of(ContenderKind k) {
  switch (k) {
    case ContenderKind::kSemaphore:
      return PermitKind::kSemaphore;
    case ContenderKind::kRead:
      return PermitKind::kRead;
    case ContenderKind::kWrite:
      return PermitKind::kWrite;
    default:
      return PermitKind::kLease;
  }
}

// The Node's timers: one ordered map, each entry naming what it is for.
enum class TimerKind { kRenew, kDeadline, kCall, kContender, kReleaseRetry };
struct TimerKey {
  TimerKind kind;
  uint64_t id;
};
using Timers = std::multimap<TimePoint, TimerKey>;
using TimerSlot = std::optional<Timers::iterator>;

enum class ContenderState : uint8_t {
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
// The 8-byte members first, the narrow ones packed at the end (ADR 0024). It
// is part of every lease's block, so fields that are never live at once share
// one slot (ADR 0043).
struct Contender {
  Contender(LeaseName lease_name, ContenderKind contender_kind)
      : name(std::move(lease_name)),
        until_(contender_kind != ContenderKind::kElection ? TimePoint::max() : TimePoint{}),
        kind(contender_kind),
        timer_armed(false),
        stopping(false),
        with_work(false),
        work_running(false),
        try_once(false),
        released_in_flight(false),
        attempt_queued(false),
        attempt_when_answered(false),
        watching(false),
        held_role_(kNothing),
        permit_granted_(false) {}
  Contender(const Contender&) = delete;
  Contender& operator=(const Contender&) = delete;

  // Locks: when it gives up (TimePoint::max() never). Elections never do.
  TimePoint give_up_at() const {
    return kind != ContenderKind::kElection ? until_ : TimePoint::max();
  }
  void set_give_up_at(TimePoint at) { until_ = at; }  // locks
  // Elections: the end of the cooldown of the last step-down.
  TimePoint cooldown_until() const { return until_; }
  void set_cooldown_until(TimePoint at) { until_ = at; }  // elections

  // Four values that are never wanted at once share one slot; setting one
  // forgets the others. The current acquire call (0: none) is in flight only
  // while kAcquiring.
  CallId attempt() const { return held_as(kAttempt); }
  void set_attempt(CallId call) { set_call(kAttempt, call); }
  // The given-up acquire of its name (unanswered_by_name_) its next attempt
  // waits for, so that at most one acquire per name is in flight: set only
  // in kCandidate, without an attempt, and cleared before the next one.
  CallId unanswered() const { return held_as(kUnanswered); }
  void set_unanswered(CallId call) { set_call(kUnanswered, call); }
  // Keep-alives with an id at or above saw the term: set at adoption (when
  // there is neither of the above), read only while kLeader.
  CallId adopted_before() const { return held_as(kAdoptedBefore); }
  void set_adopted_before(CallId call) { set_call(kAdoptedBefore, call); }
  // When begin_handover revoked the term (kLeader ends): read only while the
  // term is handed over (kDraining, kReleasing with the term).
  TimePoint handover_started() const {
    return TimePoint(Duration(static_cast<Duration::rep>(held_as(kHandoverStarted))));
  }
  void set_handover_started(TimePoint at) {
    hold(kHandoverStarted, static_cast<uint64_t>(at.time_since_epoch().count()));
  }

  // Permits (ADR 0046) use the slot of next_of_name, which only a contender
  // in the per-name queue needs: before a grant, a semaphore's size (set by
  // the owner before add_lock; after a kRefused failure, the size the
  // semaphore has) or a waiting writer's intent; from the grant on, the
  // permit's id.
  uint32_t size() const {
    return kind == ContenderKind::kSemaphore ? static_cast<uint32_t>(permit_word(false)) : 0;
  }
  void set_size(uint32_t n) { set_permit_word(n, false); }
  uint64_t intent() const { return kind == ContenderKind::kWrite ? permit_word(false) : 0; }
  void set_intent(uint64_t id) { set_permit_word(id, false); }
  uint64_t permit() const { return permit_word(true); }
  void set_permit(uint64_t id) { set_permit_word(id, true); }

  ContenderId id = 0;  // set by add_election / add_lock; 0 while not added
  LeaseName name;      // shared with its terms and the owner
  TermRef term;
  union {
    Contender* next_of_name = nullptr;  // by_name_'s: the next contender of its name
    uint64_t permit_word_;              // permits only (above)
  };
  // Its entry in the node's timers while `timer_armed` (8 bytes where a
  // std::optional of the iterator takes 16).
  Timers::iterator timer{};
  // The accessors' (give_up_at of a lock, cooldown_until of an election:
  // step_down takes no lock).
  TimePoint until_;
  uint64_t held_ = 0;  // the accessors': the value of held_role_
  const ContenderKind kind;
  ContenderState state = ContenderState::kCandidate;
  bool timer_armed : 1;
  bool stopping : 1;
  bool with_work : 1;     // elections whose terms run leader work
  bool work_running : 1;  // the current term's work has not returned yet
  bool try_once : 1;
  // A release of the name was broadcast while an acquire was in flight: that
  // acquire may have run before the release, so a Held answer retries at once.
  bool released_in_flight : 1;
  bool attempt_queued : 1;         // waits in attempt_queue_ for a free slot
  bool attempt_when_answered : 1;  // an attempt came due meanwhile
  // Holds the node's watch of its name (Effects::watch): set from an acquire
  // answered Held until it leads, cools down or leaves (ADR 0040).
  bool watching : 1;
  uint8_t held_role_ : 3;
  bool permit_granted_ : 1;  // permit_word_ is the permit's id
  int pending_step_downs = 0;

 private:
  uint64_t permit_word(bool granted) const {
    return is_permit(kind) && permit_granted_ == granted ? permit_word_ : 0;
  }
  void set_permit_word(uint64_t v, bool granted) {
    assert(is_permit(kind));
    permit_word_ = v;
    permit_granted_ = granted;
  }
  enum : uint8_t { kNothing, kAttempt, kUnanswered, kAdoptedBefore, kHandoverStarted };
  uint64_t held_as(uint8_t role) const { return held_role_ == role ? held_ : 0; }
  void hold(uint8_t role, uint64_t value) {
    // Never in place of an attempt or an unanswered call still wanted.
    assert(held_role_ == role || (held_role_ != kAttempt && held_role_ != kUnanswered));
    held_ = value;
    held_role_ = role;
  }
  void set_call(uint8_t role, CallId call) {
    if (call != 0) {
      hold(role, call);
    } else if (held_role_ == role) {
      held_ = 0;
      held_role_ = kNothing;
    }
  }
};
static_assert(sizeof(void*) != 8 || sizeof(Contender) <= 64, "Contender grew past 64");

}  // namespace simba

#endif
