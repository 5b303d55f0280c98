#include "engine/loop.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace simba::engine {

namespace {

using SteadyTime = Loop::SteadyTime;

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

Loop& loop_of(const uv_handle_t* h) { return *static_cast<Loop*>(h->loop->data); }

}  // namespace

void Waiter::finish(Code c, std::string d, Term* t) {
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

Loop::~Loop() {
  if (handoff_fd_ >= 0) ::close(handoff_fd_);
}

Result Loop::init() {
  if (!external_) {
    handoff_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (handoff_fd_ < 0) {
      return {Code::kENoMem, std::string("cannot create an eventfd: ") + std::strerror(errno)};
    }
  }
  if (int rc = uv_loop_init(&loop_); rc != 0) {
    return {Code::kEBackend, std::string("cannot start the event loop: ") + uv_strerror(rc)};
  }
  loop_.data = this;
  uv_async_init(&loop_, &wake_,
                [](uv_async_t* a) { loop_of(reinterpret_cast<uv_handle_t*>(a)).drain_commands(); });
  uv_timer_init(&loop_, &timer_);
  uv_idle_init(&loop_, &idle_);
  return Result::ok();
}

void Loop::close_unstarted() {
  close_handles();
  uv_run(&loop_, UV_RUN_DEFAULT);
  uv_loop_close(&loop_);
  torn_down_ = true;
  loop_done_ = true;
}

void Loop::close_handles() {
  uv_close(reinterpret_cast<uv_handle_t*>(&wake_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&timer_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&idle_), nullptr);
}

void Loop::start_thread(std::function<void()> first) {
  {
    std::lock_guard<std::mutex> lock(commands_mu_);
    commands_.push_back(std::move(first));
  }
  owner_ = Owner::kLoopThread;  // until its first turn ran `first`
  thread_ = std::thread([this] { run_thread(); });
}

void Loop::wait_ended() {
  {
    std::unique_lock<std::mutex> lock(done_mu_);
    done_cv_.wait(lock, [this] { return loop_done_; });
  }
  if (thread_.joinable()) thread_.join();
}

void Loop::run_to_end() {
  while (uv_run(&loop_, UV_RUN_DEFAULT) != 0) {
  }
  uv_loop_close(&loop_);
}

bool Loop::on_loop_thread() const {
  const std::thread::id me = std::this_thread::get_id();
  return external_ ? me == host_thread_ : me == loop_owner_.load();
}

bool Loop::borrowed_here() const {
  if (external_) return false;
  const std::thread::id me = std::this_thread::get_id();
  return me == loop_owner_.load() && me != loop_thread_.load();
}

bool Loop::inside_turn() const {
  // in_process_ belongs to the host thread: other threads (a group's, the
  // host's workers) must not read it, and may always block.
  if (external_) return on_loop_thread() && in_process_;
  return on_loop_thread();
}

// ---------------------------------------------------------------------------
// Commands and deferred work

bool Loop::post(std::function<void()> fn) {
  // The wake-up goes out under the lock too: once stop_accepting() returned,
  // no post is between its check and its uv_async_send, which after the
  // loop's close would write to a closed (or reused) eventfd, and libuv
  // aborts on that write's EBADF. A client closed while another thread
  // posted did so, about once in a thousand runs under load.
  std::lock_guard<std::mutex> lock(commands_mu_);
  if (!accepting_) return false;
  commands_.push_back(std::move(fn));
  uv_async_send(&wake_);
  return true;
}

void Loop::stop_accepting() {
  std::lock_guard<std::mutex> lock(commands_mu_);
  accepting_ = false;
}

void Loop::drain_commands() {
  std::deque<std::function<void()>> batch;
  {
    std::lock_guard<std::mutex> lock(commands_mu_);
    batch.swap(commands_);
  }
  for (auto& fn : batch) fn();
  host_.commands_ran();
}

bool Loop::defer(std::function<void()> fn) {
  if (!on_loop_thread()) {
    return post([this, fn = std::move(fn)]() mutable { defer(std::move(fn)); });
  }
  if (torn_down_) return false;
  deferred_.push_back(std::move(fn));
  uv_idle_start(&idle_,
                [](uv_idle_t* h) { loop_of(reinterpret_cast<uv_handle_t*>(h)).run_deferred(); });
  return true;
}

void Loop::run_deferred() {
  // Callbacks of the loop executor run on the loop thread, never on a caller
  // that borrowed the loop: it hands the loop back to run them.
  if (borrowed_here()) return;
  std::deque<std::function<void()>> batch;
  batch.swap(deferred_);
  for (auto& fn : batch) fn();
  if (deferred_.empty() && !torn_down_) uv_idle_stop(&idle_);
}

void Loop::start_timer(uint64_t delay_ms) {
  uv_update_time(&loop_);
  uv_timer_start(
      &timer_,
      [](uv_timer_t* t) { loop_of(reinterpret_cast<uv_handle_t*>(t)).host_.timer_fired(); },
      delay_ms, 0);
}

// ---------------------------------------------------------------------------
// The loop thread (ADR 0014)

// The loop thread's turns, and its waits between them. Each turn is a
// UV_RUN_NOWAIT; between turns the thread holds no ownership, so that a caller
// may borrow the loop. It then waits in one of two ways:
// - polling the loop's backend fd (and the handoff eventfd) until its next
//   timer, when nobody borrowed the loop lately;
// - standing by on owner_cv_ while a caller borrows it (at most kMaxBorrow),
//   and for kLinger after the last borrower left: back-to-back blocking calls
//   then neither wake this thread with their I/O nor need to notify it. I/O
//   that arrives for nobody in that window waits at most kLinger for this
//   thread.
void Loop::run_thread() {
  loop_thread_ = std::this_thread::get_id();
  bool first = true;
  int timeout = 0;
  for (;;) {
    if (wait_for_turn(&timeout)) {
      if (!thread_turn(first, &timeout)) break;
      first = false;
    }
    poll_io(timeout);
  }
  uv_loop_close(&loop_);
  std::lock_guard<std::mutex> lock(done_mu_);
  loop_done_ = true;
  done_cv_.notify_all();
}

bool Loop::wait_for_turn(int* timeout) {
  constexpr auto kLinger = std::chrono::milliseconds(1);
  std::unique_lock<std::mutex> lock(owner_mu_);
  loop_thread_polling_ = false;
  const bool stood_by = owner_ == Owner::kCaller;
  for (bool standby = stood_by; standby && !loop_thread_due_;) {
    const SteadyTime now = std::chrono::steady_clock::now();
    if (owner_ == Owner::kCaller) {
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
    *timeout =
        turn_at_ == SteadyTime::max()
            ? -1
            : static_cast<int>(std::min<int64_t>(
                  std::chrono::ceil<std::chrono::milliseconds>(turn_at_ - now).count(), INT_MAX));
    return false;
  }
  // A turn. The loop is free here: standby ends only when no caller holds it.
  owner_ = Owner::kLoopThread;
  loop_thread_due_ = false;
  return true;
}

bool Loop::thread_turn(bool first, int* timeout) {
  loop_owner_ = std::this_thread::get_id();
  if (first) drain_commands();
  if (host_.closing() && !torn_down_) host_.tear_down();  // a borrower saw the close
  // What a borrower deferred (log lines, direct callbacks) comes first, in
  // its order, before this turn's timers add to it.
  if (!deferred_.empty()) run_deferred();
  const bool alive = run_turn(&loop_);
  *timeout = alive ? uv_backend_timeout(&loop_) : 0;
  loop_owner_ = std::thread::id();
  std::lock_guard<std::mutex> lock(owner_mu_);
  owner_ = Owner::kNone;
  if (!alive) {
    loop_ended_ = true;
    return false;
  }
  loop_thread_polling_ = true;
  polling_until_ = *timeout < 0
                       ? SteadyTime::max()
                       : std::chrono::steady_clock::now() + std::chrono::milliseconds(*timeout);
  return true;
}

void Loop::poll_io(int timeout) {
  struct pollfd p[2] = {{uv_backend_fd(&loop_), POLLIN, 0}, {handoff_fd_, POLLIN, 0}};
  if (poll(p, 2, timeout) > 0 && (p[1].revents & POLLIN)) {
    uint64_t count;
    while (read(handoff_fd_, &count, sizeof count) > 0) {
    }
  }
}

// ---------------------------------------------------------------------------
// Borrowers and the host thread

bool Loop::borrow() {
  if (external_ || on_loop_thread()) return false;
  {
    std::lock_guard<std::mutex> lock(owner_mu_);
    // Torn down or closing: only the loop thread has work left (and a hand-off
    // to it would find the loop no longer accepting any, ADR 0029).
    if (owner_ != Owner::kNone || loop_ended_ || loop_thread_due_ || torn_down_ ||
        needs_loop_thread()) {
      return false;
    }
    owner_ = Owner::kCaller;
  }
  loop_owner_ = std::this_thread::get_id();
  return true;
}

void Loop::return_loop() {
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
  // may end the loop thread and free the client as soon as the lock is let go.
  std::lock_guard<std::mutex> lock(owner_mu_);
  owner_ = Owner::kNone;
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

Loop::Driven Loop::drive(Waiter& w, SteadyTime deadline) {
  // A borrower runs the loop for a call's answer, not for a long wait (a
  // contended lock): past this the loop thread takes over, so that the
  // session's keep-alives never hang on an application thread.
  constexpr auto kMaxBorrow = std::chrono::milliseconds(10);
  const SteadyTime give_back_at = std::chrono::steady_clock::now() + kMaxBorrow;
  const int backend_fd = uv_backend_fd(&loop_);
  for (;;) {
    // EXTERNAL mode: callbacks run here as inside simba_client_process().
    if (external_) in_process_ = true;
    const bool alive = run_turn(&loop_);
    if (external_) in_process_ = false;
    {
      std::lock_guard<std::mutex> lock(w.mu);
      if (w.done) return Driven::kDone;
    }
    if (external_ && torn_down_) return Driven::kClosed;
    if (!external_ && (!alive || needs_loop_thread())) return Driven::kHandBack;
    const auto now_t = std::chrono::steady_clock::now();
    if (now_t >= deadline) return Driven::kTimedOut;
    if (!external_ && now_t >= give_back_at) {
      hand_over_ = true;
      return Driven::kHandBack;
    }
    int64_t wait_ms = uv_backend_timeout(&loop_);
    for (const SteadyTime until : {deadline, external_ ? SteadyTime::max() : give_back_at}) {
      if (until == SteadyTime::max()) continue;
      const int64_t left = std::chrono::ceil<std::chrono::milliseconds>(until - now_t).count();
      if (wait_ms < 0 || left < wait_ms) wait_ms = left;
    }
    // The waiters driven here are finished on the loop, which this poll wakes
    // for (EXTERNAL: or by the client's wake_loop()); the bound is only a safety net.
    if (wait_ms < 0 || wait_ms > 1000) wait_ms = 1000;
    struct pollfd p = {backend_fd, POLLIN, 0};
    poll(&p, 1, static_cast<int>(wait_ms));
  }
}

Code Loop::wait(Waiter& w, SteadyTime deadline, Lease* lease) {
  const bool drives = (lease && lease->held()) || (external_ && on_loop_thread());
  if (drives) {
    // EXTERNAL mode, on the host's thread, outside process(): the loop runs here.
    switch (drive(w, deadline)) {
      case Driven::kDone:
        return Code::kOk;
      case Driven::kTimedOut:
        return Code::kETimedOut;
      case Driven::kClosed:
        return Code::kEClosed;
      case Driven::kHandBack:
        lease->give_back();  // from here on a close may free the client: only `w`
        break;
    }
  }
  std::unique_lock<std::mutex> lock(w.mu);
  if (!w.cv.wait_until(lock, deadline, [&] { return w.done; })) return Code::kETimedOut;
  return Code::kOk;
}

void Loop::flush_if_borrowed() {
  if (borrowed_here()) run_turn(&loop_);
}

int64_t Loop::timeout_ms() const {
  if (!external_ || torn_down_) return -1;
  if (!deferred_.empty() || watchers_pending(&loop_)) return 0;
  return uv_backend_timeout(&loop_);
}

void Loop::process() {
  in_process_ = true;
  run_turn(&loop_);
  in_process_ = false;
}

}  // namespace simba::engine
