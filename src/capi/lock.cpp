#include "capi/capi.h"

using simba::capi::fail;
using simba::capi::guarded;
using simba::capi::handle_of;
using simba::capi::result;
using simba::capi::term_of;

extern "C" {

int simba_lock_acquire(simba_term_t** out, simba_client_t* c, const char* name,
                       int64_t timeout_ms) {
  return guarded([&]() -> int {
    if (!out) return fail(SIMBA_EINVAL, "simba_lock_acquire: out is NULL");
    *out = nullptr;
    if (!c) return fail(SIMBA_EINVAL, "simba_lock_acquire: client is NULL");
    if (!simba::capi::valid_name(name)) return SIMBA_EINVAL;
    simba::engine::Term* t = nullptr;
    const int rc = result(c->impl->lock_acquire(name, timeout_ms, false, &t));
    *out = handle_of(t);
    return rc;
  });
}

int simba_lock_try_acquire(simba_term_t** out, simba_client_t* c, const char* name) {
  return guarded([&]() -> int {
    if (!out) return fail(SIMBA_EINVAL, "simba_lock_try_acquire: out is NULL");
    *out = nullptr;
    if (!c) return fail(SIMBA_EINVAL, "simba_lock_try_acquire: client is NULL");
    if (!simba::capi::valid_name(name)) return SIMBA_EINVAL;
    simba::engine::Term* t = nullptr;
    const int rc = result(c->impl->lock_acquire(name, -1, true, &t));
    *out = handle_of(t);
    return rc;
  });
}

int simba_lock_acquire_async(simba_client_t* c, const char* name, int64_t timeout_ms,
                             simba_lock_fn cb, void* ud) {
  return guarded([&]() -> int {
    if (!c || !cb) return fail(SIMBA_EINVAL, "simba_lock_acquire_async: NULL argument");
    if (!simba::capi::valid_name(name)) return SIMBA_EINVAL;
    return result(c->impl->lock_acquire_async(
        name, timeout_ms, false, [cb, ud](simba::engine::Code code, simba::engine::Term* t) {
          cb(ud, simba::capi::code(code), handle_of(t));
        }));
  });
}

int simba_lock_release(simba_term_t* handle) {
  return guarded([&]() -> int {
    if (!handle) return fail(SIMBA_EINVAL, "simba_lock_release: term is NULL");
    simba::engine::Term* term = term_of(handle);
    simba::engine::LockTerm* lock = term->as_lock();
    if (!lock) {
      return fail(SIMBA_EINVAL, "simba_lock_release: not a lock term (an election's term?)");
    }
    if (!lock->release_requested.exchange(true)) {
      if (auto client = term->client()) client->lock_release(term);
    }
    lock->caller_refs.fetch_sub(1);
    term->release();
    return SIMBA_OK;
  });
}

}  // extern "C"
