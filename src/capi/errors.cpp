// Error codes and their messages (simba_strerror), and the thread-local detail
// of the last synchronous failure (simba_last_error) with its helpers.
#include <string>

#include "capi/capi.h"
#include "core/names.h"

static_assert(int{SIMBA_OK} == int{simba::engine::kOk} && int{SIMBA_EINVAL} == int{simba::engine::kEInval} &&
                  int{SIMBA_ESTATE} == int{simba::engine::kEState} &&
                  int{SIMBA_EEXPIRED} == int{simba::engine::kEExpired} &&
                  int{SIMBA_ETIMEDOUT} == int{simba::engine::kETimedOut} &&
                  int{SIMBA_EBACKEND} == int{simba::engine::kEBackend} &&
                  int{SIMBA_ECLOSED} == int{simba::engine::kEClosed} &&
                  int{SIMBA_ENOMEM} == int{simba::engine::kENoMem} &&
                  int{SIMBA_EWOULDBLOCK} == int{simba::engine::kEWouldBlock} &&
                  int{SIMBA_EBUSY} == int{simba::engine::kEBusy} &&
                  int{SIMBA_EUNSUPPORTED} == int{simba::engine::kEUnsupported} &&
                  int{SIMBA_ECANCELED} == int{simba::engine::kECanceled},
              "engine codes must equal the ABI's");

namespace simba::capi {

namespace {
thread_local std::string tl_last_error;
}

int fail(int code, const std::string& detail) {
  try {
    tl_last_error = detail;
  } catch (...) {
    // Keep the code even if the message cannot be stored.
  }
  return code;
}

int result(const simba::engine::Result& r) {
  if (r.code != SIMBA_OK) fail(r.code, r.detail);
  return r.code;
}

bool valid_name(const char* name) {
  if (!name) {
    fail(SIMBA_EINVAL, "lease name is NULL");
    return false;
  }
  const std::string why = check_lease_name(name);
  if (!why.empty()) {
    fail(SIMBA_EINVAL, "lease name: " + why);
    return false;
  }
  return true;
}

}  // namespace simba::capi

extern "C" {

const char* simba_strerror(int err) {
  switch (err) {
    case SIMBA_OK: return "success";
    case SIMBA_EINVAL: return "invalid argument";
    case SIMBA_ESTATE: return "not allowed in the current state";
    case SIMBA_EEXPIRED: return "term not valid (or not for long enough)";
    case SIMBA_ETIMEDOUT: return "timed out";
    case SIMBA_EBACKEND: return "backend unreachable or answered an error";
    case SIMBA_ECLOSED: return "client closed";
    case SIMBA_ENOMEM: return "out of memory";
    case SIMBA_EWOULDBLOCK: return "blocking call would wait for itself (callback or loop thread)";
    case SIMBA_EBUSY: return "lease held by someone else";
    case SIMBA_EUNSUPPORTED: return "not supported by this build";
    case SIMBA_ECANCELED: return "canceled";
    default: return "unknown error";
  }
}

const char* simba_last_error(void) { return simba::capi::tl_last_error.c_str(); }

}  // extern "C"
