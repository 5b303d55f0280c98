#include "schedule/run_decision.h"

#include <algorithm>

namespace simba::schedule {

RunDecision decide_run(const std::optional<RunRecord>& record, uint64_t token,
                       const Schedule& schedule, Millis now, const RunPolicy& policy) noexcept {
  RunDecision d;
  // A start of an older term that never reported: its term is over (this one
  // holds the lease), so its run is abandoned. Its period is not run again.
  if (record && record->outcome == RunOutcome::kRunning && record->token < token) {
    RunRecord ended = *record;
    ended.outcome = RunOutcome::kAbandoned;
    ended.ended_ms = now;
    d.abandon = ended;
  }
  const std::optional<Millis> current = schedule.period_containing(now);
  // At or above, not equal: a node whose tz data names other instants (a
  // rolling tzdata upgrade) must not run a period another one started.
  if (record && current && record->period_id >= *current) {
    d.wake = schedule.next_after(std::max(now, record->period_id));
    return d;
  }
  if (!current) {  // before the schedule's first due time
    d.wake = schedule.next_after(now);
    return d;
  }
  if (policy.missed == MissedRuns::kSkip && now - *current > policy.misfire_ms) {
    d.missed = true;
    d.wake = schedule.next_after(now);
    return d;
  }
  d.verdict = RunDecision::Verdict::kRun;
  d.period_id = *current;
  return d;
}

}  // namespace simba::schedule
