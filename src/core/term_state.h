// What a term's accessors read: lock-free state shared between the loop thread
// (which extends deadlines and revokes) and any thread reading a term.
#ifndef SIMBA_CORE_TERM_STATE_H
#define SIMBA_CORE_TERM_STATE_H

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/lease_name.h"
#include "core/ref_ptr.h"
#include "core/time.h"

namespace simba {

enum class RevokeReason : int {
  kNone = 0,
  kStopped = 1,
  kSteppedDown = 2,
  kDeadlinePassed = 3,
  kSessionExpired = 4,
  kTakenOver = 5,
};
const char* revoke_reason_name(RevokeReason r);

// The local deadline of one session incarnation. One word holds the deadline
// and a sticky "ended" bit. The first reader that sees the deadline passed sets
// the bit; the loop extends the deadline with a compare-and-swap that fails once
// the bit is set. So once any thread has seen the session ended, no thread ever
// sees it live again, and a renewal that arrives late never revives it.
class SessionClock {
 public:
  explicit SessionClock(const Clock& clock, std::string session_id = {})
      : clock_(clock), session_id_(std::move(session_id)) {}

  // The SessionId of this incarnation, held once for all of its terms.
  const std::string& session_id() const { return session_id_; }

  // Readers (any thread, no lock).
  bool valid() const { return remaining() > Duration::zero(); }
  // Time left before the deadline; zero once ended.
  Duration remaining() const;

  // Loop thread. Returns false (and changes nothing) once ended.
  bool set_deadline(TimePoint deadline);
  // Ends the session for good. Idempotent.
  void end();
  bool ended() const { return (word_.load() & kEnded) != 0; }
  // The deadline last set (meaningful only after a set_deadline).
  TimePoint deadline() const { return TimePoint(Duration(word_.load() & ~kEnded)); }
  const Clock& clock() const { return clock_; }

 private:
  static constexpr int64_t kEnded = int64_t{1} << 62;
  const Clock& clock_;
  const std::string session_id_;
  // Starts ended-free at deadline 0: no time left until the first set_deadline.
  mutable std::atomic<int64_t> word_{0};
};

// One term: the lease name, its token, and its revocation. Readers combine the
// sticky revoked reason with the session clock, both sticky, so validity never
// comes back. The node makes each through Effects::new_term, so that the
// engine's term (what waits on it, its C handle) is this same object
// (ADR 0035). It counts its references itself: the node holds one while the
// term is its contender's, the engine and the C handles the others.
class TermState {
 public:
  // The session id is its session's: one copy per session, not per term.
  TermState(LeaseName name, uint64_t token, std::shared_ptr<SessionClock> session)
      : name_(std::move(name)), token_(token), session_(std::move(session)) {}
  virtual ~TermState() = default;
  TermState(const TermState&) = delete;
  TermState& operator=(const TermState&) = delete;

  // Any thread.
  void retain() const { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() const {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  const LeaseName& name() const { return name_; }
  uint64_t token() const { return token_; }
  const std::string& session_id() const { return session_->session_id(); }
  const SessionClock& session() const { return *session_; }

  bool valid() const { return remaining() > Duration::zero(); }
  Duration remaining() const {
    if (revoked() != RevokeReason::kNone) return Duration::zero();
    return session_->remaining();
  }
  RevokeReason revoked() const { return static_cast<RevokeReason>(reason_.load()); }

  // Loop thread. The first reason wins, and ends the term (ended()); returns
  // false if already revoked.
  bool revoke(RevokeReason r) {
    int expected = 0;
    if (!reason_.compare_exchange_strong(expected, static_cast<int>(r))) return false;
    ended();
    return true;
  }

 protected:
  // Loop thread, once, inside the revoke() that set the reason: the term just
  // stopped being valid (the engine wakes whoever waits on it). Nothing here
  // may call into the node.
  virtual void ended() {}

 private:
  mutable std::atomic<int> refs_{0};
  std::atomic<int> reason_{0};
  const LeaseName name_;  // its contender's: one block per lease
  const uint64_t token_;
  const std::shared_ptr<SessionClock> session_;
};

using TermRef = RefPtr<TermState>;

}  // namespace simba

#endif
