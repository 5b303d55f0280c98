// The Redis backend's operations (open_session, keep_alive, acquire, release,
// acquire_permit, release_permit, write_run, close_session, inspect, shutdown), the call
// plumbing they share (start, send, the pipelined WAIT, timeouts, answers) and
// make_redis_backend. The class and its design notes: redis_backend_impl.h.
#include "backend/redis/redis_backend.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <uv.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/backend_parts.h"
#include "backend/redis/redis_backend_impl.h"
#include "backend/redis/redis_replies.h"
#include "backend/redis/redis_scripts.h"
#include "backend/redis/uv_hiredis.h"
#ifdef SIMBA_WITH_REDIS_TLS
#include "backend/redis/tls_pump.h"
#endif
#include "core/log_level.h"

namespace simba {
namespace redis_impl {
namespace {

// `s` with the characters SCAN's MATCH treats specially escaped.
std::string glob_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '*' || ch == '?' || ch == '[' || ch == ']' || ch == '\\') out.push_back('\\');
    out.push_back(ch);
  }
  return out;
}

}  // namespace

RedisBackend::RedisBackend(const BackendContext& ctx, RedisUrl url, std::shared_ptr<SSL_CTX> tls)
    : loop_(ctx.loop),
      log_(ctx.log),
      client_name_(ctx.client_name),
      url_(std::move(url)),
      keys_(url_.prefix),
      tls_(std::move(tls)),
      calls_(
          loop_, &handles_,
          {[this](Call* c) { abandoned(c); },
           [this](Call* c, Outcome o, const std::string& err) { complete(c, nullptr, o, err); }}) {
  where_ = url_.sentinel ? "master " + url_.master_name + " (Sentinel)"
                         : url_.host + ":" + std::to_string(url_.port);
  port_ = url_.port;
  // The passphrase served its purpose when the TLS context was made.
  std::fill(url_.tls_key_password.begin(), url_.tls_key_password.end(), '\0');
  url_.tls_key_password.clear();
  uv_timer_init(loop_, &sub_timer_);
  sub_timer_.data = this;
  uv_check_init(loop_, &flush_);
  flush_.data = this;
  uv_timer_init(loop_, &query_timer_);
  query_timer_.data = this;
  uv_timer_init(loop_, &sentinel_sub_timer_);
  sentinel_sub_timer_.data = this;
  handles_.opened(4);
}

Backend::CallRef RedisBackend::open_session(Duration lease, Duration timeout, OpenCb cb) {
  std::string sid;
  try {
    sid = random_session_id();
  } catch (const std::exception& e) {
    OpenReply r;
    r.error = std::string("no random source for a session id: ") + e.what();
    return fail_later(timeout, [cb, r] { cb(r); });
  }
  const std::string lease_ms = std::to_string(std::max<int64_t>(1, to_ms_ceil(lease)));
  return start({"EVALSHA", script(kOpen).sha, "1", session_key(sid), lease_ms,
                client_name_.empty() ? std::string("simba") : client_name_},
               timeout, kReplicated,
               [cb, sid](const redisReply* r, Outcome o, const std::string& err) {
                 OpenReply out;
                 if (failed(r, o, err, &out)) {
                   cb(out);
                   return;
                 }
                 cb(decode_open_reply(r, sid));
               });
}

Backend::CallRef RedisBackend::keep_alive(const std::string& session, Duration lease,
                                          Duration timeout, KeepAliveCb cb) {
  const std::string lease_ms = std::to_string(std::max<int64_t>(1, to_ms_ceil(lease)));
  return start({"EVALSHA", script(kKeepAlive).sha, "2", session_key(session), leases_key(session),
                lease_ms, url_.prefix, session},
               timeout, kReplicated,
               parser<KeepAliveReply>(std::move(cb), decode_keep_alive_reply));
}

Backend::CallRef RedisBackend::acquire(const std::string& session, const std::string& name,
                                       Duration timeout, AcquireCb cb) {
  return start({"EVALSHA", script(kAcquire).sha, "3", session_key(session), leases_key(session),
                lease_key(name), session, url_.prefix, name},
               timeout, kReplicated, parser<AcquireReply>(std::move(cb), decode_acquire_reply));
}

Backend::CallRef RedisBackend::release(const std::string& session, const std::string& name,
                                       uint64_t token, Duration timeout, DoneCb cb) {
  return start({"EVALSHA", script(kRelease).sha, "1", lease_key(name), session,
                std::to_string(token), name, released_channel(name)},
               timeout, done_parser(std::move(cb)));
}

// Replicated as an acquire is (wait_replicas): a start lost in a failover
// would let the next leader start the same period again. The times are the
// writer's, stored as given (display only, as memory://).
Backend::CallRef RedisBackend::write_run(const std::string& session, const std::string& name,
                                         uint64_t token, const RunRecord& record, Duration timeout,
                                         RunCb cb) {
  return start({"EVALSHA", script(kWriteRun).sha, "2", session_key(session), lease_key(name),
                session, std::to_string(token), std::to_string(record.period_id),
                std::to_string(record.started_ms), std::to_string(record.ended_ms),
                std::to_string(record.token), run_outcome_name(record.outcome)},
               timeout, kReplicated, parser<RunReply>(std::move(cb), decode_write_run_reply));
}

// Replicated as an acquire is: a grant (or an intent left) counts once WAIT
// says wait_replicas have it.
Backend::CallRef RedisBackend::acquire_permit(const std::string& session, const std::string& name,
                                              const PermitAsk& ask, Duration timeout,
                                              AcquireCb cb) {
  const bool semaphore = ask.kind == PermitKind::kSemaphore;
  if ((!semaphore && ask.kind != PermitKind::kRead && ask.kind != PermitKind::kWrite) ||
      (semaphore && ask.size == 0)) {
    const std::string why =
        semaphore ? "redis: a semaphore's size must be positive" : "redis: no such permit kind";
    return fail_later(timeout, [cb, why] {
      AcquireReply out;
      out.error = why;
      cb(out);
    });
  }
  return start({"EVALSHA", script(kAcquirePermit).sha, "3", session_key(session),
                leases_key(session), keys_.permits(semaphore, name), session, url_.prefix,
                permit_kind_name(ask.kind), std::to_string(ask.size), std::to_string(ask.intent),
                ask.leave_intent ? "1" : "0", permit_resource(ask.kind, name)},
               timeout, kReplicated,
               parser<AcquireReply>(std::move(cb), decode_acquire_permit_reply));
}

Backend::CallRef RedisBackend::release_permit(const std::string& session, const std::string& name,
                                              PermitKind kind, uint64_t permit, uint64_t token,
                                              Duration timeout, DoneCb cb) {
  return start(
      {"EVALSHA", script(kReleasePermit).sha, "1",
       keys_.permits(kind == PermitKind::kSemaphore, name), session, std::to_string(permit),
       permit_kind_name(kind), std::to_string(token), url_.prefix, permit_resource(kind, name)},
      timeout, done_parser(std::move(cb)));
}

Backend::CallRef RedisBackend::close_session(const std::string& session, Duration timeout,
                                             DoneCb cb) {
  return start({"EVALSHA", script(kClose).sha, "2", session_key(session), leases_key(session),
                session, url_.prefix},
               timeout, done_parser(std::move(cb)));
}

Backend::CallRef RedisBackend::inspect(const std::vector<std::string>& names, Duration timeout,
                                       InspectCb cb) {
  std::vector<std::string> argv = {"EVALSHA", script(kInspect).sha, "0", url_.prefix,
                                   glob_escape(url_.prefix)};
  argv.insert(argv.end(), names.begin(), names.end());
  return start(std::move(argv), timeout, parser<InspectReply>(std::move(cb), decode_inspect_reply));
}

void RedisBackend::shutdown(std::function<void()> done) {
  handles_.begin_shutdown(std::move(done));
  released_fn_ = nullptr;
  calls_.drop_all();  // pending calls are dropped without completion
  unsent_.clear();
  if (cmd_) drop_conn(&cmd_);
  if (sub_) drop_conn(&sub_);
  if (query_) drop_conn(&query_);
  if (sentinel_sub_) drop_conn(&sentinel_sub_);
#ifdef SIMBA_WITH_REDIS_TLS
  // Each pump's handles close on their own; handles_ counts them.
  std::set<TlsPump*> pumps;
  pumps.swap(pumps_);
  for (TlsPump* p : pumps) p->close();
#endif
  for (Resolve* r : resolves_) uv_cancel(reinterpret_cast<uv_req_t*>(&r->req));
  for (uv_handle_t* h :
       {reinterpret_cast<uv_handle_t*>(&sub_timer_), reinterpret_cast<uv_handle_t*>(&flush_),
        reinterpret_cast<uv_handle_t*>(&query_timer_),
        reinterpret_cast<uv_handle_t*>(&sentinel_sub_timer_)}) {
    uv_close(h, [](uv_handle_t* h) { static_cast<RedisBackend*>(h->data)->handles_.closed(); });
  }
}

RedisBackend::Done RedisBackend::done_parser(DoneCb cb) {
  return [cb](const redisReply* r, Outcome o, const std::string& err) {
    DoneReply out;
    if (!failed(r, o, err, &out)) out.outcome = Outcome::kOk;
    cb(out);
  };
}

RedisBackend::Call* RedisBackend::new_call(std::vector<std::string> argv, Duration timeout,
                                           Done done) {
  Call* c = calls_.start(timeout);
  c->argv = std::move(argv);
  c->done = std::move(done);
  return c;
}

Backend::CallRef RedisBackend::start(std::vector<std::string> argv, Duration timeout, Done done) {
  return start(std::move(argv), timeout, false, std::move(done));
}

Backend::CallRef RedisBackend::start(std::vector<std::string> argv, Duration timeout,
                                     bool replicated, Done done) {
  Call* c = new_call(std::move(argv), timeout, std::move(done));
  c->replicated = replicated && url_.wait_replicas > 0;
  ensure_sub();
  ensure_sentinel_sub();
  if (cmd_ && cmd_ready_) {
    send(c);
    return c->id;
  }
  if (cmd_ || resolving_ || discovering_) {
    unsent_.push_back(c->id);
    return c->id;
  }
  uv_update_time(loop_);
  if (failures_ > 0 && uv_now(loop_) < retry_at_) {
    calls_.preset(c, Outcome::kError,
                  "redis " + where_ + " unreachable (" + last_error_ + "); reconnecting in " +
                      std::to_string(retry_at_ - uv_now(loop_)) + " ms");
    return c->id;
  }
  unsent_.push_back(c->id);
  connect();
  return c->id;
}

void RedisBackend::send(Call* c) {
  c->gen = cmd_gen_;
  if (command(cmd_->ac, on_reply, reinterpret_cast<void*>(c->id), c->argv) != REDIS_OK) {
    c->gen = 0;
    calls_.preset(c, Outcome::kError, "redis " + where_ + ": cannot send the command");
    return;
  }
  if (c->replicated) {
    // Half the call's timeout by default: too few acknowledgements fail
    // the call before its caller abandons it, which drops the connection.
    const int64_t t =
        url_.wait_timeout_ms > 0 ? url_.wait_timeout_ms : std::max<int64_t>(1, c->timeout_ms / 2);
    wait_timeout_ms_ = wait_batch_.empty() ? t : std::min(wait_timeout_ms_, t);
    wait_batch_.push_back(c->id);
  }
  // Write at the end of this loop turn (PITFALLS.md): hiredis only buffers,
  // and waiting for the socket's writable event costs a turn and two
  // epoll_ctl calls per command. Not here and now: a write error makes
  // hiredis complete every call at once, which must not happen inside send().
  if (!uv_is_active(reinterpret_cast<uv_handle_t*>(&flush_))) {
    uv_check_start(&flush_, [](uv_check_t* h) {
      auto* self = static_cast<RedisBackend*>(h->data);
      uv_check_stop(h);
      UvHiredis* cmd = self->cmd_;
      if (!self->handles_.closing()) self->send_wait();
      if (!self->handles_.closing() && cmd && cmd->ac && (cmd->ac->c.flags & REDIS_CONNECTED)) {
        uv_hiredis_write(cmd->ac);
      }
    });
  }
}

// One WAIT behind the replicated writes of this loop turn: Redis blocks
// the connection on a WAIT, so one per write would make every later
// command on it wait for the replicas too; one WAIT counts for every write
// before it on the connection.
void RedisBackend::send_wait() {
  if (wait_batch_.empty()) return;
  auto* batch = new std::vector<uint64_t>();
  batch->swap(wait_batch_);
  if (!cmd_ || !cmd_->ac ||
      command(cmd_->ac, on_wait_reply, batch,
              {"WAIT", std::to_string(url_.wait_replicas), std::to_string(wait_timeout_ms_)}) !=
          REDIS_OK) {
    delete batch;  // (its calls went out on a connection that is gone: they fail)
  }
}

// Completes `c` exactly once (call_table.h).
void RedisBackend::complete(Call* c, const redisReply* r, Outcome o, const std::string& err) {
  Done done = std::move(c->done);
  calls_.finish(c);
  if (done && !handles_.closing()) done(r, o, err);
}

// Reads what the command connection's socket already holds and delivers it,
// as a readable event would; never blocks (a zero-timeout poll). libuv runs
// timers before it polls, so after a long loop turn a call can be abandoned
// (its caller's timer) while its answer waits in the socket: reading first
// tells an answer that is late from one that never came. hiredis reads at most 16 KiB at a time,
// hence the loop; it may complete calls, or drop the connection (every call
// on it then completes with kError), and the adapter outlives this turn.
void RedisBackend::read_now() {
  UvHiredis* a = cmd_;
  while (a && a->ac && (a->ac->c.flags & REDIS_CONNECTED)) {
    struct pollfd p = {a->ac->c.fd, POLLIN, 0};
    if (poll(&p, 1, 0) != 1) return;  // nothing waiting (or EINTR: the timeout stands)
    redisAsyncHandleRead(a->ac);      // also on POLLERR/POLLHUP: hiredis sees the error
  }
}

// The caller gave up on `c` (backend.h): it ends now, with its answer if the
// socket already holds one (read_now). Otherwise the connection it went out
// on is stuck: it is dropped, so that a late answer can never be delivered
// (`c` and the other calls on it complete with kError), and remade after a
// backoff.
void RedisBackend::abandoned(Call* c) {
  const uint64_t id = c->id;
  if (c->gen != 0 && c->gen == cmd_gen_ && cmd_) {
    read_now();
    if (!calls_.find(id)) return;
    const std::string why = "no answer within the call's timeout";
    if (failures_ == 0) log(kLogWarn, why);
    note_failure(why);
    drop_conn(&cmd_, "connection dropped: another call on it got " + why);
    if (!calls_.find(id)) return;
  } else if (c->gen == 0 && cmd_ && !cmd_ready_) {
    // A connection whose ROLE never answered is as stuck as one whose call
    // did not: drop it, so the next call asks the Sentinels again.
    note_failure("no answer to ROLE within the call's timeout");
    drop_conn(&cmd_);
  }
  // Never sent, or its connection is gone already.
  unsent_.erase(std::remove(unsent_.begin(), unsent_.end(), id), unsent_.end());
  if (Call* left = calls_.find(id)) {
    complete(left, nullptr, Outcome::kError,
             "redis " + where_ + ": no answer within the call's timeout");
  }
}

void RedisBackend::on_reply(redisAsyncContext* ac, void* reply, void* privdata) {
  auto* self = static_cast<RedisBackend*>(ac->data);
  if (self->handles_.closing()) return;
  Call* c = self->calls_.find(reinterpret_cast<uintptr_t>(privdata));
  if (!c) return;
  if (!reply) {
    self->complete(c, nullptr, Outcome::kError,
                   "redis " + self->where_ + ": " +
                       (!self->drop_reason_.empty() ? self->drop_reason_
                        : !self->tls_error_.empty() ? "connection lost (" + self->tls_error_ + ")"
                        : ac->errstr[0] ? std::string("connection lost (") + ac->errstr + ")"
                                        : std::string("connection lost")));
    return;
  }
  auto* r = static_cast<redisReply*>(reply);
  // The server lost our scripts (restart, failover, SCRIPT FLUSH): run this
  // one with EVAL, which also loads it again for the next EVALSHA.
  if (r->type == REDIS_REPLY_ERROR && reply_str(r).compare(0, 8, "NOSCRIPT") == 0 &&
      c->argv.size() >= 2 && c->argv[0] == "EVALSHA" && self->cmd_ && self->cmd_->ac == ac) {
    for (int i = 0; i < kScriptCount; ++i) {
      if (script(i).sha == c->argv[1]) {
        c->argv[0] = "EVAL";
        c->argv[1] = script(i).body;
        self->send(c);
        return;
      }
    }
  }
  if (c->replicated && r->type != REDIS_REPLY_ERROR) {
    c->held = copy_reply(r);  // it counts once WAIT answers (on_wait_reply)
    return;
  }
  self->complete(c, r, Outcome::kOk, "");
  // A demoted primary (a failover Simba did not hear of): ask the Sentinels.
  if (self->url_.sentinel && r->type == REDIS_REPLY_ERROR &&
      reply_str(r).compare(0, 8, "READONLY") == 0 && self->cmd_ && self->cmd_->ac == ac) {
    self->log(kLogWarn, "answers READONLY: no longer the primary; asking the Sentinels");
    self->drop_conn(&self->cmd_,
                    "connection dropped: the server answered READONLY (no longer "
                    "the primary)");
  }
}

// WAIT's answer for a batch of replicated writes: their held answers
// count if enough replicas have them, else the calls fail (a write the
// primary alone has may be lost in a failover; a lease it granted is
// released as an orphan, ADR 0005). A call with nothing held (a script
// resent after NOSCRIPT, in a later batch; or one that failed) is skipped.
void RedisBackend::on_wait_reply(redisAsyncContext* ac, void* reply, void* privdata) {
  auto* self = static_cast<RedisBackend*>(ac->data);
  std::unique_ptr<std::vector<uint64_t>> batch(static_cast<std::vector<uint64_t>*>(privdata));
  if (self->handles_.closing()) return;
  auto* r = static_cast<redisReply*>(reply);
  long long acks = -1;
  const bool ok = r && reply_int(r, &acks) && acks >= self->url_.wait_replicas;
  const std::string why =
      ok          ? std::string()
      : !r        ? (!self->drop_reason_.empty() ? "WAIT unanswered, " + self->drop_reason_
                                                 : "connection lost before WAIT answered")
      : acks >= 0 ? std::to_string(acks) + " of " + std::to_string(self->url_.wait_replicas) +
                        " replicas acknowledged the write in time (wait_replicas)"
                  : "WAIT failed: " + reply_str(r);
  for (uint64_t id : *batch) {
    Call* c = self->calls_.find(id);
    if (!c || !c->held) continue;
    ReplyCopy held = std::move(c->held);
    if (ok) {
      self->complete(c, held.get(), Outcome::kOk, "");
    } else {
      self->complete(c, nullptr, Outcome::kError, "redis " + self->where_ + ": " + why);
    }
    if (self->handles_.closing()) return;  // a callback shut the backend down
  }
}

// redisAsyncCommandArgv of `args`, binary-safe.
int RedisBackend::command(redisAsyncContext* ac, redisCallbackFn* fn, void* privdata,
                          const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return redisAsyncCommandArgv(ac, fn, privdata, static_cast<int>(argv.size()), argv.data(),
                               lens.data());
}

}  // namespace redis_impl

std::unique_ptr<Backend> make_redis_backend(const BackendContext& ctx, const RedisUrl& url,
                                            std::string* error) {
  std::shared_ptr<SSL_CTX> tls;
  if (url.tls) {
#ifdef SIMBA_WITH_REDIS_TLS
    tls = make_redis_tls_context(url, error);
    if (!tls) return nullptr;
#else
    *error = "rediss:// (TLS) is not built into this libsimba: it was built without OpenSSL";
    return nullptr;
#endif
  }
  return std::make_unique<redis_impl::RedisBackend>(ctx, url, std::move(tls));
}

}  // namespace simba
