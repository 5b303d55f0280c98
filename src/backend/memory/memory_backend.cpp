#include "backend/memory/memory_backend.h"

#include <uv.h>

#include <deque>
#include <map>
#include <mutex>

namespace simba {
namespace {

class MemoryBackend final : public Backend {
 public:
  MemoryBackend(uv_loop_t* loop, std::shared_ptr<MemoryStore> store, std::string client_name,
                std::shared_ptr<MemoryFaults> faults)
      : loop_(loop),
        store_(std::move(store)),
        client_name_(std::move(client_name)),
        faults_(std::move(faults)) {
    uv_timer_init(loop_, &timer_);
    timer_.data = this;
    uv_async_init(loop_, &released_async_,
                  [](uv_async_t* a) { static_cast<MemoryBackend*>(a->data)->drain_released(); });
    released_async_.data = this;
    sink_->async = &released_async_;
    // Only the names this client watches wake its loop (ADR 0040).
    subscription_ = store_->subscribe_grants(
        [sink = sink_](const std::string& name, const Grant& grant) {
          // Runs on whichever thread released: hand the name to our loop. The
          // sink outlives this backend, so a broadcast racing shutdown finds it
          // detached.
          std::lock_guard<std::mutex> lock(sink->mu);
          if (!sink->async) return;
          sink->names.emplace_back(name, grant);
          uv_async_send(sink->async);
        },
        false);
  }

  ~MemoryBackend() override = default;

  CallRef open_session(Duration lease, Duration timeout, OpenCb cb) override {
    return run([this, lease] { return store_->open_session(lease, client_name_); }, timeout,
               std::move(cb));
  }
  CallRef keep_alive(const std::string& session, Duration lease, Duration timeout,
                     KeepAliveCb cb) override {
    return run([this, session, lease] { return store_->keep_alive(session, lease); }, timeout,
               std::move(cb));
  }
  CallRef acquire(const std::string& session, const std::string& name, Duration timeout,
                  AcquireCb cb) override {
    return run([this, session, name] { return store_->acquire(session, name); }, timeout,
               std::move(cb));
  }
  CallRef acquire_candidate(const std::string& session, const std::string& name,
                            const CandidateAsk& ask, Duration timeout, AcquireCb cb) override {
    return run([this, session, name, ask] { return store_->acquire(session, name, ask); }, timeout,
               std::move(cb));
  }
  CallRef release(const std::string& session, const std::string& name, uint64_t token,
                  Duration timeout, DoneCb cb) override {
    return run([this, session, name, token] { return store_->release(session, name, token); },
               timeout, std::move(cb));
  }
  CallRef release_handoff(const std::string& session, const std::string& name, uint64_t token,
                          const std::string& target, Duration timeout, ReleaseCb cb) override {
    return run([this, session, name, token,
                target] { return store_->release_handoff(session, name, token, target); },
               timeout, std::move(cb));
  }
  CallRef acquire_permit(const std::string& session, const std::string& name, const PermitAsk& ask,
                         Duration timeout, AcquireCb cb) override {
    return run([this, session, name, ask] { return store_->acquire_permit(session, name, ask); },
               timeout, std::move(cb));
  }
  CallRef release_permit(const std::string& session, const std::string& name, PermitKind kind,
                         uint64_t permit, uint64_t token, Duration timeout, DoneCb cb) override {
    return run([this, session, name, kind, permit,
                token] { return store_->release_permit(session, name, kind, permit, token); },
               timeout, std::move(cb));
  }
  CallRef write_run(const std::string& session, const std::string& name, uint64_t token,
                    const RunRecord& record, Duration timeout, RunCb cb) override {
    return run([this, session, name, token,
                record] { return store_->write_run(session, name, token, record); },
               timeout, std::move(cb));
  }
  CallRef close_session(const std::string& session, Duration timeout, DoneCb cb) override {
    return run([this, session] { return store_->close_session(session); }, timeout, std::move(cb));
  }
  CallRef inspect(const std::vector<std::string>& names, Duration timeout, InspectCb cb) override {
    return run([this, names] { return store_->inspect(names); }, timeout, std::move(cb));
  }
  // A call the faults hold (hang, drop_replies) ends now; an answer on its
  // way (reply_delay) still comes at its time, late.
  void abandon(CallRef call) override {
    auto it = stuck_.find(call);
    if (it == stuck_.end()) return;
    std::function<void()> fn = std::move(it->second);
    stuck_.erase(it);
    schedule(Duration::zero(), std::move(fn));
  }
  void on_released(ReleasedFn fn) override { released_fn_ = std::move(fn); }
  void watch(const std::string& name) override {
    // Free already: its release may have come after the caller's Held answer
    // and before this watch, heard by nobody. Say so, on a later loop turn.
    if (store_->watch(subscription_, name)) {
      schedule(Duration::zero(), [this, name] {
        if (released_fn_) released_fn_(name, Grant{});
      });
    }
  }
  void unwatch(const std::string& name) override { store_->unwatch(subscription_, name); }

  void shutdown(std::function<void()> done) override {
    store_->unsubscribe(subscription_);
    {
      std::lock_guard<std::mutex> lock(sink_->mu);
      sink_->async = nullptr;
    }
    pending_.clear();
    stuck_.clear();
    released_fn_ = nullptr;
    shutdown_done_ = std::move(done);
    closing_ = 2;
    auto on_close = [](uv_handle_t* h) {
      auto* self = static_cast<MemoryBackend*>(h->data);
      if (--self->closing_ == 0) {
        auto done = std::move(self->shutdown_done_);
        done();  // may delete this
      }
    };
    uv_close(reinterpret_cast<uv_handle_t*>(&timer_), on_close);
    uv_close(reinterpret_cast<uv_handle_t*>(&released_async_), on_close);
  }

 private:
  // Applies `op` now (unless the faults say otherwise) and schedules its answer.
  // A call the faults hold never answers: abandon() ends it with kError.
  template <typename Op, typename Cb>
  CallRef run(Op op, Duration, Cb cb) {
    using Reply = decltype(op());
    const CallRef call = ++next_call_;
    faults_->loop_runner = std::this_thread::get_id();
    if (faults_->hang.load()) {
      Reply r;
      r.outcome = Outcome::kError;
      r.error = "memory backend: call hung (fault)";
      stuck_.emplace(call, [cb = std::move(cb), r] { cb(r); });
      return call;
    }
    if (faults_->unreachable.load()) {
      Reply r;
      r.outcome = Outcome::kError;
      r.error = "memory backend: unreachable (fault)";
      schedule(Duration::zero(), [cb = std::move(cb), r] { cb(r); });
      return call;
    }
    Reply r = op();
    if (faults_->drop_replies.load()) {
      Reply lost;
      lost.outcome = Outcome::kError;
      lost.error = "memory backend: answer lost (fault)";
      stuck_.emplace(call, [cb = std::move(cb), lost] { cb(lost); });
      return call;
    }
    schedule(Duration(faults_->reply_delay_ns.load()),
             [cb = std::move(cb), r = std::move(r)] { cb(r); });
    return call;
  }

  void schedule(Duration delay, std::function<void()> fn) {
    uv_update_time(loop_);
    const uint64_t due = uv_now(loop_) + static_cast<uint64_t>(to_ms_ceil(delay));
    pending_.emplace(std::make_pair(due, seq_++), std::move(fn));
    arm();
  }

  void arm() {
    if (closing_ || pending_.empty()) return;
    const uint64_t due = pending_.begin()->first.first;
    const uint64_t now = uv_now(loop_);
    uv_timer_start(
        &timer_, [](uv_timer_t* t) { static_cast<MemoryBackend*>(t->data)->fire(); },
        due > now ? due - now : 0, 0);
  }

  void fire() {
    const uint64_t now = uv_now(loop_);
    while (!closing_ && !pending_.empty() && pending_.begin()->first.first <= now) {
      auto fn = std::move(pending_.begin()->second);
      pending_.erase(pending_.begin());
      faults_->loop_runner = std::this_thread::get_id();
      fn();
    }
    arm();
  }

  void drain_released() {
    std::deque<std::pair<std::string, Grant>> names;
    {
      std::lock_guard<std::mutex> lock(sink_->mu);
      names.swap(sink_->names);
    }
    for (const auto& [n, grant] : names) {
      if (closing_ || !released_fn_) return;
      released_fn_(n, grant);
    }
  }

  uv_loop_t* loop_;
  std::shared_ptr<MemoryStore> store_;
  const std::string client_name_;
  std::shared_ptr<MemoryFaults> faults_;
  uv_timer_t timer_;
  uv_async_t released_async_;
  uint64_t subscription_ = 0;
  struct ReleaseSink {
    std::mutex mu;
    uv_async_t* async = nullptr;
    std::deque<std::pair<std::string, Grant>> names;  // with each release's grant
  };
  std::shared_ptr<ReleaseSink> sink_ = std::make_shared<ReleaseSink>();
  ReleasedFn released_fn_;
  // Answers in order of due time (loop ms), then of sending.
  std::map<std::pair<uint64_t, uint64_t>, std::function<void()>> pending_;
  uint64_t seq_ = 0;
  // Calls the faults hold, until abandoned.
  std::map<CallRef, std::function<void()>> stuck_;
  CallRef next_call_ = 0;
  int closing_ = 0;
  std::function<void()> shutdown_done_;
};

}  // namespace

std::unique_ptr<Backend> make_memory_backend(uv_loop_t* loop, const std::string& store_name,
                                             const std::string& client_name,
                                             std::shared_ptr<MemoryFaults> faults) {
  return std::make_unique<MemoryBackend>(loop, MemoryStore::named(store_name), client_name,
                                         std::move(faults));
}

}  // namespace simba
