// The Node's terms: adoption, loss, and the handover order of a stop or
// step-down (revoke, wait for the work, release with the token, onRevoked).
#include <algorithm>
#include <iterator>
#include <utility>

#include "core/log_level.h"
#include "core/node.h"
#include "core/timing.h"

namespace simba {

void Node::adopt(Contender& c, uint64_t token, TimePoint now) {
  (void)now;
  stop_watching(c);  // a leader needs no broadcast of its own name
  c.term = fx_.new_term(c, token, session_clock_);
  c.state = State::kLeader;
  c.work_running = c.with_work;
  c.set_adopted_before(next_call_);
  ++terms_;
  disarm(c);
  fx_.elected(c, c.term);
}

// A term lost any other way than a stop or step-down (deadline, take-over,
// session expiry) is not waited for: it is revoked and reported at once.
void Node::lose_term(Contender& c, RevokeReason reason, TimePoint now) {
  TermRef term = std::move(c.term);
  term->revoke(reason);  // ends it: whoever waits on it wakes now
  ++metrics_.revocations[static_cast<int>(term->revoked())];
  fx_.revoked(c, term);
  after_term(c, now);
}

void Node::begin_handover(Contender& c, RevokeReason reason, TimePoint now) {
  // The lease stays held for the work at most until the local deadline as it
  // is at the stop: later renewals do not extend the wait.
  const TimePoint deadline_at_stop = session_clock_ ? session_clock_->deadline() : now;
  c.term->revoke(reason);  // ends it: whoever waits on it wakes now
  c.set_handover_started(now);
  disarm(c);
  if (c.work_running) {
    c.state = State::kDraining;
    arm(c, std::max(now, deadline_at_stop));
    return;
  }
  release_term(c, now);
}

// The work exited (or may no longer be waited for): release with the token.
// While the node closes, the session's close is the release.
void Node::release_term(Contender& c, TimePoint now) {
  disarm(c);
  c.state = State::kReleasing;
  if (closing_) {
    maybe_send_close(now);
    return;
  }
  release_lease(c.term->session_id(), c.name.str(), c.term->token(), c.id, now, Duration::zero(),
                EntryRef{permit_kind_of(c.kind), c.permit()});
}

void Node::work_done(Contender& c, uint64_t token, TimePoint now) {
  if (!added(c) || !c.term || c.term->token() != token || !c.work_running) return;
  c.work_running = false;
  if (c.state == State::kDraining) {
    release_term(c, now);
  } else if (c.state == State::kLeader) {
    // The work is done with the lease: hand it over, then contend again.
    begin_handover(c, RevokeReason::kSteppedDown, now);
  }
}

void Node::finish_handover(Contender& c, TimePoint now) {
  TermRef term = std::move(c.term);
  ++metrics_.revocations[static_cast<int>(term->revoked())];
  metrics_.handover.observe(now - c.handover_started());
  fx_.revoked(c, term);
  after_term(c, now);
}

// After a term ended: stop, cool down, or contend again.
void Node::after_term(Contender& c, TimePoint now) {
  ack_step_downs(c);
  if (c.stopping || c.kind != ContenderKind::kElection) {
    finish(c, now);
    return;
  }
  if (c.cooldown_until() > now) {
    c.state = State::kCooldown;
    arm(c, c.cooldown_until());
    return;
  }
  c.state = State::kCandidate;
  schedule_retry(c, now, Duration(-1));
}

void Node::ack_step_downs(Contender& c) {
  for (; c.pending_step_downs > 0; --c.pending_step_downs) fx_.stepped_down(c);
}

// ---------------------------------------------------------------------------
// Releases

CallId Node::release_lease(const std::string& session, const std::string& name, uint64_t token,
                           ContenderId handover, TimePoint now, Duration timeout, EntryRef entry) {
  const bool permit = entry.kind != PermitKind::kLease;
  if (session == session_id_ && !permit) {
    uint64_t& high = released_[name];
    high = std::max(high, token);
    own_release_at_[name] = now;
    forget_old_own_releases(now);
  } else if (session == session_id_ && entry.kind != PermitKind::kIntent) {
    // By permit id (a reader's token repeats); no echo rule: a release of a
    // permit should wake this node's other contenders of its resource.
    uint64_t& high = released_[permit_resource(entry.kind, name)];
    high = std::max(high, entry.permit);
  }
  if (timeout <= Duration::zero()) timeout = call_timeout();
  const CallId id = new_call(CallKind::kRelease, session, timeout, now);
  Call& call = calls_.at(id);
  call.name = name;
  call.token = token;
  call.entry = entry;
  call.contender = handover;
  ++releases_;
  if (permit) {
    fx_.send_release_permit(id, session, name, entry, token, timeout);
  } else {
    fx_.send_release(id, session, name, token, timeout);
  }
  return id;
}

void Node::forget_old_own_releases(TimePoint now) {
  // The echo comes only to a node that watches the name (ADR 0040): most
  // entries are never taken back by one. Past a call timeout none is an echo.
  if (own_release_at_.size() < own_release_prune_at_) return;
  for (auto it = own_release_at_.begin(); it != own_release_at_.end();) {
    it = now - it->second > call_timeout() ? own_release_at_.erase(it) : std::next(it);
  }
  own_release_prune_at_ = std::max<size_t>(64, 2 * own_release_at_.size());
}

void Node::on_release(CallId id, const DoneReply& reply, TimePoint now) {
  const std::optional<Call> call = take_call(id);
  if (!call) return;
  const bool done = reply.outcome == Outcome::kOk || reply.outcome == Outcome::kExpired;
  if (call->abandoned) {
    // A late answer: the release ran after all, so its retry has nothing to do.
    if (done) drop_release_retry(find_release_retry(call->name, call->token, call->entry));
    return;
  }
  if (done) {
    drop_release_retry(call->retry);
  } else {
    release_failed(id, *call, reply, now);
  }
  // The handover does not wait for the retries: the term is revoked already,
  // and the token keeps a retry from freeing a later term.
  if (!call->contender) return;
  Contender* c = find(call->contender);
  if (!c || c->state != State::kReleasing) return;
  if (!c->term) {
    finish(*c, now);  // stopped while acquiring; what the attempt won is released
  } else if (c->term->token() == call->token) {
    finish_handover(*c, now);
  }
}

// A failed release leaves the lease held until the session expires, turning
// a handover into a failover: it is sent again, with its token, on a later
// call (the backends make a fresh connection after a cut or a timeout), while
// this session may still hold the lease: live, not closing (the close frees
// every lease), before its local deadline.
void Node::release_failed(CallId id, const Call& call, const DoneReply& reply, TimePoint now) {
  const std::string what = "release of " + call.name + " token " + std::to_string(call.token) +
                           " failed (" + outcome_name(reply.outcome) +
                           (reply.error.empty() ? "" : ": " + reply.error) + ")";
  uint64_t rid = call.retry ? call.retry : find_release_retry(call.name, call.token, call.entry);
  auto it = release_retries_.find(rid);
  // Not for another session, nor once the session is no longer usable, nor
  // for a retry dropped while in flight (the lease was seen free, or closed).
  if (call.session != session_id_ || !session_usable() ||
      (call.retry && it == release_retries_.end())) {
    drop_release_retry(rid);
    if (call.session == session_id_ && !closing_) {
      fx_.log(kLogWarn, what + "; its session's expiry frees it");
    }
    return;
  }
  if (it == release_retries_.end()) {
    rid = next_release_retry_++;
    it = release_retries_.emplace(rid, ReleaseRetry{}).first;
    it->second.name = call.name;
    it->second.token = call.token;
    it->second.entry = call.entry;
    it->second.first = id;
  }
  ReleaseRetry& r = it->second;
  r.in_flight = 0;
  r.backoff = retry_backoff(cfg_, renew_period_, r.backoff);
  const TimePoint at = now + r.backoff;
  if (at >= session_clock_->deadline()) {
    fx_.log(kLogWarn, what +
                          "; no time left before the session's local deadline to try again: "
                          "its expiry frees it");
    drop_release_retry(rid);
    return;
  }
  fx_.log(r.backoff == cfg_.min_backoff ? kLogWarn : kLogDebug,
          what + "; trying again in " + std::to_string(to_ms(r.backoff)) + " ms");
  arm(r.timer, at, {TimerKind::kReleaseRetry, rid});
}

void Node::on_release_retry(uint64_t id, TimePoint now) {
  auto it = release_retries_.find(id);
  if (it == release_retries_.end()) return;
  const Duration left = session_clock_ ? session_clock_->deadline() - now : Duration::zero();
  if (!session_usable() || left <= Duration::zero()) {
    drop_release_retry(id);
    return;
  }
  ReleaseRetry& r = it->second;
  // Its call ends by the deadline: past it the session may be gone anyway.
  r.in_flight =
      release_lease(session_id_, r.name, r.token, 0, now, std::min(call_timeout(), left), r.entry);
  calls_.at(r.in_flight).retry = id;
}

uint64_t Node::find_release_retry(std::string_view name, uint64_t token, EntryRef entry) const {
  for (const auto& [id, r] : release_retries_) {
    if (r.token == token && r.name == name && r.entry.kind == entry.kind &&
        r.entry.permit == entry.permit) {
      return id;
    }
  }
  return 0;
}

void Node::drop_release_retry(uint64_t id) {
  auto it = release_retries_.find(id);
  if (it == release_retries_.end()) return;
  disarm(it->second.timer);
  release_retries_.erase(it);
}

void Node::drop_release_retries() {
  for (auto& [id, r] : release_retries_) disarm(r.timer);
  release_retries_.clear();
}

}  // namespace simba
