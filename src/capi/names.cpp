// The names of the ABI's enum values and the lease-name rule, for bindings, tools
// and host modules, which would otherwise each keep a table of their own.
#include "core/names.h"

#include <cstring>
#include <string_view>

#include "capi/capi.h"
#include "core/node.h"
#include "core/term_state.h"

extern "C" {

const char* simba_session_status_name(simba_session_status_t s) {
  if (s < SIMBA_SESSION_OPENING || s > SIMBA_SESSION_CLOSED) return "UNKNOWN";
  return simba::session_status_name(static_cast<simba::SessionStatus>(s));
}

const char* simba_event_name(simba_event_type_t type) {
  switch (type) {
    case SIMBA_EVENT_SESSION_OPENED:
      return "SESSION_OPENED";
    case SIMBA_EVENT_SESSION_LIVE:
      return "SESSION_LIVE";
    case SIMBA_EVENT_SESSION_SUSPENDED:
      return "SESSION_SUSPENDED";
    case SIMBA_EVENT_SESSION_EXPIRED:
      return "SESSION_EXPIRED";
    case SIMBA_EVENT_SESSION_CLOSED:
      return "SESSION_CLOSED";
    case SIMBA_EVENT_SESSION_LEASE_SHORTENED:
      return "SESSION_LEASE_SHORTENED";
  }
  return "UNKNOWN";
}

const char* simba_revoke_reason_name(simba_revoke_reason_t reason) {
  // RevokeReason has the ABI's values and an int underlying type, so any value
  // converts; one it does not name reads "UNKNOWN".
  return simba::revoke_reason_name(static_cast<simba::RevokeReason>(reason));
}

const char* simba_term_kind_name(simba_term_kind_t kind) {
  switch (kind) {
    case SIMBA_TERM_ELECTION:
      return "ELECTION";
    case SIMBA_TERM_LOCK:
      return "LOCK";
    case SIMBA_TERM_SEMAPHORE:
      return "SEMAPHORE";
    case SIMBA_TERM_READ:
      return "READ";
    case SIMBA_TERM_WRITE:
      return "WRITE";
  }
  return "UNKNOWN";
}

int simba_lease_name_check(const char* name, size_t len) {
  return simba::capi::guarded([&] {
    if (!name) return simba::capi::fail(SIMBA_EINVAL, "lease name is NULL");
    const std::string_view view(name, len == SIMBA_NAME_CSTRING ? std::strlen(name) : len);
    const std::string why = simba::check_lease_name(view);
    return why.empty() ? SIMBA_OK : simba::capi::fail(SIMBA_EINVAL, why);
  });
}

}  // extern "C"
