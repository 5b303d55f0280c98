// The simulator's checker of the Effects callbacks: it follows every contender
// of every node and fails the schedule on a breach of the invariants in sim.h.
#include <algorithm>
#include <sstream>

#include "sim/sim_world.h"

namespace simba::sim::detail {

// ---------------------------------------------------------------------------
// Callbacks: the checker follows every contender.

Track& Sim::track(NodeBox& b, ContenderId who, const char* what) {
  if (b.closed) fail(node_str(b) + " " + what + " after closed()");
  auto it = b.cs.find(who);
  if (it != b.cs.end()) {
    if (it->second.finished) {
      fail("[nothing after stopped] " + node_str(b) + " " + what + " for contender " +
           std::to_string(who) + " after it finished");
    }
    return it->second;
  }
  if (b.adding && b.adding->id == who) {
    Track& t = b.cs[who];
    t.name = b.adding->name;
    t.kind = b.adding->kind;
    return t;
  }
  fail(node_str(b) + " " + what + " for unknown contender " + std::to_string(who));
}

void Sim::abandon(NodeBox& b, ContenderId who) {
  for (auto& [id, a] : b.acq) {
    if (a.who == who) a.abandoned = true;
  }
}

void Sim::fx_term_ended(NodeBox& b, ContenderId who, const TermRef& term) {
  Track& t = track(b, who, "term_ended");
  if (tr_) {
    T() << node_str(b) << " term_ended contender " << who << " " << term->name() << " token "
        << term->token() << " " << revoke_reason_name(term->revoked()) << "\n";
  }
  if (!t.term || t.term->term != term) {
    fail("[elected/revoked pairing] " + node_str(b) + " term_ended for a term contender " +
         std::to_string(who) + " does not hold");
  }
  if (t.term->term_ended_cb)
    fail("[elected/revoked pairing] term_ended twice for " + term_str(*t.term));
  if (t.term->work_cooperative) {
    schedule_work_exit(b, who, term->token(), between(Duration(0), p_.cfg.lease_duration / 4));
  }
  if (term->revoked() == RevokeReason::kNone)
    fail("term_ended for an unrevoked " + term_str(*t.term));
  if (term->valid())
    fail("[revoked terms are invalid] term_ended for a valid " + term_str(*t.term));
  t.term->term_ended_cb = true;
}

void Sim::fx_elected(NodeBox& b, ContenderId who, const TermRef& term) {
  Track& t = track(b, who, "elected");
  if (tr_) {
    T() << node_str(b) << " ELECTED contender " << who << " " << term->name() << " token "
        << term->token() << " " << alias(term->session_id()) << " remaining "
        << to_ms(term->remaining()) << " ms\n";
  }
  if (t.term) fail("[elected/revoked pairing] elected again before revoked: " + term_str(*t.term));
  if (term->name() != t.name) fail("elected for " + term->name() + " on a contender of " + t.name);
  // Invariant 5: adopted only from the reply to the contender's current attempt.
  const CallId call = b.delivering_acquire;
  if (!call) fail("[no abandoned attempt] elected outside an acquire reply: " + term->name());
  auto it = b.acq.find(call);
  if (it == b.acq.end()) {
    fail("[no abandoned attempt] elected from acquire call " + std::to_string(call) +
         " that is long finished");
  }
  const AcqTrack& a = it->second;
  const std::string ctx = node_str(b) + " contender " + std::to_string(who) + " " + term->name() +
                          " token " + std::to_string(term->token()) + " from call " +
                          std::to_string(call);
  if (a.who != who)
    fail("[no abandoned attempt] " + ctx + " sent for contender " + std::to_string(a.who));
  if (a.name != term->name()) fail("[no abandoned attempt] " + ctx + " sent for " + a.name);
  if (a.abandoned) fail("[no abandoned attempt] " + ctx + ": that attempt was abandoned");
  // Timed out: its timeout was due when the node last ran its timers.
  if (b.last_timer_run >= a.sent_at + a.timeout) {
    fail("[no abandoned attempt] " + ctx + ": that call timed out");
  }
  if (t.last_acquire != call) {
    fail("[no abandoned attempt] " + ctx + ": not the current attempt (" +
         std::to_string(t.last_acquire) + ")");
  }
  if (term->session_id() != a.session || a.session != b.session || !b.session_live) {
    fail("[no abandoned attempt] " + ctx + ": session " + alias(term->session_id()) +
         ", call sent in " + alias(a.session) + ", node's session " + alias(b.session) +
         (b.session_live ? "" : " (ended)"));
  }
  // A reader's token is its name's write epoch: 0 before any writer.
  if (term->token() == 0 && t.kind != ContenderKind::kRead) fail(ctx + ": token 0");
  if (!term->valid()) fail(ctx + ": the new term is not valid");
  uint64_t permit = 0;
  if (is_permit(t.kind)) {
    // Permits of one name are granted side by side and elected in any order:
    // each permit (its id) is elected once.
    auto c = b.owned.find(who);
    permit = c == b.owned.end() ? 0 : c->second->permit();
    const std::string key =
        permit_resource(permit_kind_of(t.kind), term->name()) + "#" + std::to_string(permit);
    if (permit == 0 || !permits_elected_.insert(key).second) {
      fail("[a permit is elected once] " + ctx + ": permit " + key);
    }
  } else {
    // Invariant 2: tokens strictly increasing per name. A term of a session the
    // store ended early (expire_session) may come after a later one: that is the
    // fault the fencing token covers, not the node's doing.
    uint64_t& high = max_token_[term->name().str()];
    if (term->token() <= high) {
      auto h = hooked_.find(term->session_id());
      if (h == hooked_.end() || h->second > now()) {
        fail("[tokens increase] " + ctx + " after token " + std::to_string(high) +
             " was already elected");
      }
    }
    high = std::max(high, term->token());
  }

  auto rec = std::make_shared<TermRec>();
  rec->term = term;
  rec->slot = b.slot;
  rec->inst = b.inst;
  rec->who = who;
  rec->kind = t.kind;
  rec->permit = permit;
  rec->elected_at = now();
  t.term = rec;
  terms_.push_back(rec);
  if (t.with_work) {
    // Most work returns soon after its term ends; some returns on its own while
    // leading (only amid the chaos: it hands the lease over); some ignores
    // revocation and runs on, up to three leases.
    rec->work_running = true;
    const double mode = unit();
    if (faults_ && mode < 0.2) {
      schedule_work_exit(b, who, term->token(), between(Duration(0), p_.cfg.lease_duration));
    } else if (mode < 0.3) {
      schedule_work_exit(b, who, term->token(), between(Duration(0), p_.cfg.lease_duration * 3));
    } else {
      rec->work_cooperative = true;
    }
  }
  ++stats_.terms;
  if (t.kind == ContenderKind::kLock) ++stats_.lock_terms;
  if (is_permit(t.kind)) ++stats_.permit_terms;
  if (t.kind == ContenderKind::kWrite) ++stats_.write_terms;
}

void Sim::fx_revoked(NodeBox& b, ContenderId who, const TermRef& term, RevokeReason reason) {
  Track& t = track(b, who, "revoked");
  if (tr_) {
    T() << node_str(b) << " REVOKED contender " << who << " " << term->name() << " token "
        << term->token() << " " << revoke_reason_name(reason) << "\n";
  }
  if (!t.term || t.term->term != term) {
    fail("[elected/revoked pairing] " + node_str(b) + " revoked " + term->name() + " token " +
         std::to_string(term->token()) + " that contender " + std::to_string(who) +
         " does not hold");
  }
  TermRec& r = *t.term;
  if (!r.term_ended_cb) fail("[elected/revoked pairing] revoked before term_ended: " + term_str(r));
  if (reason == RevokeReason::kNone || reason != term->revoked()) {
    fail(std::string("revoked with reason ") + revoke_reason_name(reason) + " for " + term_str(r));
  }
  if (term->valid()) fail("[revoked terms are invalid] " + term_str(r));
  if (stable() && (reason == RevokeReason::kDeadlinePassed ||
                   reason == RevokeReason::kSessionExpired || reason == RevokeReason::kTakenOver)) {
    fail("[stability] without faults a term was lost: " + std::string(revoke_reason_name(reason)) +
         " " + term_str(r));
  }
  r.revoked_cb = true;
  t.term.reset();
  ++stats_.revoked;
  switch (reason) {
    case RevokeReason::kTakenOver:
      ++stats_.taken_over;
      break;
    case RevokeReason::kDeadlinePassed:
      ++stats_.deadline_passed;
      break;
    case RevokeReason::kSessionExpired:
      ++stats_.session_expired;
      break;
    case RevokeReason::kSteppedDown:
      ++stats_.stepped_down;
      break;
    default:
      break;
  }
}

void Sim::fx_lock_failed(NodeBox& b, ContenderId who, LockFailure why) {
  Track& t = track(b, who, "lock_failed");
  if (tr_)
    T() << node_str(b) << " lock_failed contender " << who << " " << failure_name(why) << "\n";
  if (t.kind == ContenderKind::kElection) fail(node_str(b) + " lock_failed for an election");
  // Every holder of a simulated semaphore names its one size.
  if (why == LockFailure::kRefused) {
    ++stats_.permit_refused;
    fail(node_str(b) + " contender " + std::to_string(who) + " refused a semaphore's size");
  }
  if (t.term) fail("[elected/revoked pairing] lock_failed while holding " + term_str(*t.term));
  t.finished = true;
  abandon(b, who);
}

void Sim::fx_stopped(NodeBox& b, ContenderId who) {
  Track& t = track(b, who, "stopped");
  if (tr_) T() << node_str(b) << " stopped contender " << who << "\n";
  if (t.term) fail("[elected/revoked pairing] stopped while holding " + term_str(*t.term));
  if (t.step_acks != t.step_requests) {
    fail(node_str(b) + " contender " + std::to_string(who) + " stopped with " +
         std::to_string(t.step_requests - t.step_acks) + " step-downs unanswered");
  }
  t.finished = true;
  abandon(b, who);
}

void Sim::fx_stepped_down(NodeBox& b, ContenderId who) {
  Track& t = track(b, who, "stepped_down");
  if (tr_) T() << node_str(b) << " stepped_down contender " << who << "\n";
  if (t.term) fail("stepped_down before the revoked() of " + term_str(*t.term));
  if (++t.step_acks > t.step_requests) fail(node_str(b) + " stepped_down more often than asked");
}

void Sim::fx_session_event(NodeBox& b, SessionEvent ev, const std::string& detail) {
  if (b.closed) fail(node_str(b) + " session_event after closed()");
  const std::string id = json_session(detail);
  if (tr_) T() << node_str(b) << " session " << session_event_name(ev) << " " << alias(id) << "\n";
  switch (ev) {
    case SessionEvent::kOpened: {
      auto it = session_index_.find(id);
      if (it == session_index_.end() || sessions_[it->second].slot != b.slot ||
          sessions_[it->second].inst != b.inst) {
        fail(node_str(b) + " opened a session it did not ask for: " + alias(id));
      }
      b.session = id;
      b.session_live = true;
      break;
    }
    case SessionEvent::kExpired:
      if (stable())
        fail("[stability] without faults " + node_str(b) + "'s session ended: " + detail);
      if (id == b.session) b.session_live = false;
      for (auto& [call, a] : b.acq) {
        if (a.session == id) a.abandoned = true;
      }
      break;
    case SessionEvent::kClosed:
      b.session_live = false;
      for (auto& [call, a] : b.acq) a.abandoned = true;
      break;
    case SessionEvent::kLeaseShortened:
      if (p_.lease_cap == Duration::max()) {
        fail(node_str(b) + " lease shortened, but the store grants the full lease: " + detail);
      }
      break;
    case SessionEvent::kLive:
    case SessionEvent::kSuspended:
      break;
  }
}

void Sim::fx_watch(NodeBox& b, const std::string& name, bool on) {
  if (b.closed) fail(node_str(b) + (on ? " watch" : " unwatch") + " after closed()");
  if (tr_) T() << node_str(b) << (on ? " watch " : " unwatch ") << name << "\n";
  const bool changed = on ? b.watched.insert(name).second : b.watched.erase(name) == 1;
  if (!changed) {
    fail("[balanced watches] " + node_str(b) + (on ? " watch of " : " unwatch of ") + name +
         (on ? ", watched already" : ", not watched"));
  }
}

void Sim::fx_closed(NodeBox& b) {
  if (b.closed) fail(node_str(b) + " closed() twice");
  if (tr_) T() << node_str(b) << " CLOSED\n";
  if (!b.watched.empty()) {
    fail("[balanced watches] " + node_str(b) + " closed() still watching " + *b.watched.begin());
  }
  for (const auto& [id, t] : b.cs) {
    if (!t.finished)
      fail(node_str(b) + " closed() with contender " + std::to_string(id) + " not finished");
    if (t.term)
      fail("[elected/revoked pairing] closed() with " + term_str(*t.term) + " not revoked");
  }
  // Invariant 8: a failed close is sent again until near the session's
  // deadline, so one completed well before it succeeded and freed the leases.
  const Duration slack = std::max(p_.cfg.renew_interval(), p_.cfg.min_backoff);
  if (!b.close_session.empty() && now() + slack < b.close_deadline) {
    for (const std::string& name : p_.lock_names) {
      observing_ = true;
      const MemoryStore::LeaseView v = store_->lease(name);
      observing_ = false;
      if (v.holder == b.close_session) {
        fail("[a close frees the leases] " + node_str(b) + " closed() " +
             std::to_string(to_ms(b.close_deadline - now())) + " ms before the deadline of " +
             alias(b.close_session) + ", which still holds " + name + " token " +
             std::to_string(v.token));
      }
    }
  }
  b.closed = true;
  if (!final_) {
    const int slot = b.slot;
    push(now() + between(Duration(0), ms(300)), [this, slot] {
      if (!final_ && !slots_[static_cast<size_t>(slot)]) spawn(slot);
    });
  }
}

void Sim::fx_log(NodeBox& b, int level, const std::string& line) {
  if (!tr_) return;
  std::string text = line;
  for (const SessionRec& s : sessions_) {
    for (size_t k = text.find(s.id); k != std::string::npos; k = text.find(s.id, k)) {
      text.replace(k, s.id.size(), s.alias);
    }
  }
  T() << node_str(b) << " log(" << level << ") " << text << "\n";
}

}  // namespace simba::sim::detail
