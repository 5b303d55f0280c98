// The PostgreSQL backend: libpq non-blocking on the client's libuv loop
// (uv_pq.h). Every operation is one call of a SQL function installed with the
// schema (postgres_schema.cpp), so one round trip.
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
// Timeouts: a call that gets no answer within its timeout completes with
// kTimeout and its connection is closed, so nothing it returns later is
// adopted; the other calls pending on that connection complete with kError,
// each exactly once. The server cancels the abandoned statement itself: the
// connection's statement_timeout follows the calls' timeout (PQcancel would
// block the loop on libpq 15, see ADR 0008). A timer that fires while the
// answer already waits in the socket (after a long loop turn) is not a
// timeout: the answer is read first.
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

#include "backend/call_table.h"
#include "backend/postgres/postgres_rows.h"
#include "backend/postgres/postgres_schema.h"
#include "backend/postgres/uv_pq.h"

namespace simba {
namespace {

constexpr int kLogDebug = 0, kLogInfo = 1, kLogWarn = 2;

// Query tags of the command connection: call ids below kTagInternal.
constexpr uint64_t kTagInternal = 1ull << 62;
constexpr uint64_t kTagSetTimeout = kTagInternal + 1;
constexpr uint64_t kTagVersion = kTagInternal + 2;
constexpr uint64_t kTagDdl = kTagInternal + 3;
constexpr uint64_t kTagListen = kTagInternal + 4;
constexpr uint64_t kTagSyncCommit = kTagInternal + 5;

// How long a command connection may take to connect and set up before the
// timeout of a call waiting for it also gives up on the connection.
constexpr int64_t kConnectGraceMs = 1000;

// A commit with synchronous_commit=off is acknowledged before its WAL is
// written, so a server crash can lose a granted term and hand its token out
// again. The setting may be off for the role or the database: our own
// connections turn it back on (`local` and the synchronous-replication levels
// are kept).
constexpr char kSyncCommitSql[] =
    "SELECT set_config('synchronous_commit', 'on', false) WHERE "
    "current_setting('synchronous_commit') = 'off'";

// SQLSTATEs that mean the schema (or part of it) is missing.
bool schema_missing(const std::string& sqlstate) {
  return sqlstate == "42P01" /* undefined_table */ ||
         sqlstate == "3F000" /* invalid_schema_name */ ||
         sqlstate == "42883" /* undefined_function */;
}

// A session id: 128 random bits, written as a uuid.
std::string random_session_id() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device device;
  std::string id;
  id.reserve(36);
  for (int word = 0; word < 4; ++word) {
    const uint32_t bits = static_cast<uint32_t>(device());
    for (int shift = 28; shift >= 0; shift -= 4) {
      if (id.size() == 8 || id.size() == 13 || id.size() == 18 || id.size() == 23)
        id.push_back('-');
      id.push_back(kHex[(bits >> shift) & 0xfu]);
    }
  }
  return id;
}

bool is_ip_literal(const std::string& host) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
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

class PostgresBackend final : public Backend {
 public:
  PostgresBackend(const BackendContext& ctx, PostgresUrl url)
      : loop_(ctx.loop),
        log_(ctx.log),
        client_name_(ctx.client_name.empty() ? std::string("simba") : ctx.client_name),
        url_(std::move(url)),
        stmts_(pg_statements(url_.schema)),
        channel_(pg_released_channel(url_.schema)),
        calls_(
            loop_, &handles_,
            {[this](Call* c) { timed_out(c); },
             [this](Call* c, Outcome o, const std::string& err) { complete(c, nullptr, o, err); },
             [this] { handle_closed(); }}) {
    where_ = url_.where();
    uv_timer_init(loop_, &listen_timer_);
    listen_timer_.data = this;
    handles_ = 1;
  }

  ~PostgresBackend() override = default;

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
    start(stmts_.open, {sid, lease_ms(lease), client_name_}, timeout,
          [cb, sid](const PGresult* r, Outcome o, const std::string& err) {
            OpenReply out;
            if (failed(r, o, err, &out)) {
              cb(out);
              return;
            }
            cb(decode_pg_open(r, sid));
          });
  }

  void keep_alive(const std::string& session, Duration lease, Duration timeout,
                  KeepAliveCb cb) override {
    // Urgent: a keep-alive must not wait behind a burst of acquires.
    start(
        stmts_.keep_alive, {session, lease_ms(lease)}, timeout,
        [cb](const PGresult* r, Outcome o, const std::string& err) {
          KeepAliveReply out;
          if (failed(r, o, err, &out)) {
            cb(out);
            return;
          }
          cb(decode_pg_keep_alive(r));
        },
        /*urgent=*/true);
  }

  void acquire(const std::string& session, const std::string& name, Duration timeout,
               AcquireCb cb) override {
    start(stmts_.acquire, {session, name}, timeout,
          [cb](const PGresult* r, Outcome o, const std::string& err) {
            AcquireReply out;
            if (failed(r, o, err, &out)) {
              cb(out);
              return;
            }
            cb(decode_pg_acquire(r));
          });
  }

  void release(const std::string& session, const std::string& name, uint64_t token,
               Duration timeout, DoneCb cb) override {
    start(stmts_.release, {session, name, std::to_string(token)}, timeout,
          done_parser(std::move(cb)), /*urgent=*/true);
  }

  void close_session(const std::string& session, Duration timeout, DoneCb cb) override {
    start(stmts_.close, {session}, timeout, done_parser(std::move(cb)), /*urgent=*/true);
  }

  void inspect(const std::vector<std::string>& names, Duration timeout, InspectCb cb) override {
    // Lease names hold no quote, backslash, comma or brace: a plain array literal.
    std::string array = "{";
    for (size_t i = 0; i < names.size(); ++i) array += (i ? ",\"" : "\"") + names[i] + "\"";
    array += "}";
    start(stmts_.inspect, {array}, timeout,
          [cb](const PGresult* r, Outcome o, const std::string& err) {
            InspectReply out;
            if (failed(r, o, err, &out)) {
              cb(out);
              return;
            }
            cb(decode_pg_inspect(r));
          });
  }

  void on_released(ReleasedFn fn) override { released_fn_ = std::move(fn); }

  void shutdown(std::function<void()> done) override {
    closing_ = true;
    shutdown_done_ = std::move(done);
    released_fn_ = nullptr;
    calls_.drop_all();  // pending calls are dropped without completion
    unsent_.clear();
    drop_cmd();
    drop_listen();
    if (resolving_) uv_cancel(reinterpret_cast<uv_req_t*>(resolving_));
    uv_close(reinterpret_cast<uv_handle_t*>(&listen_timer_),
             [](uv_handle_t* h) { static_cast<PostgresBackend*>(h->data)->handle_closed(); });
  }

 private:
  using Done = std::function<void(const PGresult*, Outcome, const std::string&)>;

  struct Call : CallBase {
    uint64_t gen = 0;     // the command connection it was sent on (0: not sent)
    bool urgent = false;  // goes ahead of queued calls (keep-alive, close)
    std::string sql;
    std::vector<std::string> params;
    Done done;
  };

  // The part every answer shares: no result (timeout, lost connection) or an
  // error result. Returns true when it filled `out` with that failure.
  template <typename Reply>
  static bool failed(const PGresult* r, Outcome o, const std::string& err, Reply* out) {
    if (!r) {
      out->outcome = o;
      out->error = err;
      return true;
    }
    if (!result_ok(r)) {
      out->error = result_error(r);
      return true;
    }
    return false;
  }

  static Done done_parser(DoneCb cb) {
    return [cb](const PGresult* r, Outcome o, const std::string& err) {
      DoneReply out;
      if (!failed(r, o, err, &out)) out.outcome = Outcome::kOk;
      cb(out);
    };
  }

  static std::string lease_ms(Duration lease) {
    return std::to_string(std::max<int64_t>(1, to_ms_ceil(lease)));
  }

  void log(int level, const std::string& line) {
    if (log_) log_(level, "postgresql " + where_ + ": " + scrub_secret(line, url_.password));
  }
  std::string prefixed(const std::string& why) const {
    return "postgresql " + where_ + ": " + scrub_secret(why, url_.password);
  }

  // An answer that is known before any I/O: delivered on a later loop turn.
  template <typename Fn>
  void fail_later(Duration timeout, Fn fn) {
    Call* c =
        new_call({}, {}, timeout, [fn](const PGresult*, Outcome, const std::string&) { fn(); });
    calls_.preset(c, Outcome::kError, "");
  }

  Call* new_call(std::string sql, std::vector<std::string> params, Duration timeout, Done done) {
    Call* c = calls_.start(timeout);
    c->sql = std::move(sql);
    c->params = std::move(params);
    c->done = std::move(done);
    return c;
  }

  void start(const std::string& sql, std::vector<std::string> params, Duration timeout, Done done,
             bool urgent = false) {
    Call* c = new_call(sql, std::move(params), timeout, std::move(done));
    c->urgent = urgent;
    if (cmd_ready_) {
      dispatch(c);
      return;
    }
    if (cmd_ || resolving_) {
      unsent_.push_back(c->id);
      return;
    }
    uv_update_time(loop_);
    if (failures_ > 0 && uv_now(loop_) < retry_at_) {
      calls_.preset(c, Outcome::kError,
                    prefixed("unreachable (" + last_error_ + "); reconnecting in " +
                             std::to_string(retry_at_ - uv_now(loop_)) + " ms"));
      return;
    }
    unsent_.push_back(c->id);
    connect();
  }

  // Sends `c` on the ready command connection, after a SET when the calls'
  // timeout changed, so the server cuts a statement we have given up on.
  // A send can find the connection broken at once: its calls then fail on a
  // later loop turn (fail_calls), never inside the call that started them.
  void dispatch(Call* c) {
    if (c->timeout_ms != stmt_timeout_ms_) {
      stmt_timeout_ms_ = c->timeout_ms;
      cmd_->send(kTagSetTimeout, "SET statement_timeout = " + std::to_string(c->timeout_ms), {},
                 true, c->urgent);
      if (!cmd_ready_) {
        calls_.preset(c, Outcome::kError, prefixed("connection lost: " + last_error_));
        return;
      }
    }
    c->gen = cmd_gen_;
    // Queued behind other statements (one at a time on a connection): its
    // timer starts again when it goes on the wire (call_sent), so that waiting
    // in the queue is never taken for a connection that stopped answering.
    // The caller keeps its own timeout meanwhile (the core's).
    calls_.stop_timer(c);
    cmd_->send(c->id, c->sql, c->params, false, c->urgent);
  }

  void call_sent(uint64_t tag) {
    Call* c = calls_.find(tag);
    if (c && !c->preset) calls_.restart_timer(c);
  }

  // Completes `c` exactly once (call_table.h).
  void complete(Call* c, const PGresult* r, Outcome o, const std::string& err) {
    Done done = std::move(c->done);
    calls_.finish(c);
    if (done && !closing_) done(r, o, err);
  }

  // Completes with kError every call sent on connection `gen`, and those
  // waiting for a connection when `unsent` is set.
  void fail_calls(uint64_t gen, bool unsent, const std::string& why) {
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

  // A call's timer fired with no answer yet.
  void timed_out(Call* c) {
    if (c->gen != 0 && cmd_ && c->gen == cmd_gen_) {
      // Its answer may be in the socket already (uv_pq.h, read_now): if so it
      // completes the call now, and the connection is not stuck.
      const uint64_t id = c->id;
      cmd_->read_now();
      if (!calls_.find(id)) return;
    }
    // Forgotten first, so that failing its connection's calls below does not
    // complete it too.
    Done done = std::move(c->done);
    calls_.finish(c);
    // No answer in time: close the connection it went out on (or the one it
    // waited for), so that a late answer can never be delivered, and reconnect
    // after a backoff. The server cancels the statement at its own
    // statement_timeout.
    // A connection still being made is given longer (a server forks a process
    // per connection, which can take a while on a busy host): the calls
    // waiting for it time out, but it goes on until kConnectGraceMs passed.
    uv_update_time(loop_);
    const bool connect_hung =
        c->gen == 0 && !cmd_ready_ &&
        uv_now(loop_) - connect_started_ >=
            static_cast<uint64_t>(std::max<int64_t>(kConnectGraceMs, c->timeout_ms));
    // Sent calls time out only once on the wire (call_sent): then the
    // connection is stuck.
    if (cmd_ && ((c->gen != 0 && c->gen == cmd_gen_) || connect_hung)) {
      const uint64_t gen = cmd_gen_;
      const std::string why = c->gen != 0 ? "no answer within the call's timeout"
                                          : "connecting took longer than the call's timeout";
      note_failure(why);
      drop_cmd();
      fail_calls(gen, true, prefixed("connection reset: " + why));
    }
    unsent_.erase(std::remove(unsent_.begin(), unsent_.end(), c->id), unsent_.end());
    if (done && !closing_) done(nullptr, Outcome::kTimeout, prefixed("no answer in time"));
  }

  void note_failure(const std::string& why) {
    if (failures_ == 0) log(kLogWarn, why);
    last_error_ = scrub_secret(why, url_.password);
    ++failures_;
    const uint64_t backoff = std::min<uint64_t>(2000, 50ull << std::min(failures_ - 1, 6));
    uv_update_time(loop_);
    retry_at_ = uv_now(loop_) + backoff;
  }

  void handle_closed() {
    if (--handles_ == 0 && closing_ && shutdown_done_) {
      auto done = std::move(shutdown_done_);
      done();
    }
  }

  // --- connecting ----------------------------------------------------------

  // Resolves every host name of the URL (one after the other), then connects.
  void connect() {
    hosts_ = url_.option("hostaddr").empty() ? split_commas(url_.option("host"))
                                             : std::vector<std::string>{};
    addrs_.assign(hosts_.size(), std::string());
    resolve_from(0);
  }

  void resolve_from(size_t i) {
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
      ++handles_;
      struct addrinfo hints = {};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      const int rc = uv_getaddrinfo(loop_, resolving_, on_resolved, h.c_str(), nullptr, &hints);
      if (rc != 0) {
        delete resolving_;
        resolving_ = nullptr;
        --handles_;
        connect_failed(std::string("cannot resolve ") + h + ": " + uv_strerror(rc));
      }
      return;
    }
    connect_now();
  }

  static void on_resolved(uv_getaddrinfo_t* req, int status, struct addrinfo* res) {
    auto* self = static_cast<PostgresBackend*>(req->data);
    self->resolving_ = nullptr;
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
    uv_freeaddrinfo(res);
    delete req;
    if (!self->closing_) {
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
    self->handle_closed();
  }

  // libpq's options: the URL's, the addresses we resolved, and our defaults
  // for what the URL leaves unset.
  std::vector<std::pair<std::string, std::string>> connect_options() const {
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

  // A new connection with `handlers`; nullptr (with `why`) when libpq refuses.
  UvPq* new_conn(UvPq::Handlers handlers, std::string* why) {
    handlers.on_closed = [this] { handle_closed(); };
    UvPq* conn = UvPq::create(loop_, std::move(handlers));
    ++handles_;
    if (!conn->start(options_, why)) {
      conn->close();
      return nullptr;
    }
    return conn;
  }

  void connect_now() {
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

  // The calls waiting for a connection fail (on a later loop turn).
  void connect_failed(const std::string& why) {
    note_failure(why);
    std::vector<uint64_t> ids;
    ids.swap(unsent_);
    for (uint64_t id : ids) {
      if (Call* c = calls_.find(id)) calls_.preset(c, Outcome::kError, prefixed(why));
    }
  }

  void drop_cmd() {
    UvPq* c = cmd_;
    cmd_ = nullptr;
    cmd_ready_ = false;
    waiting_for_listen_ = false;
    stmt_timeout_ms_ = -1;
    ++cmd_gen_;  // nothing of the old connection is adopted any more
    if (c) c->close();
  }

  void cmd_connected() {
    // Ahead of everything else on this connection (one query at a time, in order).
    cmd_->send(kTagSyncCommit, kSyncCommitSql, {});
    if (schema_ok_) {
      cmd_setup_done();
    } else {
      cmd_->send(kTagVersion, stmts_.version, {});
    }
  }

  // The command connection is set up. The listener, started with it, gets to
  // LISTEN before the first calls go out (or fails first): a session that
  // becomes LIVE then hears every release from its start.
  void cmd_setup_done() {
    if (failures_ > 0) log(kLogInfo, "connected");
    failures_ = 0;
    ensure_listen();
    if (listen_ && !listening_) {
      waiting_for_listen_ = true;
      return;
    }
    cmd_go();
  }

  // Sends the calls that waited for the command connection.
  void cmd_go() {
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

  void cmd_setup_failed(const std::string& why) {
    const uint64_t gen = cmd_gen_;
    note_failure(why);
    drop_cmd();
    fail_calls(gen, true, prefixed(why));
  }

  void cmd_result(uint64_t tag, const PGresult* r) {
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
    if (tag == kTagDdl) {
      if (!result_ok(r)) {
        cmd_setup_failed("cannot create the schema \"" + url_.schema + "\": " + result_error(r));
        return;
      }
      log(kLogInfo,
          "schema \"" + url_.schema + "\" is at version " + std::to_string(kPostgresSchemaVersion));
      schema_ok_ = true;
      cmd_setup_done();
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

  void schema_version_result(const PGresult* r) {
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
    if (!missing && version >= kPostgresSchemaVersion) {
      if (version > kPostgresSchemaVersion) {
        log(kLogWarn, "schema \"" + url_.schema + "\" is at version " + std::to_string(version) +
                          ", newer than this libsimba's " + std::to_string(kPostgresSchemaVersion) +
                          " (migrations keep older clients working)");
      }
      schema_ok_ = true;
      cmd_setup_done();
      return;
    }
    if (!url_.create) {
      cmd_setup_failed(
          missing ? "schema \"" + url_.schema +
                        "\" has no Simba tables and the URL says create=false: apply the DDL "
                        "that `simba schema` prints, or allow create"
                  : "schema \"" + url_.schema + "\" is at version " + std::to_string(version) +
                        ", older than " + std::to_string(kPostgresSchemaVersion) +
                        ", and the URL says create=false: apply the DDL that `simba schema` "
                        "prints");
      return;
    }
    log(kLogInfo, missing ? "creating the schema \"" + url_.schema + "\""
                          : "migrating the schema \"" + url_.schema + "\" from version " +
                                std::to_string(version));
    cmd_->send(kTagDdl, pg_schema_ddl(url_.schema), {}, true);
  }

  // --- release broadcast -----------------------------------------------------

  void ensure_listen() {
    if (closing_ || listen_ || options_.empty() ||
        uv_is_active(reinterpret_cast<uv_handle_t*>(&listen_timer_))) {
      return;
    }
    const uint64_t gen = ++listen_gen_;
    UvPq::Handlers h;
    h.on_ready = [this, gen] {
      if (gen == listen_gen_)
        listen_->send(kTagListen, "LISTEN " + pg_quote_ident(channel_), {}, true);
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
      // The core copes with a broadcast that overtakes an acquire's answer.
      if (released_fn_) released_fn_(payload);
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

  // Also lets the command connection go on if it waited for the listener.
  void drop_listen() {
    UvPq* c = listen_;
    listen_ = nullptr;
    listening_ = false;
    ++listen_gen_;
    if (c) c->close();
    if (waiting_for_listen_ && !closing_) cmd_go();
  }

  void schedule_listen() {
    if (closing_) return;
    ++listen_failures_;
    const uint64_t backoff = std::min<uint64_t>(2000, 50ull << std::min(listen_failures_, 6));
    uv_timer_start(
        &listen_timer_,
        [](uv_timer_t* t) { static_cast<PostgresBackend*>(t->data)->ensure_listen(); }, backoff, 0);
  }

  uv_loop_t* loop_;
  LogFn log_;
  std::string client_name_;
  PostgresUrl url_;
  PgStatements stmts_;
  std::string channel_;
  std::string where_;  // host:port, for messages (never the password)

  // Name resolution: the URL's host entries and the address chosen for each
  // ("" for a socket directory).
  std::vector<std::string> hosts_, addrs_;
  size_t resolve_index_ = 0;
  size_t addr_rotation_ = 0;  // which of a name's addresses to try next
  uv_getaddrinfo_t* resolving_ = nullptr;
  // The options of the last connection made (also used by the listener).
  std::vector<std::pair<std::string, std::string>> options_;

  UvPq* cmd_ = nullptr;           // the command connection (connecting, setting up, or ready)
  bool cmd_ready_ = false;        // set up: calls go out at once
  uint64_t cmd_gen_ = 0;          // bumped per command connection and when it is dropped
  int64_t stmt_timeout_ms_ = -1;  // the command connection's statement_timeout
  uint64_t connect_started_ = 0;  // loop ms when the command connection was started
  bool schema_ok_ = false;        // the schema was found (or made) at our version
  bool sync_commit_warned_ = false;
  std::vector<uint64_t> unsent_;  // calls waiting for the connection
  int failures_ = 0;              // consecutive connection failures
  uint64_t retry_at_ = 0;         // loop ms before which no reconnect is tried
  std::string last_error_;

  UvPq* listen_ = nullptr;
  uint64_t listen_gen_ = 0;
  uv_timer_t listen_timer_;
  int listen_failures_ = 0;
  bool listening_ = false;           // the LISTEN succeeded on listen_
  bool waiting_for_listen_ = false;  // the command connection waits for it
  ReleasedFn released_fn_;

  int handles_ = 0;  // our handles, requests and connections still open on the loop
  CallTable<Call> calls_;
  bool closing_ = false;
  std::function<void()> shutdown_done_;
};

}  // namespace

std::unique_ptr<Backend> make_postgres_backend(const BackendContext& ctx, const PostgresUrl& url) {
  return std::make_unique<PostgresBackend>(ctx, url);
}

}  // namespace simba
