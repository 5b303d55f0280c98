// The PostgreSQL backend's connections (postgres_backend_impl.h): name
// lookups, the command connection and its set-up (synchronous_commit, the
// schema check and migration), and the listener of the release channel.
#include <arpa/inet.h>
#include <libpq-fe.h>
#include <uv.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/backend_parts.h"
#include "backend/postgres/postgres_backend_impl.h"

namespace simba::postgres_impl {

void PostgresBackend::connect() {
  hosts_ = url_.option("hostaddr").empty() ? split_commas(url_.option("host"))
                                           : std::vector<std::string>{};
  addrs_.assign(hosts_.size(), std::string());
  resolve_from(0);
}

void PostgresBackend::resolve_from(size_t i) {
  for (; i < hosts_.size(); ++i) {
    const std::string& h = hosts_[i];
    if (is_socket_host(h)) continue;
    if (is_ip_literal(h)) {
      addrs_[i] = h;
      continue;
    }
    resolving_ = new uv_getaddrinfo_t;
    resolving_->data = this;
    resolve_index_ = i;
    struct addrinfo hints = {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    const int rc = uv_getaddrinfo(loop_, resolving_, on_resolved, h.c_str(), nullptr, &hints);
    if (rc == 0) {
      handles_.opened();  // until on_resolved
    } else {
      delete resolving_;
      resolving_ = nullptr;
      connect_failed(std::string("cannot resolve ") + h + ": " + uv_strerror(rc));
    }
    return;
  }
  connect_now();
}

void PostgresBackend::on_resolved(uv_getaddrinfo_t* req, int status, struct addrinfo* res) {
  auto* self = static_cast<PostgresBackend*>(req->data);
  self->resolving_ = nullptr;
  const std::vector<std::string> addrs = resolved_addresses(status, res);
  uv_freeaddrinfo(res);
  delete req;
  if (!self->handles_.closing()) {
    const size_t i = self->resolve_index_;
    if (addrs.empty()) {
      self->connect_failed("cannot resolve " + self->hosts_[i] + ": " +
                           (status ? uv_strerror(status) : "no address"));
    } else {
      // A name with several addresses: the next one after a failed connect.
      self->addrs_[i] = addrs[self->addr_rotation_ % addrs.size()];
      self->resolve_from(i + 1);
    }
  }
  self->handles_.closed();
}

std::vector<std::pair<std::string, std::string>> PostgresBackend::connect_options() const {
  auto opts = url_.options;
  bool resolved = false;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    resolved = resolved || (!addrs_[i].empty() && addrs_[i] != hosts_[i]);
  }
  if (resolved) {
    std::string list;
    for (size_t i = 0; i < addrs_.size(); ++i) list += (i ? "," : "") + addrs_[i];
    opts.emplace_back("hostaddr", list);
  }
  auto add_default = [&opts, this](const char* key, const std::string& value) {
    if (url_.option(key).empty()) opts.emplace_back(key, value);
  };
  add_default("keepalives", "1");
  add_default("keepalives_idle", "5");
  add_default("keepalives_interval", "2");
  add_default("keepalives_count", "3");
  add_default("tcp_user_timeout", "10000");
  add_default("fallback_application_name", "simba/" + client_name_);
  return opts;
}

UvPq* PostgresBackend::new_conn(UvPq::Handlers handlers, std::string* why) {
  handlers.on_closed = [this] { handles_.closed(); };
  UvPq* conn = UvPq::create(loop_, std::move(handlers));
  handles_.opened();
  if (!conn->start(options_, why)) {
    conn->close();
    return nullptr;
  }
  return conn;
}

void PostgresBackend::connect_now() {
  options_ = connect_options();
  uv_update_time(loop_);
  connect_started_ = uv_now(loop_);
  const uint64_t gen = ++cmd_gen_;
  UvPq::Handlers h;
  h.on_ready = [this, gen] {
    if (gen == cmd_gen_) cmd_connected();
  };
  h.on_result = [this, gen](uint64_t tag, const PGresult* r) {
    if (gen == cmd_gen_) cmd_result(tag, r);
  };
  h.on_sent = [this, gen](uint64_t tag) {
    if (gen == cmd_gen_) call_sent(tag);
  };
  h.on_dead = [this, gen](const std::string& why) {
    if (gen != cmd_gen_) return;
    ++addr_rotation_;
    note_failure(why);
    const bool was_ready = cmd_ready_;
    drop_cmd();
    fail_calls(gen, true, prefixed(was_ready ? "connection lost: " + why : why));
  };
  std::string why;
  cmd_ = new_conn(std::move(h), &why);
  if (!cmd_) {
    connect_failed(why);
    return;
  }
  ensure_listen();  // in parallel with the command connection
}

void PostgresBackend::connect_failed(const std::string& why) {
  note_failure(why);
  std::vector<uint64_t> ids;
  ids.swap(unsent_);
  for (uint64_t id : ids) {
    if (Call* c = calls_.find(id)) calls_.preset(c, Outcome::kError, prefixed(why));
  }
}

void PostgresBackend::drop_cmd() {
  UvPq* c = cmd_;
  cmd_ = nullptr;
  cmd_ready_ = false;
  waiting_for_listen_ = false;
  stmt_timeout_ms_ = -1;
  ++cmd_gen_;  // nothing of the old connection is adopted any more
  if (c) c->close();
}

void PostgresBackend::cmd_connected() {
  // Ahead of everything else on this connection (one query at a time, in order).
  cmd_->send(kTagSyncCommit, kSyncCommitSql, {});
  ddl_error_.clear();
  if (schema_ok_) {
    cmd_prepare();
  } else {
    cmd_->send(kTagVersion, stmts_.version, {});
  }
}

void PostgresBackend::cmd_prepare() {
  cmd_->send(kTagPrepare, permits_ ? stmts_.prepare : stmts_.prepare_leases, {},
             UvPq::Mode::kSimple);
}

void PostgresBackend::schema_usable(long long version) {
  schema_ok_ = true;
  permits_ = version >= kPostgresSchemaPermitsVersion;
  cmd_prepare();
}

void PostgresBackend::cmd_setup_done() {
  if (failures_ > 0) log(kLogInfo, "connected");
  failures_ = 0;
  ensure_listen();
  if (listen_ && !listening_) {
    waiting_for_listen_ = true;
    return;
  }
  cmd_go();
}

void PostgresBackend::cmd_go() {
  waiting_for_listen_ = false;
  if (!cmd_) return;
  cmd_ready_ = true;
  std::vector<uint64_t> ids;
  ids.swap(unsent_);
  for (uint64_t id : ids) {
    Call* c = calls_.find(id);
    if (!c) continue;
    if (cmd_ready_) {
      dispatch(c);
    } else if (!c->preset) {
      calls_.preset(c, Outcome::kError, prefixed("connection lost: " + last_error_));
    }
  }
}

void PostgresBackend::cmd_setup_failed(const std::string& why) {
  const uint64_t gen = cmd_gen_;
  note_failure(why);
  drop_cmd();
  fail_calls(gen, true, prefixed(why));
}

void PostgresBackend::cmd_result(uint64_t tag, const PGresult* r) {
  if (tag == kTagSetTimeout) {
    if (!result_ok(r)) log(kLogWarn, "cannot set statement_timeout: " + result_error(r));
    return;
  }
  if (tag == kTagSyncCommit) {
    if (!result_ok(r)) {
      log(kLogWarn, "cannot check synchronous_commit: " + result_error(r));
    } else if (PQntuples(r) > 0 && !sync_commit_warned_) {
      sync_commit_warned_ = true;
      log(kLogWarn,
          "synchronous_commit is off for this role or database: Simba turns it on for its "
          "own connections (a commit lost in a crash could hand a token out twice)");
    }
    return;
  }
  if (tag == kTagVersion) {
    schema_version_result(r);
    return;
  }
  if (tag == kTagPrepare) {
    if (!result_ok(r)) {
      cmd_setup_failed("cannot prepare the statements on the schema \"" + url_.schema +
                       "\": " + result_error(r));
      return;
    }
    cmd_setup_done();
    return;
  }
  if (tag == kTagDdl) {
    if (!result_ok(r)) {
      // Rolled back as a whole. Another client may have made the schema
      // meanwhile, or this role may not own an older one it can still use:
      // read the version again before giving up.
      ddl_error_ = result_error(r);
      if (ddl_error_.empty()) ddl_error_ = "no result";
      cmd_->send(kTagVersion, stmts_.version, {});
      return;
    }
    log(kLogInfo,
        "schema \"" + url_.schema + "\" is at version " + std::to_string(kPostgresSchemaVersion));
    schema_usable(kPostgresSchemaVersion);
    return;
  }
  Call* c = calls_.find(tag);
  if (!c) return;
  if (r && !result_ok(r) && schema_missing(sqlstate(r))) {
    // Someone dropped (part of) the schema: check it again on the next
    // connection.
    schema_ok_ = false;
  }
  complete(c, r, r ? Outcome::kOk : Outcome::kError, r ? "" : prefixed("no result"));
}

void PostgresBackend::schema_version_result(const PGresult* r) {
  long long version = 0;
  bool missing = false;
  if (result_ok(r)) {
    if (PQntuples(r) == 1 && !PQgetisnull(r, 0, 0) && !field_int(r, 0, 0, &version)) {
      cmd_setup_failed("unexpected answer to the schema version query");
      return;
    }
  } else if (schema_missing(sqlstate(r))) {
    missing = true;
  } else {
    cmd_setup_failed("cannot read the schema version: " + result_error(r));
    return;
  }
  const std::string at_version =
      "schema \"" + url_.schema + "\" is at version " + std::to_string(version);
  if (!missing && version >= kPostgresSchemaVersion) {
    if (version > kPostgresSchemaVersion) {
      log(kLogWarn, at_version + ", newer than this libsimba's " +
                        std::to_string(kPostgresSchemaVersion) +
                        " (migrations keep older clients working)");
    }
    schema_usable(version);
    return;
  }
  const bool runs_on_it = !missing && version >= kPostgresSchemaMinVersion;
  if (runs_on_it && (!url_.create || !ddl_error_.empty())) {
    // Every version from kPostgresSchemaMinVersion has the functions we call;
    // a newer one only does their work better (docs/backends.md).
    log(kLogWarn, at_version + ", older than this libsimba's " +
                      std::to_string(kPostgresSchemaVersion) + ": running on it as it is (" +
                      (ddl_error_.empty() ? "create=false" : "cannot migrate it: " + ddl_error_) +
                      "); apply the DDL that `simba schema` prints as the schema's owner" +
                      (version < kPostgresSchemaPermitsVersion
                           ? " (semaphores and read/write locks need version " +
                                 std::to_string(kPostgresSchemaPermitsVersion) + ")"
                           : ""));
    schema_usable(version);
    return;
  }
  if (!ddl_error_.empty()) {
    cmd_setup_failed("cannot " + std::string(missing ? "create" : "migrate") + " the schema \"" +
                     url_.schema + "\": " + ddl_error_);
    return;
  }
  if (!url_.create) {
    cmd_setup_failed(missing ? "schema \"" + url_.schema +
                                   "\" has no Simba tables and the URL says create=false: apply "
                                   "the DDL that `simba schema` prints, or allow create"
                             : at_version + ", older than " +
                                   std::to_string(kPostgresSchemaMinVersion) +
                                   ", the oldest this libsimba runs on, and the URL says "
                                   "create=false: apply the DDL that `simba schema` prints");
    return;
  }
  log(kLogInfo, missing ? "creating the schema \"" + url_.schema + "\""
                        : "migrating the schema \"" + url_.schema + "\" from version " +
                              std::to_string(version));
  cmd_->send(kTagDdl, pg_schema_ddl(url_.schema), {}, UvPq::Mode::kSimple);
}

void PostgresBackend::ensure_listen() {
  if (handles_.closing() || listen_ || options_.empty() ||
      uv_is_active(reinterpret_cast<uv_handle_t*>(&listen_timer_))) {
    return;
  }
  const uint64_t gen = ++listen_gen_;
  UvPq::Handlers h;
  h.on_ready = [this, gen] {
    if (gen == listen_gen_)
      listen_->send(kTagListen, "LISTEN " + pg_quote_ident(channel_), {}, UvPq::Mode::kSimple);
  };
  h.on_result = [this, gen](uint64_t, const PGresult* r) {
    if (gen != listen_gen_) return;
    if (!result_ok(r)) {
      log(kLogWarn, "LISTEN failed: " + result_error(r));
      drop_listen();
      schedule_listen();
      return;
    }
    listen_failures_ = 0;
    listening_ = true;
    if (waiting_for_listen_) cmd_go();
    log(kLogDebug, "listening for release broadcasts");
  };
  h.on_notify = [this, gen](const std::string& channel, const std::string& payload) {
    if (gen != listen_gen_ || channel != channel_ || payload.empty()) return;
    if (!watches_.count(payload)) {
      heard(payload);
      return;
    }
    // The core copes with a broadcast that overtakes an acquire's answer.
    if (released_fn_) released_fn_(payload, Grant{});
  };
  h.on_dead = [this, gen](const std::string& why) {
    if (gen != listen_gen_) return;
    log(kLogDebug, "listener: " + why);
    drop_listen();
    schedule_listen();
  };
  std::string why;
  listen_ = new_conn(std::move(h), &why);
  if (!listen_) {
    log(kLogDebug, "listener: " + why);
    schedule_listen();
  }
}

void PostgresBackend::watch(const std::string& name) {
  watches_.insert(name);
  const uint64_t now = uv_now(loop_);
  for (const auto& [n, at] : heard_) {
    if (n != name || now - at > kHeardMs) continue;
    replay_.push_back(name);
    uv_timer_start(
        &replay_timer_,
        [](uv_timer_t* t) { static_cast<PostgresBackend*>(t->data)->replay_heard(); }, 0, 0);
    return;
  }
}

void PostgresBackend::unwatch(const std::string& name) { watches_.erase(name); }

void PostgresBackend::heard(const std::string& name) {
  const uint64_t now = uv_now(loop_);
  while (!heard_.empty() &&
         (heard_.size() >= kHeardMax || now - heard_.front().second > kHeardMs)) {
    heard_.pop_front();
  }
  heard_.emplace_back(name, now);
}

void PostgresBackend::replay_heard() {
  std::vector<std::string> names;
  names.swap(replay_);
  for (const std::string& n : names) {
    if (handles_.closing() || !released_fn_) return;
    if (watches_.count(n)) released_fn_(n, Grant{});
  }
}

void PostgresBackend::drop_listen() {
  UvPq* c = listen_;
  listen_ = nullptr;
  listening_ = false;
  ++listen_gen_;
  if (c) c->close();
  if (waiting_for_listen_ && !handles_.closing()) cmd_go();
}

void PostgresBackend::schedule_listen() {
  if (handles_.closing()) return;
  ++listen_failures_;
  const uint64_t backoff = reconnect_backoff_ms(listen_failures_ + 1);
  uv_timer_start(
      &listen_timer_,
      [](uv_timer_t* t) { static_cast<PostgresBackend*>(t->data)->ensure_listen(); }, backoff, 0);
}

}  // namespace simba::postgres_impl
