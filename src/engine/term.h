// A term as the engine keeps it (the C ABI hands it out as simba_term_t;
// capi/capi.h converts): the core's TermState, which accessors read lock-free,
// plus what waits on the revocation (an eventfd, a condition variable,
// on_revoked callbacks). One object and one reference count (ADR 0035).
#ifndef SIMBA_ENGINE_TERM_H
#define SIMBA_ENGINE_TERM_H

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/node.h"
#include "core/term_state.h"
#include "engine/executor.h"
#include "engine/parking.h"

namespace simba::engine {

class Client;

struct Term final : simba::TermState {
  using RevokedFn = std::function<void(Term*, simba::RevokeReason)>;

  Term(simba::LeaseName name, uint64_t token, std::shared_ptr<simba::SessionClock> session,
       simba::engine::QueueRef q, simba::ContenderId contender, bool is_lock)
      : TermState(std::move(name), token, std::move(session)),
        queue(std::move(q)),
        contender(contender),
        is_lock(is_lock) {}
  ~Term() override;

  // Loop thread: hand the on_revoked callbacks to the queue, before the listener's.
  void deliver_revoked(std::function<void()> then);
  // Any thread. False if the client is gone and the term was already delivered.
  bool add_on_revoked(RevokedFn fn);
  // Any thread: true once revoked (or invalid) within the timeout (<0: no bound).
  bool wait_revoked(int64_t timeout_ms);
  // Any thread: the eventfd, made on first use; -1 if it could not be made.
  int revoke_fd();

  const simba::engine::QueueRef queue;
  // Its client, found through its queue (ADR 0042); empty once it is gone.
  std::shared_ptr<Client> client() const { return queue->executors()->client(); }
  const simba::ContenderId contender;

 private:
  // Loop thread, inside the node's revoke(): wake waiters, make the fd readable.
  void ended() override;

  // The members below, up to the next section, are guarded by the term's
  // parking lock (engine/parking.h) and waited for on its condition variable: a
  // term is mostly never waited on, and a mutex and a condition variable of its
  // own were 88 of its bytes.
  Parking& parking() const { return parking_for(this); }
  // Made by the first simba_term_on_revoked: most terms have none (ADR 0024).
  std::unique_ptr<std::vector<RevokedFn>> callbacks_;
  int efd_ = -1;
  bool ended_ = false;
  bool delivered_ = false;

 public:
  // Lock terms: the references the caller holds (the one simba_lock_acquire
  // returned, plus simba_term_retain). When the last goes without
  // simba_lock_release, the lock is released all the same (ADR 0015). Here,
  // beside the narrow members, so that none pads: 88 bytes, a block of 96.
  std::atomic<int> caller_refs{0};
  std::atomic<bool> release_requested{false};
  const bool is_lock;
  // Loop thread: its onElected was rejected by the executor, so its onRevoked
  // is not delivered either.
  bool unannounced = false;
};

}  // namespace simba::engine

#endif
