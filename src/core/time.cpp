#include "core/time.h"

#include <time.h>

#include <cstdlib>

namespace simba {

TimePoint MonotonicClock::now() const {
  struct timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
    // CLOCK_MONOTONIC is required by POSIX and always present on Linux; a failure
    // here means the process cannot keep time at all.
    std::abort();
  }
  return TimePoint(
      Duration(static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<int64_t>(ts.tv_nsec)));
}

const MonotonicClock& MonotonicClock::instance() {
  static const MonotonicClock clock;
  return clock;
}

}  // namespace simba
