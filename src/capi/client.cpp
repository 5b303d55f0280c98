#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/memory/memory_backend.h"
#include "capi/capi.h"
#include "core/log_level.h"

using simba::capi::fail;
using simba::capi::guarded;
using simba::capi::guarded_value;
using simba::capi::result;
using simba::capi::valid_name;

extern "C" {

int simba_client_open(simba_client_t** out, const char* backend_url, const simba_config_t* cfg) {
  return guarded([&]() -> int {
    if (!out) return fail(SIMBA_EINVAL, "simba_client_open: out is NULL");
    *out = nullptr;
    if (!backend_url) return fail(SIMBA_EINVAL, "simba_client_open: backend URL is NULL");
    simba_config defaults;
    const simba_config& c = cfg ? *cfg : defaults;
    const std::string why = c.cfg.validate();
    if (!why.empty()) return fail(SIMBA_EINVAL, why);
    auto handle = std::make_unique<simba_client>();
    // The memory backend's fault switches (tests reach them through the
    // client) are made here, where the backends are wired in, so that the
    // engine includes no backend's header.
    simba::engine::Hooks hooks = c.hooks;
    hooks.memory_faults = std::make_shared<simba::MemoryFaults>();
    hooks.listener_calls = &simba::capi::listener_calls;
    const int rc = result(simba::engine::Client::open(backend_url, c.cfg, hooks, &handle->impl));
    if (rc != SIMBA_OK) return rc;
    *out = handle.release();
    return SIMBA_OK;
  });
}

int simba_client_wait_live(simba_client_t* c, int64_t timeout_ms) {
  return guarded([&]() -> int {
    if (!c) return fail(SIMBA_EINVAL, "simba_client_wait_live: client is NULL");
    return result(c->impl->wait_live(timeout_ms));
  });
}

}  // extern "C"

namespace {
// Finishes a THREAD-mode close on a thread of its own, which may wait for the
// loop and the executor (the caller may be one of its callbacks); `done` runs
// there once every other callback of the client returned, then the handle goes.
void close_on_own_thread(simba_client_t* c, simba_done_fn done, void* ud) {
  std::thread([c, done, ud] {
    c->impl->close();
    if (done) done(ud, SIMBA_OK);
    delete c;
  }).detach();
}

int refuse_external_close_here(const char* fn) {
  return fail(SIMBA_EWOULDBLOCK,
              std::string(fn) +
                  ": an EXTERNAL-mode client is closed on its host thread (the thread that "
                  "opened it), which alone runs its loop; nothing was closed");
}
}  // namespace

extern "C" {

int simba_client_close(simba_client_t* c) {
  return guarded([&]() -> int {
    if (!c) return SIMBA_OK;
    if (c->impl->external() && !c->impl->on_host_thread()) {
      return refuse_external_close_here("simba_client_close");
    }
    if (c->impl->close() == simba::engine::Code::kEWouldBlock) {
      if (c->impl->external()) {
        return fail(SIMBA_EWOULDBLOCK,
                    "simba_client_close from a callback of an EXTERNAL-mode client: the close "
                    "started; call simba_client_close again outside simba_client_process");
      }
      close_on_own_thread(c, nullptr, nullptr);  // from a callback or the loop thread
      return SIMBA_OK;
    }
    delete c;
    return SIMBA_OK;
  });
}

int simba_client_close_async(simba_client_t* c, simba_done_fn done, void* ud) {
  return guarded([&]() -> int {
    if (!c) return fail(SIMBA_EINVAL, "simba_client_close_async: client is NULL");
    if (c->impl->external()) {
      // The host's simba_client_process() finishes it; simba_client_close() frees.
      switch (c->impl->close_async(simba::capi::done_fn(done, ud))) {
        case simba::engine::Code::kOk:
          return SIMBA_OK;
        case simba::engine::Code::kEClosed:
          return fail(SIMBA_ECLOSED, "simba_client_close_async: the close was started already");
        default:
          return refuse_external_close_here("simba_client_close_async");
      }
    }
    close_on_own_thread(c, done, ud);
    return SIMBA_OK;
  });
}

simba_session_status_t simba_client_status(const simba_client_t* c) {
  if (!c) return SIMBA_SESSION_CLOSED;
  return static_cast<simba_session_status_t>(c->impl->status());
}

char* simba_client_snapshot_json(simba_client_t* c) {
  return guarded_value<char*>(nullptr, [&]() -> char* {
    if (!c) {
      fail(SIMBA_EINVAL, "simba_client_snapshot_json: client is NULL");
      return nullptr;
    }
    std::string json;
    if (result(c->impl->snapshot_json(&json)) != SIMBA_OK) return nullptr;
    char* out = static_cast<char*>(std::malloc(json.size() + 1));
    if (!out) {
      fail(SIMBA_ENOMEM, "out of memory");
      return nullptr;
    }
    std::memcpy(out, json.c_str(), json.size() + 1);
    return out;
  });
}

int simba_client_inspect_json(simba_client_t* c, const char* const* names, size_t n_names,
                              int64_t timeout_ms, char** out_json) {
  return guarded([&]() -> int {
    if (!out_json) return fail(SIMBA_EINVAL, "simba_client_inspect_json: out_json is NULL");
    *out_json = nullptr;
    if (!c) return fail(SIMBA_EINVAL, "simba_client_inspect_json: client is NULL");
    if (!names && n_names > 0) {
      return fail(SIMBA_EINVAL, "simba_client_inspect_json: names is NULL but n_names > 0");
    }
    if (timeout_ms <= 0) {
      return fail(SIMBA_EINVAL, "simba_client_inspect_json: timeout_ms must be > 0");
    }
    std::vector<std::string> list;
    for (size_t i = 0; i < n_names; ++i) {
      if (!valid_name(names[i])) return SIMBA_EINVAL;
      list.emplace_back(names[i]);
    }
    std::string json;
    const int rc = result(c->impl->inspect_json(list, timeout_ms, &json));
    if (rc != SIMBA_OK) return rc;
    char* out = static_cast<char*>(std::malloc(json.size() + 1));
    if (!out) return fail(SIMBA_ENOMEM, "out of memory");
    std::memcpy(out, json.c_str(), json.size() + 1);
    *out_json = out;
    return SIMBA_OK;
  });
}

char* simba_client_metrics_text(simba_client_t* c) {
  return guarded_value<char*>(nullptr, [&]() -> char* {
    if (!c) {
      fail(SIMBA_EINVAL, "simba_client_metrics_text: client is NULL");
      return nullptr;
    }
    std::string text;
    if (result(c->impl->metrics_text(&text)) != SIMBA_OK) return nullptr;
    char* out = static_cast<char*>(std::malloc(text.size() + 1));
    if (!out) {
      fail(SIMBA_ENOMEM, "out of memory");
      return nullptr;
    }
    std::memcpy(out, text.c_str(), text.size() + 1);
    return out;
  });
}

int simba_client_on_event(simba_client_t* c, simba_event_fn fn, void* ud) {
  return guarded([&]() -> int {
    if (!c) return fail(SIMBA_EINVAL, "simba_client_on_event: client is NULL");
    simba::engine::EventFn sink;
    if (fn) {
      sink = [fn, ud](simba::SessionEvent ev, const std::string& detail) {
        fn(ud, static_cast<simba_event_type_t>(ev), detail.c_str());
      };
    }
    return result(c->impl->set_event_sink(std::move(sink)));
  });
}

int simba_client_fd(const simba_client_t* c) {
  if (!c) return -1;
  return c->impl->fd();
}

int64_t simba_client_timeout_ms(const simba_client_t* c) {
  if (!c) return -1;
  return c->impl->timeout_ms();
}

int simba_client_process(simba_client_t* c) {
  return guarded([&]() -> int {
    if (!c) return fail(SIMBA_EINVAL, "simba_client_process: client is NULL");
    return result(c->impl->process());
  });
}

}  // extern "C"

static_assert(SIMBA_SESSION_OPENING == static_cast<int>(simba::SessionStatus::kOpening) &&
                  SIMBA_SESSION_LIVE == static_cast<int>(simba::SessionStatus::kLive) &&
                  SIMBA_SESSION_SUSPENDED == static_cast<int>(simba::SessionStatus::kSuspended) &&
                  SIMBA_SESSION_CLOSED == static_cast<int>(simba::SessionStatus::kClosed),
              "session status values must match the ABI");
static_assert(SIMBA_EVENT_SESSION_OPENED == static_cast<int>(simba::SessionEvent::kOpened) &&
                  SIMBA_EVENT_SESSION_LIVE == static_cast<int>(simba::SessionEvent::kLive) &&
                  SIMBA_EVENT_SESSION_SUSPENDED ==
                      static_cast<int>(simba::SessionEvent::kSuspended) &&
                  SIMBA_EVENT_SESSION_EXPIRED == static_cast<int>(simba::SessionEvent::kExpired) &&
                  SIMBA_EVENT_SESSION_CLOSED == static_cast<int>(simba::SessionEvent::kClosed) &&
                  SIMBA_EVENT_SESSION_LEASE_SHORTENED ==
                      static_cast<int>(simba::SessionEvent::kLeaseShortened),
              "session event values must match the ABI");

static_assert(SIMBA_LOG_DEBUG == simba::kLogDebug && SIMBA_LOG_INFO == simba::kLogInfo &&
                  SIMBA_LOG_WARN == simba::kLogWarn && SIMBA_LOG_ERROR == simba::kLogError,
              "log levels of simba.h and of the engine");
