#include <string>

#include "capi/capi.h"

using simba::capi::fail;
using simba::capi::guarded;
using simba::capi::handle_of;
using simba::capi::result;
using simba::capi::term_of;

namespace {

using LockAsk = simba::engine::Client::LockAsk;

// The engine's completion as the ABI's: a failure's detail is the callback
// thread's simba_last_error() while `cb` runs.
simba::engine::LockFn callback(simba_lock_fn cb, void* ud) {
  return [cb, ud](simba::engine::Code code, simba::engine::Term* t, const std::string& detail) {
    int err = simba::capi::code(code);
    if (err != SIMBA_OK && !detail.empty()) err = fail(err, detail);
    cb(ud, err, handle_of(t));
  };
}

// One acquire of any kind: the checks every form makes, then the engine's.
int acquire(const char* fn, simba_term_t** out, simba_client_t* c, const char* name,
            const LockAsk& ask, int64_t timeout_ms, bool try_once) {
  if (!out) return fail(SIMBA_EINVAL, std::string(fn) + ": out is NULL");
  *out = nullptr;
  if (!c) return fail(SIMBA_EINVAL, std::string(fn) + ": client is NULL");
  if (!simba::capi::valid_name(name)) return SIMBA_EINVAL;
  simba::engine::Term* t = nullptr;
  const int rc = result(c->impl->lock_acquire(ask, name, timeout_ms, try_once, &t));
  *out = handle_of(t);
  return rc;
}

int acquire_async(const char* fn, simba_client_t* c, const char* name, const LockAsk& ask,
                  int64_t timeout_ms, simba_lock_fn cb, void* ud) {
  if (!c || !cb) return fail(SIMBA_EINVAL, std::string(fn) + ": NULL argument");
  if (!simba::capi::valid_name(name)) return SIMBA_EINVAL;
  return result(c->impl->lock_acquire_async(ask, name, timeout_ms, false, callback(cb, ud)));
}

// A read/write lock's mode: exactly one of the two.
bool rwlock_ask(const char* fn, int mode, LockAsk* ask) {
  if (mode != SIMBA_LOCK_READ && mode != SIMBA_LOCK_WRITE) {
    fail(SIMBA_EINVAL, std::string(fn) +
                           ": mode must be SIMBA_LOCK_READ or SIMBA_LOCK_WRITE, not " +
                           std::to_string(mode));
    return false;
  }
  *ask = simba::engine::Client::rwlock(mode == SIMBA_LOCK_WRITE);
  return true;
}

}  // namespace

extern "C" {

int simba_semaphore_acquire(simba_term_t** out, simba_client_t* c, const char* name,
                            uint32_t permits, int64_t timeout_ms) {
  return guarded([&]() -> int {
    return acquire("simba_semaphore_acquire", out, c, name,
                   simba::engine::Client::semaphore(permits), timeout_ms, false);
  });
}

int simba_semaphore_try_acquire(simba_term_t** out, simba_client_t* c, const char* name,
                                uint32_t permits) {
  return guarded([&]() -> int {
    return acquire("simba_semaphore_try_acquire", out, c, name,
                   simba::engine::Client::semaphore(permits), -1, true);
  });
}

int simba_semaphore_acquire_async(simba_client_t* c, const char* name, uint32_t permits,
                                  int64_t timeout_ms, simba_lock_fn cb, void* ud) {
  return guarded([&]() -> int {
    return acquire_async("simba_semaphore_acquire_async", c, name,
                         simba::engine::Client::semaphore(permits), timeout_ms, cb, ud);
  });
}

int simba_rwlock_acquire(simba_term_t** out, simba_client_t* c, const char* name, int mode,
                         int64_t timeout_ms) {
  return guarded([&]() -> int {
    LockAsk ask;
    if (out) *out = nullptr;
    if (!rwlock_ask("simba_rwlock_acquire", mode, &ask)) return SIMBA_EINVAL;
    return acquire("simba_rwlock_acquire", out, c, name, ask, timeout_ms, false);
  });
}

int simba_rwlock_try_acquire(simba_term_t** out, simba_client_t* c, const char* name, int mode) {
  return guarded([&]() -> int {
    LockAsk ask;
    if (out) *out = nullptr;
    if (!rwlock_ask("simba_rwlock_try_acquire", mode, &ask)) return SIMBA_EINVAL;
    return acquire("simba_rwlock_try_acquire", out, c, name, ask, -1, true);
  });
}

int simba_rwlock_acquire_async(simba_client_t* c, const char* name, int mode, int64_t timeout_ms,
                               simba_lock_fn cb, void* ud) {
  return guarded([&]() -> int {
    LockAsk ask;
    if (!rwlock_ask("simba_rwlock_acquire_async", mode, &ask)) return SIMBA_EINVAL;
    return acquire_async("simba_rwlock_acquire_async", c, name, ask, timeout_ms, cb, ud);
  });
}

int simba_lock_acquire(simba_term_t** out, simba_client_t* c, const char* name,
                       int64_t timeout_ms) {
  return guarded([&]() -> int {
    return acquire("simba_lock_acquire", out, c, name, LockAsk{}, timeout_ms, false);
  });
}

int simba_lock_try_acquire(simba_term_t** out, simba_client_t* c, const char* name) {
  return guarded([&]() -> int {
    return acquire("simba_lock_try_acquire", out, c, name, LockAsk{}, -1, true);
  });
}

int simba_lock_acquire_async(simba_client_t* c, const char* name, int64_t timeout_ms,
                             simba_lock_fn cb, void* ud) {
  return guarded([&]() -> int {
    return acquire_async("simba_lock_acquire_async", c, name, LockAsk{}, timeout_ms, cb, ud);
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
