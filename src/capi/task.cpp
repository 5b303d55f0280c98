// Leader work: simba_run_while_leader, simba_schedule and the task handle.
#include "capi/capi.h"

using simba::capi::done_fn;
using simba::capi::fail;
using simba::capi::guarded;
using simba::capi::result;

namespace {

// The ABI's work function as the engine's.
simba::engine::WorkFn work_fn(simba_work_fn work, void* ud) {
  return [work, ud](simba::engine::Term* t) { work(ud, simba::capi::handle_of(t)); };
}

// Wraps a task the engine started (`rc` its code) in a handle.
int hand_out(simba_task_t** out, int rc, std::shared_ptr<simba::engine::Task> task) {
  if (rc != SIMBA_OK) return rc;
  auto handle = std::make_unique<simba_task>();
  handle->impl = std::move(task);
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
    std::shared_ptr<simba::engine::Task> task;
    const int rc =
        result(simba::engine::start_leader_task(c->impl, name, work_fn(work, ud), &task));
    return hand_out(out, rc, std::move(task));
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
    std::shared_ptr<simba::engine::Task> task;
    const int rc = result(simba::engine::start_leader_task(
        c->impl, name,
        simba::engine::scheduled_work(simba::ms(initial_delay_ms), simba::ms(period_ms),
                                      work_fn(run, ud)),
        &task));
    return hand_out(out, rc, std::move(task));
  });
}

int simba_group_join(simba_task_t** out, simba_client_t* c, const char* group, uint32_t partitions,
                     simba_work_fn work, void* ud) {
  return guarded([&]() -> int {
    if (!out) return fail(SIMBA_EINVAL, "simba_group_join: out is NULL");
    *out = nullptr;
    if (!c || !work) return fail(SIMBA_EINVAL, "simba_group_join: NULL argument");
    if (!simba::capi::valid_name(group)) return SIMBA_EINVAL;
    std::shared_ptr<simba::engine::Group> joined;
    const int rc =
        result(simba::engine::Group::join(c->impl, group, partitions, work_fn(work, ud), &joined));
    return hand_out(out, rc, std::move(joined));
  });
}

int simba_task_stop(simba_task_t* t, simba_done_fn done, void* ud) {
  return guarded([&]() -> int {
    if (!t) return fail(SIMBA_EINVAL, "simba_task_stop: task is NULL");
    return result(t->impl->stop(done_fn(done, ud)));
  });
}

int simba_task_step_down(simba_task_t* t, int64_t cooldown_ms, simba_done_fn done, void* ud) {
  return guarded([&]() -> int {
    if (!t) return fail(SIMBA_EINVAL, "simba_task_step_down: task is NULL");
    if (cooldown_ms < 0) return fail(SIMBA_EINVAL, "simba_task_step_down: negative cooldown");
    return result(t->impl->step_down(simba::ms(cooldown_ms), done_fn(done, ud)));
  });
}

int simba_task_close_async(simba_task_t* t, simba_done_fn done, void* ud) {
  return guarded([&]() -> int {
    if (!t) return fail(SIMBA_EINVAL, "simba_task_close_async: task is NULL");
    t->impl->close_async(simba::capi::last_fn(done, ud, [t] { delete t; }));
    return SIMBA_OK;
  });
}

int simba_task_close(simba_task_t* t) {
  return guarded([&]() -> int {
    if (!t) return SIMBA_OK;
    std::unique_ptr<simba_task> handle(t);
    handle->impl->close();
    return SIMBA_OK;
  });
}

}  // extern "C"
