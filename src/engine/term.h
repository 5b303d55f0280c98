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
struct LockTerm;

struct Term : simba::TermState {
  using RevokedFn = std::function<void(Term*, simba::RevokeReason)>;

  // An election's term (a lock's is a LockTerm, below).
  Term(simba::LeaseName name, uint64_t token, std::shared_ptr<simba::SessionClock> session,
       simba::engine::QueueRef q)
      : Term(std::move(name), token, std::move(session), std::move(q), false) {}
  ~Term() override;

  // The lock's part of a lock's term; null for an election's.
  LockTerm* as_lock();
  const LockTerm* as_lock() const;

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
  const bool is_lock;
  // Loop thread: its onElected was rejected by the executor, so its onRevoked
  // is not delivered either.
  bool unannounced = false;

 protected:
  Term(simba::LeaseName name, uint64_t token, std::shared_ptr<simba::SessionClock> session,
       simba::engine::QueueRef q, bool is_lock)
      : TermState(std::move(name), token, std::move(session)),
        queue(std::move(q)),
        is_lock(is_lock) {}
};

// A lock's term: what only a lock needs, so that an election's term, one per
// held lease, stays 72 bytes (a block of 80; ADR 0043). A permit's term (ADR
// 0046) is a PermitTerm, below.
struct LockTerm : Term {
  LockTerm(simba::LeaseName name, uint64_t token, std::shared_ptr<simba::SessionClock> session,
           simba::engine::QueueRef q, simba::ContenderId contender,
           simba::ContenderKind kind = simba::ContenderKind::kLock)
      : Term(std::move(name), token, std::move(session), std::move(q), true),
        contender(contender),
        kind(kind) {}

  // Its lock's id in the node (the lock is found by it at the release).
  const simba::ContenderId contender;
  // The references the caller holds (the one simba_lock_acquire returned,
  // plus simba_term_retain). When the last goes without simba_lock_release,
  // the lock is released all the same (ADR 0015).
  std::atomic<int> caller_refs{0};
  std::atomic<bool> release_requested{false};
  // kLock, or a permit's kind: kSemaphore, kRead, kWrite (in the padding).
  const simba::ContenderKind kind;
};

// A permit of a semaphore or a read/write lock: a lock's term with the
// permit's id (its entry on the backend is (kind, name, permit)).
struct PermitTerm final : LockTerm {
  PermitTerm(simba::LeaseName name, uint64_t token, std::shared_ptr<simba::SessionClock> session,
             simba::engine::QueueRef q, simba::ContenderId contender, simba::ContenderKind kind,
             uint64_t permit)
      : LockTerm(std::move(name), token, std::move(session), std::move(q), contender, kind),
        permit(permit) {}
  const uint64_t permit;
};

inline LockTerm* Term::as_lock() { return is_lock ? static_cast<LockTerm*>(this) : nullptr; }
inline const LockTerm* Term::as_lock() const {
  return is_lock ? static_cast<const LockTerm*>(this) : nullptr;
}

}  // namespace simba::engine

#endif
