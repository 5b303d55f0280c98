// The Node's contenders: elections and locks, their acquire attempts and the
// answers, the per-name queue of locks, stop and step-down. What happens once a
// term is won (adoption, handover, release) is in node_handover.cpp.
#include <algorithm>
#include <utility>

#include "core/log_level.h"
#include "core/node.h"
#include "core/timing.h"

namespace simba {

// ---------------------------------------------------------------------------
// The per-name index

ContenderId Node::front_of(std::string_view name) const {
  const Contender* oldest = by_name_.first(name);
  return oldest ? oldest->id : 0;
}

void Node::list_by_name(Contender& c) { by_name_.insert(&c); }

void Node::unlist_by_name(Contender& c) { by_name_.erase(&c); }

// ---------------------------------------------------------------------------
// New contenders

void Node::link(Contender& c) {
  c.id = next_contender_++;
  contenders_.insert(&c);
  if (!is_permit(c.kind)) list_by_name(c);  // permits never queue (ADR 0046)
}

bool Node::add_election(Contender& c, TimePoint now, bool with_work) {
  if (closing_ || c.id != 0 || c.kind != ContenderKind::kElection || front_of(c.name)) return false;
  link(c);
  c.with_work = with_work;
  c.state = State::kCandidate;
  attempt(c, now);
  return true;
}

bool Node::add_lock(Contender& c, TimePoint give_up_at, bool try_once, TimePoint now) {
  if (closing_ || c.id != 0 || c.kind == ContenderKind::kElection) return false;
  if (c.kind == ContenderKind::kSemaphore && c.size() == 0) return false;
  const ContenderId front = is_permit(c.kind) ? 0 : front_of(c.name);
  const bool queued = front != 0;
  if (queued && find(front)->kind == ContenderKind::kElection) return false;
  link(c);
  c.set_give_up_at(give_up_at);
  c.try_once = try_once;
  if (queued) {
    c.state = State::kWaiting;
    if (try_once) {
      fail_lock(c, LockFailure::kBusy, now);
    } else {
      arm_give_up(c);
    }
    return true;
  }
  c.state = State::kCandidate;
  attempt(c, now);
  return true;
}

// ---------------------------------------------------------------------------
// Attempts

void Node::attempt(Contender& c, TimePoint now) {
  if (c.state != State::kCandidate) return;
  if (c.kind != ContenderKind::kElection && now >= c.give_up_at()) {
    fail_lock(c, LockFailure::kTimeout, now);
    return;
  }
  if (!session_usable()) {
    // Contends again when a session opens; a lock still gives up on time.
    arm_give_up(c);
    return;
  }
  if (wait_for_unanswered(c, now)) return;
  if (acquires_in_flight_ >= kMaxAcquiresInFlight) {
    // A burst (thousands of elections at once): wait for a free slot rather
    // than queue on a backend that answers one statement at a time, where the
    // attempts would time out waiting and win leases nobody adopts.
    if (!c.attempt_queued) {
      c.attempt_queued = true;
      attempt_queue_.push_back(c.id);
    }
    arm_give_up(c);
    return;
  }
  c.attempt_queued = false;
  ++acquires_in_flight_;
  c.set_attempt(new_call(CallKind::kAcquire, session_id_, call_timeout(), now));
  Call& call = calls_.at(c.attempt());
  call.name = c.name;
  call.contender = c.id;
  call.entry.kind = permit_kind_of(c.kind);
  c.state = State::kAcquiring;
  c.released_in_flight = false;
  ++acquires_;
  arm_give_up(c);
  if (!is_permit(c.kind)) {
    fx_.send_acquire(c.attempt(), session_id_, call.name, call_timeout());
    return;
  }
  PermitAsk ask;
  ask.kind = call.entry.kind;
  ask.size = c.size();
  ask.intent = c.intent();  // kept by the backend while this writer waits
  ask.leave_intent = c.kind == ContenderKind::kWrite && !c.try_once;
  fx_.send_acquire_permit(c.attempt(), session_id_, call.name, ask, call_timeout());
}

bool Node::wait_for_unanswered(Contender& c, TimePoint now) {
  // An acquire of this name that this node gave up on (timed out, or its
  // contender stopped or gave up) may still run on the backend: wait for its
  // answer (a backend ends a call the node abandoned at its timeout, or fails
  // it when the connection resets; a late win is released then) before sending
  // another, but not past two call timeouts after it was sent. Otherwise the
  // new acquire could find the name held by this very session.
  c.set_unanswered(0);
  c.attempt_when_answered = false;
  // Permits may be held several at once by one session: no wait (ADR 0046).
  if (is_permit(c.kind)) return false;
  auto u = unanswered_by_name_.find(c.name.view());
  if (u == unanswered_by_name_.end()) return false;
  auto late = calls_.find(u->second);
  if (late != calls_.end() && late->second.session == session_id_ &&
      now < late->second.sent_at + 2 * call_timeout()) {
    c.set_unanswered(u->second);
    c.attempt_when_answered = true;
    schedule_attempt(c, late->second.sent_at + 2 * call_timeout());
    return true;
  }
  unanswered_by_name_.erase(u);  // answered, forgotten, or of a session that ended
  return false;
}

void Node::start_watching(Contender& c) {
  if (c.watching) return;
  if (is_permit(c.kind)) {
    // Every permit contender of the resource is woken by its broadcast.
    const std::string key = permit_resource(permit_kind_of(c.kind), c.name);
    std::vector<ContenderId>& ids = permit_watchers_[key];
    c.watching = true;
    ids.push_back(c.id);
    if (ids.size() == 1) fx_.watch(key);
    return;
  }
  for (const Contender* o = by_name_.first(c.name); o; o = o->next_of_name) {
    if (o->watching) return;  // the name's queue watches it already
  }
  c.watching = true;
  const std::string name = c.name.str();
  // A release of this node's before the watch is echoed to nobody here: the
  // next broadcast heard is someone else's (ADR 0040).
  own_release_at_.erase(name);
  fx_.watch(name);
}

void Node::stop_watching(Contender& c) {
  if (!c.watching) return;
  c.watching = false;
  if (is_permit(c.kind)) {
    const std::string key = permit_resource(permit_kind_of(c.kind), c.name);
    auto w = permit_watchers_.find(key);
    if (w == permit_watchers_.end()) return;
    w->second.erase(std::remove(w->second.begin(), w->second.end(), c.id), w->second.end());
    if (w->second.empty()) {
      permit_watchers_.erase(w);
      fx_.unwatch(key);
    }
    return;
  }
  fx_.unwatch(c.name.str());
}

void Node::arm_give_up(Contender& c) {
  disarm(c);
  if (c.give_up_at() != TimePoint::max()) arm(c, c.give_up_at());
}

void Node::schedule_attempt(Contender& c, TimePoint at) { arm(c, std::min(at, c.give_up_at())); }

void Node::schedule_retry(Contender& c, TimePoint now, Duration holder_remaining) {
  const Duration jitter_max = cfg_.retry_jitter();
  Duration jitter{0};
  if (jitter_max > Duration::zero()) {
    std::uniform_int_distribution<int64_t> dist(0, jitter_max.count() - 1);
    jitter = Duration(dist(rng_));
  }
  Duration delay = candidate_retry_delay(cfg_, jitter);
  if (holder_remaining >= Duration::zero()) {
    // Try again right after the holder's session would expire, in case it died,
    // plus an eighth of the jitter: candidates that heard the same holder
    // remaining do not all call the backend at the same instant.
    delay = std::min(delay, std::max(holder_remaining + cfg_.margin, cfg_.margin) + jitter / 8);
  }
  schedule_attempt(c, now + delay);
}

// Sends the attempts that waited for a free slot, oldest first.
void Node::pump_attempts(TimePoint now) {
  while (acquires_in_flight_ < kMaxAcquiresInFlight && !attempt_queue_.empty()) {
    const ContenderId id = attempt_queue_.front();
    attempt_queue_.pop_front();
    Contender* c = find(id);
    if (!c || !c->attempt_queued) continue;  // gone, or it went out another way
    c->attempt_queued = false;
    if (c->state == State::kCandidate) attempt(*c, now);
  }
}

void Node::abandon_attempt(Contender& c) {
  if (!c.attempt()) return;
  --acquires_in_flight_;
  if (auto it = calls_.find(c.attempt()); it != calls_.end()) {
    it->second.abandoned = true;
    if (it->second.session == session_id_ && !is_permit(c.kind)) {
      unanswered_by_name_[c.name.str()] = c.attempt();
    }
  }
  c.set_attempt(0);
}

// ---------------------------------------------------------------------------
// Acquire answers

void Node::on_acquire(CallId id, const AcquireReply& reply, TimePoint now) {
  handle_acquire(id, reply, now);
  pump_attempts(now);
}

void Node::handle_acquire(CallId id, const AcquireReply& reply, TimePoint now) {
  const std::optional<Call> call = take_call(id);
  if (!call) return;
  Contender* c = find(call->contender);
  const bool current = !call->abandoned && c && c->state == State::kAcquiring && c->attempt() == id;
  if (!current) {
    acquire_answered_late(id, *call, reply, now);
    return;
  }
  c->set_attempt(0);
  --acquires_in_flight_;
  c->state = State::kCandidate;
  const bool released = c->released_in_flight;
  c->released_in_flight = false;
  if (c->stopping) {
    acquire_of_stopped_answered(*c, *call, reply, now);
    return;
  }
  switch (reply.outcome) {
    case Outcome::kOk:
      acquire_won(*c, *call, reply, now);
      return;
    case Outcome::kRefused:
      // A semaphore of another size: say which, and give up (ADR 0046).
      if (c->kind == ContenderKind::kSemaphore) c->set_size(reply.size);
      fail_lock(*c, LockFailure::kRefused, now);
      return;
    case Outcome::kHeld:
      // A waiting writer's intent, passed on its next attempts.
      if (c->kind == ContenderKind::kWrite && reply.permit != 0) c->set_intent(reply.permit);
      if (c->try_once) {
        fail_lock(*c, LockFailure::kBusy, now);
        return;
      }
      start_watching(*c);  // until it leads, cools down or leaves
      if (released) {
        attempt(*c, now);  // the release may have come after this acquire ran
      } else {
        schedule_retry(*c, now, reply.holder_remaining);
      }
      return;
    case Outcome::kExpired:
      fail_or_retry(*c, LockFailure::kBackend, now);
      if (call->session == session_id_ && !closing_) {
        session_ended(RevokeReason::kSessionExpired, now);
      }
      return;
    case Outcome::kError:
    case Outcome::kTimeout:
      fail_or_retry(
          *c, reply.outcome == Outcome::kTimeout ? LockFailure::kTimeout : LockFailure::kBackend,
          now);
      return;
  }
}

void Node::acquire_answered_late(CallId id, const Call& call, const AcquireReply& reply,
                                 TimePoint now) {
  // A late reply to an abandoned attempt releases what it won, unless what it
  // names is a term this node holds (a backend that answers a re-acquire by
  // the holding session with the current token): that would free a live term.
  if (call.entry.kind != PermitKind::kLease) {
    permit_answered_late(call, reply, now);
    return;
  }
  if (reply.outcome == Outcome::kOk) {
    bool live_term = false;
    contenders_.for_each([&](const Contender* other) {
      if (other->term && !is_permit(other->kind) && other->term->session_id() == call.session &&
          other->term->name() == call.name && other->term->token() == reply.token) {
        live_term = true;
      }
    });
    if (!live_term) release_lease(call.session, call.name, reply.token, 0, now);
  }
  answered_late(call.name, id, now);
}

// Stopped while this attempt was in flight (see stop()): what it won is
// released before the stop completes.
void Node::acquire_of_stopped_answered(Contender& c, const Call& call, const AcquireReply& reply,
                                       TimePoint now) {
  if (reply.outcome == Outcome::kOk && reply.token > 0) {
    c.state = State::kReleasing;  // without a term: on_release finishes it
    release_lease(call.session, call.name, reply.token, c.id, now);
  } else {
    finish(c, now);
  }
}

// A term is adopted only from the current attempt of a session still usable,
// and only with a token above every token this session released for the name.
void Node::acquire_won(Contender& c, const Call& call, const AcquireReply& reply, TimePoint now) {
  const uint64_t token = reply.token;
  const bool same_session = call.session == session_id_ && session_usable();
  // A permit is known by its id, which grows with every grant of its
  // resource; a reader's token is an epoch, which may repeat or be 0.
  const bool permit = call.entry.kind != PermitKind::kLease;
  const uint64_t id = permit ? reply.permit : token;
  auto rel = released_.find(permit ? permit_resource(call.entry.kind, call.name) : call.name);
  const bool fresh = rel == released_.end() || id > rel->second;
  if (same_session && fresh && id > 0) {
    if (permit) c.set_permit(reply.permit);  // the grant deleted a writer's intent
    adopt(c, token, now);
    return;
  }
  fx_.log(kLogWarn, "not adopting lease " + call.name + " token " + std::to_string(token) +
                        (same_session ? " (token not above a released one)" : " (session ended)"));
  release_lease(call.session, call.name, token, 0, now, Duration::zero(),
                EntryRef{call.entry.kind, permit ? reply.permit : 0});
  if (permit && c.kind == ContenderKind::kWrite) c.set_intent(0);  // deleted by the grant
  fail_or_retry(c, LockFailure::kBackend, now);
}

void Node::permit_answered_late(const Call& call, const AcquireReply& reply, TimePoint now) {
  EntryRef won{call.entry.kind, reply.permit};
  if (reply.outcome == Outcome::kHeld) {
    if (reply.permit == 0) return;
    won.kind = PermitKind::kIntent;
    // An intent a writer of this session still waits with is its own.
    bool kept = false;
    contenders_.for_each([&](const Contender* o) {
      kept = kept || (o->kind == ContenderKind::kWrite && o->intent() == reply.permit &&
                      o->name == call.name && call.session == session_id_);
    });
    if (kept) return;
  } else if (reply.outcome != Outcome::kOk || reply.permit == 0) {
    return;
  }
  release_lease(call.session, call.name, won.kind == PermitKind::kIntent ? 0 : reply.token, 0, now,
                Duration::zero(), won);
}

void Node::withdraw_intent(Contender& c, TimePoint now) {
  const uint64_t intent = c.intent();
  if (intent == 0) return;
  c.set_intent(0);
  // The close frees it with the session; an ended session took it along.
  if (closing_ || !session_usable()) return;
  release_lease(session_id_, c.name.str(), 0, 0, now, Duration::zero(),
                EntryRef{PermitKind::kIntent, intent});
}

void Node::fail_or_retry(Contender& c, LockFailure why, TimePoint now) {
  if (c.try_once) {
    fail_lock(c, why, now);
  } else {
    schedule_retry(c, now, Duration(-1));
  }
}

void Node::answered_late(const std::string& name, CallId call, TimePoint now) {
  auto u = unanswered_by_name_.find(name);
  if (u == unanswered_by_name_.end() || u->second != call) return;
  unanswered_by_name_.erase(u);
  std::vector<ContenderId> waiting;  // a copy: attempt() may change the queue
  for (const Contender* c = by_name_.first(name); c; c = c->next_of_name) {
    waiting.push_back(c->id);
  }
  for (ContenderId cid : waiting) {
    Contender* c = find(cid);
    if (!c || c->unanswered() != call) continue;
    c->set_unanswered(0);
    if (c->attempt_when_answered) {
      c->attempt_when_answered = false;
      attempt(*c, now);
    }
  }
}

// ---------------------------------------------------------------------------
// Leaving: a lock that gives up, a contender that stops

void Node::fail_lock(Contender& c, LockFailure why, TimePoint now) { forget(c, why, now); }

void Node::finish(Contender& c, TimePoint now) { forget(c, std::nullopt, now); }

void Node::forget(Contender& c, std::optional<LockFailure> failure, TimePoint now) {
  const ContenderId id = c.id;
  const LeaseName name = c.name;  // outlives the erase below
  abandon_attempt(c);
  disarm(c);
  if (!failure) ack_step_downs(c);
  withdraw_intent(c, now);  // a writer that gives up or stops waiting
  const bool permit = is_permit(c.kind);
  const bool was_front = !permit && front_of(name) == id;
  if (!permit) unlist_by_name(c);
  if (permit) stop_watching(c);
  contenders_.erase(id);
  if (c.watching) {
    // The next lock queued on the name inherits the watch: it contends now.
    c.watching = false;
    if (Contender* next = by_name_.first(name)) {
      next->watching = true;
    } else {
      fx_.unwatch(name.str());
    }
  }
  // The node no longer holds `c`: its owner may free it in the report.
  if (failure) {
    fx_.lock_failed(c, *failure);
  } else {
    fx_.stopped(c);
  }
  if (was_front) activate_next(name, now);
}

void Node::activate_next(std::string_view name, TimePoint now) {
  Contender* next = find(front_of(name));
  if (next && next->state == State::kWaiting) {
    next->state = State::kCandidate;
    attempt(*next, now);
  }
}

// ---------------------------------------------------------------------------
// Commands and timers

bool Node::stop(Contender& contender, TimePoint now) {
  if (!added(contender)) return false;
  Contender* c = &contender;
  if (c->stopping || closing_) return false;
  c->stopping = true;
  switch (c->state) {
    case State::kLeader:
      begin_handover(*c, RevokeReason::kStopped, now);
      break;
    case State::kDraining:
    case State::kReleasing:
      break;  // a step-down's handover is finishing; it ends in finish()
    case State::kAcquiring:
      if (c->kind == ContenderKind::kElection) {
        // Wait for the attempt's answer (at most one call timeout) and release
        // what it won: when the stop completes, the name is free on the backend
        // too, and this client's next acquire of it does not find it held.
        break;
      }
      [[fallthrough]];
    case State::kCandidate:
    case State::kCooldown:
    case State::kWaiting:
      if (c->kind != ContenderKind::kElection) {
        fail_lock(*c, LockFailure::kCanceled, now);
      } else {
        finish(*c, now);
      }
      break;
  }
  return true;
}

bool Node::step_down(Contender& contender, Duration cooldown, TimePoint now) {
  if (!added(contender)) return false;
  Contender* c = &contender;
  if (c->stopping || closing_ || c->kind != ContenderKind::kElection) return false;
  c->set_cooldown_until(now + cooldown);
  switch (c->state) {
    case State::kLeader:
      ++c->pending_step_downs;
      begin_handover(*c, RevokeReason::kSteppedDown, now);
      break;
    case State::kDraining:
    case State::kReleasing:
      ++c->pending_step_downs;  // acknowledged when the handover under way ends
      break;
    default:
      abandon_attempt(*c);
      stop_watching(*c);
      c->state = State::kCooldown;
      arm(*c, c->cooldown_until());
      fx_.stepped_down(*c);
      break;
  }
  return true;
}

void Node::on_contender_timer(Contender& c, TimePoint now) {
  if (c.state == State::kDraining) {
    // The deadline at the stop passed and the work is still running: the lease
    // may not be held for it any longer.
    fx_.log(kLogWarn, "the work of " + c.name +
                          " did not exit by the term's deadline; "
                          "releasing without it");
    release_term(c, now);
    return;
  }
  if (c.kind != ContenderKind::kElection && c.state != State::kLeader &&
      c.state != State::kReleasing && now >= c.give_up_at()) {
    fail_lock(c, LockFailure::kTimeout, now);
    return;
  }
  if (c.state == State::kCooldown) c.state = State::kCandidate;
  if (c.state == State::kCandidate) attempt(c, now);
}

void Node::on_released(const std::string& name, TimePoint now) {
  // The echo of this node's own release: the others should get the first go
  // (a step-down without cooldown, or work that returned, would otherwise win
  // its lease straight back); this node retries at its normal pace.
  if (auto own = own_release_at_.find(name); own != own_release_at_.end()) {
    const bool echo = now - own->second <= call_timeout();
    own_release_at_.erase(own);
    if (echo) return;
  }
  if (auto w = permit_watchers_.find(name); w != permit_watchers_.end()) {
    // A permit resource: every contender of it here may go now (ADR 0046).
    const std::vector<ContenderId> ids = w->second;  // attempt() may change it
    for (ContenderId id : ids) {
      Contender* p = find(id);
      if (p && p->state == State::kCandidate) {
        attempt(*p, now);
      } else if (p && p->state == State::kAcquiring) {
        p->released_in_flight = true;
      }
    }
    return;
  }
  Contender* c = find(front_of(name));
  if (!c) return;
  if (c->state == State::kCandidate) {
    attempt(*c, now);
  } else if (c->state == State::kAcquiring) {
    c->released_in_flight = true;
  }
}

}  // namespace simba
