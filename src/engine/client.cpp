// The engine's API: opening and closing a client, elections, locks, and the
// operators' reads. The loop is engine/loop.h; the Effects adapter effects.cpp;
// leader work work.cpp.
#include "engine/client.h"

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <tuple>

#include "core/json.h"
#include "core/log_level.h"

namespace simba::engine {

// One record per election, its queue and its contender inside (ADR 0024,
// ADR 0035), counting its own references and being the C handle (ADR 0042):
// its name after it in the same block (ADR 0043).
static_assert(sizeof(void*) != 8 || sizeof(Election) <= 136, "engine::Election grew past 136");

namespace {

using SteadyTime = Loop::SteadyTime;

SteadyTime deadline_after(int64_t timeout_ms) {
  if (timeout_ms < 0) return SteadyTime::max();
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
}

const char* lock_failure_text(Code code) {
  switch (code) {
    case Code::kETimedOut:
      return "the lock was not acquired within the timeout";
    case Code::kEBusy:
      return "the lock is held by another session or by another lock of this client";
    case Code::kEBackend:
      return "the backend could not grant the lock";
    default:
      return "the lock was not acquired";
  }
}

}  // namespace

void run_last(SerialQueue& q, LastFn fn) {
  auto held = std::make_shared<LastFn>(std::move(fn));
  if (q.post([held] { (*held)(); })) return;
  // The client closed its queues (its executor is gone): a thread of the
  // library runs it, never the caller, which may hold its own locks.
  try {
    std::thread([held] { (*held)(); }).detach();
  } catch (const std::system_error&) {
    (*held)();  // no thread to be had: late rather than never
  }
}

Client::Client(const Config& cfg, const Hooks& hooks)
    : cfg_(cfg), hooks_(hooks), event_sink_(hooks.events) {}

Result Client::open(const std::string& url, const Config& cfg, const Hooks& hooks,
                    std::shared_ptr<Client>* out) {
  std::shared_ptr<Client> c(new Client(cfg, hooks));
  c->queue_executors_->set_client(c);  // how an election's handle finds its client
  Result r = c->init(url);
  if (r.code != Code::kOk) return r;
  *out = std::move(c);
  return r;
}

Result Client::init(const std::string& url) {
  url_redacted_ = redact_url(url);
  mailbox_->client = this;
  if (Result r = loop_.init(); r.code != Code::kOk) return r;

  loop_executor_ = std::make_unique<LoopExecutor>(
      [this](std::function<void()> fn) { return loop_.defer(std::move(fn)); });
  if (cfg_.executor == ExecutorKind::kHost && hooks_.submit) {
    // The host's submit() stays on the loop thread while callers borrow the
    // loop (ADR 0029).
    executor_ = std::make_unique<HandOffExecutor>(
        std::make_unique<HostExecutor>(hooks_.submit, hooks_.submit_ctx),
        [this] { return loop_.borrowed_here(); },
        [this](std::function<void()> fn) { return loop_.defer(std::move(fn)); });
  } else if (cfg_.executor == ExecutorKind::kPool && !external()) {
    executor_ = std::make_unique<PoolExecutor>(cfg_.callback_threads);
  }
  queue_executors_->set(executor_ ? executor_.get() : loop_executor_.get(), loop_executor_.get());
  event_queue_ = new_queue();

  BackendContext ctx;
  ctx.loop = loop_.uv();
  ctx.log = [this](int level, const std::string& line) { emit_log(level, line); };
  ctx.client_name = cfg_.client_name;
  ctx.memory_faults = hooks_.memory_faults;
  BackendError why = BackendError::kNone;
  std::string error;
  backend_ = make_backend(ctx, url, &why, &error);
  if (!backend_) {
    // Nothing started yet: close the handles and the loop here.
    loop_.close_unstarted();
    if (executor_) executor_->shutdown();
    status_ = static_cast<int>(SessionStatus::kClosed);
    return {why == BackendError::kUnsupported ? Code::kEUnsupported : Code::kEInval, error};
  }
  // The grant (ADR 0047) waits for the core's half of step 1.
  backend_->on_released([this](const std::string& name, const Grant&) {
    observed_release(name);
    node_->on_released(name, now());
    settle();
  });
  node_ = std::make_unique<Node>(cfg_, *this, MonotonicClock::instance(), std::random_device{}());

  if (external()) {
    loop_.adopt_host_thread();
    node_->start(now());
    settle();
  } else {
    loop_.start_thread([this] { node_->start(now()); });
  }
  return Result::ok();
}

Client::~Client() {
  // close() has run (simba_client_close always calls it); this only guards
  // against a client that never started its loop.
  if (loop_.has_thread()) {
    close();
  }
}

// ---------------------------------------------------------------------------
// Running on the loop

Result Client::run_sync(const std::function<void()>& fn) {
  LoopLease lease(loop_, may_lend_loop());
  if (on_loop_thread()) {
    if (loop_.torn_down()) return {Code::kEClosed, "the client is closed"};
    fn();
    settle();
    loop_.flush_if_borrowed();
    return Result::ok();
  }
  auto w = std::make_shared<Waiter>();
  if (!loop_.post([this, &fn, w] {
        fn();
        settle();
        w->finish(Code::kOk);
      })) {
    return {Code::kEClosed, "the client is closed"};
  }
  std::unique_lock<std::mutex> lock(w->mu);
  w->cv.wait(lock, [&] { return w->done; });
  return Result::ok();
}

QueueRef Client::new_queue() { return SerialQueue::make(queue_executors_); }

// ---------------------------------------------------------------------------
// Client API

void Client::start_close(bool in_next_turn) {
  close_requested_ = true;
  if (loop_.torn_down()) return;
  if (on_loop_thread() && !in_next_turn) {
    node_->close(now());
    settle();
  } else {
    loop_.post([this] { node_->close(now()); });
  }
}

Code Client::close() {
  // Refused before anything starts: capi reports it (item 2 of ADR 0015).
  if (external() && !on_host_thread()) return Code::kEWouldBlock;
  if (!may_wait_for_close()) {
    // Waiting here would wait for itself: start the close and let it finish.
    start_close();
    return Code::kEWouldBlock;
  }
  close_requested_ = true;
  std::lock_guard<std::mutex> guard(close_mu_);
  if (finished_) return Code::kOk;
  if (external()) {
    if (!loop_.torn_down()) {
      node_->close(now());
      settle();
    }
    loop_.run_to_end();
  } else {
    loop_.post([this] { node_->close(now()); });
    loop_.wait_ended();
  }
  finish_close();
  return Code::kOk;
}

Code Client::close_async(DoneFn done) {
  if (!external() || !on_host_thread()) return Code::kEWouldBlock;
  if (close_done_ || finished_) return Code::kEClosed;
  close_done_ = done ? std::move(done) : [](Code) {};
  // In the next turn of process(), so that no callback runs inside this call.
  start_close(true);
  return Code::kOk;
}

void Client::finish_close() {
  queue_executors_->close();
  if (executor_) executor_->shutdown();
  status_ = static_cast<int>(SessionStatus::kClosed);
  finished_ = true;
  if (close_done_) {
    DoneFn done = std::move(close_done_);
    close_done_ = nullptr;
    // A callback: a simba_client_close() inside it only says "later".
    CallbackScope scope;
    done(close_code());
  }
}

Code Client::close_code() const {
  switch (node_->close_failure()) {
    case Outcome::kOk:
    case Outcome::kExpired:
      return Code::kOk;
    case Outcome::kTimeout:
      return Code::kETimedOut;
    default:
      return Code::kEBackend;
  }
}

Result Client::wait_live(int64_t timeout_ms) {
  // Refused from a callback or the loop thread whatever the status, so that
  // such a call fails every time, not only when the session happens to be down
  // (simba_client_status() is the check that never blocks).
  if (!may_block()) {
    return {Code::kEWouldBlock,
            "simba_client_wait_live would wait for itself here (callback or loop)"};
  }
  // Closing counts as closed (SIMBA_ECLOSED: "closed or closing"), even while
  // the session still reads LIVE until the close completes.
  if (close_requested_ || status() == SessionStatus::kClosed) {
    return {Code::kEClosed, "the client is closed"};
  }
  if (status() == SessionStatus::kLive) return Result::ok();
  if (timeout_ms == 0) return {Code::kETimedOut, "the session is not live"};
  auto w = std::make_shared<Waiter>();
  const auto deadline = deadline_after(timeout_ms);
  auto enlist = [this, w] {
    if (node_->status() == SessionStatus::kLive) {
      w->finish(Code::kOk);
    } else if (node_->closed()) {
      w->finish(Code::kEClosed, "the client closed");
    } else {
      live_waiters_.push_back(w);
    }
  };
  LoopLease lease(loop_, may_lend_loop());
  if (on_loop_thread()) {
    Result r = run_sync(enlist);
    if (r.code != Code::kOk) return r;
  } else if (!loop_.post(enlist)) {
    // Not run_sync: in EXTERNAL mode the host may not process for a while,
    // and the timeout bounds the whole wait.
    return {Code::kEClosed, "the client is closed"};
  }
  const Code rc = loop_.wait(*w, deadline, &lease);
  if (rc != Code::kOk) {
    return {rc, rc == Code::kETimedOut ? "the session did not become live within the timeout"
                                       : "the client closed"};
  }
  return {w->code, w->detail};
}

Result Client::snapshot_json(std::string* out) {
  Result r = run_sync([this, out] {
    const NodeView v = node_->view();
    std::string s = "{\"client\":" + json_quote(cfg_.client_name) +
                    ",\"backend\":" + json_quote(url_redacted_) +
                    ",\"session\":{\"id\":" + json_quote(v.session_id) +
                    ",\"status\":" + json_quote(session_status_name(v.status)) +
                    ",\"remaining_ms\":" + std::to_string(to_ms(v.remaining)) +
                    ",\"renew_period_ms\":" + std::to_string(to_ms(v.renew_period)) +
                    ",\"lease_shortened\":" + (v.lease_shortened ? "true" : "false") +
                    "},\"elections\":[";
    bool first = true;
    for (const ContenderView& c : v.contenders) {
      if (!first) s += ",";
      first = false;
      s += "{\"name\":" + json_quote(c.name) +
           ",\"kind\":" + json_quote(contender_kind_name(c.kind)) +
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

Result Client::inspect(const std::vector<std::string>& names, int64_t timeout_ms, InspectReply* out,
                       std::string* own_session) {
  if (!may_block()) {
    return {Code::kEWouldBlock,
            "simba_client_inspect_json would wait for itself here (callback or loop thread)"};
  }
  auto w = std::make_shared<Waiter>();
  auto reply = std::make_shared<InspectReply>();
  auto own = std::make_shared<std::string>();
  Result result;
  LoopLease lease(loop_, may_lend_loop());
  Result r = run_sync([&] {
    if (close_requested_ || node_->closed()) {
      result = {Code::kEClosed, "the client is closed"};
      return;
    }
    inspect_waiters_.insert(w);
    inspect_backend(names, ms(timeout_ms), [this, w, reply, own](const InspectReply& answer) {
      inspect_waiters_.erase(w);
      // The session may have opened while the read was on its way.
      *own = node_->view().session_id;
      *reply = answer;  // published to the caller by finish()'s lock
      w->finish(Code::kOk);
    });
  });
  if (r.code != Code::kOk) return r;
  if (result.code != Code::kOk) return result;
  // Answered by the timeout (inspect_backend); teardown finishes the waiter at close.
  if (loop_.wait(*w, SteadyTime::max(), &lease) != Code::kOk || w->code != Code::kOk) {
    return {Code::kEClosed, "the client closed before the backend answered"};
  }
  if (reply->outcome == Outcome::kTimeout) {
    return {Code::kETimedOut,
            "the backend did not answer within " + std::to_string(timeout_ms) + " ms"};
  }
  if (reply->outcome != Outcome::kOk) {
    return {Code::kEBackend, "the backend could not be read: " + reply->error};
  }
  *out = std::move(*reply);
  *own_session = std::move(*own);
  return Result::ok();
}

Result Client::inspect_json(const std::vector<std::string>& names, int64_t timeout_ms,
                            std::string* out) {
  auto reply = std::make_shared<InspectReply>();
  auto own = std::make_shared<std::string>();
  if (Result r = inspect(names, timeout_ms, reply.get(), own.get()); r.code != Code::kOk) return r;
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
  // A name's lease row first, then its permit entries by kind and id (ADR 0046).
  std::sort(reply->leases.begin(), reply->leases.end(), [](const LeaseInfo& a, const LeaseInfo& b) {
    return std::tie(a.name, a.kind, a.permit) < std::tie(b.name, b.kind, b.permit);
  });
  first = true;
  for (const LeaseInfo& li : reply->leases) {
    s += std::string(first ? "" : ",") + "{\"name\":" + json_quote(li.name) +
         ",\"token\":" + std::to_string(li.token) +
         ",\"holder\":" + (li.holder.empty() ? std::string("null") : json_quote(li.holder));
    if (li.kind != PermitKind::kLease) {
      s += ",\"kind\":" + json_quote(permit_kind_name(li.kind)) +
           ",\"permit\":" + std::to_string(li.permit);
    }
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
  if (close_requested_) return {Code::kEClosed, "the client is closed"};
  std::lock_guard<std::mutex> lock(event_mu_);
  event_sink_ = std::move(fn);
  return Result::ok();
}

Result Client::process() {
  if (!external()) return {Code::kEInval, "simba_client_process is for loop.mode=external clients"};
  // A close_async() pending is finished here, even when a blocking call's turn
  // tore the loop down.
  if (finished_ || (loop_.torn_down() && !close_done_)) {
    return {Code::kEClosed, "the client is closed"};
  }
  if (loop_.in_process()) {
    return {Code::kEWouldBlock, "simba_client_process called from its own callback"};
  }
  if (!loop_.torn_down()) loop_.process();
  if (close_done_ && loop_.torn_down()) {
    // close_async()'s close completed: finish it as close() does.
    std::lock_guard<std::mutex> guard(close_mu_);
    loop_.run_to_end();
    finish_close();
    return {Code::kEClosed, "the client is closed"};
  }
  return Result::ok();
}

// ---------------------------------------------------------------------------
// Elections

Result Client::start_election(const std::string& name, const Listener& listener, ElectionRef* out,
                              WorkFn work) {
  if ((listener.elected || listener.revoked) && !hooks_.listener_calls) {
    return {Code::kEInval, "a listener needs Hooks::listener_calls"};
  }
  ElectionRef e = Election::make(queue_executors_, name);
  e->listener = listener;
  if (work) {
    auto& w = e->rare().work = std::make_unique<Election::Work>();
    w->fn = std::move(work);
  }
  Result result;
  Result r = run_sync([&] {
    if (close_requested_ || node_->closed()) {
      result = {Code::kEClosed, "the client is closed"};
      return;
    }
    e->retain();  // the node's link, before the node may report anything about it
    if (!node_->add_election(*e, now(), e->work() != nullptr)) {
      e->release();
      result = {Code::kEState, "\"" + name + "\" is already started or locked on this client"};
    }
  });
  if (r.code != Code::kOk) return r;
  if (result.code == Code::kOk) *out = std::move(e);
  return result;
}

Result Client::stop_election(const ElectionRef& e, DoneFn done) {
  Result result;
  Result r = run_sync([&] {
    {
      std::lock_guard<std::mutex> lock(e->mu());
      if (e->stop_requested || e->stopped) {
        result = {Code::kEState,
                  "the election of \"" + e->name() + "\" is already stopping or stopped"};
        return;
      }
      e->stop_requested = true;
    }
    if (done) e->rare().stop_done = std::move(done);
    if (!node_->stop(*e, now())) {
      // The node no longer knows it: the client's close stopped it.
      if (Election::Rare* rare = e->rare_if_made()) rare->stop_done = nullptr;
      result = {Code::kEState,
                "the election of \"" + e->name() + "\" was stopped by the client's close"};
    }
  });
  if (r.code == Code::kEClosed) {
    // The client's close stopped every election: the handle stays valid.
    return {Code::kEState,
            "the election of \"" + e->name() + "\" was stopped by the client's close"};
  }
  return r.code != Code::kOk ? r : result;
}

Result Client::step_down(const ElectionRef& e, Duration cooldown, DoneFn done) {
  Result result;
  Result r = run_sync([&] {
    {
      std::lock_guard<std::mutex> lock(e->mu());
      if (e->stop_requested || e->stopped) {
        result = {Code::kEState, "the election of \"" + e->name() + "\" is stopping or stopped"};
        return;
      }
    }
    std::vector<DoneFn>& dones = e->rare().step_down_dones;
    dones.push_back(std::move(done));
    if (!node_->step_down(*e, cooldown, now())) {
      dones.pop_back();
      result = {Code::kEState, "the election of \"" + e->name() + "\" is stopped"};
    }
  });
  if (r.code == Code::kEClosed) {
    return {Code::kEState,
            "the election of \"" + e->name() + "\" was stopped by the client's close"};
  }
  return r.code != Code::kOk ? r : result;
}

Result Client::stop_election_wait(const ElectionRef& e, int64_t timeout_ms) {
  if (!may_block()) {
    return {Code::kEWouldBlock,
            "simba_election_stop_wait would wait for itself here (callback or loop thread)"};
  }
  auto w = std::make_shared<Waiter>();
  {
    std::lock_guard<std::mutex> lock(e->mu());
    if (e->stopped) return Result::ok();
    e->rare().stop_waiters.push_back(w);
  }
  Result r = stop_election(e, nullptr);
  if (r.code != Code::kOk && r.code != Code::kEState) return r;
  {
    // A stop by the client's close completes the election without a done.
    std::lock_guard<std::mutex> lock(e->mu());
    if (e->stopped) return Result::ok();
  }
  const Code rc = loop_.wait(*w, deadline_after(timeout_ms));
  if (rc != Code::kOk) {
    return {rc, rc == Code::kETimedOut ? "the stop did not complete within the timeout; it goes on"
                                       : "the client closed"};
  }
  return Result::ok();
}

void Client::detach_election(const ElectionRef& e) {
  e->detached = true;
  {
    std::lock_guard<std::mutex> lock(e->mu());
    if (e->stop_requested || e->stopped) return;
    e->stop_requested = true;
  }
  auto stop = [this, e] {
    if (!node_->closed()) node_->stop(*e, now());
  };
  if (on_loop_thread()) {
    stop();
    settle();
  } else {
    loop_.post(stop);
  }
}

bool Client::free_election(const ElectionRef& e) {
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
    e->queue().wait_until(
        [&e] {
          std::lock_guard<std::mutex> lock(e->mu());
          return e->stopped;
        },
        may_run_callbacks_here());
  }
  e->queue().wait_idle();
  return true;
}

void Client::close_election(const ElectionRef& e, LastFn last) {
  // The listener hears nothing from here on; the dones of a stop or step-down
  // asked for earlier still run, before `last` (they are callbacks of the handle).
  e->freeing_after_stop = true;
  e->detached = true;
  auto held = std::make_shared<LastFn>(std::move(last));
  auto close = [this, e, held] {
    Contender& c = *e;
    if (node_->find(c.id) != &c) {
      // The node reported it stopped: after that completion, which stopped()
      // handed to the queue in order (in_order), perhaps in a later loop turn.
      in_order(c.id, false, [e, held] { run_last(e->queue(), std::move(*held)); });
      return;
    }
    // Chained after the stop's done, inside stopped()'s completion on the queue:
    // after the stop completed and every callback queued before it.
    Election::Rare& rare = e->rare();
    rare.stop_done = [before = std::move(rare.stop_done), held](Code c) {
      if (before) before(c);
      (*held)();
    };
    bool start_stop = false;
    {
      std::lock_guard<std::mutex> lock(e->mu());
      start_stop = !e->stop_requested && !e->stopped;
      e->stop_requested = true;
    }
    // A node that is closing stops it on its own (and reports stopped()).
    if (start_stop && !node_->closed()) node_->stop(*e, now());
  };
  if (on_loop_thread()) {
    if (loop_.torn_down()) {
      run_last(e->queue(), std::move(*held));
    } else {
      close();
      settle();
    }
  } else if (!loop_.post(close)) {
    // Torn down: the node's close reported every election stopped.
    run_last(e->queue(), std::move(*held));
  }
}

// ---------------------------------------------------------------------------
// Locks

Result Client::lock_acquire(const LockAsk& ask, const std::string& name, int64_t timeout_ms,
                            bool try_once, Term** out) {
  if (!may_block()) {
    return {Code::kEWouldBlock,
            "a blocking lock call would wait for itself here (callback or loop)"};
  }
  // One hop to the loop and one wait for the answer: the registration does not
  // wait for itself (it finishes the waiter with its error if it fails).
  auto w = std::make_shared<Waiter>();
  auto queue = new_queue();
  auto enlist = [this, w, queue, ask, name, timeout_ms, try_once] {
    const Result r = add_lock(
        ask, name, timeout_ms, try_once, queue,
        [w](Code code, Term* t, const std::string& detail) { w->finish(code, detail, t); });
    if (r.code != Code::kOk) w->finish(r.code, r.detail);
  };
  LoopLease lease(loop_, may_lend_loop());
  if (on_loop_thread()) {
    if (loop_.torn_down()) return {Code::kEClosed, "the client is closed"};
    enlist();
    settle();
  } else if (!loop_.post(enlist)) {
    return {Code::kEClosed, "the client is closed"};
  }
  loop_.wait(*w, SteadyTime::max(), &lease);  // the node answers by the timeout
  if (w->code == Code::kECanceled)
    return {Code::kEClosed, "the client closed before the lock was acquired"};
  if (w->code != Code::kOk)
    return {w->code, w->detail.empty() ? lock_failure_text(w->code) : w->detail};
  *out = w->term;
  return Result::ok();
}

Result Client::lock_acquire_async(const LockAsk& ask, const std::string& name, int64_t timeout_ms,
                                  bool try_once, LockFn cb) {
  Result result;
  auto queue = new_queue();
  auto done = [queue, cb](Code code, Term* term, const std::string& detail) {
    if (!queue->post([cb, code, term, detail] { cb(code, term, detail); }) && term) {
      term->release();
    }
  };
  Result r = run_sync([&] { result = add_lock(ask, name, timeout_ms, try_once, queue, done); });
  return r.code != Code::kOk ? r : result;
}

Result Client::add_lock(const LockAsk& ask, const std::string& name, int64_t timeout_ms,
                        bool try_once, const QueueRef& queue, decltype(Lock::done) done) {
  if (ask.kind == ContenderKind::kSemaphore && ask.permits == 0) {
    return {Code::kEInval, "a semaphore has at least 1 permit"};
  }
  if (close_requested_ || node_->closed()) return {Code::kEClosed, "the client is closed"};
  const TimePoint t = now();
  TimePoint give_up = TimePoint::max();
  if (try_once) {
    give_up = t + node_->config().renew_interval();
  } else if (timeout_ms >= 0) {
    give_up = t + ms(timeout_ms);
  }
  // Freed by lock_failed() or stopped(), which may come before add_lock returns.
  auto lock = std::make_unique<Lock>(LeaseName(name), ask);
  lock->queue = queue;
  lock->done = std::move(done);
  if (node_->add_lock(*lock, give_up, try_once, t)) {
    lock.release();
  } else {
    return {Code::kEState, "an election of this client uses \"" + name + "\""};
  }
  return Result::ok();
}

void Client::lock_release(Term* term, bool wait_for_answer, LastFn then) {
  const ContenderId id = term->as_lock()->contender;
  const bool block = wait_for_answer && !then && may_wait_for_close();
  auto w = std::make_shared<Waiter>();
  // `then` runs once: from stopped() (after the answer), or here when the
  // lock is done already.
  auto then_held = then ? std::make_shared<LastFn>(std::move(then)) : nullptr;
  auto stop = [this, id, term, w, block, then_held] {
    Contender* c = node_->closed() ? nullptr : node_->find(id);
    // The lock may be done already (revoked, then released), its id reused.
    if (!c || c->kind == ContenderKind::kElection || c->term.get() != term) {
      w->finish(Code::kOk);
      // After its on_revoked callbacks, which may wait for a later loop turn.
      if (then_held) {
        in_order(id, false, [term, then_held] { run_last(*term->queue, std::move(*then_held)); });
      }
      return;
    }
    if (block) lock_of(*c).released = w;
    // Already stopping (or the node closing): stopped() comes all the same.
    if (then_held) lock_of(*c).release_then = std::move(*then_held);
    if (!node_->stop(*c, now())) w->finish(Code::kOk);
  };
  // Only a caller that waits for the answer borrows the loop to run it.
  std::optional<LoopLease> lease;
  if (block) lease.emplace(loop_, may_lend_loop());
  if (on_loop_thread()) {
    if (!loop_.torn_down()) {
      stop();
      settle();
      // EXTERNAL mode on the host thread outside process(), or a borrowed loop:
      // wait like any blocking call, running the loop until the release is
      // answered.
      if (block) loop_.wait(*w, SteadyTime::max(), lease ? &*lease : nullptr);
    } else if (then_held) {
      run_last(*term->queue, std::move(*then_held));
    }
  } else {
    if (!loop_.post(stop)) {
      // Torn down: the close revoked and released every lock.
      if (then_held) run_last(*term->queue, std::move(*then_held));
      return;
    }
    if (!block) return;
    loop_.wait(*w, SteadyTime::max());  // the node answers within one call timeout
  }
  // The term was revoked before the release was sent: its on_revoked
  // callbacks are queued or done. Return only once they all ran.
  if (block) term->queue->wait_drained(may_run_callbacks_here());
}

}  // namespace simba::engine
