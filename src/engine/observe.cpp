// Observers: following a name's holder without contending (simba_observe_start).
// Each observer is read on the loop thread with the backend's inspect call: at
// the start, every poll period, and at once after a release broadcast of its
// name (then twice more, shortly, to catch the contender that takes it over: no
// backend broadcasts acquires). A change of holder or token is delivered on the
// observer's queue, one call at a time, in order, like a listener's.
#include <algorithm>

#include "core/log_level.h"
#include "engine/client.h"

namespace simba::engine {

namespace {

// After a broadcast: re-reads this far apart, so that the take-over (the
// candidates' immediate attempt, one round trip) is seen without a full poll.
constexpr Duration kFollowUp = ms(25);
constexpr int kFollowUps = 2;

}  // namespace

Result Client::observe(const std::string& name, Duration poll, Observer::Fn fn,
                       std::shared_ptr<Observer>* out) {
  auto o = std::make_shared<Observer>();
  o->name = name;
  o->poll = poll > Duration::zero() ? poll : cfg_.renew_interval();
  o->fn = std::move(fn);
  o->queue = new_queue();
  Result result;
  Result r = run_sync([&] {
    if (close_requested_ || node_->closed()) {
      result = {Code::kEClosed, "the client is closed"};
      return;
    }
    o->next_read = now();
    observers_.push_back(o);
    add_watcher(o->name);  // its name's release broadcasts trigger a read
    read_observed(o);
  });
  if (r.code != Code::kOk) return r;
  if (result.code != Code::kOk) return result;
  *out = std::move(o);
  return Result::ok();
}

void Client::close_observer(const std::shared_ptr<Observer>& o, LastFn last) {
  free_observer(o, /*wait=*/false);
  // Its queue runs one delivery at a time: `last` follows the one running.
  run_last(*o->queue, std::move(last));
}

void Client::free_observer(const std::shared_ptr<Observer>& o, bool wait) {
  o->detached = true;  // from here on no callback of it starts
  auto remove = [this, o] {
    if (!o->removed) drop_watcher(o->name);
    o->removed = true;
    observers_.erase(std::remove(observers_.begin(), observers_.end(), o), observers_.end());
  };
  if (on_loop_thread()) {
    if (!loop_.torn_down()) remove();
  } else {
    loop_.post(remove);  // false once the client closed: the teardown dropped it
  }
  // A callback of it running on another thread finishes before the free returns;
  // from its own callback, the free cannot wait for itself.
  if (wait && may_wait_for_close()) o->queue->wait_idle();
}

void Client::read_observed(const std::shared_ptr<Observer>& o) {
  if (o->removed || o->reading || loop_.torn_down()) return;
  o->reading = true;
  o->reread = false;
  inspect_backend({o->name}, cfg_.renew_interval(), [this, o](const InspectReply& reply) {
    observed(o, reply);
    settle();
  });
}

void Client::observed(const std::shared_ptr<Observer>& o, const InspectReply& reply) {
  o->reading = false;
  if (o->removed) return;
  const TimePoint t = now();
  if (o->reread) {
    o->next_read = t;
  } else if (o->follow_ups > 0) {
    --o->follow_ups;
    o->next_read = t + kFollowUp;
  } else {
    o->next_read = t + o->poll;
  }
  if (reply.outcome != Outcome::kOk) {
    emit_log(kLogDebug, "observing " + o->name + ": the read failed (" +
                            (reply.error.empty() ? outcome_name(reply.outcome) : reply.error) +
                            "); the next poll reads again");
    if (o->reread) o->next_read = t + o->poll;  // no tight loop on a failing backend
    return;
  }
  std::string holder, holder_client;
  bool client_known = false;
  uint64_t token = 0;
  for (const LeaseInfo& li : reply.leases) {
    if (li.name != o->name) continue;
    holder = li.holder;
    token = li.token;
  }
  if (!holder.empty()) {
    for (const SessionInfo& si : reply.sessions) {
      if (si.id != holder) continue;
      holder_client = si.client_name;
      client_known = true;
    }
  }
  if (o->known && holder == o->holder && token == o->token) return;
  o->known = true;
  o->holder = holder;
  o->holder_client = holder_client;
  o->client_known = client_known;
  o->token = token;
  o->queue->post([o, holder, holder_client, client_known, token] {
    if (!o->detached) o->fn(o->name, holder, holder_client, client_known, token);
  });
}

void Client::poll_observers() {
  const TimePoint t = now();
  // A read may answer inline on memory://, which may free observers: a copy.
  const std::vector<std::shared_ptr<Observer>> due = observers_;
  for (const auto& o : due) {
    if (!o->reading && o->next_read <= t) read_observed(o);
  }
}

void Client::observed_release(const std::string& name) {
  for (const auto& o : observers_) {
    if (o->name != name) continue;
    o->follow_ups = kFollowUps;
    if (o->reading) {
      o->reread = true;
    } else {
      o->next_read = now();
    }
  }
  poll_observers();
}

std::optional<TimePoint> Client::next_observer_read() const {
  std::optional<TimePoint> next;
  for (const auto& o : observers_) {
    if (o->reading) continue;
    if (!next || o->next_read < *next) next = o->next_read;
  }
  return next;
}

}  // namespace simba::engine
