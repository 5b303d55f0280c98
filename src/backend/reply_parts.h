// Pieces every backend's reply decoder needs. A reply comes from a server
// Simba does not control (or from a network it does not trust): every number in
// it is bounded before it becomes a Duration, whose nanosecond count would
// otherwise overflow (undefined behaviour) for a millisecond count above ~9.2e12.
#ifndef SIMBA_BACKEND_REPLY_PARTS_H
#define SIMBA_BACKEND_REPLY_PARTS_H

#include <cstdint>

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

}  // namespace simba

#endif
