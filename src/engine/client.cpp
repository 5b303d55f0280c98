#include "engine/client.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <map>
#include <optional>
#include <random>

#include "core/json.h"
#include "core/log_level.h"

namespace simba::engine {

namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

// libuv hands a watcher change made in a callback (uv_poll_start/stop) to epoll
// only at its next poll (libuv issue #1565). A wait on uv_backend_fd() outside
// uv_run before that would sleep on a stale set. The queue of such changes is a
// field of uv_loop_t in every 1.x release (void*[2], later struct uv__queue,
// both {next, prev}): empty when it points to itself.
static_assert(UV_VERSION_MAJOR == 1, "watchers_pending() reads libuv 1.x's watcher_queue");
bool watchers_pending(const uv_loop_t* loop) {
  const void* queue = &loop->watcher_queue;
  return *static_cast<void* const*>(queue) != queue;
}

// One turn of a loop driven through uv_backend_fd(): runs what is due, then
// runs again while watcher changes wait for libuv's poll (bounded: a change
// comes only from a callback of the turn before). False once the loop ended.
bool run_turn(uv_loop_t* loop) {
  bool alive = uv_run(loop, UV_RUN_NOWAIT) != 0;
  for (int i = 0; alive && i < 8 && watchers_pending(loop); ++i) {
    alive = uv_run(loop, UV_RUN_NOWAIT) != 0;
  }
  return alive;
}

SteadyTime deadline_after(int64_t timeout_ms) {
  if (timeout_ms < 0) return SteadyTime::max();
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
}

int lock_failure_code(LockFailure why) {
  switch (why) {
    case LockFailure::kTimeout: return kETimedOut;
    case LockFailure::kBusy: return kEBusy;
    case LockFailure::kBackend: return kEBackend;
    case LockFailure::kCanceled: return kECanceled;
  }
  return kEBackend;
}

const char* lock_failure_text(int code) {
  switch (code) {
    case kETimedOut: return "the lock was not acquired within the timeout";
    case kEBusy: return "the lock is held by another session or by another lock of this client";
    case kEBackend: return "the backend could not grant the lock";
    default: return "the lock was not acquired";
  }
}

}  // namespace

void Waiter::finish(int c, std::string d, simba_term* t) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (done) return;
    done = true;
    code = c;
    detail = std::move(d);
    term = t;
  }
  // Outside the lock: the woken thread need not block on it again. The caller
  // holds a shared_ptr to this waiter, so it outlives the notify.
  cv.notify_all();
}

void WorkCount::begin() {
  std::lock_guard<std::mutex> lock(mu);
  ++running;
}

void WorkCount::end() {
  {
    std::lock_guard<std::mutex> lock(mu);
    --running;
  }
  cv.notify_all();
}

void WorkCount::wait_idle() {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [this] { return running == 0; });
}

bool Mailbox::post(std::function<void(Client&)> fn) {
  std::lock_guard<std::mutex> lock(mu);
  if (!client) return false;
  Client* c = client;
  return c->post([c, fn = std::move(fn)] { fn(*c); });
}

Client::Client(const Config& cfg, const Hooks& hooks)
    : cfg_(cfg), hooks_(hooks), event_sink_(hooks.events) {}

Result Client::open(const std::string& url, const Config& cfg, const Hooks& hooks,
                    std::shared_ptr<Client>* out) {
  std::shared_ptr<Client> c(new Client(cfg, hooks));
  Result r = c->init(url);
  if (r.code != kOk) return r;
  *out = std::move(c);
  return r;
}

Result Client::init(const std::string& url) {
  url_redacted_ = redact_url(url);
  mailbox_->client = this;
  if (!external()) {
    handoff_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (handoff_fd_ < 0) {
      return {kENoMem, std::string("cannot create an eventfd: ") + std::strerror(errno)};
    }
  }
  if (int rc = uv_loop_init(&loop_); rc != 0) {
    return {kEBackend, std::string("cannot start the event loop: ") + uv_strerror(rc)};
  }
  loop_.data = this;
  uv_async_init(&loop_, &wake_, [](uv_async_t* a) {
    static_cast<Client*>(a->loop->data)->drain_commands();
  });
  uv_timer_init(&loop_, &timer_);
  uv_idle_init(&loop_, &idle_);

  loop_executor_ = std::make_unique<LoopExecutor>([this](std::function<void()> fn) {
    return defer(std::move(fn));
  });
  if (cfg_.executor == ExecutorKind::kHost && hooks_.submit) {
    executor_ = std::make_unique<HostExecutor>(hooks_.submit, hooks_.submit_ctx);
  } else if (cfg_.executor == ExecutorKind::kPool && !external()) {
    executor_ = std::make_unique<PoolExecutor>(cfg_.callback_threads);
  }
  event_queue_ = new_queue();

  BackendContext ctx;
  ctx.loop = &loop_;
  ctx.log = [this](int level, const std::string& line) { emit_log(level, line); };
  ctx.client_name = cfg_.client_name;
  ctx.memory_faults = faults_;
  BackendError why = BackendError::kNone;
  std::string error;
  backend_ = make_backend(ctx, url, &why, &error);
  if (!backend_) {
    // Nothing started yet: close the handles and the loop here.
    uv_close(reinterpret_cast<uv_handle_t*>(&wake_), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&timer_), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&idle_), nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
    uv_loop_close(&loop_);
    if (executor_) executor_->shutdown();
    torn_down_ = true;
    loop_done_ = true;
    status_ = static_cast<int>(SessionStatus::kClosed);
    return {why == BackendError::kUnsupported ? kEUnsupported : kEInval, error};
  }
  backend_->on_released([this](const std::string& name) {
    observed_release(name);
    node_->on_released(name, now());
    settle();
  });
  node_ = std::make_unique<Node>(cfg_, *this, MonotonicClock::instance(), std::random_device{}());

  if (external()) {
    host_thread_ = std::this_thread::get_id();
    node_->start(now());
    settle();
  } else {
    {
      std::lock_guard<std::mutex> lock(commands_mu_);
      commands_.push_back([this] { node_->start(now()); });
    }
    owner_ = LoopOwner::kLoopThread;  // until its first turn started the node
    thread_ = std::thread([this] { run_loop_thread(); });
  }
  return Result::ok();
}

Client::~Client() {
  // close() has run (simba_client_close always calls it); this only guards
  // against a client that never started its loop.
  if (thread_.joinable()) {
    close();
  }
  if (handoff_fd_ >= 0) ::close(handoff_fd_);
}

// ---------------------------------------------------------------------------
// Threads and the loop

bool Client::on_loop_thread() const {
  const std::thread::id me = std::this_thread::get_id();
  return external() ? me == host_thread_ : me == loop_owner_.load();
}

bool Client::borrowed_here() const {
  if (external()) return false;
  const std::thread::id me = std::this_thread::get_id();
  return me == loop_owner_.load() && me != loop_thread_.load();
}

// The loop thread's turns, and its waits between them (ADR 0014). Each turn is
// a UV_RUN_NOWAIT; between turns the thread holds no ownership, so that a
// caller may borrow the loop. It then waits in one of two ways:
// - polling the loop's backend fd (and the handoff eventfd) until its next
//   timer, when nobody borrowed the loop lately;
// - standing by on owner_cv_ while a caller borrows it (at most kMaxBorrow),
//   and for kLinger after the last borrower left: back-to-back blocking calls
//   then neither wake this thread with their I/O nor need to notify it. I/O
//   that arrives for nobody in that window waits at most kLinger for this
//   thread.
void Client::run_loop_thread() {
  constexpr auto kLinger = std::chrono::milliseconds(1);
  const std::thread::id me = std::this_thread::get_id();
  loop_thread_ = me;
  const int backend_fd = uv_backend_fd(&loop_);
  bool first = true;
  int timeout = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(owner_mu_);
      loop_thread_polling_ = false;
      const bool stood_by = owner_ == LoopOwner::kCaller;
      for (bool standby = stood_by; standby && !loop_thread_due_;) {
        const SteadyTime now = std::chrono::steady_clock::now();
        if (owner_ == LoopOwner::kCaller) {
          standby_until_ = now + kLinger;
          owner_cv_.wait_until(lock, standby_until_);
        } else if (now < std::min(turn_at_, returned_at_ + kLinger)) {
          standby_until_ = std::min(turn_at_, returned_at_ + kLinger);
          owner_cv_.wait_until(lock, standby_until_);
        } else {
          standby = false;
        }
      }
      standby_until_ = SteadyTime::min();
      const SteadyTime now = std::chrono::steady_clock::now();
      if (stood_by && !loop_thread_due_ && turn_at_ > now) {
        // What woke us was a borrower's, it took it in and left nothing due:
        // wait for I/O until the loop's next timer instead of turning now.
        loop_thread_polling_ = true;
        polling_until_ = turn_at_;
        timeout = turn_at_ == SteadyTime::max()
                      ? -1
                      : static_cast<int>(std::min<int64_t>(
                            std::chrono::ceil<std::chrono::milliseconds>(turn_at_ - now).count(),
                            INT_MAX));
      } else {
        // A turn. The loop is free here: standby ends only when no caller holds it.
        owner_ = LoopOwner::kLoopThread;
        loop_thread_due_ = false;
      }
    }
    if (!loop_thread_polling_) {
      loop_owner_ = me;
      if (first) drain_commands();
      first = false;
      if (node_closed_ && !torn_down_) teardown();  // a borrower saw the close
      // What a borrower deferred (log lines, direct callbacks) comes first, in
      // its order, before this turn's timers add to it.
      if (!deferred_.empty()) run_deferred();
      const bool alive = run_turn(&loop_);
      timeout = alive ? uv_backend_timeout(&loop_) : 0;
      loop_owner_ = std::thread::id();
      std::lock_guard<std::mutex> lock(owner_mu_);
      owner_ = LoopOwner::kNone;
      if (!alive) {
        loop_ended_ = true;
        break;
      }
      loop_thread_polling_ = true;
      polling_until_ = timeout < 0
                           ? SteadyTime::max()
                           : std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout);
    }
    struct pollfd p[2] = {{backend_fd, POLLIN, 0}, {handoff_fd_, POLLIN, 0}};
    if (poll(p, 2, timeout) > 0 && (p[1].revents & POLLIN)) {
      uint64_t count;
      while (read(handoff_fd_, &count, sizeof count) > 0) {
      }
    }
  }
  uv_loop_close(&loop_);
  std::lock_guard<std::mutex> lock(done_mu_);
  loop_done_ = true;
  done_cv_.notify_all();
}

bool Client::borrow_loop() {
  if (external() || on_loop_thread()) return false;
  // A host's submit() is promised the loop thread (simba.h); and a callback
  // that makes a call should not run the loop's work before it returns.
  if ((executor_ && cfg_.executor == ExecutorKind::kHost) || in_callback()) return false;
  {
    std::lock_guard<std::mutex> lock(owner_mu_);
    if (owner_ != LoopOwner::kNone || loop_ended_ || loop_thread_due_) return false;
    owner_ = LoopOwner::kCaller;
  }
  loop_owner_ = std::this_thread::get_id();
  return true;
}

void Client::return_loop() {
  // When must the loop thread next turn? At the loop's next timer, or at once
  // for work only it may run.
  const SteadyTime now = std::chrono::steady_clock::now();
  SteadyTime turn_at = now;
  const bool due = hand_over_ || needs_loop_thread() || !uv_loop_alive(&loop_);
  hand_over_ = false;
  if (!due) {
    uv_update_time(&loop_);
    const int timeout = uv_backend_timeout(&loop_);
    turn_at = timeout < 0 ? SteadyTime::max() : now + std::chrono::milliseconds(timeout);
  }
  loop_owner_ = std::thread::id();
  // All of it under the lock: once the loop is free, a close on another thread
  // may end the loop thread and free this client as soon as the lock is let go.
  std::lock_guard<std::mutex> lock(owner_mu_);
  owner_ = LoopOwner::kNone;
  turn_at_ = turn_at;
  returned_at_ = now;
  loop_thread_due_ = due;
  // Standing by, or polling, past what is now due: cut its wait short.
  if (turn_at < standby_until_) owner_cv_.notify_one();
  if (loop_thread_polling_ && turn_at < polling_until_) {
    const uint64_t one = 1;
    while (write(handoff_fd_, &one, sizeof one) < 0 && errno == EINTR) {
    }
  }
}

int Client::drive(Waiter& w, SteadyTime deadline) {
  // A borrower runs the loop for a call's answer, not for a long wait (a
  // contended lock): past this the loop thread takes over, so that the
  // session's keep-alives never hang on an application thread.
  constexpr auto kMaxBorrow = std::chrono::milliseconds(10);
  const SteadyTime give_back_at = std::chrono::steady_clock::now() + kMaxBorrow;
  const int backend_fd = uv_backend_fd(&loop_);
  for (;;) {
    // EXTERNAL mode: callbacks run here as inside simba_client_process().
    if (external()) in_process_ = true;
    const bool alive = run_turn(&loop_);
    if (external()) in_process_ = false;
    {
      std::lock_guard<std::mutex> lock(w.mu);
      if (w.done) return kOk;
    }
    if (external() && torn_down_) return kEClosed;
    if (!external() && (!alive || needs_loop_thread())) return kHandBack;
    const auto now_t = std::chrono::steady_clock::now();
    if (now_t >= deadline) return kETimedOut;
    if (!external() && now_t >= give_back_at) {
      hand_over_ = true;
      return kHandBack;
    }
    int64_t wait_ms = uv_backend_timeout(&loop_);
    for (const SteadyTime until : {deadline, external() ? SteadyTime::max() : give_back_at}) {
      if (until == SteadyTime::max()) continue;
      const int64_t left = std::chrono::ceil<std::chrono::milliseconds>(until - now_t).count();
      if (wait_ms < 0 || left < wait_ms) wait_ms = left;
    }
    // The waiters driven here are finished on the loop, which this poll wakes
    // for (EXTERNAL: or by wake_loop()); the bound is only a safety net.
    if (wait_ms < 0 || wait_ms > 1000) wait_ms = 1000;
    struct pollfd p = {backend_fd, POLLIN, 0};
    poll(&p, 1, static_cast<int>(wait_ms));
  }
}

bool Client::may_block() const {
  if (in_callback()) return false;
  // in_process_ belongs to the host thread: other threads (a group's, the
  // host's workers) must not read it, and may always block.
  if (external()) return !on_loop_thread() || !in_process_;
  return !on_loop_thread();
}

bool Client::post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(commands_mu_);
    if (!accepting_) return false;
    commands_.push_back(std::move(fn));
  }
  uv_async_send(&wake_);
  return true;
}

Result Client::run_sync(const std::function<void()>& fn) {
  LoopLease lease(*this);
  if (on_loop_thread()) {
    if (torn_down_) return {kEClosed, "the client is closed"};
    fn();
    settle();
    // On a borrowed loop, a turn now sends what fn queued (writes go out in
    // the loop's check phase) instead of waiting for the loop thread's.
    if (borrowed_here()) run_turn(&loop_);
    return Result::ok();
  }
  auto w = std::make_shared<Waiter>();
  if (!post([this, &fn, w] {
        fn();
        settle();
        w->finish(kOk);
      })) {
    return {kEClosed, "the client is closed"};
  }
  std::unique_lock<std::mutex> lock(w->mu);
  w->cv.wait(lock, [&] { return w->done; });
  return Result::ok();
}

int Client::wait(Waiter& w, std::chrono::steady_clock::time_point deadline, LoopLease* lease) {
  if (lease && lease->held()) {
    const int rc = drive(w, deadline);
    if (rc != kHandBack) return rc;
    lease->give_back();  // from here on a close may free this client: only `w`
  } else if (external() && on_loop_thread()) {
    // EXTERNAL mode, on the host's thread, outside process(): run the loop here.
    return drive(w, deadline);
  }
  std::unique_lock<std::mutex> lock(w.mu);
  if (!w.cv.wait_until(lock, deadline, [&] { return w.done; })) return kETimedOut;
  return kOk;
}

void Client::drain_commands() {
  std::deque<std::function<void()>> batch;
  {
    std::lock_guard<std::mutex> lock(commands_mu_);
    batch.swap(commands_);
  }
  for (auto& fn : batch) fn();
  settle();
}

void Client::settle() {
  if (!node_) return;
  status_.store(static_cast<int>(node_->status()));
  if (node_->status() == SessionStatus::kLive || node_->closed()) {
    for (auto& w : live_waiters_) {
      w->finish(node_->closed() ? kEClosed : kOk,
                node_->closed() ? "the client closed" : std::string());
    }
    live_waiters_.clear();
  }
  if (node_closed_) {
    // A borrower hands the close back to the loop thread (needs_loop_thread).
    if (!torn_down_ && !borrowed_here()) teardown();
    return;
  }
  std::optional<TimePoint> next = node_->next_wakeup();
  if (auto read = next_observer_read(); read && (!next || *read < *next)) next = read;
  if (next) {
    uv_update_time(&loop_);
    const int64_t delay = std::max<int64_t>(0, to_ms_ceil(*next - now()));
    uv_timer_start(
        &timer_, [](uv_timer_t* t) { static_cast<Client*>(t->loop->data)->on_timer(); },
        static_cast<uint64_t>(delay), 0);
  } else {
    uv_timer_stop(&timer_);
  }
}

void Client::on_timer() {
  node_->on_timer(now());
  poll_observers();
  settle();
}

bool Client::defer(std::function<void()> fn) {
  if (!on_loop_thread()) {
    return post([this, fn = std::move(fn)]() mutable { defer(std::move(fn)); });
  }
  if (torn_down_) return false;
  deferred_.push_back(std::move(fn));
  uv_idle_start(&idle_, [](uv_idle_t* h) { static_cast<Client*>(h->loop->data)->run_deferred(); });
  return true;
}

void Client::run_deferred() {
  // Callbacks of the loop executor run on the loop thread, never on a caller
  // that borrowed the loop: it hands the loop back to run them.
  if (borrowed_here()) return;
  std::deque<std::function<void()>> batch;
  batch.swap(deferred_);
  for (auto& fn : batch) fn();
  if (deferred_.empty() && !torn_down_) uv_idle_stop(&idle_);
}

// The node closed: run what is left for the loop, then close every handle so
// that the loop ends.
void Client::teardown() {
  torn_down_ = true;
  {
    std::lock_guard<std::mutex> lock(mailbox_->mu);
    mailbox_->client = nullptr;  // work threads still running post nothing more
  }
  uv_timer_stop(&timer_);
  while (!deferred_.empty()) run_deferred();
  {
    std::lock_guard<std::mutex> lock(commands_mu_);
    accepting_ = false;
  }
  drain_commands();  // late commands find the node closed and answer kEClosed
  while (!deferred_.empty()) run_deferred();
  for (const auto& w : inspect_waiters_) w->finish(kEClosed);
  inspect_waiters_.clear();
  for (const auto& o : observers_) o->removed = true;
  observers_.clear();
  backend_->shutdown([this] {
    uv_close(reinterpret_cast<uv_handle_t*>(&wake_), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&timer_), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&idle_), nullptr);
  });
}

std::shared_ptr<SerialQueue> Client::new_queue() {
  auto q = std::make_shared<SerialQueue>(executor_ ? *executor_ : *loop_executor_,
                                         *loop_executor_);
  std::lock_guard<std::mutex> lock(queues_mu_);
  // Pruned when the list doubled since the last pruning: amortized O(1) per
  // queue, where pruning every time cost each lock acquire a scan of every
  // election's queue.
  if (queues_.size() >= prune_queues_at_) {
    queues_.erase(std::remove_if(queues_.begin(), queues_.end(),
                                 [](const std::weak_ptr<SerialQueue>& w) { return w.expired(); }),
                  queues_.end());
    prune_queues_at_ = std::max<size_t>(64, 2 * queues_.size());
  }
  queues_.push_back(q);
  return q;
}

void Client::close_queues() {
  std::lock_guard<std::mutex> lock(queues_mu_);
  for (auto& w : queues_) {
    if (auto q = w.lock()) q->close();
  }
  queues_.clear();
}

void Client::emit_log(int level, const std::string& line) {
  if (!hooks_.log || level < hooks_.log_min_level) return;
  // The logger is promised the loop thread (simba.h): a borrower defers it.
  if (borrowed_here() && defer([this, level, line] { hooks_.log(level, line); })) return;
  hooks_.log(level, line);
}

// ---------------------------------------------------------------------------
// Client API

int Client::close() {
  // Refused before anything starts: capi reports it (item 2 of ADR 0015).
  if (external() && !on_host_thread()) return kEWouldBlock;
  close_requested_ = true;
  if (!may_wait_for_close()) {
    // Waiting here would wait for itself: start the close and let it finish.
    if (!torn_down_) {
      if (on_loop_thread()) {
        node_->close(now());
        settle();
      } else {
        post([this] { node_->close(now()); });
      }
    }
    return kEWouldBlock;
  }
  std::lock_guard<std::mutex> guard(close_mu_);
  if (finished_) return kOk;
  if (external()) {
    if (!torn_down_) {
      node_->close(now());
      settle();
    }
    while (uv_run(&loop_, UV_RUN_DEFAULT) != 0) {
    }
    uv_loop_close(&loop_);
  } else {
    post([this] { node_->close(now()); });
    {
      std::unique_lock<std::mutex> lock(done_mu_);
      done_cv_.wait(lock, [this] { return loop_done_; });
    }
    if (thread_.joinable()) thread_.join();
  }
  close_queues();
  if (executor_) executor_->shutdown();
  status_ = static_cast<int>(SessionStatus::kClosed);
  finished_ = true;
  return kOk;
}

Result Client::wait_live(int64_t timeout_ms) {
  // Refused from a callback or the loop thread whatever the status, so that
  // such a call fails every time, not only when the session happens to be down
  // (simba_client_status() is the check that never blocks).
  if (!may_block()) {
    return {kEWouldBlock, "simba_client_wait_live would wait for itself here (callback or loop)"};
  }
  // Closing counts as closed (SIMBA_ECLOSED: "closed or closing"), even while
  // the session still reads LIVE until the close completes.
  if (close_requested_ || status() == SessionStatus::kClosed) {
    return {kEClosed, "the client is closed"};
  }
  if (status() == SessionStatus::kLive) return Result::ok();
  if (timeout_ms == 0) return {kETimedOut, "the session is not live"};
  auto w = std::make_shared<Waiter>();
  const auto deadline = deadline_after(timeout_ms);
  auto enlist = [this, w] {
    if (node_->status() == SessionStatus::kLive) {
      w->finish(kOk);
    } else if (node_->closed()) {
      w->finish(kEClosed, "the client closed");
    } else {
      live_waiters_.push_back(w);
    }
  };
  LoopLease lease(*this);
  if (on_loop_thread()) {
    Result r = run_sync(enlist);
    if (r.code != kOk) return r;
  } else if (!post(enlist)) {
    // Not run_sync: in EXTERNAL mode the host may not process for a while,
    // and the timeout bounds the whole wait.
    return {kEClosed, "the client is closed"};
  }
  const int rc = wait(*w, deadline, &lease);
  if (rc != kOk) {
    return {rc, rc == kETimedOut ? "the session did not become live within the timeout"
                                 : "the client closed"};
  }
  return {w->code, w->detail};
}

Result Client::snapshot_json(std::string* out) {
  Result r = run_sync([this, out] {
    const NodeView v = node_->view();
    std::string s = "{\"client\":" + json_quote(cfg_.client_name) +
                    ",\"backend\":" + json_quote(url_redacted_) + ",\"session\":{\"id\":" +
                    json_quote(v.session_id) + ",\"status\":" +
                    json_quote(session_status_name(v.status)) +
                    ",\"remaining_ms\":" + std::to_string(to_ms(v.remaining)) +
                    ",\"renew_period_ms\":" + std::to_string(to_ms(v.renew_period)) +
                    ",\"lease_shortened\":" + (v.lease_shortened ? "true" : "false") +
                    "},\"elections\":[";
    bool first = true;
    for (const ContenderView& c : v.contenders) {
      if (!first) s += ",";
      first = false;
      s += "{\"name\":" + json_quote(c.name) + ",\"kind\":" +
           json_quote(c.kind == ContenderKind::kLock ? "lock" : "election") +
           ",\"state\":" + json_quote(c.state) + ",\"token\":" + std::to_string(c.token) +
           ",\"remaining_ms\":" + std::to_string(to_ms(c.remaining)) + "}";
    }
    s += "],\"counters\":{\"sessions_opened\":" + std::to_string(v.sessions_opened) +
         ",\"keep_alives\":" + std::to_string(v.keep_alives) +
         ",\"acquires\":" + std::to_string(v.acquires) +
         ",\"releases\":" + std::to_string(v.releases) + ",\"terms\":" + std::to_string(v.terms) +
         "},\"metrics\":" + metrics_json(metrics_input(v)) + "}";
    *out = std::move(s);
  });
  return r;
}

MetricsInput Client::metrics_input(const NodeView& v) const {
  MetricsInput in;
  in.client = cfg_.client_name;
  in.session_state = session_status_name(v.status);
  in.session_remaining = v.remaining;
  in.sessions_opened = v.sessions_opened;
  in.keep_alives = v.keep_alives;
  in.acquires = v.acquires;
  in.releases = v.releases;
  in.terms = v.terms;
  in.leases_held = v.leases_held;
  in.metrics = &v.metrics;
  return in;
}

Result Client::metrics_text(std::string* out) {
  return run_sync([this, out] {
    const NodeView v = node_->view();
    *out = simba::metrics_text(metrics_input(v));
  });
}

Result Client::inspect(const std::vector<std::string>& names, int64_t timeout_ms,
                       InspectReply* out, std::string* own_session) {
  if (!may_block()) {
    return {kEWouldBlock,
            "simba_client_inspect_json would wait for itself here (callback or loop thread)"};
  }
  auto w = std::make_shared<Waiter>();
  auto reply = std::make_shared<InspectReply>();
  auto own = std::make_shared<std::string>();
  Result result;
  LoopLease lease(*this);
  Result r = run_sync([&] {
    if (close_requested_ || node_->closed()) {
      result = {kEClosed, "the client is closed"};
      return;
    }
    inspect_waiters_.insert(w);
    backend_->inspect(names, ms(timeout_ms), [this, w, reply, own](const InspectReply& answer) {
      inspect_waiters_.erase(w);
      // The session may have opened while the read was on its way.
      *own = node_->view().session_id;
      *reply = answer;  // published to the caller by finish()'s lock
      w->finish(kOk);
    });
  });
  if (r.code != kOk) return r;
  if (result.code != kOk) return result;
  // The backend answers by the timeout; teardown finishes the waiter at close.
  if (wait(*w, SteadyTime::max(), &lease) != kOk || w->code != kOk) {
    return {kEClosed, "the client closed before the backend answered"};
  }
  if (reply->outcome == Outcome::kTimeout) {
    return {kETimedOut, "the backend did not answer within " + std::to_string(timeout_ms) + " ms"};
  }
  if (reply->outcome != Outcome::kOk) {
    return {kEBackend, "the backend could not be read: " + reply->error};
  }
  *out = std::move(*reply);
  *own_session = std::move(*own);
  return Result::ok();
}

Result Client::inspect_json(const std::vector<std::string>& names, int64_t timeout_ms,
                            std::string* out) {
  auto reply = std::make_shared<InspectReply>();
  auto own = std::make_shared<std::string>();
  if (Result r = inspect(names, timeout_ms, reply.get(), own.get()); r.code != kOk) return r;
  std::map<std::string, const SessionInfo*> by_id;
  for (const SessionInfo& si : reply->sessions) by_id[si.id] = &si;
  std::string s = "{\"backend\":" + json_quote(url_redacted_) + ",\"sessions\":[";
  bool first = true;
  for (const auto& [id, si] : by_id) {
    s += std::string(first ? "" : ",") + "{\"id\":" + json_quote(id) +
         ",\"client\":" + json_quote(si->client_name) +
         ",\"remaining_ms\":" + std::to_string(to_ms(si->remaining)) +
         ",\"own\":" + (id == *own ? "true" : "false") + "}";
    first = false;
  }
  s += "],\"leases\":[";
  std::sort(reply->leases.begin(), reply->leases.end(),
            [](const LeaseInfo& a, const LeaseInfo& b) { return a.name < b.name; });
  first = true;
  for (const LeaseInfo& li : reply->leases) {
    s += std::string(first ? "" : ",") + "{\"name\":" + json_quote(li.name) +
         ",\"token\":" + std::to_string(li.token) + ",\"holder\":" +
         (li.holder.empty() ? std::string("null") : json_quote(li.holder));
    auto holder = by_id.find(li.holder);
    if (holder != by_id.end()) s += ",\"holder_client\":" + json_quote(holder->second->client_name);
    if (!li.holder.empty() && li.holder_remaining >= Duration::zero()) {
      s += ",\"remaining_ms\":" + std::to_string(to_ms(li.holder_remaining));
    }
    s += "}";
    first = false;
  }
  s += "]}";
  *out = std::move(s);
  return Result::ok();
}

Result Client::set_event_sink(EventFn fn) {
  if (close_requested_) return {kEClosed, "the client is closed"};
  std::lock_guard<std::mutex> lock(event_mu_);
  event_sink_ = std::move(fn);
  return Result::ok();
}

int Client::fd() const { return external() ? uv_backend_fd(&loop_) : -1; }

int64_t Client::timeout_ms() const {
  if (!external() || torn_down_) return -1;
  if (!deferred_.empty() || watchers_pending(&loop_)) return 0;
  return uv_backend_timeout(&loop_);
}

Result Client::process() {
  if (!external()) return {kEInval, "simba_client_process is for loop.mode=external clients"};
  if (finished_ || torn_down_) return {kEClosed, "the client is closed"};
  if (in_process_) return {kEWouldBlock, "simba_client_process called from its own callback"};
  in_process_ = true;
  run_turn(&loop_);
  in_process_ = false;
  return Result::ok();
}

// ---------------------------------------------------------------------------
// Elections

Result Client::start_election(const std::string& name, ElectedFn on_elected, RevokedFn on_revoked,
                              std::shared_ptr<Election>* out, WorkFn work) {
  auto e = std::make_shared<Election>();
  e->name_ = name;
  e->on_elected = std::move(on_elected);
  e->on_revoked = std::move(on_revoked);
  if (work) {
    e->work = std::make_unique<Election::Work>();
    e->work->fn = std::move(work);
  }
  e->queue = new_queue();
  Result result;
  Result r = run_sync([&] {
    if (close_requested_ || node_->closed()) {
      result = {kEClosed, "the client is closed"};
      return;
    }
    const ContenderId id = node_->next_id();
    elections_[id] = e;
    e->id = id;
    if (node_->add_election(name, now(), static_cast<bool>(e->work)) != id) {
      elections_.erase(id);
      result = {kEState, "\"" + name + "\" is already started or locked on this client"};
    }
  });
  if (r.code != kOk) return r;
  if (result.code == kOk) *out = std::move(e);
  return result;
}

Result Client::stop_election(const std::shared_ptr<Election>& e, DoneFn done) {
  Result result;
  Result r = run_sync([&] {
    {
      std::lock_guard<std::mutex> lock(e->mu);
      if (e->stop_requested || e->stopped) {
        result = {kEState, "the election of \"" + e->name_ + "\" is already stopping or stopped"};
        return;
      }
      e->stop_requested = true;
    }
    if (done) e->dones_for_update().stop = std::move(done);
    if (!node_->stop(e->id, now())) {
      // The node no longer knows it: the client's close stopped it.
      if (e->dones) e->dones->stop = nullptr;
      result = {kEState, "the election of \"" + e->name_ + "\" was stopped by the client's close"};
    }
  });
  if (r.code == kEClosed) {
    // The client's close stopped every election: the handle stays valid.
    return {kEState, "the election of \"" + e->name_ + "\" was stopped by the client's close"};
  }
  return r.code != kOk ? r : result;
}

Result Client::step_down(const std::shared_ptr<Election>& e, Duration cooldown, DoneFn done) {
  Result result;
  Result r = run_sync([&] {
    {
      std::lock_guard<std::mutex> lock(e->mu);
      if (e->stop_requested || e->stopped) {
        result = {kEState, "the election of \"" + e->name_ + "\" is stopping or stopped"};
        return;
      }
    }
    std::vector<DoneFn>& dones = e->dones_for_update().step_downs;
    dones.push_back(std::move(done));
    if (!node_->step_down(e->id, cooldown, now())) {
      dones.pop_back();
      result = {kEState, "the election of \"" + e->name_ + "\" is stopped"};
    }
  });
  if (r.code == kEClosed) {
    return {kEState, "the election of \"" + e->name_ + "\" was stopped by the client's close"};
  }
  return r.code != kOk ? r : result;
}

Result Client::stop_election_wait(const std::shared_ptr<Election>& e, int64_t timeout_ms) {
  if (!may_block()) {
    return {kEWouldBlock,
            "simba_election_stop_wait would wait for itself here (callback or loop thread)"};
  }
  auto w = std::make_shared<Waiter>();
  {
    std::lock_guard<std::mutex> lock(e->mu);
    if (e->stopped) return Result::ok();
    e->stop_waiters.push_back(w);
  }
  Result r = stop_election(e, nullptr);
  if (r.code != kOk && r.code != kEState) return r;
  {
    // A stop by the client's close completes the election without a done.
    std::lock_guard<std::mutex> lock(e->mu);
    if (e->stopped) return Result::ok();
  }
  const int rc = wait(*w, deadline_after(timeout_ms));
  if (rc != kOk) {
    return {rc, rc == kETimedOut ? "the stop did not complete within the timeout; it goes on"
                                 : "the client closed"};
  }
  return Result::ok();
}

void Client::detach_election(const std::shared_ptr<Election>& e) {
  e->detached = true;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    if (e->stop_requested || e->stopped) return;
    e->stop_requested = true;
  }
  auto stop = [this, e] {
    if (!node_->closed()) node_->stop(e->id, now());
  };
  if (on_loop_thread()) {
    stop();
    settle();
  } else {
    post(stop);
  }
}

bool Client::free_election(const std::shared_ptr<Election>& e) {
  // The listener hears nothing from the free on. A free that waits still runs a
  // stop's or step-down's done asked for before it (their ud is the caller's to
  // free once it returns); one that cannot wait (in a callback) drops them:
  // nothing of the handle starts after it.
  const bool waits = may_wait_for_close();
  if (waits) e->freeing_after_stop = true;
  detach_election(e);
  if (!waits) return false;
  if (external()) {
    // The stop needs the loop: the host thread runs it while it waits, another
    // thread waits for the host.
    stop_election_wait(e, -1);
  } else {
    // The loop thread completes the stop; its last callbacks may wait for an
    // executor that only this thread drains (a host's): run them here then.
    e->queue->wait_until(
        [&e] {
          std::lock_guard<std::mutex> lock(e->mu);
          return e->stopped;
        },
        may_run_callbacks_here());
  }
  e->queue->wait_idle();
  return true;
}

// ---------------------------------------------------------------------------
// Locks

Result Client::lock_acquire(const std::string& name, int64_t timeout_ms, bool try_once,
                            simba_term** out) {
  if (!may_block()) {
    return {kEWouldBlock, "a blocking lock call would wait for itself here (callback or loop)"};
  }
  // One hop to the loop and one wait for the answer: the registration does not
  // wait for itself (it finishes the waiter with its error if it fails).
  auto w = std::make_shared<Waiter>();
  auto queue = new_queue();
  auto enlist = [this, w, queue, name, timeout_ms, try_once] {
    const Result r = add_lock(name, timeout_ms, try_once, queue,
                              [w](int code, simba_term* t) { w->finish(code, {}, t); });
    if (r.code != kOk) w->finish(r.code, r.detail);
  };
  LoopLease lease(*this);
  if (on_loop_thread()) {
    if (torn_down_) return {kEClosed, "the client is closed"};
    enlist();
    settle();
  } else if (!post(enlist)) {
    return {kEClosed, "the client is closed"};
  }
  wait(*w, SteadyTime::max(), &lease);  // the node answers by the timeout
  if (w->code == kECanceled) return {kEClosed, "the client closed before the lock was acquired"};
  if (w->code != kOk) return {w->code, w->detail.empty() ? lock_failure_text(w->code) : w->detail};
  *out = w->term;
  return Result::ok();
}

Result Client::lock_acquire_async(const std::string& name, int64_t timeout_ms, bool try_once,
                                  LockFn cb) {
  Result result;
  auto queue = new_queue();
  LockFn done = [queue, cb](int code, simba_term* term) {
    if (!queue->post([cb, code, term] { cb(code, term); }) && term) term->release();
  };
  Result r = run_sync([&] { result = add_lock(name, timeout_ms, try_once, queue, done); });
  return r.code != kOk ? r : result;
}

Result Client::add_lock(const std::string& name, int64_t timeout_ms, bool try_once,
                        const std::shared_ptr<SerialQueue>& queue, LockFn done) {
  if (close_requested_ || node_->closed()) return {kEClosed, "the client is closed"};
  const TimePoint t = now();
  TimePoint give_up = TimePoint::max();
  if (try_once) {
    give_up = t + node_->config().renew_interval();
  } else if (timeout_ms >= 0) {
    give_up = t + ms(timeout_ms);
  }
  const ContenderId id = node_->next_id();
  Lock& lock = locks_[id];
  lock.name = name;
  lock.queue = queue;
  lock.done = std::move(done);
  if (node_->add_lock(name, give_up, try_once, t) != id) {
    locks_.erase(id);
    return {kEState, "an election of this client uses \"" + name + "\""};
  }
  return Result::ok();
}

void Client::lock_release(simba_term* term, bool wait_for_answer) {
  const ContenderId id = term->contender;
  const bool block = wait_for_answer && may_wait_for_close();
  auto w = std::make_shared<Waiter>();
  auto stop = [this, id, w, block] {
    auto l = locks_.find(id);
    if (node_->closed() || l == locks_.end()) {
      w->finish(kOk);
      return;
    }
    if (block) l->second.released = w;
    if (!node_->stop(id, now())) w->finish(kOk);
  };
  // Only a caller that waits for the answer borrows the loop to run it.
  std::optional<LoopLease> lease;
  if (block) lease.emplace(*this);
  if (on_loop_thread()) {
    if (!torn_down_) {
      stop();
      settle();
      // EXTERNAL mode on the host thread outside process(), or a borrowed loop:
      // wait like any blocking call, running the loop until the release is
      // answered.
      if (block) wait(*w, SteadyTime::max(), lease ? &*lease : nullptr);
    }
  } else {
    if (!post(stop) || !block) return;
    wait(*w, SteadyTime::max());  // the node answers within one call timeout
  }
  // The term was revoked before the release was sent: its on_revoked
  // callbacks are queued or done. Return only once they all ran.
  if (block) term->queue->wait_drained(may_run_callbacks_here());
}

// ---------------------------------------------------------------------------
// Effects

void Client::send_open(CallId call, Duration lease, Duration timeout) {
  backend_->open_session(lease, timeout, [this, call](const OpenReply& r) {
    node_->on_open(call, r, now());
    settle();
  });
}

void Client::send_keep_alive(CallId call, const std::string& session, Duration lease,
                             Duration timeout) {
  backend_->keep_alive(session, lease, timeout, [this, call](const KeepAliveReply& r) {
    node_->on_keep_alive(call, r, now());
    settle();
  });
}

void Client::send_acquire(CallId call, const std::string& session, const std::string& name,
                          Duration timeout) {
  backend_->acquire(session, name, timeout, [this, call](const AcquireReply& r) {
    node_->on_acquire(call, r, now());
    settle();
  });
}

void Client::send_release(CallId call, const std::string& session, const std::string& name,
                          uint64_t token, Duration timeout) {
  backend_->release(session, name, token, timeout, [this, call](const DoneReply& r) {
    node_->on_release(call, r, now());
    settle();
  });
}

void Client::send_close(CallId call, const std::string& session, Duration timeout) {
  backend_->close_session(session, timeout, [this, call](const DoneReply& r) {
    node_->on_close(call, r, now());
    settle();
  });
}

simba_term** Client::term_slot(ContenderId who, const TermState* state) {
  simba_term** slot = nullptr;
  if (auto e = elections_.find(who); e != elections_.end()) {
    slot = &e->second->term;
  } else if (auto l = locks_.find(who); l != locks_.end()) {
    slot = &l->second.term;
  }
  return slot && *slot && (*slot)->state.get() == state ? slot : nullptr;
}

void Client::term_ended(ContenderId who, const std::shared_ptr<TermState>& term) {
  if (simba_term** slot = term_slot(who, term.get())) (*slot)->signal_ended();
}

void Client::elected(ContenderId who, const std::shared_ptr<TermState>& term) {
  if (auto e = elections_.find(who); e != elections_.end()) {
    std::shared_ptr<Election> el = e->second;
    auto* t = new simba_term(term, el->queue, weak_from_this(), who, false);
    el->term = t;  // the engine's reference, dropped at revoked()
    if (el->work) {
      start_work(el, t, who, term->token());
      return;
    }
    t->retain();
    const auto posted = el->queue->post_or_reject([el, t] {
      if (!el->detached && el->on_elected) el->on_elected(t);
      t->release();
    });
    if (posted == SerialQueue::Posted::kRejected) {
      // The executor refused onElected: nobody learns of the term. Step down
      // for one lease duration, and deliver no onRevoked for it either, so
      // that callbacks stay paired (seed, "Callbacks and Lifecycle").
      t->release();
      t->unannounced = true;
      log(kLogWarn, "the callback executor rejected onElected of " + el->name() + " token " +
                        std::to_string(term->token()) + ": stepping down for one lease duration");
      defer([this, el] {
        if (torn_down_) return;
        std::vector<DoneFn>& dones = el->dones_for_update().step_downs;
        dones.push_back(nullptr);  // acknowledged to nobody
        if (!node_->step_down(el->id, cfg_.lease_duration, now())) dones.pop_back();
        settle();
      });
    }
    return;
  }
  if (auto l = locks_.find(who); l != locks_.end()) {
    auto* t = new simba_term(term, l->second.queue, weak_from_this(), who, true);
    l->second.term = t;
    t->retain();  // the caller's reference
    t->caller_refs = 1;
    LockFn done = std::move(l->second.done);
    l->second.done = nullptr;
    if (done) done(kOk, t);
  }
}

void Client::start_work(const std::shared_ptr<Election>& el, simba_term* t, ContenderId who,
                        uint64_t token) {
  t->retain();  // the work thread's reference
  el->work->count.begin();
  std::shared_ptr<Mailbox> mailbox = mailbox_;
  std::function<void(simba_term*)> hook;
  {
    std::lock_guard<std::mutex> lock(work_start_hook_mu_);
    hook = work_start_hook_;
  }
  auto done = [mailbox, who, token] {
    // Back on the loop: the node releases now if a handover waits for this.
    mailbox->post([who, token](Client& c) {
      c.node_->work_done(who, token, c.now());
      c.settle();
    });
  };
  try {
    std::thread([el, t, done, hook] {
      if (hook) hook(t);
      {
        WorkScope scope;
        // The work starts on a valid term only: a stop (or the deadline) that
        // came between the election and this thread's start leaves nothing to
        // run, and the work counts as exited at once, so the handover goes on.
        if (!el->detached && t->state->valid()) el->work->fn(t);
      }
      done();
      t->release();
      el->work->count.end();
    }).detach();
  } catch (const std::system_error& e) {
    log(kLogError, "cannot start a thread for the work of " + el->name() + ": " + e.what());
    t->release();
    el->work->count.end();
    post([this, who, token] { node_->work_done(who, token, now()); });
  }
}

void Client::set_work_start_hook(std::function<void(simba_term*)> hook) {
  std::lock_guard<std::mutex> lock(work_start_hook_mu_);
  work_start_hook_ = std::move(hook);
}

void Client::revoked(ContenderId who, const std::shared_ptr<TermState>& term,
                     RevokeReason reason) {
  simba_term** slot = term_slot(who, term.get());
  if (!slot) return;
  simba_term* t = *slot;
  *slot = nullptr;
  t->signal_ended();
  std::function<void()> then;
  if (t->unannounced) {
    t->release();  // its onElected never ran: no onRevoked either
    return;
  }
  if (auto e = elections_.find(who); e != elections_.end()) {
    std::shared_ptr<Election> el = e->second;
    then = [el, t, reason] {
      if (!el->detached && el->on_revoked) el->on_revoked(t, reason);
    };
  }
  t->deliver_revoked(reason, std::move(then));
  t->release();
}

void Client::lock_failed(ContenderId who, LockFailure why) {
  auto l = locks_.find(who);
  if (l == locks_.end()) return;
  LockFn done = std::move(l->second.done);
  locks_.erase(l);
  if (done) done(lock_failure_code(why), nullptr);
}

void Client::stopped(ContenderId who) {
  if (auto e = elections_.find(who); e != elections_.end()) {
    std::shared_ptr<Election> el = e->second;
    elections_.erase(e);
    DoneFn done = el->dones ? std::move(el->dones->stop) : nullptr;
    if (el->dones) el->dones->stop = nullptr;
    // Pending step-down completions were acknowledged before stopped().
    auto finish = [el, done] {
      if (done && el->runs_dones()) done(kOk);
      std::vector<std::shared_ptr<Waiter>> waiters;
      {
        std::lock_guard<std::mutex> lock(el->mu);
        el->stopped = true;
        waiters.swap(el->stop_waiters);
      }
      for (auto& w : waiters) w->finish(kOk);
    };
    if (!el->queue->post(finish)) finish();
    return;
  }
  if (auto l = locks_.find(who); l != locks_.end()) {
    if (l->second.released) l->second.released->finish(kOk);
    locks_.erase(l);
  }
}

void Client::stepped_down(ContenderId who) {
  auto e = elections_.find(who);
  if (e == elections_.end() || !e->second->dones || e->second->dones->step_downs.empty()) return;
  std::shared_ptr<Election> el = e->second;
  std::vector<DoneFn>& dones = el->dones->step_downs;
  DoneFn done = std::move(dones.front());
  dones.erase(dones.begin());
  if (!done) return;
  el->queue->post([el, done] {
    if (el->runs_dones()) done(kOk);
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
