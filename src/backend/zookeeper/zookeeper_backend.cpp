// The ZooKeeper backend: libzookeeper_st on the client's libuv loop (through
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
#include "backend/zookeeper/zookeeper_backend.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <uv.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backend/call_table.h"
#include "backend/zookeeper/uv_zookeeper.h"
#include "backend/zookeeper/zookeeper_results.h"

namespace simba {
namespace {

constexpr int kLogDebug = 0, kLogInfo = 1, kLogWarn = 2;

std::string hex_id(int64_t id) { return zk_hex_id(id); }

bool is_ip_literal(const std::string& host) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

std::string zk_error(int rc) {
  const char* s = zerror(rc);
  return std::string(s ? s : "unknown error") + " (rc " + std::to_string(rc) + ")";
}

bool expired_rc(int rc) {
  return rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE || rc == ZAUTHFAILED;
}
bool connection_rc(int rc) {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZCLOSING;
}

class ZookeeperBackend;
struct Session;

// One ZooKeeper request in flight; the `data` of its completion. Owned by its
// session until the completion ran (or the session is gone).
struct Req {
  Session* s = nullptr;
  uint64_t call = 0;  // the Simba call it answers (0: none)
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
  uint64_t open_call = 0;
  int requested_ms = 0;
  int resolving = 0;
  std::vector<std::vector<std::string>> addrs;  // per URL host
  std::string resolve_error;
  std::map<std::string, Owned> owned;
  std::map<Req*, std::unique_ptr<Req>> reqs;
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

void finish_req(Req* r, int rc) {
  Session* s = r->s;
  if (s->dead) return;  // freed with the session
  auto it = s->reqs.find(r);
  if (it == s->reqs.end()) return;
  std::unique_ptr<Req> own = std::move(it->second);
  s->reqs.erase(it);
  auto fn = std::move(own->fn);
  if (fn) fn(*own, rc);
}

void stat_done(int rc, const struct Stat* st, const void* data) {
  auto* r = static_cast<Req*>(const_cast<void*>(data));
  if (!r->s->dead && st) {
    r->stat = *st;
    r->has_stat = true;
  }
  finish_req(r, rc);
}

void void_done(int rc, const void* data) {
  finish_req(static_cast<Req*>(const_cast<void*>(data)), rc);
}

void string_done(int rc, const char*, const void* data) {
  finish_req(static_cast<Req*>(const_cast<void*>(data)), rc);
}

void strings_done(int rc, const struct String_vector* sv, const void* data) {
  auto* r = static_cast<Req*>(const_cast<void*>(data));
  if (!r->s->dead && sv) {
    for (int32_t i = 0; i < sv->count; ++i) r->strings.emplace_back(sv->data[i]);
  }
  finish_req(r, rc);
}

void data_done(int rc, const char* value, int len, const struct Stat* st, const void* data) {
  auto* r = static_cast<Req*>(const_cast<void*>(data));
  if (!r->s->dead) {
    if (value && len > 0) r->value.assign(value, static_cast<size_t>(len));
    if (st) {
      r->stat = *st;
      r->has_stat = true;
    }
  }
  finish_req(r, rc);
}

// What an inspect() gathers over several requests.
struct InspectState {
  uint64_t call = 0;
  int pending = 0;
  std::string error;
  std::set<std::string> asked;  // names whose nodes were read (or are being)
  std::map<std::string, ZkSessionRow> sessions;
  std::map<std::string, struct Stat> tokens, leases;
};

class ZookeeperBackend final : public Backend {
 public:
  ZookeeperBackend(const BackendContext& ctx, ZookeeperUrl url)
      : loop_(ctx.loop),
        log_(ctx.log),
        client_name_(ctx.client_name),
        url_(std::move(url)),
        calls_(loop_, &handles_,
               {[this](Call* c) { timed_out(c); },
                [this](Call* c, Outcome o, const std::string& err) { fail(c->id, o, err); },
                [this] { handle_closed(); }}) {
    for (size_t i = 0; i < url_.hosts.size(); ++i) {
      where_ += (i ? "," : "") + url_.hosts[i].host + ":" + std::to_string(url_.hosts[i].port);
    }
    where_ += url_.chroot;
    sessions_dir_ = url_.chroot + "/sessions";
    leases_dir_ = url_.chroot + "/leases";
    tokens_dir_ = url_.chroot + "/tokens";
    if (url_.has_auth) {
      // The creator's identity may do everything; anyone may read (exists-watches
      // and `simba status` from another identity). Nobody else may create or
      // delete under our nodes.
      acl_entries_[0] = {ZOO_PERM_ALL, {const_cast<char*>("auth"), const_cast<char*>("")}};
      acl_entries_[1] = {ZOO_PERM_READ, {const_cast<char*>("world"), const_cast<char*>("anyone")}};
      acl_ = {2, acl_entries_};
    } else {
      acl_ = ZOO_OPEN_ACL_UNSAFE;
    }
    // Keeps the loop busy with us until shutdown: shutdown always completes on
    // a later loop turn.
    uv_timer_init(loop_, &anchor_);
    anchor_.data = this;
    handles_ = 1;
  }

  ~ZookeeperBackend() override = default;

  // --- the session's operations ----------------------------------------------

  void open_session(Duration lease, Duration timeout, OpenCb cb) override {
    Call* c = new_call(Kind::kOpen, timeout);
    c->open = std::move(cb);
    auto owned = std::make_unique<Session>();
    Session* s = owned.get();
    s->serial = ++next_serial_;
    s->open_call = c->id;
    s->requested_ms = static_cast<int>(std::clamp<int64_t>(to_ms_ceil(lease), 1, INT_MAX));
    c->session_serial = s->serial;
    sessions_[s->serial] = std::move(owned);
    resolve(s);
  }

  void keep_alive(const std::string& session, Duration, Duration timeout, KeepAliveCb cb) override {
    Call* c = new_call(Kind::kKeepAlive, timeout);
    c->keep_alive = std::move(cb);
    Session* s = usable(session);
    if (!s) {
      preset(c, Outcome::kExpired, "zookeeper: no such session");
      return;
    }
    c->session_serial = s->serial;
    const uint64_t call = c->id;
    Req* r = new_req(s, call, [this](Req& r, int rc) {
      Session* s = r.s;
      KeepAliveReply out;
      if (rc == ZOK || rc == ZNONODE) {
        // Either answer was read by the server within our live session.
        s->suspect = false;
        out.outcome = Outcome::kOk;
        out.remaining = ms(zoo_recv_timeout(s->zk->zh()));
        for (const auto& [name, o] : s->owned) out.owned.push_back(OwnedLease{name, o.token});
        if (rc == ZNONODE) {
          log(kLogWarn, "the marker of session " + s->id + " was deleted; creating it again");
          create_marker(s, 0);
        }
      } else {
        fill_error(s, rc, &out.outcome, &out.error);
      }
      deliver_keep_alive(r.call, out);
    });
    sent(s, r, zoo_aexists(s->zk->zh(), marker_path(s).c_str(), 0, stat_done, r));
  }

  void acquire(const std::string& session, const std::string& name, Duration timeout,
               AcquireCb cb) override {
    Call* c = new_call(Kind::kAcquire, timeout);
    c->acquire = std::move(cb);
    Session* s = usable(session);
    if (!s) {
      preset(c, Outcome::kExpired, "zookeeper: no such session");
      return;
    }
    c->session_serial = s->serial;
    if (s->acquires_in_flight >= kMaxAcquiresInFlight) {
      s->acquire_queue.emplace_back(c->id, name);
      return;
    }
    send_acquire(s, c->id, name, 2);
  }

  void release(const std::string& session, const std::string& name, uint64_t token,
               Duration timeout, DoneCb cb) override {
    Call* c = new_call(Kind::kDone, timeout);
    c->done = std::move(cb);
    Session* s = usable(session);
    if (!s) {
      // Its lease nodes went with it.
      preset(c, Outcome::kExpired, "zookeeper: no such session");
      return;
    }
    c->session_serial = s->serial;
    auto it = s->owned.find(name);
    if (it == s->owned.end() || it->second.token != token) {
      // Not ours (any more): nothing to free.
      preset(c, Outcome::kOk, "");
      return;
    }
    const Owned o = it->second;
    Req* r = new_req(s, c->id, [this, name, token](Req& r, int rc) {
      Session* s = r.s;
      DoneReply out;
      const bool gone = r.results[0].err == ZBADVERSION || r.results[0].err == ZNONODE ||
                        r.results[1].err == ZNONODE;
      if ((rc == ZOK && r.results[1].err == ZOK) || gone) {
        // Freed now, or already: another acquire since ours means our node was
        // deleted before it.
        auto it = s->owned.find(name);
        if (it != s->owned.end() && it->second.token == token) s->owned.erase(it);
        out.outcome = Outcome::kOk;
      } else {
        fill_error(s, rc, &out.outcome, &out.error);
      }
      deliver_done(r.call, out);
    });
    r->paths = {token_path(name), lease_path(name)};
    r->ops.resize(2);
    r->results.assign(2, zoo_op_result_t{ZOK, nullptr, 0, nullptr});
    zoo_check_op_init(&r->ops[0], r->paths[0].c_str(), o.version);
    zoo_delete_op_init(&r->ops[1], r->paths[1].c_str(), -1);
    sent(s, r, zoo_amulti(s->zk->zh(), 2, r->ops.data(), r->results.data(), void_done, r));
  }

  void close_session(const std::string& session, Duration timeout, DoneCb cb) override {
    Call* c = new_call(Kind::kDone, timeout);
    c->done = std::move(cb);
    auto it = by_id_.find(session);
    if (it == by_id_.end()) {
      preset(c, Outcome::kOk, "");
      return;
    }
    close_session_obj(it->second, c->id);
  }

  void inspect(const std::vector<std::string>& names, Duration timeout, InspectCb cb) override {
    Call* c = new_call(Kind::kInspect, timeout);
    c->inspect = std::move(cb);
    // Any connection will do: the newest one (an opening session queues the
    // requests until it is connected).
    Session* s = nullptr;
    for (auto& [serial, sp] : sessions_) {
      if (!sp->dead && !sp->expired && sp->zk) s = sp.get();
    }
    if (!s) {
      preset(c, Outcome::kError, "zookeeper " + where_ + ": not connected");
      return;
    }
    auto st = std::make_shared<InspectState>();
    st->call = c->id;
    inspect_children(
        s, st, sessions_dir_, [this, st](Session* s, const std::vector<std::string>& ids) {
          for (const std::string& id : ids) {
            inspect_read(s, st, sessions_dir_ + "/" + id, true,
                         [st, id](Req& r) { st->sessions[id] = parse_session_marker(r.value); });
          }
        });
    if (names.empty()) {
      for (const std::string& dir : {tokens_dir_, leases_dir_}) {
        inspect_children(s, st, dir, [this, st](Session* s, const std::vector<std::string>& found) {
          for (const std::string& n : found) inspect_name(s, st, n);
        });
      }
    } else {
      for (const std::string& n : names) inspect_name(s, st, n);
    }
  }

  void on_released(ReleasedFn fn) override { released_fn_ = std::move(fn); }

  void shutdown(std::function<void()> done) override {
    closing_ = true;
    shutdown_done_ = std::move(done);
    released_fn_ = nullptr;
    calls_.drop_all();  // pending calls are dropped without completion
    std::vector<Session*> all;
    for (auto& [serial, s] : sessions_) all.push_back(s.get());
    for (Session* s : all) close_session_obj(s, 0);
    // A lookup not started yet is cancelled (its callback runs with
    // UV_ECANCELED); one under way is waited for.
    for (Resolve* r : resolves_) uv_cancel(reinterpret_cast<uv_req_t*>(&r->req));
    uv_close(reinterpret_cast<uv_handle_t*>(&anchor_),
             [](uv_handle_t* h) { static_cast<ZookeeperBackend*>(h->data)->handle_closed(); });
  }

 private:
  // --- calls: each completes exactly once, by answer, preset or timeout ------

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

  Call* new_call(Kind kind, Duration timeout) {
    Call* c = calls_.start(timeout);
    c->kind = kind;
    return c;
  }

  // Completes the call with `o` on a later loop turn (never inside the call).
  void preset(Call* c, Outcome o, const std::string& err) { calls_.preset(c, o, err); }
  void preset(uint64_t id, Outcome o, const std::string& err) {
    if (Call* c = calls_.find(id)) calls_.preset(c, o, err);
  }

  // A call's timer fired with no answer yet.
  void timed_out(Call* c) {
    auto it = sessions_.find(c->session_serial);
    if (it != sessions_.end()) {
      // The answer may still come (the core copes with late answers' effects);
      // a connection that sat on a request is not waited for at close.
      it->second->suspect = true;
      // Nobody waits for a session whose open timed out.
      if (c->kind == Kind::kOpen && !it->second->ready) close_session_obj(it->second.get(), 0);
    }
    fail(c->id, Outcome::kTimeout, "zookeeper " + where_ + ": no answer in time");
  }

  // The call `id`, forgotten (call_table.h), or nullptr if it completed.
  Call* take(uint64_t id) {
    Call* c = calls_.find(id);
    if (c) calls_.finish(c);
    return c;
  }

  void fail(uint64_t id, Outcome o, const std::string& err) {
    Call* c = take(id);
    if (!c || closing_) return;
    switch (c->kind) {
      case Kind::kOpen: {
        OpenReply r;
        r.outcome = o;
        r.error = err;
        if (c->open) c->open(r);
        break;
      }
      case Kind::kKeepAlive: {
        KeepAliveReply r;
        r.outcome = o;
        r.error = err;
        if (c->keep_alive) c->keep_alive(r);
        break;
      }
      case Kind::kAcquire: {
        AcquireReply r;
        r.outcome = o;
        r.error = err;
        if (c->acquire) c->acquire(r);
        break;
      }
      case Kind::kDone: {
        DoneReply r;
        r.outcome = o;
        r.error = err;
        if (c->done) c->done(r);
        break;
      }
      case Kind::kInspect: {
        InspectReply r;
        r.outcome = o;
        r.error = err;
        if (c->inspect) c->inspect(r);
        break;
      }
    }
  }

  // The callback is moved out before the call's memory goes (the timer's close
  // callback frees it on a later turn, but take() already forgot it).
  void deliver_open(uint64_t id, const OpenReply& r) {
    Call* c = take(id);
    if (c && !closing_ && c->open) c->open(r);
  }
  void deliver_keep_alive(uint64_t id, const KeepAliveReply& r) {
    Call* c = take(id);
    if (c && !closing_ && c->keep_alive) c->keep_alive(r);
  }
  void deliver_acquire(uint64_t id, const AcquireReply& r) {
    Call* c = take(id);
    if (c && !closing_ && c->acquire) c->acquire(r);
  }
  void deliver_done(uint64_t id, const DoneReply& r) {
    Call* c = take(id);
    if (c && !closing_ && c->done) c->done(r);
  }
  void deliver_inspect(uint64_t id, const InspectReply& r) {
    Call* c = take(id);
    if (c && !closing_ && c->inspect) c->inspect(r);
  }

  void handle_closed() {
    if (--handles_ == 0 && closing_ && shutdown_done_) {
      auto done = std::move(shutdown_done_);
      done();  // may delete this
    }
  }

  void log(int level, const std::string& line) {
    if (log_) log_(level, "zookeeper " + where_ + ": " + line);
  }

  // --- requests ------------------------------------------------------------

  Req* new_req(Session* s, uint64_t call, std::function<void(Req&, int)> fn) {
    auto r = std::make_unique<Req>();
    Req* raw = r.get();
    raw->s = s;
    raw->call = call;
    raw->fn = std::move(fn);
    s->reqs[raw] = std::move(r);
    return raw;
  }

  // After a zoo_a*() call: a request the library refused never completes.
  void sent(Session* s, Req* r, int rc) {
    if (rc != ZOK) {
      const uint64_t call = r->call;
      s->reqs.erase(r);
      if (call) {
        Outcome o = Outcome::kError;
        std::string err;
        fill_error(s, rc, &o, &err);
        preset(call, o, err);
      }
      return;
    }
    s->zk->kick();
  }

  void fill_error(Session* s, int rc, Outcome* o, std::string* err) {
    if (expired_rc(rc)) {
      *o = Outcome::kExpired;
      *err = "zookeeper: session " + s->id + " " +
             (rc == ZAUTHFAILED ? "failed authentication" : "expired");
      return;
    }
    if (connection_rc(rc)) s->suspect = true;
    *o = Outcome::kError;
    *err = "zookeeper " + where_ + ": " + zk_error(rc);
    if (rc == ZNOAUTH) *err += ": not allowed by the nodes' ACL";
  }

  std::string marker_path(const Session* s) const { return sessions_dir_ + "/" + s->id; }
  std::string lease_path(const std::string& name) const { return leases_dir_ + "/" + name; }
  std::string token_path(const std::string& name) const { return tokens_dir_ + "/" + name; }

  Session* usable(const std::string& id) {
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return nullptr;
    Session* s = it->second;
    return s->ready && !s->expired && !s->dead && s->zk ? s : nullptr;
  }

  Session* by_serial(uint64_t serial) {
    auto it = sessions_.find(serial);
    return it == sessions_.end() || it->second->dead ? nullptr : it->second.get();
  }

  // --- opening a session -------------------------------------------------------

  struct Resolve {
    ZookeeperBackend* self;
    uint64_t serial;
    size_t host;
    uv_getaddrinfo_t req;
  };

  // The client library resolves names with a blocking getaddrinfo(): resolve
  // them here with uv_getaddrinfo and hand it addresses only.
  void resolve(Session* s) {
    s->addrs.assign(url_.hosts.size(), {});
    for (size_t i = 0; i < url_.hosts.size(); ++i) {
      const std::string& h = url_.hosts[i].host;
      if (is_ip_literal(h)) {
        s->addrs[i].push_back(h);
        continue;
      }
      auto* r = new Resolve{this, s->serial, i, {}};
      r->req.data = r;
      struct addrinfo hints = {};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      ++handles_;
      ++s->resolving;
      resolves_.insert(r);
      const int rc = uv_getaddrinfo(loop_, &r->req, on_resolved, h.c_str(), nullptr, &hints);
      if (rc != 0) {
        --handles_;
        --s->resolving;
        resolves_.erase(r);
        delete r;
        s->resolve_error = "cannot resolve " + h + ": " + uv_strerror(rc);
      }
    }
    if (s->resolving == 0) start(s);
  }

  static void on_resolved(uv_getaddrinfo_t* req, int status, struct addrinfo* res) {
    auto* r = static_cast<Resolve*>(req->data);
    ZookeeperBackend* self = r->self;
    Session* s = self->closing_ ? nullptr : self->by_serial(r->serial);
    if (s) {
      for (struct addrinfo* ai = status == 0 ? res : nullptr; ai; ai = ai->ai_next) {
        char buf[INET6_ADDRSTRLEN] = {0};
        if (ai->ai_family == AF_INET) {
          uv_ip4_name(reinterpret_cast<const struct sockaddr_in*>(ai->ai_addr), buf, sizeof buf);
        } else if (ai->ai_family == AF_INET6) {
          uv_ip6_name(reinterpret_cast<const struct sockaddr_in6*>(ai->ai_addr), buf, sizeof buf);
        }
        auto& list = s->addrs[r->host];
        if (buf[0] && std::find(list.begin(), list.end(), buf) == list.end()) list.push_back(buf);
      }
      if (status != 0) {
        s->resolve_error =
            "cannot resolve " + self->url_.hosts[r->host].host + ": " + uv_strerror(status);
      }
      if (--s->resolving == 0) self->start(s);
    }
    uv_freeaddrinfo(res);
    self->resolves_.erase(r);
    delete r;
    self->handle_closed();
  }

  void start(Session* s) {
    // "ip:port,..."; the library splits at the last ':', so IPv6 addresses go
    // without brackets.
    std::string hosts;
    for (size_t i = 0; i < s->addrs.size(); ++i) {
      for (const std::string& a : s->addrs[i]) {
        hosts += (hosts.empty() ? "" : ",") + a + ":" + std::to_string(url_.hosts[i].port);
      }
    }
    if (hosts.empty()) {
      const std::string why = s->resolve_error.empty() ? "no address" : s->resolve_error;
      preset(s->open_call, Outcome::kError, "zookeeper " + where_ + ": " + why);
      close_session_obj(s, 0);
      return;
    }
    std::string err;
    const uint64_t serial = s->serial;
    s->zk = UvZk::open(
        loop_, hosts, s->requested_ms,
        [this, serial](int type, int state, const std::string& path) {
          on_event(serial, type, state, path);
        },
        &err);
    if (!s->zk) {
      preset(s->open_call, Outcome::kError, "zookeeper " + where_ + ": " + err);
      close_session_obj(s, 0);
      return;
    }
    ++handles_;  // the UvZk, until its close completes
    if (url_.has_auth) {
      const std::string cred = url_.user + ":" + url_.password;
      // Sent at every (re)connect, ahead of every request.
      zoo_add_auth(s->zk->zh(), "digest", cred.data(), static_cast<int>(cred.size()), nullptr,
                   nullptr);
      s->zk->kick();
    }
  }

  void on_event(uint64_t serial, int type, int state, const std::string& path) {
    Session* s = closing_ ? nullptr : by_serial(serial);
    if (!s) return;
    if (type == ZOO_SESSION_EVENT) {
      if (state == ZOO_CONNECTED_STATE) {
        s->connected = true;
        if (!s->established) {
          s->established = true;
          s->id = hex_id(zoo_client_id(s->zk->zh())->client_id);
          set_up(s);
        } else {
          log(kLogInfo, "session " + s->id + " reconnected");
        }
      } else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
        s->expired = true;
        const std::string why = state == ZOO_AUTH_FAILED_STATE
                                    ? "digest authentication as \"" + url_.user + "\" failed"
                                    : "session " +
                                          (s->id.empty() ? std::string("(opening)") : s->id) +
                                          " expired on the server";
        log(kLogWarn, why);
        if (!s->ready) preset(s->open_call, Outcome::kError, "zookeeper " + where_ + ": " + why);
        // The core learns it from its next call on the session (kExpired).
        close_session_obj(s, 0);
      } else if (s->connected) {
        s->connected = false;
        log(kLogDebug, "session " + s->id + ": connection lost, reconnecting");
      }
      return;
    }
    const std::string prefix = leases_dir_ + "/";
    if (path.compare(0, prefix.size(), prefix) != 0) return;
    const std::string name = path.substr(prefix.size());
    if (type == ZOO_DELETED_EVENT) {
      // Our own release, the end of another session, or someone deleting our
      // node: in every case the node is gone, and a candidate may try now.
      s->owned.erase(name);
      if (released_fn_) released_fn_(name);
    } else if (type == ZOO_CREATED_EVENT || type == ZOO_CHANGED_EVENT) {
      watch(s, name);  // a watch fires once: keep watching the new holder
    }
  }

  // The chroot, its ancestors and its three directories (pipelined, each
  // "exists already" is fine), then the session's marker: one round trip.
  void set_up(Session* s) {
    std::vector<std::string> dirs;
    for (size_t at = url_.chroot.find('/', 1); at != std::string::npos;
         at = url_.chroot.find('/', at + 1)) {
      dirs.push_back(url_.chroot.substr(0, at));
    }
    dirs.push_back(url_.chroot);
    dirs.push_back(sessions_dir_);
    dirs.push_back(leases_dir_);
    dirs.push_back(tokens_dir_);
    for (const std::string& d : dirs) create_dir(s, d, nullptr);
    create_marker(s, s->open_call);
  }

  void create_dir(Session* s, const std::string& dir, std::function<void(int rc)> then) {
    Req* r = new_req(s, 0, [this, dir, then](Req& r, int rc) {
      if (rc != ZOK && rc != ZNODEEXISTS && !expired_rc(rc) && !connection_rc(rc)) {
        log(kLogWarn, "cannot create " + dir + ": " + zk_error(rc));
      }
      (void)r;
      if (then) then(rc);
    });
    r->paths = {dir};
    sent(s, r,
         zoo_acreate(s->zk->zh(), r->paths[0].c_str(), "", 0, &acl_, ZOO_PERSISTENT, string_done,
                     r));
  }

  // The ephemeral marker; answers the open call `call` (if not 0).
  void create_marker(Session* s, uint64_t call) {
    Req* r = new_req(s, call, [this](Req& r, int rc) {
      Session* s = r.s;
      if (!r.call) return;
      if (rc == ZOK || rc == ZNODEEXISTS) {
        if (!calls_.find(r.call)) {
          // The open timed out meanwhile: nobody will use this session.
          close_session_obj(s, 0);
          return;
        }
        s->ready = true;
        by_id_[s->id] = s;
        OpenReply out;
        out.outcome = Outcome::kOk;
        out.session_id = s->id;
        out.remaining = ms(zoo_recv_timeout(s->zk->zh()));
        log(kLogDebug, "session " + s->id + " opened, timeout " +
                           std::to_string(zoo_recv_timeout(s->zk->zh())) + " ms");
        deliver_open(r.call, out);
        return;
      }
      OpenReply out;
      fill_error(s, rc, &out.outcome, &out.error);
      if (out.outcome == Outcome::kExpired) out.outcome = Outcome::kError;
      out.error = "creating the session marker " + marker_path(s) + ": " + out.error;
      deliver_open(r.call, out);
      close_session_obj(s, 0);
    });
    r->paths = {marker_path(s)};
    r->payload = std::to_string(zoo_recv_timeout(s->zk->zh())) + " " +
                 (client_name_.empty() ? std::string("simba") : client_name_);
    sent(s, r,
         zoo_acreate(s->zk->zh(), r->paths[0].c_str(), r->payload.data(),
                     static_cast<int>(r->payload.size()), &acl_, ZOO_EPHEMERAL, string_done, r));
  }

  // --- acquire -------------------------------------------------------------------

  // One multi {create the lease node, bump the token node}, pipelined with an
  // exists-watch on the lease node. The first acquire of a name by this
  // backend also sends, ahead of it, the creation of the token node ("exists
  // already" is fine): still one round trip. `retries`: how many more times a
  // missing directory may be created before giving up.
  void send_acquire(Session* s, uint64_t call, const std::string& name, int retries) {
    // Whether this attempt found the lease held: only then does an absent node
    // at the watch's answer mean that the holder released it meanwhile.
    auto held = std::make_shared<bool>(false);
    if (!tokens_known_.count(name)) create_dir(s, token_path(name), nullptr);
    ++s->acquires_in_flight;
    Req* r = new_req(s, call, [this, name, retries, held](Req& r, int rc) {
      Session* s = r.s;
      --s->acquires_in_flight;
      next_acquires(s);
      AcquireReply out;
      // A failed multi answers ZOK for the operations before the failing one.
      if (rc == ZOK && r.results[0].err == ZOK && r.results[1].err == ZOK) {
        out = decode_zk_acquire_token(r.op_stat);
        if (out.outcome != Outcome::kOk) {
          // Never from a sound server (zxids are positive). The node stays
          // ours until the session ends; no term is started on a bad token.
          deliver_acquire(r.call, out);
          return;
        }
        Owned o;
        o.token = out.token;
        o.version = r.op_stat.version;
        // Recorded even when nobody waits for the answer any more: the next
        // keep-alive lists it and the core releases what it has no term for.
        s->owned[name] = o;
        remember_token_node(name);
        out.outcome = Outcome::kOk;
        out.token = o.token;
        deliver_acquire(r.call, out);
        return;
      }
      if (r.results[0].err == ZNODEEXISTS) {
        auto mine = s->owned.find(name);
        if (mine != s->owned.end()) {
          // Our own session holds it, won by an attempt whose answer came too
          // late. Handing it over (the core adopts it only with a token above
          // every one it released, and frees it otherwise) beats answering
          // Held: under load every new attempt would time out too, keep the
          // lease "explained" and never let the core release or adopt it.
          out.outcome = Outcome::kOk;
          out.token = mine->second.token;
          deliver_acquire(r.call, out);
          return;
        }
        *held = true;
        remember_token_node(name);
        out.outcome = Outcome::kHeld;  // the holder's remaining time is not known here
        deliver_acquire(r.call, out);
        return;
      }
      if (r.results[1].err == ZNONODE || r.results[0].err == ZNONODE) {
        // Someone removed our directories (or the token node): make them again.
        tokens_known_.erase(name);
        create_dir(s, url_.chroot, nullptr);
        create_dir(s, leases_dir_, nullptr);
        create_dir(s, tokens_dir_, nullptr);
        if (retries > 0 && calls_.find(r.call)) {
          send_acquire(s, r.call, name, retries - 1);
          return;
        }
      }
      fill_error(s, rc, &out.outcome, &out.error);
      deliver_acquire(r.call, out);
    });
    r->paths = {lease_path(name), token_path(name)};
    r->payload = s->id;
    r->ops.resize(2);
    r->results.assign(2, zoo_op_result_t{ZOK, nullptr, 0, nullptr});
    zoo_create_op_init(&r->ops[0], r->paths[0].c_str(), r->payload.data(),
                       static_cast<int>(r->payload.size()), &acl_, ZOO_EPHEMERAL, nullptr, 0);
    zoo_set_op_init(&r->ops[1], r->paths[1].c_str(), nullptr, -1, -1, &r->op_stat);
    const int rc = zoo_amulti(s->zk->zh(), 2, r->ops.data(), r->results.data(), void_done, r);
    if (rc != ZOK) --s->acquires_in_flight;  // its completion never runs
    sent(s, r, rc);
    if (!s->dead) watch(s, name, held);
  }

  // Sends queued acquires while there is room, skipping those nobody waits for.
  void next_acquires(Session* s) {
    while (s->acquires_in_flight < kMaxAcquiresInFlight && !s->acquire_queue.empty() && !s->dead) {
      auto [call, name] = std::move(s->acquire_queue.front());
      s->acquire_queue.pop_front();
      if (calls_.find(call)) send_acquire(s, call, name, 2);
    }
  }

  void remember_token_node(const std::string& name) {
    // Bounded: a process that goes through endless names only pays one
    // "exists already" create per name again after a reset.
    if (tokens_known_.size() >= 100'000) tokens_known_.clear();
    tokens_known_.insert(name);
  }

  // An exists-watch on the lease node: it fires when the node is deleted (or
  // created, if it is absent now). Its answer, which follows the answer of any
  // acquire sent before it, also tells whether our node is still there. `held`
  // (set by that acquire's answer) says whether an absent node is news; a
  // watch re-armed after an event passes nullptr.
  void watch(Session* s, const std::string& name, std::shared_ptr<bool> held = nullptr) {
    Req* r = new_req(s, 0, [this, name, held](Req& r, int rc) {
      Session* s = r.s;
      auto it = s->owned.find(name);
      if (rc == ZOK && r.has_stat) {
        if (it != s->owned.end() && static_cast<uint64_t>(r.stat.czxid) != it->second.token) {
          s->owned.erase(it);  // ours was deleted and someone else holds it now
        }
      } else if (rc == ZNONODE) {
        // Deleted before the watch was set: no event will say so. After an
        // attempt that failed for another reason the node was simply never
        // there: no news (and no retry storm).
        const bool ours = it != s->owned.end();
        if (ours) s->owned.erase(it);
        if ((ours || !held || *held) && released_fn_) released_fn_(name);
      }
    });
    r->paths = {lease_path(name)};
    sent(s, r,
         zoo_awexists(s->zk->zh(), r->paths[0].c_str(), UvZk::watcher(), s->zk->watcher_ctx(),
                      stat_done, r));
  }

  // --- close ---------------------------------------------------------------------

  // Ends the session's handle: the server deletes its ephemeral nodes at once
  // (unless the connection is suspect: then the session expires on its own).
  // `call` (if not 0) completes with kOk once the handle is closed.
  void close_session_obj(Session* s, uint64_t call) {
    if (s->dead) {
      if (call) preset(call, Outcome::kOk, "");
      return;
    }
    s->dead = true;
    if (!s->id.empty()) {
      auto it = by_id_.find(s->id);
      if (it != by_id_.end() && it->second == s) by_id_.erase(it);
    }
    for (auto& [p, r] : s->reqs) {
      if (r->call) preset(r->call, Outcome::kError, "zookeeper: session closed");
    }
    for (auto& [call, name] : s->acquire_queue) {
      preset(call, Outcome::kError, "zookeeper: session closed");
    }
    s->acquire_queue.clear();
    if (!s->ready && s->open_call)
      preset(s->open_call, Outcome::kError, "zookeeper: session closed");
    const uint64_t serial = s->serial;
    auto finished = [this, serial, call] {
      sessions_.erase(serial);
      if (call) deliver_done(call, DoneReply{Outcome::kOk, ""});
    };
    if (!s->zk) {
      // Still resolving: the resolver callbacks find no session.
      finished();
      return;
    }
    // An expired handle sends nothing at close; a suspect one would wait for
    // an answer that may never come.
    if (s->suspect && !s->expired) s->zk->abort_connection();
    s->zk->close([this, finished] {
      finished();
      handle_closed();
    });
  }

  // --- inspect -------------------------------------------------------------------

  void inspect_step_done(const std::shared_ptr<InspectState>& st) {
    if (--st->pending > 0) return;
    InspectReply out;
    if (!st->error.empty()) {
      out.error = st->error;
      deliver_inspect(st->call, out);
      return;
    }
    out = build_zk_inspect(st->sessions, st->asked, st->tokens, st->leases);
    deliver_inspect(st->call, out);
  }

  void inspect_failed(const std::shared_ptr<InspectState>& st, Session* s, int rc) {
    if (!st->error.empty()) return;
    Outcome o;
    fill_error(s, rc, &o, &st->error);
  }

  void inspect_children(Session* s, const std::shared_ptr<InspectState>& st, const std::string& dir,
                        std::function<void(Session*, const std::vector<std::string>&)> then) {
    ++st->pending;
    Req* r = new_req(s, 0, [this, st, then](Req& r, int rc) {
      if (rc == ZOK) {
        then(r.s, r.strings);
      } else if (rc != ZNONODE) {
        inspect_failed(st, r.s, rc);
      }
      inspect_step_done(st);
    });
    r->paths = {dir};
    const int rc = zoo_aget_children(s->zk->zh(), r->paths[0].c_str(), 0, strings_done, r);
    if (rc != ZOK) {
      s->reqs.erase(r);
      inspect_failed(st, s, rc);
      // Answered on a later turn by the call's timer.
      preset(st->call, Outcome::kError, st->error);
      return;
    }
    s->zk->kick();
  }

  // Reads a node's data (`data`) or only its stat; `then` runs when it exists.
  void inspect_read(Session* s, const std::shared_ptr<InspectState>& st, const std::string& path,
                    bool data, std::function<void(Req&)> then) {
    ++st->pending;
    Req* r = new_req(s, 0, [this, st, then](Req& r, int rc) {
      if (rc == ZOK) {
        then(r);
      } else if (rc != ZNONODE) {
        inspect_failed(st, r.s, rc);
      }
      inspect_step_done(st);
    });
    r->paths = {path};
    const int rc = data ? zoo_aget(s->zk->zh(), r->paths[0].c_str(), 0, data_done, r)
                        : zoo_aexists(s->zk->zh(), r->paths[0].c_str(), 0, stat_done, r);
    if (rc != ZOK) {
      s->reqs.erase(r);
      inspect_failed(st, s, rc);
      preset(st->call, Outcome::kError, st->error);
      return;
    }
    s->zk->kick();
  }

  void inspect_name(Session* s, const std::shared_ptr<InspectState>& st, const std::string& name) {
    if (!st->asked.insert(name).second) return;
    inspect_read(s, st, token_path(name), false, [st, name](Req& r) {
      if (r.has_stat) st->tokens[name] = r.stat;
    });
    inspect_read(s, st, lease_path(name), false, [st, name](Req& r) {
      if (r.has_stat) st->leases[name] = r.stat;
    });
  }

  uv_loop_t* loop_;
  LogFn log_;
  std::string client_name_;
  ZookeeperUrl url_;
  std::string where_;  // hosts and chroot, for messages (never the password)
  std::string sessions_dir_, leases_dir_, tokens_dir_;
  struct ACL acl_entries_[2];
  struct ACL_vector acl_ {};

  std::map<uint64_t, std::unique_ptr<Session>> sessions_;  // by serial
  std::map<std::string, Session*> by_id_;                  // ready sessions by id
  uint64_t next_serial_ = 0;

  std::set<std::string> tokens_known_;  // names whose token node exists
  std::set<Resolve*> resolves_;         // host name lookups under way

  ReleasedFn released_fn_;
  uv_timer_t anchor_;
  int handles_ = 0;  // our handles, requests and UvZk objects still open on the loop
  CallTable<Call> calls_;
  bool closing_ = false;
  std::function<void()> shutdown_done_;
};

}  // namespace

std::unique_ptr<Backend> make_zookeeper_backend(const BackendContext& ctx,
                                                const ZookeeperUrl& url) {
  return std::make_unique<ZookeeperBackend>(ctx, url);
}

}  // namespace simba
