// Leader work: each term of a task's election runs its work on a thread of its
// own; a stop or step-down waits for it (the handover order, ADR 0007).
#include <system_error>

#include "core/log_level.h"
#include "engine/client.h"

namespace simba::engine {

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
  return c->loop_.post([c, fn = std::move(fn)] { fn(*c); });
}

void Client::start_work(const std::shared_ptr<Election>& el, Term* t, uint64_t token) {
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
