#include "sim/sim.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/memory/memory_store.h"
#include "core/config.h"
#include "core/node.h"
#include "core/term_state.h"
#include "core/timing.h"
#include "support/fake_clock.h"

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
}

std::string Stats::summary() const {
  std::ostringstream s;
  s << schedules << " schedules, " << events << " events, " << virtual_ms / 1000 << " s virtual; "
    << nodes << " nodes, " << sessions << " sessions, " << terms << " terms (" << lock_terms
    << " locks), " << revoked << " revoked (taken over " << taken_over << ", deadline passed "
    << deadline_passed << ", session expired " << session_expired << ", stepped down "
    << stepped_down << "); faults: " << dropped << " dropped, " << late_replies
    << " late replies, " << pauses << " pauses (" << long_pauses << " > lease), " << expiries
    << " expiries, " << handovers << " hand-overs, " << closes << " node closes; "
    << quiet_checks << " liveness checks, " << orphans_seen << " orphans seen (longest "
    << orphan_max_ms << " ms into a quiet stretch), "
    << drifting_store << " schedules with a drifting store clock";
  return s.str();
}

namespace {

using simba::testing::FakeClock;

struct Violation : std::runtime_error {
  explicit Violation(const std::string& what) : std::runtime_error(what) {}
};

// The store's clock: the shared virtual clock scaled by a constant rate around
// the moment the schedule starts. A rate within 1 ± drift models the backend's
// clock rate difference the configuration allows.
class ScaledClock final : public Clock {
 public:
  ScaledClock(const Clock& base, long double rate) : base_(base), origin_(base.now()), rate_(rate) {}
  TimePoint now() const override {
    const long double d = static_cast<long double>((base_.now() - origin_).count());
    return origin_ + Duration(static_cast<int64_t>(d * rate_));
  }

 private:
  const Clock& base_;
  const TimePoint origin_;
  const long double rate_;
};

Duration us(int64_t n) { return std::chrono::microseconds(n); }

// The parameters of one schedule, all drawn from its seed.
struct Params {
  Config cfg;
  int nodes = 3;
  std::vector<std::string> election_names;
  std::vector<std::string> lock_names;  // the election names, maybe one lock-only name
  long double store_rate = 1.0L;
  Duration dmin{0}, dmax{0};  // one-way delay of a message without faults
  // How often a message is handled before the node's timers already due (an
  // event loop that polls I/O in the iteration a timer became due).
  double p_msg_first = 0;
  double p_drop = 0, p_long = 0, p_slow = 0, p_err = 0, p_bcast_drop = 0, p_long_pause = 0;
  Duration fault_gap_min{0}, fault_gap_max{0};
  Duration action_gap_min{0}, action_gap_max{0};
  Duration chaos_len{0};
  bool quiet = false;  // a fault-free stretch (liveness, orphans) after the chaos
  // Backend variants, on top of the MemoryStore:
  // a cap on the session timeout (a ZooKeeper maxSessionTimeout): the store is
  // asked for at most this lease, and grants it, so the node renews faster;
  Duration lease_cap = Duration::max();
  // an acquire by the session that already holds the lease answers kOk with the
  // current token (an idempotent acquire, as some backends do) instead of kHeld.
  bool reacquire_ok = false;
  // A node's loop runs a due timer up to this late (a busy loop).
  Duration timer_slop{0};
};

enum class ReqKind { kOpen, kKeepAlive, kAcquire, kRelease, kClose };
const char* req_name(ReqKind k) {
  switch (k) {
    case ReqKind::kOpen: return "open";
    case ReqKind::kKeepAlive: return "keep_alive";
    case ReqKind::kAcquire: return "acquire";
    case ReqKind::kRelease: return "release";
    case ReqKind::kClose: return "close";
  }
  return "?";
}

struct Req {
  ReqKind kind = ReqKind::kOpen;
  CallId call = 0;
  std::string session;
  std::string name;
  uint64_t token = 0;
  Duration lease{0};
  Duration timeout{0};
  TimePoint sent_at;
};

// One elected term, as the checker follows it.
struct TermRec {
  std::shared_ptr<TermState> term;
  int slot = 0;
  uint64_t inst = 0;
  ContenderId who = 0;
  TimePoint elected_at;
  bool ended_seen = false;     // read invalid once: must stay invalid
  bool term_ended_cb = false;  // Effects::term_ended seen
  bool revoked_cb = false;     // Effects::revoked seen
  // Leader work (elections started with work): running until work_done().
  bool work_running = false;
  bool work_cooperative = false;  // its work returns soon after the term ends
  // A stop, step-down or close began its handover: the release may not go out
  // before the work exits or this instant (the term's deadline at the stop).
  std::optional<TimePoint> handover_deadline;
};

// One contender of a node, as the checker follows it from the callbacks.
struct Track {
  std::string name;
  ContenderKind kind = ContenderKind::kElection;
  bool with_work = false;       // terms run leader work (handover waits for it)
  bool finished = false;        // stopped() or lock_failed() seen
  bool stop_requested = false;  // stop() accepted
  std::shared_ptr<TermRec> term;
  int step_requests = 0, step_acks = 0;
  CallId last_acquire = 0;
};

// One acquire call, to tell a current attempt from an abandoned one.
struct AcqTrack {
  ContenderId who = 0;
  std::string name;
  std::string session;
  TimePoint sent_at;
  Duration timeout{0};
  bool answered = false;
  bool abandoned = false;  // stop, step-down, finished, session ended, close
};

struct Adding {
  ContenderId id;
  std::string name;
  ContenderKind kind;
};

class Sim;
struct NodeBox;

class SimEffects final : public Effects {
 public:
  SimEffects(Sim& sim, NodeBox& box) : sim_(sim), box_(box) {}
  void send_open(CallId call, Duration lease, Duration timeout) override;
  void send_keep_alive(CallId call, const std::string& session, Duration lease,
                       Duration timeout) override;
  void send_acquire(CallId call, const std::string& session, const std::string& name,
                    Duration timeout) override;
  void send_release(CallId call, const std::string& session, const std::string& name,
                    uint64_t token, Duration timeout) override;
  void send_close(CallId call, const std::string& session, Duration timeout) override;
  void term_ended(ContenderId who, const std::shared_ptr<TermState>& term) override;
  void elected(ContenderId who, const std::shared_ptr<TermState>& term) override;
  void revoked(ContenderId who, const std::shared_ptr<TermState>& term,
               RevokeReason reason) override;
  void lock_failed(ContenderId who, LockFailure why) override;
  void stopped(ContenderId who) override;
  void stepped_down(ContenderId who) override;
  void session_event(SessionEvent ev, const std::string& detail_json) override;
  void closed() override;
  void log(int level, const std::string& line) override;

 private:
  Sim& sim_;
  NodeBox& box_;
};

struct NodeBox {
  int slot = 0;
  uint64_t inst = 0;
  std::unique_ptr<SimEffects> fx;
  std::unique_ptr<Node> node;  // destroyed before fx
  TimePoint paused_until{};
  std::optional<TimePoint> armed_at;  // earliest timer event queued for the node
  bool closing = false;
  bool closed = false;
  int target_elections = 1;
  std::map<ContenderId, Track> cs;
  ContenderId next_id = 1;
  std::optional<Adding> adding;  // inside add_election / add_lock
  std::map<CallId, AcqTrack> acq;
  CallId delivering_acquire = 0;  // inside on_acquire for this call
  TimePoint last_timer_run{};     // the latest `now` given to on_timer
  std::string session;
  bool session_live = false;
};

struct SessionRec {
  std::string id;
  int slot;
  uint64_t inst;
  std::string alias;
};

struct Orphan {
  std::string key;
  TimePoint since;
};

const char* event_name(SessionEvent ev) {
  switch (ev) {
    case SessionEvent::kOpened: return "OPENED";
    case SessionEvent::kLive: return "LIVE";
    case SessionEvent::kSuspended: return "SUSPENDED";
    case SessionEvent::kExpired: return "EXPIRED";
    case SessionEvent::kClosed: return "CLOSED";
    case SessionEvent::kLeaseShortened: return "LEASE_SHORTENED";
  }
  return "?";
}

const char* failure_name(LockFailure why) {
  switch (why) {
    case LockFailure::kTimeout: return "timeout";
    case LockFailure::kBusy: return "busy";
    case LockFailure::kBackend: return "backend";
    case LockFailure::kCanceled: return "canceled";
  }
  return "?";
}

std::string json_session(const std::string& js) {
  static const std::string kKey = "\"session\":\"";
  const size_t k = js.find(kKey);
  if (k == std::string::npos) return "";
  const size_t b = k + kKey.size();
  const size_t e = js.find('"', b);
  return e == std::string::npos ? "" : js.substr(b, e - b);
}

class Sim {
 public:
  Sim(uint64_t seed, std::ostream* trace) : seed_(seed), rng_(seed), tr_(trace) {}
  Result run();

  // Effects entry points.
  void fx_send(NodeBox& b, Req r);
  void fx_term_ended(NodeBox& b, ContenderId who, const std::shared_ptr<TermState>& term);
  void fx_elected(NodeBox& b, ContenderId who, const std::shared_ptr<TermState>& term);
  void fx_revoked(NodeBox& b, ContenderId who, const std::shared_ptr<TermState>& term,
                  RevokeReason reason);
  void fx_lock_failed(NodeBox& b, ContenderId who, LockFailure why);
  void fx_stopped(NodeBox& b, ContenderId who);
  void fx_stepped_down(NodeBox& b, ContenderId who);
  void fx_session_event(NodeBox& b, SessionEvent ev, const std::string& detail);
  void fx_closed(NodeBox& b);
  void fx_log(NodeBox& b, int level, const std::string& line);

 private:
  struct Event {
    TimePoint at;
    uint64_t seq;
    std::function<void()> fn;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.at != b.at ? a.at > b.at : a.seq > b.seq;
    }
  };

  // Randomness: everything from rng_.
  double unit() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }
  bool chance(double p) { return unit() < p; }
  Duration between(Duration a, Duration b) {
    if (b <= a) return a;
    return Duration(std::uniform_int_distribution<int64_t>(a.count(), b.count())(rng_));
  }
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  TimePoint now() const { return clk_.now(); }
  void push(TimePoint at, std::function<void()> fn) { q_.push(Event{at, seq_++, std::move(fn)}); }
  [[noreturn]] void fail(const std::string& what);

  void make_params();
  void setup();
  NodeBox* find(int slot, uint64_t inst);
  void spawn(int slot);
  void to_node(TimePoint at, int slot, uint64_t inst, std::function<void(NodeBox&)> fn);
  void deliver(int slot, uint64_t inst, std::function<void(NodeBox&)> fn);
  void run_due_timers(NodeBox& b);
  void arm_timers();
  void after_event();
  Duration leg_delay(Duration timeout);
  void at_store(int slot, uint64_t inst, const Req& r);
  void register_session(const std::string& id, int slot, uint64_t inst);
  void on_broadcast(const std::string& name);

  // The application.
  void schedule_action(NodeBox& b);
  void act(NodeBox& b);
  void add_election(NodeBox& b, const std::string& name);
  void note_handover(NodeBox& b, ContenderId id);
  void schedule_work_exit(NodeBox& b, ContenderId who, uint64_t token, Duration after);
  void add_lock(NodeBox& b, const std::string& name);
  void stop(NodeBox& b, ContenderId id);
  void step_down(NodeBox& b, ContenderId id);
  void close_node(NodeBox& b);
  bool name_busy(const NodeBox& b, const std::string& name) const;

  // Faults.
  void fault_tick();
  void pause_node();
  void expire_session();
  void hand_over();

  // Phases and checks.
  void end_chaos();
  void start_quiet();
  void start_final();
  void check_terms();
  bool valid_now(const TermState& t) const;
  // In the quiet stretch, once what the faults left behind had a lease and a
  // renew period to settle: no session may end and no term be lost any more.
  bool stable() const {
    return quiet_ && !final_ &&
           now() >= quiet_start_ + p_.cfg.lease_duration + p_.cfg.renew_interval();
  }
  void check_liveness();
  void check_orphans();
  Track& track(NodeBox& b, ContenderId who, const char* what);
  void abandon(NodeBox& b, ContenderId who);
  bool all_closed() const;

  // Trace.
  std::string t_str(TimePoint t) const;
  std::ostream& T();
  std::string alias(const std::string& session) const;
  std::string node_str(const NodeBox& b) const;
  std::string term_str(const TermRec& r) const;

  const uint64_t seed_;
  std::mt19937_64 rng_;
  std::ostream* tr_;
  Params p_;
  FakeClock clk_;
  TimePoint t0_ = clk_.now();
  std::unique_ptr<ScaledClock> store_clock_;
  std::unique_ptr<MemoryStore> store_;
  std::vector<std::unique_ptr<NodeBox>> slots_;
  uint64_t next_inst_ = 0;
  std::priority_queue<Event, std::vector<Event>, Later> q_;
  uint64_t seq_ = 0;
  Stats stats_;

  bool faults_ = true;       // message faults and fault hooks
  bool app_frozen_ = false;  // no more application actions
  bool quiet_ = false;
  bool final_ = false;
  bool done_ = false;
  TimePoint settle_until_{};  // the last effect of a fault already injected
  TimePoint quiet_start_{};
  Duration orphan_limit_{0};

  std::vector<std::shared_ptr<TermRec>> terms_;  // not yet revoked-and-invalid
  std::map<std::string, uint64_t> max_token_;
  std::map<std::string, TimePoint> hooked_;  // sessions ended early by expire_session
  std::vector<SessionRec> sessions_;
  std::map<std::string, size_t> session_index_;
  std::map<std::string, Orphan> orphans_;
  uint64_t foreign_ = 0;
  // Set while the checker reads the store: MemoryStore::lease() and
  // session_live() expire a dead session lazily and broadcast what it held;
  // such a broadcast is an artefact of looking, not something a node would get.
  bool observing_ = false;
};

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
void SimEffects::send_close(CallId call, const std::string& session, Duration timeout) {
  Req r;
  r.kind = ReqKind::kClose;
  r.call = call;
  r.session = session;
  r.timeout = timeout;
  sim_.fx_send(box_, std::move(r));
}
void SimEffects::term_ended(ContenderId who, const std::shared_ptr<TermState>& term) {
  sim_.fx_term_ended(box_, who, term);
}
void SimEffects::elected(ContenderId who, const std::shared_ptr<TermState>& term) {
  sim_.fx_elected(box_, who, term);
}
void SimEffects::revoked(ContenderId who, const std::shared_ptr<TermState>& term,
                         RevokeReason reason) {
  sim_.fx_revoked(box_, who, term, reason);
}
void SimEffects::lock_failed(ContenderId who, LockFailure why) { sim_.fx_lock_failed(box_, who, why); }
void SimEffects::stopped(ContenderId who) { sim_.fx_stopped(box_, who); }
void SimEffects::stepped_down(ContenderId who) { sim_.fx_stepped_down(box_, who); }
void SimEffects::session_event(SessionEvent ev, const std::string& detail_json) {
  sim_.fx_session_event(box_, ev, detail_json);
}
void SimEffects::closed() { sim_.fx_closed(box_); }
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
  if (chance(0.5)) c.renew_interval_set = between(c.lease_duration / 4, c.lease_duration * 45 / 100);
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
    p.store_rate = d < 0.5 ? 1.0L + drift : d < 0.6 ? 1.0L - drift
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
        << "] us, p_drop " << p_.p_drop << ", p_long " << p_.p_long << ", p_slow " << p_.p_slow << ", p_err " << p_.p_err
        << ", p_bcast_drop " << p_.p_bcast_drop << ", p_msg_first " << p_.p_msg_first << ", chaos " << to_ms(p_.chaos_len) << " ms"
        << (p_.lease_cap != Duration::max() ? ", lease cap " + std::to_string(to_ms(p_.lease_cap)) + " ms" : "")
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
  push(at, [this, slot, inst, fn = std::move(fn)]() mutable { deliver(slot, inst, std::move(fn)); });
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
  if (r.kind == ReqKind::kAcquire) {
    // Which contender: the one being added, else the oldest unfinished
    // contender of the name (the front of the node's queue for the name).
    ContenderId who = 0;
    if (b.adding && b.adding->name == r.name) {
      who = b.adding->id;
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
      fn = [this, call, rep](NodeBox& b) {
        // Answered as the node receives it: on_acquire may send the next
        // attempt at once (a Held answer after a release broadcast).
        auto it = b.acq.find(call);
        if (it != b.acq.end()) it->second.answered = true;
        b.delivering_acquire = call;
        b.node->on_acquire(call, rep, now());
        b.delivering_acquire = 0;
      };
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
    to_node(now() + between(p_.dmin, p_.dmax), bp->slot, bp->inst, [this, name](NodeBox& b) {
      if (tr_) T() << node_str(b) << " <- released " << name << "\n";
      b.node->on_released(name, now());
    });
  }
}

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

void Sim::fx_term_ended(NodeBox& b, ContenderId who, const std::shared_ptr<TermState>& term) {
  Track& t = track(b, who, "term_ended");
  if (tr_) {
    T() << node_str(b) << " term_ended contender " << who << " " << term->name() << " token "
        << term->token() << " " << revoke_reason_name(term->revoked()) << "\n";
  }
  if (!t.term || t.term->term != term) {
    fail("[elected/revoked pairing] " + node_str(b) + " term_ended for a term contender " +
         std::to_string(who) + " does not hold");
  }
  if (t.term->term_ended_cb) fail("[elected/revoked pairing] term_ended twice for " + term_str(*t.term));
  if (t.term->work_cooperative) {
    schedule_work_exit(b, who, term->token(), between(Duration(0), p_.cfg.lease_duration / 4));
  }
  if (term->revoked() == RevokeReason::kNone) fail("term_ended for an unrevoked " + term_str(*t.term));
  if (term->valid()) fail("[revoked terms are invalid] term_ended for a valid " + term_str(*t.term));
  t.term->term_ended_cb = true;
}

void Sim::fx_elected(NodeBox& b, ContenderId who, const std::shared_ptr<TermState>& term) {
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
  if (a.who != who) fail("[no abandoned attempt] " + ctx + " sent for contender " + std::to_string(a.who));
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
  if (term->token() == 0) fail(ctx + ": token 0");
  if (!term->valid()) fail(ctx + ": the new term is not valid");
  // Invariant 2: tokens strictly increasing per name. A term of a session the
  // store ended early (expire_session) may come after a later one: that is the
  // fault the fencing token covers, not the node's doing.
  uint64_t& high = max_token_[term->name()];
  if (term->token() <= high) {
    auto h = hooked_.find(term->session_id());
    if (h == hooked_.end() || h->second > now()) {
      fail("[tokens increase] " + ctx + " after token " + std::to_string(high) +
           " was already elected");
    }
  }
  high = std::max(high, term->token());

  auto rec = std::make_shared<TermRec>();
  rec->term = term;
  rec->slot = b.slot;
  rec->inst = b.inst;
  rec->who = who;
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
      schedule_work_exit(b, who, term->token(),
                         between(Duration(0), p_.cfg.lease_duration * 3));
    } else {
      rec->work_cooperative = true;
    }
  }
  ++stats_.terms;
  if (t.kind == ContenderKind::kLock) ++stats_.lock_terms;
}

void Sim::fx_revoked(NodeBox& b, ContenderId who, const std::shared_ptr<TermState>& term,
                     RevokeReason reason) {
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
  if (stable() && (reason == RevokeReason::kDeadlinePassed || reason == RevokeReason::kSessionExpired ||
                   reason == RevokeReason::kTakenOver)) {
    fail("[stability] without faults a term was lost: " + std::string(revoke_reason_name(reason)) +
         " " + term_str(r));
  }
  r.revoked_cb = true;
  t.term.reset();
  ++stats_.revoked;
  switch (reason) {
    case RevokeReason::kTakenOver: ++stats_.taken_over; break;
    case RevokeReason::kDeadlinePassed: ++stats_.deadline_passed; break;
    case RevokeReason::kSessionExpired: ++stats_.session_expired; break;
    case RevokeReason::kSteppedDown: ++stats_.stepped_down; break;
    default: break;
  }
}

void Sim::fx_lock_failed(NodeBox& b, ContenderId who, LockFailure why) {
  Track& t = track(b, who, "lock_failed");
  if (tr_) T() << node_str(b) << " lock_failed contender " << who << " " << failure_name(why) << "\n";
  if (t.kind != ContenderKind::kLock) fail(node_str(b) + " lock_failed for an election");
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
  if (tr_) T() << node_str(b) << " session " << event_name(ev) << " " << alias(id) << "\n";
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
      if (stable()) fail("[stability] without faults " + node_str(b) + "'s session ended: " + detail);
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

void Sim::fx_closed(NodeBox& b) {
  if (b.closed) fail(node_str(b) + " closed() twice");
  if (tr_) T() << node_str(b) << " CLOSED\n";
  for (const auto& [id, t] : b.cs) {
    if (!t.finished) fail(node_str(b) + " closed() with contender " + std::to_string(id) + " not finished");
    if (t.term) fail("[elected/revoked pairing] closed() with " + term_str(*t.term) + " not revoked");
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
  const ContenderId id = b.node->add_election(name, now(), with_work);
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
  if (id != expect) fail("contender id " + std::to_string(id) + ", expected " + std::to_string(expect));
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
    nb.node->work_done(who, token, now());
  });
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
  const double r = unit();
  if (r < 0.3) {
    once = true;
  } else if (r < 0.7) {
    give_up = now() + between(Duration(0), p_.cfg.lease_duration * 2);
  }
  const ContenderId expect = b.next_id;
  b.adding = Adding{expect, name, ContenderKind::kLock};
  const ContenderId id = b.node->add_lock(name, give_up, once, now());
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
  if (id != expect) fail("contender id " + std::to_string(id) + ", expected " + std::to_string(expect));
  ++b.next_id;
  Track& t = b.cs[id];  // may exist already (a try_once that failed at once)
  t.name = name;
  t.kind = ContenderKind::kLock;
}

void Sim::stop(NodeBox& b, ContenderId id) {
  Track& t = b.cs.at(id);
  t.stop_requested = true;
  abandon(b, id);
  note_handover(b, id);
  if (tr_) T() << node_str(b) << " stop contender " << id << " (" << t.name << ")\n";
  if (!b.node->stop(id, now())) fail(node_str(b) + " stop(" + std::to_string(id) + ") refused a live contender");
}

void Sim::step_down(NodeBox& b, ContenderId id) {
  const Duration cooldown = chance(0.2) ? Duration(0) : between(Duration(0), p_.cfg.lease_duration * 2);
  Track& t = b.cs.at(id);
  ++t.step_requests;  // the acknowledgement may come before step_down returns
  abandon(b, id);
  note_handover(b, id);
  if (tr_) T() << node_str(b) << " step_down contender " << id << " cooldown " << to_ms(cooldown) << " ms\n";
  if (!b.node->step_down(id, cooldown, now())) {
    fail(node_str(b) + " step_down(" + std::to_string(id) + ") refused a live election");
  }
}

void Sim::close_node(NodeBox& b) {
  if (tr_) T() << node_str(b) << " close\n";
  if (!final_) ++stats_.closes;
  b.closing = true;
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
  const TimePoint at = now() + c.lease_duration + 2 * c.renew_interval() +
                       between(Duration(0), c.lease_duration);
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

// ---------------------------------------------------------------------------
// Phases.

void Sim::end_chaos() {
  faults_ = false;
  app_frozen_ = true;
  if (tr_) T() << "chaos ends; faults settle until " << t_str(std::max(now(), settle_until_)) << "\n";
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
  terms_.erase(std::remove_if(terms_.begin(), terms_.end(),
                              [](const std::shared_ptr<TermRec>& r) {
                                return r->revoked_cb && r->ended_seen;
                              }),
               terms_.end());
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
    if (bp->closing) fail("[completion] " + node_str(*bp) + " still closing after 2 s without faults");
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
        if (!t.finished && !t.stop_requested && t.kind == ContenderKind::kElection && t.name == name) {
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
    auto it = orphans_.find(name);
    if (it == orphans_.end() || it->second.key != key) {
      orphans_[name] = Orphan{key, now()};
      ++stats_.orphans_seen;
      continue;
    }
    const TimePoint from = std::max(it->second.since, quiet_start_);
    stats_.orphan_max_ms = std::max<uint64_t>(stats_.orphan_max_ms, static_cast<uint64_t>(to_ms(now() - from)));
    if (now() - from > orphan_limit_) {
      fail("[orphan rule] lease " + name + " token " + std::to_string(v.token) + " held by " +
           alias(v.holder) + " without a term since " + t_str(it->second.since) + " ms");
    }
  }
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

}  // namespace

Result run_schedule(uint64_t seed, std::ostream* trace) {
  Sim sim(seed, trace);
  return sim.run();
}

}  // namespace simba::sim
