// The PostgreSQL backend's class, shared by its two files: postgres_backend.cpp
// (the operations, the calls and their timeouts) and postgres_connect.cpp
// (connecting, setting a connection up, the schema check, the listener).
// The design is described at the top of postgres_backend.cpp.
#ifndef SIMBA_BACKEND_POSTGRES_POSTGRES_BACKEND_IMPL_H
#define SIMBA_BACKEND_POSTGRES_POSTGRES_BACKEND_IMPL_H

#include <libpq-fe.h>
#include <uv.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/call_table.h"
#include "backend/open_handles.h"
#include "backend/postgres/postgres_rows.h"
#include "backend/postgres/postgres_schema.h"
#include "backend/postgres/postgres_url.h"
#include "backend/postgres/uv_pq.h"

namespace simba::postgres_impl {

inline constexpr int kLogDebug = 0, kLogInfo = 1, kLogWarn = 2;

// Query tags of the command connection: call ids below kTagInternal.
inline constexpr uint64_t kTagInternal = 1ull << 62;
inline constexpr uint64_t kTagSetTimeout = kTagInternal + 1;
inline constexpr uint64_t kTagVersion = kTagInternal + 2;
inline constexpr uint64_t kTagDdl = kTagInternal + 3;
inline constexpr uint64_t kTagListen = kTagInternal + 4;
inline constexpr uint64_t kTagSyncCommit = kTagInternal + 5;
inline constexpr uint64_t kTagPrepare = kTagInternal + 6;

// How long a command connection may take to connect and set up before a call
// waiting for it, abandoned, also gives up on the connection.
inline constexpr int64_t kConnectGraceMs = 1000;

// A commit with synchronous_commit=off is acknowledged before its WAL is
// written, so a server crash can lose a granted term and hand its token out
// again. The setting may be off for the role or the database: our own
// connections turn it back on (`local` and the synchronous-replication levels
// are kept).
inline constexpr char kSyncCommitSql[] =
    "SELECT set_config('synchronous_commit', 'on', false) WHERE "
    "current_setting('synchronous_commit') = 'off'";

// SQLSTATEs that mean the schema (or part of it) is missing.
bool schema_missing(const std::string& sqlstate);

// A host entry libpq reaches without a name lookup: a socket directory (or an
// abstract socket), or an empty entry (libpq's default socket).
bool is_socket_host(const std::string& host);

// The comma-separated entries of `s` (libpq's host and hostaddr lists).
std::vector<std::string> split_commas(const std::string& s);

bool field_int(const PGresult* r, int row, int col, long long* out);

bool result_ok(const PGresult* r);

std::string sqlstate(const PGresult* r);

// "SQLSTATE 42501: permission denied for table simba_lease".
std::string result_error(const PGresult* r);

class PostgresBackend final : public Backend {
 public:
  PostgresBackend(const BackendContext& ctx, PostgresUrl url);

  ~PostgresBackend() override = default;

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
  CallRef acquire_permit(const std::string& session, const std::string& name, const PermitAsk& ask,
                         Duration timeout, AcquireCb cb) override;

  CallRef release_permit(const std::string& session, const std::string& name, PermitKind kind,
                         uint64_t permit, uint64_t token, Duration timeout, DoneCb cb) override;

  // ADR 0048's later steps bring run records here; until then a write fails.
  CallRef write_run(const std::string&, const std::string&, uint64_t, const RunRecord&,
                    Duration timeout, RunCb cb) override {
    return fail_later(timeout, [cb] { cb(run_record_not_supported_yet()); });
  }
  CallRef close_session(const std::string& session, Duration timeout, DoneCb cb) override;

  CallRef inspect(const std::vector<std::string>& names, Duration timeout, InspectCb cb) override;

  void abandon(CallRef call) override { calls_.abandon(call); }
  void on_released(ReleasedFn fn) override { released_fn_ = std::move(fn); }
  void watch(const std::string& name) override;
  void unwatch(const std::string& name) override;

  void shutdown(std::function<void()> done) override;

 private:
  using Done = std::function<void(const PGresult*, Outcome, const std::string&)>;

  struct Call : CallBase {
    uint64_t gen = 0;       // the command connection it was sent on (0: not sent)
    bool urgent = false;    // goes ahead of queued calls (keep-alive, close)
    bool on_wire = false;   // out of its connection's queue (call_sent)
    std::string statement;  // the name of a statement its connection prepared
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

  static Done done_parser(DoneCb cb);

  static std::string lease_ms(Duration lease);

  void log(int level, const std::string& line);
  std::string prefixed(const std::string& why) const;
  // Why a permit call fails on a schema older than kPostgresSchemaPermitsVersion.
  std::string no_permits() const;

  // An answer that is known before any I/O: delivered on a later loop turn.
  template <typename Fn>
  CallRef fail_later(Duration timeout, Fn fn) {
    Call* c =
        new_call({}, {}, timeout, [fn](const PGresult*, Outcome, const std::string&) { fn(); });
    calls_.preset(c, Outcome::kError, "");
    return c->id;
  }

  Call* new_call(std::string statement, std::vector<std::string> params, Duration timeout,
                 Done done);

  CallRef start(const std::string& statement, std::vector<std::string> params, Duration timeout,
                Done done, bool urgent = false);

  // Sends `c` on the ready command connection, after a SET when the calls'
  // timeout changed, so the server cuts a statement we have given up on.
  // A send can find the connection broken at once: its calls then fail on a
  // later loop turn (fail_calls), never inside the call that started them.
  void dispatch(Call* c);

  void call_sent(uint64_t tag);

  // Completes `c` exactly once (call_table.h).
  void complete(Call* c, const PGresult* r, Outcome o, const std::string& err);

  // Completes with kError every call sent on connection `gen`, and those
  // waiting for a connection when `unsent` is set.
  void fail_calls(uint64_t gen, bool unsent, const std::string& why);

  // The caller abandoned `c` (backend.h).
  void abandoned(Call* c);

  void note_failure(const std::string& why);

  // --- connecting ----------------------------------------------------------

  // Resolves every host name of the URL (one after the other), then connects.
  void connect();

  void resolve_from(size_t i);

  static void on_resolved(uv_getaddrinfo_t* req, int status, struct addrinfo* res);

  // libpq's options: the URL's, the addresses we resolved, and our defaults
  // for what the URL leaves unset.
  std::vector<std::pair<std::string, std::string>> connect_options() const;

  // A new connection with `handlers`; nullptr (with `why`) when libpq refuses.
  UvPq* new_conn(UvPq::Handlers handlers, std::string* why);

  void connect_now();

  // The calls waiting for a connection fail (on a later loop turn).
  void connect_failed(const std::string& why);

  void drop_cmd();

  void cmd_connected();

  // The schema is there: prepares the calls' statements on this connection
  // (PgStatements::prepare, or prepare_leases without permits), then
  // cmd_setup_done.
  void cmd_prepare();

  // The command connection is set up. The listener, started with it, gets to
  // LISTEN before the first calls go out (or fails first): a session that
  // becomes LIVE then hears every release from its start.
  void cmd_setup_done();

  // Sends the calls that waited for the command connection.
  void cmd_go();

  void cmd_setup_failed(const std::string& why);

  void cmd_result(uint64_t tag, const PGresult* r);

  void schema_version_result(const PGresult* r);

  // The schema is at `version`, one we run on: prepares.
  void schema_usable(long long version);

  // --- release broadcast -----------------------------------------------------

  void ensure_listen();

  // Also lets the command connection go on if it waited for the listener.
  void drop_listen();

  void schedule_listen();

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
  bool schema_ok_ = false;        // the schema was found (or made) at a version we run on
  // The schema has permits (kPostgresSchemaPermitsVersion): the statements
  // prepared, and so the keep-alive's answer, are those of PgStatements::prepare.
  // Set with schema_ok_; an older schema's clients call no permit function.
  bool permits_ = false;
  // The DDL failed on this command connection (its error here): the version is
  // read again, and a schema we can run on is used as it is.
  std::string ddl_error_;
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

  // Release broadcasts (postgres_connect.cpp): the one LISTEN hears every
  // release; only the watched names' are delivered (ADR 0040). A release of
  // an unwatched name is kept kHeardMs: a watch that follows (the caller's
  // Held answer came after the notification) gets it, on a later loop turn.
  static constexpr uint64_t kHeardMs = 1000;
  static constexpr size_t kHeardMax = 1024;
  void heard(const std::string& name);
  void replay_heard();
  std::set<std::string, std::less<>> watches_;
  std::deque<std::pair<std::string, uint64_t>> heard_;  // name, loop ms
  std::vector<std::string> replay_;                     // due on replay_timer_
  uv_timer_t replay_timer_;

  OpenHandles handles_;  // our handles, requests and connections still open on the loop
  CallTable<Call> calls_;
};

}  // namespace simba::postgres_impl

#endif  // SIMBA_BACKEND_POSTGRES_POSTGRES_BACKEND_IMPL_H
