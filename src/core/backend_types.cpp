#include "core/backend_types.h"

namespace simba {

// Lower-case words, stable: they appear in logs and test failure messages.
const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kOk:
      return "ok";
    case Outcome::kHeld:
      return "held";
    case Outcome::kExpired:
      return "expired";
    case Outcome::kError:
      return "error";
    case Outcome::kTimeout:
      return "timeout";
    case Outcome::kRefused:
      return "refused";
  }
  // Only reachable with a value cast from an out-of-range integer.
  return "unknown";
}

const char* permit_kind_name(PermitKind k) {
  switch (k) {
    case PermitKind::kLease:
      return "lease";
    case PermitKind::kSemaphore:
      return "semaphore";
    case PermitKind::kRead:
      return "read";
    case PermitKind::kWrite:
      return "write";
    case PermitKind::kIntent:
      return "intent";
    case PermitKind::kCandidate:
      return "candidate";
  }
  return "unknown";
}

const char* run_outcome_name(RunOutcome o) {
  switch (o) {
    case RunOutcome::kRunning:
      return "running";
    case RunOutcome::kOk:
      return "ok";
    case RunOutcome::kFailed:
      return "failed";
    case RunOutcome::kAbandoned:
      return "abandoned";
  }
  return "unknown";
}

std::string permit_resource(PermitKind k, std::string_view name) {
  switch (k) {
    case PermitKind::kLease:
    case PermitKind::kCandidate:
      return std::string(name);
    case PermitKind::kSemaphore:
      return "sem/" + std::string(name);
    default:
      return "rw/" + std::string(name);
  }
}

}  // namespace simba
