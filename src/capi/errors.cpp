// Error codes and their messages (simba_strerror), and the thread-local detail
// of the last synchronous failure (simba_last_error) with its helpers.
#include <string>

#include "capi/capi.h"

namespace simba::capi {

namespace {

thread_local std::string tl_last_error;

// Each code's name (simba_code_name) and text (simba_strerror), in one table.
struct CodeInfo {
  int code;
  const char* name;
  const char* text;
};

constexpr CodeInfo kCodes[] = {
    {SIMBA_OK, "OK", "success"},
    {SIMBA_EINVAL, "EINVAL", "invalid argument"},
    {SIMBA_ESTATE, "ESTATE", "not allowed in the current state"},
    {SIMBA_EEXPIRED, "EEXPIRED", "term not valid (or not for long enough)"},
    {SIMBA_ETIMEDOUT, "ETIMEDOUT", "timed out"},
    {SIMBA_EBACKEND, "EBACKEND", "backend unreachable or answered an error"},
    {SIMBA_ECLOSED, "ECLOSED", "client closed"},
    {SIMBA_ENOMEM, "ENOMEM", "out of memory"},
    {SIMBA_EWOULDBLOCK, "EWOULDBLOCK",
     "blocking call would wait for itself (callback or loop thread)"},
    {SIMBA_EBUSY, "EBUSY", "lease held by someone else"},
    {SIMBA_EUNSUPPORTED, "EUNSUPPORTED", "not supported by this build"},
    {SIMBA_ECANCELED, "ECANCELED", "canceled"},
};

const CodeInfo* code_info(int err) {
  for (const CodeInfo& c : kCodes) {
    if (c.code == err) return &c;
  }
  return nullptr;
}

}  // namespace

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
  return simba_lease_name_check(name, SIMBA_NAME_CSTRING) == SIMBA_OK;
}

}  // namespace simba::capi

extern "C" {

const char* simba_strerror(int err) {
  const simba::capi::CodeInfo* info = simba::capi::code_info(err);
  return info ? info->text : "unknown error";
}

const char* simba_code_name(int err) {
  const simba::capi::CodeInfo* info = simba::capi::code_info(err);
  return info ? info->name : "UNKNOWN";
}

const char* simba_last_error(void) { return simba::capi::tl_last_error.c_str(); }

}  // extern "C"
