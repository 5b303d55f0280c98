#include "backend/postgres/postgres_schema.h"

#include <string>
#include <utility>

namespace simba {
namespace {

// @S@ = the quoted schema, @NAME@ = its name as a string literal's content
// (the URL parser admits [A-Za-z0-9_] only), @CHANNEL@ = the release channel, @KEY@ = the
// advisory lock key, @VERSION@ = kPostgresSchemaVersion.
//
// Concurrency, under READ COMMITTED (each statement of a plpgsql function
// sees the rows committed before it started):
//   - acquire takes a lease only on the row's newest version: a free row by an
//     UPDATE whose WHERE (still free) is checked again after any lock wait,
//     anything else (a missing row, an expired holder) after locking the row
//     (FOR UPDATE) and reading it again. Two acquires of one name that may win
//     run one after the other, and the second sees the first's holder and
//     token: never two winners, never one token twice (an attempt that finds a
//     live holder answers Held from a plain read, without the lock);
//   - keep-alive locks its session row first and compares the expiry with the
//     clock after any wait, so an expired session is never extended;
//   - deleting expired sessions skips rows someone has locked, so it never waits
//     (and never joins a deadlock with a close, which locks its session first
//     and its leases next).
// Time is the server's clock_timestamp(); remaining times are milliseconds,
// rounded down.
constexpr char kDdl[] = R"sql(SELECT pg_advisory_xact_lock(@KEY@);
-- Only when missing: CREATE SCHEMA IF NOT EXISTS would still need the CREATE
-- privilege on the database.
DO $simba$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = '@NAME@') THEN
    CREATE SCHEMA @S@;
  END IF;
END
$simba$;
CREATE TABLE IF NOT EXISTS @S@.simba_schema_version (
  version integer PRIMARY KEY,
  applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- Never over a newer schema: a client that read an older version (or none)
-- before a newer libsimba migrated stops here with nothing changed (the whole
-- script is one transaction), and reads the version again.
DO $simba$
BEGIN
  IF (SELECT coalesce(max(version), 0) FROM @S@.simba_schema_version) > @VERSION@ THEN
    RAISE EXCEPTION 'schema "@NAME@" is newer than version @VERSION@: left unchanged'
      USING ERRCODE = 'object_not_in_prerequisite_state';
  END IF;
END
$simba$;

-- Version 2 (version 1 had the same tables and functions; version 2 changed
-- only simba_acquire's body). Every statement is idempotent: a client that
-- checked the version before another one of the same version migrated runs
-- them again, harmlessly. (A libsimba of version 1 has no guard above: its
-- script, run after this one, puts version 1's slower simba_acquire back under
-- version 2's row; the answers are the same.)

-- One row per session. Keep-alives rewrite expires_at often: the fill factor
-- leaves room for HOT updates, and no index covers expires_at.
CREATE TABLE IF NOT EXISTS @S@.simba_session (
  id uuid PRIMARY KEY,
  expires_at timestamptz NOT NULL,
  client_name text NOT NULL DEFAULT ''
) WITH (fillfactor = 50);

-- One row per lease name, never deleted: the token counts up across terms.
-- session_id is the holder, NULL when free; a holder whose session expired or
-- is gone holds nothing.
CREATE TABLE IF NOT EXISTS @S@.simba_lease (
  name varchar(128) PRIMARY KEY,
  session_id uuid,
  token bigint NOT NULL DEFAULT 0 CHECK (token >= 0)
);
CREATE INDEX IF NOT EXISTS simba_lease_session_id
  ON @S@.simba_lease (session_id) WHERE session_id IS NOT NULL;

-- Deletes up to 100 expired sessions nobody has locked.
CREATE OR REPLACE FUNCTION @S@.simba_cleanup() RETURNS integer
LANGUAGE sql AS $simba$
  WITH gone AS (
    DELETE FROM @S@.simba_session WHERE id IN (
      SELECT s.id FROM @S@.simba_session s WHERE s.expires_at <= clock_timestamp()
      LIMIT 100 FOR UPDATE SKIP LOCKED)
    RETURNING 1)
  SELECT count(*)::integer FROM gone;
$simba$;

-- A new session valid for p_lease_ms; the lease in ms, or -1 if the id is taken.
CREATE OR REPLACE FUNCTION @S@.simba_open(p_session uuid, p_lease_ms bigint,
                                          p_client_name text) RETURNS bigint
LANGUAGE plpgsql AS $simba$
BEGIN
  PERFORM @S@.simba_cleanup();
  INSERT INTO @S@.simba_session (id, expires_at, client_name)
    VALUES (p_session, clock_timestamp() + p_lease_ms * interval '1 millisecond',
            coalesce(p_client_name, ''))
    ON CONFLICT (id) DO NOTHING;
  IF NOT FOUND THEN
    RETURN -1;
  END IF;
  RETURN p_lease_ms;
END
$simba$;

-- Extends a live session by p_lease_ms. Rows: (remaining_ms, NULL, NULL) and
-- one (remaining_ms, name, token) per lease it holds; a single (-1, NULL, NULL)
-- if the session expired or is gone (never revived).
CREATE OR REPLACE FUNCTION @S@.simba_keep_alive(p_session uuid, p_lease_ms bigint)
RETURNS TABLE (remaining_ms bigint, lease_name text, lease_token bigint)
LANGUAGE plpgsql AS $simba$
DECLARE
  v_expires timestamptz;
BEGIN
  SELECT s.expires_at INTO v_expires FROM @S@.simba_session s
    WHERE s.id = p_session FOR UPDATE;
  IF NOT FOUND OR v_expires <= clock_timestamp() THEN
    RETURN QUERY SELECT -1::bigint, NULL::text, NULL::bigint;
    RETURN;
  END IF;
  UPDATE @S@.simba_session s
    SET expires_at = clock_timestamp() + p_lease_ms * interval '1 millisecond'
    WHERE s.id = p_session;
  RETURN QUERY
    SELECT p_lease_ms, NULL::text, NULL::bigint
    UNION ALL
    SELECT p_lease_ms, l.name::text, l.token FROM @S@.simba_lease l
      WHERE l.session_id = p_session;
END
$simba$;

-- code 1: won, value = the new token; code 0: held by a live session (ours
-- included: never two terms of one name for one session), value = its
-- remaining ms; code -1: our session expired or is gone.
--
-- Version 2: a lease row that is free when read is taken by one conditional
-- UPDATE (three statements instead of five, no separate row lock). The
-- UPDATE's WHERE is checked again on the row's newest version after any lock
-- wait (READ COMMITTED), so of two acquires that both read it free the second
-- finds it taken, goes on to the locked path below, and answers Held; its
-- token is the newest version's plus one, so never one token twice. Our
-- expiry is compared with the clock in the same WHERE, after any wait.
CREATE OR REPLACE FUNCTION @S@.simba_acquire(p_session uuid, p_name text,
                                             OUT code integer, OUT value bigint)
LANGUAGE plpgsql AS $simba$
DECLARE
  v_holder uuid;
  v_token bigint;
  v_now timestamptz;
  v_expires timestamptz;
  v_ours timestamptz;
BEGIN
  -- Most attempts find the lease held: answer those without taking a lock, so
  -- that polling candidates never make the holder's release or the next
  -- winner wait. A lease that looks free is taken by the conditional UPDATE;
  -- only a missing row, an expired holder or a lost race take the lock below.
  v_now := clock_timestamp();
  SELECT s.expires_at INTO v_ours FROM @S@.simba_session s WHERE s.id = p_session;
  IF NOT FOUND OR v_ours <= v_now THEN
    code := -1;
    value := 0;
    RETURN;
  END IF;
  SELECT l.session_id INTO v_holder FROM @S@.simba_lease l WHERE l.name = p_name;
  IF FOUND AND v_holder IS NULL THEN
    UPDATE @S@.simba_lease l SET session_id = p_session, token = l.token + 1
      WHERE l.name = p_name AND l.session_id IS NULL AND clock_timestamp() < v_ours
      RETURNING l.token INTO v_token;
    IF FOUND THEN
      code := 1;
      value := v_token;
      RETURN;
    END IF;
  ELSIF v_holder IS NOT NULL THEN
    v_expires := v_ours;
    IF v_holder <> p_session THEN
      SELECT s.expires_at INTO v_expires FROM @S@.simba_session s WHERE s.id = v_holder;
    END IF;
    IF FOUND AND v_expires > v_now THEN
      code := 0;
      value := floor(extract(epoch FROM v_expires - v_now) * 1000)::bigint;
      RETURN;
    END IF;
  END IF;

  SELECT l.session_id, l.token INTO v_holder, v_token FROM @S@.simba_lease l
    WHERE l.name = p_name FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO @S@.simba_lease (name, session_id, token) VALUES (p_name, NULL, 0)
      ON CONFLICT (name) DO NOTHING;
    SELECT l.session_id, l.token INTO v_holder, v_token FROM @S@.simba_lease l
      WHERE l.name = p_name FOR UPDATE;
  END IF;
  v_now := clock_timestamp();
  SELECT s.expires_at INTO v_expires FROM @S@.simba_session s WHERE s.id = p_session;
  IF NOT FOUND OR v_expires <= v_now THEN
    code := -1;
    value := 0;
    RETURN;
  END IF;
  IF v_holder IS NOT NULL THEN
    IF v_holder <> p_session THEN
      SELECT s.expires_at INTO v_expires FROM @S@.simba_session s WHERE s.id = v_holder;
    END IF;
    IF FOUND AND v_expires > v_now THEN
      code := 0;
      value := floor(extract(epoch FROM v_expires - v_now) * 1000)::bigint;
      RETURN;
    END IF;
    -- The holder's session expired: its row goes unless someone has it locked.
    DELETE FROM @S@.simba_session WHERE id IN (
      SELECT s.id FROM @S@.simba_session s
        WHERE s.id = v_holder AND s.expires_at <= v_now FOR UPDATE SKIP LOCKED);
  END IF;
  UPDATE @S@.simba_lease l SET session_id = p_session, token = v_token + 1
    WHERE l.name = p_name;
  code := 1;
  value := v_token + 1;
END
$simba$;

-- Frees the lease only where both session and token match; 1 if it did.
CREATE OR REPLACE FUNCTION @S@.simba_release(p_session uuid, p_name text, p_token bigint)
RETURNS integer
LANGUAGE plpgsql AS $simba$
BEGIN
  UPDATE @S@.simba_lease l SET session_id = NULL
    WHERE l.name = p_name AND l.session_id = p_session AND l.token = p_token;
  IF NOT FOUND THEN
    RETURN 0;
  END IF;
  PERFORM pg_notify('@CHANNEL@', p_name);
  RETURN 1;
END
$simba$;

-- Ends the session and frees every lease it holds; the number freed.
CREATE OR REPLACE FUNCTION @S@.simba_close(p_session uuid) RETURNS integer
LANGUAGE plpgsql AS $simba$
DECLARE
  v_name text;
  v_freed integer := 0;
BEGIN
  DELETE FROM @S@.simba_session s WHERE s.id = p_session;
  FOR v_name IN
    UPDATE @S@.simba_lease l SET session_id = NULL WHERE l.session_id = p_session
      RETURNING l.name
  LOOP
    PERFORM pg_notify('@CHANNEL@', v_name);
    v_freed := v_freed + 1;
  END LOOP;
  PERFORM @S@.simba_cleanup();
  RETURN v_freed;
END
$simba$;

INSERT INTO @S@.simba_schema_version (version) VALUES (@VERSION@) ON CONFLICT (version) DO NOTHING;
)sql";

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

std::string expand(const std::string& text, const std::string& schema) {
  std::string out = replace_all(text, "@S@", pg_quote_ident(schema));
  out = replace_all(std::move(out), "@NAME@", schema);
  out = replace_all(std::move(out), "@CHANNEL@", pg_released_channel(schema));
  out = replace_all(std::move(out), "@VERSION@", std::to_string(kPostgresSchemaVersion));
  return replace_all(std::move(out), "@KEY@", std::to_string(pg_schema_lock_key(schema)));
}

}  // namespace

std::string pg_quote_ident(const std::string& schema) {
  std::string out = "\"";
  for (char c : schema) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  return out + "\"";
}

std::string pg_released_channel(const std::string& schema) { return schema + "_simba_released"; }

int64_t pg_schema_lock_key(const std::string& schema) {
  // FNV-1a (64 bits) of a fixed prefix and the schema name.
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : std::string("simba.schema:") + schema) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return static_cast<int64_t>(h);
}

std::string pg_schema_ddl(const std::string& schema) { return expand(kDdl, schema); }

std::string pg_schema_script(const std::string& schema) {
  const std::string q = pg_quote_ident(schema);
  // The least-privilege grants (docs/security.md), as comments: which role the
  // clients use is the DBA's choice.
  return "-- Simba schema version " + std::to_string(kPostgresSchemaVersion) + " in schema " + q +
         ".\n-- Apply with psql -f FILE (one transaction); clients then run with create=false.\n"
         "-- What the clients' role needs, and nothing more (replace simba_client):\n"
         "--   GRANT USAGE ON SCHEMA " +
         q +
         " TO simba_client;\n"
         "--   GRANT SELECT, INSERT, UPDATE, DELETE ON " +
         q + ".simba_session, " + q +
         ".simba_lease TO simba_client;\n"
         "--   GRANT SELECT ON " +
         q +
         ".simba_schema_version TO simba_client;\n"
         "--   GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA " +
         q +
         " TO simba_client;  -- PUBLIC has it by default\n"
         "BEGIN;\n" +
         pg_schema_ddl(schema) + "COMMIT;\n";
}

PgStatements pg_statements(const std::string& schema) {
  PgStatements s;
  s.version = expand("SELECT max(version) FROM @S@.simba_schema_version", schema);
  s.open = expand("SELECT @S@.simba_open($1::uuid, $2::bigint, $3::text)", schema);
  s.keep_alive = expand(
      "SELECT remaining_ms, lease_name, lease_token FROM @S@.simba_keep_alive($1::uuid, "
      "$2::bigint)",
      schema);
  s.acquire = expand("SELECT code, value FROM @S@.simba_acquire($1::uuid, $2::text)", schema);
  // A release and a close only free: they commit without waiting for their WAL
  // flush (SET LOCAL synchronous_commit = off, in the same statement, so still
  // one round trip). A crash can lose them, never a token: the next durable
  // commit flushes them first (WAL is flushed in order), and a lost one only
  // delays a handover until the session's next keep-alive or its expiry
  // (ADR 0023). Open, keep-alive and acquire stay durable.
  s.release = expand(
      "SELECT @S@.simba_release($1::uuid, $2::text, $3::bigint) "
      "FROM set_config('synchronous_commit', 'off', true)",
      schema);
  s.close =
      expand("SELECT @S@.simba_close($1::uuid) FROM set_config('synchronous_commit', 'off', true)",
             schema);
  // For operators (simba status): live sessions, then the leases asked for (every
  // lease row when none), a holder whose session expired shown as free.
  s.inspect = expand(
      "SELECT 's', id::text, client_name, 0::bigint, "
      "(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint "
      "FROM @S@.simba_session WHERE expires_at > clock_timestamp() "
      "UNION ALL "
      "SELECT 'l', n.name, COALESCE(s.id::text, ''), COALESCE(l.token, 0), "
      "COALESCE((extract(epoch FROM s.expires_at - clock_timestamp()) * 1000)::bigint, -1) "
      "FROM (SELECT unnest($1::text[]) AS name "
      "      UNION SELECT name FROM @S@.simba_lease WHERE cardinality($1::text[]) = 0) n "
      "LEFT JOIN @S@.simba_lease l ON l.name = n.name "
      "LEFT JOIN @S@.simba_session s ON s.id = l.session_id AND s.expires_at > clock_timestamp()",
      schema);
  // Each connection prepares them once, in one round trip before its first
  // call (ADR 0027): a call then only binds and executes, skipping the parse
  // and plan that cost as much as the statement's own work on a short call.
  const std::pair<std::string*, const char*> named[] = {
      {&s.open, "simba_open"},       {&s.keep_alive, "simba_keep_alive"},
      {&s.acquire, "simba_acquire"}, {&s.release, "simba_release"},
      {&s.close, "simba_close"},     {&s.inspect, "simba_inspect"},
  };
  for (const auto& [stmt, name] : named) {
    s.prepare += std::string("PREPARE ") + name + " AS " + *stmt + ";\n";
    *stmt = name;
  }
  return s;
}

}  // namespace simba
