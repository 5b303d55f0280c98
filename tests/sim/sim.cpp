// The simulation's setup, its event queue, the trace and the main loop. The
// rest of the simulator is listed in sim_world.h.
#include "sim/sim.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <utility>

#include "core/timing.h"
#include "sim/sim_world.h"

namespace simba::sim {

void Stats::add(const Stats& o) {
  schedules += o.schedules;
  events += o.events;
  virtual_ms += o.virtual_ms;
  nodes += o.nodes;
  sessions += o.sessions;
  terms += o.terms;
  lock_terms += o.lock_terms;
  revoked += o.revoked;
  taken_over += o.taken_over;
  deadline_passed += o.deadline_passed;
  session_expired += o.session_expired;
  stepped_down += o.stepped_down;
  late_replies += o.late_replies;
  dropped += o.dropped;
  pauses += o.pauses;
  long_pauses += o.long_pauses;
  expiries += o.expiries;
  handovers += o.handovers;
  closes += o.closes;
  quiet_checks += o.quiet_checks;
  orphans_seen += o.orphans_seen;
  orphan_max_ms = std::max(orphan_max_ms, o.orphan_max_ms);
  drifting_store += o.drifting_store;
  permit_terms += o.permit_terms;
  write_terms += o.write_terms;
  permit_refused += o.permit_refused;
}

std::string Stats::summary() const {
  std::ostringstream s;
  s << schedules << " schedules, " << events << " events, " << virtual_ms / 1000 << " s virtual; "
    << nodes << " nodes, " << sessions << " sessions, " << terms << " terms (" << lock_terms
    << " locks), " << revoked << " revoked (taken over " << taken_over << ", deadline passed "
    << deadline_passed << ", session expired " << session_expired << ", stepped down "
    << stepped_down << "); faults: " << dropped << " dropped, " << late_replies << " late replies, "
    << pauses << " pauses (" << long_pauses << " > lease), " << expiries << " expiries, "
    << handovers << " hand-overs, " << closes << " node closes; " << quiet_checks
    << " liveness checks, " << orphans_seen << " orphans seen (longest " << orphan_max_ms
    << " ms into a quiet stretch), " << drifting_store << " schedules with a drifting store clock";
  if (permit_terms > 0) {
    s << "; permits: " << permit_terms << " terms (" << write_terms << " writes), "
      << permit_refused << " refused sizes";
  }
  return s.str();
}

namespace detail {

// ---------------------------------------------------------------------------
// Effects: forwards to the simulator.

void SimEffects::send_open(CallId call, Duration lease, Duration timeout) {
  Req r;
  r.kind = ReqKind::kOpen;
  r.call = call;
  r.lease = lease;
  r.timeout = timeout;
  sim_.fx_send(box_, std::move(r));
}
void SimEffects::send_keep_alive(CallId call, const std::string& session, Duration lease,
                                 Duration timeout) {
  Req r;
  r.kind = ReqKind::kKeepAlive;
  r.call = call;
  r.session = session;
  r.lease = lease;
  r.timeout = timeout;
  sim_.fx_send(box_, std::move(r));
}
void SimEffects::send_acquire(CallId call, const std::string& session, const std::string& name,
                              Duration timeout) {
  Req r;
  r.kind = ReqKind::kAcquire;
  r.call = call;
  r.session = session;
  r.name = name;
  r.timeout = timeout;
  sim_.fx_send(box_, std::move(r));
}
void SimEffects::send_release(CallId call, const std::string& session, const std::string& name,
                              uint64_t token, Duration timeout) {
  Req r;
  r.kind = ReqKind::kRelease;
  r.call = call;
  r.session = session;
  r.name = name;
  r.token = token;
  r.timeout = timeout;
  sim_.fx_send(box_, std::move(r));
}
void SimEffects::send_acquire_permit(CallId call, const std::string& session,
                                     const std::string& name, const PermitAsk& ask,
                                     Duration timeout) {
  Req r;
  r.kind = ReqKind::kAcquirePermit;
  r.call = call;
  r.session = session;
  r.name = name;
  r.ask = ask;
  r.timeout = timeout;
  sim_.fx_send(box_, std::move(r));
}
void SimEffects::send_release_permit(CallId call, const std::string& session,
                                     const std::string& name, EntryRef entry, uint64_t token,
                                     Duration timeout) {
  Req r;
  r.kind = ReqKind::kReleasePermit;
  r.call = call;
  r.session = session;
  r.name = name;
  r.entry = entry;
  r.token = token;
  r.timeout = timeout;
  sim_.fx_send(box_, std::move(r));
}
void SimEffects::send_close(CallId call, const std::string& session, Duration timeout) {
  Req r;
  r.kind = ReqKind::kClose;
  r.call = call;
  r.session = session;
  r.timeout = timeout;
  sim_.fx_send(box_, std::move(r));
}
namespace {

class SimTerm final : public TermState {
 public:
  SimTerm(Sim& sim, NodeBox& box, ContenderId who, LeaseName name, uint64_t token,
          std::shared_ptr<SessionClock> session)
      : TermState(std::move(name), token, std::move(session)), sim_(sim), box_(box), who_(who) {}

 private:
  void ended() override { sim_.fx_term_ended(box_, who_, TermRef(this)); }
  Sim& sim_;
  NodeBox& box_;  // a term ends only inside its node's calls, while the box lives
  const ContenderId who_;
};

}  // namespace

TermRef SimEffects::new_term(Contender& who, uint64_t token,
                             std::shared_ptr<SessionClock> session) {
  return TermRef(new SimTerm(sim_, box_, who.id, who.name, token, std::move(session)));
}
void SimEffects::elected(Contender& who, const TermRef& term) {
  sim_.fx_elected(box_, who.id, term);
}
void SimEffects::revoked(Contender& who, const TermRef& term) {
  sim_.fx_revoked(box_, who.id, term, term->revoked());
}
void SimEffects::lock_failed(Contender& who, LockFailure why) {
  const ContenderId id = who.id;
  sim_.fx_lock_failed(box_, id, why);
  box_.owned.erase(id);  // the node let go of it (inside add_lock: not owned yet)
}
void SimEffects::stopped(Contender& who) {
  const ContenderId id = who.id;
  sim_.fx_stopped(box_, id);
  box_.owned.erase(id);  // the node let go of it
}
void SimEffects::stepped_down(Contender& who) { sim_.fx_stepped_down(box_, who.id); }
void SimEffects::session_event(SessionEvent ev, const std::string& detail_json) {
  sim_.fx_session_event(box_, ev, detail_json);
}
void SimEffects::closed() { sim_.fx_closed(box_); }
void SimEffects::watch(const std::string& name) { sim_.fx_watch(box_, name, true); }
void SimEffects::unwatch(const std::string& name) { sim_.fx_watch(box_, name, false); }
void SimEffects::log(int level, const std::string& line) { sim_.fx_log(box_, level, line); }

// ---------------------------------------------------------------------------
// Trace helpers.

std::string Sim::t_str(TimePoint t) const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%10.3f", static_cast<double>((t - t0_).count()) / 1e6);
  return buf;
}

std::ostream& Sim::T() { return *tr_ << "[" << t_str(now()) << " ms] "; }

std::string Sim::alias(const std::string& session) const {
  if (session.empty()) return "-";
  auto it = session_index_.find(session);
  if (it != session_index_.end()) return sessions_[it->second].alias;
  return session;  // a foreign holder
}

std::string Sim::node_str(const NodeBox& b) const {
  return "node" + std::to_string(b.slot) + "#" + std::to_string(b.inst);
}

std::string Sim::term_str(const TermRec& r) const {
  std::ostringstream s;
  s << "{" << r.term->name() << " token " << r.term->token() << " node" << r.slot << "#" << r.inst
    << " contender " << r.who << " session " << alias(r.term->session_id()) << " elected at "
    << t_str(r.elected_at) << " ms, remaining " << to_ms(r.term->remaining()) << " ms, revoked "
    << revoke_reason_name(r.term->revoked()) << "}";
  return s.str();
}

void Sim::fail(const std::string& what) {
  std::ostringstream s;
  s << "at t=" << t_str(now()) << " ms: " << what;
  throw Violation(s.str());
}

// ---------------------------------------------------------------------------
// Setup.

void Sim::make_params() {
  Params& p = p_;
  Config& c = p.cfg;
  c.lease_duration = between(ms(250), ms(400));
  if (chance(0.5))
    c.renew_interval_set = between(c.lease_duration / 4, c.lease_duration * 45 / 100);
  const double r = unit();
  c.drift = r < 0.15 ? 0.0 : r < 0.5 ? 0.01 : r < 0.8 ? 0.05 * unit() : 0.05 + 0.15 * unit();
  c.margin = between(ms(5), ms(10));
  c.min_backoff = between(ms(10), ms(50));
  if (chance(0.3)) c.retry_jitter_set = between(Duration(0), c.renew_interval());
  if (!c.validate().empty()) {
    c.renew_interval_set.reset();
    c.retry_jitter_set.reset();
  }
  const std::string bad = c.validate();
  if (!bad.empty()) fail("generated an invalid config: " + bad);

  p.nodes = 3 + static_cast<int>(pick(3));
  const int names = 2 + static_cast<int>(pick(2));
  for (int i = 0; i < names; ++i) p.election_names.push_back("n" + std::to_string(i));
  p.lock_names = p.election_names;
  if (chance(0.5)) p.lock_names.push_back("lk");

  // The store's clock runs at most 1 + drift times as fast as the nodes' (the
  // bound the configuration promises), sometimes exactly at the bound.
  if (chance(0.8) && c.drift > 0) {
    const double d = unit();
    const long double drift = c.drift;
    p.store_rate = d < 0.5   ? 1.0L + drift
                   : d < 0.6 ? 1.0L - drift
                             : 1.0L + drift * (2.0L * unit() - 1.0L);
  }

  if (chance(0.15)) p.lease_cap = between(c.lease_duration / 2, c.lease_duration * 95 / 100);
  // Without faults a call must fit its timeout (the renew period in effect)
  // with room to spare.
  Duration renew = c.renew_interval();
  if (p.lease_cap != Duration::max()) {
    renew = std::min(renew, renew_period(c, local_validity(p.lease_cap, c.drift, c.margin)).period);
  }
  p.dmin = between(us(50), ms(2));
  p.dmax = between(p.dmin + ms(1), std::max(renew / 6, p.dmin + ms(1)));
  if (chance(0.15)) {
    // Message faults off: only pauses and hooks.
  } else {
    p.p_drop = 0.06 * unit();
    p.p_long = 0.04 * unit();
    p.p_slow = 0.1 * unit();
    p.p_err = 0.03 * unit();
  }
  p.p_bcast_drop = 0.3 * unit();
  p.p_msg_first = chance(0.5) ? 0.0 : unit();
  p.p_long_pause = 0.4 * unit();
  p.fault_gap_min = ms(20);
  p.fault_gap_max = between(ms(80), ms(700));
  p.action_gap_min = between(ms(20), ms(100));
  p.action_gap_max = between(ms(150), ms(500));
  p.reacquire_ok = chance(0.25);
  const double slop = unit();
  p.timer_slop = slop < 0.4 ? Duration(0) : slop < 0.8 ? ms(1) : ms(10);
  p.quiet = chance(0.7);
  p.chaos_len = p.quiet ? between(ms(1000), ms(4000)) : between(ms(2000), ms(6000));
  if (!permits_) return;  // drawn last: a schedule without permits is unchanged
  for (int i = 0; i < 2; ++i) {
    const std::string name = "p" + std::to_string(i);
    p.permit_names.push_back(name);
    p.sem_size[name] = 1 + static_cast<uint32_t>(pick(3));
  }
}

void Sim::setup() {
  make_params();
  const Config& c = p_.cfg;
  store_clock_ = std::make_unique<ScaledClock>(clk_, p_.store_rate);
  store_ = std::make_unique<MemoryStore>(*store_clock_);
  store_->subscribe([this](const std::string& name) { on_broadcast(name); });
  if (p_.store_rate != 1.0L) ++stats_.drifting_store;
  // A timed-out acquire's tombstone explains a lease for 2 leases; then the next
  // keep-alive (a renew period and two legs later) frees it.
  orphan_limit_ = 2 * c.lease_duration + 2 * c.renew_interval();

  if (tr_) {
    T() << "schedule " << seed_ << ": " << p_.nodes << " nodes, lease " << to_ms(c.lease_duration)
        << " ms, renew " << to_ms(c.renew_interval()) << " ms, drift " << c.drift << ", margin "
        << to_ms(c.margin) << " ms, jitter " << to_ms(c.retry_jitter()) << " ms, min backoff "
        << to_ms(c.min_backoff) << " ms, store clock rate " << static_cast<double>(p_.store_rate)
        << ", delay [" << p_.dmin.count() / 1000 << ", " << p_.dmax.count() / 1000
        << "] us, p_drop " << p_.p_drop << ", p_long " << p_.p_long << ", p_slow " << p_.p_slow
        << ", p_err " << p_.p_err << ", p_bcast_drop " << p_.p_bcast_drop << ", p_msg_first "
        << p_.p_msg_first << ", chaos " << to_ms(p_.chaos_len) << " ms"
        << (p_.lease_cap != Duration::max()
                ? ", lease cap " + std::to_string(to_ms(p_.lease_cap)) + " ms"
                : "")
        << (p_.reacquire_ok ? ", idempotent acquire" : "")
        << (p_.quiet ? ", then a quiet stretch" : "") << "\n";
  }

  slots_.resize(static_cast<size_t>(p_.nodes));
  for (int i = 0; i < p_.nodes; ++i) {
    push(now() + between(Duration(0), ms(50)), [this, i] {
      if (!slots_[static_cast<size_t>(i)]) spawn(i);
    });
  }
  push(now() + between(ms(10), p_.fault_gap_max), [this] { fault_tick(); });
  push(now() + p_.chaos_len, [this] { end_chaos(); });
}

NodeBox* Sim::find(int slot, uint64_t inst) {
  NodeBox* b = slots_[static_cast<size_t>(slot)].get();
  if (!b || b->inst != inst || b->closed) return nullptr;
  return b;
}

void Sim::spawn(int slot) {
  auto box = std::make_unique<NodeBox>();
  NodeBox& b = *box;
  b.slot = slot;
  b.inst = ++next_inst_;
  b.fx = std::make_unique<SimEffects>(*this, b);
  b.node = std::make_unique<Node>(p_.cfg, *b.fx, clk_, rng_());
  b.target_elections = 1 + static_cast<int>(pick(3));
  slots_[static_cast<size_t>(slot)] = std::move(box);
  ++stats_.nodes;
  if (tr_) T() << node_str(b) << " starts\n";
  b.node->start(now());
  std::vector<std::string> names = p_.election_names;
  std::shuffle(names.begin(), names.end(), rng_);
  for (size_t i = 0; i < names.size() && static_cast<int>(i) < b.target_elections; ++i) {
    add_election(b, names[i]);
  }
  schedule_action(b);
}

// ---------------------------------------------------------------------------
// Event plumbing.

void Sim::to_node(TimePoint at, int slot, uint64_t inst, std::function<void(NodeBox&)> fn) {
  push(at,
       [this, slot, inst, fn = std::move(fn)]() mutable { deliver(slot, inst, std::move(fn)); });
}

// Everything addressed to a node goes through here: a paused node takes it when
// it wakes up, and (as an event loop does) runs its due timers first.
void Sim::deliver(int slot, uint64_t inst, std::function<void(NodeBox&)> fn) {
  NodeBox* b = find(slot, inst);
  if (!b) return;
  if (b->paused_until > now()) {
    to_node(b->paused_until, slot, inst, std::move(fn));
    return;
  }
  if (!chance(p_.p_msg_first)) run_due_timers(*b);
  if (!find(slot, inst)) return;
  fn(*b);
}

void Sim::run_due_timers(NodeBox& b) {
  const std::optional<TimePoint> w = b.node->next_wakeup();
  if (w && *w <= now()) {
    if (tr_) T() << node_str(b) << " on_timer (due " << t_str(*w) << ")\n";
    b.last_timer_run = now();
    b.node->on_timer(now());
  }
}

void Sim::arm_timers() {
  for (auto& bp : slots_) {
    if (!bp || bp->closed) continue;
    NodeBox& b = *bp;
    if (b.paused_until > now()) continue;
    const std::optional<TimePoint> w = b.node->next_wakeup();
    if (!w) continue;
    if (!b.armed_at || *w < *b.armed_at) {
      b.armed_at = *w;
      const int slot = b.slot;
      const uint64_t inst = b.inst;
      push(std::max(*w, now()) + between(Duration(0), p_.timer_slop), [this, slot, inst] {
        NodeBox* nb = find(slot, inst);
        if (!nb) return;
        if (nb->armed_at && *nb->armed_at <= now()) nb->armed_at.reset();
        if (nb->paused_until > now()) return;  // the wake-up runs them
        run_due_timers(*nb);
      });
    }
  }
}

void Sim::after_event() {
  for (auto& bp : slots_) {
    if (bp && bp->closed) bp.reset();
  }
  check_terms();
  arm_timers();
  if (final_ && all_closed()) done_ = true;
}

bool Sim::all_closed() const {
  for (const auto& bp : slots_) {
    if (bp) return false;
  }
  return true;
}

Result Sim::run() {
  Result res;
  res.seed = seed_;
  try {
    setup();
    while (!done_ && !q_.empty()) {
      Event e = std::move(const_cast<Event&>(q_.top()));
      q_.pop();
      clk_.set(e.at);
      ++stats_.events;
      e.fn();
      after_event();
    }
    if (!all_closed()) fail("the schedule ended with nodes still open");
    for (const auto& r : terms_) {
      if (!r->revoked_cb) fail("[elected/revoked pairing] never revoked: " + term_str(*r));
    }
  } catch (const Violation& v) {
    res.ok = false;
    res.failure = v.what();
    if (tr_) *tr_ << "VIOLATION " << res.failure << "\n";
  }
  stats_.schedules = 1;
  stats_.virtual_ms = static_cast<uint64_t>(to_ms(now() - t0_));
  res.stats = stats_;
  return res;
}

}  // namespace detail

Result run_schedule(uint64_t seed, std::ostream* trace, bool permits) {
  detail::Sim sim(seed, trace, permits);
  return sim.run();
}

}  // namespace simba::sim
