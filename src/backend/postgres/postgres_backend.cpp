// The PostgreSQL backend: libpq non-blocking on the client's libuv loop
// (uv_pq.h). Every operation is one call of a SQL function installed with the
// schema (postgres_schema.cpp), so one round trip. Permits (ADR 0046) live in
// their own table, simba_permit: a row per resource (permit_resource(kind,
// name)) with its size, permit counter, write epoch and entries, written under
// the row's lock; a release is broadcast on the release channel under the
// resource.
//
// Connections: one command connection, made on demand and remade after a drop
// (with backoff after failures), and one listener connection that LISTENs on
// the schema's release channel, so candidates attempt as soon as a lease is
// released (polling stays the fallback while it reconnects). Host names are
// resolved with uv_getaddrinfo and passed to libpq as `hostaddr` (libpq's own
// lookup blocks); TCP keep-alives and tcp_user_timeout are on unless the URL
// sets them, so a connection to a vanished host dies in seconds.
//
// The schema is checked on the first connection (one query) and created or
// migrated when needed (create=true), under an advisory lock.
//
// Timeouts (ADR 0039): a call its caller abandons (its timeout passed,
// backend.h) closes its connection once it is on the wire, so nothing it
// returns later is adopted; it and the other calls pending on that connection
// complete with kError, each exactly once. The server cancels the abandoned
// statement itself: the connection's statement_timeout follows the calls'
// timeout (PQcancel would block the loop on libpq 15, see ADR 0008). An
// answer that already waits in the socket (after a long loop turn) is read
// first: then the connection was not stuck.
#include "backend/postgres/postgres_backend.h"

#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <uv.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backend/backend_parts.h"
#include "backend/postgres/postgres_backend_impl.h"

namespace simba {
namespace postgres_impl {

// A session id as PostgreSQL writes a uuid (8-4-4-4-12), which is how the
// server hands it back: ids compare as text.
std::string uuid_text(const std::string& hex32) {
  std::string out = hex32;
  for (size_t at : {20, 16, 12, 8}) out.insert(at, 1, '-');
  return out;
}

// SQLSTATEs that mean the schema (or part of it) is missing.
bool schema_missing(const std::string& sqlstate) {
  return sqlstate == "42P01" /* undefined_table */ ||
         sqlstate == "3F000" /* invalid_schema_name */ ||
         sqlstate == "42883" /* undefined_function */;
}

// A host entry libpq reaches without a name lookup: a socket directory (or an
// abstract socket), or an empty entry (libpq's default socket).
bool is_socket_host(const std::string& host) {
  return host.empty() || host[0] == '/' || host[0] == '@';
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

bool field_int(const PGresult* r, int row, int col, long long* out) {
  return pg_field_int(r, row, col, out);
}

bool result_ok(const PGresult* r) {
  return r && (PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK);
}

std::string sqlstate(const PGresult* r) {
  const char* s = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  return s ? s : "";
}

// "SQLSTATE 42501: permission denied for table simba_lease".
std::string result_error(const PGresult* r) {
  if (!r) return "no result";
  const char* primary = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
  std::string msg = primary ? primary : PQresultErrorMessage(r);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  if (msg.empty()) msg = std::string("unexpected result ") + PQresStatus(PQresultStatus(r));
  const std::string state = sqlstate(r);
  return state.empty() ? msg : "SQLSTATE " + state + ": " + msg;
}

PostgresBackend::PostgresBackend(const BackendContext& ctx, PostgresUrl url)
    : loop_(ctx.loop),
      log_(ctx.log),
      client_name_(ctx.client_name.empty() ? std::string("simba") : ctx.client_name),
      url_(std::move(url)),
      stmts_(pg_statements(url_.schema)),
      channel_(pg_released_channel(url_.schema)),
      calls_(
          loop_, &handles_,
          {[this](Call* c) { abandoned(c); },
           [this](Call* c, Outcome o, const std::string& err) { complete(c, nullptr, o, err); }}) {
  where_ = url_.where();
  uv_timer_init(loop_, &listen_timer_);
  listen_timer_.data = this;
  uv_timer_init(loop_, &replay_timer_);
  replay_timer_.data = this;
  handles_.opened(2);
}

Backend::CallRef PostgresBackend::open_session(Duration lease, Duration timeout, OpenCb cb) {
  std::string sid;
  try {
    sid = uuid_text(random_session_id());
  } catch (const std::exception& e) {
    OpenReply r;
    r.error = std::string("no random source for a session id: ") + e.what();
    return fail_later(timeout, [cb, r] { cb(r); });
  }
  return start(stmts_.open, {sid, lease_ms(lease), client_name_}, timeout,
               [cb, sid](const PGresult* r, Outcome o, const std::string& err) {
                 OpenReply out;
                 if (failed(r, o, err, &out)) {
                   cb(out);
                   return;
                 }
                 cb(decode_pg_open(r, sid));
               });
}

Backend::CallRef PostgresBackend::keep_alive(const std::string& session, Duration lease,
                                             Duration timeout, KeepAliveCb cb) {
  // Urgent: a keep-alive must not wait behind a burst of acquires.
  return start(
      stmts_.keep_alive, {session, lease_ms(lease)}, timeout,
      [cb](const PGresult* r, Outcome o, const std::string& err) {
        KeepAliveReply out;
        if (failed(r, o, err, &out)) {
          cb(out);
          return;
        }
        // The statement prepared on this connection tells (cmd_prepare).
        cb(PQnfields(r) == 5 ? decode_pg_keep_alive_all(r) : decode_pg_keep_alive(r));
      },
      /*urgent=*/true);
}

Backend::CallRef PostgresBackend::acquire(const std::string& session, const std::string& name,
                                          Duration timeout, AcquireCb cb) {
  return start(stmts_.acquire, {session, name}, timeout,
               [cb](const PGresult* r, Outcome o, const std::string& err) {
                 AcquireReply out;
                 if (failed(r, o, err, &out)) {
                   cb(out);
                   return;
                 }
                 cb(decode_pg_acquire(r));
               });
}

Backend::CallRef PostgresBackend::release(const std::string& session, const std::string& name,
                                          uint64_t token, Duration timeout, DoneCb cb) {
  return start(stmts_.release, {session, name, std::to_string(token)}, timeout,
               done_parser(std::move(cb)),
               /*urgent=*/true);
}

Backend::CallRef PostgresBackend::acquire_permit(const std::string& session,
                                                 const std::string& name, const PermitAsk& ask,
                                                 Duration timeout, AcquireCb cb) {
  const bool write = ask.kind == PermitKind::kWrite;
  return start(stmts_.acquire_permit,
               {session, name, std::to_string(static_cast<int>(ask.kind)), std::to_string(ask.size),
                std::to_string(write ? ask.intent : 0), write && ask.leave_intent ? "t" : "f"},
               timeout, [cb](const PGresult* r, Outcome o, const std::string& err) {
                 AcquireReply out;
                 if (failed(r, o, err, &out)) {
                   cb(out);
                   return;
                 }
                 cb(decode_pg_acquire_permit(r));
               });
}

Backend::CallRef PostgresBackend::release_permit(const std::string& session,
                                                 const std::string& name, PermitKind kind,
                                                 uint64_t permit, uint64_t token, Duration timeout,
                                                 DoneCb cb) {
  return start(stmts_.release_permit,
               {session, name, std::to_string(static_cast<int>(kind)), std::to_string(permit),
                std::to_string(token)},
               timeout, done_parser(std::move(cb)), /*urgent=*/true);
}

std::string PostgresBackend::no_permits() const {
  return prefixed("the schema \"" + url_.schema + "\" has no semaphores or read/write locks: " +
                  "they need version " + std::to_string(kPostgresSchemaPermitsVersion) +
                  "; apply the DDL that `simba schema` prints as the schema's owner");
}

Backend::CallRef PostgresBackend::close_session(const std::string& session, Duration timeout,
                                                DoneCb cb) {
  return start(stmts_.close, {session}, timeout, done_parser(std::move(cb)), /*urgent=*/true);
}

Backend::CallRef PostgresBackend::inspect(const std::vector<std::string>& names, Duration timeout,
                                          InspectCb cb) {
  // Lease names hold no quote, backslash, comma or brace: a plain array literal.
  std::string array = "{";
  for (size_t i = 0; i < names.size(); ++i) array += (i ? ",\"" : "\"") + names[i] + "\"";
  array += "}";
  return start(stmts_.inspect, {array}, timeout,
               [cb](const PGresult* r, Outcome o, const std::string& err) {
                 InspectReply out;
                 if (failed(r, o, err, &out)) {
                   cb(out);
                   return;
                 }
                 cb(decode_pg_inspect(r));
               });
}

void PostgresBackend::shutdown(std::function<void()> done) {
  handles_.begin_shutdown(std::move(done));
  released_fn_ = nullptr;
  calls_.drop_all();  // pending calls are dropped without completion
  unsent_.clear();
  drop_cmd();
  drop_listen();
  if (resolving_) uv_cancel(reinterpret_cast<uv_req_t*>(resolving_));
  for (uv_timer_t* t : {&listen_timer_, &replay_timer_}) {
    uv_close(reinterpret_cast<uv_handle_t*>(t),
             [](uv_handle_t* h) { static_cast<PostgresBackend*>(h->data)->handles_.closed(); });
  }
}

PostgresBackend::Done PostgresBackend::done_parser(DoneCb cb) {
  return [cb](const PGresult* r, Outcome o, const std::string& err) {
    DoneReply out;
    if (!failed(r, o, err, &out)) out.outcome = Outcome::kOk;
    cb(out);
  };
}

std::string PostgresBackend::lease_ms(Duration lease) {
  return std::to_string(std::max<int64_t>(1, to_ms_ceil(lease)));
}

void PostgresBackend::log(int level, const std::string& line) {
  if (log_) log_(level, "postgresql " + where_ + ": " + scrub_secret(line, url_.password));
}

std::string PostgresBackend::prefixed(const std::string& why) const {
  return "postgresql " + where_ + ": " + scrub_secret(why, url_.password);
}

PostgresBackend::Call* PostgresBackend::new_call(std::string statement,
                                                 std::vector<std::string> params, Duration timeout,
                                                 Done done) {
  Call* c = calls_.start(timeout);
  c->statement = std::move(statement);
  c->params = std::move(params);
  c->done = std::move(done);
  return c;
}

Backend::CallRef PostgresBackend::start(const std::string& statement,
                                        std::vector<std::string> params, Duration timeout,
                                        Done done, bool urgent) {
  Call* c = new_call(statement, std::move(params), timeout, std::move(done));
  c->urgent = urgent;
  if (cmd_ready_) {
    dispatch(c);
    return c->id;
  }
  if (cmd_ || resolving_) {
    unsent_.push_back(c->id);
    return c->id;
  }
  uv_update_time(loop_);
  if (failures_ > 0 && uv_now(loop_) < retry_at_) {
    calls_.preset(c, Outcome::kError,
                  prefixed("unreachable (" + last_error_ + "); reconnecting in " +
                           std::to_string(retry_at_ - uv_now(loop_)) + " ms"));
    return c->id;
  }
  unsent_.push_back(c->id);
  connect();
  return c->id;
}

void PostgresBackend::dispatch(Call* c) {
  if (!permits_ &&
      (c->statement == stmts_.acquire_permit || c->statement == stmts_.release_permit)) {
    calls_.preset(c, Outcome::kError, no_permits());
    return;
  }
  if (c->timeout_ms != stmt_timeout_ms_) {
    stmt_timeout_ms_ = c->timeout_ms;
    cmd_->send(kTagSetTimeout, "SET statement_timeout = " + std::to_string(c->timeout_ms), {},
               UvPq::Mode::kSimple, c->urgent);
    if (!cmd_ready_) {
      calls_.preset(c, Outcome::kError, prefixed("connection lost: " + last_error_));
      return;
    }
  }
  c->gen = cmd_gen_;
  cmd_->send(c->id, c->statement, c->params, UvPq::Mode::kPrepared, c->urgent);
}

// Queued behind other statements (one at a time on a connection), a call
// goes on the wire later than it was sent: waiting in the queue is never
// taken for a connection that stopped answering. One abandoned while queued
// judges the connection a call's timeout after it went on the wire.
void PostgresBackend::call_sent(uint64_t tag) {
  Call* c = calls_.find(tag);
  if (!c || c->preset) return;
  c->on_wire = true;
  if (c->abandoned) calls_.abandon(c, c->timeout_ms);
}

void PostgresBackend::complete(Call* c, const PGresult* r, Outcome o, const std::string& err) {
  Done done = std::move(c->done);
  calls_.finish(c);
  if (done && !handles_.closing()) done(r, o, err);
}

void PostgresBackend::fail_calls(uint64_t gen, bool unsent, const std::string& why) {
  std::vector<Call*> victims;
  calls_.for_each([&](Call* c) {
    if (!c->preset && c->gen != 0 && c->gen == gen) victims.push_back(c);
  });
  if (unsent) {
    for (uint64_t id : unsent_) {
      if (Call* c = calls_.find(id)) victims.push_back(c);
    }
    unsent_.clear();
  }
  for (Call* c : victims) calls_.preset(c, Outcome::kError, why);
}

// The caller gave up on `c` (backend.h): it ends with its answer if the
// socket already holds one (uv_pq.h, read_now). Otherwise, once it is on the
// wire, the connection is stuck: it is closed, so that a late answer can
// never be delivered (`c` and the other calls on it complete with kError),
// and remade after a backoff; the server cancels the statement at its own
// statement_timeout.
void PostgresBackend::abandoned(Call* c) {
  const uint64_t id = c->id;
  const bool on_cmd = c->gen != 0 && cmd_ && c->gen == cmd_gen_;
  if (on_cmd) {
    cmd_->read_now();
    if (!calls_.find(id)) return;
    if (!c->on_wire) return;  // queued: judged from when it goes out (call_sent)
  }
  // A connection still being made is given longer (a server forks a process
  // per connection, which can take a while on a busy host): the calls
  // waiting for it end, but it goes on until kConnectGraceMs passed.
  uv_update_time(loop_);
  const bool connect_hung =
      c->gen == 0 && !cmd_ready_ &&
      uv_now(loop_) - connect_started_ >=
          static_cast<uint64_t>(std::max<int64_t>(kConnectGraceMs, c->timeout_ms));
  if (cmd_ && (on_cmd || connect_hung)) {
    const uint64_t gen = cmd_gen_;
    const std::string why = on_cmd ? "no answer within the call's timeout"
                                   : "connecting took longer than the call's timeout";
    note_failure(why);
    drop_cmd();
    fail_calls(gen, true, prefixed("connection reset: " + why));
  }
  unsent_.erase(std::remove(unsent_.begin(), unsent_.end(), id), unsent_.end());
  if (Call* left = calls_.find(id); left && !left->preset) {
    complete(left, nullptr, Outcome::kError, prefixed("no answer within the call's timeout"));
  }
}

void PostgresBackend::note_failure(const std::string& why) {
  if (failures_ == 0) log(kLogWarn, why);
  last_error_ = scrub_secret(why, url_.password);
  ++failures_;
  const uint64_t backoff = reconnect_backoff_ms(failures_);
  uv_update_time(loop_);
  retry_at_ = uv_now(loop_) + backoff;
}

}  // namespace postgres_impl

std::unique_ptr<Backend> make_postgres_backend(const BackendContext& ctx, const PostgresUrl& url) {
  return std::make_unique<postgres_impl::PostgresBackend>(ctx, url);
}

}  // namespace simba
