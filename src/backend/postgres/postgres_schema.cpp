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

-- Version 3 (version 1 had the tables and functions down to simba_close;
-- version 2 changed only simba_acquire's body; version 3 added simba_permit,
-- simba_session.permit_resources, simba_keep_alive_all, simba_acquire_permit
-- and simba_release_permit, and made simba_close free and broadcast permits
-- too). Every statement is idempotent: a client that checked the version
-- before another one of the same version migrated runs them again,
-- harmlessly. (A libsimba of version 1 has no guard above: its script, run
-- after this one, puts version 1's simba_acquire and simba_close back under
-- version 3's row; the answers are the same, and a closed session's permits
-- still count for nothing once its row is gone, only unannounced.)

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

-- Permits (ADR 0046), apart from the leases: semaphore NAME is the resource
-- 'sem/NAME', read/write lock NAME is 'rw/NAME' (the release broadcast's
-- payload). One row per resource ever used, never deleted, holding its
-- entries: seq, the last permit id taken (by grants and intents), never
-- resets; size is a semaphore's, fixed by the first holder and meaningful
-- only while it has a live entry; epoch is a read/write lock's last writer's
-- token; entry i is (e_permit[i], e_kind[i], e_session[i], e_token[i]), kind 1
-- a semaphore's permit, 2 a read, 3 a write, 4 a waiting writer's intent
-- (token 0), as PermitKind numbers them. Acquires and releases rewrite the
-- arrays of the one row: HOT updates of an unindexed column (the fill factor
-- leaves them room), never rows inserted and deleted per permit, whose dead
-- index entries every acquire of a busy name would scan until a vacuum. An
-- entry of a session that expired or is gone counts for nothing and is
-- dropped by the next write of its row.
CREATE TABLE IF NOT EXISTS @S@.simba_permit (
  resource varchar(140) PRIMARY KEY,
  size bigint NOT NULL DEFAULT 0,
  seq bigint NOT NULL DEFAULT 0 CHECK (seq >= 0),
  epoch bigint NOT NULL DEFAULT 0 CHECK (epoch >= 0),
  e_permit bigint[] NOT NULL DEFAULT '{}',
  e_kind smallint[] NOT NULL DEFAULT '{}',
  e_session uuid[] NOT NULL DEFAULT '{}',
  e_token bigint[] NOT NULL DEFAULT '{}'
) WITH (fillfactor = 50);
-- The resources where a session has (or recently had) entries, for its
-- keep-alive and close; an acquire adds, a keep-alive drops those it left.
ALTER TABLE @S@.simba_session ADD COLUMN IF NOT EXISTS
  permit_resources text[] NOT NULL DEFAULT '{}';

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

-- Ends the session and frees every lease and permit it holds; the number of
-- leases and permit resources freed.
CREATE OR REPLACE FUNCTION @S@.simba_close(p_session uuid) RETURNS integer
LANGUAGE plpgsql AS $simba$
DECLARE
  v_name text;
  v_freed integer := 0;
BEGIN
  -- Its permit rows one after the other in one order (never a deadlock
  -- with another close), each broadcast.
  FOR v_name IN
    SELECT r FROM unnest((SELECT s.permit_resources FROM @S@.simba_session s
                          WHERE s.id = p_session)) r ORDER BY r
  LOOP
    UPDATE @S@.simba_permit n
      SET (e_permit, e_kind, e_session, e_token) = (
        SELECT coalesce(array_agg(e.permit ORDER BY e.o), '{}'),
               coalesce(array_agg(e.kind ORDER BY e.o), '{}'),
               coalesce(array_agg(e.session_id ORDER BY e.o), '{}'),
               coalesce(array_agg(e.token ORDER BY e.o), '{}')
          FROM unnest(n.e_permit, n.e_kind, n.e_session, n.e_token) WITH ORDINALITY
               AS e(permit, kind, session_id, token, o)
          WHERE e.session_id <> p_session)
      WHERE n.resource = v_name AND p_session = ANY (n.e_session);
    IF FOUND THEN
      PERFORM pg_notify('@CHANNEL@', v_name);
      v_freed := v_freed + 1;
    END IF;
  END LOOP;
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

-- simba_keep_alive's answer, each row with (entry_kind, entry_permit) = (0, 0),
-- and when the session was extended, one (remaining_ms, name, token, kind,
-- permit) per permit or intent it holds. A new function: simba_keep_alive's
-- result type stays that of the versions before.
CREATE OR REPLACE FUNCTION @S@.simba_keep_alive_all(p_session uuid, p_lease_ms bigint)
RETURNS TABLE (remaining_ms bigint, lease_name text, lease_token bigint, entry_kind smallint,
               entry_permit bigint)
LANGUAGE plpgsql AS $simba$
DECLARE
  v_resources text[];
  v_held text[];
BEGIN
  entry_kind := 0;
  entry_permit := 0;
  FOR remaining_ms, lease_name, lease_token IN
    SELECT k.remaining_ms, k.lease_name, k.lease_token
      FROM @S@.simba_keep_alive(p_session, p_lease_ms) k
  LOOP
    RETURN NEXT;
  END LOOP;
  IF remaining_ms < 0 THEN
    RETURN;
  END IF;
  -- A session that never took a permit reads nothing more (and a role not
  -- granted the permit table never does).
  SELECT s.permit_resources INTO v_resources FROM @S@.simba_session s WHERE s.id = p_session;
  IF cardinality(v_resources) = 0 THEN
    RETURN;
  END IF;
  RETURN QUERY
    SELECT p_lease_ms, substr(n.resource, strpos(n.resource, '/') + 1)::text, e.token, e.kind,
           e.permit
      FROM @S@.simba_permit n,
           unnest(n.e_permit, n.e_kind, n.e_session, n.e_token) AS e(permit, kind, session_id, token)
      WHERE n.resource = ANY (v_resources) AND e.session_id = p_session;
  -- The resources where it has no entry left are dropped from its list. One
  -- about to be dropped is read again under a share lock: a grant of this
  -- session to it that has not committed yet either committed before (its
  -- entry is seen: kept) or waits for this transaction, then finds the
  -- resource gone from the list and adds it back (simba_acquire_permit).
  SELECT coalesce(array_agg(n.resource), '{}') INTO v_held FROM @S@.simba_permit n
    WHERE n.resource = ANY (v_resources) AND p_session = ANY (n.e_session);
  IF cardinality(v_held) < cardinality(v_resources) THEN
    SELECT v_held || coalesce(array_agg(x.resource), '{}') INTO v_held
      FROM (SELECT n.resource, n.e_session FROM @S@.simba_permit n
              WHERE n.resource = ANY (v_resources) AND NOT (n.resource = ANY (v_held))
              FOR SHARE) x
      WHERE p_session = ANY (x.e_session);
    UPDATE @S@.simba_session s SET permit_resources = v_held WHERE s.id = p_session;
  END IF;
END
$simba$;

-- A permit of p_name (ADR 0046): p_kind 1 a semaphore's of size p_size, 2 a
-- read, 3 a write (p_intent: the intent this writer left before, 0 none;
-- p_leave_intent: a blocking writer leaves or keeps one when held).
-- code 1: granted, token and permit; code 0: held, value = the nearest other
-- holder's remaining ms (-1: none), permit = the writer's intent (0: none);
-- code 2: refused, value = the size the semaphore has; code -1: our session
-- expired or is gone.
--
-- As simba_acquire (version 2), the row is read without its lock: an answer
-- that writes nothing (held with no intent to leave, refused) comes from that
-- read, so waiting candidates never make a release wait, and a write is one
-- conditional UPDATE, done only if the row is still the one read (its seq and
-- its permit ids; an entry never changes once made), checked again on the
-- newest version after any lock wait (READ COMMITTED). A row that changed
-- meanwhile, or a new one, is locked (FOR UPDATE) and decided on again. So
-- never more than the size, never a writer beside another entry, never one
-- permit id twice.
CREATE OR REPLACE FUNCTION @S@.simba_acquire_permit(
    p_session uuid, p_name text, p_kind smallint, p_size bigint, p_intent bigint,
    p_leave_intent boolean, OUT code integer, OUT token bigint, OUT permit bigint,
    OUT value bigint)
LANGUAGE plpgsql AS $simba$
DECLARE
  v_res text := CASE WHEN p_kind = 1 THEN 'sem/' ELSE 'rw/' END || p_name;
  v_locked boolean := false;
  v_size bigint;
  v_seq bigint;
  v_epoch bigint;
  v_read_perm bigint[];
  v_perm bigint[];
  v_kind smallint[];
  v_sess uuid[];
  v_tok bigint[];
  v_now timestamptz;
  v_ours timestamptz;
  v_count integer;
  v_read boolean;
  v_write boolean;
  v_intent boolean;
  v_mine boolean;
  v_nearest timestamptz;
BEGIN
  IF p_kind NOT IN (1, 2, 3) OR (p_kind = 1 AND coalesce(p_size, 0) <= 0) THEN
    RAISE EXCEPTION 'simba_acquire_permit: kind % with size %', p_kind, p_size
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  LOOP
    token := 0;
    permit := 0;
    value := -1;
    IF v_locked THEN
      SELECT n.size, n.seq, n.epoch, n.e_permit, n.e_kind, n.e_session, n.e_token
        INTO v_size, v_seq, v_epoch, v_perm, v_kind, v_sess, v_tok
        FROM @S@.simba_permit n WHERE n.resource = v_res FOR UPDATE;
      IF NOT FOUND THEN
        INSERT INTO @S@.simba_permit (resource) VALUES (v_res) ON CONFLICT (resource) DO NOTHING;
        CONTINUE;
      END IF;
    ELSE
      SELECT n.size, n.seq, n.epoch, n.e_permit, n.e_kind, n.e_session, n.e_token
        INTO v_size, v_seq, v_epoch, v_perm, v_kind, v_sess, v_tok
        FROM @S@.simba_permit n WHERE n.resource = v_res;
      IF NOT FOUND THEN
        v_locked := true;
        CONTINUE;
      END IF;
    END IF;
    v_read_perm := v_perm;
    v_now := clock_timestamp();
    SELECT s.expires_at INTO v_ours FROM @S@.simba_session s WHERE s.id = p_session;
    IF NOT FOUND OR v_ours <= v_now THEN
      code := -1;
      RETURN;
    END IF;
    IF cardinality(v_perm) = 0 THEN
      -- No entry: nothing to read (the common case of a free name).
      v_count := 0;
      v_read := false;
      v_write := false;
      v_intent := false;
      v_mine := false;
      v_nearest := NULL;
    ELSE
      -- The live entries only, in their order: those of ended sessions go.
      SELECT coalesce(array_agg(e.permit ORDER BY e.o), '{}'),
             coalesce(array_agg(e.kind ORDER BY e.o), '{}'),
             coalesce(array_agg(e.session_id ORDER BY e.o), '{}'),
             coalesce(array_agg(e.token ORDER BY e.o), '{}'),
             count(*), coalesce(bool_or(e.kind = 2), false), coalesce(bool_or(e.kind = 3), false),
             coalesce(bool_or(e.kind = 4), false),
             coalesce(bool_or(e.kind = 4 AND e.permit = p_intent AND e.session_id = p_session),
                      false),
             min(s.expires_at) FILTER (WHERE e.kind <> 4 AND e.session_id <> p_session)
        INTO v_perm, v_kind, v_sess, v_tok, v_count, v_read, v_write, v_intent, v_mine, v_nearest
        FROM unnest(v_perm, v_kind, v_sess, v_tok) WITH ORDINALITY
             AS e(permit, kind, session_id, token, o)
        JOIN @S@.simba_session s ON s.id = e.session_id AND s.expires_at > v_now;
    END IF;
    IF p_kind = 1 THEN
      IF v_count > 0 AND v_size <> p_size THEN
        code := 2;
        value := v_size;
        RETURN;
      END IF;
      code := CASE WHEN v_count >= p_size THEN 0 ELSE 1 END;
    ELSIF p_kind = 2 THEN
      code := CASE WHEN v_write OR v_intent THEN 0 ELSE 1 END;
    ELSE
      code := CASE WHEN v_read OR v_write THEN 0 ELSE 1 END;
    END IF;
    permit := v_seq + 1;
    IF code = 0 THEN
      value := coalesce(floor(extract(epoch FROM v_nearest - v_now) * 1000)::bigint, -1);
      IF NOT (p_kind = 3 AND p_leave_intent) OR v_mine THEN
        -- Nothing to write; a blocking writer keeps its intent.
        permit := CASE WHEN v_mine AND p_leave_intent THEN p_intent ELSE 0 END;
        RETURN;
      END IF;
      -- A blocking writer leaves an intent.
      v_kind := v_kind || 4::smallint;
      v_tok := v_tok || 0::bigint;
    ELSE
      IF p_kind = 3 AND v_mine THEN
        -- The grant deletes the writer's intent.
        SELECT coalesce(array_agg(e.permit ORDER BY e.o), '{}'),
               coalesce(array_agg(e.kind ORDER BY e.o), '{}'),
               coalesce(array_agg(e.session_id ORDER BY e.o), '{}'),
               coalesce(array_agg(e.token ORDER BY e.o), '{}')
          INTO v_perm, v_kind, v_sess, v_tok
          FROM unnest(v_perm, v_kind, v_sess, v_tok) WITH ORDINALITY
               AS e(permit, kind, session_id, token, o)
          WHERE e.permit <> p_intent;
      END IF;
      token := CASE WHEN p_kind = 2 THEN v_epoch ELSE permit END;
      IF p_kind = 3 THEN
        v_epoch := permit;
      ELSIF p_kind = 1 THEN
        v_size := p_size;  -- the first holder's, or the same
      END IF;
      v_kind := v_kind || p_kind;
      v_tok := v_tok || token;
      value := 0;
    END IF;
    UPDATE @S@.simba_permit n
      SET seq = permit, size = v_size, epoch = v_epoch, e_permit = v_perm || permit,
          e_kind = v_kind, e_session = v_sess || p_session, e_token = v_tok
      WHERE n.resource = v_res AND clock_timestamp() < v_ours
        AND (v_locked OR (n.seq = v_seq AND n.e_permit = v_read_perm));
    EXIT WHEN FOUND;
    IF v_locked THEN
      code := -1;  -- our session expired meanwhile
      token := 0;
      permit := 0;
      value := 0;
      RETURN;
    END IF;
    v_locked := true;
  END LOOP;
  -- Listed for the keep-alive, checked after the grant (a new snapshot): a
  -- keep-alive may have dropped the resource meanwhile, when it had no entry
  -- of ours (see simba_keep_alive_all).
  UPDATE @S@.simba_session s SET permit_resources = s.permit_resources || v_res
    WHERE s.id = p_session AND NOT (v_res = ANY (s.permit_resources));
END
$simba$;

-- Frees the entry (p_kind, p_name, p_permit) only where session and token
-- match (an intent's token is 0), and broadcasts its resource; 1 if it did.
CREATE OR REPLACE FUNCTION @S@.simba_release_permit(p_session uuid, p_name text,
                                                    p_kind smallint, p_permit bigint,
                                                    p_token bigint) RETURNS integer
LANGUAGE plpgsql AS $simba$
DECLARE
  v_res text := CASE WHEN p_kind = 1 THEN 'sem/' ELSE 'rw/' END || p_name;
BEGIN
  -- One UPDATE, its WHERE checked again on the newest row after any lock wait.
  UPDATE @S@.simba_permit n
    SET e_permit = n.e_permit[:array_position(n.e_permit, p_permit) - 1]
                   || n.e_permit[array_position(n.e_permit, p_permit) + 1:],
        e_kind = n.e_kind[:array_position(n.e_permit, p_permit) - 1]
                 || n.e_kind[array_position(n.e_permit, p_permit) + 1:],
        e_session = n.e_session[:array_position(n.e_permit, p_permit) - 1]
                    || n.e_session[array_position(n.e_permit, p_permit) + 1:],
        e_token = n.e_token[:array_position(n.e_permit, p_permit) - 1]
                  || n.e_token[array_position(n.e_permit, p_permit) + 1:]
    WHERE n.resource = v_res AND n.e_kind[array_position(n.e_permit, p_permit)] = p_kind
      AND n.e_session[array_position(n.e_permit, p_permit)] = p_session
      AND n.e_token[array_position(n.e_permit, p_permit)] = p_token;
  IF NOT FOUND THEN
    RETURN 0;
  END IF;
  PERFORM pg_notify('@CHANNEL@', v_res);
  RETURN 1;
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
         q + ".simba_session, " + q + ".simba_lease, " + q +
         ".simba_permit TO simba_client;\n"
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
  const std::string keep_alive_leases = expand(
      "SELECT remaining_ms, lease_name, lease_token FROM @S@.simba_keep_alive($1::uuid, "
      "$2::bigint)",
      schema);
  s.keep_alive = expand(
      "SELECT remaining_ms, lease_name, lease_token, entry_kind, entry_permit "
      "FROM @S@.simba_keep_alive_all($1::uuid, $2::bigint)",
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
  // A permit's acquire is durable (it hands out a permit id and a token), its
  // release asynchronous as a lease's.
  s.acquire_permit = expand(
      "SELECT code, token, permit, value FROM @S@.simba_acquire_permit($1::uuid, $2::text, "
      "$3::smallint, $4::bigint, $5::bigint, $6::boolean)",
      schema);
  s.release_permit = expand(
      "SELECT @S@.simba_release_permit($1::uuid, $2::text, $3::smallint, $4::bigint, $5::bigint) "
      "FROM set_config('synchronous_commit', 'off', true)",
      schema);
  // For operators (simba status): live sessions, then the leases asked for (every
  // lease row when none), a holder whose session expired shown as free.
  // With permits, each row also carries (permit kind, permit), and every
  // entry of a live session of the names asked for (of every name if none)
  // follows as a row 'p'.
  const std::string inspect =
      "SELECT 's', id::text, client_name, 0::bigint, "
      "(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint@0@ "
      "FROM @S@.simba_session WHERE expires_at > clock_timestamp() "
      "UNION ALL "
      "SELECT 'l', n.name, COALESCE(s.id::text, ''), COALESCE(l.token, 0), "
      "COALESCE((extract(epoch FROM s.expires_at - clock_timestamp()) * 1000)::bigint, -1)@0@ "
      "FROM (SELECT unnest($1::text[]) AS name "
      "      UNION SELECT name FROM @S@.simba_lease WHERE cardinality($1::text[]) = 0) n "
      "LEFT JOIN @S@.simba_lease l ON l.name = n.name "
      "LEFT JOIN @S@.simba_session s ON s.id = l.session_id AND s.expires_at > clock_timestamp()";
  const std::string inspect_leases = expand(replace_all(inspect, "@0@", ""), schema);
  s.inspect = expand(
      replace_all(inspect, "@0@", ", 0::smallint, 0::bigint") +
          " UNION ALL "
          "SELECT 'p', substr(n.resource, strpos(n.resource, '/') + 1), s.id::text, e.token, "
          "(extract(epoch FROM s.expires_at - clock_timestamp()) * 1000)::bigint, e.kind, "
          "e.permit FROM @S@.simba_permit n, "
          "unnest(n.e_permit, n.e_kind, n.e_session, n.e_token) AS e(permit, kind, session_id, "
          "token) "
          "JOIN @S@.simba_session s ON s.id = e.session_id AND s.expires_at > clock_timestamp() "
          "WHERE cardinality($1::text[]) = 0 OR n.resource IN ("
          "  SELECT k || x FROM unnest($1::text[]) x, unnest('{sem/,rw/}'::text[]) k)",
      schema);
  // Each connection prepares them once, in one round trip before its first
  // call (ADR 0027): a call then only binds and executes, skipping the parse
  // and plan that cost as much as the statement's own work on a short call.
  // A schema without permits gets the keep-alive and inspect of the versions
  // before under the same names, and no permit statements.
  const std::pair<std::string*, const char*> named[] = {
      {&s.open, "simba_open"},
      {&s.acquire, "simba_acquire"},
      {&s.release, "simba_release"},
      {&s.close, "simba_close"},
      {&s.keep_alive, "simba_keep_alive"},
      {&s.inspect, "simba_inspect"},
      {&s.acquire_permit, "simba_acquire_permit"},
      {&s.release_permit, "simba_release_permit"},
  };
  for (const auto& [stmt, name] : named) {
    const std::string prepare = std::string("PREPARE ") + name + " AS ";
    s.prepare += prepare + *stmt + ";\n";
    if (stmt == &s.keep_alive) {
      s.prepare_leases += prepare + keep_alive_leases + ";\n";
    } else if (stmt == &s.inspect) {
      s.prepare_leases += prepare + inspect_leases + ";\n";
    } else if (stmt != &s.acquire_permit && stmt != &s.release_permit) {
      s.prepare_leases += prepare + *stmt + ";\n";
    }
    *stmt = name;
  }
  return s;
}

}  // namespace simba
