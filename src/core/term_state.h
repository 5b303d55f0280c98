// What a term's accessors read: lock-free state shared between the loop thread
// (which extends deadlines and revokes) and any thread reading a term.
#ifndef SIMBA_CORE_TERM_STATE_H
#define SIMBA_CORE_TERM_STATE_H

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/lease_name.h"
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
// comes back.
class TermState {
 public:
  // The session id is its session's: one copy per session, not per term.
  TermState(LeaseName name, uint64_t token, std::shared_ptr<SessionClock> session)
      : name_(std::move(name)), token_(token), session_(std::move(session)) {}

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

  // Loop thread. The first reason wins; returns false if already revoked.
  bool revoke(RevokeReason r) {
    int expected = 0;
    return reason_.compare_exchange_strong(expected, static_cast<int>(r));
  }

 private:
  const LeaseName name_;  // its contender's: one block per lease
  const uint64_t token_;
  const std::shared_ptr<SessionClock> session_;
  std::atomic<int> reason_{0};
};

}  // namespace simba

#endif
