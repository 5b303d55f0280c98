// The Node's construction, its timer dispatch, its backend calls and its view.
// The session lives in node_session.cpp, the contenders' attempts in
// node_contenders.cpp, terms and handovers in node_handover.cpp.
#include "core/node.h"

#include <algorithm>
#include <functional>
#include <utility>

namespace simba {

namespace {

// How long the answer of an abandoned call is still recognised, so that a late
// acquire reply can release what it won.
Duration tombstone_life(const Config& cfg) { return cfg.lease_duration * 2; }

// What a call that timed out reports (the backends' logs say the same).
constexpr const char* kNoAnswer = "no answer within the call's timeout";

}  // namespace

const char* session_status_name(SessionStatus s) {
  switch (s) {
    case SessionStatus::kOpening:
      return "OPENING";
    case SessionStatus::kLive:
      return "LIVE";
    case SessionStatus::kSuspended:
      return "SUSPENDED";
    case SessionStatus::kClosed:
      return "CLOSED";
  }
  return "UNKNOWN";
}

const char* session_event_name(SessionEvent e) {
  switch (e) {
    case SessionEvent::kOpened:
      return "OPENED";
    case SessionEvent::kLive:
      return "LIVE";
    case SessionEvent::kSuspended:
      return "SUSPENDED";
    case SessionEvent::kExpired:
      return "EXPIRED";
    case SessionEvent::kClosed:
      return "CLOSED";
    case SessionEvent::kLeaseShortened:
      return "LEASE_SHORTENED";
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

std::vector<Contender*> Node::contenders_by_address() const {
  std::vector<Contender*> all;
  all.reserve(contenders_.size());
  contenders_.for_each([&all](Contender* c) { all.push_back(c); });
  std::sort(all.begin(), all.end(), std::less<Contender*>());
  return all;
}

std::vector<Contender*> Node::contenders_in_order() const {
  // By address first: the sort by id then reads the contenders about in order.
  std::vector<Contender*> all = contenders_by_address();
  // Ids grow with each contender added.
  std::sort(all.begin(), all.end(),
            [](const Contender* a, const Contender* b) { return a->id < b->id; });
  return all;
}

// ---------------------------------------------------------------------------
// Calls

CallId Node::new_call(CallKind kind, const std::string& session, Duration timeout, TimePoint now) {
  const CallId id = next_call_++;
  Call& call = calls_[id];
  call.kind = kind;
  call.session = session;
  call.sent_at = now;
  arm(call.timeout, now + timeout, {TimerKind::kCall, id});
  return id;
}

std::optional<Node::Call> Node::take_call(CallId id) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return std::nullopt;
  Call call = std::move(it->second);
  disarm(call.timeout);
  calls_.erase(it);
  return call;
}

void Node::on_call_timeout(CallId id, TimePoint now) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  if (!it->second.timed_out) {
    // The one timeout of a call (ADR 0039): the backend hears of it.
    it->second.timed_out = true;
    fx_.abandon(id);
  }
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
  answer_timed_out(id, kind, now);
  if (closed()) return;
  const bool acquire_of_this_session = kind == CallKind::kAcquire && tomb.session == session_id_;
  auto [slot, inserted] = calls_.emplace(id, std::move(tomb));
  if (inserted) arm(slot->second.timeout, now + tombstone_life(cfg_), {TimerKind::kCall, id});
  if (inserted && acquire_of_this_session) unanswered_by_name_[slot->second.name] = id;
}

void Node::answer_timed_out(CallId id, CallKind kind, TimePoint now) {
  switch (kind) {
    case CallKind::kOpen:
      on_open(id, OpenReply{Outcome::kTimeout, {}, {}, kNoAnswer}, now);
      break;
    case CallKind::kKeepAlive:
      on_keep_alive(id, KeepAliveReply{Outcome::kTimeout, {}, {}, kNoAnswer}, now);
      break;
    case CallKind::kAcquire:
      on_acquire(id, AcquireReply{Outcome::kTimeout, 0, Duration(-1), kNoAnswer}, now);
      break;
    case CallKind::kRelease:
      on_release(id, DoneReply{Outcome::kTimeout, kNoAnswer}, now);
      break;
    case CallKind::kClose:
      on_close(id, DoneReply{Outcome::kTimeout, kNoAnswer}, now);
      break;
  }
}

// ---------------------------------------------------------------------------
// Timers

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

void Node::arm(Contender& c, TimePoint at) {
  disarm(c);
  c.timer = timers_.emplace(at, TimerKey{TimerKind::kContender, c.id});
  c.timer_armed = true;
}

void Node::disarm(Contender& c) {
  if (c.timer_armed) {
    timers_.erase(c.timer);
    c.timer_armed = false;
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
        on_deadline_timer(now);
        break;
      case TimerKind::kCall: {
        auto it = calls_.find(key.id);
        if (it == calls_.end()) break;
        it->second.timeout.reset();
        on_call_timeout(key.id, now);
        break;
      }
      case TimerKind::kReleaseRetry: {
        auto it = release_retries_.find(key.id);
        if (it == release_retries_.end()) break;
        it->second.timer.reset();
        on_release_retry(key.id, now);
        break;
      }
      case TimerKind::kContender: {
        Contender* c = find(key.id);
        if (!c) break;
        c->timer_armed = false;
        on_contender_timer(*c, now);
        break;
      }
    }
  }
  pump_attempts(now);
}

// ---------------------------------------------------------------------------
// View

NodeView Node::view() const {
  NodeView v;
  v.status = status_;
  v.session_id = session_id_;
  v.remaining = session_clock_ ? session_clock_->remaining() : Duration::zero();
  v.renew_period = renew_period_;
  v.lease_shortened = lease_shortened_;
  v.leases_held = 0;
  for (const Contender* c : contenders_in_order()) {
    const char* state = "candidate";
    switch (c->state) {
      case State::kWaiting:
        state = "waiting";
        break;
      case State::kCandidate:
        state = "candidate";
        break;
      case State::kAcquiring:
        state = "acquiring";
        break;
      case State::kLeader:
        state = "leader";
        break;
      case State::kDraining:
        state = "draining";
        break;
      case State::kReleasing:
        state = "releasing";
        break;
      case State::kCooldown:
        state = "cooldown";
        break;
    }
    v.contenders.push_back({c->id, c->name.str(), c->kind, state, c->term ? c->term->token() : 0,
                            c->term ? c->term->remaining() : Duration::zero()});
    v.leases_held += c->term ? 1 : 0;
  }
  v.sessions_opened = sessions_opened_;
  v.keep_alives = keep_alives_;
  v.acquires = acquires_;
  v.releases = releases_;
  v.terms = terms_;
  v.metrics = metrics_;
  return v;
}

}  // namespace simba
