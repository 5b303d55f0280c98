#include "capi/capi.h"

using simba::capi::done_fn;
using simba::capi::fail;
using simba::capi::guarded;
using simba::capi::result;

extern "C" {

int simba_election_start(simba_election_t** out, simba_client_t* c, const char* name,
                         const simba_listener_t* l) {
  return guarded([&]() -> int {
    if (!out) return fail(SIMBA_EINVAL, "simba_election_start: out is NULL");
    *out = nullptr;
    if (!c || !l) return fail(SIMBA_EINVAL, "simba_election_start: NULL argument");
    if (!simba::capi::valid_name(name)) return SIMBA_EINVAL;
    // The listener's three words, kept as given (ADR 0042); the client
    // calls them through simba::capi::listener_calls.
    simba::engine::Listener listener;
    listener.elected = reinterpret_cast<void (*)()>(l->on_elected);
    listener.revoked = reinterpret_cast<void (*)()>(l->on_revoked);
    listener.ud = l->ud;
    auto handle = std::make_unique<simba_election>();
    handle->client = c->impl;
    const int rc = result(c->impl->start_election(name, listener, &handle->impl));
    if (rc != SIMBA_OK) return rc;
    *out = handle.release();
    return SIMBA_OK;
  });
}

int simba_election_stop(simba_election_t* e, simba_done_fn done, void* ud) {
  return guarded([&]() -> int {
    if (!e) return fail(SIMBA_EINVAL, "simba_election_stop: election is NULL");
    return result(e->client->stop_election(e->impl, done_fn(done, ud)));
  });
}

int simba_election_step_down(simba_election_t* e, int64_t cooldown_ms, simba_done_fn done,
                             void* ud) {
  return guarded([&]() -> int {
    if (!e) return fail(SIMBA_EINVAL, "simba_election_step_down: election is NULL");
    if (cooldown_ms < 0) return fail(SIMBA_EINVAL, "simba_election_step_down: negative cooldown");
    return result(e->client->step_down(e->impl, simba::ms(cooldown_ms), done_fn(done, ud)));
  });
}

int simba_election_stop_wait(simba_election_t* e, int64_t timeout_ms) {
  return guarded([&]() -> int {
    if (!e) return fail(SIMBA_EINVAL, "simba_election_stop_wait: election is NULL");
    return result(e->client->stop_election_wait(e->impl, timeout_ms));
  });
}

void simba_election_free(simba_election_t* e) {
  if (!e) return;
  guarded([&]() -> int {
    e->client->free_election(e->impl);
    delete e;
    return SIMBA_OK;
  });
}

}  // extern "C"
