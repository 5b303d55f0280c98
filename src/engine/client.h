// One client: one Loop (on a thread of its own, or driven by the host; who may
// touch what from which thread is stated in engine/loop.h), one backend, one
// Node (the state machines), and the callback executor. API threads post
// commands to the loop; the loop drives the Node and turns its Effects into
// backend calls and callbacks (effects.cpp). Leader work: work.cpp.
#ifndef SIMBA_ENGINE_CLIENT_H
#define SIMBA_ENGINE_CLIENT_H

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "core/config.h"
#include "core/node.h"
#include "engine/executor.h"
#include "engine/loop.h"
#include "engine/parking.h"
#include "engine/result.h"
#include "engine/term.h"

namespace simba::engine {

using DoneFn = std::function<void(Code code)>;
using EventFn = std::function<void(SessionEvent, const std::string& detail)>;
// `detail`: what went wrong, when code is not kOk (may be empty).
using LockFn = std::function<void(Code code, Term* term, const std::string& detail)>;
// Leader work: runs on a thread of its own for each term of a task's election.
using WorkFn = std::function<void(Term*)>;
// The last callback of a handle's close (the *_close_async of simba.h): runs
// once, after every other callback of the handle returned.
using LastFn = std::function<void()>;

// Runs `fn` on `q` (after every task posted to it so far); once `q` is closed
// (its client closed), on a thread of its own instead, so that it runs all the
// same and never inside its caller (ADR 0041).
void run_last(SerialQueue& q, LastFn fn);

// An election's listener in three words, as the C ABI's (ADR 0042): the
// caller's functions, kept as given, and their user data. Two std::functions
// were 64 bytes of every election.
struct Listener {
  void (*elected)() = nullptr;
  void (*revoked)() = nullptr;
  void* ud = nullptr;
};
// How a client calls its elections' listeners: each function converted back
// to the type it was given as. One table per client, not per election.
struct ListenerCalls {
  void (*elected)(const Listener& l, Term* t);
  void (*revoked)(const Listener& l, Term* t, RevokeReason why);
};

// Host-provided pieces of the configuration that have no text form.
struct Hooks {
  HostExecutor::SubmitFn submit = nullptr;
  void* submit_ctx = nullptr;
  std::function<void(int level, const std::string&)> log;
  int log_min_level = 0;
  EventFn events;  // the sink a client starts with (simba_config_set_event_sink)
  const ListenerCalls* listener_calls = nullptr;  // static; needed for a Listener
  // memory:// only: the client's test-only fault switches, made by the C API
  // (the engine knows no backend's types).
  std::shared_ptr<MemoryFaults> memory_faults;
};

// How many work threads of an election are still running.
struct WorkCount {
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;
  LastFn idle_then;  // guarded by mu: run by the end() that leaves none running
  void begin();
  void end();
  void wait_idle();
};

// Where threads other than the loop's (leader work) send commands to the
// loop: safe after the client is gone, when posts are simply dropped.
struct Mailbox {
  std::mutex mu;
  Client* client = nullptr;  // nulled by the client's teardown
  bool post(std::function<void(Client&)> fn);
};

// One election: the record of its lease (ADR 0035). It holds the core's
// contender state (the node links it while the election runs), the listener,
// the callback queue and the current term's engine reference. It counts its
// own references (ADR 0042): the C handle (simba_election_t is this object),
// the node's link (one from add_election until stopped()), its queue's
// drains and terms (the queue is its base and counts the election's
// references), and the engine's captures.
class Election final : private simba::Contender, private SerialQueue {
 public:
  // Its name's characters live in its own block, after the object (ADR 0043):
  // its terms borrow them, and each term holds the election (its queue).
  static RefPtr<Election> make(const RefPtr<QueueExecutors>& executors, std::string_view name) {
    void* p = ::operator new(sizeof(Election) + LeaseName::inline_bytes(name));
    try {
      return RefPtr<Election>(new (p) Election(
          executors, LeaseName::make_inline(static_cast<char*>(p) + sizeof(Election), name)));
    } catch (...) {
      ::operator delete(p);
      throw;
    }
  }
  static void operator delete(void* p) { ::operator delete(p); }
  Election(const Election&) = delete;
  Election& operator=(const Election&) = delete;
  void retain() override { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() override {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  const LeaseName& name() const { return Contender::name; }
  // Its client; empty once the client is gone (closed, its handle freed).
  std::shared_ptr<Client> client() const { return executors()->client(); }
  // Runs `fn` on its queue after every callback queued so far (run_last).
  void run_last_on_queue(LastFn fn) { run_last(*this, std::move(fn)); }
  // Blocks until every run of a task's work returned.
  void wait_for_work() const {
    if (Work* w = work()) w->count.wait_idle();
  }
  // Its stop completed and no run of its work is left: nothing more to wait for.
  bool finished() {
    {
      std::lock_guard<std::mutex> lock(mu());
      if (!stopped) return false;
    }
    Work* w = work();
    if (!w) return true;
    std::lock_guard<std::mutex> lock(w->count.mu);
    return w->count.running == 0;
  }
  // Set once its stop completed (read under its parking lock).
  bool is_stopped() const {
    std::lock_guard<std::mutex> lock(mu());
    return stopped;
  }

 private:
  friend class Client;
  Election(const RefPtr<QueueExecutors>& executors, LeaseName name)
      : Contender(std::move(name), ContenderKind::kElection), SerialQueue(executors) {}
  ~Election() override { delete rare_.load(std::memory_order_acquire); }
  Listener listener;
  // Its callbacks' queue is its base, in the election's own block (ADR 0024):
  // whoever holds the queue (a term, a drain) holds the election.
  SerialQueue& queue() { return *this; }
  QueueRef queue_ref() { return QueueRef(static_cast<SerialQueue*>(this)); }

  // What most elections never use, in one block made on first use (ADR 0024).
  struct Work {
    WorkFn fn;
    WorkCount count;
  };
  struct Rare {
    // A task's leader work (then there is no listener) and how many of its
    // runs are going: set before the election is shared, then read-only.
    std::unique_ptr<Work> work;
    // Loop thread: the done of a stop, and those of step-downs in request
    // order (a vector: an empty deque costs 576 bytes).
    DoneFn stop_done;
    std::vector<DoneFn> step_down_dones;
    // Guarded by mu(): the blocking stops waiting for the stop.
    std::vector<std::shared_ptr<Waiter>> stop_waiters;
  };
  // Made by whichever thread needs it first (the loop for a done, an API
  // thread for a waiter), hence atomic; freed with the election.
  std::atomic<Rare*> rare_{nullptr};
  Rare* rare_if_made() const { return rare_.load(std::memory_order_acquire); }
  Rare& rare() {
    Rare* r = rare_if_made();
    if (r) return *r;
    auto made = std::make_unique<Rare>();
    if (rare_.compare_exchange_strong(r, made.get(), std::memory_order_acq_rel))
      return *made.release();
    return *r;  // another thread made it first
  }
  // A task's leader work; null for a plain election, which never runs work.
  Work* work() const {
    Rare* r = rare_if_made();
    return r ? r->work.get() : nullptr;
  }

  // Set by simba_election_free before the stop completed: the listener gets
  // nothing more. A free that waits for the stop sets freeing_after_stop first:
  // the dones of a stop or step-down asked for earlier still run, before it returns.
  std::atomic<bool> detached{false};
  std::atomic<bool> freeing_after_stop{false};
  bool runs_dones() const { return !detached || freeing_after_stop; }

  // Guarded by mu() (beside the atomics above: no padding between them).
  bool stop_requested = false;
  bool stopped = false;  // the stop completed (done ran)
  std::atomic<uint32_t> refs_{0};
  // The election's parking lock (engine/parking.h): taken briefly, by API
  // threads and the loop, around the stop state; no other lock is taken under it.
  std::mutex& mu() const { return parking_for(this).mu; }
};

// One observer of a name's holder (simba_observe_start), as its handle sees it.
// The client reads the name on its loop: at the start, every `poll`, and at once
// after a release broadcast of the name; a change goes to `fn` on `queue`.
class Observer {
 public:
  // holder "" when free; client_known false when the holder's client.name is not.
  using Fn =
      std::function<void(const std::string& name, const std::string& holder,
                         const std::string& holder_client, bool client_known, uint64_t token)>;

 private:
  friend class Client;
  std::string name;
  Duration poll{0};
  Fn fn;
  QueueRef queue;
  std::atomic<bool> detached{false};  // freed: deliver nothing more

  // Loop thread.
  bool removed = false;  // out of the client's list; a read in flight is ignored
  bool reading = false;
  bool reread = false;  // a broadcast came during the read: read again at once
  int follow_ups = 0;   // quick re-reads left after a broadcast (the new holder)
  TimePoint next_read{};
  bool known = false;  // a first state was delivered
  std::string holder, holder_client;
  bool client_known = false;
  uint64_t token = 0;
};

using ElectionRef = RefPtr<Election>;

class Client : public Effects, private Loop::Host, public std::enable_shared_from_this<Client> {
 public:
  // Creates the client and starts opening its session.
  static Result open(const std::string& url, const Config& cfg, const Hooks& hooks,
                     std::shared_ptr<Client>* out);
  ~Client() override;

  // Closes: stops every election and lock, closes the session, stops the loop
  // and the executor. From a callback or the loop thread it only starts the
  // close and returns Code::kEWouldBlock; the caller must not wait for itself.
  Code close();
  // EXTERNAL mode, on the host thread: starts the close as close() does where it
  // may not wait, and returns. process() finishes it once the loop is torn down
  // and then runs `done` with the outcome: kOk, or kETimedOut/kEBackend when the
  // backend did not confirm it (close_code()). kEWouldBlock off the host thread,
  // kEClosed when a close_async() is pending already; nothing started then.
  Code close_async(DoneFn done);
  bool close_requested() const { return close_requested_.load(); }

  SessionStatus status() const { return static_cast<SessionStatus>(status_.load()); }
  Result wait_live(int64_t timeout_ms);
  Result snapshot_json(std::string* out);
  // Blocks until the backend answers inspect() or `timeout_ms` passed;
  // `own_session` is this client's session id (empty while it has none).
  Result inspect(const std::vector<std::string>& names, int64_t timeout_ms, InspectReply* out,
                 std::string* own_session);
  // The same, as the JSON of simba_client_inspect_json.
  Result inspect_json(const std::vector<std::string>& names, int64_t timeout_ms, std::string* out);
  Result set_event_sink(EventFn fn);
  // Prometheus text of the node's metrics (simba_client_metrics_text).
  Result metrics_text(std::string* out);

  // Follows `name`'s holder (simba_observe_start); poll 0: the renew interval.
  Result observe(const std::string& name, Duration poll, Observer::Fn fn,
                 std::shared_ptr<Observer>* out);
  // Stops it; waits (where it may) until no callback of it runs.
  void free_observer(const std::shared_ptr<Observer>& o, bool wait = true);
  // Stops it without waiting; `last` runs on its queue after its last delivery.
  void close_observer(const std::shared_ptr<Observer>& o, LastFn last);

  // EXTERNAL mode.
  bool external() const { return cfg_.loop_mode == LoopMode::kExternal; }
  int fd() const { return loop_.fd(); }
  int64_t timeout_ms() const { return close_done_ && node_closed_ ? 0 : loop_.timeout_ms(); }
  Result process();

  // Elections.
  // With `work`, each term runs it on a thread of its own, and a stop or
  // step-down waits for it to return (or the term's deadline) before the
  // release: the handover order.
  Result start_election(const std::string& name, const Listener& listener, ElectionRef* out,
                        WorkFn work = nullptr);
  Result stop_election(const ElectionRef& e, DoneFn done);
  Result step_down(const ElectionRef& e, Duration cooldown, DoneFn done);
  Result stop_election_wait(const ElectionRef& e, int64_t timeout_ms);
  void detach_election(const ElectionRef& e);
  // simba_election_free and simba_task_close: detach, and where the caller may
  // block, wait until the stop completed and no callback of `e` runs (then its
  // user data may be freed). Returns whether it waited.
  bool free_election(const ElectionRef& e);
  // simba_election_close_async: detaches the listener, stops `e` unless a stop
  // was asked for, and never waits; `last` runs on e's queue once the stop
  // completed, after its done and every other callback of `e` (ADR 0041).
  void close_election(const ElectionRef& e, LastFn last);
  // Runs `fn` once no run of e's work is left: at once if none runs, else on
  // e's queue after the last run returned.
  void after_work(const ElectionRef& e, LastFn fn);
  // EXTERNAL mode: the thread that opened the client, which alone drives it.
  bool on_host_thread() const { return loop_.on_host_thread(); }
  // False where a blocking close would wait for itself (callback, loop, work).
  bool may_close_block() const { return may_wait_for_close(); }
  // A serial queue over the callback executor, for callbacks of objects built
  // on the client (partition groups); closed when the client closes.
  QueueRef callback_queue() { return new_queue(); }
  // Blocks until `w` is done (in EXTERNAL mode on the host thread, running the
  // loop meanwhile). Only where the caller may block.
  void wait_for(Waiter& w) { loop_.wait(w, Loop::SteadyTime::max()); }
  // Wakes the loop, so that a host thread in wait_for() sees a Waiter that
  // another thread finished without going through the loop. No-op once closed.
  void wake_loop() {
    loop_.post([] {});
  }

  // What a lock acquire asks for: a lock, or a permit of a semaphore of
  // `permits` (kSemaphore) or of a read/write lock (kRead, kWrite; ADR 0046).
  struct LockAsk {
    ContenderKind kind = ContenderKind::kLock;
    uint32_t permits = 0;
  };
  static LockAsk semaphore(uint32_t permits) { return {ContenderKind::kSemaphore, permits}; }
  static LockAsk rwlock(bool write) {
    return {write ? ContenderKind::kWrite : ContenderKind::kRead, 0};
  }

  // Locks. acquire: timeout_ms < 0 waits without bound.
  Result lock_acquire(const std::string& name, int64_t timeout_ms, bool try_once, Term** out) {
    return lock_acquire(LockAsk{}, name, timeout_ms, try_once, out);
  }
  // cb runs once, on the lock's serial queue.
  Result lock_acquire_async(const std::string& name, int64_t timeout_ms, bool try_once, LockFn cb) {
    return lock_acquire_async(LockAsk{}, name, timeout_ms, try_once, std::move(cb));
  }
  // The same for a permit (a semaphore's size of another holder: kEState,
  // "semaphore NAME has N permits, not M"). Its term is a PermitTerm, released
  // with lock_release.
  Result lock_acquire(const LockAsk& ask, const std::string& name, int64_t timeout_ms,
                      bool try_once, Term** out);
  Result lock_acquire_async(const LockAsk& ask, const std::string& name, int64_t timeout_ms,
                            bool try_once, LockFn cb);
  Result semaphore_acquire(const std::string& name, uint32_t permits, int64_t timeout_ms,
                           bool try_once, Term** out) {
    return lock_acquire(semaphore(permits), name, timeout_ms, try_once, out);
  }
  Result rwlock_acquire(const std::string& name, bool write, int64_t timeout_ms, bool try_once,
                        Term** out) {
    return lock_acquire(rwlock(write), name, timeout_ms, try_once, out);
  }
  // Revokes the lock's term and releases it with its token. With `wait`,
  // where the caller may block, it waits for the backend's answer (at most one
  // call timeout) and then until every on_revoked callback of the term ran.
  // With `then` (simba_term_close_async), it never waits: `then` runs on the
  // term's queue once the release was answered and its on_revoked callbacks ran.
  void lock_release(Term* term, bool wait = true, LastFn then = nullptr);

  // Test hook: how many queues the client's close has to close.
  size_t queues_listed() const { return queue_executors_->queues(); }
  // Test hook: the memory:// fault switches of this client.
  std::shared_ptr<MemoryFaults> memory_faults() const { return hooks_.memory_faults; }
  const Config& config() const { return cfg_; }
  // Test hook: runs on the work thread of each new term, before the term is
  // checked and the work called (a test holds it there to revoke the term).
  void set_work_start_hook(std::function<void(Term*)> hook);

  // Effects, on the loop thread.
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
  void abandon(CallId call) override;
  void watch(const std::string& name) override;
  void unwatch(const std::string& name) override;
  TermRef new_term(Contender& who, uint64_t token, std::shared_ptr<SessionClock> session) override;
  void elected(Contender& who, const TermRef& term) override;
  void revoked(Contender& who, const TermRef& term) override;
  void lock_failed(Contender& who, LockFailure why) override;
  void stopped(Contender& who) override;
  void stepped_down(Contender& who) override;
  void session_event(SessionEvent ev, const std::string& detail_json) override;
  void closed() override;
  void log(int level, const std::string& line) override;

 private:
  friend struct Mailbox;
  // One lock acquire or held lock: the record of its lease, made by add_lock
  // and freed when the node reports it done (lock_failed, stopped).
  struct Lock : simba::Contender {
    Lock(LeaseName name, const LockAsk& ask) : Contender(std::move(name), ask.kind), asked(ask) {
      if (ask.kind == ContenderKind::kSemaphore) set_size(ask.permits);
    }
    // The acquire's result (once), with what failed in words ("" for the
    // code's usual text).
    std::function<void(Code code, Term* term, const std::string& detail)> done;
    const LockAsk asked;
    QueueRef queue;
    std::shared_ptr<Waiter> released;  // a blocking simba_lock_release waits here
    LastFn release_then;               // simba_term_close_async's, after the release
  };
  static Election& election_of(Contender& c) { return static_cast<Election&>(c); }
  static Lock& lock_of(Contender& c) { return static_cast<Lock&>(c); }

  Client(const Config& cfg, const Hooks& hooks);
  Result init(const std::string& url);

  MetricsInput metrics_input(const NodeView& v) const;

  // Observers (observe.cpp), loop thread.
  void read_observed(const std::shared_ptr<Observer>& o);
  void observed(const std::shared_ptr<Observer>& o, const InspectReply& reply);
  void poll_observers();
  void observed_release(const std::string& name);
  std::optional<TimePoint> next_observer_read() const;

  // Backend calls the engine makes itself (effects.cpp): it owns their
  // timeout as the node owns its calls' (backend.h, ADR 0039). `done` gets
  // the answer, or kTimeout once `timeout` passed (the call is abandoned).
  using InspectDone = std::function<void(const InspectReply&)>;
  void inspect_backend(const std::vector<std::string>& names, Duration timeout, InspectDone done);
  void expire_own_calls(TimePoint now);

  using LoopLease = Loop::Lease;
  // A caller may borrow the loop (ADR 0014), but not from a callback, which
  // should not run the loop's work before it returns. A host executor's
  // submit() is promised the loop thread: a borrower hands it there (ADR 0029).
  bool may_lend_loop() const { return !in_callback(); }
  bool host_executor() const { return executor_ && cfg_.executor == ExecutorKind::kHost; }
  // Runs `fn`, an election's callback hand-off (elected, revoked, stopped,
  // stepped down), now; or on the loop thread in a later turn when `hand_off`
  // or when an earlier one of `who` waits there, so that they stay in order.
  void in_order(ContenderId who, bool hand_off, std::function<void()> fn);
  // Posts a new term's onElected to its election's queue; a host that rejects
  // it gets the step-down of ADR 0002.
  void announce(const ElectionRef& el, Term* t, uint64_t token);
  bool on_loop_thread() const { return loop_.on_loop_thread(); }
  // Runs `fn` on the loop and waits for it: at once where the calling thread
  // owns the loop (the loop thread, or the host's in EXTERNAL mode).
  Result run_sync(const std::function<void()>& fn);
  bool may_block() const { return !in_callback() && !loop_.inside_turn(); }
  // A waiter may run queued callbacks itself: not those of the loop executor
  // ("direct", EXTERNAL mode), which are promised the loop's own thread.
  bool may_run_callbacks_here() const {
    return executor_ != nullptr || (external() && on_loop_thread());
  }
  // Blocking close methods (client, task, lock release) do not wait from a
  // callback, the loop thread, or leader work, where they would wait for it.
  bool may_wait_for_close() const { return may_block() && !in_work(); }
  // Loop thread: starts the work of a task's new term on its own thread.
  void start_work(const ElectionRef& el, Term* t, uint64_t token);
  // Loop thread: registers a lock with the node; `done` gets its outcome.
  Result add_lock(const LockAsk& ask, const std::string& name, int64_t timeout_ms, bool try_once,
                  const QueueRef& queue, decltype(Lock::done) done);

  TimePoint now() const { return MonotonicClock::instance().now(); }
  // After every event the Node saw: re-arm the timer, publish the status.
  void settle();
  // The node closed: run what is left for the loop, then close every handle.
  void teardown();
  // Loop::Host.
  void commands_ran() override { settle(); }
  void timer_fired() override;
  bool closing() const override { return node_closed_; }
  void tear_down() override { teardown(); }
  QueueRef new_queue();
  void emit_log(int level, const std::string& line);

  Config cfg_;
  Hooks hooks_;
  std::mutex work_start_hook_mu_;
  std::function<void(Term*)> work_start_hook_;  // guarded by work_start_hook_mu_
  std::string url_redacted_;

  // Declared before everything that lives on the loop (and goes before it).
  Loop loop_{*this, cfg_.loop_mode == LoopMode::kExternal};

  std::unique_ptr<Executor> executor_;
  std::unique_ptr<LoopExecutor> loop_executor_;
  // Every queue's: the callback executor (the loop's when there is none), and
  // the loop's when it rejects. Its close() closes them all.
  const RefPtr<QueueExecutors> queue_executors_ = QueueExecutors::make(nullptr, nullptr);
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Node> node_;

  std::shared_ptr<Mailbox> mailbox_ = std::make_shared<Mailbox>();

  // Loop thread.
  std::vector<std::shared_ptr<Waiter>> live_waiters_;
  // Elections with callback hand-offs waiting for the loop thread (in_order).
  std::map<ContenderId, int> handed_off_;
  std::set<std::shared_ptr<Waiter>> inspect_waiters_;  // finished by teardown
  // The backend call behind each node call in flight, for abandon().
  std::unordered_map<CallId, Backend::CallRef> backend_calls_;
  // The engine's own calls in flight by a number of its own, and their
  // deadlines in order.
  struct OwnCall {
    TimePoint deadline;
    Backend::CallRef ref = 0;
    InspectDone done;
  };
  std::map<uint64_t, OwnCall> own_calls_;
  std::set<std::pair<TimePoint, uint64_t>> own_deadlines_;
  uint64_t next_own_call_ = 0;
  std::vector<std::shared_ptr<Observer>> observers_;  // loop thread
  // Per watched name, its watchers (the node's watch, each observer): the
  // backend watches a name while it has one (ADR 0040). Loop thread.
  std::map<std::string, int, std::less<>> watchers_;
  void add_watcher(const std::string& name);
  void drop_watcher(const std::string& name);
  QueueRef event_queue_;
  EventFn event_sink_;  // guarded by event_mu_
  std::mutex event_mu_;

  std::atomic<int> status_{static_cast<int>(SessionStatus::kOpening)};
  std::atomic<bool> close_requested_{false};
  bool node_closed_ = false;  // loop thread
  std::mutex close_mu_;
  bool finished_ = false;  // close() completed
  DoneFn close_done_;      // close_async()'s, until finish_close() runs it (host thread)
  // Starts the close without waiting for it (from where close() may not wait);
  // on the loop thread at once unless `in_next_turn`.
  void start_close(bool in_next_turn = false);
  // The loop ended: the executors go, then close_async()'s done runs.
  void finish_close();
  // The close's outcome, as close_async()'s done gets it.
  Code close_code() const;
};

}  // namespace simba::engine

#endif
