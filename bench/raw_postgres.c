/* The raw baseline on PostgreSQL: plain libpq, synchronous, one statement in
 * flight, on the schema Simba created for this run (ping and read by
 * PQexecParams; write as Simba sends its calls: prepared once on the
 * connection, then PQexecPrepared, the protocol of Simba's
 * PQsendQueryPrepared, ADR 0027):
 *
 *   ping   SELECT 1
 *   read   SELECT session_id, token FROM {schema}.simba_lease WHERE name = $1
 *          (one row, no write)
 *   write  Simba's own statements, word for word (pg_statements() in
 *          src/backend/postgres/postgres_schema.cpp), alternately:
 *            SELECT code, value FROM {schema}.simba_acquire($1::uuid, $2::text)
 *            SELECT {schema}.simba_release($1::uuid, $2::text, $3::bigint)
 *              FROM set_config('synchronous_commit', 'off', true)
 *          on a lease of this connection's own session (opened with
 *          simba_open), so each is one commit doing what Simba's does;
 *          write_pairs: a baseline sample is the mean of one acquire + release
 *
 * The connection turns synchronous_commit on when it is off, as Simba does for
 * its own connections (kSyncCommitSql in postgres_backend.cpp), so the raw
 * commits are as durable as Simba's.
 *
 * Server-side count of Simba's calls: pg_stat_user_functions, calls and
 * total_time of simba_open, simba_keep_alive, simba_acquire, simba_release and
 * simba_close in the schema (pg_stat_statements would need
 * shared_preload_libraries, i.e. a server restart). It needs track_functions
 * = 'pl': prepare() sets it with ALTER SYSTEM + pg_reload_conf() when it is
 * off (superuser only) and disconnect() resets it. A backend publishes its
 * function statistics at the end of a transaction at most once a second
 * (PGSTAT_MIN_INTERVAL in PostgreSQL 15), so counts_lag_ms; this connection
 * flushes its own first (pg_stat_force_next_flush) before each reading.
 *
 * The native lock, what an application would use without Simba: session
 * advisory locks, SELECT pg_advisory_lock($1::bigint) and SELECT
 * pg_advisory_unlock($1::bigint), by PQexecParams like the rest. Neither
 * writes WAL nor commits anything durable: no token, no expiry, no session
 * that outlives the connection. The handover runs between two processes of
 * their own, each blocked in pg_advisory_lock while the other holds it.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "raw_backend.h"

struct raw_conn {
  PGconn *pg;
  int server_version; /* PQserverVersion: 150018 */
  char schema[64];    /* the name, [A-Za-z0-9_] (Simba's URL rule) */
  char qschema[72];   /* quoted: "name" */
  char session[40];   /* this connection's own Simba session (uuid) */
  int session_open;
  char lease[64]; /* the lease its writes take and give back */
  char token[24]; /* its token while held */
  int held;
  int reset_track_functions; /* prepare() turned track_functions on */
  char sql_read[256], sql_acquire[256], sql_release[256], sql_close[256];
  char lock_key[24]; /* the advisory lock key of native_lock_cycle */
};

static void copy(char *dst, size_t len, const char *src) {
  size_t n = strlen(src);
  if (n >= len) n = len - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* The connection's error message on one line. */
static void pq_error(raw_conn_t *c, const char *what, char *err, size_t errlen) {
  char msg[200];
  copy(msg, sizeof msg, c->pg ? PQerrorMessage(c->pg) : "no connection");
  msg[strcspn(msg, "\n")] = '\0';
  snprintf(err, errlen, "postgres %s: %.150s", what, msg);
}

/* Runs a statement with text parameters: sql by PQexecParams, or, when
 * `prepared` names the statement PQprepare()d from sql, by PQexecPrepared.
 * The result (caller clears) or NULL with err set. */
static PGresult *exec_as(raw_conn_t *c, const char *prepared, const char *sql, int n,
                         const char *const *params, char *err, size_t errlen) {
  PGresult *r = prepared ? PQexecPrepared(c->pg, prepared, n, params, NULL, NULL, 0)
                         : PQexecParams(c->pg, sql, n, NULL, params, NULL, NULL, 0);
  ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
    char msg[200];
    copy(msg, sizeof msg, r ? PQresultErrorMessage(r) : PQerrorMessage(c->pg));
    msg[strcspn(msg, "\n")] = '\0';
    snprintf(err, errlen, "postgres: %.60s...: %.150s", sql, msg);
    if (r) PQclear(r);
    return NULL;
  }
  return r;
}

static PGresult *exec(raw_conn_t *c, const char *sql, int n, const char *const *params, char *err,
                      size_t errlen) {
  return exec_as(c, NULL, sql, n, params, err, errlen);
}

/* A statement whose result is not needed: 0 or -1. */
static int run(raw_conn_t *c, const char *sql, char *err, size_t errlen) {
  PGresult *r = exec(c, sql, 0, NULL, err, errlen);
  if (!r) return -1;
  PQclear(r);
  return 0;
}

/* The first column of the first row of a parameterless query, into out. */
static int scalar(raw_conn_t *c, const char *sql, char *out, size_t outlen, char *err,
                  size_t errlen) {
  PGresult *r = exec(c, sql, 0, NULL, err, errlen);
  if (!r) return -1;
  int ok = PQntuples(r) > 0 && PQnfields(r) > 0;
  if (ok) copy(out, outlen, PQgetvalue(r, 0, 0));
  PQclear(r);
  if (!ok) snprintf(err, errlen, "postgres: %.60s: no row", sql);
  return ok ? 0 : -1;
}

/* The Simba URL as libpq takes it: without Simba's own parameters schema= and
 * create= (the schema goes to c->schema). */
static int split_url(const char *url, char *libpq_url, size_t len, char *schema, size_t slen,
                     char *err, size_t errlen) {
  copy(schema, slen, "public");
  if (strlen(url) + 1 > len) {
    snprintf(err, errlen, "URL too long");
    return -1;
  }
  const char *q = strchr(url, '?');
  if (!q) {
    copy(libpq_url, len, url);
    return 0;
  }
  snprintf(libpq_url, len, "%.*s", (int)(q - url), url);
  char buf[1024];
  copy(buf, sizeof buf, q + 1);
  char sep = '?';
  char *save = NULL;
  for (char *tok = strtok_r(buf, "&", &save); tok; tok = strtok_r(NULL, "&", &save)) {
    if (strncmp(tok, "schema=", 7) == 0) {
      copy(schema, slen, tok + 7);
      continue;
    }
    if (strncmp(tok, "create=", 7) == 0) continue;
    size_t used = strlen(libpq_url);
    snprintf(libpq_url + used, len - used, "%c%s", sep, tok);
    sep = '&';
  }
  for (const char *p = schema; *p; p++) {
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
          *p == '_')) {
      snprintf(err, errlen, "schema '%s': only [A-Za-z0-9_]", schema);
      return -1;
    }
  }
  return 0;
}

/* A random uuid (version 4), as Simba makes its session ids. */
static int random_uuid(char *out, size_t len) {
  unsigned char b[16];
  FILE *f = fopen("/dev/urandom", "rb");
  if (!f) return -1;
  size_t n = fread(b, 1, sizeof b, f);
  fclose(f);
  if (n != sizeof b) return -1;
  b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
  b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
  snprintf(out, len, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
           b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
           b[15]);
  return 0;
}

static raw_conn_t *pg_connect(const char *url, char *err, size_t errlen) {
  raw_conn_t *c = calloc(1, sizeof *c);
  if (!c) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  char libpq_url[1024];
  if (split_url(url, libpq_url, sizeof libpq_url, c->schema, sizeof c->schema, err, errlen) != 0) {
    free(c);
    return NULL;
  }
  snprintf(c->qschema, sizeof c->qschema, "\"%s\"", c->schema);
  const char *const keys[] = {"dbname", "fallback_application_name", "connect_timeout", NULL};
  const char *const values[] = {libpq_url, "simba_bench raw", "10", NULL};
  c->pg = PQconnectdbParams(keys, values, 1);
  if (!c->pg || PQstatus(c->pg) != CONNECTION_OK) {
    pq_error(c, "connect", err, errlen);
    if (c->pg) PQfinish(c->pg);
    free(c);
    return NULL;
  }
  c->server_version = PQserverVersion(c->pg);
  /* As Simba does on its own connections (postgres_backend.cpp, kSyncCommitSql). */
  if (run(c,
          "SELECT set_config('synchronous_commit', 'on', false) WHERE "
          "current_setting('synchronous_commit') = 'off'",
          err, errlen) != 0) {
    PQfinish(c->pg);
    free(c);
    return NULL;
  }
  return c;
}

static void pg_disconnect(raw_conn_t *c) {
  if (!c) return;
  char err[256];
  if (c->session_open) {
    const char *p[] = {c->session};
    PGresult *r = exec(c, c->sql_close, 1, p, err, sizeof err);
    if (r) PQclear(r);
  }
  if (c->reset_track_functions &&
      (run(c, "ALTER SYSTEM RESET track_functions", err, sizeof err) != 0 ||
       run(c, "SELECT pg_reload_conf()", err, sizeof err) != 0)) {
    fprintf(stderr, "simba_bench: cannot reset track_functions: %s\n", err);
  }
  PQfinish(c->pg);
  free(c);
}

/* track_functions = 'pl' for every backend (Simba's included), if it is off. */
static int enable_function_stats(raw_conn_t *c, char *err, size_t errlen) {
  char v[32];
  if (scalar(c, "SELECT current_setting('track_functions')", v, sizeof v, err, errlen) != 0) {
    return -1;
  }
  if (strcmp(v, "none") != 0) return 0;
  if (run(c, "ALTER SYSTEM SET track_functions = 'pl'", err, errlen) != 0) return -1;
  c->reset_track_functions = 1;
  if (run(c, "SELECT pg_reload_conf()", err, errlen) != 0) return -1;
  /* The postmaster re-reads its files and signals every backend; ours applies
   * it before its next statement once signalled. */
  const int64_t until = bench_now_ns() + 5000000000LL;
  while (bench_now_ns() < until) {
    if (scalar(c, "SELECT current_setting('track_functions')", v, sizeof v, err, errlen) != 0) {
      return -1;
    }
    if (strcmp(v, "pl") == 0) return 0;
    bench_sleep_ns(20000000);
  }
  snprintf(err, errlen, "track_functions still '%s' 5 s after pg_reload_conf()", v);
  return -1;
}

static int pg_prepare(raw_conn_t *c, char *err, size_t errlen) {
  const char *s = c->qschema;
  snprintf(c->sql_read, sizeof c->sql_read,
           "SELECT session_id, token FROM %s.simba_lease WHERE name = $1", s);
  snprintf(c->sql_acquire, sizeof c->sql_acquire,
           "SELECT code, value FROM %s.simba_acquire($1::uuid, $2::text)", s);
  snprintf(c->sql_release, sizeof c->sql_release,
           "SELECT %s.simba_release($1::uuid, $2::text, $3::bigint) "
           "FROM set_config('synchronous_commit', 'off', true)",
           s);
  snprintf(c->sql_close, sizeof c->sql_close,
           "SELECT %s.simba_close($1::uuid) FROM set_config('synchronous_commit', 'off', true)", s);
  snprintf(c->lease, sizeof c->lease, "bench-raw-%ld", (long)getpid());
  snprintf(c->lock_key, sizeof c->lock_key, "%ld", 0x5b100000L + (long)(getpid() & 0xfffff));

  /* Simba made the schema (the bench opened a client first). */
  char sql[256], version[16];
  snprintf(sql, sizeof sql, "SELECT max(version)::text FROM %s.simba_schema_version", s);
  if (scalar(c, sql, version, sizeof version, err, errlen) != 0) return -1;

  /* This connection's own session, long enough for the whole run. */
  if (random_uuid(c->session, sizeof c->session) != 0) {
    snprintf(err, errlen, "cannot read /dev/urandom");
    return -1;
  }
  snprintf(sql, sizeof sql, "SELECT %s.simba_open($1::uuid, $2::bigint, $3::text)", s);
  const char *p[] = {c->session, "3600000", "simba_bench raw"};
  PGresult *r = exec(c, sql, 3, p, err, errlen);
  if (!r) return -1;
  const int ok = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "3600000") == 0;
  PQclear(r);
  if (!ok) {
    snprintf(err, errlen, "simba_open did not open the raw session");
    return -1;
  }
  c->session_open = 1;

  /* Prepared as Simba's connections prepare them (postgres_schema.cpp). */
  const char *const prepare[][2] = {{"raw_acquire", c->sql_acquire},
                                    {"raw_release", c->sql_release}};
  for (int i = 0; i < 2; ++i) {
    r = PQprepare(c->pg, prepare[i][0], prepare[i][1], 0, NULL);
    const int prepared = r && PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!prepared) pq_error(c, prepare[i][1], err, errlen);
    if (r) PQclear(r);
    if (!prepared) return -1;
  }

  if (enable_function_stats(c, err, errlen) != 0) {
    char why[200];
    copy(why, sizeof why, err);
    snprintf(err, errlen, "cannot count calls with pg_stat_user_functions: %s", why);
    return -1;
  }
  return 0;
}

/* simba_acquire, then simba_release at the next call. */
static int write_trip(raw_conn_t *c, char *err, size_t errlen) {
  if (!c->held) {
    const char *p[] = {c->session, c->lease};
    PGresult *r = exec_as(c, "raw_acquire", c->sql_acquire, 2, p, err, errlen);
    if (!r) return -1;
    const int won = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "1") == 0;
    if (won) copy(c->token, sizeof c->token, PQgetvalue(r, 0, 1));
    PQclear(r);
    if (!won) {
      snprintf(err, errlen, "raw simba_acquire of %s did not win", c->lease);
      return -1;
    }
    c->held = 1;
    return 0;
  }
  const char *p[] = {c->session, c->lease, c->token};
  PGresult *r = exec_as(c, "raw_release", c->sql_release, 3, p, err, errlen);
  if (!r) return -1;
  const int freed = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "1") == 0;
  PQclear(r);
  if (!freed) {
    snprintf(err, errlen, "raw simba_release of %s freed nothing", c->lease);
    return -1;
  }
  c->held = 0;
  return 0;
}

static int pg_round_trip(raw_conn_t *c, int op, char *err, size_t errlen) {
  if (op == RAW_OP_WRITE) return write_trip(c, err, errlen);
  PGresult *r;
  if (op == RAW_OP_PING) {
    r = exec(c, "SELECT 1", 0, NULL, err, errlen);
  } else {
    const char *p[] = {c->lease};
    r = exec(c, c->sql_read, 1, p, err, errlen);
  }
  if (!r) return -1;
  PQclear(r);
  return 0;
}

static int pg_server_calls(raw_conn_t *c, uint64_t *calls, uint64_t *usec, char *err,
                           size_t errlen) {
  /* This connection's own pending statistics first (15+): its transaction end
   * publishes them. */
  if (c->server_version >= 150000 &&
      run(c, "SELECT pg_stat_force_next_flush()", err, errlen) != 0) {
    return -1;
  }
  const char *p[] = {c->schema};
  PGresult *r = exec(c,
                     "SELECT coalesce(sum(calls), 0)::bigint, "
                     "round(coalesce(sum(total_time), 0) * 1000)::bigint "
                     "FROM pg_stat_user_functions WHERE schemaname = $1 AND funcname IN "
                     "('simba_open', 'simba_keep_alive', 'simba_acquire', 'simba_release', "
                     "'simba_close', 'simba_acquire_permit', 'simba_release_permit')",
                     1, p, err, errlen);
  if (!r) return -1;
  *calls = strtoull(PQgetvalue(r, 0, 0), NULL, 10);
  *usec = strtoull(PQgetvalue(r, 0, 1), NULL, 10);
  PQclear(r);
  return 0;
}

static int64_t pg_connected_clients(raw_conn_t *c) {
  char err[256], v[32];
  if (scalar(c, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'", v,
             sizeof v, err, sizeof err) != 0) {
    return -1;
  }
  return strtoll(v, NULL, 10);
}

static void pg_describe(raw_conn_t *c, char *version, size_t vlen, char *durability, size_t dlen) {
  char err[256], v[64] = "?", fsync[16] = "?", sc[16] = "?", sc_server[16] = "?";
  scalar(c, "SELECT split_part(current_setting('server_version'), ' ', 1)", v, sizeof v, err,
         sizeof err);
  scalar(c, "SELECT current_setting('fsync')", fsync, sizeof fsync, err, sizeof err);
  scalar(c, "SELECT current_setting('synchronous_commit')", sc, sizeof sc, err, sizeof err);
  scalar(c, "SELECT reset_val FROM pg_settings WHERE name = 'synchronous_commit'", sc_server,
         sizeof sc_server, err, sizeof err);
  snprintf(version, vlen, "PostgreSQL %s", v);
  if (strcmp(sc, sc_server) == 0) {
    snprintf(durability, dlen, "fsync %s, synchronous_commit %s", fsync, sc);
  } else {
    snprintf(durability, dlen, "fsync %s, synchronous_commit %s (server: %s; on per connection)",
             fsync, sc, sc_server);
  }
}

/* --- the native lock: advisory locks ---------------------------------------- */

static const char kAdvisoryLock[] = "SELECT pg_advisory_lock($1::bigint)";
static const char kAdvisoryUnlock[] = "SELECT pg_advisory_unlock($1::bigint)";

/* One statement with the key as its parameter; for unlock, checks it freed. */
static int advisory(PGconn *pg, const char *sql, const char *key, char *err, size_t errlen) {
  const char *p[] = {key};
  PGresult *r = PQexecParams(pg, sql, 1, NULL, p, NULL, NULL, 0);
  const int ok = r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
                 (sql == kAdvisoryLock || strcmp(PQgetvalue(r, 0, 0), "t") == 0);
  if (!ok) {
    char msg[160];
    copy(msg, sizeof msg,
         r && PQresultStatus(r) != PGRES_TUPLES_OK ? PQresultErrorMessage(r)
         : r                                       ? "unlock freed nothing"
                                                   : PQerrorMessage(pg));
    msg[strcspn(msg, "\n")] = '\0';
    snprintf(err, errlen, "postgres: %s: %s", sql, msg);
  }
  if (r) PQclear(r);
  return ok ? 0 : -1;
}

static int pg_native_lock_cycle(raw_conn_t *c, char *err, size_t errlen) {
  if (advisory(c->pg, kAdvisoryLock, c->lock_key, err, errlen) != 0) return -1;
  return advisory(c->pg, kAdvisoryUnlock, c->lock_key, err, errlen);
}

/* Shared between the handover's two processes (MAP_SHARED). */
typedef struct handover_shm {
  int64_t failed[2];
  char error[2][160];
  int64_t t[]; /* per process who, per cycle k: acquired at t[(who * m + k) * 2], released at +1 */
} handover_shm_t;

/* True once another connection waits for the advisory lock `key`. */
static int someone_waits(PGconn *pg, const char *key, char *err, size_t errlen) {
  const char *p[] = {key};
  PGresult *r = PQexecParams(pg,
                             "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT "
                             "granted AND classid = 0 AND objid = $1::bigint AND objsubid = 1",
                             1, NULL, p, NULL, NULL, 0);
  if (!r || PQresultStatus(r) != PGRES_TUPLES_OK) {
    snprintf(err, errlen, "postgres: pg_locks: %.100s", r ? PQresultErrorMessage(r) : "no result");
    if (r) PQclear(r);
    return -1;
  }
  const int n = atoi(PQgetvalue(r, 0, 0));
  PQclear(r);
  return n > 0;
}

/* One of the two processes: m cycles of lock (blocking), wait for the other to
 * block, idle gap_ms, unlock. Process 1's last cycle has no successor. */
static void handover_child(int who, const char *libpq_url, const char *key, int m, int gap_ms,
                           handover_shm_t *shm) {
  char *err = shm->error[who];
  const size_t errlen = sizeof shm->error[who];
  const char *const keys[] = {"dbname", "fallback_application_name", "connect_timeout", NULL};
  const char *const values[] = {libpq_url, "simba_bench advisory", "10", NULL};
  PGconn *pg = PQconnectdbParams(keys, values, 1);
  if (!pg || PQstatus(pg) != CONNECTION_OK) {
    snprintf(err, errlen, "connect: %.140s", pg ? PQerrorMessage(pg) : "out of memory");
    shm->failed[who] = 1;
    _exit(1);
  }
  for (int k = 0; k < m; k++) {
    if (advisory(pg, kAdvisoryLock, key, err, errlen) != 0) break;
    shm->t[(who * m + k) * 2] = bench_now_ns();
    const int last = who == 1 && k == m - 1;
    if (!last) {
      const int64_t until = bench_now_ns() + 10 * 1000000000LL;
      int w;
      while ((w = someone_waits(pg, key, err, errlen)) == 0 && bench_now_ns() < until) {
        bench_sleep_ns(1000000);
      }
      if (w != 1) {
        if (w == 0) snprintf(err, errlen, "nobody waited for the lock within 10 s");
        break;
      }
      bench_sleep_ns((int64_t)gap_ms * 1000000);
    }
    shm->t[(who * m + k) * 2 + 1] = bench_now_ns();
    if (advisory(pg, kAdvisoryUnlock, key, err, errlen) != 0) break;
    if (k == m - 1) {
      PQfinish(pg);
      _exit(0);
    }
  }
  shm->failed[who] = 1;
  PQfinish(pg);
  _exit(1);
}

static int pg_native_handover(const char *url, int n, int gap_ms, bench_samples_t *out, char *err,
                              size_t errlen) {
  char libpq_url[1024], schema[64], key[24];
  if (split_url(url, libpq_url, sizeof libpq_url, schema, sizeof schema, err, errlen) != 0) {
    return -1;
  }
  snprintf(key, sizeof key, "%ld", 0x5b200000L + (long)(getpid() & 0xfffff));
  /* 2m - 1 handovers; the first is not measured (process 1 has just connected). */
  const int m = n / 2 + 1;
  const size_t size = sizeof(handover_shm_t) + sizeof(int64_t) * 2 * 2 * (size_t)m;
  handover_shm_t *shm = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shm == MAP_FAILED) {
    snprintf(err, errlen, "mmap failed");
    return -1;
  }
  memset(shm, 0, size);
  pid_t pid[2] = {-1, -1};
  int rc = -1;
  fflush(NULL);
  for (int who = 0; who < 2; who++) {
    pid[who] = fork();
    if (pid[who] < 0) {
      snprintf(err, errlen, "fork failed");
      goto end;
    }
    if (pid[who] == 0) handover_child(who, libpq_url, key, m, gap_ms, shm);
    /* Process 1 starts once process 0 holds the lock. */
    const int64_t until = bench_now_ns() + 20 * 1000000000LL;
    while (who == 0 && shm->t[0] == 0 && !shm->failed[0] && bench_now_ns() < until) {
      bench_sleep_ns(1000000);
    }
  }
  for (int who = 0; who < 2; who++) {
    int status = 0;
    const int64_t until = bench_now_ns() + (int64_t)(n + 10) * (gap_ms + 200) * 1000000LL;
    while (waitpid(pid[who], &status, WNOHANG) == 0) {
      if (bench_now_ns() > until || shm->failed[1 - who]) {
        kill(pid[who], SIGKILL); /* our own child only */
        waitpid(pid[who], &status, 0);
        status = -1;
        break;
      }
      bench_sleep_ns(5000000);
    }
    pid[who] = -1;
    if (status != 0) {
      snprintf(err, errlen, "advisory handover, process %d: %s", who,
               shm->error[who][0]       ? shm->error[who]
               : shm->error[1 - who][0] ? shm->error[1 - who]
                                        : "killed or timed out");
      goto end;
    }
  }
  for (int k = 0; k < m; k++) {
    /* 0 releases -> 1 acquires; then 1 releases -> 0 acquires (next cycle). */
    const int64_t d1 = shm->t[(1 * m + k) * 2] - shm->t[(0 * m + k) * 2 + 1];
    if (k > 0) bench_samples_push(out, d1);
    if (k + 1 < m)
      bench_samples_push(out, shm->t[(0 * m + k + 1) * 2] - shm->t[(1 * m + k) * 2 + 1]);
  }
  rc = 0;
end:
  for (int who = 0; who < 2; who++) {
    if (pid[who] > 0) {
      kill(pid[who], SIGKILL);
      waitpid(pid[who], NULL, 0);
    }
  }
  munmap(shm, size);
  return rc;
}

const raw_backend_t raw_postgres_backend = {
    .name = "postgresql",
    .scheme = "postgresql",
    .alt_scheme = "postgres",
    .op_desc = {"SELECT 1",
                "SELECT session_id, token FROM {schema}.simba_lease WHERE name = $1 (one row, "
                "no write)",
                "Simba's statements, alternately: SELECT code, value FROM "
                "{schema}.simba_acquire($1::uuid, $2::text) and SELECT "
                "{schema}.simba_release($1::uuid, $2::text, $3::bigint) FROM "
                "set_config('synchronous_commit', 'off', true) (each a commit; the release's "
                "asynchronous, ADR 0023)"},
    .op_label = {"raw SELECT 1", "raw SELECT of a lease row (read)", "raw simba_acquire|_release"},
    .calls_desc =
        "pg_stat_user_functions: calls of simba_open, simba_keep_alive, "
        "simba_acquire, simba_release, simba_close, simba_acquire_permit, "
        "simba_release_permit (track_functions = pl)",
    .namespace_param = "schema",
    .namespace_fmt = "simba_bench_%ld",
    .write_pairs = 1,
    .counts_lag_ms = 1000,
    .connect = pg_connect,
    .disconnect = pg_disconnect,
    .prepare = pg_prepare,
    .round_trip = pg_round_trip,
    .server_calls = pg_server_calls,
    .connected_clients = pg_connected_clients,
    .describe = pg_describe,
    .set_durability = NULL, /* fsync is on the test server's command line; Simba forces
                               synchronous_commit on for its connections */
    .native_lock_desc =
        "session advisory lock: SELECT pg_advisory_lock($1::bigint), then "
        "SELECT pg_advisory_unlock($1::bigint) (no WAL, no commit)",
    .native_lock_cycle = pg_native_lock_cycle,
    .native_handover = pg_native_handover,
};
