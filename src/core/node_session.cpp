// The Node's session: open, keep-alive, the local deadline, expiry and close.
//
// The open and every keep-alive set the session's local deadline with
// local_deadline() (core/timing.h), the one place the formula lives:
// sentAt + remaining × (1 − drift) − margin. It counts from when the call was
// sent, not from when the reply arrived, so a slow reply only shortens the
// deadline; scaled by (1 − drift) it passes before a backend whose clock runs
// up to 1 + drift times as fast can expire the session; the margin is extra
// safety on top.
#include <algorithm>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include "core/json.h"
#include "core/log_level.h"
#include "core/node.h"
#include "core/timing.h"

namespace simba {

void Node::start(TimePoint now) { open_session(now); }

bool Node::session_usable() const {
  return !closing_ && (status_ == SessionStatus::kLive || status_ == SessionStatus::kSuspended) &&
         session_clock_ && session_clock_->valid();
}

void Node::emit(SessionEvent ev, const std::string& detail) { fx_.session_event(ev, detail); }

// ---------------------------------------------------------------------------
// Open

void Node::open_session(TimePoint now) {
  status_ = SessionStatus::kOpening;
  session_id_.clear();
  session_clock_.reset();
  released_.clear();
  drop_release_retries();
  lease_shortened_ = false;
  renew_period_ = cfg_.renew_interval();
  open_call_ = new_call(CallKind::kOpen, "", call_timeout(), now);
  fx_.send_open(open_call_, cfg_.lease_duration, call_timeout());
}

void Node::retry_open(TimePoint now) {
  arm(session_timer_, now + open_backoff_, {TimerKind::kRenew, 0});
  open_backoff_ = std::min(open_backoff_ * 2, cfg_.renew_interval());
}

CallId Node::send_session_close(const std::string& session, TimePoint now, Duration timeout) {
  if (timeout <= Duration::zero()) timeout = call_timeout();
  const CallId c = new_call(CallKind::kClose, session, timeout, now);
  fx_.send_close(c, session, timeout);
  return c;
}

void Node::on_open(CallId id, const OpenReply& reply, TimePoint now) {
  const std::optional<Call> call = take_call(id);
  if (!call) return;
  const bool current = !call->abandoned && id == open_call_;
  if (!current || closing_) {
    // Nobody waits for this session any more: close it so it frees nothing late.
    if (reply.outcome == Outcome::kOk) send_session_close(reply.session_id, now);
    if (current) open_call_ = 0;
    return;
  }
  open_call_ = 0;
  if (reply.outcome != Outcome::kOk) {
    fx_.log(kLogWarn, std::string("opening a session failed (") + outcome_name(reply.outcome) +
                          (reply.error.empty() ? "" : ": " + reply.error) + "); retrying");
    retry_open(now);
    return;
  }
  const TimePoint deadline =
      local_deadline(call->sent_at, reply.remaining, cfg_.drift, cfg_.margin);
  auto clock = std::make_shared<SessionClock>(clock_, reply.session_id);
  clock->set_deadline(deadline);
  if (!clock->valid()) {
    // The grant was used up before it arrived: this session is of no use.
    fx_.log(kLogWarn, "a new session was granted too little time to be used; retrying");
    send_session_close(reply.session_id, now);
    retry_open(now);
    return;
  }
  go_live(reply, std::move(clock), call->sent_at, deadline, now);
}

void Node::go_live(const OpenReply& reply, std::shared_ptr<SessionClock> clock, TimePoint sent_at,
                   TimePoint deadline, TimePoint now) {
  const Duration granted = reply.remaining;
  session_id_ = reply.session_id;
  session_clock_ = std::move(clock);
  status_ = SessionStatus::kLive;
  open_backoff_ = cfg_.min_backoff;
  ++sessions_opened_;
  const RenewPeriod rp = renew_period(cfg_, deadline - sent_at);
  renew_period_ = rp.period;
  emit(SessionEvent::kOpened, "{\"session\":" + json_quote(session_id_) +
                                  ",\"remaining_ms\":" + std::to_string(to_ms(granted)) + "}");
  if (rp.shortened) {
    lease_shortened_ = true;
    fx_.log(kLogWarn, "the backend granted " + std::to_string(to_ms(granted)) +
                          " ms, less than two renew intervals: renewing every " +
                          std::to_string(to_ms(renew_period_)) + " ms for this session");
    emit_lease_shortened(granted);
  }
  arm_session_timers(sent_at, now);
  // A new session contends again at once.
  std::vector<ContenderId> ids;
  contenders_.for_each([&ids](const Contender* c) {
    if (c->state == State::kCandidate) ids.push_back(c->id);
  });
  std::sort(ids.begin(), ids.end());  // in the order they were added
  for (ContenderId cid : ids) {
    if (Contender* c = find(cid)) attempt(*c, now);
  }
}

void Node::emit_lease_shortened(Duration granted) {
  emit(SessionEvent::kLeaseShortened,
       "{\"session\":" + json_quote(session_id_) +
           ",\"granted_ms\":" + std::to_string(to_ms(granted)) +
           ",\"renew_period_ms\":" + std::to_string(to_ms(renew_period_)) + "}");
}

void Node::arm_session_timers(TimePoint sent_at, TimePoint now) {
  arm(deadline_timer_, session_clock_->deadline(), {TimerKind::kDeadline, 0});
  arm(session_timer_, std::max(now, sent_at + renew_period_), {TimerKind::kRenew, 0});
}

// ---------------------------------------------------------------------------
// Keep-alive

void Node::send_keep_alive(TimePoint now) {
  keep_alive_call_ = new_call(CallKind::kKeepAlive, session_id_, call_timeout(), now);
  ++keep_alives_;
  fx_.send_keep_alive(keep_alive_call_, session_id_, cfg_.lease_duration, call_timeout());
}

void Node::on_keep_alive(CallId id, const KeepAliveReply& reply, TimePoint now) {
  const std::optional<Call> call = take_call(id);
  if (!call) return;
  if (call->abandoned || id != keep_alive_call_) return;
  keep_alive_call_ = 0;
  if (closing_ || call->session != session_id_ || !session_clock_) return;

  if (reply.outcome != Outcome::kOk) ++metrics_.keep_alive_failures;
  switch (reply.outcome) {
    case Outcome::kOk:
      keep_alive_renewed(id, *call, reply, now);
      return;
    case Outcome::kExpired:
      session_ended(RevokeReason::kSessionExpired, now);
      return;
    case Outcome::kHeld:
    case Outcome::kRefused:
    case Outcome::kError:
    case Outcome::kTimeout:
      keep_alive_failed(reply, now);
      return;
  }
}

void Node::keep_alive_renewed(CallId id, const Call& call, const KeepAliveReply& reply,
                              TimePoint now) {
  metrics_.keep_alive_rtt.observe(now - call.sent_at);
  if (now < session_clock_->deadline()) {
    metrics_.remaining_at_renewal.observe(session_clock_->deadline() - now);
  }
  const TimePoint deadline = local_deadline(call.sent_at, reply.remaining, cfg_.drift, cfg_.margin);
  // A reply after the deadline never extends it: the session clock is read
  // first (a reading at or past the deadline ends it for good, even when no
  // term was read since the deadline passed), set_deadline fails once it
  // has ended, and a new deadline already behind us ends it.
  if (!session_clock_->valid() || now >= session_clock_->deadline() ||
      !session_clock_->set_deadline(deadline) || !session_clock_->valid()) {
    session_ended(RevokeReason::kDeadlinePassed, now);
    return;
  }
  const RenewPeriod rp = renew_period(cfg_, deadline - call.sent_at);
  renew_period_ = rp.period;
  if (rp.shortened && !lease_shortened_) {
    lease_shortened_ = true;
    fx_.log(kLogWarn, "the backend now grants " + std::to_string(to_ms(reply.remaining)) +
                          " ms: renewing every " + std::to_string(to_ms(renew_period_)) + " ms");
    emit_lease_shortened(reply.remaining);
  }
  if (status_ == SessionStatus::kSuspended) {
    status_ = SessionStatus::kLive;
    emit(SessionEvent::kLive, "{\"session\":" + json_quote(session_id_) + "}");
  }
  arm_session_timers(call.sent_at, now);
  reconcile_owned(id, reply.owned, now);
}

void Node::reconcile_owned(CallId id, const std::vector<OwnedLease>& listed, TimePoint now) {
  // Runs on every keep-alive, over every lease: the sets view the reply's
  // names and the terms' names instead of copying them. An entry is
  // (kind, name, permit, token): a lease is (kLease, name, 0, token) (ADR 0046).
  using Held = std::tuple<PermitKind, std::string_view, uint64_t, uint64_t>;
  auto held_by = [](const Contender& c) {
    return Held{permit_kind_of(c.kind), c.term->name().view(), c.permit(), c.term->token()};
  };
  std::set<Held> owned;
  for (const OwnedLease& l : listed) owned.emplace(l.kind, l.name, l.permit, l.token);
  // Terms adopted before this keep-alive was sent must be listed as ours.
  std::vector<Contender*> all = contenders_by_address();
  std::vector<ContenderId> lost;
  for (const Contender* c : all) {
    if (c->term && c->state == State::kLeader && c->adopted_before() <= id &&
        !owned.count(held_by(*c))) {
      lost.push_back(c->id);
    }
  }
  std::sort(lost.begin(), lost.end());  // in the order they were added
  for (ContenderId cid : lost) {
    if (Contender* c = find(cid)) lose_term(*c, RevokeReason::kTakenOver, now);
  }
  // A lease whose release failed and that a keep-alive sent after that
  // release no longer lists is free: its retry has nothing left to do.
  std::vector<uint64_t> freed;
  for (const auto& [rid, r] : release_retries_) {
    if (id > r.first && !owned.count({r.entry.kind, r.name, r.entry.permit, r.token})) {
      freed.push_back(rid);
    }
  }
  for (uint64_t rid : freed) drop_release_retry(rid);
  // The terms left (taken after the losses, which may free a lost term's
  // name; a lost term was not listed anyway), and the intents of the writers
  // that wait.
  if (!lost.empty()) all = contenders_by_address();  // a lost one may be gone
  std::set<Held> ours;
  for (const Contender* c : all) {
    if (c->term) ours.insert(held_by(*c));
    if (c->intent()) ours.emplace(PermitKind::kIntent, c->name.view(), c->intent(), 0);
  }
  // A lease the backend lists as ours that no term holds, and that no call
  // in flight can explain, was won by an answer we never adopted: free it.
  for (const Held& entry : owned) {
    if (ours.count(entry)) continue;
    const auto& [kind, name, permit, token] = entry;
    const bool is_lease = kind == PermitKind::kLease;
    bool explained = false;
    // Only calls still awaited count: an abandoned attempt's tombstone would
    // keep the orphan for the tombstone's life (ADR 0005 bounds it to about
    // a renew period plus a call timeout); if its late reply still comes,
    // releasing the same token twice is harmless.
    for (const auto& [cid, c] : calls_) {
      if (c.abandoned || c.name != name) continue;
      // An acquire of the kind may have won it; a write's may have left an intent.
      const bool may_have_won = c.entry.kind == kind ||
                                (kind == PermitKind::kIntent && c.entry.kind == PermitKind::kWrite);
      if ((c.kind == CallKind::kAcquire && may_have_won) ||
          (c.kind == CallKind::kRelease && c.token == token && c.entry.kind == kind &&
           c.entry.permit == permit)) {
        explained = true;
        break;
      }
    }
    // A release waiting to be sent again will free it.
    if (explained || find_release_retry(name, token, EntryRef{kind, permit})) continue;
    const std::string orphan(name);
    fx_.log(kLogInfo, std::string("releasing ") + (is_lease ? "lease" : permit_kind_name(kind)) +
                          " " + orphan + (is_lease ? "" : " #" + std::to_string(permit)) +
                          " (token " + std::to_string(token) +
                          ") that this session holds without a term");
    release_lease(session_id_, orphan, token, 0, now, Duration::zero(), EntryRef{kind, permit});
  }
}

void Node::keep_alive_failed(const KeepAliveReply& reply, TimePoint now) {
  if (status_ == SessionStatus::kLive) {
    status_ = SessionStatus::kSuspended;
    emit(SessionEvent::kSuspended,
         "{\"session\":" + json_quote(session_id_) + ",\"error\":" +
             json_quote(reply.error.empty() ? outcome_name(reply.outcome) : reply.error) + "}");
  }
  const Duration left = session_clock_->remaining();
  if (left <= Duration::zero()) {
    session_ended(RevokeReason::kDeadlinePassed, now);
    return;
  }
  arm(session_timer_, now + keep_alive_backoff(cfg_, renew_period_, left), {TimerKind::kRenew, 0});
}

void Node::on_session_timer(TimePoint now) {
  if (closing_) {
    if (close_retry_armed_) {
      close_retry_armed_ = false;
      // Each retry ends by the local deadline: past it the backend may have
      // expired the session, which frees its leases anyway.
      const Duration left = session_clock_ && !session_clock_->ended()
                                ? session_clock_->deadline() - now
                                : Duration::zero();
      if (left <= Duration::zero()) {
        fx_.log(kLogWarn,
                "closing the session failed until its local deadline; its leases free "
                "when it expires on the backend");
        close_failure_ = Outcome::kTimeout;
        maybe_finish_close(now);
        return;
      }
      close_call_ = send_session_close(session_id_, now, std::min(call_timeout(), left));
    }
    return;
  }
  if (status_ == SessionStatus::kOpening) {
    if (!open_call_) open_session(now);
    return;
  }
  if (!keep_alive_call_) send_keep_alive(now);
}

void Node::on_deadline_timer(TimePoint now) {
  if (!session_clock_ || closing_ || status_ == SessionStatus::kOpening) return;
  if (!session_clock_->valid()) {
    session_ended(RevokeReason::kDeadlinePassed, now);
  } else {
    arm(deadline_timer_, session_clock_->deadline(), {TimerKind::kDeadline, 0});
  }
}

// ---------------------------------------------------------------------------
// The end of a session

void Node::session_ended(RevokeReason reason, TimePoint now) {
  const std::string old = session_id_;
  if (session_clock_) session_clock_->end();
  disarm(deadline_timer_);
  disarm(session_timer_);
  drop_release_retries();  // nothing is retried for a session that ended
  if (keep_alive_call_) {
    if (auto it = calls_.find(keep_alive_call_); it != calls_.end()) it->second.abandoned = true;
    keep_alive_call_ = 0;
  }
  fx_.log(kLogWarn, "session " + old + " ended: " + revoke_reason_name(reason));
  emit(SessionEvent::kExpired, "{\"session\":" + json_quote(old) +
                                   ",\"reason\":" + json_quote(revoke_reason_name(reason)) + "}");

  std::vector<ContenderId> ids;
  for (const Contender* c : contenders_in_order()) ids.push_back(c->id);
  for (ContenderId cid : ids) {
    Contender* c = find(cid);
    if (!c) continue;
    if (c->state == State::kAcquiring) {
      abandon_attempt(*c);
      c->state = State::kCandidate;
    }
    if (c->intent()) c->set_intent(0);  // a writer's intent went with the session
    if (c->state == State::kLeader) {
      lose_term(*c, reason, now);
    } else if (c->stopping && (c->state == State::kCandidate || !c->term)) {
      // Stopped while acquiring: the session's end frees what the attempt won.
      finish(*c, now);
    } else if (c->state == State::kReleasing || c->state == State::kDraining) {
      // The session is gone, and the lease with it: waiting for the release's
      // answer or for the work would only delay onRevoked.
      finish_handover(*c, now);
    }
  }
  if (reason == RevokeReason::kDeadlinePassed && !old.empty()) {
    // The backend may still count the session live: close it so its leases
    // free now rather than at its expiry. Its terms are already revoked.
    send_session_close(old, now);
  }
  if (!closing_) open_session(now);
}

// ---------------------------------------------------------------------------
// Close

void Node::close(TimePoint now) {
  if (closing_ || status_ == SessionStatus::kClosed) return;
  closing_ = true;
  // The session's close frees every lease: it supersedes the releases
  // waiting to be sent again.
  drop_release_retries();
  std::vector<ContenderId> leaders;
  for (Contender* c : contenders_in_order()) {
    c->stopping = true;
    abandon_attempt(*c);
    if (c->state != State::kDraining) disarm(*c);
    if (c->state == State::kLeader) leaders.push_back(c->id);
  }
  if (open_call_) {
    if (auto it = calls_.find(open_call_); it != calls_.end()) it->second.abandoned = true;
    open_call_ = 0;
  }
  // Closing the session frees every lease at once: it is the release, sent
  // once no term waits for its work any more (handover order).
  holding_close_ = true;  // until every leader is either draining or released
  for (ContenderId cid : leaders) {
    if (Contender* c = find(cid)) begin_handover(*c, RevokeReason::kStopped, now);
  }
  holding_close_ = false;
  maybe_send_close(now);
}

void Node::maybe_send_close(TimePoint now) {
  if (!closing_ || close_sent_ || holding_close_) return;
  bool draining = false;
  contenders_.for_each(
      [&draining](const Contender* c) { draining = draining || c->state == State::kDraining; });
  if (draining) return;
  close_sent_ = true;
  if (!session_id_.empty() && session_clock_ && !session_clock_->ended()) {
    close_backoff_ = Duration::zero();
    // Ends by the local deadline, as its retries do (after a drain it may be
    // near); one whose deadline just passed (not yet seen by the deadline
    // timer) gets a full call timeout.
    close_call_ = send_session_close(session_id_, now,
                                     std::min(call_timeout(), session_clock_->deadline() - now));
    return;
  }
  maybe_finish_close(now);
}

void Node::on_close(CallId id, const DoneReply& reply, TimePoint now) {
  if (!take_call(id)) return;
  if (id != close_call_) return;
  close_call_ = 0;
  // Failed (a connection cut, a backend waiting to reconnect, no answer in
  // time): its leases would stay held until the session expires on the
  // backend, a failover instead of a handover. Sent again with backoff, on a
  // fresh connection, until the session's local deadline (ADR 0030).
  if (reply.outcome == Outcome::kError || reply.outcome == Outcome::kTimeout) {
    close_backoff_ = retry_backoff(cfg_, renew_period_, close_backoff_);
    const TimePoint retry_at = now + close_backoff_;
    if (session_clock_ && !session_clock_->ended() && retry_at < session_clock_->deadline()) {
      fx_.log(close_backoff_ == cfg_.min_backoff ? kLogInfo : kLogDebug,
              std::string("closing the session failed (") + outcome_name(reply.outcome) +
                  (reply.error.empty() ? "" : ": " + reply.error) + "); trying again in " +
                  std::to_string(to_ms(close_backoff_)) + " ms");
      close_retry_armed_ = true;
      arm(session_timer_, retry_at, {TimerKind::kRenew, 0});
      return;
    }
  }
  if (reply.outcome != Outcome::kOk && reply.outcome != Outcome::kExpired) {
    fx_.log(kLogWarn, std::string("closing the session failed (") + outcome_name(reply.outcome) +
                          "); its leases free when it expires on the backend");
    // An error the retries ran out on means the deadline came first too.
    close_failure_ = reply.outcome == Outcome::kError ? Outcome::kTimeout : reply.outcome;
  }
  maybe_finish_close(now);
}

void Node::maybe_finish_close(TimePoint now) {
  if (!closing_ || close_call_ || close_retry_armed_ || status_ == SessionStatus::kClosed) return;
  if (session_clock_) session_clock_->end();
  status_ = SessionStatus::kClosed;
  // The node lets go of every contender before it reports them done: their
  // owners may free them then.
  const std::vector<Contender*> all = contenders_in_order();
  by_name_.clear();
  contenders_.clear();
  for (Contender* c : all) c->timer_armed = false;
  timers_.clear();
  session_timer_.reset();
  deadline_timer_.reset();
  calls_.clear();
  for (Contender* c : all) end_at_close(*c, now);
  emit(SessionEvent::kClosed, "{\"session\":" + json_quote(session_id_) + "}");
  fx_.closed();
}

void Node::end_at_close(Contender& c, TimePoint now) {
  if (c.term) {
    TermRef term = std::move(c.term);
    // A handover under way revoked it already, with its own reason.
    const bool handing_over = c.state == State::kDraining || c.state == State::kReleasing;
    term->revoke(RevokeReason::kStopped);
    ++metrics_.revocations[static_cast<int>(term->revoked())];
    if (handing_over) metrics_.handover.observe(now - c.handover_started());
    fx_.revoked(c, term);
  }
  ack_step_downs(c);
  stop_watching(c);
  if (c.kind == ContenderKind::kLock && c.state != State::kReleasing) {
    fx_.lock_failed(c, LockFailure::kCanceled);
  } else {
    fx_.stopped(c);
  }
}

}  // namespace simba
