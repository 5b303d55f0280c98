#include "core/node.h"

#include <algorithm>
#include <set>
#include <utility>

#include "core/json.h"
#include "core/log_level.h"
#include "core/timing.h"

namespace simba {

namespace {


// How long the answer of an abandoned call is still recognised, so that a late
// acquire reply can release what it won.
Duration tombstone_life(const Config& cfg) { return cfg.lease_duration * 2; }

}  // namespace

const char* session_status_name(SessionStatus s) {
  switch (s) {
    case SessionStatus::kOpening: return "OPENING";
    case SessionStatus::kLive: return "LIVE";
    case SessionStatus::kSuspended: return "SUSPENDED";
    case SessionStatus::kClosed: return "CLOSED";
  }
  return "UNKNOWN";
}

Node::Node(Config cfg, Effects& fx, const Clock& clock, uint64_t seed)
    : cfg_(std::move(cfg)),
      fx_(fx),
      clock_(clock),
      rng_(seed),
      renew_period_(cfg_.renew_interval()),
      open_backoff_(cfg_.min_backoff) {}

Node::~Node() = default;

// ---------------------------------------------------------------------------
// Session

void Node::start(TimePoint now) { open_session(now); }

bool Node::session_usable() const {
  return !closing_ && (status_ == SessionStatus::kLive || status_ == SessionStatus::kSuspended) &&
         session_clock_ && session_clock_->valid();
}

void Node::open_session(TimePoint now) {
  status_ = SessionStatus::kOpening;
  session_id_.clear();
  session_clock_.reset();
  released_.clear();
  lease_shortened_ = false;
  renew_period_ = cfg_.renew_interval();
  open_call_ = new_call(CallKind::kOpen, "", call_timeout(), now);
  fx_.send_open(open_call_, cfg_.lease_duration, call_timeout());
}

void Node::on_open(CallId id, const OpenReply& reply, TimePoint now) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  Call call = std::move(it->second);
  disarm(call.timeout);
  calls_.erase(it);
  const bool current = !call.abandoned && id == open_call_;
  if (!current || closing_) {
    // Nobody waits for this session any more: close it so it frees nothing late.
    if (reply.outcome == Outcome::kOk) {
      const CallId c = new_call(CallKind::kClose, reply.session_id, call_timeout(), now);
      fx_.send_close(c, reply.session_id, call_timeout());
    }
    if (current) open_call_ = 0;
    return;
  }
  open_call_ = 0;
  if (reply.outcome != Outcome::kOk) {
    fx_.log(kLogWarn, std::string("opening a session failed (") + outcome_name(reply.outcome) +
                          (reply.error.empty() ? "" : ": " + reply.error) + "); retrying");
    arm(session_timer_, now + open_backoff_, {TimerKind::kRenew, 0});
    open_backoff_ = std::min(open_backoff_ * 2, cfg_.renew_interval());
    return;
  }
  const Duration validity = local_validity(reply.remaining, cfg_.drift, cfg_.margin);
  auto clock = std::make_shared<SessionClock>(clock_, reply.session_id);
  clock->set_deadline(call.sent_at + validity);
  if (!clock->valid()) {
    // The grant was used up before it arrived: this session is of no use.
    fx_.log(kLogWarn, "a new session was granted too little time to be used; retrying");
    const CallId c = new_call(CallKind::kClose, reply.session_id, call_timeout(), now);
    fx_.send_close(c, reply.session_id, call_timeout());
    arm(session_timer_, now + open_backoff_, {TimerKind::kRenew, 0});
    open_backoff_ = std::min(open_backoff_ * 2, cfg_.renew_interval());
    return;
  }
  session_id_ = reply.session_id;
  session_clock_ = std::move(clock);
  status_ = SessionStatus::kLive;
  open_backoff_ = cfg_.min_backoff;
  ++sessions_opened_;
  const RenewPeriod rp = renew_period(cfg_, validity);
  renew_period_ = rp.period;
  emit(SessionEvent::kOpened, "{\"session\":" + json_quote(session_id_) +
                                  ",\"remaining_ms\":" + std::to_string(to_ms(reply.remaining)) +
                                  "}");
  if (rp.shortened) {
    lease_shortened_ = true;
    fx_.log(kLogWarn, "the backend granted " + std::to_string(to_ms(reply.remaining)) +
                          " ms, less than two renew intervals: renewing every " +
                          std::to_string(to_ms(renew_period_)) + " ms for this session");
    emit(SessionEvent::kLeaseShortened,
         "{\"session\":" + json_quote(session_id_) + ",\"granted_ms\":" +
             std::to_string(to_ms(reply.remaining)) + ",\"renew_period_ms\":" +
             std::to_string(to_ms(renew_period_)) + "}");
  }
  arm(deadline_timer_, session_clock_->deadline(), {TimerKind::kDeadline, 0});
  arm(session_timer_, std::max(now, call.sent_at + renew_period_), {TimerKind::kRenew, 0});
  // A new session contends again at once.
  std::vector<ContenderId> ids;
  for (auto& [cid, c] : contenders_) {
    if (c.state == State::kCandidate) ids.push_back(cid);
  }
  for (ContenderId cid : ids) {
    if (Contender* c = find(cid)) attempt(*c, now);
  }
}

void Node::send_keep_alive(TimePoint now) {
  keep_alive_call_ = new_call(CallKind::kKeepAlive, session_id_, call_timeout(), now);
  ++keep_alives_;
  fx_.send_keep_alive(keep_alive_call_, session_id_, cfg_.lease_duration, call_timeout());
}

void Node::on_keep_alive(CallId id, const KeepAliveReply& reply, TimePoint now) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  Call call = std::move(it->second);
  disarm(call.timeout);
  calls_.erase(it);
  if (call.abandoned || id != keep_alive_call_) return;
  keep_alive_call_ = 0;
  if (closing_ || call.session != session_id_ || !session_clock_) return;

  if (reply.outcome != Outcome::kOk) ++metrics_.keep_alive_failures;
  switch (reply.outcome) {
    case Outcome::kOk: {
      metrics_.keep_alive_rtt.observe(now - call.sent_at);
      if (now < session_clock_->deadline()) {
        metrics_.remaining_at_renewal.observe(session_clock_->deadline() - now);
      }
      const Duration validity = local_validity(reply.remaining, cfg_.drift, cfg_.margin);
      // A reply after the deadline never extends it: the session clock is read
      // first (a reading at or past the deadline ends it for good, even when no
      // term was read since the deadline passed), set_deadline fails once it
      // has ended, and a new deadline already behind us ends it.
      if (!session_clock_->valid() || now >= session_clock_->deadline() ||
          !session_clock_->set_deadline(call.sent_at + validity) || !session_clock_->valid()) {
        session_ended(RevokeReason::kDeadlinePassed, now);
        return;
      }
      const RenewPeriod rp = renew_period(cfg_, validity);
      renew_period_ = rp.period;
      if (rp.shortened && !lease_shortened_) {
        lease_shortened_ = true;
        fx_.log(kLogWarn, "the backend now grants " + std::to_string(to_ms(reply.remaining)) +
                              " ms: renewing every " + std::to_string(to_ms(renew_period_)) + " ms");
        emit(SessionEvent::kLeaseShortened,
             "{\"session\":" + json_quote(session_id_) + ",\"granted_ms\":" +
                 std::to_string(to_ms(reply.remaining)) + ",\"renew_period_ms\":" +
                 std::to_string(to_ms(renew_period_)) + "}");
      }
      if (status_ == SessionStatus::kSuspended) {
        status_ = SessionStatus::kLive;
        emit(SessionEvent::kLive, "{\"session\":" + json_quote(session_id_) + "}");
      }
      arm(deadline_timer_, session_clock_->deadline(), {TimerKind::kDeadline, 0});
      arm(session_timer_, std::max(now, call.sent_at + renew_period_), {TimerKind::kRenew, 0});

      // Terms adopted before this keep-alive was sent must be listed as ours.
      std::set<std::pair<std::string, uint64_t>> owned;
      for (const OwnedLease& l : reply.owned) owned.emplace(l.name, l.token);
      std::set<std::pair<std::string, uint64_t>> ours;
      std::vector<ContenderId> lost;
      for (auto& [cid, c] : contenders_) {
        if (!c.term) continue;
        ours.emplace(c.term->name(), c.term->token());
        if (c.state == State::kLeader && c.adopted_before <= id &&
            !owned.count({c.term->name(), c.term->token()})) {
          lost.push_back(cid);
        }
      }
      for (ContenderId cid : lost) {
        if (Contender* c = find(cid)) lose_term(*c, RevokeReason::kTakenOver, now);
      }
      // A lease the backend lists as ours that no term holds, and that no call
      // in flight can explain, was won by an answer we never adopted: free it.
      for (const auto& [name, token] : owned) {
        if (ours.count({name, token})) continue;
        bool explained = false;
        // Only calls still awaited count: an abandoned attempt's tombstone would
        // keep the orphan for the tombstone's life (ADR 0005 bounds it to about
        // a renew period plus a call timeout); if its late reply still comes,
        // releasing the same token twice is harmless.
        for (const auto& [cid, c] : calls_) {
          if (c.abandoned) continue;
          if ((c.kind == CallKind::kAcquire && c.name == name) ||
              (c.kind == CallKind::kRelease && c.name == name && c.token == token)) {
            explained = true;
            break;
          }
        }
        if (explained) continue;
        fx_.log(kLogInfo, "releasing lease " + name + " (token " + std::to_string(token) +
                              ") that this session holds without a term");
        release_lease(session_id_, name, token, 0, now);
      }
      return;
    }
    case Outcome::kExpired:
      session_ended(RevokeReason::kSessionExpired, now);
      return;
    case Outcome::kHeld:
    case Outcome::kError:
    case Outcome::kTimeout: {
      if (status_ == SessionStatus::kLive) {
        status_ = SessionStatus::kSuspended;
        emit(SessionEvent::kSuspended, "{\"session\":" + json_quote(session_id_) +
                                           ",\"error\":" +
                                           json_quote(reply.error.empty()
                                                          ? outcome_name(reply.outcome)
                                                          : reply.error) +
                                           "}");
      }
      const Duration left = session_clock_->remaining();
      if (left <= Duration::zero()) {
        session_ended(RevokeReason::kDeadlinePassed, now);
        return;
      }
      arm(session_timer_, now + keep_alive_backoff(cfg_, renew_period_, left),
          {TimerKind::kRenew, 0});
      return;
    }
  }
}

void Node::session_ended(RevokeReason reason, TimePoint now) {
  const std::string old = session_id_;
  if (session_clock_) session_clock_->end();
  disarm(deadline_timer_);
  disarm(session_timer_);
  if (keep_alive_call_) {
    if (auto it = calls_.find(keep_alive_call_); it != calls_.end()) it->second.abandoned = true;
    keep_alive_call_ = 0;
  }
  fx_.log(kLogWarn, "session " + old + " ended: " + revoke_reason_name(reason));
  emit(SessionEvent::kExpired, "{\"session\":" + json_quote(old) + ",\"reason\":" +
                                   json_quote(revoke_reason_name(reason)) + "}");

  std::vector<ContenderId> ids;
  for (auto& [cid, c] : contenders_) ids.push_back(cid);
  for (ContenderId cid : ids) {
    Contender* c = find(cid);
    if (!c) continue;
    if (c->state == State::kAcquiring) {
      abandon_attempt(*c);
      c->state = State::kCandidate;
    }
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
    const CallId c = new_call(CallKind::kClose, old, call_timeout(), now);
    fx_.send_close(c, old, call_timeout());
  }
  if (!closing_) open_session(now);
}

void Node::on_session_timer(TimePoint now) {
  if (closing_) return;
  if (status_ == SessionStatus::kOpening) {
    if (!open_call_) open_session(now);
    return;
  }
  if (!keep_alive_call_) send_keep_alive(now);
}

void Node::emit(SessionEvent ev, const std::string& detail) { fx_.session_event(ev, detail); }

// ---------------------------------------------------------------------------
// Contenders

Node::Contender* Node::find(ContenderId id) {
  auto it = contenders_.find(id);
  return it == contenders_.end() ? nullptr : &it->second;
}

ContenderId Node::front_of(std::string_view name) const {
  auto it = by_name_.lower_bound(name);  // the first of its equal keys: the oldest
  return it == by_name_.end() || it->first != name ? 0 : it->second;
}

void Node::list_by_name(const Contender& c) {
  // A multimap inserts an equal key after the others: arrival order.
  by_name_.emplace(std::string_view(c.name), c.id);
}

void Node::unlist_by_name(const Contender& c) {
  auto [first, last] = by_name_.equal_range(c.name);
  for (auto it = first; it != last; ++it) {
    if (it->second == c.id) {
      by_name_.erase(it);
      return;
    }
  }
}

ContenderId Node::add_election(const std::string& name, TimePoint now, bool with_work) {
  if (closing_ || front_of(name)) return 0;
  const ContenderId id = next_contender_++;
  Contender& c = contenders_[id];
  c.id = id;
  c.kind = ContenderKind::kElection;
  c.with_work = with_work;
  c.name = name;
  c.state = State::kCandidate;
  list_by_name(c);
  attempt(c, now);
  return id;
}

ContenderId Node::add_lock(const std::string& name, TimePoint give_up_at, bool try_once,
                           TimePoint now) {
  if (closing_) return 0;
  const ContenderId front = front_of(name);
  const bool queued = front != 0;
  if (queued && find(front)->kind == ContenderKind::kElection) return 0;
  const ContenderId id = next_contender_++;
  Contender& c = contenders_[id];
  c.id = id;
  c.kind = ContenderKind::kLock;
  c.name = name;
  c.give_up_at = give_up_at;
  c.try_once = try_once;
  list_by_name(c);
  if (queued) {
    c.state = State::kWaiting;
    if (try_once) {
      fail_lock(c, LockFailure::kBusy, now);
    } else if (give_up_at != TimePoint::max()) {
      arm(c.timer, give_up_at, {TimerKind::kContender, id});
    }
    return id;
  }
  c.state = State::kCandidate;
  attempt(c, now);
  return id;
}

void Node::attempt(Contender& c, TimePoint now) {
  if (c.state != State::kCandidate) return;
  if (c.kind == ContenderKind::kLock && now >= c.give_up_at) {
    fail_lock(c, LockFailure::kTimeout, now);
    return;
  }
  if (!session_usable()) {
    // Contends again when a session opens; a lock still gives up on time.
    disarm(c.timer);
    if (c.give_up_at != TimePoint::max()) arm(c.timer, c.give_up_at, {TimerKind::kContender, c.id});
    return;
  }
  // An acquire of this name that this node gave up on (timed out, or its
  // contender stopped or gave up) may still run on the backend: wait for its
  // answer (every backend answers a call by its own timeout, or fails it when
  // the connection resets; a late win is released then) before sending
  // another, but not past two call timeouts after it was sent. Otherwise the
  // new acquire could find the name held by this very session.
  c.unanswered = 0;
  c.attempt_when_answered = false;
  if (auto u = unanswered_by_name_.find(c.name); u != unanswered_by_name_.end()) {
    auto late = calls_.find(u->second);
    if (late != calls_.end() && late->second.session == session_id_ &&
        now < late->second.sent_at + 2 * call_timeout()) {
      c.unanswered = u->second;
      c.attempt_when_answered = true;
      schedule_attempt(c, late->second.sent_at + 2 * call_timeout());
      return;
    }
    unanswered_by_name_.erase(u);  // answered, forgotten, or of a session that ended
  }
  if (acquires_in_flight_ >= kMaxAcquiresInFlight) {
    // A burst (thousands of elections at once): wait for a free slot rather
    // than queue on a backend that answers one statement at a time, where the
    // attempts would time out waiting and win leases nobody adopts.
    if (!c.attempt_queued) {
      c.attempt_queued = true;
      attempt_queue_.push_back(c.id);
    }
    disarm(c.timer);
    if (c.give_up_at != TimePoint::max()) arm(c.timer, c.give_up_at, {TimerKind::kContender, c.id});
    return;
  }
  c.attempt_queued = false;
  ++acquires_in_flight_;
  c.attempt = new_call(CallKind::kAcquire, session_id_, call_timeout(), now);
  Call& call = calls_.at(c.attempt);
  call.name = c.name;
  call.contender = c.id;
  c.state = State::kAcquiring;
  c.released_in_flight = false;
  ++acquires_;
  disarm(c.timer);
  if (c.give_up_at != TimePoint::max()) arm(c.timer, c.give_up_at, {TimerKind::kContender, c.id});
  fx_.send_acquire(c.attempt, session_id_, c.name, call_timeout());
}

void Node::schedule_attempt(Contender& c, TimePoint at) {
  arm(c.timer, std::min(at, c.give_up_at), {TimerKind::kContender, c.id});
}

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
    delay = std::min(delay,
                     std::max(holder_remaining + cfg_.margin, cfg_.margin) + jitter / 8);
  }
  schedule_attempt(c, now + delay);
}

void Node::on_acquire(CallId id, const AcquireReply& reply, TimePoint now) {
  handle_acquire(id, reply, now);
  pump_attempts(now);
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

void Node::handle_acquire(CallId id, const AcquireReply& reply, TimePoint now) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  Call call = std::move(it->second);
  disarm(call.timeout);
  calls_.erase(it);
  Contender* c = find(call.contender);
  const bool current = !call.abandoned && c && c->state == State::kAcquiring && c->attempt == id;
  if (!current) {
    // A late reply to an abandoned attempt releases what it won, unless what it
    // names is a term this node holds (a backend that answers a re-acquire by
    // the holding session with the current token): that would free a live term.
    if (reply.outcome == Outcome::kOk) {
      bool live_term = false;
      for (const auto& [cid, other] : contenders_) {
        if (other.term && other.term->session_id() == call.session &&
            other.term->name() == call.name && other.term->token() == reply.token) {
          live_term = true;
        }
      }
      if (!live_term) release_lease(call.session, call.name, reply.token, 0, now);
    }
    answered_late(call.name, id, now);
    return;
  }
  c->attempt = 0;
  --acquires_in_flight_;
  c->state = State::kCandidate;
  const bool released = c->released_in_flight;
  c->released_in_flight = false;
  if (c->stopping) {
    // Stopped while this attempt was in flight (see stop()).
    if (reply.outcome == Outcome::kOk && reply.token > 0) {
      c->state = State::kReleasing;  // without a term: on_release finishes it
      release_lease(call.session, call.name, reply.token, c->id, now);
    } else {
      finish(*c, now);
    }
    return;
  }
  switch (reply.outcome) {
    case Outcome::kOk: {
      const bool same_session = call.session == session_id_ && session_usable();
      auto rel = released_.find(call.name);
      const bool fresh_token = rel == released_.end() || reply.token > rel->second;
      if (same_session && fresh_token && reply.token > 0) {
        adopt(*c, reply.token, now);
        return;
      }
      fx_.log(kLogWarn, "not adopting lease " + call.name + " token " +
                            std::to_string(reply.token) +
                            (same_session ? " (token not above a released one)" : " (session ended)"));
      release_lease(call.session, call.name, reply.token, 0, now);
      if (c->try_once) {
        fail_lock(*c, LockFailure::kBackend, now);
      } else {
        schedule_retry(*c, now, Duration(-1));
      }
      return;
    }
    case Outcome::kHeld:
      if (c->try_once) {
        fail_lock(*c, LockFailure::kBusy, now);
      } else if (released) {
        attempt(*c, now);  // the release may have come after this acquire ran
      } else {
        schedule_retry(*c, now, reply.holder_remaining);
      }
      return;
    case Outcome::kExpired:
      if (c->try_once) {
        fail_lock(*c, LockFailure::kBackend, now);
      } else {
        schedule_retry(*c, now, Duration(-1));
      }
      if (call.session == session_id_ && !closing_) {
        session_ended(RevokeReason::kSessionExpired, now);
      }
      return;
    case Outcome::kError:
    case Outcome::kTimeout:
      if (c->try_once) {
        fail_lock(*c, reply.outcome == Outcome::kTimeout ? LockFailure::kTimeout
                                                         : LockFailure::kBackend,
                  now);
      } else {
        schedule_retry(*c, now, Duration(-1));
      }
      return;
  }
}

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
  release_lease(c.term->session_id(), c.name, c.term->token(), c.id, now);
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
  for (; c.pending_step_downs > 0; --c.pending_step_downs) fx_.stepped_down(c.id);
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

void Node::answered_late(const std::string& name, CallId call, TimePoint now) {
  auto u = unanswered_by_name_.find(name);
  if (u == unanswered_by_name_.end() || u->second != call) return;
  unanswered_by_name_.erase(u);
  std::vector<ContenderId> waiting;  // a copy: attempt() may change the queue
  for (auto [it, last] = by_name_.equal_range(name); it != last; ++it) {
    waiting.push_back(it->second);
  }
  for (ContenderId cid : waiting) {
    Contender* c = find(cid);
    if (!c || c->unanswered != call) continue;
    c->unanswered = 0;
    if (c->attempt_when_answered) {
      c->attempt_when_answered = false;
      attempt(*c, now);
    }
  }
}

void Node::abandon_attempt(Contender& c) {
  if (!c.attempt) return;
  --acquires_in_flight_;
  if (auto it = calls_.find(c.attempt); it != calls_.end()) {
    it->second.abandoned = true;
    if (it->second.session == session_id_) unanswered_by_name_[c.name] = c.attempt;
  }
  c.attempt = 0;
}

void Node::fail_lock(Contender& c, LockFailure why, TimePoint now) {
  const ContenderId id = c.id;
  const std::string name = c.name;
  abandon_attempt(c);
  disarm(c.timer);
  const bool was_front = front_of(name) == id;
  unlist_by_name(c);
  contenders_.erase(id);
  fx_.lock_failed(id, why);
  if (was_front) activate_next(name, now);
}

void Node::finish(Contender& c, TimePoint now) {
  const ContenderId id = c.id;
  const std::string name = c.name;
  abandon_attempt(c);
  disarm(c.timer);
  for (; c.pending_step_downs > 0; --c.pending_step_downs) fx_.stepped_down(id);
  const bool was_front = front_of(name) == id;
  unlist_by_name(c);
  contenders_.erase(id);
  fx_.stopped(id);
  if (was_front) activate_next(name, now);
}

void Node::activate_next(const std::string& name, TimePoint now) {
  Contender* next = find(front_of(name));
  if (next && next->state == State::kWaiting) {
    next->state = State::kCandidate;
    attempt(*next, now);
  }
}

bool Node::stop(ContenderId id, TimePoint now) {
  Contender* c = find(id);
  if (!c || c->stopping || closing_) return false;
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
      if (c->kind == ContenderKind::kLock) {
        fail_lock(*c, LockFailure::kCanceled, now);
      } else {
        finish(*c, now);
      }
      break;
  }
  return true;
}

bool Node::step_down(ContenderId id, Duration cooldown, TimePoint now) {
  Contender* c = find(id);
  if (!c || c->stopping || closing_ || c->kind != ContenderKind::kElection) return false;
  c->cooldown_until = now + cooldown;
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
      c->state = State::kCooldown;
      arm(c->timer, c->cooldown_until, {TimerKind::kContender, c->id});
      fx_.stepped_down(c->id);
      break;
  }
  return true;
}

void Node::on_contender_timer(Contender& c, TimePoint now) {
  if (c.state == State::kDraining) {
    // The deadline at the stop passed and the work is still running: the lease
    // may not be held for it any longer.
    fx_.log(kLogWarn, "the work of " + c.name + " did not exit by the term's deadline; "
                          "releasing without it");
    release_term(c, now);
    return;
  }
  if (c.kind == ContenderKind::kLock && c.state != State::kLeader &&
      c.state != State::kReleasing && now >= c.give_up_at) {
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
  Contender* c = find(front_of(name));
  if (!c) return;
  if (c->state == State::kCandidate) {
    attempt(*c, now);
  } else if (c->state == State::kAcquiring) {
    c->released_in_flight = true;
  }
}

// ---------------------------------------------------------------------------
// Releases and close

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
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  Call call = std::move(it->second);
  disarm(call.timeout);
  calls_.erase(it);
  if (reply.outcome != Outcome::kOk && reply.outcome != Outcome::kExpired) {
    fx_.log(kLogWarn, "release of " + call.name + " token " + std::to_string(call.token) +
                          " failed (" + outcome_name(reply.outcome) +
                          "); a later keep-alive frees it, or the session's expiry");
  }
  if (call.abandoned || !call.contender) return;
  Contender* c = find(call.contender);
  if (!c || c->state != State::kReleasing) return;
  if (!c->term) {
    finish(*c, now);  // stopped while acquiring; what the attempt won is released
  } else if (c->term->token() == call.token) {
    finish_handover(*c, now);
  }
}

void Node::close(TimePoint now) {
  if (closing_ || status_ == SessionStatus::kClosed) return;
  closing_ = true;
  std::vector<ContenderId> leaders;
  for (auto& [cid, c] : contenders_) {
    c.stopping = true;
    abandon_attempt(c);
    if (c.state != State::kDraining) disarm(c.timer);
    if (c.state == State::kLeader) leaders.push_back(cid);
  }
  if (open_call_) {
    if (auto it = calls_.find(open_call_); it != calls_.end()) it->second.abandoned = true;
    open_call_ = 0;
  }
  // Closing the session frees every lease at once: it is the release, sent
  // once no term waits for its work any more (handover order).
  holding_close_ = true;  // until every leader is either draining or released
  for (ContenderId cid : leaders) begin_handover(contenders_.at(cid), RevokeReason::kStopped, now);
  holding_close_ = false;
  maybe_send_close(now);
}

void Node::maybe_send_close(TimePoint now) {
  if (!closing_ || close_sent_ || holding_close_) return;
  for (const auto& [cid, c] : contenders_) {
    if (c.state == State::kDraining) return;
  }
  close_sent_ = true;
  if (!session_id_.empty() && session_clock_ && !session_clock_->ended()) {
    close_call_ = new_call(CallKind::kClose, session_id_, call_timeout(), now);
    fx_.send_close(close_call_, session_id_, call_timeout());
    return;
  }
  maybe_finish_close(now);
}

void Node::on_close(CallId id, const DoneReply& reply, TimePoint now) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  Call call = std::move(it->second);
  disarm(call.timeout);
  calls_.erase(it);
  if (id != close_call_) return;
  if (reply.outcome != Outcome::kOk && reply.outcome != Outcome::kExpired) {
    fx_.log(kLogWarn, std::string("closing the session failed (") + outcome_name(reply.outcome) +
                          "); its leases free when it expires on the backend");
  }
  close_call_ = 0;
  maybe_finish_close(now);
}

void Node::maybe_finish_close(TimePoint now) {
  (void)now;
  if (!closing_ || close_call_ || status_ == SessionStatus::kClosed) return;
  if (session_clock_) session_clock_->end();
  status_ = SessionStatus::kClosed;
  std::vector<ContenderId> ids;
  for (auto& [cid, c] : contenders_) ids.push_back(cid);
  for (ContenderId cid : ids) {
    Contender& c = contenders_.at(cid);
    if (c.term) {
      std::shared_ptr<TermState> term = std::move(c.term);
      c.term.reset();
      if (term->revoke(RevokeReason::kStopped)) fx_.term_ended(cid, term);
      const RevokeReason why =
          c.handover_reason != RevokeReason::kNone ? c.handover_reason : term->revoked();
      ++metrics_.revocations[static_cast<int>(why)];
      if (c.handover_reason != RevokeReason::kNone) metrics_.handover.observe(now - c.handover_started);
      fx_.revoked(cid, term, why);
    }
    for (; c.pending_step_downs > 0; --c.pending_step_downs) fx_.stepped_down(cid);
    if (c.kind == ContenderKind::kLock && c.state != State::kReleasing) {
      fx_.lock_failed(cid, LockFailure::kCanceled);
    } else {
      fx_.stopped(cid);
    }
  }
  by_name_.clear();  // before the names it points into
  contenders_.clear();
  timers_.clear();
  session_timer_.reset();
  deadline_timer_.reset();
  calls_.clear();
  emit(SessionEvent::kClosed, "{\"session\":" + json_quote(session_id_) + "}");
  fx_.closed();
}

// ---------------------------------------------------------------------------
// Calls and timers

CallId Node::new_call(CallKind kind, const std::string& session, Duration timeout, TimePoint now) {
  const CallId id = next_call_++;
  Call& call = calls_[id];
  call.kind = kind;
  call.session = session;
  call.sent_at = now;
  arm(call.timeout, now + timeout, {TimerKind::kCall, id});
  return id;
}

void Node::on_call_timeout(CallId id, TimePoint now) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  if (it->second.abandoned) {
    // Keep the tombstone of an abandoned call a while, so that a late answer is
    // still recognised (a late acquire releases what it won), then forget it.
    const TimePoint until = it->second.sent_at + tombstone_life(cfg_);
    if (now < until) {
      arm(it->second.timeout, until, {TimerKind::kCall, id});
    } else {
      const std::string name = it->second.name;
      calls_.erase(it);
      answered_late(name, id, now);  // never answered: stop waiting for it
    }
    return;
  }
  // Answer it as timed out, and keep a tombstone so a late answer is recognised.
  const CallKind kind = it->second.kind;
  Call tomb = it->second;
  tomb.abandoned = true;
  tomb.timeout.reset();
  switch (kind) {
    case CallKind::kOpen: on_open(id, OpenReply{Outcome::kTimeout, {}, {}, "timed out"}, now); break;
    case CallKind::kKeepAlive:
      on_keep_alive(id, KeepAliveReply{Outcome::kTimeout, {}, {}, "timed out"}, now);
      break;
    case CallKind::kAcquire:
      on_acquire(id, AcquireReply{Outcome::kTimeout, 0, Duration(-1), "timed out"}, now);
      break;
    case CallKind::kRelease: on_release(id, DoneReply{Outcome::kTimeout, "timed out"}, now); break;
    case CallKind::kClose: on_close(id, DoneReply{Outcome::kTimeout, "timed out"}, now); break;
  }
  if (closed()) return;
  const bool acquire_of_this_session = kind == CallKind::kAcquire && tomb.session == session_id_;
  auto [slot, inserted] = calls_.emplace(id, std::move(tomb));
  if (inserted) arm(slot->second.timeout, now + tombstone_life(cfg_), {TimerKind::kCall, id});
  if (inserted && acquire_of_this_session) unanswered_by_name_[slot->second.name] = id;
}

void Node::arm(TimerSlot& slot, TimePoint at, TimerKey key) {
  disarm(slot);
  slot = timers_.emplace(at, key);
}

void Node::disarm(TimerSlot& slot) {
  if (slot) {
    timers_.erase(*slot);
    slot.reset();
  }
}

std::optional<TimePoint> Node::next_wakeup() const {
  if (timers_.empty()) return std::nullopt;
  return timers_.begin()->first;
}

void Node::on_timer(TimePoint now) {
  while (!timers_.empty() && timers_.begin()->first <= now) {
    const TimerKey key = timers_.begin()->second;
    timers_.erase(timers_.begin());
    switch (key.kind) {
      case TimerKind::kRenew:
        session_timer_.reset();
        on_session_timer(now);
        break;
      case TimerKind::kDeadline:
        deadline_timer_.reset();
        if (session_clock_ && !closing_ && status_ != SessionStatus::kOpening) {
          if (!session_clock_->valid()) {
            session_ended(RevokeReason::kDeadlinePassed, now);
          } else {
            arm(deadline_timer_, session_clock_->deadline(), {TimerKind::kDeadline, 0});
          }
        }
        break;
      case TimerKind::kCall: {
        auto it = calls_.find(key.id);
        if (it == calls_.end()) break;
        it->second.timeout.reset();
        on_call_timeout(key.id, now);
        break;
      }
      case TimerKind::kContender: {
        Contender* c = find(key.id);
        if (!c) break;
        c->timer.reset();
        on_contender_timer(*c, now);
        break;
      }
    }
  }
  pump_attempts(now);
}

NodeView Node::view() const {
  NodeView v;
  v.status = status_;
  v.session_id = session_id_;
  v.remaining = session_clock_ ? session_clock_->remaining() : Duration::zero();
  v.renew_period = renew_period_;
  v.lease_shortened = lease_shortened_;
  for (const auto& [cid, c] : contenders_) {
    const char* state = "candidate";
    switch (c.state) {
      case State::kWaiting: state = "waiting"; break;
      case State::kCandidate: state = "candidate"; break;
      case State::kAcquiring: state = "acquiring"; break;
      case State::kLeader: state = "leader"; break;
      case State::kDraining: state = "draining"; break;
      case State::kReleasing: state = "releasing"; break;
      case State::kCooldown: state = "cooldown"; break;
    }
    v.contenders.push_back({cid, c.name, c.kind, state, c.term ? c.term->token() : 0,
                            c.term ? c.term->remaining() : Duration::zero()});
  }
  v.sessions_opened = sessions_opened_;
  v.keep_alives = keep_alives_;
  v.acquires = acquires_;
  v.releases = releases_;
  v.terms = terms_;
  v.leases_held = 0;
  for (const auto& [cid, c] : contenders_) v.leases_held += c.term ? 1 : 0;
  v.metrics = metrics_;
  return v;
}

}  // namespace simba
