// The Redis backend: hiredis 0.14 async on the client's libuv loop, through our
// own adapter (uv_hiredis.h). Every operation is one EVALSHA of a short Lua
// script, so one round trip (the scripts are loaded with SCRIPT LOAD when a
// connection opens; a NOSCRIPT answer is retried once with EVAL).
//
// Data model ({p} = the URL's prefix, default "simba"):
//   {p}:session:{sid}          string, PEXPIRE lease; sid = 128 random bits in hex
//   {p}:session:{sid}:leases   set of the lease names the session won, same expiry
//                              (a released name stays until the next keep-alive)
//   {p}:lease:{name}           hash {session, token}; never deleted, so the token
//                              counts up across terms (+1 per term)
//   {p}:released:{name}        the channel a release or a close publishes on; a
//                              second connection SUBSCRIBEs to it while this
//                              client is a candidate for the name
// Remaining times are PTTLs, measured by Redis.
//
// redis+sentinel:// (ADR 0025): the primary is the address the Sentinels name
// (SENTINEL get-master-addr-by-name, one Sentinel after another), checked with
// ROLE before any call goes out on it; a third connection, to one Sentinel,
// hears +switch-master and drops the command connection at once, so the next
// call asks again. With wait_replicas=N, an open, keep-alive or acquire counts
// only once WAIT says N replicas have it: one WAIT is pipelined behind each
// loop turn's writes, so it adds the replicas' acknowledgement, not a round
// trip, and a burst of writes waits once (Redis blocks the connection on WAIT).
//
// Connections: one command connection, made on demand and remade after a drop
// (with backoff after failures), and one subscriber connection. Host names are
// resolved with uv_getaddrinfo (hiredis' own lookup blocks). A call that gets no
// answer within its timeout completes with kTimeout and the command connection is
// torn down, so its late answer can never be delivered; the other calls pending
// on it complete with kError, each exactly once. A timer that fires while the
// answer already waits in the socket (after a long loop turn) is not a
// timeout: the answer is read first.
#include "backend/redis/redis_backend.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <uv.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/call_table.h"
#include "backend/redis/redis_replies.h"
#include "backend/redis/redis_scripts.h"
#include "backend/redis/uv_hiredis.h"
#ifdef SIMBA_WITH_REDIS_TLS
#include "backend/redis/tls_pump.h"
#endif
#include "core/log_level.h"

namespace simba {
namespace {

// TCP keep-alives, so that a connection whose peer vanished (a host or network
// gone, no reset) dies in about 11 s: the command connection's calls time out
// anyway, but the subscriber sends nothing, and would otherwise miss every
// release broadcast until the system default (2 hours) noticed.
void enable_keepalive(int fd) {
  const int on = 1, idle = 5, interval = 2, count = 3;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

// `s` with the characters SCAN's MATCH treats specially escaped.
std::string glob_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '*' || ch == '?' || ch == '[' || ch == ']' || ch == '\\') out.push_back('\\');
    out.push_back(ch);
  }
  return out;
}

std::string random_session_id() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device device;
  std::string id;
  id.reserve(32);
  for (int word = 0; word < 4; ++word) {
    const uint32_t bits = static_cast<uint32_t>(device());
    for (int shift = 28; shift >= 0; shift -= 4) id.push_back(kHex[(bits >> shift) & 0xfu]);
  }
  return id;
}

bool is_ip_literal(const std::string& host) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

class RedisBackend final : public Backend {
 public:
  RedisBackend(const BackendContext& ctx, RedisUrl url, std::shared_ptr<SSL_CTX> tls)
      : loop_(ctx.loop),
        log_(ctx.log),
        client_name_(ctx.client_name),
        url_(std::move(url)),
        tls_(std::move(tls)),
        calls_(
            loop_, &handles_,
            {[this](Call* c) { timed_out(c); },
             [this](Call* c, Outcome o, const std::string& err) { complete(c, nullptr, o, err); },
             [this] { handle_closed(); }}) {
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
    handles_ = 4;
  }

  ~RedisBackend() override = default;

  void open_session(Duration lease, Duration timeout, OpenCb cb) override {
    std::string sid;
    try {
      sid = random_session_id();
    } catch (const std::exception& e) {
      OpenReply r;
      r.error = std::string("no random source for a session id: ") + e.what();
      fail_later(timeout, [cb, r] { cb(r); });
      return;
    }
    const std::string lease_ms = std::to_string(std::max<int64_t>(1, to_ms_ceil(lease)));
    start({"EVALSHA", script(kOpen).sha, "1", session_key(sid), lease_ms,
           client_name_.empty() ? std::string("simba") : client_name_},
          timeout, kReplicated, [cb, sid](const redisReply* r, Outcome o, const std::string& err) {
            OpenReply out;
            if (failed(r, o, err, &out)) {
              cb(out);
              return;
            }
            cb(decode_open_reply(r, sid));
          });
  }

  void keep_alive(const std::string& session, Duration lease, Duration timeout,
                  KeepAliveCb cb) override {
    sweep_watches(timeout);
    const std::string lease_ms = std::to_string(std::max<int64_t>(1, to_ms_ceil(lease)));
    start({"EVALSHA", script(kKeepAlive).sha, "2", session_key(session), leases_key(session),
           lease_ms, url_.prefix, session},
          timeout, kReplicated, [cb](const redisReply* r, Outcome o, const std::string& err) {
            KeepAliveReply out;
            if (failed(r, o, err, &out)) {
              cb(out);
              return;
            }
            cb(decode_keep_alive_reply(r));
          });
  }

  void acquire(const std::string& session, const std::string& name, Duration timeout,
               AcquireCb cb) override {
    start({"EVALSHA", script(kAcquire).sha, "3", session_key(session), leases_key(session),
           lease_key(name), session, url_.prefix, name},
          timeout, kReplicated,
          [this, name, cb](const redisReply* r, Outcome o, const std::string& err) {
            AcquireReply out;
            if (failed(r, o, err, &out)) {
              cb(out);
              return;
            }
            out = decode_acquire_reply(r);
            if (out.outcome == Outcome::kHeld) watch(name);
            cb(out);
          });
  }

  void release(const std::string& session, const std::string& name, uint64_t token,
               Duration timeout, DoneCb cb) override {
    start({"EVALSHA", script(kRelease).sha, "1", lease_key(name), session, std::to_string(token),
           name, released_channel(name)},
          timeout, done_parser(std::move(cb)));
  }

  void close_session(const std::string& session, Duration timeout, DoneCb cb) override {
    start({"EVALSHA", script(kClose).sha, "2", session_key(session), leases_key(session), session,
           url_.prefix},
          timeout, done_parser(std::move(cb)));
  }

  void inspect(const std::vector<std::string>& names, Duration timeout, InspectCb cb) override {
    std::vector<std::string> argv = {"EVALSHA", script(kInspect).sha, "0", url_.prefix,
                                     glob_escape(url_.prefix)};
    argv.insert(argv.end(), names.begin(), names.end());
    start(std::move(argv), timeout, [cb](const redisReply* r, Outcome o, const std::string& err) {
      InspectReply out;
      if (failed(r, o, err, &out)) {
        cb(out);
        return;
      }
      cb(decode_inspect_reply(r));
    });
  }

  void on_released(ReleasedFn fn) override { released_fn_ = std::move(fn); }

  void shutdown(std::function<void()> done) override {
    closing_ = true;
    shutdown_done_ = std::move(done);
    released_fn_ = nullptr;
    calls_.drop_all();  // pending calls are dropped without completion
    unsent_.clear();
    if (cmd_) drop_conn(&cmd_);
    if (sub_) drop_conn(&sub_);
    if (query_) drop_conn(&query_);
    if (sentinel_sub_) drop_conn(&sentinel_sub_);
#ifdef SIMBA_WITH_REDIS_TLS
    // Each pump's handles close on their own; handle_closed counts them.
    std::set<TlsPump*> pumps;
    pumps.swap(pumps_);
    for (TlsPump* p : pumps) p->close();
#endif
    for (Resolve* r : resolves_) uv_cancel(reinterpret_cast<uv_req_t*>(&r->req));
    for (uv_handle_t* h :
         {reinterpret_cast<uv_handle_t*>(&sub_timer_), reinterpret_cast<uv_handle_t*>(&flush_),
          reinterpret_cast<uv_handle_t*>(&query_timer_),
          reinterpret_cast<uv_handle_t*>(&sentinel_sub_timer_)}) {
      uv_close(h, [](uv_handle_t* h) { static_cast<RedisBackend*>(h->data)->handle_closed(); });
    }
  }

 private:
  using Done = std::function<void(const redisReply*, Outcome, const std::string&)>;

  struct Call : CallBase {
    uint64_t gen = 0;  // the command connection it was sent on (0: not sent)
    std::vector<std::string> argv;
    Done done;
    bool replicated = false;  // waits for wait_replicas acknowledgements
    ReplyCopy held;           // the script's answer, held until WAIT answers
  };
  static constexpr bool kReplicated = true;

  // The part every answer shares: no reply (timeout, dropped connection) or an
  // error reply. Returns true when it filled `out` with that failure.
  template <typename Reply>
  static bool failed(const redisReply* r, Outcome o, const std::string& err, Reply* out) {
    if (!r) {
      out->outcome = o;
      out->error = err;
      return true;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      out->error = reply_str(r);
      return true;
    }
    return false;
  }

  static Done done_parser(DoneCb cb) {
    return [cb](const redisReply* r, Outcome o, const std::string& err) {
      DoneReply out;
      if (!failed(r, o, err, &out)) out.outcome = Outcome::kOk;
      cb(out);
    };
  }

  std::string session_key(const std::string& sid) const { return url_.prefix + ":session:" + sid; }
  std::string leases_key(const std::string& sid) const { return session_key(sid) + ":leases"; }
  std::string lease_key(const std::string& name) const { return url_.prefix + ":lease:" + name; }
  std::string released_channel(const std::string& name) const {
    return url_.prefix + ":released:" + name;
  }

  void log(int level, const std::string& line) {
    if (log_) log_(level, "redis " + where_ + ": " + line);
  }

  // An answer that is known before any I/O: delivered on a later loop turn.
  template <typename Fn>
  void fail_later(Duration timeout, Fn fn) {
    Call* c = new_call({}, timeout, [fn](const redisReply*, Outcome, const std::string&) { fn(); });
    calls_.preset(c, Outcome::kError, "");
  }

  Call* new_call(std::vector<std::string> argv, Duration timeout, Done done) {
    Call* c = calls_.start(timeout);
    c->argv = std::move(argv);
    c->done = std::move(done);
    return c;
  }

  Call* start(std::vector<std::string> argv, Duration timeout, Done done) {
    return start(std::move(argv), timeout, false, std::move(done));
  }

  Call* start(std::vector<std::string> argv, Duration timeout, bool replicated, Done done) {
    Call* c = new_call(std::move(argv), timeout, std::move(done));
    c->replicated = replicated && url_.wait_replicas > 0;
    ensure_sub();
    ensure_sentinel_sub();
    if (cmd_ && cmd_ready_) {
      send(c);
      return c;
    }
    if (cmd_ || resolving_ || discovering_) {
      unsent_.push_back(c->id);
      return c;
    }
    uv_update_time(loop_);
    if (failures_ > 0 && uv_now(loop_) < retry_at_) {
      calls_.preset(c, Outcome::kError,
                    "redis " + where_ + " unreachable (" + last_error_ + "); reconnecting in " +
                        std::to_string(retry_at_ - uv_now(loop_)) + " ms");
      return c;
    }
    unsent_.push_back(c->id);
    connect();
    return c;
  }

  void send(Call* c) {
    c->gen = cmd_gen_;
    if (command(cmd_->ac, on_reply, reinterpret_cast<void*>(c->id), c->argv) != REDIS_OK) {
      c->gen = 0;
      calls_.preset(c, Outcome::kError, "redis " + where_ + ": cannot send the command");
      return;
    }
    if (c->replicated) {
      // Half the call's timeout by default: too few acknowledgements fail
      // the call before its timer would drop the connection.
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
        if (!self->closing_) self->send_wait();
        if (!self->closing_ && cmd && cmd->ac && (cmd->ac->c.flags & REDIS_CONNECTED)) {
          uv_hiredis_write(cmd->ac);
        }
      });
    }
  }

  // One WAIT behind the replicated writes of this loop turn: Redis blocks
  // the connection on a WAIT, so one per write would make every later
  // command on it wait for the replicas too; one WAIT counts for every write
  // before it on the connection.
  void send_wait() {
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
  void complete(Call* c, const redisReply* r, Outcome o, const std::string& err) {
    Done done = std::move(c->done);
    calls_.finish(c);
    if (done && !closing_) done(r, o, err);
  }

  // Reads what the command connection's socket already holds and delivers it,
  // as a readable event would; never blocks (a zero-timeout poll). libuv runs
  // timers before it polls, so after a long loop turn a call's timer can fire
  // while its answer waits in the socket: reading first tells an answer that
  // is late from one that never came. hiredis reads at most 16 KiB at a time,
  // hence the loop; it may complete calls, or drop the connection (every call
  // on it then completes with kError), and the adapter outlives this turn.
  void read_now() {
    UvHiredis* a = cmd_;
    while (a && a->ac && (a->ac->c.flags & REDIS_CONNECTED)) {
      struct pollfd p = {a->ac->c.fd, POLLIN, 0};
      if (poll(&p, 1, 0) != 1) return;  // nothing waiting (or EINTR: the timeout stands)
      redisAsyncHandleRead(a->ac);      // also on POLLERR/POLLHUP: hiredis sees the error
    }
  }

  // A call's timer fired with no answer yet.
  void timed_out(Call* c) {
    if (c->gen != 0 && c->gen == cmd_gen_ && cmd_) {
      // Its answer may be in the socket already (read_now): if so it
      // completes the call now, and the connection is not stuck.
      const uint64_t id = c->id;
      read_now();
      if (!calls_.find(id)) return;
    }
    // Forgotten first, so that dropping its connection below (whose calls
    // complete with kError) does not complete it too.
    Done done = std::move(c->done);
    calls_.finish(c);
    if (c->gen == 0 && cmd_ && !cmd_ready_) {
      // A connection whose ROLE never answered is as stuck as one whose call
      // did not: drop it, so the next call asks the Sentinels again.
      note_failure("no answer to ROLE within the call's timeout");
      drop_conn(&cmd_);
    }
    // No answer in time: drop the connection it went out on, so that a late
    // answer can never be delivered (the other calls on it complete with
    // kError), and reconnect after a backoff.
    if (c->gen != 0 && c->gen == cmd_gen_ && cmd_) {
      const std::string why = "no answer within the call's timeout";
      if (failures_ == 0) log(kLogWarn, why);
      note_failure(why);
      drop_conn(&cmd_);
    }
    if (done && !closing_)
      done(nullptr, Outcome::kTimeout, "redis " + where_ + ": no answer in time");
  }

  static void on_reply(redisAsyncContext* ac, void* reply, void* privdata) {
    auto* self = static_cast<RedisBackend*>(ac->data);
    if (self->closing_) return;
    Call* c = self->calls_.find(reinterpret_cast<uintptr_t>(privdata));
    if (!c) return;
    if (!reply) {
      self->complete(c, nullptr, Outcome::kError,
                     "redis " + self->where_ + ": connection lost" +
                         (!self->tls_error_.empty() ? " (" + self->tls_error_ + ")"
                          : ac->errstr[0]           ? std::string(" (") + ac->errstr + ")"
                                                    : std::string()));
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
      self->drop_conn(&self->cmd_);
    }
  }

  // WAIT's answer for a batch of replicated writes: their held answers
  // count if enough replicas have them, else the calls fail (a write the
  // primary alone has may be lost in a failover; a lease it granted is
  // released as an orphan, ADR 0005). A call with nothing held (a script
  // resent after NOSCRIPT, in a later batch; or one that failed) is skipped.
  static void on_wait_reply(redisAsyncContext* ac, void* reply, void* privdata) {
    auto* self = static_cast<RedisBackend*>(ac->data);
    std::unique_ptr<std::vector<uint64_t>> batch(static_cast<std::vector<uint64_t>*>(privdata));
    if (self->closing_) return;
    auto* r = static_cast<redisReply*>(reply);
    long long acks = -1;
    const bool ok = r && reply_int(r, &acks) && acks >= self->url_.wait_replicas;
    const std::string why =
        ok          ? std::string()
        : !r        ? "connection lost before WAIT answered"
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
      if (self->closing_) return;  // a callback shut the backend down
    }
  }

  void note_failure(const std::string& why) {
    last_error_ = why;
    ++failures_;
    const uint64_t backoff = std::min<uint64_t>(2000, 50ull << std::min(failures_ - 1, 6));
    uv_update_time(loop_);
    retry_at_ = uv_now(loop_) + backoff;
  }

  // Tears a connection down now (its pending callbacks run with NULL).
  void drop_conn(UvHiredis** slot) {
    UvHiredis* a = *slot;
    *slot = nullptr;
    if (a && a->ac) redisAsyncFree(a->ac);
  }

  void handle_closed() {
    if (--handles_ == 0 && closing_ && shutdown_done_) {
      auto done = std::move(shutdown_done_);
      done();
    }
  }

  // --- connecting ----------------------------------------------------------

  void connect() {
    if (url_.sentinel) {
      discover();
      return;
    }
    resolving_ = true;
    resolve(url_.host, [this](const std::string& ip, const std::string& why) {
      resolving_ = false;
      if (ip.empty()) {
        connect_failed(why);
      } else {
        connect_ip(ip, url_.port);
      }
    });
  }

  // Looks `host` up without blocking (hiredis' own lookup would) and calls
  // then(ip, "") or then("", why); an IP literal at once. Not after shutdown.
  using Resolved = std::function<void(const std::string& ip, const std::string& why)>;
  struct Resolve {
    uv_getaddrinfo_t req;
    RedisBackend* self;
    std::string host;
    Resolved then;
  };

  void resolve(const std::string& host, Resolved then) {
    if (is_ip_literal(host)) {
      then(host, "");
      return;
    }
    auto* r = new Resolve{{}, this, host, std::move(then)};
    r->req.data = r;
    struct addrinfo hints = {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    const int rc = uv_getaddrinfo(loop_, &r->req, on_resolved, host.c_str(), nullptr, &hints);
    if (rc != 0) {
      Resolved fail = std::move(r->then);
      delete r;
      fail("", "cannot resolve " + host + ": " + uv_strerror(rc));
      return;
    }
    resolves_.insert(r);
    ++handles_;
  }

  static void on_resolved(uv_getaddrinfo_t* req, int status, struct addrinfo* res) {
    auto* r = static_cast<Resolve*>(req->data);
    RedisBackend* self = r->self;
    self->resolves_.erase(r);
    // Every address of the name; a failed connect moves on to the next one.
    std::vector<std::string> addrs;
    for (struct addrinfo* ai = status == 0 ? res : nullptr; ai; ai = ai->ai_next) {
      char buf[INET6_ADDRSTRLEN] = {0};
      if (ai->ai_family == AF_INET) {
        uv_ip4_name(reinterpret_cast<const struct sockaddr_in*>(ai->ai_addr), buf, sizeof buf);
      } else if (ai->ai_family == AF_INET6) {
        uv_ip6_name(reinterpret_cast<const struct sockaddr_in6*>(ai->ai_addr), buf, sizeof buf);
      }
      const std::string a = buf;
      if (!a.empty() && std::find(addrs.begin(), addrs.end(), a) == addrs.end()) addrs.push_back(a);
    }
    std::string ip;
    if (!addrs.empty()) ip = addrs[self->addr_index_ % addrs.size()];
    uv_freeaddrinfo(res);
    if (!self->closing_) {
      r->then(ip, ip.empty() ? "cannot resolve " + r->host + ": " +
                                   (status ? uv_strerror(status) : "no address")
                             : std::string());
    }
    delete r;
    self->handle_closed();
  }

  // The calls waiting for a connection fail (on a later loop turn).
  void connect_failed(const std::string& why) {
    note_failure(why);
    fail_unsent(why);
  }

  void fail_unsent(const std::string& why) {
    std::vector<uint64_t> ids;
    ids.swap(unsent_);
    for (uint64_t id : ids) {
      if (Call* c = calls_.find(id))
        calls_.preset(c, Outcome::kError, "redis " + where_ + ": " + why);
    }
  }

  // rediss://: puts a TLS pump under the context's socket (tls_pump.h). The
  // command connection's TLS failures are what its calls report; the
  // subscriber's are logged at debug level (its retries are quiet).
  bool start_tls(redisAsyncContext* ac, const std::string& ip, bool command, std::string* why) {
#ifdef SIMBA_WITH_REDIS_TLS
    TlsPump::Callbacks cbs;
    cbs.on_error = [this, command](const std::string& e) {
      if (closing_) return;
      if (command) {
        if (failures_ == 0 || e != tls_error_) log(kLogWarn, e);
        tls_error_ = e;
        note_failure(e);
      } else {
        log(kLogDebug, "subscriber: " + e);
      }
    };
    cbs.on_ready = [this, command](const std::string& what) {
      if (closing_) return;
      if (command) tls_error_.clear();
      log(kLogDebug, std::string(command ? "" : "subscriber: ") + what);
    };
    TlsPump** slot = new TlsPump*(nullptr);
    cbs.on_closed = [this, slot] {
      pumps_.erase(*slot);
      delete slot;
      handle_closed();
    };
    const std::string name = url_.tls_server_name.empty() ? url_.host : url_.tls_server_name;
    TlsPump* p = TlsPump::start(loop_, tls_, ip, url_.port, name, ac->c.fd, std::move(cbs), why);
    if (!p) {
      delete slot;
      return false;
    }
    *slot = p;
    pumps_.insert(p);
    ++handles_;
    return true;
#else
    (void)ac;
    (void)ip;
    (void)command;
    *why = "rediss:// is not built into this libsimba (no OpenSSL)";
    return false;
#endif
  }

  // Who a connection is to: the data node (commands, or release broadcasts)
  // or a Sentinel (which has credentials of its own, and no TLS here).
  enum class Peer { kCommand, kSubscriber, kSentinel };

  // A new async context to `ip`:`port`, with our adapter attached and AUTH
  // queued; nullptr on failure (`why` set).
  UvHiredis* new_context(const std::string& ip, int port, Peer peer, std::string* why) {
    const bool tls = url_.tls && peer != Peer::kSentinel;
    redisAsyncContext* ac = redisAsyncConnect(ip.c_str(), port);
    if (!ac) {
      *why = "out of memory";
      return nullptr;
    }
    if (ac->err) {
      *why = ac->errstr;
      redisAsyncFree(ac);
      return nullptr;
    }
    // A reply may not make the reader allocate more than Simba's replies need.
    limit_redis_reader(ac->c.reader);
    if (tls && !start_tls(ac, ip, peer == Peer::kCommand, why)) {
      redisAsyncFree(ac);
      return nullptr;
    }
    UvHiredis* a = uv_hiredis_attach(loop_, ac);
    if (!a) {
      *why = "cannot poll the socket";
      redisAsyncFree(ac);
      return nullptr;
    }
    if (!tls) {
      enable_keepalive(ac->c.fd);  // (the TLS pump's socket has its own)
      // hiredis 0.14 opens its sockets without close-on-exec: a program the
      // host executes (`simba run`'s command) must not inherit the connection.
      fcntl(ac->c.fd, F_SETFD, FD_CLOEXEC);  // (the TLS pump sets its own)
    }
    ++handles_;
    ac->data = this;
    a->on_closed = [this] { handle_closed(); };
    const bool sentinel = peer == Peer::kSentinel;
    const std::string& user = sentinel ? url_.sentinel_user : url_.user;
    const std::string& password = sentinel ? url_.sentinel_password : url_.password;
    if (!password.empty()) {
      std::vector<std::string> auth = {"AUTH"};
      if (!user.empty()) auth.push_back(user);
      auth.push_back(password);
      command(ac, on_setup_reply, const_cast<char*>(sentinel ? "Sentinel AUTH" : "AUTH"), auth);
    }
    return a;
  }

  void connect_ip(const std::string& ip, int port) {
    if (url_.sentinel && sub_ && (ip != ip_ || port != port_)) {
      drop_conn(&sub_);  // release broadcasts come from the new primary now
    }
    ip_ = ip;
    port_ = port;
    if (url_.sentinel) where_ = ip + ":" + std::to_string(port);
    std::string why;
    UvHiredis* a = new_context(ip, port, Peer::kCommand, &why);
    if (!a) {
      connect_failed(why);
      return;
    }
    cmd_ = a;
    const uint64_t gen = ++cmd_gen_;
    a->on_gone = [this, gen](UvHiredis* g) {
      if (cmd_ == g) cmd_ = nullptr;
      (void)gen;
    };
    redisAsyncSetConnectCallback(a->ac, on_connect);
    // The Sentinels' answer may be stale (a failover under way): the calls
    // wait until ROLE says this is the primary.
    cmd_ready_ = !url_.sentinel;
    if (url_.sentinel) command(a->ac, on_role, reinterpret_cast<void*>(gen), {"ROLE"});
    if (url_.db != 0) {
      const std::string db = std::to_string(url_.db);
      const char* argv[] = {"SELECT", db.c_str()};
      redisAsyncCommandArgv(a->ac, on_setup_reply, const_cast<char*>("SELECT"), 2, argv, nullptr);
    }
    if (!config_checked_) {
      // Settings under which a token can go back: read once per client (again
      // on the next connection if this one drops before the last answer). One
      // parameter per CONFIG GET (several need Redis 7); the replies come in
      // this order, so the save answer knows the appendonly one.
      for (const char* param : {"maxmemory-policy", "appendonly", "save"}) {
        const char* argv[] = {"CONFIG", "GET", param};
        const char* tag = std::strcmp(param, "save") == 0 ? "CONFIG-LAST" : "CONFIG";
        redisAsyncCommandArgv(a->ac, on_setup_reply, const_cast<char*>(tag), 3, argv, nullptr);
      }
    }
    // Loads the scripts ahead of the calls on the same connection, so that
    // EVALSHA finds them (NOSCRIPT still falls back to EVAL).
    for (int i = 0; i < kScriptCount; ++i) {
      const char* argv[] = {"SCRIPT", "LOAD", script(i).body};
      redisAsyncCommandArgv(a->ac, on_setup_reply, const_cast<char*>("SCRIPT LOAD"), 3, argv,
                            nullptr);
    }
    if (cmd_ready_) send_unsent();
  }

  void send_unsent() {
    std::vector<uint64_t> ids;
    ids.swap(unsent_);
    for (uint64_t id : ids) {
      Call* c = calls_.find(id);
      if (c && cmd_) send(c);
    }
    ensure_sub();
  }

  // ROLE's answer on a connection to the address the Sentinels named.
  static void on_role(redisAsyncContext* ac, void* reply, void* privdata) {
    auto* self = static_cast<RedisBackend*>(ac->data);
    if (self->closing_ || reinterpret_cast<uintptr_t>(privdata) != self->cmd_gen_) return;
    auto* r = static_cast<redisReply*>(reply);
    if (!r) {
      // (A connection hiredis dropped is already forgotten: cmd_ is null.)
      // (on_connect counted a failed connect.)
      self->fail_unsent(ac->errstr[0] ? std::string("cannot connect: ") + ac->errstr
                                      : "connection lost before ROLE answered");
      return;
    }
    const std::string role =
        r->type == REDIS_REPLY_ARRAY && r->elements > 0 ? reply_str(r->element[0]) : "";
    if (r->type == REDIS_REPLY_ERROR) {
      // ROLE renamed away: trust the Sentinels, and say so.
      self->log(kLogWarn, "ROLE failed (" + reply_str(r) +
                              "): cannot check that the Sentinels' choice is the primary");
    } else if (role != "master") {
      const std::string why = "is a " + (role.empty() ? std::string("?") : role) +
                              ", not the primary (a failover under way?)";
      self->log(kLogWarn, why + "; asking the Sentinels again");
      ++self->sentinel_next_;  // the next question goes to another Sentinel
      self->drop_conn(&self->cmd_);
      self->connect_failed(why);
      return;
    }
    self->cmd_ready_ = true;
    self->send_unsent();
  }

  static void on_connect(const redisAsyncContext* ac, int status) {
    auto* self = static_cast<RedisBackend*>(ac->data);
    if (self->closing_) return;
    if (status != REDIS_OK) {
      const std::string why = std::string("cannot connect: ") + ac->errstr;
      if (self->failures_ == 0) self->log(kLogWarn, why);
      self->note_failure(why);
      ++self->addr_index_;  // a name with several addresses: try the next one
    } else {
      if (self->failures_ > 0) self->log(kLogInfo, "connected");
      self->failures_ = 0;
    }
  }

  static void on_setup_reply(redisAsyncContext* ac, void* reply, void* privdata) {
    auto* self = static_cast<RedisBackend*>(ac->data);
    auto* r = static_cast<redisReply*>(reply);
    if (self->closing_ || !r) return;
    const std::string what = static_cast<const char*>(privdata);
    if (what == "CONFIG" || what == "CONFIG-LAST") {
      // CONFIG may be renamed or disabled: errors are fine, and warn of nothing.
      if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) self->check_config(r);
      if (what == "CONFIG-LAST") self->config_checked_ = true;
      return;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      self->log(kLogWarn, what + " failed: " + reply_str(r));
    } else if (what == "SCRIPT LOAD" && r->type == REDIS_REPLY_STRING) {
      bool known = false;
      for (int i = 0; i < kScriptCount; ++i) known = known || script(i).sha == reply_str(r);
      if (!known) self->log(kLogWarn, "SCRIPT LOAD answered an unexpected SHA-1 " + reply_str(r));
    }
  }

  // One CONFIG GET answer: [name, value].
  void check_config(const redisReply* r) {
    const std::string name = reply_str(r->element[0]);
    const std::string value = reply_str(r->element[1]);
    if (name == "maxmemory-policy" && value.compare(0, 8, "allkeys-") == 0) {
      log(kLogWarn, "maxmemory-policy is " + value +
                        ": Redis may evict lease keys under memory pressure, and a lease's "
                        "token can then go back (use noeviction or volatile-*)");
    } else if (name == "appendonly") {
      aof_off_ = value == "no";
    } else if (name == "save" && aof_off_ && value.find_first_not_of(' ') == std::string::npos) {
      log(kLogWarn,
          "persistence is off (appendonly no, no save points): a restarted Redis forgets "
          "every lease, and a lease's token can then go back (use appendonly yes with "
          "appendfsync always)");
    }
  }

  // --- Sentinels (redis+sentinel://) ---------------------------------------

  // How long one Sentinel may take to name the primary before the next is
  // asked. Sentinels answer from memory: a slow one is a stopped or cut one.
  static constexpr uint64_t kSentinelQueryMs = 500;

  // Asks the Sentinels, one after another from the last that answered, for
  // the primary's address; the calls wait in unsent_ meanwhile.
  void discover() {
    discovering_ = true;
    query_tries_ = 0;
    query_errors_.clear();
    ask_next_sentinel();
  }

  void ask_next_sentinel() {
    if (query_tries_ == url_.sentinels.size()) {
      discovering_ = false;
      connect_failed("no Sentinel named the primary of \"" + url_.master_name + "\" (" +
                     query_errors_ + ")");
      return;
    }
    ++query_tries_;
    const auto& [host, port] = url_.sentinels[sentinel_next_ % url_.sentinels.size()];
    const std::string label = host + ":" + std::to_string(port);
    resolve(host, [this, label, port = port](const std::string& ip, const std::string& why) {
      if (ip.empty()) {
        sentinel_failed(label, why);
        return;
      }
      std::string err;
      UvHiredis* a = new_context(ip, port, Peer::kSentinel, &err);
      if (!a) {
        sentinel_failed(label, err);
        return;
      }
      query_ = a;
      a->on_gone = [this](UvHiredis* g) {
        if (query_ == g) query_ = nullptr;
      };
      command(a->ac, on_master_addr, reinterpret_cast<void*>(++query_gen_),
              {"SENTINEL", "get-master-addr-by-name", url_.master_name});
      uv_timer_start(
          &query_timer_,
          [](uv_timer_t* t) {
            auto* self = static_cast<RedisBackend*>(t->data);
            self->sentinel_failed(self->sentinel_label(),
                                  "no answer in " + std::to_string(kSentinelQueryMs) + " ms");
          },
          kSentinelQueryMs, 0);
    });
  }

  std::string sentinel_label() const {
    const auto& [host, port] = url_.sentinels[sentinel_next_ % url_.sentinels.size()];
    return host + ":" + std::to_string(port);
  }

  // The Sentinel being asked did not name the primary: the next one is.
  void sentinel_failed(const std::string& label, const std::string& why) {
    uv_timer_stop(&query_timer_);
    if (query_) drop_conn(&query_);
    query_errors_ += (query_errors_.empty() ? "" : "; ") + label + ": " + why;
    log(kLogDebug, "Sentinel " + label + ": " + why);
    ++sentinel_next_;
    ask_next_sentinel();
  }

  static void on_master_addr(redisAsyncContext* ac, void* reply, void* privdata) {
    auto* self = static_cast<RedisBackend*>(ac->data);
    // (hiredis forgets a context, query_ = nullptr, before its callbacks run
    // with NULL: the generation tells whether this is the Sentinel asked.)
    if (self->closing_ || !self->discovering_ ||
        reinterpret_cast<uintptr_t>(privdata) != self->query_gen_) {
      return;
    }
    auto* r = static_cast<redisReply*>(reply);
    std::string ip, why;
    int port = 0;
    if (!r) {
      self->sentinel_failed(self->sentinel_label(), ac->errstr[0] ? ac->errstr : "connection lost");
      return;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      self->sentinel_failed(self->sentinel_label(), reply_str(r));
      return;
    }
    if (!decode_master_addr(r, &ip, &port, &why)) {
      self->sentinel_failed(self->sentinel_label(), why);
      return;
    }
    uv_timer_stop(&self->query_timer_);
    if (self->query_) self->drop_conn(&self->query_);
    self->discovering_ = false;
    self->resolving_ = true;  // (Sentinels may announce host names)
    self->resolve(ip, [self, port](const std::string& addr, const std::string& err) {
      self->resolving_ = false;
      if (addr.empty()) {
        self->connect_failed(err);
      } else {
        self->connect_ip(addr, port);
      }
    });
  }

  // One connection to a Sentinel, SUBSCRIBEd to +switch-master, so that a
  // failover moves the client at once, not at its next failed call (a
  // primary cut off from the Sentinels may still answer it).
  void ensure_sentinel_sub() {
    if (!url_.sentinel || closing_ || sentinel_sub_ ||
        uv_is_active(reinterpret_cast<uv_handle_t*>(&sentinel_sub_timer_))) {
      return;
    }
    const auto& [host, port] = url_.sentinels[sentinel_sub_next_ % url_.sentinels.size()];
    if (sentinel_sub_resolving_) return;
    sentinel_sub_resolving_ = true;
    resolve(host, [this, port = port](const std::string& ip, const std::string& why) {
      sentinel_sub_resolving_ = false;
      if (ip.empty()) {
        log(kLogDebug, "Sentinel subscriber: " + why);
        retry_sentinel_sub();
      } else {
        start_sentinel_sub(ip, port);
      }
    });
  }

  void start_sentinel_sub(const std::string& ip, int port) {
    if (closing_ || sentinel_sub_) return;
    std::string why;
    UvHiredis* a = new_context(ip, port, Peer::kSentinel, &why);
    if (!a) {
      log(kLogDebug, "Sentinel subscriber: " + why);
      retry_sentinel_sub();
      return;
    }
    sentinel_sub_ = a;
    a->on_gone = [this](UvHiredis* g) {
      if (sentinel_sub_ != g) return;
      sentinel_sub_ = nullptr;
      if (!closing_) retry_sentinel_sub();
    };
    redisAsyncSetConnectCallback(a->ac, [](const redisAsyncContext* ac, int status) {
      auto* self = static_cast<RedisBackend*>(ac->data);
      if (!self->closing_ && status == REDIS_OK) self->sentinel_sub_failures_ = 0;
    });
    command(a->ac, on_sentinel_message, nullptr, {"SUBSCRIBE", "+switch-master"});
  }

  void retry_sentinel_sub() {
    ++sentinel_sub_failures_;
    ++sentinel_sub_next_;
    const uint64_t backoff = std::min<uint64_t>(2000, 50ull << std::min(sentinel_sub_failures_, 6));
    uv_timer_start(
        &sentinel_sub_timer_,
        [](uv_timer_t* t) { static_cast<RedisBackend*>(t->data)->ensure_sentinel_sub(); }, backoff,
        0);
  }

  static void on_sentinel_message(redisAsyncContext* ac, void* reply, void*) {
    auto* self = static_cast<RedisBackend*>(ac->data);
    auto* r = static_cast<redisReply*>(reply);
    if (self->closing_ || !r) return;
    std::string name, ip;
    int port = 0;
    if (!decode_switch_master(r, &name, &ip, &port) || name != self->url_.master_name) return;
    if (ip == self->ip_ && port == self->port_ && self->cmd_) return;
    self->log(kLogInfo, "Sentinel: the primary moved to " + ip + ":" + std::to_string(port));
    // The calls in flight on the old primary fail (the engine retries them);
    // the next call asks the Sentinels, without a backoff.
    if (self->cmd_) self->drop_conn(&self->cmd_);
    if (self->sub_) self->drop_conn(&self->sub_);
    self->failures_ = 0;
    self->retry_at_ = 0;
  }

  // --- release broadcast -----------------------------------------------------

  void ensure_sub() {
    if (closing_ || sub_ || ip_.empty() ||
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
        if (!closing_) schedule_sub();
      }
    };
    redisAsyncSetConnectCallback(a->ac, [](const redisAsyncContext* ac, int status) {
      auto* self = static_cast<RedisBackend*>(ac->data);
      if (self->closing_ || status != REDIS_OK) return;
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

  // Candidates only: a name is watched from an acquire answered Held until no
  // acquire of it was answered Held for kWatchIdlePeriods renew periods (the
  // election stopped, or this client leads it). So no client hears the
  // releases of names it does not wait for, its own included: an uncontended
  // lock costs nothing on the subscriber connection.
  static constexpr int64_t kWatchIdlePeriods = 4;
  struct Watch {
    bool confirmed = false;  // the server's "subscribe" answer came
    uint64_t last_held_ms = 0;
  };

  void watch(const std::string& name) {
    auto [it, added] = watches_.try_emplace(name);
    it->second.last_held_ms = uv_now(loop_);
    if (added) send_sub("SUBSCRIBE", {name});
  }

  void sweep_watches(Duration period) {
    const uint64_t idle =
        static_cast<uint64_t>(kWatchIdlePeriods * std::max<int64_t>(1, to_ms_ceil(period)));
    const uint64_t now = uv_now(loop_);
    std::vector<std::string> stale;
    for (auto it = watches_.begin(); it != watches_.end();) {
      if (now - it->second.last_held_ms > idle) {
        stale.push_back(it->first);
        it = watches_.erase(it);
      } else {
        ++it;
      }
    }
    send_sub("UNSUBSCRIBE", stale);
  }

  // One (UN)SUBSCRIBE of the names' channels, on the subscriber connection if
  // there is one (hiredis queues it while it connects); without one, the next
  // connection subscribes every watch.
  void send_sub(const char* verb, const std::vector<std::string>& names) {
    if (names.empty() || closing_ || !sub_ || !sub_->ac) return;
    std::vector<std::string> args{verb};
    for (const std::string& n : names) args.push_back(released_channel(n));
    command(sub_->ac, on_message, nullptr, args);
  }

  // redisAsyncCommandArgv of `args`, binary-safe.
  static int command(redisAsyncContext* ac, redisCallbackFn* fn, void* privdata,
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

  void schedule_sub() {
    ++sub_failures_;
    const uint64_t backoff = std::min<uint64_t>(2000, 50ull << std::min(sub_failures_, 6));
    uv_timer_start(
        &sub_timer_, [](uv_timer_t* t) { static_cast<RedisBackend*>(t->data)->ensure_sub(); },
        backoff, 0);
  }

  static void on_message(redisAsyncContext* ac, void* reply, void*) {
    auto* self = static_cast<RedisBackend*>(ac->data);
    auto* r = static_cast<redisReply*>(reply);
    if (self->closing_ || !r) return;
    const SubscriberEvent ev = decode_subscriber_message(r, self->url_.prefix + ":released:");
    if (ev.kind == SubscriberEvent::kReleased) {
      // The core copes with a broadcast that overtakes an acquire's answer.
      if (self->released_fn_) self->released_fn_(ev.name);
    } else if (ev.kind == SubscriberEvent::kSubscribed) {
      // The acquire answered Held may have run before the subscription did,
      // and a release in between was broadcast to nobody: attempt once more,
      // now that any later release will be heard.
      auto it = self->watches_.find(ev.name);
      if (it == self->watches_.end() || it->second.confirmed) return;
      it->second.confirmed = true;
      if (self->released_fn_) self->released_fn_(ev.name);
    }
  }

  uv_loop_t* loop_;
  LogFn log_;
  std::string client_name_;
  RedisUrl url_;
  std::string where_;      // host:port, for messages (never the password)
  std::string ip_;         // the last address the host resolved to
  size_t addr_index_ = 0;  // which of the host's addresses to try next

  UvHiredis* cmd_ = nullptr;     // the command connection (connecting or up)
  uint64_t cmd_gen_ = 0;         // bumped per command connection
  bool resolving_ = false;       // the host's lookup for the command connection
  std::set<Resolve*> resolves_;  // lookups under way (cancelled at shutdown)
  bool cmd_ready_ = false;       // calls may go out on cmd_ (with Sentinels: ROLE said master)
  int port_ = 6379;              // the port of ip_

  // redis+sentinel:// only.
  bool discovering_ = false;           // asking the Sentinels for the primary
  UvHiredis* query_ = nullptr;         // the connection to the Sentinel being asked
  uv_timer_t query_timer_;             // how long that Sentinel may take
  size_t sentinel_next_ = 0;           // the Sentinel to ask first (the last that answered)
  size_t query_tries_ = 0;             // Sentinels asked in this discovery
  std::string query_errors_;           // what each said, for the calls' error
  UvHiredis* sentinel_sub_ = nullptr;  // SUBSCRIBEd to +switch-master
  uv_timer_t sentinel_sub_timer_;      // reconnects it after a backoff
  size_t sentinel_sub_next_ = 0;
  int sentinel_sub_failures_ = 0;
  bool sentinel_sub_resolving_ = false;
  uint64_t query_gen_ = 0;            // bumped per Sentinel asked (a late answer is ignored)
  std::vector<uint64_t> wait_batch_;  // replicated writes sent this turn, before their WAIT
  int64_t wait_timeout_ms_ = 0;       // that WAIT's timeout (the shortest the batch asks)
  std::vector<uint64_t> unsent_;      // calls waiting for the connection
  int failures_ = 0;                  // consecutive connection failures
  uint64_t retry_at_ = 0;             // loop ms before which no reconnect is tried
  std::string last_error_;
  bool config_checked_ = false;  // CONFIG GETs answered (once per client)
  bool aof_off_ = false;         // CONFIG GET appendonly answered "no"

  UvHiredis* sub_ = nullptr;
  uv_timer_t sub_timer_;
  uv_check_t flush_;  // writes the commands sent during a loop turn at its end
  int sub_failures_ = 0;
  ReleasedFn released_fn_;
  std::map<std::string, Watch> watches_;

  std::shared_ptr<SSL_CTX> tls_;  // rediss:// only
  std::string tls_error_;         // the command connection's last TLS failure
#ifdef SIMBA_WITH_REDIS_TLS
  std::set<TlsPump*> pumps_;  // live pumps (closed at shutdown)
#endif

  int handles_ = 0;  // our handles and requests still open on the loop
  CallTable<Call> calls_;
  bool closing_ = false;
  std::function<void()> shutdown_done_;
};

}  // namespace

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
  return std::make_unique<RedisBackend>(ctx, url, std::move(tls));
}

}  // namespace simba
