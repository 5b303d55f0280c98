// The Node's terms: adoption, loss, and the handover order of a stop or
// step-down (revoke, wait for the work, release with the token, onRevoked).
#include <algorithm>
#include <utility>

#include "core/log_level.h"
#include "core/node.h"

namespace simba {

void Node::adopt(Contender& c, uint64_t token, TimePoint now) {
  (void)now;
  c.term = std::make_shared<TermState>(c.name, token, session_clock_);
  c.state = State::kLeader;
  c.work_running = c.with_work;
  c.adopted_before = next_call_;
  ++terms_;
  disarm(c.timer);
  fx_.elected(c.id, c.term);
}

// A term lost any other way than a stop or step-down (deadline, take-over,
// session expiry) is not waited for: it is revoked and reported at once.
void Node::lose_term(Contender& c, RevokeReason reason, TimePoint now) {
  std::shared_ptr<TermState> term = std::move(c.term);
  c.term.reset();
  term->revoke(reason);
  fx_.term_ended(c.id, term);
  ++metrics_.revocations[static_cast<int>(term->revoked())];
  fx_.revoked(c.id, term, term->revoked());
  after_term(c, now);
}

void Node::begin_handover(Contender& c, RevokeReason reason, TimePoint now) {
  // The lease stays held for the work at most until the local deadline as it
  // is at the stop: later renewals do not extend the wait.
  const TimePoint deadline_at_stop = session_clock_ ? session_clock_->deadline() : now;
  c.term->revoke(reason);
  c.handover_reason = c.term->revoked();
  c.handover_started = now;
  fx_.term_ended(c.id, c.term);
  disarm(c.timer);
  if (c.work_running) {
    c.state = State::kDraining;
    arm(c.timer, std::max(now, deadline_at_stop), {TimerKind::kContender, c.id});
    return;
  }
  release_term(c, now);
}

// The work exited (or may no longer be waited for): release with the token.
// While the node closes, the session's close is the release.
void Node::release_term(Contender& c, TimePoint now) {
  disarm(c.timer);
  c.state = State::kReleasing;
  if (closing_) {
    maybe_send_close(now);
    return;
  }
  release_lease(c.term->session_id(), c.name.str(), c.term->token(), c.id, now);
}

void Node::work_done(ContenderId id, uint64_t token, TimePoint now) {
  Contender* c = find(id);
  if (!c || !c->term || c->term->token() != token || !c->work_running) return;
  c->work_running = false;
  if (c->state == State::kDraining) {
    release_term(*c, now);
  } else if (c->state == State::kLeader) {
    // The work is done with the lease: hand it over, then contend again.
    begin_handover(*c, RevokeReason::kSteppedDown, now);
  }
}

void Node::finish_handover(Contender& c, TimePoint now) {
  std::shared_ptr<TermState> term = std::move(c.term);
  c.term.reset();
  ++metrics_.revocations[static_cast<int>(c.handover_reason)];
  metrics_.handover.observe(now - c.handover_started);
  fx_.revoked(c.id, term, c.handover_reason);
  after_term(c, now);
}

// After a term ended: stop, cool down, or contend again.
void Node::after_term(Contender& c, TimePoint now) {
  ack_step_downs(c);
  if (c.stopping || c.kind == ContenderKind::kLock) {
    finish(c, now);
    return;
  }
  if (c.cooldown_until > now) {
    c.state = State::kCooldown;
    arm(c.timer, c.cooldown_until, {TimerKind::kContender, c.id});
    return;
  }
  c.state = State::kCandidate;
  schedule_retry(c, now, Duration(-1));
}

void Node::ack_step_downs(Contender& c) {
  for (; c.pending_step_downs > 0; --c.pending_step_downs) fx_.stepped_down(c.id);
}

// ---------------------------------------------------------------------------
// Releases

void Node::release_lease(const std::string& session, const std::string& name, uint64_t token,
                         ContenderId handover, TimePoint now) {
  if (session == session_id_) {
    uint64_t& high = released_[name];
    high = std::max(high, token);
    own_release_at_[name] = now;
  }
  const CallId id = new_call(CallKind::kRelease, session, call_timeout(), now);
  Call& call = calls_.at(id);
  call.name = name;
  call.token = token;
  call.contender = handover;
  ++releases_;
  fx_.send_release(id, session, name, token, call_timeout());
}

void Node::on_release(CallId id, const DoneReply& reply, TimePoint now) {
  const std::optional<Call> call = take_call(id);
  if (!call) return;
  if (reply.outcome != Outcome::kOk && reply.outcome != Outcome::kExpired) {
    fx_.log(kLogWarn, "release of " + call->name + " token " + std::to_string(call->token) +
                          " failed (" + outcome_name(reply.outcome) +
                          "); a later keep-alive frees it, or the session's expiry");
  }
  if (call->abandoned || !call->contender) return;
  Contender* c = find(call->contender);
  if (!c || c->state != State::kReleasing) return;
  if (!c->term) {
    finish(*c, now);  // stopped while acquiring; what the attempt won is released
  } else if (c->term->token() == call->token) {
    finish_handover(*c, now);
  }
}

}  // namespace simba
