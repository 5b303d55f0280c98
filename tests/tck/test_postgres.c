/*
 * The PostgreSQL fencing recipe (examples/fencing/fencing_pg.c, one conditional
 * UPDATE) passes the kit against a real server; the same table written with a
 * SELECT and then an unconditional UPDATE fails it. SIMBA_TEST_POSTGRES_URL
 * (postgresql://USER@HOST:PORT/DB, set by scripts/test.sh) names the server;
 * without it the test is skipped.
 */
#include <pthread.h>
#include <unistd.h>

#include "fencing_pg.h"
#include "tck_test.h"

#define POOL_MAX 80

/* A pool of connections: the kit writes from several threads at once, and a
 * PGconn serves one thread at a time. */
typedef struct pool {
  pthread_mutex_t mu;
  const char *url;
  PGconn *idle[POOL_MAX];
  int n_idle;
} pool_t;

static PGconn *pool_get(pool_t *p) {
  PGconn *c = NULL;
  pthread_mutex_lock(&p->mu);
  if (p->n_idle > 0) c = p->idle[--p->n_idle];
  pthread_mutex_unlock(&p->mu);
  if (c) return c;
  {
    /* The URL, without the SSL and GSSAPI negotiation a loopback test server
     * does not need (and whose libraries the sanitizers would trace). */
    const char *keys[] = {"dbname", "sslmode", "gssencmode", NULL};
    const char *values[] = {p->url, "disable", "disable", NULL};
    c = PQconnectdbParams(keys, values, 1);
  }
  if (PQstatus(c) != CONNECTION_OK) {
    fprintf(stderr, "postgres connect: %s", PQerrorMessage(c));
    PQfinish(c);
    return NULL;
  }
  return c;
}

static void pool_put(pool_t *p, PGconn *c) {
  if (c == NULL) return;
  if (PQstatus(c) != CONNECTION_OK) {
    PQfinish(c);
    return;
  }
  pthread_mutex_lock(&p->mu);
  if (p->n_idle < POOL_MAX) {
    p->idle[p->n_idle++] = c;
    c = NULL;
  }
  pthread_mutex_unlock(&p->mu);
  if (c) PQfinish(c);
}

/* The resource under test: one row per reset(). */
typedef struct pg_res {
  pool_t *pool;
  char id[96];
  unsigned n;
  int broken; /* the negative control: SELECT, pause, UPDATE */
} pg_res_t;

static int res_reset(void *ud) {
  pg_res_t *r = ud;
  PGconn *c = pool_get(r->pool);
  int rc;
  if (c == NULL) return -1;
  if (r->id[0]) fence_pg_delete(c, r->id);
  snprintf(r->id, sizeof r->id, "simba-tck:%ld:%u", (long)getpid(), r->n++);
  rc = fence_pg_create(c, r->id);
  if (rc != 0) fprintf(stderr, "create row: %s", PQerrorMessage(c));
  pool_put(r->pool, c);
  return rc;
}

/* Check and write as two statements: a stale owner passes the SELECT and lands
 * its UPDATE after a newer owner's. What NOT to do. */
static int broken_write(PGconn *c, const char *id, uint64_t token, const char *value) {
  const char *params[3];
  char tok[24];
  PGresult *res;
  uint64_t highest;
  int ok;
  params[0] = id;
  res = PQexecParams(c, "select fencing_token from ledger_state where id = $1", 1, NULL, params,
                     NULL, NULL, 0);
  if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
    PQclear(res);
    return SIMBA_TCK_ERROR;
  }
  highest = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
  PQclear(res);
  if (token < highest) return SIMBA_TCK_REJECTED;
  tck_sleep_us((long)(tck_rand() % 200));
  snprintf(tok, sizeof tok, "%llu", (unsigned long long)token);
  params[0] = value;
  params[1] = tok;
  params[2] = id;
  res = PQexecParams(c,
                     "update ledger_state set last_batch = $1, fencing_token = $2::bigint"
                     " where id = $3",
                     3, NULL, params, NULL, NULL, 0);
  ok = PQresultStatus(res) == PGRES_COMMAND_OK;
  PQclear(res);
  return ok ? SIMBA_TCK_ACCEPTED : SIMBA_TCK_ERROR;
}

static int res_write(void *ud, uint64_t token, const char *value) {
  pg_res_t *r = ud;
  PGconn *c = pool_get(r->pool);
  int rc;
  if (c == NULL) return SIMBA_TCK_ERROR;
  rc = r->broken ? broken_write(c, r->id, token, value) : fence_pg_write(c, r->id, token, value);
  if (rc == SIMBA_TCK_ERROR) fprintf(stderr, "write: %s", PQerrorMessage(c));
  pool_put(r->pool, c);
  return rc;
}

static int res_read(void *ud, char *buf, size_t cap) {
  pg_res_t *r = ud;
  PGconn *c = pool_get(r->pool);
  int rc;
  if (c == NULL) return -1;
  rc = fence_pg_read(c, r->id, buf, cap);
  pool_put(r->pool, c);
  return rc;
}

int main(void) {
  const char *url = getenv("SIMBA_TEST_POSTGRES_URL");
  pool_t pool;
  pg_res_t pr;
  simba_tck_resource_t res;
  simba_tck_options_t opts = tck_options(100);
  simba_tck_report_t *rep;
  PGconn *c;
  int i;

  if (url == NULL || *url == '\0') {
    printf("SKIP: SIMBA_TEST_POSTGRES_URL is not set (scripts/test.sh starts PostgreSQL)\n");
    return TCK_SKIP;
  }
  memset(&pool, 0, sizeof pool);
  pthread_mutex_init(&pool.mu, NULL);
  pool.url = url;
  c = pool_get(&pool);
  if (c == NULL) return 1;
  if (fence_pg_setup(c) != 0) {
    fprintf(stderr, "create table: %s", PQerrorMessage(c));
    PQfinish(c);
    return 1;
  }
  pool_put(&pool, c);

  memset(&pr, 0, sizeof pr);
  pr.pool = &pool;
  memset(&res, 0, sizeof res);
  res.version = SIMBA_TCK_RESOURCE_V1;
  res.reset = res_reset;
  res.write = res_write;
  res.read = res_read;
  res.ud = &pr;

  /* The recipe, on the real server. */
  tck_expect_pass("PostgreSQL recipe (one conditional UPDATE)", &res, &opts);

  /* An identical retry matches the row again: 1 row, accepted. */
  TCK_CHECK(res_reset(&pr) == 0);
  c = pool_get(&pool);
  TCK_CHECK(c != NULL);
  if (c) {
    TCK_CHECK(fence_pg_write(c, pr.id, 41, "batch-41") == 1);
    TCK_CHECK(fence_pg_write(c, pr.id, 41, "batch-41") == 1);
    TCK_CHECK(fence_pg_write(c, pr.id, 40, "batch-40") == 0);
    TCK_CHECK(fence_pg_write(c, pr.id, (uint64_t)INT64_MAX + 1, "too big") == -1);
    pool_put(&pool, c);
  }

  /* Negative control on the same server: SELECT, then UPDATE. */
  pr.broken = 1;
  opts = tck_options(60);
  rep = tck_run("negative control: SELECT then UPDATE (not atomic)", &res, &opts);
  if (rep) {
    TCK_CHECK(simba_tck_report_passed(rep) == 0);
    TCK_CHECK(tck_case_passed(rep, "equal_token_accepted") == 1);
    TCK_CHECK(tck_case_passed(rep, "lower_token_rejected") == 1);
    TCK_CHECK(tck_case_passed(rep, "concurrent_writers") == 0);
    simba_tck_report_free(rep);
  }

  c = pool_get(&pool);
  if (c) {
    fence_pg_delete(c, pr.id);
    pool_put(&pool, c);
  }
  for (i = 0; i < pool.n_idle; ++i) PQfinish(pool.idle[i]);
  pthread_mutex_destroy(&pool.mu);
  return tck_finish("tck_postgres");
}
