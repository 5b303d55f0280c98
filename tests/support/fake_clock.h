// A virtual monotonic clock for deterministic tests.
#ifndef SIMBA_TESTS_FAKE_CLOCK_H
#define SIMBA_TESTS_FAKE_CLOCK_H

#include <atomic>

#include "core/time.h"

namespace simba::testing {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(TimePoint start = TimePoint(Duration(1'000'000'000)))
      : now_(start.time_since_epoch().count()) {}
  TimePoint now() const override { return TimePoint(Duration(now_.load())); }
  void advance(Duration d) { now_ += d.count(); }
  void set(TimePoint t) { now_ = t.time_since_epoch().count(); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace simba::testing

#endif
