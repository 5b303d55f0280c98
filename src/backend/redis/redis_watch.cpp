// The Redis backend's release-broadcast subscriber: the second connection,
// SUBSCRIBEd to the released channels of the names this client watches
// (Backend::watch), and the released messages it hears.
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <uv.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend_parts.h"
#include "backend/redis/redis_backend_impl.h"
#include "backend/redis/redis_replies.h"
#include "backend/redis/uv_hiredis.h"
#include "core/log_level.h"

namespace simba::redis_impl {

void RedisBackend::ensure_sub() {
  if (handles_.closing() || sub_ || ip_.empty() ||
      uv_is_active(reinterpret_cast<uv_handle_t*>(&sub_timer_))) {
    return;
  }
  if (url_.sentinel && !cmd_ready_) return;  // not before ROLE confirmed the primary
  std::string why;
  UvHiredis* a = new_context(ip_, port_, Peer::kSubscriber, &why);
  if (!a) {
    log(kLogDebug, "subscriber: " + why);
    schedule_sub();
    return;
  }
  sub_ = a;
  a->on_gone = [this](UvHiredis* g) {
    if (sub_ == g) {
      sub_ = nullptr;
      if (!handles_.closing()) schedule_sub();
    }
  };
  redisAsyncSetConnectCallback(a->ac, [](const redisAsyncContext* ac, int status) {
    auto* self = static_cast<RedisBackend*>(ac->data);
    if (self->handles_.closing() || status != REDIS_OK) return;
    self->sub_failures_ = 0;
    self->log(kLogDebug, "subscriber connection up (release broadcasts of " +
                             std::to_string(self->watches_.size()) + " awaited names)");
  });
  // A new connection: every watch again, each confirmed (and rechecked) anew,
  // since a release during the outage was broadcast to nobody.
  std::vector<std::string> names;
  for (auto& [name, w] : watches_) {
    w.confirmed = false;
    names.push_back(name);
  }
  send_sub("SUBSCRIBE", names);
}

void RedisBackend::watch(const std::string& name) {
  ensure_sub();  // without a connection, the next one subscribes every watch
  if (watches_.try_emplace(name).second) send_sub("SUBSCRIBE", {name});
}

void RedisBackend::unwatch(const std::string& name) {
  if (watches_.erase(name) == 0) return;
  send_sub("UNSUBSCRIBE", {name});
}

// One (UN)SUBSCRIBE of the names' channels, on the subscriber connection if
// there is one (hiredis queues it while it connects); without one, the next
// connection subscribes every watch.
void RedisBackend::send_sub(const char* verb, const std::vector<std::string>& names) {
  if (names.empty() || handles_.closing() || !sub_ || !sub_->ac) return;
  std::vector<std::string> args{verb};
  for (const std::string& n : names) args.push_back(released_channel(n));
  command(sub_->ac, on_message, nullptr, args);
}

void RedisBackend::schedule_sub() {
  ++sub_failures_;
  const uint64_t backoff = reconnect_backoff_ms(sub_failures_ + 1);
  uv_timer_start(
      &sub_timer_, [](uv_timer_t* t) { static_cast<RedisBackend*>(t->data)->ensure_sub(); },
      backoff, 0);
}

void RedisBackend::on_message(redisAsyncContext* ac, void* reply, void*) {
  auto* self = static_cast<RedisBackend*>(ac->data);
  auto* r = static_cast<redisReply*>(reply);
  if (self->handles_.closing() || !r) return;
  const SubscriberEvent ev = decode_subscriber_message(r, self->keys_.released_head());
  if (ev.kind == SubscriberEvent::kReleased) {
    // An UNSUBSCRIBE may still be on its way: only watched names go up.
    if (!self->watches_.count(ev.name)) return;
    // The core copes with a broadcast that overtakes an acquire's answer.
    if (self->released_fn_) self->released_fn_(ev.name, Grant{});
  } else if (ev.kind == SubscriberEvent::kSubscribed) {
    // The acquire answered Held may have run before the subscription did,
    // and a release in between was broadcast to nobody: attempt once more,
    // now that any later release will be heard.
    auto it = self->watches_.find(ev.name);
    if (it == self->watches_.end() || it->second.confirmed) return;
    it->second.confirmed = true;
    if (self->released_fn_) self->released_fn_(ev.name, Grant{});
  }
}

}  // namespace simba::redis_impl
