// Leader work: each term of a task's election runs its work on a thread of its
// own; a stop or step-down waits for it (the handover order, ADR 0007).
#include <system_error>

#include "core/log_level.h"
#include "engine/client.h"
#include "engine/task.h"

namespace simba::engine {

namespace {

// A task of one election with work.
class ElectionTask final : public Task {
 public:
  ElectionTask(std::shared_ptr<Client> client, ElectionRef election)
      : client_(std::move(client)), election_(std::move(election)) {}
  Result stop(DoneFn done) override { return client_->stop_election(election_, std::move(done)); }
  Result step_down(Duration cooldown, DoneFn done) override {
    return client_->step_down(election_, cooldown, std::move(done));
  }
  void close_async(LastFn last) override {
    // After the stop completed, every run of the work returned: a run that
    // ignored the revocation may outlive the handover (its term's deadline).
    client_->close_election(election_, [client = client_, election = election_, last]() mutable {
      client->after_work(election, std::move(last));
    });
  }
  void close() override {
    // Elsewhere than in a callback, leader work or the loop the free waits for
    // the stop (the handover waits for the work up to the term's deadline) and
    // its callbacks; then every run of the work must have returned. Otherwise
    // it only starts the stop, which finishes on its own (the work's threads
    // keep what they use alive).
    if (client_->free_election(election_)) election_->wait_for_work();
  }

 private:
  const std::shared_ptr<Client> client_;
  const ElectionRef election_;
};

}  // namespace

Result start_leader_task(const std::shared_ptr<Client>& client, const std::string& name,
                         WorkFn work, std::shared_ptr<Task>* out) {
  ElectionRef election;
  Result r = client->start_election(name, Listener{}, &election, std::move(work));
  if (r.code == Code::kOk) *out = std::make_shared<ElectionTask>(client, std::move(election));
  return r;
}

WorkFn scheduled_work(Duration initial_delay, Duration period, WorkFn run) {
  const int64_t initial_ms = to_ms(initial_delay);
  const int64_t period_ms = to_ms(period);
  return [run = std::move(run), initial_ms, period_ms](Term* t) {
    if (t->wait_revoked(initial_ms)) return;
    for (;;) {
      if (!t->valid()) return;
      run(t);
      if (t->wait_revoked(period_ms)) return;
    }
  };
}

void WorkCount::begin() {
  std::lock_guard<std::mutex> lock(mu);
  ++running;
}

void WorkCount::end() {
  LastFn then;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (--running == 0) then.swap(idle_then);
  }
  cv.notify_all();
  if (then) then();
}

void Client::after_work(const ElectionRef& e, LastFn fn) {
  Election::Work* work = e->work();
  if (work) {
    std::lock_guard<std::mutex> lock(work->count.mu);
    if (work->count.running > 0) {
      // From the last run's thread, back onto the queue.
      work->count.idle_then = [e, fn = std::move(fn)]() mutable {
        run_last(e->queue(), std::move(fn));
      };
      return;
    }
  }
  fn();  // none runs: the caller is on e's queue already
}

void WorkCount::wait_idle() {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [this] { return running == 0; });
}

bool Mailbox::post(std::function<void(Client&)> fn) {
  std::lock_guard<std::mutex> lock(mu);
  if (!client) return false;
  Client* c = client;
  return c->loop_.post([c, fn = std::move(fn)] { fn(*c); });
}

void Client::start_work(const ElectionRef& el, Term* t, uint64_t token) {
  t->retain();                        // the work thread's reference
  Election::Work* work = el->work();  // a task's: lives as long as `el`
  work->count.begin();
  std::shared_ptr<Mailbox> mailbox = mailbox_;
  std::function<void(Term*)> hook;
  {
    std::lock_guard<std::mutex> lock(work_start_hook_mu_);
    hook = work_start_hook_;
  }
  auto done = [mailbox, el, token] {
    // Back on the loop: the node releases now if a handover waits for this.
    mailbox->post([el, token](Client& c) {
      c.node_->work_done(*el, token, c.now());
      c.settle();
    });
  };
  try {
    std::thread([el, work, t, done, hook] {
      if (hook) hook(t);
      {
        WorkScope scope;
        // The work starts on a valid term only: a stop (or the deadline) that
        // came between the election and this thread's start leaves nothing to
        // run, and the work counts as exited at once, so the handover goes on.
        if (!el->detached && t->valid()) work->fn(t);
      }
      done();
      t->release();
      work->count.end();
    }).detach();
  } catch (const std::system_error& e) {
    log(kLogError, "cannot start a thread for the work of " + el->name() + ": " + e.what());
    t->release();
    work->count.end();
    loop_.post([this, el, token] { node_->work_done(*el, token, now()); });
  }
}

void Client::set_work_start_hook(std::function<void(Term*)> hook) {
  std::lock_guard<std::mutex> lock(work_start_hook_mu_);
  work_start_hook_ = std::move(hook);
}

}  // namespace simba::engine
