// Error codes and their messages (simba_strerror), and the thread-local detail
// of the last synchronous failure (simba_last_error) with its helpers.
#include <string>

#include "capi/capi.h"
#include "core/names.h"

namespace simba::capi {

namespace {
thread_local std::string tl_last_error;
}

int code(simba::engine::Code c) {
  using simba::engine::Code;
  switch (c) {
    case Code::kOk:
      return SIMBA_OK;
    case Code::kEInval:
      return SIMBA_EINVAL;
    case Code::kEState:
      return SIMBA_ESTATE;
    case Code::kEExpired:
      return SIMBA_EEXPIRED;
    case Code::kETimedOut:
      return SIMBA_ETIMEDOUT;
    case Code::kEBackend:
      return SIMBA_EBACKEND;
    case Code::kEClosed:
      return SIMBA_ECLOSED;
    case Code::kENoMem:
      return SIMBA_ENOMEM;
    case Code::kEWouldBlock:
      return SIMBA_EWOULDBLOCK;
    case Code::kEBusy:
      return SIMBA_EBUSY;
    case Code::kEUnsupported:
      return SIMBA_EUNSUPPORTED;
    case Code::kECanceled:
      return SIMBA_ECANCELED;
  }
  return SIMBA_EBACKEND;
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
  const int rc = code(r.code);
  if (rc != SIMBA_OK) fail(rc, r.detail);
  return rc;
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
    case SIMBA_OK:
      return "success";
    case SIMBA_EINVAL:
      return "invalid argument";
    case SIMBA_ESTATE:
      return "not allowed in the current state";
    case SIMBA_EEXPIRED:
      return "term not valid (or not for long enough)";
    case SIMBA_ETIMEDOUT:
      return "timed out";
    case SIMBA_EBACKEND:
      return "backend unreachable or answered an error";
    case SIMBA_ECLOSED:
      return "client closed";
    case SIMBA_ENOMEM:
      return "out of memory";
    case SIMBA_EWOULDBLOCK:
      return "blocking call would wait for itself (callback or loop thread)";
    case SIMBA_EBUSY:
      return "lease held by someone else";
    case SIMBA_EUNSUPPORTED:
      return "not supported by this build";
    case SIMBA_ECANCELED:
      return "canceled";
    default:
      return "unknown error";
  }
}

const char* simba_last_error(void) { return simba::capi::tl_last_error.c_str(); }

}  // extern "C"
