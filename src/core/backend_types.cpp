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
  }
  // Only reachable with a value cast from an out-of-range integer.
  return "unknown";
}

}  // namespace simba
