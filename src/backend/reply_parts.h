// Pieces every backend's reply decoder needs. A reply comes from a server
// Simba does not control (or from a network it does not trust): every number in
// it is bounded before it becomes a Duration, whose nanosecond count would
// otherwise overflow (undefined behaviour) for a millisecond count above ~9.2e12.
#ifndef SIMBA_BACKEND_REPLY_PARTS_H
#define SIMBA_BACKEND_REPLY_PARTS_H

#include <cstdint>
#include <string>

#include "core/backend_types.h"
#include "core/time.h"

namespace simba {

// The largest millisecond count a reply may carry into a Duration: the
// library's own ceiling for durations (about 31.7 years).
inline constexpr int64_t kMaxReplyMs = 1'000'000'000'000;

// `v` milliseconds, clamped to [-kMaxReplyMs, kMaxReplyMs].
inline Duration reply_ms(long long v) {
  if (v > kMaxReplyMs) v = kMaxReplyMs;
  if (v < -kMaxReplyMs) v = -kMaxReplyMs;
  return ms(static_cast<int64_t>(v));
}

// The acquire answer of the Redis and PostgreSQL scripts, (code, v): code 1 and
// the token (won), 0 and the holder's remaining ms or a negative (held), a
// negative code (our session is gone). `who` names the backend in errors.
inline AcquireReply acquire_reply(long long code, long long v, const char* who) {
  AcquireReply out;
  if (code < 0) {
    out.outcome = Outcome::kExpired;
  } else if (code == 0) {
    out.outcome = Outcome::kHeld;
    out.holder_remaining = v >= 0 ? reply_ms(v) : Duration(-1);
  } else if (v <= 0) {
    out.error = std::string(who) + ": non-positive token";
  } else {
    out.outcome = Outcome::kOk;
    out.token = static_cast<uint64_t>(v);
  }
  return out;
}

}  // namespace simba

#endif
