/* Fencing recipe: one conditional UPDATE on PostgreSQL. See fencing_pg.h. */
#include "fencing_pg.h"

#include <stdio.h>
#include <string.h>

static int command_ok(PGresult *res) {
  int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
  PQclear(res);
  return ok ? 0 : -1;
}

int fence_pg_setup(PGconn *c) {
  return command_ok(PQexec(c,
                           "create table if not exists ledger_state ("
                           " id text primary key,"
                           " fencing_token bigint not null default 0,"
                           " last_batch text)"));
}

int fence_pg_create(PGconn *c, const char *id) {
  const char *params[1];
  params[0] = id;
  return command_ok(PQexecParams(c,
                                 "insert into ledger_state (id) values ($1) on conflict do nothing",
                                 1, NULL, params, NULL, NULL, 0));
}

int fence_pg_write(PGconn *c, const char *id, uint64_t token, const char *value) {
  char tok[24];
  const char *params[3];
  PGresult *res;
  int rc = -1;
  if (token > (uint64_t)INT64_MAX) return -1; /* bigint is signed */
  snprintf(tok, sizeof tok, "%llu", (unsigned long long)token);
  params[0] = value;
  params[1] = tok;
  params[2] = id;
  res = PQexecParams(c,
                     "update ledger_state set last_batch = $1, fencing_token = $2::bigint"
                     " where id = $3 and fencing_token <= $2::bigint",
                     3, NULL, params, NULL, NULL, 0);
  if (PQresultStatus(res) == PGRES_COMMAND_OK) {
    /* Rows matched by the WHERE clause: 1 = accepted (also for an identical
     * retry), 0 = a higher token is recorded. */
    const char *n = PQcmdTuples(res);
    if (strcmp(n, "1") == 0) rc = 1;
    if (strcmp(n, "0") == 0) rc = 0;
  }
  PQclear(res);
  return rc;
}

int fence_pg_read(PGconn *c, const char *id, char *buf, size_t cap) {
  const char *params[1];
  PGresult *res;
  int rc = -1;
  if (cap == 0) return -1;
  params[0] = id;
  res = PQexecParams(c, "select last_batch from ledger_state where id = $1", 1, NULL, params, NULL,
                     NULL, 0);
  if (PQresultStatus(res) == PGRES_TUPLES_OK) {
    if (PQntuples(res) == 0 || PQgetisnull(res, 0, 0)) {
      rc = 0;
    } else {
      strncpy(buf, PQgetvalue(res, 0, 0), cap - 1);
      buf[cap - 1] = '\0';
      rc = 1;
    }
  }
  PQclear(res);
  return rc;
}

int fence_pg_delete(PGconn *c, const char *id) {
  const char *params[1];
  params[0] = id;
  return command_ok(
      PQexecParams(c, "delete from ledger_state where id = $1", 1, NULL, params, NULL, NULL, 0));
}
