// Leader work as the ABI's simba_task_t sees it: one election whose terms run
// work (simba_run_while_leader, simba_schedule), or a partition group
// (engine/group.h). One interface, so that the C API does not branch on what a
// task is (ADR 0035).
#ifndef SIMBA_ENGINE_TASK_H
#define SIMBA_ENGINE_TASK_H

#include <memory>
#include <string>

#include "engine/client.h"

namespace simba::engine {

class Task {
 public:
  virtual ~Task() = default;
  // Hands every term over (handover order: revoke, the work returns, release),
  // then `done`.
  virtual Result stop(DoneFn done) = 0;
  // The same, then contends again after `cooldown`; `done` once released.
  virtual Result step_down(Duration cooldown, DoneFn done) = 0;
  // Stops, and where the caller may block waits until the stop completed and
  // every run of the work returned (then the work's user data may be freed).
  // From a callback, leader work or the loop it only starts the stop.
  virtual void close() = 0;
  // Stops without waiting (simba_task_close_async): `last` runs on the callback
  // executor once the stop completed, every run of the work returned and every
  // other callback of the task ran (ADR 0041).
  virtual void close_async(LastFn last) = 0;
};

// A task of one election on `name` whose every term runs `work` on a thread of
// its own.
Result start_leader_task(const std::shared_ptr<Client>& client, const std::string& name,
                         WorkFn work, std::shared_ptr<Task>* out);

// The work of simba_schedule: on each term, `run` after `initial_delay`, then
// every `period`, while the term is valid; the waits end early at the
// revocation, and then nothing more starts.
WorkFn scheduled_work(Duration initial_delay, Duration period, WorkFn run);

}  // namespace simba::engine

#endif
