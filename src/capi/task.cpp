// Leader work: simba_run_while_leader, simba_schedule and the task handle.
#include "capi/capi.h"

using simba::capi::done_fn;
using simba::capi::fail;
using simba::capi::guarded;
using simba::capi::result;

namespace {

int start_task(simba_task_t** out, simba_client_t* c, const char* name,
               simba::engine::WorkFn work) {
  auto handle = std::make_unique<simba_task>();
  handle->client = c->impl;
  const int rc =
      result(c->impl->start_election(name, nullptr, nullptr, &handle->impl, std::move(work)));
  if (rc != SIMBA_OK) return rc;
  *out = handle.release();
  return SIMBA_OK;
}

}  // namespace

extern "C" {

int simba_run_while_leader(simba_task_t** out, simba_client_t* c, const char* name,
                           simba_work_fn work, void* ud) {
  return guarded([&]() -> int {
    if (!out) return fail(SIMBA_EINVAL, "simba_run_while_leader: out is NULL");
    *out = nullptr;
    if (!c || !work) return fail(SIMBA_EINVAL, "simba_run_while_leader: NULL argument");
    if (!simba::capi::valid_name(name)) return SIMBA_EINVAL;
    return start_task(out, c, name,
                      [work, ud](simba::engine::Term* t) { work(ud, simba::capi::handle_of(t)); });
  });
}

int simba_schedule(simba_task_t** out, simba_client_t* c, const char* name,
                   int64_t initial_delay_ms, int64_t period_ms, simba_work_fn run, void* ud) {
  return guarded([&]() -> int {
    if (!out) return fail(SIMBA_EINVAL, "simba_schedule: out is NULL");
    *out = nullptr;
    if (!c || !run) return fail(SIMBA_EINVAL, "simba_schedule: NULL argument");
    if (!simba::capi::valid_name(name)) return SIMBA_EINVAL;
    if (initial_delay_ms < 0) return fail(SIMBA_EINVAL, "simba_schedule: negative initial delay");
    if (period_ms <= 0) return fail(SIMBA_EINVAL, "simba_schedule: period_ms must be > 0");
    // One term's runs, on its work thread: wait, check, run, wait again. The
    // waits end early when the term is revoked, and then nothing more starts.
    return start_task(out, c, name, [run, ud, initial_delay_ms, period_ms](simba::engine::Term* t) {
      if (t->wait_revoked(initial_delay_ms)) return;
      for (;;) {
        if (!t->valid()) return;
        run(ud, simba::capi::handle_of(t));
        if (t->wait_revoked(period_ms)) return;
      }
    });
  });
}

int simba_group_join(simba_task_t** out, simba_client_t* c, const char* group, uint32_t partitions,
                     simba_work_fn work, void* ud) {
  return guarded([&]() -> int {
    if (!out) return fail(SIMBA_EINVAL, "simba_group_join: out is NULL");
    *out = nullptr;
    if (!c || !work) return fail(SIMBA_EINVAL, "simba_group_join: NULL argument");
    if (!simba::capi::valid_name(group)) return SIMBA_EINVAL;
    auto handle = std::make_unique<simba_task>();
    handle->client = c->impl;
    const int rc = result(simba::engine::Group::join(
        c->impl, group, partitions,
        [work, ud](simba::engine::Term* t) { work(ud, simba::capi::handle_of(t)); },
        &handle->group));
    if (rc != SIMBA_OK) return rc;
    *out = handle.release();
    return SIMBA_OK;
  });
}

int simba_task_stop(simba_task_t* t, simba_done_fn done, void* ud) {
  return guarded([&]() -> int {
    if (!t) return fail(SIMBA_EINVAL, "simba_task_stop: task is NULL");
    if (t->group) return result(t->group->stop(done_fn(done, ud)));
    return result(t->client->stop_election(t->impl, done_fn(done, ud)));
  });
}

int simba_task_step_down(simba_task_t* t, int64_t cooldown_ms, simba_done_fn done, void* ud) {
  return guarded([&]() -> int {
    if (!t) return fail(SIMBA_EINVAL, "simba_task_step_down: task is NULL");
    if (cooldown_ms < 0) return fail(SIMBA_EINVAL, "simba_task_step_down: negative cooldown");
    if (t->group) return result(t->group->step_down(simba::ms(cooldown_ms), done_fn(done, ud)));
    return result(t->client->step_down(t->impl, simba::ms(cooldown_ms), done_fn(done, ud)));
  });
}

int simba_task_close(simba_task_t* t) {
  return guarded([&]() -> int {
    if (!t) return SIMBA_OK;
    std::unique_ptr<simba_task> handle(t);
    if (handle->group) {
      handle->group->close();  // does not wait where it would wait for itself
      return SIMBA_OK;
    }
    // From a callback, leader work or the loop it only starts the stop, which
    // finishes on its own (the work's threads keep what they use alive).
    // Elsewhere it waits for the stop (the handover waits for the work up to
    // the term's deadline) and its callbacks; then every run of the work must
    // have returned before its handle goes.
    if (handle->client->free_election(handle->impl)) handle->impl->wait_for_work();
    return SIMBA_OK;
  });
}

}  // extern "C"
