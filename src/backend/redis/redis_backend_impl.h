// The Redis backend's class, private to src/backend/redis: its members, the
// one-line accessors and templates. The methods are defined by topic in
// redis_backend.cpp (operations, calls), redis_connect.cpp (connecting,
// Sentinels) and redis_watch.cpp (the release-broadcast subscriber).
#ifndef SIMBA_BACKEND_REDIS_REDIS_BACKEND_IMPL_H
#define SIMBA_BACKEND_REDIS_REDIS_BACKEND_IMPL_H

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <uv.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/call_table.h"
#include "backend/open_handles.h"
#include "backend/redis/redis_keys.h"
#include "backend/redis/redis_replies.h"
#include "backend/redis/redis_url.h"
#include "backend/redis/uv_hiredis.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace simba {
class TlsPump;  // tls_pump.h (rediss:// only)
}

namespace simba::redis_impl {

// The Redis backend: hiredis 0.14 async on the client's libuv loop, through our
// own adapter (uv_hiredis.h). Every operation is one EVALSHA of a short Lua
// script, so one round trip (the scripts are loaded with SCRIPT LOAD when a
// connection opens; a NOSCRIPT answer is retried once with EVAL).
//
// Data model ({p} = the URL's prefix, default "simba"): redis_keys.h, the one
// place that names the keys, for this code and for the Lua scripts alike.
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
// resolved with uv_getaddrinfo (hiredis' own lookup blocks). A call its caller
// abandons (its timeout passed, backend.h) drops the command connection it
// went out on, so its late answer can never be delivered; it and the other
// calls pending on it complete with kError, each exactly once. An answer that
// already waits in the socket (after a long loop turn) is read first: then
// the connection was not stuck.
class RedisBackend final : public Backend {
 public:
  RedisBackend(const BackendContext& ctx, RedisUrl url, std::shared_ptr<SSL_CTX> tls);
  ~RedisBackend() override = default;

  CallRef open_session(Duration lease, Duration timeout, OpenCb cb) override;
  CallRef keep_alive(const std::string& session, Duration lease, Duration timeout,
                     KeepAliveCb cb) override;
  CallRef acquire(const std::string& session, const std::string& name, Duration timeout,
                  AcquireCb cb) override;
  CallRef release(const std::string& session, const std::string& name, uint64_t token,
                  Duration timeout, DoneCb cb) override;
  // ADR 0047 step 2 brings candidates here; until then an ask fails.
  CallRef acquire_candidate(const std::string& session, const std::string& name,
                            const CandidateAsk& ask, Duration timeout, AcquireCb cb) override {
    if (ask.empty()) return acquire(session, name, timeout, std::move(cb));
    return fail_later(timeout, [cb] { cb(candidates_not_supported_yet()); });
  }
  // Permits (ADR 0046): one script each, on the name's {p}:sem: or {p}:rw: hash.
  CallRef acquire_permit(const std::string& session, const std::string& name, const PermitAsk& ask,
                         Duration timeout, AcquireCb cb) override;
  CallRef release_permit(const std::string& session, const std::string& name, PermitKind kind,
                         uint64_t permit, uint64_t token, Duration timeout, DoneCb cb) override;
  // The run record (ADR 0048): one script on the lease's hash.
  CallRef write_run(const std::string& session, const std::string& name, uint64_t token,
                    const RunRecord& record, Duration timeout, RunCb cb) override;
  CallRef close_session(const std::string& session, Duration timeout, DoneCb cb) override;
  CallRef inspect(const std::vector<std::string>& names, Duration timeout, InspectCb cb) override;
  void abandon(CallRef call) override { calls_.abandon(call); }
  void on_released(ReleasedFn fn) override { released_fn_ = std::move(fn); }
  void watch(const std::string& name) override;
  void unwatch(const std::string& name) override;
  void shutdown(std::function<void()> done) override;

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

  static Done done_parser(DoneCb cb);
  // The answer of a script that `decode` reads, or the failure every answer shares.
  template <typename Reply>
  static Done parser(std::function<void(const Reply&)> cb, Reply (*decode)(const redisReply*)) {
    return [cb, decode](const redisReply* r, Outcome o, const std::string& err) {
      Reply out;
      if (failed(r, o, err, &out)) {
        cb(out);
        return;
      }
      cb(decode(r));
    };
  }

  std::string session_key(const std::string& sid) const { return keys_.session(sid); }
  std::string leases_key(const std::string& sid) const { return keys_.leases(sid); }
  std::string lease_key(const std::string& name) const { return keys_.lease(name); }
  std::string released_channel(const std::string& name) const { return keys_.released(name); }

  void log(int level, const std::string& line) {
    if (log_) log_(level, "redis " + where_ + ": " + line);
  }

  // An answer that is known before any I/O: delivered on a later loop turn.
  template <typename Fn>
  CallRef fail_later(Duration timeout, Fn fn) {
    Call* c = new_call({}, timeout, [fn](const redisReply*, Outcome, const std::string&) { fn(); });
    calls_.preset(c, Outcome::kError, "");
    return c->id;
  }

  // --- calls (redis_backend.cpp) ---------------------------------------------

  Call* new_call(std::vector<std::string> argv, Duration timeout, Done done);
  CallRef start(std::vector<std::string> argv, Duration timeout, Done done);
  CallRef start(std::vector<std::string> argv, Duration timeout, bool replicated, Done done);
  void send(Call* c);
  void send_wait();
  void complete(Call* c, const redisReply* r, Outcome o, const std::string& err);
  void read_now();
  void abandoned(Call* c);
  static void on_reply(redisAsyncContext* ac, void* reply, void* privdata);
  static void on_wait_reply(redisAsyncContext* ac, void* reply, void* privdata);
  static int command(redisAsyncContext* ac, redisCallbackFn* fn, void* privdata,
                     const std::vector<std::string>& args);

  // --- connecting (redis_connect.cpp) ----------------------------------------

  void note_failure(const std::string& why);
  void drop_conn(UvHiredis** slot);
  // The same, for `why`: the calls it fails say so instead of "connection lost".
  void drop_conn(UvHiredis** slot, const std::string& why);
  void connect();

  // Looks `host` up without blocking (hiredis' own lookup would) and calls
  // then(ip, "") or then("", why); an IP literal at once. Not after shutdown.
  using Resolved = std::function<void(const std::string& ip, const std::string& why)>;
  struct Resolve {
    uv_getaddrinfo_t req;
    RedisBackend* self;
    std::string host;
    Resolved then;
  };
  void resolve(const std::string& host, Resolved then);
  static void on_resolved(uv_getaddrinfo_t* req, int status, struct addrinfo* res);

  void connect_failed(const std::string& why);
  void fail_unsent(const std::string& why);
  bool start_tls(redisAsyncContext* ac, const std::string& ip, bool command, std::string* why);

  // Who a connection is to: the data node (commands, or release broadcasts)
  // or a Sentinel (which has credentials of its own, and no TLS here).
  enum class Peer { kCommand, kSubscriber, kSentinel };

  UvHiredis* new_context(const std::string& ip, int port, Peer peer, std::string* why);
  void connect_ip(const std::string& ip, int port);
  void send_unsent();
  static void on_role(redisAsyncContext* ac, void* reply, void* privdata);
  static void on_connect(const redisAsyncContext* ac, int status);
  static void on_setup_reply(redisAsyncContext* ac, void* reply, void* privdata);
  void check_config(const redisReply* r);

  // --- Sentinels (redis+sentinel://, redis_connect.cpp) ----------------------

  // How long one Sentinel may take to name the primary before the next is
  // asked. Sentinels answer from memory: a slow one is a stopped or cut one.
  static constexpr uint64_t kSentinelQueryMs = 500;

  void discover();
  void ask_next_sentinel();
  std::string sentinel_label() const;
  void sentinel_failed(const std::string& label, const std::string& why);
  static void on_master_addr(redisAsyncContext* ac, void* reply, void* privdata);
  void ensure_sentinel_sub();
  void start_sentinel_sub(const std::string& ip, int port);
  void retry_sentinel_sub();
  static void on_sentinel_message(redisAsyncContext* ac, void* reply, void*);

  // --- release broadcast (redis_watch.cpp) -----------------------------------

  // The names the client watches (Backend::watch, decided by the core and the
  // engine; ADR 0040), each SUBSCRIBEd on the subscriber connection. So no
  // client hears the releases of names it does not wait for, its own
  // included: an uncontended lock costs nothing on the subscriber connection.
  struct Watch {
    bool confirmed = false;  // the server's "subscribe" answer came
  };

  void ensure_sub();
  void send_sub(const char* verb, const std::vector<std::string>& names);
  void schedule_sub();
  static void on_message(redisAsyncContext* ac, void* reply, void*);

  uv_loop_t* loop_;
  LogFn log_;
  std::string client_name_;
  RedisUrl url_;
  RedisKeys keys_;         // under url_.prefix
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
  std::string drop_reason_;       // why drop_conn is failing the calls it fails now
#ifdef SIMBA_WITH_REDIS_TLS
  std::set<TlsPump*> pumps_;  // live pumps (closed at shutdown)
#endif

  OpenHandles handles_;  // our handles and requests still open on the loop
  CallTable<Call> calls_;
};

}  // namespace simba::redis_impl

#endif  // SIMBA_BACKEND_REDIS_REDIS_BACKEND_IMPL_H
