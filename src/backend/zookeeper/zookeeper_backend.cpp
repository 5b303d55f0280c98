// The ZooKeeper backend's Backend operations (open, keep-alive, acquire,
// release, close, inspect, shutdown) and its calls; the class, its data model
// and the other files of its members: zookeeper_backend_impl.h.
#include "backend/zookeeper/zookeeper_backend.h"

#include <uv.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/zookeeper/zookeeper_backend_impl.h"

namespace simba {
namespace zookeeper_impl {

ZookeeperBackend::ZookeeperBackend(const BackendContext& ctx, ZookeeperUrl url)
    : loop_(ctx.loop),
      log_(ctx.log),
      client_name_(ctx.client_name),
      url_(std::move(url)),
      calls_(loop_, &handles_,
             {[this](Call* c) { abandoned(c); },
              [this](Call* c, Outcome o, const std::string& err) { fail(c->id, o, err); }}) {
  for (size_t i = 0; i < url_.hosts.size(); ++i) {
    where_ += (i ? "," : "") + url_.hosts[i].host + ":" + std::to_string(url_.hosts[i].port);
  }
  where_ += url_.chroot;
  sessions_dir_ = url_.chroot + "/sessions";
  leases_dir_ = url_.chroot + "/leases";
  tokens_dir_ = url_.chroot + "/tokens";
  sem_dir_ = url_.chroot + "/sem";
  rw_dir_ = url_.chroot + "/rw";
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
  handles_.opened(1);
}

// --- the session's operations ----------------------------------------------

Backend::CallRef ZookeeperBackend::open_session(Duration lease, Duration timeout, OpenCb cb) {
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
  return c->id;
}

Backend::CallRef ZookeeperBackend::keep_alive(const std::string& session, Duration,
                                              Duration timeout, KeepAliveCb cb) {
  Call* c = new_call(Kind::kKeepAlive, timeout);
  c->keep_alive = std::move(cb);
  Session* s = call_session(c, session);
  if (!s) return c->id;
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
      // Permits and intents, by entry (ADR 0046): each one's node is
      // exists-watched as a lease node is, so a deleted one has left.
      for (const auto& [resource, entries] : s->permits) {
        const std::string name = resource.substr(resource.find('/') + 1);
        for (const auto& [permit, e] : entries) {
          out.owned.push_back(OwnedLease{name, e.token, e.kind, permit});
        }
      }
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
  return c->id;
}

Backend::CallRef ZookeeperBackend::acquire(const std::string& session, const std::string& name,
                                           Duration timeout, AcquireCb cb) {
  Call* c = new_call(Kind::kAcquire, timeout);
  c->acquire = std::move(cb);
  Session* s = call_session(c, session);
  if (!s) return c->id;
  if (s->acquires_in_flight >= kMaxAcquiresInFlight) {
    s->acquire_queue.emplace_back(c->id, name);
    return c->id;
  }
  send_acquire(s, c->id, name, 2);
  return c->id;
}

Backend::CallRef ZookeeperBackend::release(const std::string& session, const std::string& name,
                                           uint64_t token, Duration timeout, DoneCb cb) {
  Call* c = new_call(Kind::kDone, timeout);
  c->done = std::move(cb);
  // No session (kExpired): its lease nodes went with it.
  Session* s = call_session(c, session);
  if (!s) return c->id;
  auto it = s->owned.find(name);
  if (it == s->owned.end() || it->second.token != token) {
    // Not ours (any more): nothing to free.
    preset(c, Outcome::kOk, "");
    return c->id;
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
  return c->id;
}

Backend::CallRef ZookeeperBackend::close_session(const std::string& session, Duration timeout,
                                                 DoneCb cb) {
  Call* c = new_call(Kind::kDone, timeout);
  c->done = std::move(cb);
  auto it = by_id_.find(session);
  if (it == by_id_.end()) {
    preset(c, Outcome::kOk, "");
    return c->id;
  }
  Session* s = it->second;
  if (s->connected && !s->suspect && s->reqs.empty()) {
    close_session_obj(s, c->id);
    return c->id;
  }
  c->session_serial = s->serial;
  close_after_answers(s, c->id);
  return c->id;
}

// Its connection is down or did not answer: closing the handle now would send
// nothing, and the session would keep its leases until it expires on the
// server. Or answers are still due: zookeeper_close() waits for the close's
// answer only until anything is readable, then closes the socket on unread
// answers (a reset), and the server, failing to write them, may drop the
// connection before it reads the close (same result). A read first: its answer
// comes after every earlier one, and then the close goes out on a quiet
// connection; no answer, the call fails and the handle stays, reconnecting to
// the same session, for the close the core sends again (ADR 0030).
void ZookeeperBackend::close_after_answers(Session* s, uint64_t call) {
  Req* r = new_req(s, call, [this](Req& r, int rc) {
    Session* s = r.s;
    if (rc == ZOK || rc == ZNONODE) {
      s->suspect = false;
      if (s->reqs.empty()) {
        close_session_obj(s, r.call);
        return;
      }
      // Sent after the read (a watch set again on an event, the read of a
      // close sent again): the last answer closes.
      s->on_quiet = [this, s, call = r.call] {
        if (s->connected && !s->suspect) {
          close_session_obj(s, call);
        } else {
          close_after_answers(s, call);
        }
      };
      return;
    }
    // Even if the core sends no other close (a session whose deadline passed
    // is closed once), the handle must not keep the session alive: it closes
    // at its reconnection, or once the server has expired the session.
    want_close(s);
    DoneReply out;
    fill_error(s, rc, &out.outcome, &out.error);
    deliver_done(r.call, out);
  });
  r->closes = true;
  sent(s, r, zoo_aexists(s->zk->zh(), marker_path(s).c_str(), 0, stat_done, r));
}

void ZookeeperBackend::want_close(Session* s) {
  if (s->close_wanted) return;
  s->close_wanted = true;
  // Not reconnected within the negotiated timeout: the server has expired the
  // session, and the handle is only trying to reach it. A call nobody answers
  // is the timer.
  const int timeout_ms = s->zk ? zoo_recv_timeout(s->zk->zh()) : 0;
  Call* backstop = new_call(Kind::kDone, std::chrono::milliseconds(std::max(timeout_ms, 1)));
  backstop->done = [this, serial = s->serial](const DoneReply&) {
    if (handles_.closing()) return;
    if (Session* s = by_serial(serial)) close_session_obj(s, 0);
  };
  calls_.abandon(backstop, std::max(timeout_ms, 1));
}

Backend::CallRef ZookeeperBackend::inspect(const std::vector<std::string>& names, Duration timeout,
                                           InspectCb cb) {
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
    return c->id;
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
    for (const char* kind : {"sem", "rw"}) {
      inspect_children(s, st, url_.chroot + "/" + kind,
                       [this, st, kind](Session* s, const std::vector<std::string>& found) {
                         for (const std::string& n : found) inspect_permits(s, st, kind, n);
                       });
    }
  } else {
    for (const std::string& n : names) {
      inspect_name(s, st, n);
      inspect_permits(s, st, "sem", n);
      inspect_permits(s, st, "rw", n);
    }
  }
  return c->id;
}

void ZookeeperBackend::shutdown(std::function<void()> done) {
  handles_.begin_shutdown(std::move(done));
  released_fn_ = nullptr;
  calls_.drop_all();  // pending calls are dropped without completion
  std::vector<Session*> all;
  for (auto& [serial, s] : sessions_) all.push_back(s.get());
  for (Session* s : all) close_session_obj(s, 0);
  // A lookup not started yet is cancelled (its callback runs with
  // UV_ECANCELED); one under way is waited for.
  for (Resolve* r : resolves_) uv_cancel(reinterpret_cast<uv_req_t*>(&r->req));
  uv_close(reinterpret_cast<uv_handle_t*>(&anchor_),
           [](uv_handle_t* h) { static_cast<ZookeeperBackend*>(h->data)->handles_.closed(); });
}

// --- calls -----------------------------------------------------------------

ZookeeperBackend::Call* ZookeeperBackend::new_call(Kind kind, Duration timeout) {
  Call* c = calls_.start(timeout);
  c->kind = kind;
  return c;
}

Session* ZookeeperBackend::call_session(Call* c, const std::string& id) {
  Session* s = usable(id);
  if (!s) {
    preset(c, Outcome::kExpired, "zookeeper: no such session");
    return nullptr;
  }
  c->session_serial = s->serial;
  return s;
}

void ZookeeperBackend::preset(uint64_t id, Outcome o, const std::string& err) {
  if (Call* c = calls_.find(id)) calls_.preset(c, o, err);
}

// The caller gave up on `c` (backend.h): it ends now with kError, and its
// answer, should it still come, finds nothing. ZooKeeper's client library
// judges the connection itself (its receive timeout), so none is dropped.
void ZookeeperBackend::abandoned(Call* c) {
  auto it = sessions_.find(c->session_serial);
  if (it != sessions_.end()) {
    // A connection that sat on a request is not waited for at close.
    it->second->suspect = true;
    // Nobody waits for a session whose open timed out.
    if (c->kind == Kind::kOpen && !it->second->ready) close_session_obj(it->second.get(), 0);
  }
  fail(c->id, Outcome::kError, "zookeeper " + where_ + ": no answer within the call's timeout");
}

ZookeeperBackend::Call* ZookeeperBackend::take(uint64_t id) {
  Call* c = calls_.find(id);
  if (c) calls_.finish(c);
  return c;
}

void ZookeeperBackend::fail(uint64_t id, Outcome o, const std::string& err) {
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
  }
}

void ZookeeperBackend::log(int level, const std::string& line) {
  if (log_) log_(level, "zookeeper " + where_ + ": " + line);
}

}  // namespace zookeeper_impl

std::unique_ptr<Backend> make_zookeeper_backend(const BackendContext& ctx,
                                                const ZookeeperUrl& url) {
  return std::make_unique<zookeeper_impl::ZookeeperBackend>(ctx, url);
}

}  // namespace simba
