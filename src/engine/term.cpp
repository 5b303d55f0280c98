#include "engine/term.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>

namespace simba::engine {

// One term per held lease, the core's TermState inside (ADR 0035): its members
// are ordered so that none pads (ADR 0024); with the allocator's header, 72
// bytes take a block of 80 (what only a lock needs is in LockTerm, ADR 0043).
// Its client is found through its queue (ADR 0042).
static_assert(sizeof(void*) != 8 || sizeof(Term) <= 72, "engine::Term grew past 72 bytes");
// A lock's kind sits in LockTerm's padding; only a permit's term pays for its id.
static_assert(sizeof(void*) != 8 || sizeof(LockTerm) <= 88, "engine::LockTerm grew past 88");
static_assert(sizeof(void*) != 8 || sizeof(PermitTerm) <= 96, "engine::PermitTerm grew past 96");

Term::~Term() {
  if (efd_ >= 0) close(efd_);
}

void Term::ended() {
  Parking& p = parking();
  std::lock_guard<std::mutex> lock(p.mu);
  if (ended_) return;
  ended_ = true;
  if (efd_ >= 0) {
    const uint64_t one = 1;
    (void)!write(efd_, &one, sizeof one);
  }
  p.cv.notify_all();
}

void Term::deliver_revoked(std::function<void()> then) {
  const simba::RevokeReason reason = revoked();
  std::vector<RevokedFn> fns;
  {
    std::lock_guard<std::mutex> lock(parking().mu);
    delivered_ = true;
    if (callbacks_) fns.swap(*callbacks_);
    callbacks_.reset();
  }
  // Nothing to run (a lock nobody listens to): no trip through the executor.
  if (fns.empty() && !then) return;
  retain();
  queue->post([this, reason, fns = std::move(fns), then = std::move(then)] {
    for (const RevokedFn& fn : fns) fn(this, reason);
    if (then) then();
    release();
  });
}

bool Term::add_on_revoked(RevokedFn fn) {
  std::unique_lock<std::mutex> lock(parking().mu);
  if (!delivered_) {
    if (!callbacks_) callbacks_ = std::make_unique<std::vector<RevokedFn>>();
    callbacks_->push_back(std::move(fn));
    return true;
  }
  lock.unlock();
  const simba::RevokeReason reason = revoked();
  retain();
  const bool posted = queue->post([this, fn = std::move(fn), reason] {
    fn(this, reason);
    release();
  });
  if (!posted) release();
  return posted;
}

bool Term::wait_revoked(int64_t timeout_ms) {
  using namespace std::chrono;
  const auto until = timeout_ms < 0 ? steady_clock::time_point::max()
                                    : steady_clock::now() + milliseconds(timeout_ms);
  Parking& p = parking();
  std::unique_lock<std::mutex> lock(p.mu);
  for (;;) {
    // An invalid term is over even before the loop gets to revoke it.
    if (ended_ || !valid()) return true;
    const auto left = remaining();
    auto wake = steady_clock::now() + duration_cast<steady_clock::duration>(left);
    if (until < wake) wake = until;
    if (steady_clock::now() >= until) return false;
    p.cv.wait_until(lock, wake);
  }
}

int Term::revoke_fd() {
  std::lock_guard<std::mutex> lock(parking().mu);
  if (efd_ < 0) {
    efd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (efd_ >= 0 && ended_) {
      const uint64_t one = 1;
      (void)!write(efd_, &one, sizeof one);
    }
  }
  return efd_;
}

}  // namespace simba::engine
