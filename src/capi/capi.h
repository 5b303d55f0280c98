// Shared by the extern "C" shims: handle structs, the thread-local last error,
// and the exception barrier that keeps C++ exceptions from crossing the ABI.
#ifndef SIMBA_CAPI_CAPI_H
#define SIMBA_CAPI_CAPI_H

#include <memory>
#include <new>
#include <string>

#include "core/config.h"
#include "engine/client.h"
#include "engine/group.h"
#include "engine/task.h"
#include "simba.h"

struct simba_config {
  simba::Config cfg;
  simba::engine::Hooks hooks;
};

struct simba_client {
  std::shared_ptr<simba::engine::Client> impl;
};

// A task: an election whose terms run leader work, or a partition group.
struct simba_task {
  std::shared_ptr<simba::engine::Task> impl;
};

struct simba_observer {
  std::shared_ptr<simba::engine::Client> client;
  std::shared_ptr<simba::engine::Observer> impl;
};

namespace simba::capi {

// The SIMBA_E* code of an engine code: the one place the two meet.
int code(simba::engine::Code c);
// Records `detail` as this thread's last error and returns `code`.
int fail(int code, const std::string& detail);
// Records an engine result (when it failed) and returns its code.
int result(const simba::engine::Result& r);
// Clears nothing: a success leaves the last error as it was (like errno).

// Runs `body` (which returns an int code) behind the exception barrier.
template <typename F>
int guarded(F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(SIMBA_ENOMEM, "out of memory");
  } catch (const std::exception& e) {
    return fail(SIMBA_EBACKEND, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(SIMBA_EBACKEND, "internal error");
  }
}

// The same for functions that return something else: `fallback` on exception.
template <typename T, typename F>
T guarded_value(T fallback, F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    fail(SIMBA_ENOMEM, "out of memory");
  } catch (const std::exception& e) {
    fail(SIMBA_EBACKEND, std::string("internal error: ") + e.what());
  } catch (...) {
    fail(SIMBA_EBACKEND, "internal error");
  }
  return fallback;
}

// A simba_done_fn as the engine's DoneFn (null for none).
inline simba::engine::DoneFn done_fn(simba_done_fn done, void* ud) {
  if (!done) return nullptr;
  return [done, ud](simba::engine::Code c) { done(ud, code(c)); };
}

// A close's last callback (the *_close_async functions, ADR 0041): the user's
// done, then `free_handle`, which lets go of the handle where done ran (the
// callback executor; see simba.h: never the client's last reference there).
template <typename Free>
simba::engine::LastFn last_fn(simba_done_fn done, void* ud, Free free_handle) {
  return [done, ud, free_handle]() {
    if (done) done(ud, SIMBA_OK);
    free_handle();
  };
}

// Checks a lease name; on failure records why and returns false.
bool valid_name(const char* name);

// simba_term_t is the engine's Term under the ABI's name: the handle is the
// engine's object itself (no wrapper per term), converted here and only here.
inline engine::Term* term_of(simba_term_t* t) { return reinterpret_cast<engine::Term*>(t); }
inline const engine::Term* term_of(const simba_term_t* t) {
  return reinterpret_cast<const engine::Term*>(t);
}
inline simba_term_t* handle_of(engine::Term* t) { return reinterpret_cast<simba_term_t*>(t); }

// simba_election_t is the engine's Election (ADR 0042), as simba_term_t is the
// Term: the handle holds one of its references, from start to free.
inline engine::Election* impl_of(simba_election_t* e) {
  return reinterpret_cast<engine::Election*>(e);
}
inline simba_election_t* handle_of(engine::Election* e) {
  return reinterpret_cast<simba_election_t*>(e);
}

// Calls a simba_listener_t kept as an engine::Listener: its functions
// converted back to their own types.
inline const engine::ListenerCalls listener_calls = {
    [](const engine::Listener& l, engine::Term* t) {
      reinterpret_cast<void (*)(void*, simba_term_t*)>(l.elected)(l.ud, handle_of(t));
    },
    [](const engine::Listener& l, engine::Term* t, RevokeReason why) {
      reinterpret_cast<void (*)(void*, simba_term_t*, simba_revoke_reason_t)>(l.revoked)(
          l.ud, handle_of(t), static_cast<simba_revoke_reason_t>(why));
    },
};

}  // namespace simba::capi

#endif
