// The seed's timing formulas, each in exactly one function.
#ifndef SIMBA_CORE_TIMING_H
#define SIMBA_CORE_TIMING_H

#include "core/config.h"
#include "core/time.h"

namespace simba {

// How long the session is valid locally from the moment the keep-alive was sent,
// given the remaining time the backend reported: remaining × (1 − drift) − margin.
// May be zero or negative when the backend granted too little.
Duration local_validity(Duration remaining, double drift, Duration margin);

// deadline = sentAt + remaining × (1 − drift) − margin. sentAt is when the
// keep-alive (or open) was sent, so a slow reply only shortens the deadline.
// × (1 − drift): `remaining` is measured on the backend's clock; while the two
// clocks' rates differ by at most drift, the local deadline passes before the
// backend's expiry, so no one else can hold the lease while we read it valid.
// − margin covers what a rate bound cannot (scheduling, the reply's decode).
TimePoint local_deadline(TimePoint sent_at, Duration remaining, double drift, Duration margin);

// The renew period in effect for a session whose backend grants `validity`
// locally: renewInterval while two keep-alives at that interval fit in the
// validity, else a third of the validity (the backend granted less than
// leaseDuration, e.g. a ZooKeeper maxSessionTimeout). `shortened` tells which.
// A configuration whose own full lease does not fit two renewals is respected
// as configured (the config rules still guarantee one) while the backend grants
// the full lease; granted less, it is shortened too.
struct RenewPeriod {
  Duration period;
  bool shortened;
};
RenewPeriod renew_period(const Config& cfg, Duration validity);

// Backoff after a failed keep-alive: half the time left before the deadline,
// capped at the renew period in effect, at least minBackoff.
Duration keep_alive_backoff(const Config& cfg, Duration renew_period, Duration time_left);

// The wait before sending a failed release or close again (ADR 0030):
// minBackoff after the first failure, doubling after each next one (`previous`
// is the last wait, zero before any), capped at the renew period in effect.
Duration retry_backoff(const Config& cfg, Duration renew_period, Duration previous);

// When a candidate attempts next: renewInterval / 2 plus `jitter_draw`, a
// random value the caller drew in [0, retryJitter).
Duration candidate_retry_delay(const Config& cfg, Duration jitter_draw);

}  // namespace simba

#endif
