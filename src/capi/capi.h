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
#include "simba.h"

struct simba_config {
  simba::Config cfg;
  simba::engine::Hooks hooks;
};

struct simba_client {
  std::shared_ptr<simba::engine::Client> impl;
};

struct simba_election {
  std::shared_ptr<simba::engine::Client> client;
  std::shared_ptr<simba::engine::Election> impl;
};

// A task: an election whose terms run leader work, or a partition group.
struct simba_task {
  std::shared_ptr<simba::engine::Client> client;
  std::shared_ptr<simba::engine::Election> impl;  // run_while_leader, schedule
  std::shared_ptr<simba::engine::Group> group;    // group_join
};

struct simba_observer {
  std::shared_ptr<simba::engine::Client> client;
  std::shared_ptr<simba::engine::Observer> impl;
};

namespace simba::capi {

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

// Checks a lease name; on failure records why and returns false.
bool valid_name(const char* name);

}  // namespace simba::capi

#endif
