// The client's libuv loop, who may run it, and how other threads reach it.
//
// Thread ownership (the one place these rules are stated; ADR 0003, 0014):
// - The loop's *owner* is the one thread running it at a moment. Only the owner
//   touches the uv handles, the backend, the Node and every member the client
//   marks "loop thread"; a member marked otherwise names its own mutex.
// - THREAD mode: the owner is the client's own loop thread, or a caller that
//   borrowed the loop while it was free (a Lease). Ownership is one state under
//   owner_mu_ (nobody, the loop thread, a caller); handing it over through that
//   mutex orders the owners' accesses. The loop thread owns the loop only for
//   its turns (UV_RUN_NOWAIT); between them it polls the backend fd or stands by.
// - A borrower runs its own command, then turns and polls until its answer came,
//   for at most kMaxBorrow. What the API promises the loop thread (deferred
//   work: callbacks of the loop executor, log lines; and the close's teardown)
//   never runs on a borrower: it hands the loop back at once for it. Everything
//   a borrower does when it gives the loop back happens under owner_mu_: once
//   the loop is free, a close on another thread may end the loop and free the
//   client.
// - EXTERNAL mode: there is no loop thread and nothing is lent. The owner is
//   the host thread (the one that opened the client), inside
//   simba_client_process() or inside one of its own blocking calls, which then
//   run the loop themselves.
// - Any thread may post() a command (under commands_mu_) and wake the loop with
//   uv_async_send; posts are refused once the teardown stopped accepting them.
// - The loop's end is published under done_mu_ (THREAD mode).
#ifndef SIMBA_ENGINE_LOOP_H
#define SIMBA_ENGINE_LOOP_H

#include <uv.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "engine/result.h"

namespace simba::engine {

struct Term;

// A blocking caller's rendezvous with the loop.
struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Code code = Code::kOk;
  std::string detail;
  Term* term = nullptr;
  void finish(Code c, std::string d = {}, Term* t = nullptr);
};

class Loop {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  // What the loop asks of the client that owns it; always on the loop's owner.
  class Host {
   public:
    virtual void commands_ran() = 0;  // after a batch of posted commands
    virtual void timer_fired() = 0;
    // The node closed: its teardown belongs to the loop thread.
    virtual bool closing() const = 0;
    virtual void tear_down() = 0;

   protected:
    ~Host() = default;
  };

  // THREAD mode (ADR 0014): while the loop thread waits for I/O, a caller about
  // to wait for the backend borrows the loop and runs it itself, so that its
  // call and the answer need no thread wake-up each way. Held from the
  // constructor (when the loop was free and `may_lend`) to give_back() or the
  // destructor.
  class Lease {
   public:
    Lease(Loop& l, bool may_lend) : l_(l), held_(may_lend && l.borrow()) {}
    ~Lease() { give_back(); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    bool held() const { return held_; }
    void give_back() {
      if (held_) l_.return_loop();
      held_ = false;
    }

   private:
    Loop& l_;
    bool held_;
  };

  Loop(Host& host, bool external) : host_(host), external_(external) {}
  ~Loop();
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  // Makes the loop and its handles; nothing runs yet.
  Result init();
  // init() succeeded but the client will not start: closes it all here.
  void close_unstarted();
  // EXTERNAL mode: this thread is the host thread from now on.
  void adopt_host_thread() { host_thread_ = std::this_thread::get_id(); }
  // THREAD mode: starts the loop thread, whose first turn runs `first`.
  void start_thread(std::function<void()> first);
  bool has_thread() const { return thread_.joinable(); }
  // THREAD mode: waits until the loop thread ended, and joins it.
  void wait_ended();
  // EXTERNAL mode: runs the loop until every handle closed, then closes it.
  void run_to_end();

  uv_loop_t* uv() { return &loop_; }
  bool external() const { return external_; }
  bool on_host_thread() const { return std::this_thread::get_id() == host_thread_; }
  // This thread owns the loop (the loop thread, a borrower, or the host's).
  bool on_loop_thread() const;
  // This thread runs the loop on loan from the loop thread.
  bool borrowed_here() const;
  // This thread is inside a turn of the loop: waiting here would wait for itself.
  bool inside_turn() const;
  // Loop thread: the teardown began; handles are closing, nothing more runs.
  bool torn_down() const { return torn_down_; }
  void mark_torn_down() { torn_down_ = true; }

  // Any thread: queues `fn` for the loop and wakes it. False once not accepting.
  bool post(std::function<void()> fn);
  void stop_accepting();
  // Loop thread: runs every posted command, then Host::commands_ran().
  void drain_commands();

  // Runs `fn` on the loop thread itself in a later turn (never on a borrower).
  // False once torn down.
  bool defer(std::function<void()> fn);
  void run_deferred();
  bool has_deferred() const { return !deferred_.empty(); }

  void start_timer(uint64_t delay_ms);
  void stop_timer() { uv_timer_stop(&timer_); }
  // Closes the loop's own handles, so that the loop ends.
  void close_handles();

  // Blocks the caller until `w` is done or `deadline` passes: Code::kOk, Code::kETimedOut,
  // Code::kEClosed (EXTERNAL: torn down). In EXTERNAL mode on the host thread it runs
  // the loop itself, and in THREAD mode too while it holds `lease` (only for
  // waiters finished on the loop).
  Code wait(Waiter& w, SteadyTime deadline, Lease* lease = nullptr);
  // A borrower sends what a command queued now (writes go out in the loop's
  // check phase) instead of waiting for the loop thread's turn.
  void flush_if_borrowed();

  // EXTERNAL mode.
  int fd() const { return external_ ? uv_backend_fd(&loop_) : -1; }
  int64_t timeout_ms() const;
  bool in_process() const { return in_process_; }
  // One turn on the host thread, its callbacks inside simba_client_process().
  void process();

 private:
  enum class Owner { kNone, kLoopThread, kCaller };
  enum class Driven { kDone, kTimedOut, kClosed, kHandBack };
  bool borrow();
  void return_loop();
  // Work that must run on the loop thread itself is waiting.
  bool needs_loop_thread() const { return !deferred_.empty() || host_.closing(); }
  // The client's own loop thread: its turns and its waits between them.
  void run_thread();
  // Between turns: stands by for a borrower, then says whether to turn now
  // (false: poll for I/O until `*timeout` instead).
  bool wait_for_turn(int* timeout);
  // One turn of the loop thread; false once the loop ended.
  bool thread_turn(bool first, int* timeout);
  void poll_io(int timeout);
  // Runs the loop on this thread until `w` is done or `deadline`; a borrower
  // hands back (kHandBack) when only the loop thread may go on (deferred work,
  // the close) or after kMaxBorrow; the host thread stops once torn down.
  Driven drive(Waiter& w, SteadyTime deadline);

  Host& host_;
  const bool external_;
  uv_loop_t loop_;
  uv_async_t wake_;
  uv_timer_t timer_;
  uv_idle_t idle_;
  std::thread thread_;
  std::atomic<std::thread::id> loop_thread_{};  // THREAD mode: the client's own thread
  std::atomic<std::thread::id> loop_owner_{};   // THREAD mode: who runs the loop now
  std::mutex owner_mu_;
  std::condition_variable owner_cv_;  // the loop thread waits here for a borrower
  Owner owner_ = Owner::kNone;        // guarded by owner_mu_, as the members up to hand_over_
  bool loop_ended_ = false;
  bool loop_thread_due_ = false;  // a borrower handed back work for the loop thread
  bool loop_thread_polling_ = false;
  SteadyTime polling_until_;                      // the loop thread's poll ends then
  SteadyTime standby_until_ = SteadyTime::min();  // its standby ends (min: none)
  SteadyTime turn_at_ = SteadyTime::max();        // set by a borrower: the loop's next timer
  SteadyTime returned_at_;                        // when the last borrower left
  bool hand_over_ = false;         // loop owner: a borrower gave up waiting (kMaxBorrow)
  int handoff_fd_ = -1;            // eventfd: a borrower cuts the loop thread's poll short
  std::thread::id host_thread_{};  // EXTERNAL mode: the thread that opened the client
  bool in_process_ = false;        // EXTERNAL mode: the loop is running on the host thread
  bool torn_down_ = false;         // loop owner

  std::mutex commands_mu_;
  std::deque<std::function<void()>> commands_;
  bool accepting_ = true;                       // guarded by commands_mu_
  std::deque<std::function<void()>> deferred_;  // loop owner

  // Set when the loop finished: every callback was handed to its queue.
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  bool loop_done_ = false;
};

}  // namespace simba::engine

#endif
