// The phases of a schedule (chaos, the quiet stretch, the final close) and the
// invariants checked after every event and in the quiet stretch.
#include <algorithm>
#include <iterator>
#include <set>
#include <sstream>

#include "sim/sim_world.h"

namespace simba::sim::detail {

// ---------------------------------------------------------------------------
// Phases.

void Sim::end_chaos() {
  faults_ = false;
  app_frozen_ = true;
  if (tr_)
    T() << "chaos ends; faults settle until " << t_str(std::max(now(), settle_until_)) << "\n";
  if (p_.quiet) {
    push(std::max(now(), settle_until_), [this] { start_quiet(); });
  } else {
    start_final();
  }
}

void Sim::start_quiet() {
  quiet_ = true;
  quiet_start_ = now();
  if (tr_) T() << "quiet stretch starts\n";
  const TimePoint end = now() + ms(2000);
  for (TimePoint t = now() + ms(20); t < end; t += ms(20)) push(t, [this] { check_orphans(); });
  push(end, [this] {
    check_orphans();
    check_liveness();
    start_final();
  });
}

void Sim::start_final() {
  final_ = true;
  faults_ = false;
  app_frozen_ = true;
  if (tr_) T() << "closing every node\n";
  for (auto& bp : slots_) {
    if (!bp || bp->closed || bp->closing) continue;
    to_node(now(), bp->slot, bp->inst, [this](NodeBox& b) {
      if (!b.closing) close_node(b);
    });
  }
  push(now() + ms(5000), [this] {
    if (!all_closed()) fail("a node did not finish closing within 5 s");
  });
}

// What TermState::valid() answers now, computed without its side effect (a
// read past the deadline ends the session clock for good): reading it after
// every event would end sessions the node itself must end, and hide a node that
// lets a late keep-alive revive a deadline nobody happened to read.
bool Sim::valid_now(const TermState& t) const {
  return t.revoked() == RevokeReason::kNone && !t.session().ended() &&
         t.session().deadline() > now();
}

// Invariants 1 and 4, after every event.
void Sim::check_terms() {
  std::vector<TermRec*> valid;
  for (const auto& rp : terms_) {
    TermRec& r = *rp;
    if (valid_now(*r.term)) {
      if (r.ended_seen) fail("[ended terms stay ended] valid again: " + term_str(r));
      if (r.term->revoked() != RevokeReason::kNone || r.term_ended_cb || r.revoked_cb) {
        fail("[revoked terms are invalid] " + term_str(r));
      }
      valid.push_back(&r);
    } else {
      r.ended_seen = true;
    }
  }
  for (size_t i = 0; i < valid.size(); ++i) {
    for (size_t j = i + 1; j < valid.size(); ++j) {
      const TermRec& a = *valid[i];
      const TermRec& b = *valid[j];
      if (a.term->name() != b.term->name()) continue;
      if (is_permit(a.kind) || is_permit(b.kind)) continue;  // check_permits
      // A session the store ended early (expire_session) lost its leases while
      // its node still counted on them: a later term of another node may overlap
      // it. Only the fencing token protects there, as the seed says.
      auto early = [this](const TermRec& x, const TermRec& y) {
        auto h = hooked_.find(x.term->session_id());
        return h != hooked_.end() && h->second <= y.elected_at;
      };
      if (early(a, b) || early(b, a)) continue;
      fail("[one valid term per name] " + term_str(a) + " and " + term_str(b));
    }
  }
  check_permits(valid);
  terms_.erase(std::remove_if(terms_.begin(), terms_.end(),
                              [](const std::shared_ptr<TermRec>& r) {
                                return r->revoked_cb && r->ended_seen;
                              }),
               terms_.end());
}

// The permit invariants (sim.h), at every instant, except against a permit of a
// session the store ended early (as invariant 1).
void Sim::check_permits(const std::vector<TermRec*>& valid) {
  if (!permits_) return;
  for (const std::string& name : p_.permit_names) {
    std::vector<const TermRec*> sem, rw;
    for (const TermRec* r : valid) {
      if (r->term->name() != name || ended_early(*r, now())) continue;
      if (r->kind == ContenderKind::kSemaphore) sem.push_back(r);
      if (r->kind == ContenderKind::kRead || r->kind == ContenderKind::kWrite) rw.push_back(r);
    }
    const uint32_t size = p_.sem_size.at(name);
    if (sem.size() > size) {
      std::string all;
      for (const TermRec* r : sem) all += " " + term_str(*r);
      fail("[at most N permits] " + std::to_string(sem.size()) + " valid permits of semaphore " +
           name + " of size " + std::to_string(size) + ":" + all);
    }
    for (const TermRec* w : rw) {
      if (w->kind != ContenderKind::kWrite) continue;
      for (const TermRec* o : rw) {
        if (o == w || ended_early(*o, w->elected_at) || ended_early(*w, o->elected_at)) continue;
        fail("[a write term is alone] " + term_str(*w) + " beside " +
             permit_kind_name(permit_kind_of(o->kind)) + " " + term_str(*o));
      }
    }
  }
}

// Invariant 6: after 2 s without faults, every name with a started election
// has a leader.
void Sim::check_liveness() {
  ++stats_.quiet_checks;
  // Requests made before the stretch completed: a stop ends in stopped() (or
  // lock_failed()), a step-down in stepped_down(), a close in closed(). Each
  // waits at most for a release's answer or its call timeout.
  for (const auto& bp : slots_) {
    if (!bp || bp->closed) continue;
    if (bp->closing)
      fail("[completion] " + node_str(*bp) + " still closing after 2 s without faults");
    for (const auto& [id, t] : bp->cs) {
      if (t.finished) continue;
      if (t.stop_requested) {
        fail("[completion] " + node_str(*bp) + " contender " + std::to_string(id) +
             " not stopped 2 s after stop()");
      }
      if (t.step_acks != t.step_requests) {
        fail("[completion] " + node_str(*bp) + " contender " + std::to_string(id) + ": " +
             std::to_string(t.step_requests - t.step_acks) + " step-downs unanswered after 2 s");
      }
    }
  }
  for (const std::string& name : p_.election_names) {
    bool wanted = false;
    for (const auto& bp : slots_) {
      if (!bp || bp->closed || bp->closing) continue;
      for (const auto& [id, t] : bp->cs) {
        if (!t.finished && !t.stop_requested && t.kind == ContenderKind::kElection &&
            t.name == name) {
          wanted = true;
        }
      }
    }
    if (!wanted) continue;
    bool led = false;
    for (const auto& r : terms_) {
      if (r->term->name() == name && valid_now(*r->term)) led = true;
    }
    if (led) continue;
    std::ostringstream s;
    observing_ = true;
    s << "[liveness] no leader of " << name << " after 2 s without faults; lease holder "
      << alias(store_->lease(name).holder) << "; contenders:";
    observing_ = false;
    for (const auto& bp : slots_) {
      if (!bp || bp->closed) continue;
      const NodeView v = bp->node->view();
      s << " " << node_str(*bp) << "(" << session_status_name(v.status) << " "
        << alias(v.session_id) << ")";
      for (const ContenderView& c : v.contenders) {
        s << " [" << c.id << " " << c.name << " " << c.state << " token " << c.token << "]";
      }
    }
    fail(s.str());
  }
}

// Invariant 7: at quiescence no lease stays held, for more than about two
// leases, by a live session whose node holds no term for it.
void Sim::check_orphans() {
  for (const std::string& name : p_.lock_names) {
    observing_ = true;
    const MemoryStore::LeaseView v = store_->lease(name);
    observing_ = false;
    bool orphan = false;
    std::string key;
    if (!v.holder.empty() && v.holder.rfind("foreign-", 0) != 0) {
      orphan = true;
      key = v.holder + "#" + std::to_string(v.token);
      auto it = session_index_.find(v.holder);
      if (it != session_index_.end()) {
        const SessionRec& s = sessions_[it->second];
        NodeBox* b = find(s.slot, s.inst);
        if (b && b->session_live && b->session == v.holder) {
          // A term the node holds (leader, or releasing it): elected, not yet
          // revoked(). Node::view() would read the term's clock.
          for (const auto& [id, t] : b->cs) {
            if (t.term && t.term->term->name() == name && t.term->term->token() == v.token &&
                t.term->term->session_id() == v.holder) {
              orphan = false;
            }
          }
        }
      }
    }
    if (!orphan) {
      orphans_.erase(name);
      continue;
    }
    TimePoint since;
    if (orphan_too_old(name, key, &since)) {
      fail("[orphan rule] lease " + name + " token " + std::to_string(v.token) + " held by " +
           alias(v.holder) + " without a term since " + t_str(since) + " ms");
    }
  }
  if (permits_) check_permit_orphans();
}

bool Sim::orphan_too_old(const std::string& slot, const std::string& key, TimePoint* since) {
  auto it = orphans_.find(slot);
  if (it == orphans_.end() || it->second.key != key) {
    orphans_[slot] = Orphan{key, now()};
    ++stats_.orphans_seen;
    return false;
  }
  *since = it->second.since;
  const TimePoint from = std::max(it->second.since, quiet_start_);
  stats_.orphan_max_ms =
      std::max<uint64_t>(stats_.orphan_max_ms, static_cast<uint64_t>(to_ms(now() - from)));
  return now() - from > orphan_limit_;
}

bool Sim::explains(const NodeBox& b, const LeaseInfo& l) const {
  for (const auto& [id, t] : b.cs) {
    if (t.term && permit_kind_of(t.kind) == l.kind && t.term->permit == l.permit &&
        t.term->term->name() == l.name) {
      return true;
    }
  }
  for (const auto& [id, c] : b.owned) {
    if (l.kind == PermitKind::kIntent && c->intent() == l.permit && c->name == l.name) return true;
  }
  return false;
}

void Sim::check_permit_orphans() {
  // inspect() reads without expiring anyone: nothing is broadcast.
  const InspectReply in = store_->inspect(p_.permit_names);
  std::set<std::string> seen;
  for (const LeaseInfo& l : in.leases) {
    if (l.kind == PermitKind::kLease || l.holder.empty()) continue;
    const std::string key = std::string("permit ") + permit_kind_name(l.kind) + " " + l.name +
                            " #" + std::to_string(l.permit);
    auto s = session_index_.find(l.holder);
    if (s != session_index_.end()) {
      const SessionRec& rec = sessions_[s->second];
      const NodeBox* b = find(rec.slot, rec.inst);
      if (b && b->session_live && b->session == l.holder && explains(*b, l)) continue;
    }
    seen.insert(key);
    TimePoint since;
    if (orphan_too_old(key, l.holder, &since)) {
      fail("[orphan rule] " + key + " held by " + alias(l.holder) + " without a term since " +
           t_str(since) + " ms");
    }
  }
  for (auto it = orphans_.begin(); it != orphans_.end();) {
    const bool stale = it->first.rfind("permit ", 0) == 0 && !seen.count(it->first);
    it = stale ? orphans_.erase(it) : std::next(it);
  }
}

}  // namespace simba::sim::detail
