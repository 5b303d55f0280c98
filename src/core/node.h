// The state machines of one client: its session and every election and lock on
// it. Pure logic: no I/O, no threads, no clock of its own. Input: commands,
// backend replies and timer ticks, each with "now". Output: calls on Effects.
// The engine drives it from its libuv loop; the simulation from a virtual clock.
#ifndef SIMBA_CORE_NODE_H
#define SIMBA_CORE_NODE_H

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend_types.h"
#include "core/config.h"
#include "core/contender.h"
#include "core/metrics.h"
#include "core/name_index.h"
#include "core/open_table.h"
#include "core/term_state.h"
#include "core/time.h"

namespace simba {

enum class SessionStatus { kOpening, kLive, kSuspended, kClosed };
const char* session_status_name(SessionStatus s);

enum class SessionEvent { kOpened, kLive, kSuspended, kExpired, kClosed, kLeaseShortened };
// "OPENED", "LIVE", ...: for logs and test traces.
const char* session_event_name(SessionEvent e);

// Why a lock could not be had.
// kRefused: a semaphore named with another size than the one it has (the
// contender's size() then says which; ADR 0046).
enum class LockFailure { kTimeout, kBusy, kBackend, kCanceled, kRefused };

// An entry a session holds, beside its name and token: a lease (kLease, 0) or
// a permit or intent with its id (ADR 0046).
struct EntryRef {
  PermitKind kind = PermitKind::kLease;
  uint64_t permit = 0;
};

// What the node asks of the world. Every method is called on the loop thread,
// from inside a Node method; none may call back into the Node synchronously.
class Effects {
 public:
  virtual ~Effects() = default;

  // Backend calls. Each is answered once through the matching Node::on_*
  // method with the same call id. The node alone times them (ADR 0039): an
  // answer that does not come in time is handled by its own timeout, which
  // then calls abandon().
  virtual void send_open(CallId call, Duration lease, Duration timeout) = 0;
  virtual void send_keep_alive(CallId call, const std::string& session, Duration lease,
                               Duration timeout) = 0;
  virtual void send_acquire(CallId call, const std::string& session, const std::string& name,
                            Duration timeout) = 0;
  virtual void send_release(CallId call, const std::string& session, const std::string& name,
                            uint64_t token, Duration timeout) = 0;
  // Permits (ADR 0046): Backend::acquire_permit, release_permit; answered
  // through on_acquire and on_release.
  virtual void send_acquire_permit(CallId call, const std::string& session, const std::string& name,
                                   const PermitAsk& ask, Duration timeout) = 0;
  virtual void send_release_permit(CallId call, const std::string& session, const std::string& name,
                                   EntryRef entry, uint64_t token, Duration timeout) = 0;
  virtual void send_close(CallId call, const std::string& session, Duration timeout) = 0;
  // The timeout of `call` passed unanswered (whether or not the node still
  // wanted its answer): the backend may drop what the call left stuck. The
  // call is still answered once; the node takes that answer as a late one.
  virtual void abandon(CallId call) = 0;

  // Release broadcasts of `name` are wanted from now on (watch) or no longer
  // (unwatch). A contender watches its name from an acquire answered Held
  // until it leads, cools down or leaves; a lock queue shares one watch
  // (ADR 0040). Balanced per name: a watched name is not watched again, and
  // every watch is unwatched before closed().
  virtual void watch(const std::string& name) = 0;
  virtual void unwatch(const std::string& name) = 0;

  // A new term of `who` won with `token` on the session of `session`, before
  // elected(): the owner makes it, with what it keeps per term (the engine's
  // term is what waits on the revocation; ADR 0035). When the term is revoked
  // it ends at once (TermState::ended()); onRevoked comes later, through
  // revoked().
  virtual TermRef new_term(Contender& who, uint64_t token, std::shared_ptr<SessionClock> session) {
    return TermRef(new TermState(who.name, token, std::move(session)));
  }
  // Deliver onElected (election) or complete the acquire (lock).
  virtual void elected(Contender& who, const TermRef& term) = 0;
  // Deliver onRevoked, with the term's reason (term->revoked()): exactly once
  // per elected(), after it.
  virtual void revoked(Contender& who, const TermRef& term) = 0;
  // A lock contender gave up; the node no longer holds it.
  virtual void lock_failed(Contender& who, LockFailure why) = 0;
  // A stop completed, after the contender's last revoked(); the node no longer
  // holds it.
  virtual void stopped(Contender& who) = 0;
  // One step-down request completed, after the revoked() it caused (if any).
  virtual void stepped_down(Contender& who) = 0;

  virtual void session_event(SessionEvent ev, const std::string& detail_json) = 0;
  // close() completed: the session is closed and every contender stopped.
  virtual void closed() = 0;
  virtual void log(int level, const std::string& line) = 0;
};

struct ContenderView {
  ContenderId id;
  std::string name;
  ContenderKind kind;
  std::string state;  // "candidate", "acquiring", "leader", "releasing", "cooldown", "waiting"
  uint64_t token;     // 0 unless a term is held
  Duration remaining;
};

struct NodeView {
  SessionStatus status;
  std::string session_id;
  Duration remaining;
  Duration renew_period;
  bool lease_shortened;
  std::vector<ContenderView> contenders;
  uint64_t sessions_opened, keep_alives, acquires, releases, terms;
  uint64_t leases_held;  // contenders holding a term
  NodeMetrics metrics;
};

class Node {
 public:
  // `clock` is what terms read for validity; it must be the clock whose "now"
  // is passed to every method.
  Node(Config cfg, Effects& fx, const Clock& clock, uint64_t seed);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Opens the first session.
  void start(TimePoint now);
  // Starts the election `c` (kind kElection, not added before). Returns false
  // if the name is already used on this node or the node closes. `with_work`:
  // each term runs leader work, and a stop or step-down waits for
  // work_done() (or the session's local deadline at the stop) before it
  // releases: the seed's handover order. Effects about `c` may come before
  // this returns.
  bool add_election(Contender& c, TimePoint now, bool with_work = false);
  // Starts acquiring the lock `c` (kind kLock), giving up at `give_up_at`
  // (TimePoint::max() never); `try_once` gives up after the first answer.
  // Returns false if an election uses the name or the node closes. A lock on a
  // name another lock of this node holds or waits for queues behind it (a
  // try_once fails with kBusy at once). A permit (kinds kSemaphore, with its
  // size() set, kRead, kWrite; ADR 0046) contends the same way but never
  // queues: permits of one name contend side by side.
  bool add_lock(Contender& c, TimePoint give_up_at, bool try_once, TimePoint now);
  // Stops an election, releases a lock, or cancels a pending lock (kCanceled).
  // Returns false if `c` is not added here or already stopping.
  bool stop(Contender& c, TimePoint now);
  // Steps an election down for `cooldown`. Returns false if not added here,
  // not an election, or stopping.
  bool step_down(Contender& c, Duration cooldown, TimePoint now);
  // Stops everything and closes the session; Effects::closed() at the end.
  // Terms whose work runs are drained first, as by stop().
  void close(TimePoint now);
  // The leader work of the term `token` returned. During a stop or step-down
  // the release goes out now; while still leading, the term is handed over
  // (revoked STEPPED_DOWN, released) and the election contends again.
  void work_done(Contender& c, uint64_t token, TimePoint now);
  // The contender `id` while it is added; null once reported done.
  Contender* find(ContenderId id) const { return contenders_.find(id); }

  void on_open(CallId call, const OpenReply& reply, TimePoint now);
  void on_keep_alive(CallId call, const KeepAliveReply& reply, TimePoint now);
  void on_acquire(CallId call, const AcquireReply& reply, TimePoint now);
  void on_release(CallId call, const DoneReply& reply, TimePoint now);
  void on_close(CallId call, const DoneReply& reply, TimePoint now);
  // The backend broadcast that `name` was released.
  void on_released(const std::string& name, TimePoint now);

  // Runs every timer due at `now`.
  void on_timer(TimePoint now);
  // When on_timer should run next; nullopt when nothing is pending.
  std::optional<TimePoint> next_wakeup() const;

  SessionStatus status() const { return status_; }
  bool closed() const { return status_ == SessionStatus::kClosed; }
  // Why the close left the session to expire on the backend: kTimeout when no
  // answer confirmed it by the local deadline, another outcome when the backend
  // refused it; kOk when it was confirmed or there was no session to close.
  Outcome close_failure() const { return close_failure_; }
  NodeView view() const;
  const Config& config() const { return cfg_; }

 private:
  using State = ContenderState;

  enum class CallKind { kOpen, kKeepAlive, kAcquire, kRelease, kClose };
  struct Call {
    CallKind kind;
    std::string session;
    std::string name;           // acquire, release
    uint64_t token = 0;         // release
    EntryRef entry;             // a permit's acquire (kind) or release (kind, id)
    ContenderId contender = 0;  // acquire, release of a handover
    uint64_t retry = 0;         // release: the ReleaseRetry it is a retry of
    TimePoint sent_at;
    bool abandoned = false;  // its answer is no longer awaited (timeout, stop, new session)
    bool timed_out = false;  // its timeout passed: Effects::abandon() was called
    TimerSlot timeout;
  };

  // Session (node_session.cpp).
  void open_session(TimePoint now);
  void retry_open(TimePoint now);
  // The open sent at `sent_at` was answered with `reply`: the session goes
  // live with `clock`, whose local deadline is `deadline`.
  void go_live(const OpenReply& reply, std::shared_ptr<SessionClock> clock, TimePoint sent_at,
               TimePoint deadline, TimePoint now);
  void send_keep_alive(TimePoint now);
  void keep_alive_renewed(CallId id, const Call& call, const KeepAliveReply& reply, TimePoint now);
  void keep_alive_failed(const KeepAliveReply& reply, TimePoint now);
  // A keep-alive reply `id` listed `listed` as this session's leases: terms it
  // no longer lists are taken over, leases it lists that no term holds are freed.
  void reconcile_owned(CallId id, const std::vector<OwnedLease>& listed, TimePoint now);
  void emit_lease_shortened(Duration granted);
  // The deadline timer at the session's deadline, the next keep-alive a renew
  // period after `sent_at` (when the last successful call was sent).
  void arm_session_timers(TimePoint sent_at, TimePoint now);
  // `timeout`: the call's (zero: call_timeout()).
  CallId send_session_close(const std::string& session, TimePoint now,
                            Duration timeout = Duration::zero());
  void session_ended(RevokeReason reason, TimePoint now);
  void on_session_timer(TimePoint now);
  void on_deadline_timer(TimePoint now);
  void emit(SessionEvent ev, const std::string& detail);
  bool session_usable() const;
  void maybe_send_close(TimePoint now);
  void maybe_finish_close(TimePoint now);
  // At the close: revokes `c`'s term (if any) and reports the contender done.
  void end_at_close(Contender& c, TimePoint now);

  // Contenders: attempts, acquire answers, the name queue (node_contenders.cpp).
  void attempt(Contender& c, TimePoint now);
  // Whether `c` waits for the answer of an acquire of its name this node gave
  // up on (the attempt is then scheduled for when that wait ends).
  bool wait_for_unanswered(Contender& c, TimePoint now);
  // `c` wants (or no longer wants) release broadcasts of its name: the node's
  // one watch of it (Effects::watch), which `c`'s name queue shares.
  void start_watching(Contender& c);
  void stop_watching(Contender& c);
  // `c` is not contending right now: only its give-up time (locks) stays armed.
  void arm_give_up(Contender& c);
  // The timed-out acquire `call` of `name` is answered or forgotten.
  void answered_late(const std::string& name, CallId call, TimePoint now);
  void pump_attempts(TimePoint now);
  void handle_acquire(CallId call, const AcquireReply& reply, TimePoint now);
  // An answer to an acquire no longer awaited: what it won is released.
  void acquire_answered_late(CallId id, const Call& call, const AcquireReply& reply, TimePoint now);
  void acquire_of_stopped_answered(Contender& c, const Call& call, const AcquireReply& reply,
                                   TimePoint now);
  void acquire_won(Contender& c, const Call& call, const AcquireReply& reply, TimePoint now);
  // A try_once lock fails with `why`; anything else retries later.
  void fail_or_retry(Contender& c, LockFailure why, TimePoint now);
  void schedule_attempt(Contender& c, TimePoint at);
  void schedule_retry(Contender& c, TimePoint now, Duration holder_remaining);
  void abandon_attempt(Contender& c);
  void fail_lock(Contender& c, LockFailure why, TimePoint now);
  void finish(Contender& c, TimePoint now);
  // Forgets `c`, reports it (lock_failed with `failure`, else stopped) and lets
  // the next contender queued on its name go.
  void forget(Contender& c, std::optional<LockFailure> failure, TimePoint now);
  void on_contender_timer(Contender& c, TimePoint now);
  void activate_next(std::string_view name, TimePoint now);
  // by_name_: the oldest contender of `name` (0: none), and its upkeep.
  ContenderId front_of(std::string_view name) const;
  void list_by_name(Contender& c);
  void unlist_by_name(Contender& c);
  // Whether `c` is added to this node.
  bool added(const Contender& c) const { return c.id != 0 && find(c.id) == &c; }
  // Gives `c` its id and lists it, last in its name's queue.
  void link(Contender& c);
  // Every contender added, in the order they were added.
  std::vector<Contender*> contenders_in_order() const;
  // Every contender added, in the order of their addresses: a scan of them
  // all reads their owners' blocks about in the order they were made, where
  // the table's order is a hash's (ADR 0043).
  std::vector<Contender*> contenders_by_address() const;

  // Terms and handovers (node_handover.cpp).
  void adopt(Contender& c, uint64_t token, TimePoint now);
  void lose_term(Contender& c, RevokeReason reason, TimePoint now);
  void begin_handover(Contender& c, RevokeReason reason, TimePoint now);
  void release_term(Contender& c, TimePoint now);
  void finish_handover(Contender& c, TimePoint now);
  void after_term(Contender& c, TimePoint now);
  void ack_step_downs(Contender& c);
  // `timeout`: the call's (zero: call_timeout()). Returns the call.
  CallId release_lease(const std::string& session, const std::string& name, uint64_t token,
                       ContenderId handover, TimePoint now, Duration timeout = Duration::zero(),
                       EntryRef entry = {});
  // A waiting writer that leaves withdraws its intent (ADR 0046).
  void withdraw_intent(Contender& c, TimePoint now);
  // An acquire_permit answered after its attempt was given up: what it won
  // (a permit, or an intent no writer keeps) is released.
  void permit_answered_late(const Call& call, const AcquireReply& reply, TimePoint now);
  // Drops the own releases too old to be echoed, once there are many.
  void forget_old_own_releases(TimePoint now);
  // A release of this session failed: send it again later (ADR 0030).
  void release_failed(CallId id, const Call& call, const DoneReply& reply, TimePoint now);
  void on_release_retry(uint64_t id, TimePoint now);
  // The retry of (name, token); 0 if none.
  uint64_t find_release_retry(std::string_view name, uint64_t token, EntryRef entry = {}) const;
  void drop_release_retry(uint64_t id);
  void drop_release_retries();

  // Calls and timers (node.cpp).
  CallId new_call(CallKind kind, const std::string& session, Duration timeout, TimePoint now);
  // Removes the answered call `id` (its timeout disarmed); nullopt if unknown.
  std::optional<Call> take_call(CallId id);
  Duration call_timeout() const { return renew_period_; }
  void on_call_timeout(CallId id, TimePoint now);
  // Answers the call `id` of `kind` as timed out.
  void answer_timed_out(CallId id, CallKind kind, TimePoint now);
  void arm(TimerSlot& slot, TimePoint at, TimerKey key);
  void disarm(TimerSlot& slot);
  // The contender's timer (Contender::timer), of kind kContender.
  void arm(Contender& c, TimePoint at);
  void disarm(Contender& c);

  Config cfg_;
  Effects& fx_;
  const Clock& clock_;
  std::mt19937_64 rng_;

  SessionStatus status_ = SessionStatus::kOpening;
  std::string session_id_;
  std::shared_ptr<SessionClock> session_clock_;
  Duration renew_period_;
  bool lease_shortened_ = false;
  Duration open_backoff_;
  CallId open_call_ = 0;
  CallId keep_alive_call_ = 0;
  TimerSlot session_timer_;   // next keep-alive, open retry, close retry
  TimerSlot deadline_timer_;  // the local deadline
  // Per session: the highest token this session released, per name.
  std::map<std::string, uint64_t> released_;
  // When this node last sent a release of a name: the broadcast it causes is
  // not a reason for this node to attempt at once.
  std::map<std::string, TimePoint> own_release_at_;
  size_t own_release_prune_at_ = 64;  // forget_old_own_releases() runs from this size

  // A release of this session that failed (kError, kTimeout), sent again
  // with its own token after a backoff until it is answered, the session
  // ends or closes, or its local deadline passes (ADR 0030).
  struct ReleaseRetry {
    std::string name;
    uint64_t token = 0;
    EntryRef entry;
    CallId first = 0;      // the release that failed first: a keep-alive sent
                           // after it that no longer lists the lease proves it free
    CallId in_flight = 0;  // the retry sent, until answered
    Duration backoff{0};   // the last wait (timing.h, retry_backoff)
    TimerSlot timer;
  };
  std::map<uint64_t, ReleaseRetry> release_retries_;
  uint64_t next_release_retry_ = 1;

  bool closing_ = false;
  bool close_sent_ = false;
  bool holding_close_ = false;
  CallId close_call_ = 0;
  // A close that failed is sent again (session_timer_) after close_backoff_,
  // until the session's local deadline (ADR 0030).
  bool close_retry_armed_ = false;
  Duration close_backoff_{0};
  Outcome close_failure_ = Outcome::kOk;

  std::map<CallId, Call> calls_;
  CallId next_call_ = 1;
  struct IdOf {
    ContenderId operator()(const Contender* c) const { return c->id; }
  };
  // The contenders added and not yet reported done; their owners hold them.
  OpenTable<Contender, IdOf> contenders_;
  // Per name, its contenders in arrival order: one election, or the locks
  // queued on it. It points at contenders (map nodes never move) and reads
  // their names; a contender leaves it before it is erased (unlist_by_name).
  NameIndex<Contender> by_name_;
  // At most this many acquires in flight per node; the others wait their turn.
  static constexpr size_t kMaxAcquiresInFlight = 64;
  size_t acquires_in_flight_ = 0;
  std::deque<ContenderId> attempt_queue_;
  ContenderId next_contender_ = 1;
  Timers timers_;

  uint64_t sessions_opened_ = 0, keep_alives_ = 0, acquires_ = 0, releases_ = 0, terms_ = 0;
  NodeMetrics metrics_;
  // Per name, the newest acquire of this session that the node gave up on (it
  // timed out, or its contender stopped or gave up) and that may still run on
  // the backend, until it is answered or its tombstone is forgotten.
  std::map<std::string, CallId, std::less<>> unanswered_by_name_;
  // Per permit resource (permit_resource()), the permit contenders that watch
  // it: the node's one watch of it, and whom its broadcast wakes.
  std::map<std::string, std::vector<ContenderId>, std::less<>> permit_watchers_;
};

}  // namespace simba

#endif
