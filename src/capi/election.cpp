#include "capi/capi.h"

using simba::capi::done_fn;
using simba::capi::fail;
using simba::capi::guarded;
using simba::capi::impl_of;
using simba::capi::result;

namespace {

// What a call on an election whose client is gone answers: the client's
// close stopped it (as the engine answers once the client closed).
int client_gone(const simba::engine::Election& e) {
  return fail(SIMBA_ESTATE,
              "the election of \"" + e.name().str() + "\" was stopped by the client's close");
}

}  // namespace

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
    simba::engine::ElectionRef e;
    const int rc = result(c->impl->start_election(name, listener, &e));
    if (rc != SIMBA_OK) return rc;
    e->retain();  // the handle's reference
    *out = simba::capi::handle_of(e.get());
    return SIMBA_OK;
  });
}

int simba_election_stop(simba_election_t* e, simba_done_fn done, void* ud) {
  return guarded([&]() -> int {
    if (!e) return fail(SIMBA_EINVAL, "simba_election_stop: election is NULL");
    const simba::engine::ElectionRef el(impl_of(e));
    const auto client = el->client();
    if (!client) return client_gone(*el);
    return result(client->stop_election(el, done_fn(done, ud)));
  });
}

int simba_election_step_down(simba_election_t* e, int64_t cooldown_ms, simba_done_fn done,
                             void* ud) {
  return guarded([&]() -> int {
    if (!e) return fail(SIMBA_EINVAL, "simba_election_step_down: election is NULL");
    if (cooldown_ms < 0) return fail(SIMBA_EINVAL, "simba_election_step_down: negative cooldown");
    const simba::engine::ElectionRef el(impl_of(e));
    const auto client = el->client();
    if (!client) return client_gone(*el);
    return result(client->step_down(el, simba::ms(cooldown_ms), done_fn(done, ud)));
  });
}

int simba_election_stop_wait(simba_election_t* e, int64_t timeout_ms) {
  return guarded([&]() -> int {
    if (!e) return fail(SIMBA_EINVAL, "simba_election_stop_wait: election is NULL");
    const simba::engine::ElectionRef el(impl_of(e));
    const auto client = el->client();
    // The client's close completed the stop before the client went.
    if (!client) return el->is_stopped() ? SIMBA_OK : client_gone(*el);
    return result(client->stop_election_wait(el, timeout_ms));
  });
}

int simba_election_close_async(simba_election_t* e, simba_done_fn done, void* ud) {
  return guarded([&]() -> int {
    if (!e) return fail(SIMBA_EINVAL, "simba_election_close_async: election is NULL");
    simba::engine::Election* el = impl_of(e);
    // The handle's reference goes after done, where done ran (ADR 0041).
    simba::engine::LastFn last = simba::capi::last_fn(done, ud, [el] { el->release(); });
    const simba::engine::ElectionRef ref(el);
    if (const auto client = ref->client()) {
      client->close_election(ref, std::move(last));
    } else {
      // The client's close stopped it: nothing of it is left to wait for.
      ref->run_last_on_queue(std::move(last));
    }
    return SIMBA_OK;
  });
}

void simba_election_free(simba_election_t* e) {
  if (!e) return;
  guarded([&]() -> int {
    const simba::engine::ElectionRef el(impl_of(e));
    el->release();  // the handle's reference
    if (const auto client = el->client()) client->free_election(el);
    return SIMBA_OK;
  });
}

}  // extern "C"
