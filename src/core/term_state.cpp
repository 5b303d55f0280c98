#include "core/term_state.h"

namespace simba {

const char* revoke_reason_name(RevokeReason r) {
  switch (r) {
    case RevokeReason::kNone:
      return "NONE";
    case RevokeReason::kStopped:
      return "STOPPED";
    case RevokeReason::kSteppedDown:
      return "STEPPED_DOWN";
    case RevokeReason::kDeadlinePassed:
      return "DEADLINE_PASSED";
    case RevokeReason::kSessionExpired:
      return "SESSION_EXPIRED";
    case RevokeReason::kTakenOver:
      return "TAKEN_OVER";
  }
  return "UNKNOWN";
}

Duration SessionClock::remaining() const {
  // Load the word before reading the clock: a reader that loads an old deadline
  // then reads a clock at least as late as any reader that already ended it.
  int64_t w = word_.load();
  for (;;) {
    if (w & kEnded) return Duration::zero();
    const Duration left = TimePoint(Duration(w)) - clock_.now();
    if (left > Duration::zero()) return left;
    // Passed: make it sticky so no thread sees it live again.
    if (word_.compare_exchange_weak(w, w | kEnded)) return Duration::zero();
  }
}

bool SessionClock::set_deadline(TimePoint deadline) {
  const int64_t next = deadline.time_since_epoch().count() & ~kEnded;
  int64_t w = word_.load();
  for (;;) {
    if (w & kEnded) return false;
    if (word_.compare_exchange_weak(w, next)) return true;
  }
}

void SessionClock::end() { word_.fetch_or(kEnded); }

}  // namespace simba
