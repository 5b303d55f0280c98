// Time types of the engine. Every local decision uses a monotonic clock; wall
// clocks are never compared with the backend.
#ifndef SIMBA_CORE_TIME_H
#define SIMBA_CORE_TIME_H

#include <chrono>
#include <cstdint>

namespace simba {

using Duration = std::chrono::nanoseconds;
// A point on a monotonic clock, as nanoseconds since an arbitrary origin. The
// engine uses CLOCK_MONOTONIC; tests and the simulation use a virtual clock.
using TimePoint = std::chrono::time_point<std::chrono::steady_clock, Duration>;

inline constexpr Duration ms(int64_t n) { return std::chrono::milliseconds(n); }
inline int64_t to_ms(Duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}
// Rounds up, so a positive remainder below 1 ms is never reported as 0.
inline int64_t to_ms_ceil(Duration d) {
  return std::chrono::ceil<std::chrono::milliseconds>(d).count();
}

// A source of monotonic time.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;
};

// CLOCK_MONOTONIC.
class MonotonicClock final : public Clock {
 public:
  TimePoint now() const override;
  static const MonotonicClock& instance();
};

}  // namespace simba

#endif
