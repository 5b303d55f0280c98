#include "capi/capi.h"

using simba::capi::fail;
using simba::capi::guarded;
using simba::capi::handle_of;
using simba::capi::term_of;

static_assert(
    SIMBA_REVOKE_NONE == static_cast<int>(simba::RevokeReason::kNone) &&
        SIMBA_REVOKE_STOPPED == static_cast<int>(simba::RevokeReason::kStopped) &&
        SIMBA_REVOKE_STEPPED_DOWN == static_cast<int>(simba::RevokeReason::kSteppedDown) &&
        SIMBA_REVOKE_DEADLINE_PASSED == static_cast<int>(simba::RevokeReason::kDeadlinePassed) &&
        SIMBA_REVOKE_SESSION_EXPIRED == static_cast<int>(simba::RevokeReason::kSessionExpired) &&
        SIMBA_REVOKE_TAKEN_OVER == static_cast<int>(simba::RevokeReason::kTakenOver),
    "revoke reasons must match the ABI");

extern "C" {

// The accessors read only atomics and the monotonic clock: no lock, no loop.
const char* simba_term_name(const simba_term_t* t) {
  return t ? term_of(t)->name().c_str() : nullptr;
}

uint64_t simba_term_token(const simba_term_t* t) { return t ? term_of(t)->token() : 0; }

int simba_term_is_valid(const simba_term_t* t) { return t && term_of(t)->valid() ? 1 : 0; }

int64_t simba_term_remaining_ms(const simba_term_t* t) {
  if (!t) return 0;
  // Whole milliseconds left; a term with less than 1 ms left reads 0.
  return simba::to_ms(term_of(t)->remaining());
}

int simba_term_ensure_valid(const simba_term_t* t, int64_t min_remaining_ms) {
  if (!t) return fail(SIMBA_EINVAL, "simba_term_ensure_valid: term is NULL");
  if (min_remaining_ms < 0) {
    return fail(SIMBA_EINVAL, "simba_term_ensure_valid: min_remaining_ms is negative");
  }
  const simba::Duration left = term_of(t)->remaining();
  if (left <= simba::ms(min_remaining_ms)) {
    return fail(SIMBA_EEXPIRED,
                left <= simba::Duration::zero()
                    ? "term of \"" + term_of(t)->name() + "\" (token " +
                          std::to_string(term_of(t)->token()) + ") is no longer valid"
                    : "term of \"" + term_of(t)->name() + "\" has " +
                          std::to_string(simba::to_ms(left)) + " ms left, not more than " +
                          std::to_string(min_remaining_ms));
  }
  return SIMBA_OK;
}

simba_term_kind_t simba_term_kind(const simba_term_t* t) {
  const simba::engine::LockTerm* lock = t ? term_of(t)->as_lock() : nullptr;
  if (!lock) return SIMBA_TERM_ELECTION;
  switch (lock->kind) {
    case simba::ContenderKind::kSemaphore:
      return SIMBA_TERM_SEMAPHORE;
    case simba::ContenderKind::kRead:
      return SIMBA_TERM_READ;
    case simba::ContenderKind::kWrite:
      return SIMBA_TERM_WRITE;
    default:
      return SIMBA_TERM_LOCK;
  }
}

simba_revoke_reason_t simba_term_revoke_reason(const simba_term_t* t) {
  return t ? static_cast<simba_revoke_reason_t>(term_of(t)->revoked()) : SIMBA_REVOKE_NONE;
}

int simba_term_on_revoked(simba_term_t* t, simba_revoked_fn fn, void* ud) {
  return guarded([&]() -> int {
    if (!t || !fn) return fail(SIMBA_EINVAL, "simba_term_on_revoked: NULL argument");
    const bool ok =
        term_of(t)->add_on_revoked([fn, ud](simba::engine::Term* term, simba::RevokeReason r) {
          fn(ud, handle_of(term), static_cast<simba_revoke_reason_t>(r));
        });
    if (!ok) {
      return fail(SIMBA_ECLOSED,
                  "the term was revoked and its client is closed: read simba_term_revoke_reason");
    }
    return SIMBA_OK;
  });
}

int simba_term_wait_revoked(simba_term_t* t, int64_t timeout_ms) {
  return guarded([&]() -> int {
    if (!t) return fail(SIMBA_EINVAL, "simba_term_wait_revoked: term is NULL");
    if (!term_of(t)->wait_revoked(timeout_ms)) {
      return fail(SIMBA_ETIMEDOUT, "the term was not revoked within the timeout");
    }
    return SIMBA_OK;
  });
}

int simba_term_revoke_fd(simba_term_t* t) {
  if (!t) {
    fail(SIMBA_EINVAL, "simba_term_revoke_fd: term is NULL");
    return -1;
  }
  const int fd = term_of(t)->revoke_fd();
  if (fd < 0) fail(SIMBA_ENOMEM, "simba_term_revoke_fd: eventfd failed");
  return fd;
}

void simba_term_retain(simba_term_t* t) {
  if (!t) return;
  simba::engine::Term* term = term_of(t);
  term->retain();
  if (simba::engine::LockTerm* lock = term->as_lock()) lock->caller_refs.fetch_add(1);
}

void simba_term_release(simba_term_t* t) {
  if (!t) return;
  simba::engine::Term* term = term_of(t);
  guarded([&]() -> int {
    // The caller's last reference of a lock it never released: release the
    // lock now (with its token, without waiting), rather than leave the name
    // held until the session ends.
    simba::engine::LockTerm* lock = term->as_lock();
    if (lock && lock->caller_refs.fetch_sub(1) == 1 && !lock->release_requested.exchange(true)) {
      if (auto client = term->client()) client->lock_release(term, /*wait=*/false);
    }
    return SIMBA_OK;
  });
  term->release();
}

int simba_term_close_async(simba_term_t* t, simba_done_fn done, void* ud) {
  return guarded([&]() -> int {
    if (!t) return fail(SIMBA_EINVAL, "simba_term_close_async: term is NULL");
    simba::engine::Term* term = term_of(t);
    // The caller's reference goes after done: done may still read the term.
    simba::engine::LastFn last = simba::capi::last_fn(done, ud, [term] { term->release(); });
    if (simba::engine::LockTerm* lock = term->as_lock()) {
      lock->caller_refs.fetch_sub(1);
      // A lock not released yet is released as simba_lock_release does.
      if (!lock->release_requested.exchange(true)) {
        if (auto client = term->client()) {
          client->lock_release(term, /*wait=*/false, std::move(last));
          return SIMBA_OK;
        }
      }
    }
    simba::engine::run_last(*term->queue, std::move(last));
    return SIMBA_OK;
  });
}

}  // extern "C"
