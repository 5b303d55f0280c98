// Connecting the Redis backend: host lookups, the command connection (AUTH,
// SELECT, CONFIG checks, SCRIPT LOAD), TLS, failures and their backoff, and
// redis+sentinel://: asking the Sentinels for the primary, checking it with
// ROLE, and the +switch-master subscription.
#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <uv.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
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

namespace simba::redis_impl {

void RedisBackend::note_failure(const std::string& why) {
  last_error_ = why;
  ++failures_;
  const uint64_t backoff = reconnect_backoff_ms(failures_);
  uv_update_time(loop_);
  retry_at_ = uv_now(loop_) + backoff;
}

// Tears a connection down now (its pending callbacks run with NULL).
void RedisBackend::drop_conn(UvHiredis** slot) {
  UvHiredis* a = *slot;
  *slot = nullptr;
  if (a && a->ac) redisAsyncFree(a->ac);
}

void RedisBackend::drop_conn(UvHiredis** slot, const std::string& why) {
  drop_reason_ = why;
  drop_conn(slot);
  drop_reason_.clear();
}

// --- connecting ----------------------------------------------------------

void RedisBackend::connect() {
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

void RedisBackend::resolve(const std::string& host, Resolved then) {
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
  handles_.opened();
}

void RedisBackend::on_resolved(uv_getaddrinfo_t* req, int status, struct addrinfo* res) {
  auto* r = static_cast<Resolve*>(req->data);
  RedisBackend* self = r->self;
  self->resolves_.erase(r);
  // Every address of the name; a failed connect moves on to the next one.
  const std::vector<std::string> addrs = resolved_addresses(status, res);
  std::string ip;
  if (!addrs.empty()) ip = addrs[self->addr_index_ % addrs.size()];
  uv_freeaddrinfo(res);
  if (!self->handles_.closing()) {
    r->then(ip, ip.empty() ? "cannot resolve " + r->host + ": " +
                                 (status ? uv_strerror(status) : "no address")
                           : std::string());
  }
  delete r;
  self->handles_.closed();
}

// The calls waiting for a connection fail (on a later loop turn).
void RedisBackend::connect_failed(const std::string& why) {
  note_failure(why);
  fail_unsent(why);
}

void RedisBackend::fail_unsent(const std::string& why) {
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
bool RedisBackend::start_tls(redisAsyncContext* ac, const std::string& ip, bool command,
                             std::string* why) {
#ifdef SIMBA_WITH_REDIS_TLS
  TlsPump::Callbacks cbs;
  cbs.on_error = [this, command](const std::string& e) {
    if (handles_.closing()) return;
    if (command) {
      if (failures_ == 0 || e != tls_error_) log(kLogWarn, e);
      tls_error_ = e;
      note_failure(e);
    } else {
      log(kLogDebug, "subscriber: " + e);
    }
  };
  cbs.on_ready = [this, command](const std::string& what) {
    if (handles_.closing()) return;
    if (command) tls_error_.clear();
    log(kLogDebug, std::string(command ? "" : "subscriber: ") + what);
  };
  TlsPump** slot = new TlsPump*(nullptr);
  cbs.on_closed = [this, slot] {
    pumps_.erase(*slot);
    delete slot;
    handles_.closed();
  };
  const std::string name = url_.tls_server_name.empty() ? url_.host : url_.tls_server_name;
  TlsPump* p = TlsPump::start(loop_, tls_, ip, url_.port, name, ac->c.fd, std::move(cbs), why);
  if (!p) {
    delete slot;
    return false;
  }
  *slot = p;
  pumps_.insert(p);
  handles_.opened();
  return true;
#else
  (void)ac;
  (void)ip;
  (void)command;
  *why = "rediss:// is not built into this libsimba (no OpenSSL)";
  return false;
#endif
}

// A new async context to `ip`:`port`, with our adapter attached and AUTH
// queued; nullptr on failure (`why` set).
UvHiredis* RedisBackend::new_context(const std::string& ip, int port, Peer peer, std::string* why) {
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
  handles_.opened();
  ac->data = this;
  a->on_closed = [this] { handles_.closed(); };
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

void RedisBackend::connect_ip(const std::string& ip, int port) {
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
    const char* argv[] = {"SCRIPT", "LOAD", script(i).body.c_str()};
    redisAsyncCommandArgv(a->ac, on_setup_reply, const_cast<char*>("SCRIPT LOAD"), 3, argv,
                          nullptr);
  }
  if (cmd_ready_) send_unsent();
}

void RedisBackend::send_unsent() {
  std::vector<uint64_t> ids;
  ids.swap(unsent_);
  for (uint64_t id : ids) {
    Call* c = calls_.find(id);
    if (c && cmd_) send(c);
  }
  ensure_sub();
}

// ROLE's answer on a connection to the address the Sentinels named.
void RedisBackend::on_role(redisAsyncContext* ac, void* reply, void* privdata) {
  auto* self = static_cast<RedisBackend*>(ac->data);
  if (self->handles_.closing() || reinterpret_cast<uintptr_t>(privdata) != self->cmd_gen_) return;
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

void RedisBackend::on_connect(const redisAsyncContext* ac, int status) {
  auto* self = static_cast<RedisBackend*>(ac->data);
  if (self->handles_.closing()) return;
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

void RedisBackend::on_setup_reply(redisAsyncContext* ac, void* reply, void* privdata) {
  auto* self = static_cast<RedisBackend*>(ac->data);
  auto* r = static_cast<redisReply*>(reply);
  if (self->handles_.closing() || !r) return;
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
void RedisBackend::check_config(const redisReply* r) {
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

// Asks the Sentinels, one after another from the last that answered, for
// the primary's address; the calls wait in unsent_ meanwhile.
void RedisBackend::discover() {
  discovering_ = true;
  query_tries_ = 0;
  query_errors_.clear();
  ask_next_sentinel();
}

void RedisBackend::ask_next_sentinel() {
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

std::string RedisBackend::sentinel_label() const {
  const auto& [host, port] = url_.sentinels[sentinel_next_ % url_.sentinels.size()];
  return host + ":" + std::to_string(port);
}

// The Sentinel being asked did not name the primary: the next one is.
void RedisBackend::sentinel_failed(const std::string& label, const std::string& why) {
  uv_timer_stop(&query_timer_);
  if (query_) drop_conn(&query_);
  query_errors_ += (query_errors_.empty() ? "" : "; ") + label + ": " + why;
  log(kLogDebug, "Sentinel " + label + ": " + why);
  ++sentinel_next_;
  ask_next_sentinel();
}

void RedisBackend::on_master_addr(redisAsyncContext* ac, void* reply, void* privdata) {
  auto* self = static_cast<RedisBackend*>(ac->data);
  // (hiredis forgets a context, query_ = nullptr, before its callbacks run
  // with NULL: the generation tells whether this is the Sentinel asked.)
  if (self->handles_.closing() || !self->discovering_ ||
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
void RedisBackend::ensure_sentinel_sub() {
  if (!url_.sentinel || handles_.closing() || sentinel_sub_ ||
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

void RedisBackend::start_sentinel_sub(const std::string& ip, int port) {
  if (handles_.closing() || sentinel_sub_) return;
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
    if (!handles_.closing()) retry_sentinel_sub();
  };
  redisAsyncSetConnectCallback(a->ac, [](const redisAsyncContext* ac, int status) {
    auto* self = static_cast<RedisBackend*>(ac->data);
    if (!self->handles_.closing() && status == REDIS_OK) self->sentinel_sub_failures_ = 0;
  });
  command(a->ac, on_sentinel_message, nullptr, {"SUBSCRIBE", "+switch-master"});
}

void RedisBackend::retry_sentinel_sub() {
  ++sentinel_sub_failures_;
  ++sentinel_sub_next_;
  const uint64_t backoff = reconnect_backoff_ms(sentinel_sub_failures_ + 1);
  uv_timer_start(
      &sentinel_sub_timer_,
      [](uv_timer_t* t) { static_cast<RedisBackend*>(t->data)->ensure_sentinel_sub(); }, backoff,
      0);
}

void RedisBackend::on_sentinel_message(redisAsyncContext* ac, void* reply, void*) {
  auto* self = static_cast<RedisBackend*>(ac->data);
  auto* r = static_cast<redisReply*>(reply);
  if (self->handles_.closing() || !r) return;
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

}  // namespace simba::redis_impl
