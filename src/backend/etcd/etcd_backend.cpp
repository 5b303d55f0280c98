// The etcd backend: the Backend operations mapped onto etcd's v3 API (ADR
// 0045), over one gRPC connection (grpc_conn.h) on the client's loop. Keys:
// etcd_messages.h.
//
//   open_session  LeaseGrant (TTL = the lease rounded up to whole seconds),
//                 then a Put of the session's marker with that lease
//   keep_alive    one message on the connection's LeaseKeepAlive stream (its
//                 TTL answer is the remaining time; <= 0: Expired), with a
//                 LeaseTimeToLive(keys) beside it: the lease keys still
//                 attached to the session are the leases it holds
//   acquire       one Txn: the lease key absent ? put it with the session's
//                 lease (and the token key) : read it. token = its mod_revision
//                 (= create_revision; a handoff puts it again)
//   release       one Txn: delete the lease key if its lease and
//                 mod_revision (the token) are ours and no candidate waits;
//                 else that Txn read the candidates, and a second one hands
//                 the lease to the chosen one. Where the last release found
//                 candidates, a serializable Range reads them first and one
//                 Txn frees or hands over (ADR 0047; see release_handoff)
//   acquire_candidate the acquire's Txn that also leaves (or keeps) the
//                 session's candidate key when Held, and deletes it when won
//   acquire_permit one Txn guarded by the resource counter's mod_revision as
//                 this client last saw it: decided from the entries seen then
//                 (none can have come since), it writes the counter and the
//                 entry (a Held reads the entries as they are); a lost guard
//                 reads counter and entries instead, and the call tries again
//                 (ADR 0046; see acquire_permit)
//   release_permit one Txn: delete the entry if its value and lease are ours
//   write_run     one Txn (ADR 0048): if the lease key's lease and
//                 mod_revision are ours, a nested Txn writes the run key when
//                 its value compare passes (a start: the stored period id
//                 below ours, or no record; an end: our period id); else it
//                 reads the run key and the session's marker (gone: Expired).
//                 acquire's Txn reads the run key too: no extra round trip
//   close_session a release of each lease it knows (handing over), then
//                 LeaseRevoke: etcd deletes every key attached to the lease
//   inspect       one read-only Txn ranging the five key directories (one
//                 revision), then LeaseTimeToLive of each live session
//   watch         one Watch stream per connection, one watch (of DELETE
//                 events, and a lease key's PUTs: a handoff is a put, whose
//                 mod_revision above its create_revision tells it from an
//                 acquire) per watched name: a lease key, or a permit
//                 resource's entry directory
#include "backend/etcd/etcd_backend.h"

#include <uv.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend_parts.h"
#include "backend/call_table.h"
#include "backend/etcd/etcd_messages.h"
#include "backend/etcd/grpc_conn.h"
#include "backend/open_handles.h"
#include "backend/reply_parts.h"
#include "backend/url_parts.h"

#ifdef SIMBA_WITH_REDIS_TLS
#include "backend/redis/tls_pump.h"
#endif

namespace simba {
namespace etcd_impl {
namespace {

constexpr int kLogInfo = 1, kLogWarn = 2;

constexpr char kGrant[] = "/etcdserverpb.Lease/LeaseGrant";
constexpr char kRevoke[] = "/etcdserverpb.Lease/LeaseRevoke";
constexpr char kKeepAlive[] = "/etcdserverpb.Lease/LeaseKeepAlive";
constexpr char kTimeToLive[] = "/etcdserverpb.Lease/LeaseTimeToLive";
constexpr char kPut[] = "/etcdserverpb.KV/Put";
constexpr char kRange[] = "/etcdserverpb.KV/Range";
constexpr char kTxn[] = "/etcdserverpb.KV/Txn";
constexpr char kWatch[] = "/etcdserverpb.Watch/Watch";
constexpr char kAuthenticate[] = "/etcdserverpb.Auth/Authenticate";

// A call refused for its token (it expired, or the auth store changed): a new
// token is taken and the call made once more.
bool token_refused(const std::string& err) {
  return err.find("invalid auth token") != std::string::npos ||
         err.find("revision of auth store is old") != std::string::npos;
}

// etcd leases are whole seconds (TTL = the lease rounded up, so the server
// never ends a session before the client's deadline). Under this, the
// server's hold on a crashed holder's names would exceed twice the lease.
constexpr int64_t kMinLeaseMs = 500;

// etcd answers in milliseconds: a connection that read nothing for this long
// while a message of ours waited is dead (a partition, a stopped server).
constexpr uint64_t kSilentMs = 1000;

// A Held answer's revision, kept for the watch that usually follows it; past
// this many (names tried and never watched) the oldest are dropped, and a
// watch without one reports its name once instead.
constexpr size_t kMaxHeldRevisions = 4096;

// A permit acquire whose guard lost this many times (others granted or left
// intents meanwhile) answers Held: the core tries again, as after any Held.
constexpr int kPermitTries = 3;

// What this client last saw of a permit resource, read in one Txn: its
// counter (mod 0: absent) and its entries.
struct PermitView {
  int64_t mod = 0;
  PermitCounter counter;
  std::vector<Kv> entries;
};

// What an acquire does, decided from a view as memory:// decides
// (memory_store.cpp, MemoryStore::acquire_permit).
struct PermitPlan {
  Outcome outcome = Outcome::kHeld;
  uint64_t permit = 0, token = 0;  // kOk: the grant; kHeld: the writer's intent (0: none)
  uint32_t size = 0;               // kRefused: the semaphore's
  PermitCounter counter;           // after the plan
  std::vector<PermitOp> ops;       // its writes (none: nothing changes)
};

struct PermitEntry {
  PermitKind kind = PermitKind::kSemaphore;
  uint64_t permit = 0, token = 0;
  std::string sid;
};

PermitPlan plan_permit(const EtcdKeys& keys, const std::string& resource, const PermitView& v,
                       const PermitAsk& ask, const std::string& sid, int64_t lease) {
  PermitPlan p;
  p.counter = v.counter;
  std::vector<PermitEntry> entries;
  for (const Kv& kv : v.entries) {
    PermitEntry e;
    std::string r;
    if (keys.parse_permit(kv.key, &r, &e.permit) &&
        parse_permit_value(kv.value, &e.kind, &e.sid, &e.token)) {
      entries.push_back(std::move(e));
    }
  }
  bool in_the_way = false;
  const PermitEntry* intent = nullptr;  // the writer's own, ask.intent
  for (const PermitEntry& e : entries) {
    if (ask.kind == PermitKind::kRead) {
      in_the_way |= e.kind == PermitKind::kWrite || e.kind == PermitKind::kIntent;
    } else if (ask.kind == PermitKind::kWrite) {
      in_the_way |= e.kind == PermitKind::kWrite || e.kind == PermitKind::kRead;
    }
    if (e.kind == PermitKind::kIntent && e.permit == ask.intent && e.sid == sid) intent = &e;
  }
  if (ask.kind == PermitKind::kSemaphore) {
    if (!entries.empty() && v.counter.size != ask.size) {
      p.outcome = Outcome::kRefused;
      p.size = v.counter.size;
      return p;
    }
    if (entries.empty()) p.counter.size = ask.size;  // the first holder sets it
    in_the_way = entries.size() >= p.counter.size;
  }
  PermitKind kind = ask.kind;
  if (!in_the_way) {
    p.outcome = Outcome::kOk;
    p.permit = ++p.counter.seq;
    p.token = p.permit;  // a semaphore's and a writer's
    if (kind == PermitKind::kWrite) p.counter.epoch = p.permit;
    if (kind == PermitKind::kRead) p.token = p.counter.epoch;
    // The grant deletes the writer's intent.
    if (kind == PermitKind::kWrite && intent) {
      p.ops.push_back({false, keys.permit(resource, intent->permit), "", 0});
    }
  } else {
    p.outcome = Outcome::kHeld;
    if (ask.kind != PermitKind::kWrite || !ask.leave_intent) return p;
    if (intent) {  // kept
      p.permit = intent->permit;
      return p;
    }
    p.permit = ++p.counter.seq;  // a blocking writer leaves one
    kind = PermitKind::kIntent;
  }
  p.ops.push_back({true, keys.counter(resource), counter_value(p.counter), 0});
  p.ops.push_back({true, keys.permit(resource, p.permit), permit_value(kind, sid, p.token), lease});
  return p;
}

// `s` whole seconds of a server's answer, bounded like every reply number.
Duration seconds(int64_t s) { return reply_ms(std::min<int64_t>(s, kMaxReplyMs / 1000) * 1000); }

std::string status_text(int status, const std::string& err) {
  if (status == kGrpcBroken) return "etcd: " + err;
  return "etcd: grpc-status " + std::to_string(status) + (err.empty() ? "" : ": " + err);
}

}  // namespace

class EtcdBackend final : public Backend {
 public:
  EtcdBackend(const BackendContext& ctx, EtcdUrl url, std::shared_ptr<SSL_CTX> tls)
      : loop_(ctx.loop),
        log_(ctx.log),
        client_name_(ctx.client_name),
        url_(std::move(url)),
        keys_(url_.prefix),
        calls_(loop_, &handles_,
               {[this](Call* c) { abandoned(c); },
                [this](Call* c, Outcome o, const std::string& err) { fail(c->id, o, err); }}),
        tls_(std::move(tls)) {
    // Keeps the loop busy with us until shutdown: shutdown always completes
    // on a later loop turn.
    wipe_secret(&url_.tls_key_password);  // in the TLS context now
    // Tests only: a connection's last stream id, so that stream-id renewals
    // come every few calls.
    if (const char* ids = std::getenv("SIMBA_TEST_ETCD_MAX_STREAM_ID")) {
      const long long n = std::atoll(ids);
      if (n >= 3 && n <= kMaxStreamId) max_stream_id_ = static_cast<uint32_t>(n);
    }
    uv_timer_init(loop_, &anchor_);
    anchor_.data = this;
    handles_.opened();
  }

  CallRef open_session(Duration lease, Duration timeout, OpenCb cb) override;
  CallRef keep_alive(const std::string& session, Duration lease, Duration timeout,
                     KeepAliveCb cb) override;
  CallRef acquire(const std::string& session, const std::string& name, Duration timeout,
                  AcquireCb cb) override;
  CallRef release(const std::string& session, const std::string& name, uint64_t token,
                  Duration timeout, DoneCb cb) override;
  CallRef acquire_candidate(const std::string& session, const std::string& name,
                            const CandidateAsk& ask, Duration timeout, AcquireCb cb) override;
  CallRef release_handoff(const std::string& session, const std::string& name, uint64_t token,
                          const std::string& target, Duration timeout, ReleaseCb cb) override;
  CallRef acquire_permit(const std::string& session, const std::string& name, const PermitAsk& ask,
                         Duration timeout, AcquireCb cb) override;
  CallRef release_permit(const std::string& session, const std::string& name, PermitKind kind,
                         uint64_t permit, uint64_t token, Duration timeout, DoneCb cb) override;
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
  enum class Kind { kOpen, kKeepAlive, kAcquire, kDone, kInspect, kRelease, kRun };

  struct InspectState;
  struct PermitState;
  struct Handoff;

  struct Call : CallBase {
    Kind kind = Kind::kDone;
    OpenCb open;
    KeepAliveCb keep_alive;
    AcquireCb acquire;
    DoneCb done;
    InspectCb inspect;
    ReleaseCb release;
    RunCb run;
    GrpcConn* conn = nullptr;                            // where its last stream went out
    std::vector<std::pair<GrpcConn*, int32_t>> streams;  // its unary streams
    // keep_alive: both halves, then the tokens of leases it did not know.
    int64_t lease = 0;
    Duration lease_duration{0};
    bool ka_answered = false;
    bool listed = false;  // the answer's keys were matched with the known leases
    // Sent again after its connection broke under it (its first try may have
    // been applied); for keep-alives, how many times.
    bool resent = false;
    size_t ka_resends = 0;
    int64_t ka_ttl = 0;
    bool ttl_answered = false;
    TimeToLiveAnswer ttl;
    std::vector<OwnedLease> owned;
    int lookups = 0;
    std::shared_ptr<InspectState> inspecting;
    std::shared_ptr<PermitState> permit;
  };

  // An acquire_permit under way: what it asks, and its try in flight.
  struct PermitState {
    std::string name, resource, sid;
    PermitAsk ask;
    int tries = 0;
    PermitView seen;  // what the try was decided from
    PermitPlan plan;
  };

  // An entry the session holds (a lease key or a permit entry), as the
  // keep-alive lists it, and the revision that wrote it.
  struct Held {
    OwnedLease entry;
    int64_t rev = 0;
    bool answered = false;  // a lease an acquire of ours answered Ok (not a grant seen)
  };

  // A release of one lease under way (ADR 0047): its term, the target, how
  // many handoff Txns it sent, and what to do with the answer.
  struct Handoff {
    std::string name, target;
    int64_t token = 0;
    int tries = 0;
    std::string chosen_sid, chosen_client;  // of the handoff Txn in flight
    bool waited = false;                    // a candidate was read
    std::function<void(Call* c, const ReleaseReply& r)> done;
  };

  struct InspectState {
    std::vector<std::string> names;
    int pending = 0;
    RangeAnswer sessions, leases, tokens, permits, runs;
    std::map<int64_t, int64_t> ttl_s;  // lease -> remaining seconds
  };

  // A LeaseKeepAlive stream and its keep-alive calls, in the order sent
  // (etcd answers a stream's requests in order).
  struct KaStream {
    GrpcConn* conn = nullptr;
    int32_t id = 0;
    std::deque<uint64_t> waiting;
  };

  struct Watch {
    int64_t id = 0;
    bool announce = false;  // report the name once when the watch is created
  };

  using AnswerFn =
      std::function<void(Call* c, int status, const std::string& err, const std::string& answer)>;

  Call* new_call(Kind kind, Duration timeout) {
    Call* c = calls_.start(timeout);
    c->kind = kind;
    return c;
  }
  void preset(Call* c, Outcome o, const std::string& err) { calls_.preset(c, o, err); }
  void abandoned(Call* c);
  void drop_stuck_keep_alive_stream(uint64_t id);
  void fail(uint64_t id, Outcome o, const std::string& err);
  Call* take(uint64_t id) {
    Call* c = calls_.find(id);
    if (c) calls_.finish(c);
    return c;
  }
  template <typename Reply, typename Cb>
  void deliver(uint64_t id, Cb Call::*cb, const Reply& r) {
    Call* c = take(id);
    if (c && !handles_.closing() && c->*cb) (c->*cb)(r);
  }
  template <typename Reply>
  static Reply failure(Outcome o, const std::string& err) {
    Reply r;
    r.outcome = o;
    r.error = err;
    return r;
  }
  void log(int level, const std::string& line) {
    if (log_) log_(level, line);
  }

  // --- the connection ---------------------------------------------------------

  // `fn` with the connection, now or once it is up (nullptr: it cannot be).
  void with_conn(std::function<void(GrpcConn*)> fn);
  void connect();
  static void on_resolved(uv_getaddrinfo_t* req, int status, struct addrinfo* res);
  void connect_to(const std::string& ip);
  void connect_failed(const std::string& why);
  void next_endpoint() { endpoint_ = (endpoint_ + 1) % url_.endpoints.size(); }
  // host:port of the current endpoint ([v6]:port), as HTTP/2's :authority.
  std::string authority() const {
    const EtcdEndpoint& e = url_.endpoints[endpoint_];
    const bool v6 = e.host.find(':') != std::string::npos;
    return (v6 ? "[" + e.host + "]" : e.host) + ":" + std::to_string(e.port);
  }
  void on_broken(GrpcConn* conn, const std::string& why);
  // `conn` takes no new call (GOAWAY, stream ids used up): new calls, the
  // keep-alive and watch streams go to a new connection (the next endpoint
  // after a GOAWAY: that member is likely stopping), while its own calls
  // finish on it.
  void retire(GrpcConn* conn, bool next);
  // One unary call of `c` on `path`; `fn` runs with its answer unless the
  // call completed meanwhile.
  // A call refused for its token is made once more with a new one (`reauthed`).
  void rpc(Call* c, const char* path, std::string request, AnswerFn fn, size_t tries = 0,
           bool reauthed = false);
  // Authenticate on `conn` (etcd://user:password@): the calls waiting for a
  // connection go out with the token once it came.
  void authenticate(GrpcConn* conn);
  void leave(GrpcConn* conn);

  // --- the operations' second halves ------------------------------------------

  void send_keep_alive(uint64_t id);
  void keep_alive_step(Call* c);
  void inspect_step(uint64_t id);
  void handoff_send(Call* c, std::shared_ptr<Handoff> h, std::string request);
  void handoff_answer(Call* c, const std::shared_ptr<Handoff>& h, const TxnAnswer& t);
  void handoff_decide(Call* c, const std::shared_ptr<Handoff>& h, const std::vector<Kv>& kvs,
                      int64_t revision);
  void handoff_start(Call* c, const std::string& name, uint64_t token, const std::string& target,
                     std::function<void(Call* c, const ReleaseReply& r)> done);
  void revoke(Call* c);  // close_session's LeaseRevoke
  void permit_try(Call* c);
  void permit_answer(Call* c, const TxnAnswer& t);
  void note_held(const std::string& name, int64_t revision);
  // An acquire's Txn answer in *t; false when it failed the call instead.
  bool acquire_answer(Call* c, int status, const std::string& err, const std::string& answer,
                      TxnAnswer* t);
  // The run record of `name` among a Txn's kvs (ADR 0048), if any.
  std::optional<RunRecord> run_of(const std::vector<Kv>& kvs, const std::string& name) const {
    const std::string key = keys_.run(name);
    RunRecord r;
    for (const Kv& kv : kvs) {
      if (kv.key == key && parse_run_value(kv.value, &r)) return r;
    }
    return std::nullopt;
  }
  // The session's entry of key `kv` (a lease key or a permit entry) and its sid.
  bool entry_of(const Kv& kv, Held* held, std::string* sid) const;
  bool entry_key(const std::string& key) const {
    std::string r;
    uint64_t permit = 0;
    std::string sid;
    return name_of_lease_key(key, &r) || keys_.parse_permit(key, &r, &permit) ||
           keys_.parse_candidate(key, &r, &sid);
  }
  // `lease` no longer holds `key` where it held `token` (a release answered).
  void forget(int64_t lease, const std::string& key, uint64_t token);
  CallRef released_by(Call* c, std::string request, const std::string& key, uint64_t token,
                      const std::string& resource = "");
  // The Watch request of `name`: its lease key, or a permit resource's entries.
  // A lease key's puts too: a handoff is a put (on_watch_answer).
  std::string watch_request(const std::string& name, int64_t start_revision, int64_t id) const {
    if (name.find('/') == std::string::npos) {
      return watch_create_request(keys_.lease(name), start_revision, id, "", true);
    }
    const std::string dir = keys_.permit_dir(name);
    return watch_create_request(dir, start_revision, id, prefix_end(dir));
  }
  void send_watch_create(const std::string& name, int64_t start_revision);
  void open_watch_stream(GrpcConn* conn);
  void on_watch_answer(const uint8_t* data, size_t len);
  void released(const std::string& name, const Grant& grant = {}) {
    if (released_fn_ && watches_.count(name)) released_fn_(name, grant);
  }
  bool name_of_lease_key(const std::string& key, std::string* name) const {
    const std::string& dir = keys_.leases_dir();
    if (key.compare(0, dir.size(), dir) != 0) return false;
    *name = key.substr(dir.size());
    return true;
  }

  uv_loop_t* loop_;
  LogFn log_;
  std::string client_name_;
  EtcdUrl url_;
  EtcdKeys keys_;
  size_t endpoint_ = 0;  // url_.endpoints[endpoint_]: where the next connection goes
  OpenHandles handles_;
  CallTable<Call> calls_;
  uv_timer_t anchor_;

  std::shared_ptr<SSL_CTX> tls_;        // etcds://
  GrpcConn* authenticating_ = nullptr;  // the connection waiting for its token
  GrpcConn* conn_ = nullptr;            // the connection new calls go out on
  std::set<GrpcConn*> conns_;           // every connection not closed yet
  bool resolving_ = false;
  std::deque<std::function<void(GrpcConn*)>> waiting_;  // for a connection
  std::string connect_error_;

  std::shared_ptr<KaStream> ka_;  // the LeaseKeepAlive stream on conn_
  int32_t watch_stream_ = 0;      // the Watch stream on conn_
  uint32_t max_stream_id_ = kMaxStreamId;

  // The entries each session of ours holds, by key, as acquire, acquire_permit
  // and keep-alive last saw them.
  std::map<int64_t, std::map<std::string, Held>> owned_;
  // Whether an acquire of ours answered Ok for `name` with `token` (a lease a
  // keep-alive only listed, e.g. a first send whose answer was lost, is not).
  bool answered_ok(int64_t lease, const std::string& name, int64_t token) const {
    auto l = owned_.find(lease);
    if (l == owned_.end()) return false;
    auto n = l->second.find(keys_.lease(name));
    return n != l->second.end() && n->second.answered &&
           static_cast<int64_t>(n->second.entry.token) == token;
  }
  // What this client last saw of each permit resource (at most
  // kMaxHeldRevisions; then it starts again from nothing).
  std::map<std::string, PermitView> views_;
  std::map<std::string, int64_t> held_revision_;  // name -> a Held answer's revision
  // Whether the last release of a name here found candidates (at most
  // kMaxHeldRevisions): its next release reads them first.
  std::map<std::string, bool> waited_;
  std::deque<std::string> held_order_;

  ReleasedFn released_fn_;
  std::map<std::string, Watch> watches_;
  std::map<int64_t, std::string> watch_names_;  // watch id -> name
  int64_t next_watch_id_ = 0;
};

// --- calls ---------------------------------------------------------------------

void EtcdBackend::fail(uint64_t id, Outcome o, const std::string& err) {
  const Call* c = calls_.find(id);
  if (!c) return;
  switch (c->kind) {
    case Kind::kOpen:
      return deliver(id, &Call::open, failure<OpenReply>(o, err));
    case Kind::kKeepAlive:
      return deliver(id, &Call::keep_alive, failure<KeepAliveReply>(o, err));
    case Kind::kAcquire:
      return deliver(id, &Call::acquire, failure<AcquireReply>(o, err));
    case Kind::kDone:
      return deliver(id, &Call::done, failure<DoneReply>(o, err));
    case Kind::kInspect:
      return deliver(id, &Call::inspect, failure<InspectReply>(o, err));
    case Kind::kRelease:
      return deliver(id, &Call::release, failure<ReleaseReply>(o, err));
    case Kind::kRun:
      return deliver(id, &Call::run, failure<RunReply>(o, err));
  }
}

// The caller gave up on `c` (backend.h): its streams are reset. Other streams
// of the connection go on (HTTP/2 multiplexes them: one unanswered call
// blocks nothing), unless the connection has read nothing for kSilentMs with
// a message of ours waiting: then it is taken for dead and dropped (its other
// calls fail with it; the next call opens a new one), as no call times out
// here (ADR 0039).
void EtcdBackend::abandoned(Call* c) {
  GrpcConn* conn = conns_.count(c->conn) ? c->conn : nullptr;
  const bool stuck = conn && !conn->broken() && conn->silent_ms() >= kSilentMs;
  const uint64_t id = c->id;
  for (const auto& [on, s] : c->streams) {
    if (conns_.count(on)) on->cancel(s);
  }
  if (c->kind == Kind::kKeepAlive) drop_stuck_keep_alive_stream(id);
  fail(id, Outcome::kError, "etcd: no answer (the caller gave up)");
  if (stuck) {
    log(kLogWarn,
        "etcd: no answer from " + conn->authority() + " for a call: dropping the connection");
    conn->fail("no answer from " + conn->authority());
  }
}

// A renewal the caller gave up on while it waited on the LeaseKeepAlive
// stream: etcd answers a stream's renewals one after another, and a member
// that forwards one to a leader it can no longer reach holds every later one
// behind it for its request timeout (6 s, measured under a SIGSTOP of
// the leader). The stream is reset, and the next renewal opens a new one,
// which the member forwards to the leader it knows by then; renewals still
// waiting on the old stream go again on the new one (renewing twice is
// harmless).
void EtcdBackend::drop_stuck_keep_alive_stream(uint64_t id) {
  if (!ka_) return;
  auto it = std::find(ka_->waiting.begin(), ka_->waiting.end(), id);
  if (it == ka_->waiting.end()) return;
  ka_->waiting.erase(it);
  std::shared_ptr<KaStream> stuck = std::move(ka_);
  ka_.reset();
  if (conns_.count(stuck->conn)) stuck->conn->cancel(stuck->id);  // no callback follows
  std::deque<uint64_t> waiting;
  waiting.swap(stuck->waiting);
  for (uint64_t other : waiting) send_keep_alive(other);
}

// --- the connection ------------------------------------------------------------

void EtcdBackend::with_conn(std::function<void(GrpcConn*)> fn) {
  if (conn_ && !conn_->broken() && conn_->draining()) retire(conn_, false);
  if (conn_ && !conn_->broken()) {
    if (url_.user.empty() || !conn_->token().empty()) return fn(conn_);
    waiting_.push_back(std::move(fn));
    if (authenticating_ != conn_) authenticate(conn_);
    return;
  }
  waiting_.push_back(std::move(fn));
  if (!resolving_) connect();
}

void EtcdBackend::authenticate(GrpcConn* conn) {
  authenticating_ = conn;
  std::string request = authenticate_request(url_.user, url_.password);
  auto answer = std::make_shared<std::string>();
  const int32_t s = conn->start(
      kAuthenticate, request, true,
      [answer](const uint8_t* d, size_t n) { answer->assign(reinterpret_cast<const char*>(d), n); },
      [this, conn, answer](int status, const std::string& err) {
        if (handles_.closing() || authenticating_ != conn) return;
        authenticating_ = nullptr;
        std::string token;
        const bool ok = status == 0 &&
                        decode_authenticate(reinterpret_cast<const uint8_t*>(answer->data()),
                                            answer->size(), &token) &&
                        !token.empty();
        wipe_secret(answer.get());
        if (ok) {
          conn->set_token(std::move(token));
          wipe_secret(&token);
        } else {
          // The user's name is shown, never the password.
          connect_error_ = status == kGrpcBroken
                               ? err
                               : "authentication as \"" + url_.user + "\" refused: grpc-status " +
                                     std::to_string(status) + ": " + err;
        }
        auto waiting = std::move(waiting_);
        waiting_.clear();
        for (auto& fn : waiting) fn(ok ? conn : nullptr);
        if (ok && conn == conn_ && !watches_.empty() && !watch_stream_) open_watch_stream(conn);
      });
  wipe_secret(&request);
  if (!s) authenticating_ = nullptr;  // broken: on_broken follows
}

struct Resolve {
  EtcdBackend* self;
  uv_getaddrinfo_t req;
};

void EtcdBackend::connect() {
  leave(conn_);  // broken, and not reported yet
  const std::string& host = url_.endpoints[endpoint_].host;
  if (is_ip_literal(host)) return connect_to(host);
  auto* r = new Resolve{this, {}};
  r->req.data = r;
  struct addrinfo hints {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  const int rc = uv_getaddrinfo(loop_, &r->req, on_resolved, host.c_str(), nullptr, &hints);
  if (rc != 0) {
    delete r;
    return connect_failed("cannot resolve " + host + ": " + uv_strerror(rc));
  }
  resolving_ = true;
  handles_.opened();  // until on_resolved
}

void EtcdBackend::on_resolved(uv_getaddrinfo_t* req, int status, struct addrinfo* res) {
  auto* r = static_cast<Resolve*>(req->data);
  EtcdBackend* self = r->self;
  delete r;
  const std::vector<std::string> addrs = resolved_addresses(status, res);
  uv_freeaddrinfo(res);
  self->resolving_ = false;
  if (!self->handles_.closing()) {
    if (addrs.empty()) {
      self->connect_failed("cannot resolve " + self->url_.endpoints[self->endpoint_].host + ": " +
                           (status ? uv_strerror(status) : "no address"));
    } else {
      self->connect_to(addrs.front());
    }
  }
  self->handles_.closed();
}

void EtcdBackend::connect_failed(const std::string& why) {
  connect_error_ = why;
  next_endpoint();
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& fn : waiting) fn(nullptr);
}

void EtcdBackend::connect_to(const std::string& ip) {
  struct sockaddr_storage sa {};
  const int port = url_.endpoints[endpoint_].port;
  if (uv_ip4_addr(ip.c_str(), port, reinterpret_cast<struct sockaddr_in*>(&sa)) != 0 &&
      uv_ip6_addr(ip.c_str(), port, reinterpret_cast<struct sockaddr_in6*>(&sa)) != 0) {
    return connect_failed("bad address " + ip);
  }
  const EtcdEndpoint& e = url_.endpoints[endpoint_];
  conn_ = new GrpcConn(
      loop_, &handles_, reinterpret_cast<const struct sockaddr*>(&sa), authority(),
      [this](GrpcConn* conn, const std::string& why) { on_broken(conn, why); }, tls_,
      url_.tls_server_name.empty() ? e.host : url_.tls_server_name, max_stream_id_);
  conn_->on_drain([this](GrpcConn* conn, const std::string& why) {
    log(kLogInfo, "etcd: " + conn->authority() + ": " + why + ": new calls go to a new connection");
    retire(conn, true);
  });
  if (tls_) conn_->on_secure([this](const std::string& what) { log(kLogInfo, "etcd: " + what); });
  conns_.insert(conn_);
  // The calls go out once the token came.
  if (!url_.user.empty()) return authenticate(conn_);
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& fn : waiting) fn(conn_);
  // Watches survive the connection: made again on the new one, each
  // reporting its name once (a release meanwhile went unseen).
  if (!watches_.empty() && conn_ && !watch_stream_) open_watch_stream(conn_);
}

void EtcdBackend::on_broken(GrpcConn* conn, const std::string& why) {
  if (conn->draining() && why.rfind("drained", 0) == 0) {
    // Its stream ids ran out with no call since: the next connection goes
    // to the same member.
    retire(conn, false);
    log(kLogInfo, "etcd: connection to " + conn->authority() + " closed: " + why);
  } else {
    log(kLogWarn, "etcd: connection to " + conn->authority() + " lost: " + why);
  }
  conns_.erase(conn);
  conn->close();
  leave(conn);
}

// New calls no longer go to `conn`: the next connection goes to the next
// endpoint (a member down or cut off is left at once; the session's lease
// lives on in the cluster), and keep-alives waiting on it fail.
void EtcdBackend::leave(GrpcConn* conn) {
  if (!conn || conn != conn_) return;
  next_endpoint();
  conn_ = nullptr;
  watch_stream_ = 0;
  // Its keep-alives fail with the stream (its CloseFn runs when it broke).
  ka_.reset();
}

void EtcdBackend::retire(GrpcConn* conn, bool next) {
  if (!conn || conn != conn_) return;
  if (next) next_endpoint();
  conn_ = nullptr;
  // The keep-alive stream is half-closed: etcd answers the renewals it was
  // sent, then ends it. The watch stream never ends by itself (a graceful
  // stop would wait for it): it is reset, and made again on the new
  // connection, each name reported once.
  if (ka_ && ka_->conn == conn) conn->finish(ka_->id);
  ka_.reset();
  if (watch_stream_) conn->cancel(watch_stream_);
  watch_stream_ = 0;
  if (authenticating_ == conn) authenticating_ = nullptr;  // its waiting calls move on
  if ((!waiting_.empty() || !watches_.empty()) && !resolving_) connect();
}

void EtcdBackend::rpc(Call* c, const char* path, std::string request, AnswerFn fn, size_t tries,
                      bool reauthed) {
  const uint64_t id = c->id;
  with_conn([this, id, path, request = std::move(request), fn = std::move(fn), tries,
             reauthed](GrpcConn* conn) {
    Call* c = calls_.find(id);
    if (!c || c->abandoned) return;
    if (!conn) return preset(c, Outcome::kError, "etcd: " + connect_error_);
    auto answer = std::make_shared<std::string>();
    const int32_t s = conn->start(
        path, request, true,
        [answer](const uint8_t* d, size_t n) {
          answer->assign(reinterpret_cast<const char*>(d), n);
        },
        [this, id, path, request, answer, fn, conn, tries, reauthed, token = conn->token()](
            int status, const std::string& err) {
          Call* c = calls_.find(id);
          if (!c || c->abandoned || handles_.closing()) return;
          if (status != 0 && !reauthed && !url_.user.empty() && token_refused(err) &&
              conns_.count(conn)) {
            log(kLogInfo, "etcd: the auth token was refused (" + err + "): authenticating again");
            if (conn->token() == token) conn->set_token("");
            return rpc(c, path, request, fn, tries, true);
          }
          // Not processed (GOAWAY, REFUSED_STREAM): sent again, on a new
          // connection when this one drains.
          if (status == kGrpcRefused) return rpc(c, path, request, fn, tries, reauthed);
          // Never sent (the connection failed before it was up), or sent and
          // the connection broke before the answer (a member stopping
          // without GOAWAY, as etcd 3.4.23 does on SIGTERM): the next member
          // gets the call, once per member of the URL. A repeat is harmless
          // for every call but LeaseGrant (a second lease), which fails
          // (the core opens the session again); a repeated acquire that
          // finds the name held by its own session won it (acquire()).
          if (status == kGrpcBroken && tries + 1 < url_.endpoints.size() &&
              (!conn->connected() || path != kGrant)) {
            if (conn->connected()) c->resent = true;
            leave(conn);
            return rpc(c, path, request, fn, tries + 1);
          }
          fn(c, status, err, *answer);
        });
    if (!s) return preset(c, Outcome::kError, "etcd: connection lost");
    c->conn = conn;
    c->streams.emplace_back(conn, s);
  });
}

// --- the session's operations ------------------------------------------------------

Backend::CallRef EtcdBackend::open_session(Duration lease, Duration timeout, OpenCb cb) {
  Call* c = new_call(Kind::kOpen, timeout);
  c->open = std::move(cb);
  const int64_t lease_ms = to_ms_ceil(lease);
  if (lease_ms < kMinLeaseMs) {
    preset(c, Outcome::kError,
           "etcd: rule lease-duration >= " + std::to_string(kMinLeaseMs) + " ms failed (is " +
               std::to_string(lease_ms) +
               " ms): etcd leases are whole seconds, and a crashed holder's names would stay "
               "taken for more than twice the lease");
    return c->id;
  }
  c->lease_duration = lease;
  const int64_t ttl_s = (lease_ms + 999) / 1000;
  rpc(c, kGrant, grant_request(ttl_s),
      [this](Call* c, int status, const std::string& err, const std::string& answer) {
        GrantAnswer g;
        if (status != 0) return fail(c->id, Outcome::kError, status_text(status, err));
        if (!decode_grant(reinterpret_cast<const uint8_t*>(answer.data()), answer.size(), &g) ||
            g.id <= 0 || g.ttl <= 0) {
          return fail(c->id, Outcome::kError,
                      "etcd: LeaseGrant refused" + (g.error.empty() ? "" : ": " + g.error));
        }
        const std::string sid = session_id(g.id);
        const Duration granted = std::min<Duration>(c->lease_duration, seconds(g.ttl));
        c->lease = g.id;
        rpc(c, kPut, put_request(keys_.session(sid), client_name_, g.id),
            [this, sid, granted](Call* c, int status, const std::string& err, const std::string&) {
              if (status != 0) return fail(c->id, Outcome::kError, status_text(status, err));
              owned_[c->lease];
              OpenReply r;
              r.outcome = Outcome::kOk;
              r.session_id = sid;
              r.remaining = granted;
              deliver(c->id, &Call::open, r);
            });
      });
  return c->id;
}

Backend::CallRef EtcdBackend::keep_alive(const std::string& session, Duration lease,
                                         Duration timeout, KeepAliveCb cb) {
  Call* c = new_call(Kind::kKeepAlive, timeout);
  c->keep_alive = std::move(cb);
  if (!parse_session_id(session, &c->lease)) {
    preset(c, Outcome::kExpired, "etcd: no such session");
    return c->id;
  }
  c->lease_duration = lease;
  send_keep_alive(c->id);
  rpc(c, kTimeToLive, time_to_live_request(c->lease),
      [this](Call* c, int status, const std::string& err, const std::string& answer) {
        if (status == kGrpcNotFound)
          return fail(c->id, Outcome::kExpired, status_text(status, err));
        if (status != 0) return fail(c->id, Outcome::kError, status_text(status, err));
        if (!decode_time_to_live(reinterpret_cast<const uint8_t*>(answer.data()), answer.size(),
                                 &c->ttl)) {
          return fail(c->id, Outcome::kError, "etcd: undecodable LeaseTimeToLive answer");
        }
        c->ttl_answered = true;
        keep_alive_step(c);
      });
  return c->id;
}

// The keep-alive message of call `id` on the connection's LeaseKeepAlive
// stream (opened with the first one).
void EtcdBackend::send_keep_alive(uint64_t id) {
  with_conn([this, id](GrpcConn* conn) {
    Call* c = calls_.find(id);
    if (!c || c->abandoned) return;
    if (!conn) return preset(c, Outcome::kError, "etcd: " + connect_error_);
    const std::string msg = keep_alive_request(c->lease);
    if (ka_ && ka_->conn == conn) {
      conn->send(ka_->id, msg);
    } else {
      auto ka = std::make_shared<KaStream>();
      ka->conn = conn;
      ka->id = conn->start(
          kKeepAlive, msg, false,
          [this, ka](const uint8_t* d, size_t n) {
            if (ka->waiting.empty()) return;
            const uint64_t id = ka->waiting.front();
            ka->waiting.pop_front();
            Call* c = calls_.find(id);
            if (!c || c->abandoned) return;
            int64_t ttl = 0;
            if (!decode_keep_alive(d, n, &ttl)) {
              return fail(id, Outcome::kError, "etcd: undecodable LeaseKeepAlive answer");
            }
            c->ka_answered = true;
            c->ka_ttl = ttl;
            keep_alive_step(c);
          },
          [this, ka, conn](int status, const std::string& err) {
            if (ka_ == ka) ka_.reset();
            if (conn == conn_ && token_refused(err)) conn->set_token("");  // a new one next
            auto waiting = std::move(ka->waiting);
            ka->waiting.clear();
            for (uint64_t id : waiting) {
              // Not processed (GOAWAY), ended once drained with renewals
              // unanswered, or the connection broke: renewing twice is
              // harmless, so they go again (once per member when broken).
              Call* c = calls_.find(id);
              if (c && (status == kGrpcRefused || status == 0 ||
                        (status == kGrpcBroken && ++c->ka_resends < url_.endpoints.size()))) {
                send_keep_alive(id);
              } else {
                fail(id, Outcome::kError, status_text(status, err));
              }
            }
          });
      if (!ka->id) return preset(c, Outcome::kError, "etcd: connection lost");
      ka_ = ka;
    }
    ka_->waiting.push_back(id);
    c->conn = conn;
  });
}

// Once both halves answered: Expired, or the leases the session holds (the
// tokens of any it did not know read first: an acquire whose answer was
// lost, which the core then frees).
void EtcdBackend::keep_alive_step(Call* c) {
  if (!c->ka_answered || !c->ttl_answered || c->lookups > 0) return;
  // LeaseTimeToLive's TTL is whole seconds rounded down (0 for a live lease
  // with less than a second left); -1 names an unknown lease.
  if (c->ka_ttl <= 0 || c->ttl.ttl < 0) {
    owned_.erase(c->lease);
    return fail(c->id, Outcome::kExpired, "etcd: the session's lease expired");
  }
  if (!c->listed) {
    c->listed = true;
    auto& known = owned_[c->lease];
    std::map<std::string, Held> still;
    std::set<std::string> listed;
    std::vector<std::string> unknown;  // keys read with a Range
    for (const std::string& key : c->ttl.keys) {
      if (!entry_key(key) || !listed.insert(key).second) continue;
      auto it = known.find(key);
      if (it != known.end()) {
        c->owned.push_back(it->second.entry);
        still.insert(*it);
      } else {
        unknown.push_back(key);
      }
    }
    for (const auto& [key, held] : known) {
      if (listed.count(key)) continue;
      if (held.rev > c->ttl.revision) {
        // Won after the answer was read (the revision that wrote it is
        // above the answer's): not listed yet, and stays known.
        still.insert({key, held});
      } else {
        // Deleted, or missed: the answer's keys are the raft leader's and
        // its header revision is our member's, read later (ADR 0045). A
        // linearizable Range tells.
        unknown.push_back(key);
      }
    }
    known.swap(still);
    c->ttl.keys.clear();
    for (const std::string& key : unknown) {
      ++c->lookups;
      rpc(c, kRange, range_request(key, ""),
          [this, key](Call* c, int status, const std::string& err, const std::string& answer) {
            RangeAnswer r;
            if (status != 0) return fail(c->id, Outcome::kError, status_text(status, err));
            if (!decode_range(reinterpret_cast<const uint8_t*>(answer.data()), answer.size(), &r)) {
              return fail(c->id, Outcome::kError, "etcd: undecodable Range answer");
            }
            Held held;
            std::string sid;
            if (!r.kvs.empty() && r.kvs[0].lease == c->lease && entry_of(r.kvs[0], &held, &sid)) {
              c->owned.push_back(held.entry);
              // Known from now on: the next keep-alive reads it no more.
              if (auto o = owned_.find(c->lease); o != owned_.end()) o->second[key] = held;
            }
            --c->lookups;
            keep_alive_step(c);
          });
    }
    if (c->lookups > 0) return;
  }
  KeepAliveReply r;
  r.outcome = Outcome::kOk;
  r.remaining = std::min<Duration>(c->lease_duration, seconds(c->ka_ttl));
  r.owned = std::move(c->owned);
  deliver(c->id, &Call::keep_alive, r);
}

Backend::CallRef EtcdBackend::acquire(const std::string& session, const std::string& name,
                                      Duration timeout, AcquireCb cb) {
  Call* c = new_call(Kind::kAcquire, timeout);
  c->acquire = std::move(cb);
  if (!parse_session_id(session, &c->lease)) {
    preset(c, Outcome::kExpired, "etcd: no such session");
    return c->id;
  }
  rpc(c, kTxn, acquire_request(keys_, name, session, c->lease),
      [this, name, session](Call* c, int status, const std::string& err,
                            const std::string& answer) {
        TxnAnswer t;
        if (!acquire_answer(c, status, err, answer, &t)) return;
        AcquireReply r;
        // Sent again after a broken connection and held by this session:
        // the first try won it (the core holds one acquire per name at a
        // time), with the key's token. Unless that token is an earlier win
        // we answered: that term's release has not freed the key yet, and
        // adopting its token again would hand one token to two terms (Held,
        // as the first try would have been answered). A keep-alive that
        // listed the first try's key meanwhile did not answer it.
        const bool won_before = !t.succeeded && c->resent && !t.kvs.empty() &&
                                t.kvs[0].lease == c->lease && t.kvs[0].value == session &&
                                t.kvs[0].mod_revision > 0 &&
                                !answered_ok(c->lease, name, t.kvs[0].mod_revision);
        if (t.succeeded || won_before) {
          r.outcome = Outcome::kOk;
          r.token = static_cast<uint64_t>(won_before ? t.kvs[0].mod_revision : t.revision);
          r.run = run_of(t.kvs, name);
          owned_[c->lease][keys_.lease(name)] = {OwnedLease{name, r.token},
                                                 static_cast<int64_t>(r.token), true};
        } else {
          r.outcome = Outcome::kHeld;
          note_held(name, t.revision);
        }
        deliver(c->id, &Call::acquire, r);
      });
  return c->id;
}

bool EtcdBackend::acquire_answer(Call* c, int status, const std::string& err,
                                 const std::string& answer, TxnAnswer* t) {
  // A put with a lease etcd does not know: our session is gone.
  if (status == kGrpcNotFound) {
    fail(c->id, Outcome::kExpired, status_text(status, err));
    return false;
  }
  if (status != 0) {
    fail(c->id, Outcome::kError, status_text(status, err));
    return false;
  }
  if (!decode_txn(reinterpret_cast<const uint8_t*>(answer.data()), answer.size(), t) ||
      t->revision <= 0) {
    fail(c->id, Outcome::kError, "etcd: undecodable Txn answer");
    return false;
  }
  return true;
}

// The revision of a Held answer for `name` (a lease's, or a permit resource),
// where its watch starts.
void EtcdBackend::note_held(const std::string& name, int64_t revision) {
  if (held_revision_.emplace(name, revision).second) {
    held_order_.push_back(name);
    if (held_order_.size() > kMaxHeldRevisions) {
      held_revision_.erase(held_order_.front());
      held_order_.pop_front();
    }
  } else {
    held_revision_[name] = revision;
  }
}

void EtcdBackend::forget(int64_t lease, const std::string& key, uint64_t token) {
  auto it = owned_.find(lease);
  if (it == owned_.end()) return;
  auto k = it->second.find(key);
  if (k != it->second.end() && k->second.entry.token == token) it->second.erase(k);
}

bool EtcdBackend::entry_of(const Kv& kv, Held* held, std::string* sid) const {
  std::string name;
  if (kv.create_revision <= 0) return false;
  held->rev = kv.create_revision;
  if (name_of_lease_key(kv.key, &name)) {
    // Its token: the put that attached it to this holder (an acquire's
    // create, or a handoff's put).
    held->rev = kv.mod_revision;
    held->entry = OwnedLease{name, static_cast<uint64_t>(kv.mod_revision)};
    *sid = kv.value;
    return true;
  }
  CandidateValue v;
  if (keys_.parse_candidate(kv.key, &name, sid)) {
    held->entry =
        OwnedLease{name, 0, PermitKind::kCandidate, static_cast<uint64_t>(kv.create_revision)};
    return parse_candidate_value(kv.value, &v) && v.sid == *sid;
  }
  OwnedLease& e = held->entry;
  if (!keys_.parse_permit(kv.key, &name, &e.permit) ||
      !parse_permit_value(kv.value, &e.kind, sid, &e.token)) {
    return false;
  }
  e.name = name.substr(name.find('/') + 1);  // the resource less its "sem/" or "rw/"
  return true;
}

Backend::CallRef EtcdBackend::release(const std::string& session, const std::string& name,
                                      uint64_t token, Duration timeout, DoneCb cb) {
  Call* c = new_call(Kind::kDone, timeout);
  c->done = std::move(cb);
  if (!parse_session_id(session, &c->lease)) {
    preset(c, Outcome::kExpired, "etcd: no such session");
    return c->id;
  }
  // Every release hands over when someone waits (ADR 0047).
  handoff_start(c, name, token, {}, [this](Call* c, const ReleaseReply& r) {
    DoneReply d;
    d.outcome = r.outcome;
    d.error = r.error;
    deliver(c->id, &Call::done, d);
  });
  return c->id;
}

// --- candidates and the handoff (ADR 0047) -------------------------------------
//
// A candidate is the key {p}/c/{name}/{sid}, attached to its session's etcd
// lease: live by construction (etcd deletes it with the lease), its id its
// create_revision (one round trip, ordered by arrival, never reused; the core
// keeps one contender per name per session). A release must read the
// candidates before it can choose (a Txn writes only what it was told): a
// serializable Range (the member's own state, no raft round), then one Txn
// that frees the lease or hands it over, guarded by the chosen key's
// create_revision (it is still there, so its lease is live) and by every
// candidate key's mod_revision being at most the Range's revision (none came
// or changed priority since; one that left changes the choice only if it is
// the chosen one). A lost guard (a member behind, or candidates moving) reads
// the candidates in the same Txn and tries again. Where the last release of
// the name found nobody waiting, the Range is skipped: the first Txn's view
// is "no candidate key at all" (revision 0), so a plain release stays one
// Txn, and a waiting candidate makes it two Txns (0.3-0.5 x an idle Txn
// slower than the Range and one, measured side by side).

// After this many handoff Txns lost to candidates coming and going, the
// release frees the lease instead (the candidates' attempts take it).
constexpr int kHandoffTries = 4;

std::function<void(const std::string& name)> test_before_handoff;

Backend::CallRef EtcdBackend::acquire_candidate(const std::string& session, const std::string& name,
                                                const CandidateAsk& ask, Duration timeout,
                                                AcquireCb cb) {
  if (ask.empty()) return acquire(session, name, timeout, std::move(cb));
  Call* c = new_call(Kind::kAcquire, timeout);
  c->acquire = std::move(cb);
  if (!parse_session_id(session, &c->lease)) {
    preset(c, Outcome::kExpired, "etcd: no such session");
    return c->id;
  }
  const std::string value = candidate_value({session, ask.client, ask.priority});
  rpc(c, kTxn, acquire_candidate_request(keys_, name, session, c->lease, value, ask.leave),
      [this, name, session, ask](Call* c, int status, const std::string& err,
                                 const std::string& answer) {
        TxnAnswer t;
        if (!acquire_answer(c, status, err, answer, &t)) return;
        const std::string lk = keys_.lease(name), ck = keys_.candidate(name, session);
        auto& mine = owned_[c->lease];
        const Kv* holder = nullptr;
        const Kv* entry = nullptr;
        for (const Kv& kv : t.kvs) {
          if (kv.key == lk) holder = &kv;
          if (kv.key == ck && kv.lease == c->lease) entry = &kv;
        }
        // Held by this session through a grant (its entry gone, a token no
        // acquire of ours answered; a keep-alive may have listed it), or won
        // by a first send whose answer was lost.
        const bool granted = !t.succeeded && holder && holder->lease == c->lease &&
                             holder->value == session && holder->mod_revision > 0 &&
                             (ask.id != 0 || c->resent) && !entry &&
                             !answered_ok(c->lease, name, holder->mod_revision);
        AcquireReply r;
        if (t.succeeded || granted) {
          r.outcome = Outcome::kOk;
          r.token = static_cast<uint64_t>(granted ? holder->mod_revision : t.revision);
          r.run = run_of(t.kvs, name);
          mine[lk] = {OwnedLease{name, r.token}, static_cast<int64_t>(r.token), true};
          mine.erase(ck);  // the grant took it
        } else {
          r.outcome = Outcome::kHeld;
          if (entry && ask.leave) {  // a try-once ask names none (as memory://)
            r.permit = static_cast<uint64_t>(entry->create_revision);
            mine[ck] = {OwnedLease{name, 0, PermitKind::kCandidate, r.permit},
                        entry->create_revision};
          }
          note_held(name, t.revision);
        }
        deliver(c->id, &Call::acquire, r);
      });
  return c->id;
}

Backend::CallRef EtcdBackend::release_handoff(const std::string& session, const std::string& name,
                                              uint64_t token, const std::string& target,
                                              Duration timeout, ReleaseCb cb) {
  Call* c = new_call(Kind::kRelease, timeout);
  c->release = std::move(cb);
  if (!parse_session_id(session, &c->lease)) {
    preset(c, Outcome::kExpired, "etcd: no such session");
    return c->id;
  }
  handoff_start(c, name, token, target,
                [this](Call* c, const ReleaseReply& r) { deliver(c->id, &Call::release, r); });
  return c->id;
}

void EtcdBackend::handoff_start(Call* c, const std::string& name, uint64_t token,
                                const std::string& target,
                                std::function<void(Call* c, const ReleaseReply& r)> done) {
  auto h = std::make_shared<Handoff>();
  h->name = name;
  h->token = static_cast<int64_t>(token);
  h->target = target;
  h->done = [this, h = h.get(), done = std::move(done)](Call* c, const ReleaseReply& r) {
    if (waited_.size() >= kMaxHeldRevisions && !waited_.count(h->name)) waited_.clear();
    waited_[h->name] = h->waited;
    done(c, r);
  };
  auto w = waited_.find(name);
  if (w == waited_.end() || !w->second) {
    // Nobody waited at the last release here: one Txn frees the lease if no
    // candidate key exists (view revision 0), and reads them otherwise.
    return handoff_decide(c, h, {}, 0);
  }
  // Someone waited last time: the candidates as this member has them (no
  // raft round; the Txn's guard catches a view that was behind).
  const std::string dir = keys_.candidate_dir(name);
  rpc(c, kRange, range_request(dir, prefix_end(dir), true),
      [this, h](Call* c, int status, const std::string& err, const std::string& answer) {
        RangeAnswer r;
        if (status != 0) {
          return h->done(c, failure<ReleaseReply>(Outcome::kError, status_text(status, err)));
        }
        if (!decode_range(reinterpret_cast<const uint8_t*>(answer.data()), answer.size(), &r)) {
          return h->done(c,
                         failure<ReleaseReply>(Outcome::kError, "etcd: undecodable Range answer"));
        }
        handoff_decide(c, h, r.kvs, r.revision);
      });
}

void EtcdBackend::handoff_send(Call* c, std::shared_ptr<Handoff> h, std::string request) {
  rpc(c, kTxn, std::move(request),
      [this, h](Call* c, int status, const std::string& err, const std::string& answer) {
        TxnAnswer t;
        if (status != 0) {
          return h->done(c, failure<ReleaseReply>(Outcome::kError, status_text(status, err)));
        }
        if (!decode_txn(reinterpret_cast<const uint8_t*>(answer.data()), answer.size(), &t)) {
          return h->done(c, failure<ReleaseReply>(Outcome::kError, "etcd: undecodable Txn answer"));
        }
        handoff_answer(c, h, t);
      });
}

void EtcdBackend::handoff_answer(Call* c, const std::shared_ptr<Handoff>& h, const TxnAnswer& t) {
  const std::string lk = keys_.lease(h->name);
  if (t.succeeded) {
    // Freed (nobody waits, or the last resort), or handed to the chosen
    // one: its token is this Txn's revision (the lease key's mod_revision).
    forget(c->lease, lk, static_cast<uint64_t>(h->token));
    ReleaseReply r;
    r.outcome = Outcome::kOk;
    if (!h->chosen_sid.empty()) r.grant = Grant{h->chosen_sid, static_cast<uint64_t>(t.revision)};
    r.target_absent = !h->target.empty() && h->chosen_client != h->target;
    return h->done(c, r);
  }
  auto holder =
      std::find_if(t.kvs.begin(), t.kvs.end(), [&](const Kv& kv) { return kv.key == lk; });
  if (holder == t.kvs.end() || holder->lease != c->lease || holder->mod_revision != h->token) {
    // Not this term's any more (released, expired, or never): nothing to do.
    forget(c->lease, lk, static_cast<uint64_t>(h->token));
    ReleaseReply r;
    r.outcome = Outcome::kOk;
    return h->done(c, r);
  }
  handoff_decide(c, h, t.kvs, t.revision);  // what the lost guard read
}

// The Txn of a release, decided from the candidates read at `revision`.
void EtcdBackend::handoff_decide(Call* c, const std::shared_ptr<Handoff>& h,
                                 const std::vector<Kv>& kvs, int64_t revision) {
  const std::string own = session_id(c->lease);
  const Kv* chosen = nullptr;
  CandidateValue best;
  bool best_is_target = false;
  for (const Kv& kv : kvs) {
    CandidateValue v;
    std::string n, sid;
    if (!keys_.parse_candidate(kv.key, &n, &sid) || n != h->name || sid == own ||
        !parse_candidate_value(kv.value, &v) || v.sid != sid || kv.lease <= 0) {
      continue;
    }
    // The target's entry, else the highest priority, then the earliest.
    const bool is_target = !h->target.empty() && v.client == h->target;
    const bool better =
        !chosen || (is_target != best_is_target   ? is_target
                    : v.priority != best.priority ? v.priority > best.priority
                                                  : kv.create_revision < chosen->create_revision);
    if (better) {
      chosen = &kv;
      best = v;
      best_is_target = is_target;
    }
  }
  h->chosen_sid = chosen ? best.sid : "";
  h->chosen_client = chosen ? best.client : "";
  h->waited |= chosen != nullptr;
  if (++h->tries >= kHandoffTries) {
    // Candidates keep coming and going: free the lease (their attempts take it).
    h->chosen_sid.clear();
    h->chosen_client.clear();
    return handoff_send(c, h, release_request(keys_, h->name, c->lease, h->token));
  }
  if (chosen && test_before_handoff) test_before_handoff(h->name);
  handoff_send(c, h,
               handoff_request(keys_, h->name, c->lease, h->token, chosen, best.sid, revision));
}

// The release Txn `request` of `key`; its answer forgets the entry, and a
// permit entry it deleted leaves the view of its `resource` (which stays
// one the counter's guard can trust: entries only went).
Backend::CallRef EtcdBackend::released_by(Call* c, std::string request, const std::string& key,
                                          uint64_t token, const std::string& resource) {
  rpc(c, kTxn, std::move(request),
      [this, key, token, resource](Call* c, int status, const std::string& err,
                                   const std::string& answer) {
        if (status != 0) return fail(c->id, Outcome::kError, status_text(status, err));
        forget(c->lease, key, token);
        TxnAnswer t;
        auto v = resource.empty() ? views_.end() : views_.find(resource);
        if (v != views_.end() &&
            decode_txn(reinterpret_cast<const uint8_t*>(answer.data()), answer.size(), &t) &&
            t.succeeded) {
          auto& entries = v->second.entries;
          entries.erase(std::remove_if(entries.begin(), entries.end(),
                                       [&](const Kv& kv) { return kv.key == key; }),
                        entries.end());
        }
        DoneReply r;
        r.outcome = Outcome::kOk;
        deliver(c->id, &Call::done, r);
      });
  return c->id;
}

// --- permits (ADR 0046) ---------------------------------------------------------
//
// etcd's compares cannot count keys, nor can a Txn write seq + 1 of a value it
// has not read: a semaphore's "fewer than N holders", the next permit id and
// the epoch are decided here, from the entries and counter this client last
// saw, and the Txn is guarded by the counter's mod_revision then. Every grant
// and intent writes the counter, and entries only go otherwise (a release, a
// session's etcd lease ending): under the guard the entries now are a subset
// of those seen, so a grant decided from them is safe. A Txn that grants
// only writes; one that answers Held or Refused reads the entries as they
// are, and a lost guard reads counter and entries: a Held or Refused decided
// from entries gone since, or a lost guard, tries again with what was read
// (a second round trip), up to kPermitTries. One round trip when this client saw the resource last
// (a name's cycles from one client, a new name); two when another client granted on it since.

Backend::CallRef EtcdBackend::acquire_permit(const std::string& session, const std::string& name,
                                             const PermitAsk& ask, Duration timeout, AcquireCb cb) {
  Call* c = new_call(Kind::kAcquire, timeout);
  c->acquire = std::move(cb);
  const bool semaphore = ask.kind == PermitKind::kSemaphore;
  if (!semaphore && ask.kind != PermitKind::kRead && ask.kind != PermitKind::kWrite) {
    preset(c, Outcome::kError, "etcd: no such permit kind");
    return c->id;
  }
  if (semaphore && ask.size == 0) {
    preset(c, Outcome::kError, "etcd: a semaphore's size must be positive");
    return c->id;
  }
  if (!parse_session_id(session, &c->lease)) {
    preset(c, Outcome::kExpired, "etcd: no such session");
    return c->id;
  }
  c->permit = std::make_shared<PermitState>();
  c->permit->name = name;
  c->permit->resource = permit_resource(ask.kind, name);
  c->permit->sid = session;
  c->permit->ask = ask;
  permit_try(c);
  return c->id;
}

void EtcdBackend::permit_try(Call* c) {
  PermitState& st = *c->permit;
  auto v = views_.find(st.resource);
  st.seen = v != views_.end() ? v->second : PermitView{};  // unseen: a new resource?
  st.plan = plan_permit(keys_, st.resource, st.seen, st.ask, st.sid, c->lease);
  ++st.tries;
  rpc(c, kTxn,
      permit_acquire_request(keys_.counter(st.resource), st.seen.mod, keys_.permit_dir(st.resource),
                             st.plan.outcome != Outcome::kOk, st.plan.ops),
      [this](Call* c, int status, const std::string& err, const std::string& answer) {
        TxnAnswer t;
        if (acquire_answer(c, status, err, answer, &t)) permit_answer(c, t);
      });
}

void EtcdBackend::permit_answer(Call* c, const TxnAnswer& t) {
  PermitState& st = *c->permit;
  const PermitPlan& plan = st.plan;
  const std::string dir = keys_.permit_dir(st.resource), counter = keys_.counter(st.resource);
  PermitView now;  // the resource as the Txn read it (the counter: unchanged, or read)
  if (t.succeeded) {
    now.mod = st.seen.mod;
    now.counter = st.seen.counter;
    // A grant reads nothing: the entries seen, less any gone since, are there.
    if (plan.outcome == Outcome::kOk) now.entries = st.seen.entries;
  }
  for (const Kv& kv : t.kvs) {
    if (kv.key.compare(0, dir.size(), dir) == 0) {
      now.entries.push_back(kv);
    } else if (kv.key == counter) {
      now.mod = kv.mod_revision;
      if (!parse_counter_value(kv.value, &now.counter)) {
        return fail(c->id, Outcome::kError, "etcd: unreadable permit counter " + counter);
      }
    }
  }
  // The plan's entry, written by this Txn. After a lost guard it is not
  // looked for: a session's acquires of one resource run side by side and
  // plan the same entry from the same view. So a try sent again after a
  // broken connection whose first send was applied leaves an entry no call
  // explains: the keep-alive lists it and the core releases it (ADR 0005).
  const PermitOp* put = plan.ops.empty() ? nullptr : &plan.ops.back();
  if (t.succeeded) {
    if (put) {
      now.mod = t.revision;
      now.counter = plan.counter;
    }
    for (const PermitOp& op : plan.ops) {
      if (op.put && op.key.compare(0, dir.size(), dir) == 0) {
        Kv kv;
        kv.key = op.key;
        kv.value = op.value;
        kv.create_revision = kv.mod_revision = t.revision;
        kv.lease = op.lease;
        now.entries.push_back(std::move(kv));
      } else if (!op.put) {
        now.entries.erase(std::remove_if(now.entries.begin(), now.entries.end(),
                                         [&](const Kv& kv) { return kv.key == op.key; }),
                          now.entries.end());
      }
    }
  }
  if (views_.size() >= kMaxHeldRevisions && !views_.count(st.resource)) views_.clear();
  views_[st.resource] = now;
  const bool done = t.succeeded;
  if (done && put) {
    Held held;
    std::string sid;
    Kv kv;
    kv.key = put->key;
    kv.value = put->value;
    kv.create_revision = t.revision;
    if (entry_of(kv, &held, &sid)) owned_[c->lease][put->key] = held;
    for (const PermitOp& op : plan.ops) {
      if (!op.put) forget(c->lease, op.key, 0);  // the writer's intent, deleted by its grant
    }
  }
  AcquireReply r;
  if (done && plan.outcome == Outcome::kOk) {
    r.outcome = Outcome::kOk;
    r.permit = plan.permit;
    r.token = plan.token;
    return deliver(c->id, &Call::acquire, r);
  }
  if (done && plan.permit != 0) st.ask.intent = plan.permit;  // left or kept
  // Held or Refused, decided from entries that may have gone since: what the
  // Txn read tells; a lost guard tries again with it.
  const bool again =
      !done ||
      plan_permit(keys_, st.resource, now, st.ask, st.sid, c->lease).outcome == Outcome::kOk;
  if (again && st.tries < kPermitTries) return permit_try(c);
  r.outcome = done ? plan.outcome : Outcome::kHeld;
  r.size = done ? plan.size : 0;
  if (st.ask.kind == PermitKind::kWrite && st.ask.leave_intent) r.permit = st.ask.intent;
  note_held(st.resource, t.revision);
  deliver(c->id, &Call::acquire, r);
}

Backend::CallRef EtcdBackend::release_permit(const std::string& session, const std::string& name,
                                             PermitKind kind, uint64_t permit, uint64_t token,
                                             Duration timeout, DoneCb cb) {
  Call* c = new_call(Kind::kDone, timeout);
  c->done = std::move(cb);
  if (!parse_session_id(session, &c->lease)) {
    preset(c, Outcome::kExpired, "etcd: no such session");
    return c->id;
  }
  if (kind == PermitKind::kCandidate) {  // withdrawn: frees nothing
    const std::string key = keys_.candidate(name, session);
    return released_by(c, candidate_release_request(key, static_cast<int64_t>(permit), c->lease),
                       key, token);
  }
  const std::string resource = permit_resource(kind, name);
  const std::string key = keys_.permit(resource, permit);
  return released_by(c, permit_release_request(key, permit_value(kind, session, token), c->lease),
                     key, token, resource);
}

// --- run records (ADR 0048) ------------------------------------------------------
//
// One Txn, guarded like a release (the lease key's lease and mod_revision),
// whose nested Txn compares the run key's value: it starts with the period
// id in 20 bytes that sort as the numbers do, so etcd's byte-wise value
// compare is the period rule itself, read and decided inside the Txn (no
// mod_revision the writer must have read: one round trip always).
Backend::CallRef EtcdBackend::write_run(const std::string& session, const std::string& name,
                                        uint64_t token, const RunRecord& record, Duration timeout,
                                        RunCb cb) {
  Call* c = new_call(Kind::kRun, timeout);
  c->run = std::move(cb);
  if (!parse_session_id(session, &c->lease)) {
    preset(c, Outcome::kExpired, "etcd: no such session");
    return c->id;
  }
  rpc(c, kTxn,
      write_run_request(keys_, name, session, c->lease, static_cast<int64_t>(token), record),
      [this, name, session, record](Call* c, int status, const std::string& err,
                                    const std::string& answer) {
        if (status != 0) return fail(c->id, Outcome::kError, status_text(status, err));
        TxnAnswer t;
        if (!decode_txn(reinterpret_cast<const uint8_t*>(answer.data()), answer.size(), &t)) {
          return fail(c->id, Outcome::kError, "etcd: undecodable Txn answer");
        }
        const std::string lk = keys_.lease(name), sk = keys_.session(session);
        bool applied = false, live = false;
        for (const Kv& kv : t.kvs) {
          applied = applied || kv.key == lk;  // only the applied branch reads it
          live = live || kv.key == sk;
        }
        RunReply r;
        r.outcome = Outcome::kRefused;
        r.stored = run_of(t.kvs, name);
        // Sent again after a broken connection: the first try may have
        // written this very record (its times and token tell it apart).
        if ((t.succeeded && applied) || (c->resent && r.stored == record)) {
          r.outcome = Outcome::kOk;
          r.stored = record;
        } else if (!t.succeeded && !live) {
          r.outcome = Outcome::kExpired;
          r.stored.reset();
        } else {
          r.refused = t.succeeded ? RunRefusal::kPeriod : RunRefusal::kNotHolder;
        }
        deliver(c->id, &Call::run, r);
      });
  return c->id;
}

Backend::CallRef EtcdBackend::close_session(const std::string& session, Duration timeout,
                                            DoneCb cb) {
  Call* c = new_call(Kind::kDone, timeout);
  c->done = std::move(cb);
  if (!parse_session_id(session, &c->lease)) {
    preset(c, Outcome::kOk, "");
    return c->id;
  }
  // Its leases first go to their candidates, as releases (ADR 0047): a
  // revoke would only free them. Its own candidate keys go with the revoke.
  std::vector<OwnedLease> leases;
  for (const auto& [key, held] : owned_[c->lease]) {
    if (held.entry.kind == PermitKind::kLease) leases.push_back(held.entry);
  }
  owned_.erase(c->lease);
  if (leases.empty()) {
    revoke(c);
    return c->id;
  }
  auto pending = std::make_shared<size_t>(leases.size());
  for (const OwnedLease& l : leases) {
    // A failed handoff is no failure of the close: the revoke frees the lease.
    handoff_start(c, l.name, l.token, {}, [this, pending](Call* c, const ReleaseReply&) {
      if (--*pending == 0) revoke(c);
    });
  }
  return c->id;
}

void EtcdBackend::revoke(Call* c) {
  rpc(c, kRevoke, revoke_request(c->lease),
      [this](Call* c, int status, const std::string& err, const std::string&) {
        // An unknown lease: gone already, and its keys with it.
        if (status != 0 && status != kGrpcNotFound) {
          return fail(c->id, Outcome::kError, status_text(status, err));
        }
        DoneReply r;
        r.outcome = Outcome::kOk;
        deliver(c->id, &Call::done, r);
      });
}

// --- inspect -------------------------------------------------------------------

Backend::CallRef EtcdBackend::inspect(const std::vector<std::string>& names, Duration timeout,
                                      InspectCb cb) {
  Call* c = new_call(Kind::kInspect, timeout);
  c->inspect = std::move(cb);
  c->inspecting = std::make_shared<InspectState>();
  c->inspecting->names = names;
  // One read-only Txn: the five directories at one revision. Separate Ranges
  // could see a won acquire's token key but not its lease key (a name reported
  // free with the new token, then held: an observer would see both).
  const std::vector<std::string> dirs = {keys_.sessions_dir(), keys_.leases_dir(),
                                         keys_.tokens_dir(), keys_.permits_dir(), keys_.runs_dir()};
  rpc(c, kTxn, snapshot_request(dirs),
      [this](Call* c, int status, const std::string& err, const std::string& answer) {
        if (status != 0) return fail(c->id, Outcome::kError, status_text(status, err));
        std::vector<RangeAnswer> read;
        if (!decode_snapshot(reinterpret_cast<const uint8_t*>(answer.data()), answer.size(),
                             &read) ||
            read.size() != 5) {
          return fail(c->id, Outcome::kError, "etcd: undecodable inspect Txn answer");
        }
        InspectState& st = *c->inspecting;
        st.sessions = std::move(read[0]);
        st.leases = std::move(read[1]);
        st.tokens = std::move(read[2]);
        st.permits = std::move(read[3]);
        st.runs = std::move(read[4]);
        inspect_step(c->id);
      });
  return c->id;
}

// After the snapshot: the remaining time of each session's lease; then the reply.
void EtcdBackend::inspect_step(uint64_t id) {
  Call* c = calls_.find(id);
  if (!c) return;
  InspectState& st = *c->inspecting;
  if (st.ttl_s.empty() && !st.sessions.kvs.empty()) {
    for (const Kv& kv : st.sessions.kvs) st.ttl_s[kv.lease] = -1;
    st.pending = static_cast<int>(st.ttl_s.size());
    for (const auto& [lease, ttl] : st.ttl_s) {
      rpc(c, kTimeToLive, time_to_live_request(lease),
          [this, lease = lease](Call* c, int status, const std::string& err,
                                const std::string& answer) {
            TimeToLiveAnswer t;  // a lease gone meanwhile: ttl -1
            if (status != 0 && status != kGrpcNotFound) {
              return fail(c->id, Outcome::kError, status_text(status, err));
            }
            if (status == 0 && !decode_time_to_live(reinterpret_cast<const uint8_t*>(answer.data()),
                                                    answer.size(), &t)) {
              return fail(c->id, Outcome::kError, "etcd: undecodable LeaseTimeToLive answer");
            }
            c->inspecting->ttl_s[lease] = t.ttl;
            if (--c->inspecting->pending == 0) inspect_step(c->id);
          });
    }
    return;
  }
  InspectReply r;
  r.outcome = Outcome::kOk;
  std::map<std::string, Duration> live;  // sid -> remaining
  for (const Kv& kv : st.sessions.kvs) {
    const int64_t ttl = st.ttl_s.count(kv.lease) ? st.ttl_s[kv.lease] : -1;
    const std::string sid = kv.key.substr(keys_.sessions_dir().size());
    if (ttl < 0 || sid != session_id(kv.lease)) continue;
    live[sid] = seconds(ttl);
    r.sessions.push_back({sid, kv.value, live[sid]});
  }
  std::map<std::string, LeaseInfo> leases;
  const bool all = st.names.empty();
  for (const std::string& n : st.names) leases[n].name = n;
  for (const Kv& kv : st.tokens.kvs) {
    const std::string n = kv.key.substr(keys_.tokens_dir().size());
    if (!all && !leases.count(n)) continue;
    leases[n].name = n;
    leases[n].token = static_cast<uint64_t>(kv.mod_revision);
  }
  for (const Kv& kv : st.leases.kvs) {
    std::string n;
    if (!name_of_lease_key(kv.key, &n) || (!all && !leases.count(n))) continue;
    LeaseInfo& l = leases[n];
    l.name = n;
    l.token = static_cast<uint64_t>(kv.mod_revision);
    auto it = live.find(kv.value);
    if (it != live.end() && kv.value == session_id(kv.lease)) {
      l.holder = kv.value;
      l.holder_remaining = it->second;
    }
  }
  for (const Kv& kv : st.runs.kvs) {
    const std::string n = kv.key.substr(keys_.runs_dir().size());
    RunRecord run;
    if ((!all && !leases.count(n)) || !parse_run_value(kv.value, &run)) continue;
    leases[n].name = n;
    leases[n].run = run;
  }
  for (auto& [n, l] : leases) r.leases.push_back(std::move(l));
  // A row per permit entry of a live session (ADR 0046).
  for (const Kv& kv : st.permits.kvs) {
    Held held;
    std::string sid;
    if (!entry_of(kv, &held, &sid) || sid != session_id(kv.lease) || !live.count(sid)) continue;
    const OwnedLease& e = held.entry;
    if (!all && std::find(st.names.begin(), st.names.end(), e.name) == st.names.end()) continue;
    LeaseInfo l;
    l.name = e.name;
    l.token = e.token;
    l.holder = sid;
    l.holder_remaining = live[sid];
    l.kind = e.kind;
    l.permit = e.permit;
    r.leases.push_back(std::move(l));
  }
  deliver(id, &Call::inspect, r);
}

// --- watches -------------------------------------------------------------------

void EtcdBackend::watch(const std::string& name) {
  if (watches_.count(name)) return;
  Watch& w = watches_[name];
  w.id = ++next_watch_id_;
  watch_names_[w.id] = name;
  // From just after the Held answer the caller saw, when we have it: a
  // release since then comes as an event. Else the name is reported once.
  int64_t start = 0;
  auto it = held_revision_.find(name);
  if (it != held_revision_.end()) {
    start = it->second + 1;
    held_revision_.erase(it);
    held_order_.erase(std::find(held_order_.begin(), held_order_.end(), name));
  } else {
    w.announce = true;
  }
  if (watch_stream_ && conn_ && !conn_->broken()) return send_watch_create(name, start);
  // A new stream (and connection) announces every name anyway.
  w.announce = true;
  with_conn([this](GrpcConn* conn) {
    if (conn && !watch_stream_ && !watches_.empty()) open_watch_stream(conn);
  });
}

void EtcdBackend::unwatch(const std::string& name) {
  auto it = watches_.find(name);
  if (it == watches_.end()) return;
  const int64_t id = it->second.id;
  watch_names_.erase(id);
  watches_.erase(it);
  if (watch_stream_ && conn_ && !conn_->broken()) {
    conn_->send(watch_stream_, watch_cancel_request(id));
  }
}

void EtcdBackend::send_watch_create(const std::string& name, int64_t start_revision) {
  conn_->send(watch_stream_, watch_request(name, start_revision, watches_[name].id));
}

void EtcdBackend::open_watch_stream(GrpcConn* conn) {
  if (conn != conn_ || watches_.empty()) return;
  // Every watch made anew, from now: each reports its name once created.
  std::vector<std::string> names;
  for (auto& [name, w] : watches_) {
    w.announce = true;
    names.push_back(name);
  }
  watch_stream_ = conn->start(
      kWatch, watch_request(names[0], 0, watches_[names[0]].id), false,
      [this](const uint8_t* d, size_t n) { on_watch_answer(d, n); },
      [this, conn](int status, const std::string& err) {
        if (conn != conn_) return;
        if (token_refused(err)) conn->set_token("");  // a new one with the next call
        watch_stream_ = 0;
        log(kLogWarn, "etcd: the watch stream ended (" + status_text(status, err) +
                          "): watches are made again with the next call");
      });
  if (!watch_stream_) return;
  for (size_t i = 1; i < names.size(); ++i) send_watch_create(names[i], 0);
}

void EtcdBackend::on_watch_answer(const uint8_t* data, size_t len) {
  WatchAnswer a;
  if (!decode_watch(data, len, &a)) {
    log(kLogWarn, "etcd: undecodable Watch answer");
    return;
  }
  auto it = watch_names_.find(a.watch_id);
  if (it == watch_names_.end()) return;  // unwatched meanwhile
  const std::string name = it->second;
  Watch& w = watches_[name];
  if (a.canceled) {
    // Its start revision was compacted away (or the server dropped it):
    // made again from now, reporting the name once.
    log(kLogInfo, "etcd: watch of " + name + " cancelled (" + a.cancel_reason + "): made again");
    watch_names_.erase(it);
    w.id = ++next_watch_id_;
    watch_names_[w.id] = name;
    w.announce = true;
    if (watch_stream_ && conn_ && !conn_->broken()) send_watch_create(name, 0);
    return;
  }
  if (a.created && w.announce) {
    w.announce = false;
    released(name);
    return;
  }
  for (const std::string& key : a.deleted) {
    std::string n;
    uint64_t permit = 0;
    if (name_of_lease_key(key, &n) || keys_.parse_permit(key, &n, &permit)) released(n);
  }
  // A handoff puts the lease key again (mod above create); an acquire's
  // create is no release.
  for (const Kv& kv : a.put) {
    std::string n;
    if (name_of_lease_key(kv.key, &n) && kv.mod_revision > kv.create_revision) {
      released(n, Grant{kv.value, static_cast<uint64_t>(kv.mod_revision)});
    }
  }
}

// --- shutdown ------------------------------------------------------------------

void EtcdBackend::shutdown(std::function<void()> done) {
  handles_.begin_shutdown(std::move(done));
  released_fn_ = nullptr;
  calls_.drop_all();  // pending calls are dropped without completion
  waiting_.clear();
  auto conns = std::move(conns_);
  conns_.clear();
  conn_ = nullptr;
  for (GrpcConn* conn : conns) conn->close();
  // A lookup under way ends in on_resolved, which sees the shutdown.
  uv_close(reinterpret_cast<uv_handle_t*>(&anchor_),
           [](uv_handle_t* h) { static_cast<EtcdBackend*>(h->data)->handles_.closed(); });
}

}  // namespace etcd_impl

std::unique_ptr<Backend> make_etcd_backend(const BackendContext& ctx, const EtcdUrl& url,
                                           std::string* error) {
  std::shared_ptr<SSL_CTX> tls;
  if (url.tls) {
#ifdef SIMBA_WITH_REDIS_TLS
    TlsFiles files{url.tls_ca, url.tls_cert, url.tls_key, url.tls_key_password};
    tls = make_tls_context("etcds", files, error);
    wipe_secret(&files.key_password);
    if (!tls) return nullptr;
#else
    *error = "etcds:// needs a libsimba built with OpenSSL (SIMBA_WITH_REDIS_TLS)";
    return nullptr;
#endif
  }
  return std::make_unique<etcd_impl::EtcdBackend>(ctx, url, std::move(tls));
}

}  // namespace simba
