// What a leader does with a schedule's run record (ADR 0048): run a period now
// or wait. Pure: the record, the schedule, the term's token and the leader's
// clock in; a decision out. The engine asks when its term starts and after
// each run, never while a run of its term is in progress.
#ifndef SIMBA_SCHEDULE_RUN_DECISION_H
#define SIMBA_SCHEDULE_RUN_DECISION_H

#include <optional>

#include "core/backend_types.h"
#include "schedule/cron.h"

namespace simba::schedule {

// What happens to periods that passed without a start.
enum class MissedRuns {
  kSkip,     // run the current period only if at most `misfire_ms` late
  kCatchUp,  // run the current period at once however late, once for all missed
};

struct RunPolicy {
  MissedRuns missed = MissedRuns::kSkip;
  // kSkip's limit; the engine's default is one lease duration (the longest a
  // failover takes), so a handover does not lose the period it interrupted.
  Millis misfire_ms = 0;
};

struct RunDecision {
  enum class Verdict { kRun, kWait };
  Verdict verdict = Verdict::kWait;
  Millis period_id = 0;        // kRun: the period to start now (write it `running` first)
  std::optional<Millis> wake;  // kWait: when to decide again; nullopt: no due time is left
  // The stored record left `running` by an older term, as the end write that
  // marks it abandoned (guarded by this term's token): made first, before a
  // start, so the outcome is visible (`simba status`) and never overwritten
  // as a silent loss.
  std::optional<RunRecord> abandon;
  bool missed = false;  // kWait under kSkip: the current period is too late, it is skipped
};

// `record`: the name's stored run record (AcquireReply::run); `token`: this
// term's; `now`: the leader's wall clock, UTC epoch ms.
RunDecision decide_run(const std::optional<RunRecord>& record, uint64_t token,
                       const Schedule& schedule, Millis now, const RunPolicy& policy) noexcept;

}  // namespace simba::schedule

#endif
