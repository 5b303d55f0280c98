// The ZooKeeper backend's sessions and connections: requests and their
// completions, host name resolution, the handle and its session events and
// expiry, the chroot's directories, the session markers, closing a session.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <uv.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend_parts.h"
#include "backend/zookeeper/zookeeper_backend_impl.h"

namespace simba::zookeeper_impl {
namespace {

std::string hex_id(int64_t id) { return zk_hex_id(id); }

std::string zk_error(int rc) {
  const char* s = zerror(rc);
  return std::string(s ? s : "unknown error") + " (rc " + std::to_string(rc) + ")";
}

bool expired_rc(int rc) {
  return rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE || rc == ZAUTHFAILED;
}
}  // namespace

bool connection_rc(int rc) {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZCLOSING;
}

// --- completions -----------------------------------------------------------

void finish_req(Req* r, int rc) {
  Session* s = r->s;
  if (s->dead) return;  // freed with the session
  auto it = s->reqs.find(r);
  if (it == s->reqs.end()) return;
  std::unique_ptr<Req> own = std::move(it->second);
  s->reqs.erase(it);
  auto fn = std::move(own->fn);
  if (fn) fn(*own, rc);
  if (s->on_quiet && s->reqs.empty() && !s->dead) {
    auto quiet = std::move(s->on_quiet);
    s->on_quiet = nullptr;
    quiet();
  }
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

// --- requests --------------------------------------------------------------

Req* ZookeeperBackend::new_req(Session* s, uint64_t call, std::function<void(Req&, int)> fn) {
  auto r = std::make_unique<Req>();
  Req* raw = r.get();
  raw->s = s;
  raw->call = call;
  raw->fn = std::move(fn);
  s->reqs[raw] = std::move(r);
  return raw;
}

void ZookeeperBackend::sent(Session* s, Req* r, int rc) {
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

void ZookeeperBackend::fill_error(Session* s, int rc, Outcome* o, std::string* err) {
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

Session* ZookeeperBackend::usable(const std::string& id) {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return nullptr;
  Session* s = it->second;
  return s->ready && !s->expired && !s->dead && s->zk ? s : nullptr;
}

Session* ZookeeperBackend::by_serial(uint64_t serial) {
  auto it = sessions_.find(serial);
  return it == sessions_.end() || it->second->dead ? nullptr : it->second.get();
}

// --- opening a session -----------------------------------------------------

void ZookeeperBackend::resolve(Session* s) {
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
    ++s->resolving;
    resolves_.insert(r);
    const int rc = uv_getaddrinfo(loop_, &r->req, on_resolved, h.c_str(), nullptr, &hints);
    if (rc == 0) {
      handles_.opened();  // until on_resolved
    } else {
      --s->resolving;
      resolves_.erase(r);
      delete r;
      s->resolve_error = "cannot resolve " + h + ": " + uv_strerror(rc);
    }
  }
  if (s->resolving == 0) start(s);
}

void ZookeeperBackend::on_resolved(uv_getaddrinfo_t* req, int status, struct addrinfo* res) {
  auto* r = static_cast<Resolve*>(req->data);
  ZookeeperBackend* self = r->self;
  Session* s = self->handles_.closing() ? nullptr : self->by_serial(r->serial);
  if (s) {
    auto& list = s->addrs[r->host];
    for (const std::string& a : resolved_addresses(status, res)) {
      if (std::find(list.begin(), list.end(), a) == list.end()) list.push_back(a);
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
  self->handles_.closed();
}

void ZookeeperBackend::start(Session* s) {
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
  handles_.opened();  // the UvZk, until its close completes
  if (url_.has_auth) {
    const std::string cred = url_.user + ":" + url_.password;
    // Sent at every (re)connect, ahead of every request.
    zoo_add_auth(s->zk->zh(), "digest", cred.data(), static_cast<int>(cred.size()), nullptr,
                 nullptr);
    s->zk->kick();
  }
}

void ZookeeperBackend::on_event(uint64_t serial, int type, int state, const std::string& path) {
  Session* s = handles_.closing() ? nullptr : by_serial(serial);
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
        if (s->close_wanted) {
          // A close that could not reach the server: the new connection tells it.
          s->suspect = false;
          close_session_obj(s, 0);
          return;
        }
        check_unsure(s);  // acquires whose answer the old connection lost
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
  if (permit_event(s, type, path)) return;
  const std::string prefix = leases_dir_ + "/";
  if (path.compare(0, prefix.size(), prefix) != 0) return;
  const std::string name = path.substr(prefix.size());
  if (type == ZOO_DELETED_EVENT) {
    // Our own release, the end of another session, or someone deleting our
    // node: in every case the node is gone, and a candidate may try now.
    s->owned.erase(name);
    released(name);
  } else if (type == ZOO_CREATED_EVENT || type == ZOO_CHANGED_EVENT) {
    watch(s, name);  // a watch fires once: keep watching the new holder
  }
}

void ZookeeperBackend::set_up(Session* s) {
  std::vector<std::string> dirs;
  for (size_t at = url_.chroot.find('/', 1); at != std::string::npos;
       at = url_.chroot.find('/', at + 1)) {
    dirs.push_back(url_.chroot.substr(0, at));
  }
  dirs.push_back(url_.chroot);
  dirs.push_back(sessions_dir_);
  dirs.push_back(leases_dir_);
  dirs.push_back(tokens_dir_);
  dirs.push_back(sem_dir_);
  dirs.push_back(rw_dir_);
  for (const std::string& d : dirs) create_dir(s, d, nullptr);
  create_marker(s, s->open_call);
}

void ZookeeperBackend::create_dir(Session* s, const std::string& dir,
                                  std::function<void(int rc)> then) {
  Req* r = new_req(s, 0, [this, dir, then](Req& r, int rc) {
    if (rc != ZOK && rc != ZNODEEXISTS && !expired_rc(rc) && !connection_rc(rc)) {
      log(kLogWarn, "cannot create " + dir + ": " + zk_error(rc));
    }
    (void)r;
    if (then) then(rc);
  });
  r->paths = {dir};
  sent(s, r,
       zoo_acreate(s->zk->zh(), r->paths[0].c_str(), "", 0, &acl_, ZOO_PERSISTENT, string_done, r));
}

void ZookeeperBackend::create_marker(Session* s, uint64_t call) {
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

// --- close -----------------------------------------------------------------

void ZookeeperBackend::close_session_obj(Session* s, uint64_t call) {
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
    // A close still reading the session is answered by this close.
    if (r->call)
      preset(r->call, r->closes ? Outcome::kOk : Outcome::kError,
             r->closes ? "" : "zookeeper: session closed");
  }
  for (auto& [call, name] : s->acquire_queue) {
    preset(call, Outcome::kError, "zookeeper: session closed");
  }
  s->acquire_queue.clear();
  if (!s->ready && s->open_call) preset(s->open_call, Outcome::kError, "zookeeper: session closed");
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
    handles_.closed();
  });
}

}  // namespace simba::zookeeper_impl
