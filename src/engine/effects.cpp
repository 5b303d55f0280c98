// The Effects adapter: what the sans-I/O core (Node) asks for, turned into
// backend calls, timers and callbacks. Everything here runs on the loop's owner
// (engine/loop.h).
#include <algorithm>
#include <optional>

#include "core/log_level.h"
#include "engine/client.h"

namespace simba::engine {

namespace {

Code lock_failure_code(LockFailure why) {
  switch (why) {
    case LockFailure::kTimeout:
      return Code::kETimedOut;
    case LockFailure::kBusy:
      return Code::kEBusy;
    case LockFailure::kBackend:
      return Code::kEBackend;
    case LockFailure::kCanceled:
      return Code::kECanceled;
    case LockFailure::kRefused:
      return Code::kEState;  // a semaphore of another size (ADR 0046)
  }
  return Code::kEBackend;
}

}  // namespace

void Client::settle() {
  if (!node_) return;
  status_.store(static_cast<int>(node_->status()));
  if (node_->status() == SessionStatus::kLive || node_->closed()) {
    for (auto& w : live_waiters_) {
      w->finish(node_->closed() ? Code::kEClosed : Code::kOk,
                node_->closed() ? "the client closed" : std::string());
    }
    live_waiters_.clear();
  }
  if (node_closed_) {
    // A borrower hands the close back to the loop thread (needs_loop_thread).
    if (!loop_.torn_down() && !loop_.borrowed_here()) teardown();
    return;
  }
  std::optional<TimePoint> next = node_->next_wakeup();
  if (auto read = next_observer_read(); read && (!next || *read < *next)) next = read;
  if (!own_deadlines_.empty() && (!next || own_deadlines_.begin()->first < *next)) {
    next = own_deadlines_.begin()->first;
  }
  if (next) {
    const int64_t delay = std::max<int64_t>(0, to_ms_ceil(*next - now()));
    loop_.start_timer(static_cast<uint64_t>(delay));
  } else {
    loop_.stop_timer();
  }
}

void Client::timer_fired() {
  node_->on_timer(now());
  expire_own_calls(now());
  poll_observers();
  settle();
}

// The node closed: run what is left for the loop, then close every handle so
// that the loop ends.
void Client::teardown() {
  loop_.mark_torn_down();
  {
    std::lock_guard<std::mutex> lock(mailbox_->mu);
    mailbox_->client = nullptr;  // work threads still running post nothing more
  }
  loop_.stop_timer();
  while (loop_.has_deferred()) loop_.run_deferred();
  loop_.stop_accepting();
  loop_.drain_commands();  // late commands find the node closed and answer Code::kEClosed
  while (loop_.has_deferred()) loop_.run_deferred();
  for (const auto& w : inspect_waiters_) w->finish(Code::kEClosed);
  inspect_waiters_.clear();
  for (const auto& o : observers_) o->removed = true;
  observers_.clear();
  own_calls_.clear();  // the backend drops them unanswered
  own_deadlines_.clear();
  backend_->shutdown([this] { loop_.close_handles(); });
}

void Client::emit_log(int level, const std::string& line) {
  if (!hooks_.log || level < hooks_.log_min_level) return;
  // The logger is promised the loop thread (simba.h): a borrower defers it.
  if (loop_.borrowed_here() && loop_.defer([this, level, line] { hooks_.log(level, line); }))
    return;
  hooks_.log(level, line);
}

void Client::send_open(CallId call, Duration lease, Duration timeout) {
  backend_calls_[call] = backend_->open_session(lease, timeout, [this, call](const OpenReply& r) {
    backend_calls_.erase(call);
    node_->on_open(call, r, now());
    settle();
  });
}

void Client::send_keep_alive(CallId call, const std::string& session, Duration lease,
                             Duration timeout) {
  backend_calls_[call] =
      backend_->keep_alive(session, lease, timeout, [this, call](const KeepAliveReply& r) {
        backend_calls_.erase(call);
        node_->on_keep_alive(call, r, now());
        settle();
      });
}

void Client::send_acquire(CallId call, const std::string& session, const std::string& name,
                          Duration timeout) {
  backend_calls_[call] =
      backend_->acquire(session, name, timeout, [this, call](const AcquireReply& r) {
        backend_calls_.erase(call);
        node_->on_acquire(call, r, now());
        settle();
      });
}

void Client::send_release(CallId call, const std::string& session, const std::string& name,
                          uint64_t token, Duration timeout) {
  backend_calls_[call] =
      backend_->release(session, name, token, timeout, [this, call](const DoneReply& r) {
        backend_calls_.erase(call);
        node_->on_release(call, r, now());
        settle();
      });
}

void Client::send_acquire_permit(CallId call, const std::string& session, const std::string& name,
                                 const PermitAsk& ask, Duration timeout) {
  backend_calls_[call] =
      backend_->acquire_permit(session, name, ask, timeout, [this, call](const AcquireReply& r) {
        backend_calls_.erase(call);
        node_->on_acquire(call, r, now());
        settle();
      });
}

void Client::send_release_permit(CallId call, const std::string& session, const std::string& name,
                                 EntryRef entry, uint64_t token, Duration timeout) {
  backend_calls_[call] = backend_->release_permit(session, name, entry.kind, entry.permit, token,
                                                  timeout, [this, call](const DoneReply& r) {
                                                    backend_calls_.erase(call);
                                                    node_->on_release(call, r, now());
                                                    settle();
                                                  });
}

void Client::send_close(CallId call, const std::string& session, Duration timeout) {
  backend_calls_[call] =
      backend_->close_session(session, timeout, [this, call](const DoneReply& r) {
        backend_calls_.erase(call);
        node_->on_close(call, r, now());
        settle();
      });
}

// The node's timeout of `call` passed: the backend ends it (on a later loop
// turn, never inside this effect) and its answer reaches the node as a late one.
void Client::abandon(CallId call) {
  auto it = backend_calls_.find(call);
  if (it == backend_calls_.end()) return;
  const Backend::CallRef ref = it->second;
  backend_calls_.erase(it);
  backend_->abandon(ref);
}

void Client::inspect_backend(const std::vector<std::string>& names, Duration timeout,
                             InspectDone done) {
  const uint64_t own = ++next_own_call_;
  OwnCall& call = own_calls_[own];
  call.deadline = now() + timeout;
  call.done = std::move(done);
  own_deadlines_.emplace(call.deadline, own);
  // The backend never answers inside the call, so `call` is still there.
  call.ref = backend_->inspect(names, timeout, [this, own](const InspectReply& r) {
    auto it = own_calls_.find(own);
    if (it == own_calls_.end()) return;  // abandoned: its answer is dropped
    InspectDone fn = std::move(it->second.done);
    own_deadlines_.erase({it->second.deadline, own});
    own_calls_.erase(it);
    fn(r);
  });
}

void Client::expire_own_calls(TimePoint now) {
  while (!own_deadlines_.empty() && own_deadlines_.begin()->first <= now) {
    const uint64_t own = own_deadlines_.begin()->second;
    own_deadlines_.erase(own_deadlines_.begin());
    auto it = own_calls_.find(own);
    if (it == own_calls_.end()) continue;
    const Backend::CallRef ref = it->second.ref;
    InspectDone fn = std::move(it->second.done);
    own_calls_.erase(it);
    backend_->abandon(ref);
    InspectReply timed_out;
    timed_out.outcome = Outcome::kTimeout;
    timed_out.error = "no answer within the call's timeout";
    fn(timed_out);
  }
}

void Client::watch(const std::string& name) { add_watcher(name); }

void Client::unwatch(const std::string& name) { drop_watcher(name); }

// The backend hears of the first watcher of a name and of its last.
void Client::add_watcher(const std::string& name) {
  if (++watchers_[name] == 1) backend_->watch(name);
}

void Client::drop_watcher(const std::string& name) {
  auto it = watchers_.find(name);
  if (it == watchers_.end()) return;
  if (--it->second > 0) return;
  watchers_.erase(it);
  backend_->unwatch(name);
}

TermRef Client::new_term(Contender& who, uint64_t token, std::shared_ptr<SessionClock> session) {
  if (who.kind == ContenderKind::kElection) {
    // Its name is the election's, inside the election's block, which the
    // term holds through its queue.
    return TermRef(new Term(LeaseName::borrow(who.name), token, std::move(session),
                            election_of(who).queue_ref()));
  }
  if (is_permit(who.kind)) {
    return TermRef(new PermitTerm(who.name, token, std::move(session), lock_of(who).queue, who.id,
                                  who.kind, who.permit()));
  }
  return TermRef(new LockTerm(who.name, token, std::move(session), lock_of(who).queue, who.id));
}

void Client::in_order(ContenderId who, bool hand_off, std::function<void()> fn) {
  auto waiting = handed_off_.find(who);
  if (!hand_off && waiting == handed_off_.end()) {
    fn();
    return;
  }
  ++handed_off_[who];
  const bool deferred = loop_.defer([this, who, fn] {
    fn();
    if (auto w = handed_off_.find(who); w != handed_off_.end() && --w->second == 0) {
      handed_off_.erase(w);
    }
  });
  if (deferred) return;
  // Torn down: only the loop thread runs now, and nothing waits any more.
  handed_off_.erase(who);
  fn();
}

void Client::elected(Contender& who, const TermRef& term) {
  auto* t = static_cast<Term*>(term.get());  // made by new_term()
  // The engine's reference, dropped at revoked(): the node reports each
  // term once to each (its contender's `term` is this one meanwhile).
  t->retain();
  if (who.kind == ContenderKind::kElection) {
    ElectionRef el(&election_of(who));
    if (el->work()) {
      start_work(el, t, term->token());
      return;
    }
    t->retain();
    // Whether a host's executor takes onElected is asked on the loop thread
    // only: a borrower hands the announcement, and what follows it, there.
    in_order(who.id, host_executor() && loop_.borrowed_here(),
             [this, el, t, token = term->token()] { announce(el, t, token); });
    return;
  }
  Lock& lock = lock_of(who);
  t->retain();  // the caller's reference
  t->as_lock()->caller_refs = 1;
  auto done = std::move(lock.done);
  lock.done = nullptr;
  if (done) done(Code::kOk, t, {});
}

void Client::announce(const ElectionRef& el, Term* t, uint64_t token) {
  const auto posted = el->queue().post_or_reject([el, t, calls = hooks_.listener_calls] {
    if (!el->detached && el->listener.elected) calls->elected(el->listener, t);
    t->release();
  });
  if (posted != SerialQueue::Posted::kRejected) return;
  // The executor refused onElected: nobody learns of the term. Step down
  // for one lease duration, and deliver no onRevoked for it either, so
  // that callbacks stay paired (seed, "Callbacks and Lifecycle").
  t->release();
  t->unannounced = true;
  log(kLogWarn, "the callback executor rejected onElected of " + el->name() + " token " +
                    std::to_string(token) + ": stepping down for one lease duration");
  loop_.defer([this, el] {
    if (loop_.torn_down()) return;
    std::vector<DoneFn>& dones = el->rare().step_down_dones;
    dones.push_back(nullptr);  // acknowledged to nobody
    if (!node_->step_down(*el, cfg_.lease_duration, now())) dones.pop_back();
    settle();
  });
}

void Client::revoked(Contender& who, const TermRef& term) {
  auto* t = static_cast<Term*>(term.get());  // elected() holds a reference
  const RevokeReason reason = t->revoked();
  ElectionRef el;
  if (who.kind == ContenderKind::kElection) el = ElectionRef(&election_of(who));
  in_order(who.id, false, [el, t, reason, calls = hooks_.listener_calls] {
    if (t->unannounced) {
      t->release();  // its onElected never ran: no onRevoked either
      return;
    }
    std::function<void()> then;
    if (el) {
      then = [el, t, reason, calls] {
        if (!el->detached && el->listener.revoked) calls->revoked(el->listener, t, reason);
      };
    }
    t->deliver_revoked(std::move(then));
    t->release();
  });
}

void Client::lock_failed(Contender& who, LockFailure why) {
  std::unique_ptr<Lock> lock(&lock_of(who));  // the node let go of it
  std::string detail;
  if (why == LockFailure::kRefused) {
    // The node left the size the semaphore has in the contender (ADR 0046).
    detail = "semaphore " + lock->name.str() + " has " + std::to_string(who.size()) +
             " permits, not " + std::to_string(lock->asked.permits);
  }
  if (lock->done) lock->done(lock_failure_code(why), nullptr, detail);
}

void Client::stopped(Contender& who) {
  if (who.kind == ContenderKind::kElection) {
    ElectionRef el(&election_of(who));
    election_of(who).release();  // the node let go of it: its link's reference
    const ContenderId id = who.id;
    DoneFn done;
    if (Election::Rare* rare = el->rare_if_made()) done.swap(rare->stop_done);
    // Pending step-down completions were acknowledged before stopped().
    auto finish = [el, done] {
      if (done && el->runs_dones()) done(Code::kOk);
      std::vector<std::shared_ptr<Waiter>> waiters;
      {
        std::lock_guard<std::mutex> lock(el->mu());
        el->stopped = true;
        if (Election::Rare* r = el->rare_if_made()) waiters.swap(r->stop_waiters);
      }
      for (auto& w : waiters) w->finish(Code::kOk);
    };
    in_order(id, false, [el, finish] {
      if (!el->queue().post(finish)) finish();
    });
    return;
  }
  std::unique_ptr<Lock> lock(&lock_of(who));  // the node let go of it
  if (lock->released) lock->released->finish(Code::kOk);
  if (lock->release_then) {
    // In order with the term's on_revoked hand-off, so that it runs after them.
    in_order(who.id, false, [q = lock->queue, then = std::move(lock->release_then)]() mutable {
      run_last(*q, std::move(then));
    });
  }
}

void Client::stepped_down(Contender& who) {
  Election& e = election_of(who);
  Election::Rare* rare = e.rare_if_made();
  if (!rare || rare->step_down_dones.empty()) return;
  std::vector<DoneFn>& dones = rare->step_down_dones;
  DoneFn done = std::move(dones.front());
  dones.erase(dones.begin());
  if (!done) return;
  in_order(who.id, false, [el = ElectionRef(&e), done] {
    el->queue().post([el, done] {
      if (el->runs_dones()) done(Code::kOk);
    });
  });
}

void Client::session_event(SessionEvent ev, const std::string& detail_json) {
  event_queue_->post([this, ev, detail_json] {
    EventFn fn;
    {
      std::lock_guard<std::mutex> lock(event_mu_);
      fn = event_sink_;
    }
    if (fn) fn(ev, detail_json);
  });
}

void Client::closed() { node_closed_ = true; }

void Client::log(int level, const std::string& line) { emit_log(level, line); }

}  // namespace simba::engine
