// The ZooKeeper backend's class, private to src/backend/zookeeper/: its
// members are defined in zookeeper_backend.cpp (the Backend operations, the
// calls), zookeeper_session.cpp (sessions, connections, requests) and
// zookeeper_leases.cpp (acquire and the lease watches, inspect) and
// zookeeper_permits.cpp (semaphores and read/write locks).
//
// The backend: libzookeeper_st on the client's libuv loop (through
// uv_zookeeper.h), one zhandle_t per Simba session.
//
// Data model ({c} = the URL's chroot, default /simba; created when missing):
//   {c}/sessions/{sid}   ephemeral marker of each session, data "{timeout_ms} {client}";
//                        sid = the ZooKeeper session id in hex. The keep-alive is an
//                        `exists` on it: any answer proves the session alive when the
//                        server read it, and the server renewed it then.
//   {c}/leases/{name}    the lease: an ephemeral node of the holding session, data = sid.
//                        It goes away with the session (close, expiry), which is the
//                        release broadcast: candidates hold an exists-watch on it.
//   {c}/tokens/{name}    persistent, never deleted. Every acquire is one multi
//                        {create lease node, setData token node}, so the token node's
//                        mzxid is the lease node's czxid (one transaction, one zxid):
//                        the term's token, strictly increasing but not consecutive.
//                        Its version counts the terms of the name: a release is the
//                        multi {check token node at the version our acquire set, delete
//                        lease node}, so it frees the lease only while no acquire
//                        happened since ours, i.e. only the node whose czxid is the
//                        token and whose ephemeral owner is our session (ADR 0011).
//
//   {c}/sem/{name}, {c}/rw/{name}   permits (ADR 0046): a persistent resource node per
//                        semaphore and per read/write lock, never deleted. Its version
//                        is the last permit id taken (grants and intents), its data the
//                        semaphore's size while held, or the write epoch (the last
//                        writer's token). Its children are the entries, ephemeral nodes
//                        of their sessions named "{kind}-{permit:010}" (sem-, read-,
//                        write-, intent-) with data = the token, gone with the session.
//                        An acquire is one multi {setData resource node at the version
//                        it was seen with, create the entry, [delete the writer's
//                        intent]}: the version guard decides it on the server, so the
//                        view it was planned on (plan_zk_permit) still held. The view is
//                        the session's: a grant goes alone and the view follows it;
//                        an intent, a Held and a stale or unknown view read the node
//                        (getData + getChildren with a watch: the release broadcast)
//                        in the same round trip. An exists-watch on each entry of the
//                        session keeps the keep-alive's list, as for lease nodes.
//
// The session's leases are known locally: the holder keeps an exists-watch on each
// of its lease nodes, and ZooKeeper delivers a watch event before the answer to any
// later request, so when a keep-alive's answer arrives, every lease node deleted
// before the server read it (by an admin, another client) has left the list: the
// core ends that term with TAKEN_OVER.
//
// The session timeout asked for is leaseDuration; the server grants something in
// [minSessionTimeout, maxSessionTimeout], read back with zoo_recv_timeout() and
// reported as the remaining time of every answer. The core shortens its renew
// period (SessionLeaseShortened) when that is less than two renew intervals fit.
#ifndef SIMBA_BACKEND_ZOOKEEPER_ZOOKEEPER_BACKEND_IMPL_H
#define SIMBA_BACKEND_ZOOKEEPER_ZOOKEEPER_BACKEND_IMPL_H

#include <uv.h>
#include <zookeeper/zookeeper.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/call_table.h"
#include "backend/open_handles.h"
#include "backend/zookeeper/uv_zookeeper.h"
#include "backend/zookeeper/zookeeper_results.h"
#include "backend/zookeeper/zookeeper_url.h"

namespace simba::zookeeper_impl {

constexpr int kLogDebug = 0, kLogInfo = 1, kLogWarn = 2;

class ZookeeperBackend;
struct Session;

// One ZooKeeper request in flight; the `data` of its completion. Owned by its
// session until the completion ran (or the session is gone).
struct Req {
  Session* s = nullptr;
  uint64_t call = 0;    // the Simba call it answers (0: none)
  bool closes = false;  // a close's read: the session closing otherwise also answers it
  std::function<void(Req& r, int rc)> fn;
  struct Stat stat {};
  bool has_stat = false;
  std::vector<std::string> strings;
  std::string value;
  // zoo_amulti's arguments live here until its completion.
  std::vector<std::string> paths;
  std::string payload;
  std::vector<zoo_op_t> ops;
  std::vector<zoo_op_result_t> results;
  struct Stat op_stat {};
};

struct Owned {
  uint64_t token = 0;   // the lease node's czxid
  int32_t version = 0;  // the token node's version our acquire set
};

// A resource node as a session last read it (plan_zk_permit's view).
struct PermitView {
  bool known = false;
  int32_t version = 0;
  std::string data;
  std::vector<std::string> children;
};

// An entry the session holds: by resource, by permit id.
struct HeldPermit {
  PermitKind kind = PermitKind::kSemaphore;
  uint64_t token = 0;
};

// One acquire_permit over its rounds (each one round trip).
struct PermitOp {
  uint64_t call = 0;
  std::string name, resource;
  PermitAsk ask;
  int rounds_left = 3;        // rounds after the first: a lost race or a stale view
  bool multi = false;         // this round sent the plan's multi
  bool reads = false;         // this round read the resource node after it
  bool must_read = false;     // the view is stale: the next round only reads
  int32_t multi_version = 0;  // the resource node's version after a multi
  ZkPermitPlan plan;          // this round's
  int multi_rc = ZOK;
  int data_rc = ZOK;  // the getData that follows it
  std::string data;
  struct Stat stat {};
};

struct Session {
  uint64_t serial = 0;
  UvZk* zk = nullptr;
  std::string id;  // the session id in hex, once established
  bool established = false;
  bool connected = false;
  bool ready = false;    // marker created and reported to the core
  bool expired = false;  // expired on the server, or authentication failed
  bool dead = false;     // being closed: completions are ignored
  bool suspect = false;  // a request failed on the connection: close without waiting
  // A close could not reach the server: close as soon as the handle reconnects,
  // or when the session has expired on the server anyway (ADR 0030).
  bool close_wanted = false;
  // Runs once no request is in flight any more (a close waiting for answers).
  std::function<void()> on_quiet;
  uint64_t open_call = 0;
  int requested_ms = 0;
  int resolving = 0;
  std::vector<std::vector<std::string>> addrs;  // per URL host
  std::string resolve_error;
  std::map<std::string, Owned> owned;
  std::map<std::string, PermitView> views;                        // by resource
  std::map<std::string, std::map<uint64_t, HeldPermit>> permits;  // by resource, permit
  std::map<Req*, std::unique_ptr<Req>> reqs;
  // Acquires whose answer was lost with the connection: the server may have
  // applied them. Read once reconnected, and recorded if our session owns the
  // node, so the keep-alive lists it (ADR 0005: the core releases or adopts it).
  std::set<std::string> unsure_leases;
  std::map<std::string, std::map<uint64_t, HeldPermit>> unsure_permits;  // by resource, permit
  // Acquires beyond kMaxAcquiresInFlight wait here (call id, name).
  std::deque<std::pair<uint64_t, std::string>> acquire_queue;
  int acquires_in_flight = 0;
};

// A session's requests are answered in order, and a read waits for the
// session's earlier writes: with thousands of acquires in flight (a client
// starting thousands of elections) the keep-alive would wait behind all of
// them, past the deadline, and the session would end. Acquires beyond this
// many wait in the client, where the keep-alive overtakes them, and one whose
// call timed out meanwhile is never sent.
constexpr int kMaxAcquiresInFlight = 64;

// The completions of the zoo_a*() calls: `data` is the Req. Each runs the Req's
// `fn` once and frees it, unless its session is being closed (zookeeper_session.cpp).
void finish_req(Req* r, int rc);
void stat_done(int rc, const struct Stat* st, const void* data);
void void_done(int rc, const void* data);
void string_done(int rc, const char*, const void* data);
void strings_done(int rc, const struct String_vector* sv, const void* data);
void data_done(int rc, const char* value, int len, const struct Stat* st, const void* data);

// The connection failed under a request: the server may have applied it or not.
bool connection_rc(int rc);

// What an inspect() gathers over several requests.
struct InspectState {
  uint64_t call = 0;
  int pending = 0;
  std::string error;
  std::set<std::string> asked;  // names whose nodes were read (or are being)
  std::map<std::string, ZkSessionRow> sessions;
  std::map<std::string, struct Stat> tokens, leases;
  struct PermitNode {
    std::string name, child, data;
    struct Stat stat {};
  };
  std::vector<PermitNode> permits;  // entries read under {c}/sem and {c}/rw
};

class ZookeeperBackend final : public Backend {
 public:
  ZookeeperBackend(const BackendContext& ctx, ZookeeperUrl url);
  ~ZookeeperBackend() override = default;

  // --- the session's operations (zookeeper_backend.cpp) ----------------------

  CallRef open_session(Duration lease, Duration timeout, OpenCb cb) override;
  CallRef keep_alive(const std::string& session, Duration, Duration timeout,
                     KeepAliveCb cb) override;
  CallRef acquire(const std::string& session, const std::string& name, Duration timeout,
                  AcquireCb cb) override;
  CallRef release(const std::string& session, const std::string& name, uint64_t token,
                  Duration timeout, DoneCb cb) override;
  // ADR 0047 step 2 brings candidates here; until then an ask fails.
  CallRef acquire_candidate(const std::string& session, const std::string& name,
                            const CandidateAsk& ask, Duration timeout, AcquireCb cb) override {
    if (ask.empty()) return acquire(session, name, timeout, std::move(cb));
    return fail_call_later(calls_, Kind::kAcquire, timeout, &Call::acquire, std::move(cb),
                           kCandidatesNotSupportedYet);
  }
  // Permits (ADR 0046; zookeeper_permits.cpp).
  CallRef acquire_permit(const std::string& session, const std::string& name, const PermitAsk& ask,
                         Duration timeout, AcquireCb cb) override;
  CallRef release_permit(const std::string& session, const std::string& name, PermitKind kind,
                         uint64_t permit, uint64_t token, Duration timeout, DoneCb cb) override;
  // ADR 0048's later steps bring run records here; until then a write fails.
  CallRef write_run(const std::string&, const std::string&, uint64_t, const RunRecord&,
                    Duration timeout, RunCb cb) override {
    return fail_call_later(calls_, Kind::kDone, timeout, &Call::done,
                           run_record_not_supported_done(std::move(cb)), kRunRecordNotSupportedYet);
  }
  CallRef close_session(const std::string& session, Duration timeout, DoneCb cb) override;
  CallRef inspect(const std::vector<std::string>& names, Duration timeout, InspectCb cb) override;
  void abandon(CallRef call) override { calls_.abandon(call); }
  void on_released(ReleasedFn fn) override { released_fn_ = std::move(fn); }
  // The exists-watches stay as they are (set with every acquire: the holder
  // needs them too); only the watched names' deletions are delivered
  // (ADR 0040). A Held answer comes before its exists-watch's answer and
  // events, so a watch that follows it misses nothing. A permit resource's
  // children are watched from a session of ours (zookeeper_permits.cpp).
  void watch(const std::string& name) override;
  void unwatch(const std::string& name) override { watches_.erase(name); }
  void shutdown(std::function<void()> done) override;

 private:
  // --- calls: each completes exactly once, by answer, preset or abandon ------
  // (zookeeper_backend.cpp)

  enum class Kind { kOpen, kKeepAlive, kAcquire, kDone, kInspect };

  struct Call : CallBase {
    Kind kind = Kind::kDone;
    OpenCb open;
    KeepAliveCb keep_alive;
    AcquireCb acquire;
    DoneCb done;
    InspectCb inspect;
    uint64_t session_serial = 0;  // the session it went out on (0: none)
  };

  Call* new_call(Kind kind, Duration timeout);
  // The usable session `id` of call `c` (its session_serial set), or nullptr
  // with `c` preset to kExpired.
  Session* call_session(Call* c, const std::string& id);

  // Completes the call with `o` on a later loop turn (never inside the call).
  void preset(Call* c, Outcome o, const std::string& err) { calls_.preset(c, o, err); }
  void preset(uint64_t id, Outcome o, const std::string& err);

  // The caller abandoned `c` (backend.h).
  void abandoned(Call* c);

  // The call `id`, forgotten (call_table.h), or nullptr if it completed.
  Call* take(uint64_t id);

  void fail(uint64_t id, Outcome o, const std::string& err);

  // Completes call `id` with `r` through its callback `cb`, once: take()
  // forgets the call first (its memory goes on a later loop turn).
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
  void deliver_open(uint64_t id, const OpenReply& r) { deliver(id, &Call::open, r); }
  void deliver_keep_alive(uint64_t id, const KeepAliveReply& r) {
    deliver(id, &Call::keep_alive, r);
  }
  void deliver_acquire(uint64_t id, const AcquireReply& r) { deliver(id, &Call::acquire, r); }
  void deliver_done(uint64_t id, const DoneReply& r) { deliver(id, &Call::done, r); }
  void deliver_inspect(uint64_t id, const InspectReply& r) { deliver(id, &Call::inspect, r); }

  void log(int level, const std::string& line);

  // --- requests (zookeeper_session.cpp) --------------------------------------

  Req* new_req(Session* s, uint64_t call, std::function<void(Req&, int)> fn);

  // After a zoo_a*() call: a request the library refused never completes.
  void sent(Session* s, Req* r, int rc);

  void fill_error(Session* s, int rc, Outcome* o, std::string* err);

  std::string marker_path(const Session* s) const { return sessions_dir_ + "/" + s->id; }
  std::string lease_path(const std::string& name) const { return leases_dir_ + "/" + name; }
  std::string token_path(const std::string& name) const { return tokens_dir_ + "/" + name; }

  Session* usable(const std::string& id);

  Session* by_serial(uint64_t serial);

  // --- opening a session (zookeeper_session.cpp) -----------------------------

  struct Resolve {
    ZookeeperBackend* self;
    uint64_t serial;
    size_t host;
    uv_getaddrinfo_t req;
  };

  // The client library resolves names with a blocking getaddrinfo(): resolve
  // them here with uv_getaddrinfo and hand it addresses only.
  void resolve(Session* s);

  static void on_resolved(uv_getaddrinfo_t* req, int status, struct addrinfo* res);

  void start(Session* s);

  void on_event(uint64_t serial, int type, int state, const std::string& path);

  // The chroot, its ancestors and its three directories (pipelined, each
  // "exists already" is fine), then the session's marker: one round trip.
  void set_up(Session* s);

  void create_dir(Session* s, const std::string& dir, std::function<void(int rc)> then);

  // The ephemeral marker; answers the open call `call` (if not 0).
  void create_marker(Session* s, uint64_t call);

  // --- acquire (zookeeper_leases.cpp) ----------------------------------------

  // One multi {create the lease node, bump the token node}, pipelined with an
  // exists-watch on the lease node. The first acquire of a name by this
  // backend also sends, ahead of it, the creation of the token node ("exists
  // already" is fine): still one round trip. `retries`: how many more times a
  // missing directory may be created before giving up.
  void send_acquire(Session* s, uint64_t call, const std::string& name, int retries);

  // The answer to send_acquire()'s multi (`name`, `retries` and `held` as there).
  void acquire_answered(Req& r, int rc, const std::string& name, int retries,
                        const std::shared_ptr<bool>& held);

  // Sends queued acquires while there is room, skipping those nobody waits for.
  void next_acquires(Session* s);

  void remember_token_node(const std::string& name);

  // An exists-watch on the lease node: it fires when the node is deleted (or
  // created, if it is absent now). Its answer, which follows the answer of any
  // acquire sent before it, also tells whether our node is still there. `held`
  // (set by that acquire's answer) says whether an absent node is news; a
  // watch re-armed after an event passes nullptr.
  void watch(Session* s, const std::string& name, std::shared_ptr<bool> held = nullptr);

  // --- answers lost with the connection (zookeeper_leases.cpp) ---------------

  // At a reconnection (on_event): reads the nodes of every unsure write (a
  // read sent as the connection fails could be dropped unanswered); one
  // answered by a connection failure again waits for the next reconnection.
  void check_unsure(Session* s);
  // Records the lease node if our session owns it (its token the czxid, its
  // version the token node's when that node's mzxid is the czxid) and watches it.
  void check_lease(Session* s, const std::string& name);
  // Records the entry if our session owns it, and watches it.
  void check_entry(Session* s, const std::string& resource, uint64_t permit, HeldPermit e);
  bool ours(Session* s, const struct Stat& st) const {
    return s->zk && st.ephemeralOwner == zoo_client_id(s->zk->zh())->client_id;
  }

  // --- permits (zookeeper_permits.cpp) ---------------------------------------

  std::string resource_path(const std::string& resource) const {
    return url_.chroot + "/" + resource;
  }
  std::string entry_path(const std::string& resource, PermitKind kind, uint64_t permit) const {
    return resource_path(resource) + "/" + zk_permit_child(kind, permit);
  }
  // One round: the plan's multi when the session's view allows one, then
  // getData + getChildren (watched) of the resource node, answered together.
  void permit_round(Session* s, const std::shared_ptr<PermitOp>& op);
  // The round's last answer: `rc` and `children` the getChildren's, or the
  // multi's own when it went alone.
  void permit_round_answered(Session* s, const std::shared_ptr<PermitOp>& op, int rc,
                             std::vector<std::string> children);
  // The multi went alone and won: the view follows it without a read (the
  // entries it lists remain a superset of the node's).
  void permit_view_granted(Session* s, const PermitOp& op);
  // The plan for `op` on the session's view (its intent only if ours).
  ZkPermitPlan plan_permit(Session* s, const PermitOp& op);
  // A getChildren answer for `resource` on `s`: the view's new children, and a
  // release broadcast when an entry it listed is gone.
  void permit_children(Session* s, const std::string& resource, std::vector<std::string> children);
  // A watched getChildren of the resource node (after a child event).
  void watch_permits(Session* s, const std::string& resource);
  // An exists-watch on an entry the session holds: its deletion by anyone
  // drops it from the keep-alive's list (as watch() for a lease node).
  void watch_entry(Session* s, const std::string& resource, uint64_t permit);
  // A watch event under {c}/sem or {c}/rw; false when the path is elsewhere.
  bool permit_event(Session* s, int type, const std::string& path);

  // --- close (zookeeper_session.cpp) -----------------------------------------

  // Ends the session's handle: the server deletes its ephemeral nodes at once
  // (unless the connection is suspect: then the session expires on its own;
  // close_session() checks such a connection with a read first).
  // `call` (if not 0) completes with kOk once the handle is closed.
  void close_session_obj(Session* s, uint64_t call);
  // A close could not reach the server: close the handle later (Session::close_wanted).
  void want_close(Session* s);
  // Closes the session once every request sent on it is answered (a read's
  // answer follows theirs); completes `call` as close_session() does.
  void close_after_answers(Session* s, uint64_t call);

  // --- inspect (zookeeper_leases.cpp) ----------------------------------------

  void inspect_step_done(const std::shared_ptr<InspectState>& st);

  void inspect_failed(const std::shared_ptr<InspectState>& st, Session* s, int rc);
  // A request of the inspection went out (`rc` ZOK), or failed at once: then
  // the inspection fails.
  void inspect_sent(Session* s, const std::shared_ptr<InspectState>& st, Req* r, int rc);

  void inspect_children(Session* s, const std::shared_ptr<InspectState>& st, const std::string& dir,
                        std::function<void(Session*, const std::vector<std::string>&)> then);

  // Reads a node's data (`data`) or only its stat; `then` runs when it exists.
  void inspect_read(Session* s, const std::shared_ptr<InspectState>& st, const std::string& path,
                    bool data, std::function<void(Req&)> then);

  void inspect_name(Session* s, const std::shared_ptr<InspectState>& st, const std::string& name);
  // The entries of resource {c}/{kind}/{name} ("sem" or "rw").
  void inspect_permits(Session* s, const std::shared_ptr<InspectState>& st, const std::string& kind,
                       const std::string& name);

  uv_loop_t* loop_;
  LogFn log_;
  std::string client_name_;
  ZookeeperUrl url_;
  std::string where_;  // hosts and chroot, for messages (never the password)
  std::string sessions_dir_, leases_dir_, tokens_dir_, sem_dir_, rw_dir_;
  struct ACL acl_entries_[2];
  struct ACL_vector acl_ {};

  std::map<uint64_t, std::unique_ptr<Session>> sessions_;  // by serial
  std::map<std::string, Session*> by_id_;                  // ready sessions by id
  uint64_t next_serial_ = 0;

  std::set<std::string> tokens_known_;  // names whose token node exists
  std::set<Resolve*> resolves_;         // host name lookups under way

  // `name`'s lease node is gone: released_fn_ if the client watches it.
  void released(const std::string& name) {
    if (released_fn_ && watches_.count(name)) released_fn_(name, Grant{});
  }

  ReleasedFn released_fn_;
  std::set<std::string, std::less<>> watches_;  // Backend::watch
  uv_timer_t anchor_;
  OpenHandles handles_;  // our handles, requests and UvZk objects still open on the loop
  CallTable<Call> calls_;
};

}  // namespace simba::zookeeper_impl

#endif
