#include "core/timing.h"

#include <algorithm>
#include <cmath>

namespace simba {

Duration local_validity(Duration remaining, double drift, Duration margin) {
  // long double keeps nanosecond precision for any lease a user can configure.
  // Rounded to the nearest nanosecond (as Config::validate() does), so that a
  // drift written in decimal ("0.01") gives the deadline it reads: truncating
  // 15 s × (1 − 0.01) gave 14 849 999 999 ns, one binary rounding error off.
  const long double scaled =
      static_cast<long double>(remaining.count()) * (1.0L - static_cast<long double>(drift));
  return Duration(static_cast<int64_t>(std::llroundl(scaled))) - margin;
}

TimePoint local_deadline(TimePoint sent_at, Duration remaining, double drift, Duration margin) {
  return sent_at + local_validity(remaining, drift, margin);
}

RenewPeriod renew_period(const Config& cfg, Duration validity) {
  const Duration interval = cfg.renew_interval();
  const Duration full = local_validity(cfg.lease_duration, cfg.drift, cfg.margin);
  const bool config_fits_twice = interval * 2 <= full;
  // A configuration whose own full lease does not fit two renewals is kept as
  // long as the backend grants the full lease; a backend granting less makes it
  // renew every third of the validity like any other (else a renewal at
  // renewInterval could come after the deadline, and every term would flap).
  const bool granted_less = validity < full;
  if (interval * 2 > validity && (config_fits_twice || granted_less)) {
    return {std::max(validity / 3, Duration(1'000'000)), true};
  }
  return {interval, false};
}

Duration keep_alive_backoff(const Config& cfg, Duration renew_period, Duration time_left) {
  return std::max(std::min(time_left / 2, renew_period), cfg.min_backoff);
}

Duration retry_backoff(const Config& cfg, Duration renew_period, Duration previous) {
  if (previous <= Duration::zero()) return cfg.min_backoff;
  return std::max(std::min(previous * 2, renew_period), cfg.min_backoff);
}

Duration candidate_retry_delay(const Config& cfg, Duration jitter_draw) {
  return cfg.renew_interval() / 2 + jitter_draw;
}

}  // namespace simba
