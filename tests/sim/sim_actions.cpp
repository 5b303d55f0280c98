// The simulated application (elections, locks, step-downs, stops, closes) and
// the faults injected into a schedule (pauses, early expiries, hand-overs).
#include <algorithm>
#include <utility>

#include "sim/sim_world.h"

namespace simba::sim::detail {

// ---------------------------------------------------------------------------
// The application: elections, locks, step-downs, stops, closes.

bool Sim::name_busy(const NodeBox& b, const std::string& name) const {
  for (const auto& [id, t] : b.cs) {
    if (!t.finished && t.name == name) return true;
  }
  return false;
}

void Sim::schedule_action(NodeBox& b) {
  to_node(now() + between(p_.action_gap_min, p_.action_gap_max), b.slot, b.inst,
          [this](NodeBox& nb) {
            if (app_frozen_ || nb.closing) return;
            act(nb);
            if (!nb.closed && !nb.closing) schedule_action(nb);
          });
}

void Sim::act(NodeBox& b) {
  std::vector<ContenderId> elections, locks;
  for (const auto& [id, t] : b.cs) {
    if (t.finished || t.stop_requested) continue;
    (t.kind == ContenderKind::kElection ? elections : locks).push_back(id);
  }
  if (permits_ && chance(0.5)) {
    // Permits: take one (at most four at once per node), or let one go.
    std::vector<ContenderId> held;
    for (ContenderId id : locks) {
      if (is_permit(b.cs.at(id).kind)) held.push_back(id);
    }
    if (held.size() < 4 && chance(0.6)) {
      add_permit(b, p_.permit_names[pick(p_.permit_names.size())]);
    } else if (!held.empty()) {
      stop(b, held[pick(held.size())]);
    }
    return;
  }
  const double r = unit();
  if (r < 0.35) {
    if (static_cast<int>(elections.size()) < b.target_elections) {
      add_election(b, p_.election_names[pick(p_.election_names.size())]);
    }
  } else if (r < 0.45) {
    if (!elections.empty()) stop(b, elections[pick(elections.size())]);
  } else if (r < 0.60) {
    if (!elections.empty()) step_down(b, elections[pick(elections.size())]);
  } else if (r < 0.78) {
    if (locks.size() < 2) add_lock(b, p_.lock_names[pick(p_.lock_names.size())]);
  } else if (r < 0.96) {
    if (!locks.empty()) stop(b, locks[pick(locks.size())]);
  } else if (r < 0.985) {
    close_node(b);
  }
}

void Sim::add_election(NodeBox& b, const std::string& name) {
  const bool busy = name_busy(b, name);
  const ContenderId expect = b.next_id;
  b.adding = Adding{expect, name, ContenderKind::kElection};
  const bool with_work = chance(0.5);
  auto c = std::make_unique<Contender>(LeaseName(name), ContenderKind::kElection);
  const ContenderId id = b.node->add_election(*c, now(), with_work) ? c->id : 0;
  if (id) b.owned[id] = std::move(c);
  b.adding.reset();
  if (tr_) {
    T() << node_str(b) << " add_election " << name << (with_work ? " (with work)" : "") << " -> "
        << id << "\n";
  }
  if (busy != (id == 0)) {
    fail(node_str(b) + " add_election(" + name + ") returned " + std::to_string(id) +
         (busy ? " although the name is in use" : " although the name is free"));
  }
  if (!id) return;
  if (id != expect)
    fail("contender id " + std::to_string(id) + ", expected " + std::to_string(expect));
  ++b.next_id;
  Track& t = b.cs[id];
  t.name = name;
  t.kind = ContenderKind::kElection;
  t.with_work = with_work;
}

// The handover of `id`'s term (if it leads) starts now: remember the term's
// deadline at this instant, which bounds how long the release may wait.
void Sim::note_handover(NodeBox& b, ContenderId id) {
  auto it = b.cs.find(id);
  if (it == b.cs.end() || !it->second.term) return;
  TermRec& rec = *it->second.term;
  if (!rec.handover_deadline) rec.handover_deadline = now() + rec.term->remaining();
}

// The work of `who`'s term `token` returns `after` from now (if the node is
// still there then).
void Sim::schedule_work_exit(NodeBox& b, ContenderId who, uint64_t token, Duration after) {
  to_node(now() + after, b.slot, b.inst, [this, who, token](NodeBox& nb) {
    auto it = nb.cs.find(who);
    if (it != nb.cs.end() && it->second.term && it->second.term->term->token() == token) {
      TermRec& rec = *it->second.term;
      if (!faults_ && rec.term->valid() && !rec.handover_deadline) {
        // In the quiet stretch work does not hand over on its own (liveness
        // is checked there): it returns once its term ends.
        rec.work_cooperative = true;
        return;
      }
      rec.work_running = false;
    }
    if (tr_) T() << node_str(nb) << " work_done contender " << who << " token " << token << "\n";
    if (auto c = nb.owned.find(who); c != nb.owned.end())
      nb.node->work_done(*c->second, token, now());
  });
}

void Sim::draw_lock_limits(TimePoint* give_up, bool* once) {
  const double r = unit();
  if (r < 0.3) {
    *once = true;
  } else if (r < 0.7) {
    *give_up = now() + between(Duration(0), p_.cfg.lease_duration * 2);
  }
}

void Sim::add_lock(NodeBox& b, const std::string& name) {
  // An election of this node on the name refuses the lock; a lock queues.
  bool refused = false;
  for (const auto& [id, t] : b.cs) {
    if (!t.finished && t.name == name) {
      refused = t.kind == ContenderKind::kElection;
      break;
    }
  }
  TimePoint give_up = TimePoint::max();
  bool once = false;
  draw_lock_limits(&give_up, &once);
  const ContenderId expect = b.next_id;
  b.adding = Adding{expect, name, ContenderKind::kLock};
  auto c = std::make_unique<Contender>(LeaseName(name), ContenderKind::kLock);
  const ContenderId id = b.node->add_lock(*c, give_up, once, now()) ? c->id : 0;
  // A try_once queued behind another lock is done before add_lock returns.
  if (id && !(b.cs.count(id) && b.cs.at(id).finished)) b.owned[id] = std::move(c);
  b.adding.reset();
  if (tr_) {
    T() << node_str(b) << " add_lock " << name << (once ? " try_once" : "")
        << (give_up != TimePoint::max() ? " give_up_at " + t_str(give_up) : "") << " -> " << id
        << "\n";
  }
  if (refused != (id == 0)) {
    fail(node_str(b) + " add_lock(" + name + ") returned " + std::to_string(id) +
         (refused ? " although an election uses the name" : ""));
  }
  if (!id) return;
  if (id != expect)
    fail("contender id " + std::to_string(id) + ", expected " + std::to_string(expect));
  ++b.next_id;
  Track& t = b.cs[id];  // may exist already (a try_once that failed at once)
  t.name = name;
  t.kind = ContenderKind::kLock;
}

void Sim::add_permit(NodeBox& b, const std::string& name) {
  const double k = unit();
  const ContenderKind kind = k < 0.4   ? ContenderKind::kSemaphore
                             : k < 0.7 ? ContenderKind::kRead
                                       : ContenderKind::kWrite;
  TimePoint give_up = TimePoint::max();
  bool once = false;
  draw_lock_limits(&give_up, &once);
  const ContenderId expect = b.next_id;
  b.adding = Adding{expect, name, kind};
  auto c = std::make_unique<Contender>(LeaseName(name), kind);
  if (kind == ContenderKind::kSemaphore) c->set_size(p_.sem_size.at(name));
  const ContenderId id = b.node->add_lock(*c, give_up, once, now()) ? c->id : 0;
  if (id && !(b.cs.count(id) && b.cs.at(id).finished)) b.owned[id] = std::move(c);
  b.adding.reset();
  if (tr_) {
    T() << node_str(b) << " add_permit " << permit_kind_name(permit_kind_of(kind)) << " " << name
        << (once ? " try_once" : "")
        << (give_up != TimePoint::max() ? " give_up_at " + t_str(give_up) : "") << " -> " << id
        << "\n";
  }
  if (id != expect) {
    fail(node_str(b) + " add_permit(" + name + ") returned " + std::to_string(id) + ", expected " +
         std::to_string(expect));
  }
  ++b.next_id;
  Track& t = b.cs[id];
  t.name = name;
  t.kind = kind;
}

void Sim::stop(NodeBox& b, ContenderId id) {
  Track& t = b.cs.at(id);
  t.stop_requested = true;
  abandon(b, id);
  note_handover(b, id);
  if (tr_) T() << node_str(b) << " stop contender " << id << " (" << t.name << ")\n";
  auto c = b.owned.find(id);
  if (c == b.owned.end() || !b.node->stop(*c->second, now()))
    fail(node_str(b) + " stop(" + std::to_string(id) + ") refused a live contender");
}

void Sim::step_down(NodeBox& b, ContenderId id) {
  const Duration cooldown =
      chance(0.2) ? Duration(0) : between(Duration(0), p_.cfg.lease_duration * 2);
  Track& t = b.cs.at(id);
  ++t.step_requests;  // the acknowledgement may come before step_down returns
  abandon(b, id);
  note_handover(b, id);
  if (tr_)
    T() << node_str(b) << " step_down contender " << id << " cooldown " << to_ms(cooldown)
        << " ms\n";
  auto c = b.owned.find(id);
  if (c == b.owned.end() || !b.node->step_down(*c->second, cooldown, now())) {
    fail(node_str(b) + " step_down(" + std::to_string(id) + ") refused a live election");
  }
}

void Sim::close_node(NodeBox& b) {
  if (tr_) T() << node_str(b) << " close\n";
  if (!final_) ++stats_.closes;
  b.closing = true;
  if (b.session_live) {
    for (const auto& [id, t] : b.cs) {
      const TermState* term = t.term ? t.term->term.get() : nullptr;
      if (term && term->session_id() == b.session && !term->session().ended()) {
        b.close_session = b.session;
        b.close_deadline = term->session().deadline();
      }
    }
  }
  for (auto& [call, a] : b.acq) a.abandoned = true;
  for (auto& [id, t] : b.cs) note_handover(b, id);
  b.node->close(now());
}

// ---------------------------------------------------------------------------
// Faults.

void Sim::fault_tick() {
  if (!faults_) return;
  const double r = unit();
  if (r < 0.45) {
    pause_node();
  } else if (r < 0.70) {
    expire_session();
  } else if (r < 0.85) {
    hand_over();
  }
  push(now() + between(p_.fault_gap_min, p_.fault_gap_max), [this] { fault_tick(); });
}

void Sim::pause_node() {
  std::vector<NodeBox*> live;
  for (auto& bp : slots_) {
    if (bp && !bp->closed && bp->paused_until <= now()) live.push_back(bp.get());
  }
  if (live.empty()) return;
  NodeBox& b = *live[pick(live.size())];
  const Config& c = p_.cfg;
  const bool long_pause = chance(p_.p_long_pause);
  const Duration d = long_pause ? between(c.lease_duration, c.lease_duration * 5 / 2)
                                : between(ms(1), c.renew_interval() * 3 / 2);
  b.paused_until = now() + d;
  settle_until_ = std::max(settle_until_, b.paused_until);
  ++stats_.pauses;
  if (long_pause) ++stats_.long_pauses;
  if (tr_) T() << node_str(b) << " PAUSED for " << to_ms(d) << " ms\n";
  const int slot = b.slot;
  const uint64_t inst = b.inst;
  push(b.paused_until, [this, slot, inst] {
    NodeBox* nb = find(slot, inst);
    if (!nb || nb->paused_until > now()) return;
    if (tr_) T() << node_str(*nb) << " wakes up\n";
    // Its loop may take the messages that queued up before the timers that
    // became due meanwhile (each message then runs them, or not, as it comes).
    if (!chance(p_.p_msg_first)) run_due_timers(*nb);
  });
}

void Sim::expire_session() {
  std::string id;
  std::vector<NodeBox*> live;
  for (auto& bp : slots_) {
    if (bp && !bp->closed && bp->session_live) live.push_back(bp.get());
  }
  if (!live.empty() && chance(0.7)) {
    id = live[pick(live.size())]->session;
  } else if (!sessions_.empty()) {
    const size_t n = std::min<size_t>(sessions_.size(), 8);
    id = sessions_[sessions_.size() - 1 - pick(n)].id;
  }
  if (id.empty()) return;
  observing_ = true;
  const bool alive = store_->session_live(id);
  observing_ = false;
  if (!alive) return;
  if (tr_) T() << "HOOK expire_session " << alias(id) << "\n";
  hooked_.emplace(id, now());
  ++stats_.expiries;
  store_->expire_session(id);
}

void Sim::hand_over() {
  const std::string name = p_.lock_names[pick(p_.lock_names.size())];
  const std::string foreign = "foreign-" + std::to_string(++foreign_);
  const uint64_t token = store_->hand_over(name, foreign);
  ++stats_.handovers;
  if (tr_) T() << "HOOK hand_over " << name << " to " << foreign << " token " << token << "\n";
  // The foreign holder lets go only after any term of ours it took the lease
  // from has ended: a term adopted from an acquire answered before the hand-over
  // (at most a call timeout later) is valid at most one local validity more.
  const Config& c = p_.cfg;
  const TimePoint at =
      now() + c.lease_duration + 2 * c.renew_interval() + between(Duration(0), c.lease_duration);
  settle_until_ = std::max(settle_until_, at);
  push(at, [this, name, foreign] {
    observing_ = true;
    const bool still = store_->lease(name).holder == foreign;
    observing_ = false;
    if (!still) return;
    const uint64_t token = store_->hand_over(name, "");
    if (tr_) T() << "HOOK " << foreign << " lets " << name << " go (token " << token << ")\n";
  });
}

}  // namespace simba::sim::detail
