// simba_observe_start / simba_observer_free: following a name's holder.
#include "capi/capi.h"

using simba::capi::fail;
using simba::capi::guarded;
using simba::capi::result;

extern "C" {

int simba_observe_start(simba_observer_t** out, simba_client_t* c, const char* name,
                        int64_t poll_ms, simba_observe_fn fn, void* ud) {
  return guarded([&]() -> int {
    if (!out) return fail(SIMBA_EINVAL, "simba_observe_start: out is NULL");
    *out = nullptr;
    if (!c || !fn) return fail(SIMBA_EINVAL, "simba_observe_start: NULL argument");
    if (!simba::capi::valid_name(name)) return SIMBA_EINVAL;
    if (poll_ms < 0 || (poll_ms > 0 && poll_ms < 10)) {
      return fail(SIMBA_EINVAL,
                  "simba_observe_start: poll_ms must be 0 (the renew interval) or >= 10");
    }
    auto handle = std::make_unique<simba_observer>();
    handle->client = c->impl;
    auto deliver = [fn, ud](const std::string& n, const std::string& holder,
                            const std::string& holder_client, bool client_known, uint64_t token) {
      fn(ud, n.c_str(), holder.empty() ? nullptr : holder.c_str(),
         holder.empty() || !client_known ? nullptr : holder_client.c_str(), token);
    };
    const int rc =
        result(c->impl->observe(name, simba::ms(poll_ms), std::move(deliver), &handle->impl));
    if (rc != SIMBA_OK) return rc;
    *out = handle.release();
    return SIMBA_OK;
  });
}

int simba_observer_close_async(simba_observer_t* o, simba_done_fn done, void* ud) {
  return guarded([&]() -> int {
    if (!o) return fail(SIMBA_EINVAL, "simba_observer_close_async: observer is NULL");
    o->client->close_observer(o->impl, simba::capi::last_fn(done, ud, [o] { delete o; }));
    return SIMBA_OK;
  });
}

void simba_observer_free(simba_observer_t* o) {
  if (!o) return;
  guarded([&]() -> int {
    o->client->free_observer(o->impl);
    delete o;
    return SIMBA_OK;
  });
}

}  // extern "C"
