// The simulator's messages: every backend call is a request that reaches the
// store after a delay (or is lost) and an answer that travels back; release
// broadcasts reach every node that watches the name. See sim.h for the faults.
#include <algorithm>
#include <type_traits>
#include <utility>

#include "sim/sim_world.h"

namespace simba::sim::detail {

Duration Sim::leg_delay(Duration timeout) {
  if (faults_ && chance(p_.p_long)) {
    const Duration d = timeout + between(Duration(0), timeout * 2);
    settle_until_ = std::max(settle_until_, now() + d);
    return d;
  }
  if (faults_ && chance(p_.p_slow)) {
    // Slow but in time: the reply still counts, and only shortens the deadline.
    return between(p_.dmax, std::max(p_.dmax, timeout - us(1)));
  }
  return between(p_.dmin, p_.dmax);
}

void Sim::register_session(const std::string& id, int slot, uint64_t inst) {
  session_index_[id] = sessions_.size();
  sessions_.push_back({id, slot, inst, "S" + std::to_string(sessions_.size() + 1)});
  ++stats_.sessions;
}

void Sim::fx_send(NodeBox& b, Req r) {
  if (b.closed) fail(node_str(b) + " sent " + req_name(r.kind) + " after closed()");
  r.sent_at = now();
  // Handover order: a term whose work still runs is released (by a release or,
  // at close, the session's close) only once its deadline at the stop passed.
  if (r.kind == ReqKind::kRelease || r.kind == ReqKind::kClose) {
    for (const auto& [id, t] : b.cs) {
      if (!t.term || !t.term->work_running || !t.term->handover_deadline) continue;
      const TermRec& rec = *t.term;
      const bool this_one = r.kind == ReqKind::kClose
                                ? rec.term->session_id() == r.session
                                : rec.term->name() == r.name && rec.term->token() == r.token;
      if (this_one && now() < *rec.handover_deadline) {
        fail("[handover order] " + node_str(b) + " " + req_name(r.kind) + " of " +
             rec.term->name() + " token " + std::to_string(rec.term->token()) +
             " while its work runs, " + std::to_string(to_ms(*rec.handover_deadline - now())) +
             " ms before the deadline at the stop");
      }
    }
  }
  if (r.kind == ReqKind::kAcquire || r.kind == ReqKind::kAcquirePermit) {
    // Which contender: the one being added, else the oldest unfinished
    // contender of the name (the front of the node's queue for the name); a
    // permit's, the one whose attempt this is (permits do not queue).
    ContenderId who = 0;
    if (b.adding && b.adding->name == r.name) {
      who = b.adding->id;
    } else if (r.kind == ReqKind::kAcquirePermit) {
      for (const auto& [id, c] : b.owned) {
        if (c->attempt() == r.call) who = id;
      }
    } else {
      for (const auto& [id, t] : b.cs) {
        if (!t.finished && t.name == r.name) {
          who = id;
          break;
        }
      }
    }
    if (!who) fail(node_str(b) + " sent an acquire of " + r.name + " for no contender");
    Track& t = track(b, who, "acquire");
    if (t.last_acquire) {
      auto prev = b.acq.find(t.last_acquire);
      if (prev != b.acq.end() && !prev->second.answered && !prev->second.abandoned &&
          b.last_timer_run < prev->second.sent_at + prev->second.timeout) {
        fail("[one acquire in flight] " + node_str(b) + " contender " + std::to_string(who) +
             " sent acquire call " + std::to_string(r.call) + " while call " +
             std::to_string(t.last_acquire) + " is in flight");
      }
    }
    AcqTrack a;
    a.who = who;
    a.name = r.name;
    a.session = r.session;
    a.sent_at = now();
    a.timeout = r.timeout;
    b.acq[r.call] = a;
    t.last_acquire = r.call;
    if (b.acq.size() > 64) {
      for (auto it = b.acq.begin(); it != b.acq.end();) {
        const AcqTrack& x = it->second;
        if ((x.answered || x.abandoned || b.last_timer_run >= x.sent_at + x.timeout) &&
            it->first != r.call) {
          it = b.acq.erase(it);
        } else {
          ++it;
        }
      }
    }
  }
  const int slot = b.slot;
  const uint64_t inst = b.inst;
  if (faults_ && chance(p_.p_drop)) {
    ++stats_.dropped;
    if (tr_) {
      T() << node_str(b) << " -> " << req_name(r.kind) << " call " << r.call << " "
          << alias(r.session) << " " << r.name << " DROPPED\n";
    }
    return;
  }
  const Duration d = leg_delay(r.timeout);
  if (tr_) {
    T() << node_str(b) << " -> " << req_name(r.kind) << " call " << r.call << " "
        << alias(r.session) << " " << r.name << (r.token ? " token " + std::to_string(r.token) : "")
        << " (arrives in " << d.count() / 1000 << " us)\n";
  }
  push(now() + d, [this, slot, inst, r] { at_store(slot, inst, r); });
}

// A request reaches the store: it is applied now, on the store's clock, and
// the answer travels back.
void Sim::at_store(int slot, uint64_t inst, const Req& r) {
  // An error answer: before the store applied the request, or after (a
  // connection reset once the server had applied it).
  const bool err = faults_ && chance(p_.p_err);
  const bool err_after = !err && faults_ && chance(p_.p_err);
  auto lost = [err_after](auto& rep) {
    if (!err_after) return;
    rep = std::remove_reference_t<decltype(rep)>{};
    rep.error = "injected error after applying";
  };
  std::function<void(NodeBox&)> fn;
  std::string what;
  const CallId call = r.call;
  const TimePoint late_at = r.sent_at + r.timeout;
  auto to_on_acquire = [this, call](const AcquireReply& rep) {
    return [this, call, rep](NodeBox& b) {
      // Answered as the node receives it: on_acquire may send the next
      // attempt at once (a Held answer after a release broadcast).
      auto it = b.acq.find(call);
      if (it != b.acq.end()) it->second.answered = true;
      b.delivering_acquire = call;
      b.node->on_acquire(call, rep, now());
      b.delivering_acquire = 0;
    };
  };
  switch (r.kind) {
    case ReqKind::kOpen: {
      OpenReply rep;
      if (err) {
        rep.error = "injected error";
      } else {
        rep = store_->open_session(std::min(r.lease, p_.lease_cap));
        if (rep.outcome == Outcome::kOk) register_session(rep.session_id, slot, inst);
      }
      lost(rep);
      if (tr_) what = std::string(outcome_name(rep.outcome)) + " " + alias(rep.session_id);
      fn = [this, call, rep](NodeBox& b) { b.node->on_open(call, rep, now()); };
      break;
    }
    case ReqKind::kKeepAlive: {
      KeepAliveReply rep;
      if (err) {
        rep.error = "injected error";
      } else {
        rep = store_->keep_alive(r.session, std::min(r.lease, p_.lease_cap));
      }
      lost(rep);
      if (tr_) {
        what = outcome_name(rep.outcome);
        for (const OwnedLease& l : rep.owned) what += " " + l.name + ":" + std::to_string(l.token);
      }
      fn = [this, call, rep](NodeBox& b) { b.node->on_keep_alive(call, rep, now()); };
      break;
    }
    case ReqKind::kAcquire: {
      AcquireReply rep;
      if (err) {
        rep.error = "injected error";
      } else {
        const MemoryStore::LeaseView held =
            p_.reacquire_ok ? store_->lease(r.name) : MemoryStore::LeaseView{};
        if (p_.reacquire_ok && !r.session.empty() && held.holder == r.session &&
            store_->session_live(r.session)) {
          rep.outcome = Outcome::kOk;
          rep.token = held.token;
        } else {
          rep = store_->acquire(r.session, r.name);
        }
      }
      lost(rep);
      if (tr_) {
        what = std::string(outcome_name(rep.outcome)) +
               (rep.outcome == Outcome::kOk ? " token " + std::to_string(rep.token) : "");
      }
      fn = to_on_acquire(rep);
      break;
    }
    case ReqKind::kRelease: {
      DoneReply rep;
      if (err) {
        rep.error = "injected error";
      } else {
        rep = store_->release(r.session, r.name, r.token);
      }
      lost(rep);
      if (tr_) what = outcome_name(rep.outcome);
      fn = [this, call, rep](NodeBox& b) { b.node->on_release(call, rep, now()); };
      break;
    }
    case ReqKind::kAcquirePermit: {
      AcquireReply rep;
      if (err) {
        rep.error = "injected error";
      } else {
        rep = store_->acquire_permit(r.session, r.name, r.ask);
      }
      lost(rep);
      if (tr_) {
        what = std::string(permit_kind_name(r.ask.kind)) + " " + outcome_name(rep.outcome) +
               " permit " + std::to_string(rep.permit) + " token " + std::to_string(rep.token);
      }
      fn = to_on_acquire(rep);
      break;
    }
    case ReqKind::kReleasePermit: {
      DoneReply rep;
      if (err) {
        rep.error = "injected error";
      } else {
        rep = store_->release_permit(r.session, r.name, r.entry.kind, r.entry.permit, r.token);
      }
      lost(rep);
      if (tr_) {
        what = std::string(permit_kind_name(r.entry.kind)) + " #" + std::to_string(r.entry.permit) +
               " " + outcome_name(rep.outcome);
      }
      fn = [this, call, rep](NodeBox& b) { b.node->on_release(call, rep, now()); };
      break;
    }
    case ReqKind::kClose: {
      DoneReply rep;
      if (err) {
        rep.error = "injected error";
      } else {
        rep = store_->close_session(r.session);
      }
      lost(rep);
      if (tr_) what = outcome_name(rep.outcome);
      fn = [this, call, rep](NodeBox& b) { b.node->on_close(call, rep, now()); };
      break;
    }
  }
  if (faults_ && chance(p_.p_drop)) {
    ++stats_.dropped;
    if (tr_) {
      T() << "store: " << req_name(r.kind) << " call " << call << " of node" << slot << "#" << inst
          << " " << alias(r.session) << " " << r.name << " => " << what << " (reply DROPPED)\n";
    }
    return;
  }
  const Duration d = leg_delay(r.timeout);
  if (tr_) {
    T() << "store: " << req_name(r.kind) << " call " << call << " of node" << slot << "#" << inst
        << " " << alias(r.session) << " " << r.name << " => " << what << " (reply in "
        << d.count() / 1000 << " us)\n";
  }
  const ReqKind kind = r.kind;
  to_node(now() + d, slot, inst, [this, fn = std::move(fn), late_at, kind, call](NodeBox& b) {
    const bool late = now() >= late_at;
    if (late) ++stats_.late_replies;
    if (tr_) {
      T() << node_str(b) << " <- " << req_name(kind) << " reply call " << call
          << (late ? " (LATE)" : "") << "\n";
    }
    fn(b);
  });
}

void Sim::on_broadcast(const std::string& name) {
  if (observing_) return;  // the checker's own reads must not wake anyone
  if (tr_) T() << "store: broadcast release of " << name << "\n";
  for (auto& bp : slots_) {
    if (!bp || bp->closed) continue;
    if (faults_ && chance(p_.p_bcast_drop)) continue;
    if (!bp->watched.count(name)) continue;  // only to the nodes that watch it
    to_node(now() + between(p_.dmin, p_.dmax), bp->slot, bp->inst, [this, name](NodeBox& b) {
      if (tr_) T() << node_str(b) << " <- released " << name << "\n";
      b.node->on_released(name, now());
    });
  }
}

}  // namespace simba::sim::detail
