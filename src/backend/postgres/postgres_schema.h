// The PostgreSQL schema of Simba: tables, the SQL functions every operation
// calls (one round trip each), and its version. Text only: no libpq here.
#ifndef SIMBA_BACKEND_POSTGRES_POSTGRES_SCHEMA_H
#define SIMBA_BACKEND_POSTGRES_POSTGRES_SCHEMA_H

#include <cstdint>
#include <string>

namespace simba {

// The schema version this libsimba installs (with create=true) and prefers.
// Migrations only go forward; each keeps the functions of the versions before
// it working, with the same signatures and meaning.
constexpr int kPostgresSchemaVersion = 3;
// The first version with permits (ADR 0046): on an older schema, which this
// libsimba still runs on, its permit calls fail and its keep-alive lists leases.
constexpr int kPostgresSchemaPermitsVersion = 3;
// The oldest version this libsimba runs on: with create=false a schema from
// kPostgresSchemaMinVersion up is used as it is (a warning says what
// migrating would bring), so upgrading libsimba never needs a DBA first.
// Version 2 only made simba_acquire cheaper on the server; version 3 added
// permits.
constexpr int kPostgresSchemaMinVersion = 1;

// `schema` as a quoted identifier (the URL parser admits [A-Za-z0-9_] only).
std::string pg_quote_ident(const std::string& schema);

// The NOTIFY channel releases and closes publish lease names on.
std::string pg_released_channel(const std::string& schema);

// The advisory lock key that serializes schema creation in `schema`.
int64_t pg_schema_lock_key(const std::string& schema);

// Every statement that creates or migrates the schema to
// kPostgresSchemaVersion, idempotent, under the advisory lock. Run as one
// simple query, which PostgreSQL executes as one transaction.
std::string pg_schema_ddl(const std::string& schema);

// The same for a DBA to apply by hand (`simba schema`), in BEGIN/COMMIT.
std::string pg_schema_script(const std::string& schema);

// The statements the backend runs, with $n parameters: the calls' by the name
// `prepare` gives them on a connection (sent as UvPq::Mode::kPrepared);
// `version` as plain SQL (it runs before the schema may exist).
struct PgStatements {
  std::string version;  // -> max(version)
  // PREPAREs every statement below (one simple query) on a schema with
  // permits; prepare_leases those but the permit calls, and the keep-alive
  // and inspect of the versions before, on an older one.
  std::string prepare;
  std::string prepare_leases;
  std::string open;        // $1 uuid, $2 lease ms, $3 client name -> lease ms, or -1 (id taken)
  std::string keep_alive;  // $1 uuid, $2 lease ms -> rows (remaining_ms, name, token) and, with
                           //   permits, (kind, permit): 0, 0 for a lease
  std::string acquire;     // $1 uuid, $2 name -> (code, value)
  std::string release;     // $1 uuid, $2 name, $3 token -> 1 freed, 0 not (asynchronous commit)
  std::string close;       // $1 uuid -> leases freed (asynchronous commit)
  std::string inspect;     // $1 text[] names ('{}': all) -> rows (kind, id/name, client/holder,
                           //   token, remaining ms) and, with permits, (permit kind, permit);
                           //   kind 's' session, 'l' lease, 'p' permit
  // $1 uuid, $2 name, $3 kind, $4 size, $5 intent, $6 leave intent -> (code, token, permit,
  // value)
  std::string acquire_permit;
  // $1 uuid, $2 name, $3 kind, $4 permit, $5 token -> 1 freed, 0 not (asynchronous commit)
  std::string release_permit;
};
PgStatements pg_statements(const std::string& schema);

}  // namespace simba

#endif
