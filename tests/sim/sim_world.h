// The simulator behind run_schedule() (sim.h), shared by its source files:
//   sim.cpp            setup, the event queue, the trace, run();
//   sim_messages.cpp   backend calls as two messages, the store, broadcasts;
//   sim_callbacks.cpp  the checker following every Effects callback;
//   sim_actions.cpp    the application's actions and the injected faults;
//   sim_checks.cpp     the phases of a schedule and the invariants.
// Internal to the simulation layer: the tests use sim.h only.
#ifndef SIMBA_TESTS_SIM_SIM_WORLD_H
#define SIMBA_TESTS_SIM_SIM_WORLD_H

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <queue>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/memory/memory_store.h"
#include "core/config.h"
#include "core/node.h"
#include "core/term_state.h"
#include "core/time.h"
#include "sim/sim.h"
#include "support/fake_clock.h"

namespace simba::sim::detail {

using simba::testing::FakeClock;

struct Violation : std::runtime_error {
  explicit Violation(const std::string& what) : std::runtime_error(what) {}
};

// The store's clock: the shared virtual clock scaled by a constant rate around
// the moment the schedule starts. A rate within 1 ± drift models the backend's
// clock rate difference the configuration allows.
class ScaledClock final : public Clock {
 public:
  ScaledClock(const Clock& base, long double rate)
      : base_(base), origin_(base.now()), rate_(rate) {}
  TimePoint now() const override {
    const long double d = static_cast<long double>((base_.now() - origin_).count());
    return origin_ + Duration(static_cast<int64_t>(d * rate_));
  }

 private:
  const Clock& base_;
  const TimePoint origin_;
  const long double rate_;
};

inline Duration us(int64_t n) { return std::chrono::microseconds(n); }

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
  // The permit scenario: names of semaphores and read/write locks (apart from
  // the lease names), and each semaphore's size, which every holder names.
  std::vector<std::string> permit_names;
  std::map<std::string, uint32_t> sem_size;
};

enum class ReqKind {
  kOpen,
  kKeepAlive,
  kAcquire,
  kRelease,
  kClose,
  kAcquirePermit,
  kReleasePermit
};
inline const char* req_name(ReqKind k) {
  switch (k) {
    case ReqKind::kOpen:
      return "open";
    case ReqKind::kKeepAlive:
      return "keep_alive";
    case ReqKind::kAcquire:
      return "acquire";
    case ReqKind::kRelease:
      return "release";
    case ReqKind::kClose:
      return "close";
    case ReqKind::kAcquirePermit:
      return "acquire_permit";
    case ReqKind::kReleasePermit:
      return "release_permit";
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
  PermitAsk ask;   // kAcquirePermit
  EntryRef entry;  // kReleasePermit
};

// One elected term, as the checker follows it.
struct TermRec {
  TermRef term;
  int slot = 0;
  uint64_t inst = 0;
  ContenderId who = 0;
  ContenderKind kind = ContenderKind::kElection;
  uint64_t permit = 0;  // a permit's id
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
  void send_acquire_permit(CallId call, const std::string& session, const std::string& name,
                           const PermitAsk& ask, Duration timeout) override;
  void send_release_permit(CallId call, const std::string& session, const std::string& name,
                           EntryRef entry, uint64_t token, Duration timeout) override;
  void send_close(CallId call, const std::string& session, Duration timeout) override;
  // The simulated store answers every call anyway, late if the node gave up:
  // the worst case for the node's late-answer rules.
  void abandon(CallId) override {}
  void watch(const std::string& name) override;
  void unwatch(const std::string& name) override;
  // Terms that report their end (TermState::ended()) to the checker.
  TermRef new_term(Contender& who, uint64_t token, std::shared_ptr<SessionClock> session) override;
  void elected(Contender& who, const TermRef& term) override;
  void revoked(Contender& who, const TermRef& term) override;
  // These two free the contender, as the engine frees its records there.
  void lock_failed(Contender& who, LockFailure why) override;
  void stopped(Contender& who) override;
  void stepped_down(Contender& who) override;
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
  // The node's contenders, owned here until the node reports them done.
  std::map<ContenderId, std::unique_ptr<Contender>> owned;
  std::unique_ptr<Node> node;  // destroyed before fx and owned
  TimePoint paused_until{};
  std::optional<TimePoint> armed_at;  // earliest timer event queued for the node
  // The names it watches: the store's broadcasts reach only these (ADR 0040).
  std::set<std::string> watched;
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
  // The session its close must free, and that session's local deadline at
  // the close (invariant 8); empty when it held no term then.
  std::string close_session;
  TimePoint close_deadline{};
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

inline const char* failure_name(LockFailure why) {
  switch (why) {
    case LockFailure::kTimeout:
      return "timeout";
    case LockFailure::kBusy:
      return "busy";
    case LockFailure::kBackend:
      return "backend";
    case LockFailure::kCanceled:
      return "canceled";
    case LockFailure::kRefused:
      return "refused";
  }
  return "?";
}

inline std::string json_session(const std::string& js) {
  static const std::string kKey = "\"session\":\"";
  const size_t k = js.find(kKey);
  if (k == std::string::npos) return "";
  const size_t b = k + kKey.size();
  const size_t e = js.find('"', b);
  return e == std::string::npos ? "" : js.substr(b, e - b);
}

class Sim {
 public:
  Sim(uint64_t seed, std::ostream* trace, bool permits = false)
      : seed_(seed), permits_(permits), rng_(seed), tr_(trace) {}
  Result run();

  // Effects entry points.
  void fx_send(NodeBox& b, Req r);
  void fx_term_ended(NodeBox& b, ContenderId who, const TermRef& term);
  void fx_elected(NodeBox& b, ContenderId who, const TermRef& term);
  void fx_revoked(NodeBox& b, ContenderId who, const TermRef& term, RevokeReason reason);
  void fx_lock_failed(NodeBox& b, ContenderId who, LockFailure why);
  void fx_stopped(NodeBox& b, ContenderId who);
  void fx_stepped_down(NodeBox& b, ContenderId who);
  void fx_session_event(NodeBox& b, SessionEvent ev, const std::string& detail);
  void fx_closed(NodeBox& b);
  void fx_watch(NodeBox& b, const std::string& name, bool on);
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
  // A lock's (or permit's) limits: try-once, a give-up time, or neither.
  void draw_lock_limits(TimePoint* give_up, bool* once);
  // The permit scenario: a semaphore, read or write permit of a permit name.
  void add_permit(NodeBox& b, const std::string& name);
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
  // The permit invariants over the terms valid now (sim.h).
  void check_permits(const std::vector<TermRec*>& valid);
  // Whether `x`'s session was ended early by the store (expire_session) at or
  // before `at`: a later term may overlap it (the fencing token's fault).
  bool ended_early(const TermRec& x, TimePoint at) const {
    auto h = hooked_.find(x.term->session_id());
    return h != hooked_.end() && h->second <= at;
  }
  bool valid_now(const TermState& t) const;
  // In the quiet stretch, once what the faults left behind had a lease and a
  // renew period to settle: no session may end and no term be lost any more.
  bool stable() const {
    return quiet_ && !final_ &&
           now() >= quiet_start_ + p_.cfg.lease_duration + p_.cfg.renew_interval();
  }
  void check_liveness();
  void check_orphans();
  // The same for the permits and intents of the permit scenario (ADR 0005's
  // rule by entry: the reconcile releases them).
  void check_permit_orphans();
  // Notes that `slot` (a lease name, or a permit entry) is orphaned as `key`
  // (its holder and token) now; true, with when it began, once it has been
  // for longer than invariant 7 allows.
  bool orphan_too_old(const std::string& slot, const std::string& key, TimePoint* since);
  // Whether `b`, on its live session `session`, holds a term or a waiting
  // writer's intent for the permit entry `l`.
  bool explains(const NodeBox& b, const LeaseInfo& l) const;
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
  const bool permits_;
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
  // Every permit elected, as resource#id: each is elected at most once.
  std::set<std::string> permits_elected_;
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

}  // namespace simba::sim::detail

#endif
