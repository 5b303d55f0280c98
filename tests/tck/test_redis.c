/*
 * The Redis fencing recipe (examples/fencing/fencing_redis.c, one Lua script)
 * passes the kit against a real redis-server; the same resource with its check
 * and write as separate commands fails it. SIMBA_TEST_REDIS_URL
 * (redis://HOST:PORT[/DB], set by scripts/test.sh) names the server; without it
 * the test is skipped.
 */
#include <pthread.h>
#include <unistd.h>

#include "fencing_redis.h"
#include "tck_test.h"

#define POOL_MAX 80

/* A pool of connections: the kit writes from several threads at once, and a
 * hiredis context serves one thread at a time. */
typedef struct pool {
  pthread_mutex_t mu;
  char host[128];
  int port, db;
  redisContext *idle[POOL_MAX];
  int n_idle;
} pool_t;

static int parse_url(pool_t *p, const char *url) {
  const char *s = url, *colon, *slash;
  size_t n;
  if (strncmp(s, "redis://", 8) != 0) return -1;
  s += 8;
  if (strchr(s, '@')) return -1; /* the test server has no password */
  colon = strchr(s, ':');
  slash = strchr(s, '/');
  n = colon ? (size_t)(colon - s) : slash ? (size_t)(slash - s) : strlen(s);
  if (n == 0 || n >= sizeof p->host) return -1;
  memcpy(p->host, s, n);
  p->host[n] = '\0';
  p->port = colon ? atoi(colon + 1) : 6379;
  p->db = slash ? atoi(slash + 1) : 0;
  return p->port > 0 ? 0 : -1;
}

static redisContext *pool_get(pool_t *p) {
  redisContext *c = NULL;
  pthread_mutex_lock(&p->mu);
  if (p->n_idle > 0) c = p->idle[--p->n_idle];
  pthread_mutex_unlock(&p->mu);
  if (c) return c;
  c = redisConnect(p->host, p->port);
  if (c == NULL || c->err) {
    fprintf(stderr, "redis connect %s:%d: %s\n", p->host, p->port, c ? c->errstr : "no memory");
    if (c) redisFree(c);
    return NULL;
  }
  if (p->db != 0) {
    redisReply *r = redisCommand(c, "SELECT %d", p->db);
    if (r) freeReplyObject(r);
  }
  return c;
}

static void pool_put(pool_t *p, redisContext *c) {
  if (c == NULL) return;
  if (c->err) {
    redisFree(c);
    return;
  }
  pthread_mutex_lock(&p->mu);
  if (p->n_idle < POOL_MAX) {
    p->idle[p->n_idle++] = c;
    c = NULL;
  }
  pthread_mutex_unlock(&p->mu);
  if (c) redisFree(c);
}

/* The resource under test: one resource name per reset(). */
typedef struct redis_res {
  pool_t *pool;
  char name[96];
  unsigned n;
  int broken; /* the negative control: GET, pause, SET */
} redis_res_t;

static int res_reset(void *ud) {
  redis_res_t *r = ud;
  redisContext *c = pool_get(r->pool);
  int rc;
  if (c == NULL) return -1;
  if (r->name[0]) fence_redis_delete(c, r->name);
  snprintf(r->name, sizeof r->name, "simba-tck:%ld:%u", (long)getpid(), r->n++);
  rc = fence_redis_delete(c, r->name);
  pool_put(r->pool, c);
  return rc;
}

/* Check and write as separate commands: a stale owner passes the GET and lands
 * its SET after a newer owner's. What NOT to do. */
static int broken_write(redisContext *c, const char *name, uint64_t token, const char *value) {
  redisReply *r = redisCommand(c, "GET {%s}:token", name);
  uint64_t highest = 0;
  if (r == NULL) return SIMBA_TCK_ERROR;
  if (r->type == REDIS_REPLY_STRING) highest = strtoull(r->str, NULL, 10);
  freeReplyObject(r);
  if (token < highest) return SIMBA_TCK_REJECTED;
  tck_sleep_us((long)(tck_rand() % 200));
  r = redisCommand(c, "SET {%s}:token %llu", name, (unsigned long long)token);
  if (r) freeReplyObject(r);
  r = redisCommand(c, "SET {%s}:value %s", name, value);
  if (r == NULL) return SIMBA_TCK_ERROR;
  freeReplyObject(r);
  return SIMBA_TCK_ACCEPTED;
}

static int res_write(void *ud, uint64_t token, const char *value) {
  redis_res_t *r = ud;
  redisContext *c = pool_get(r->pool);
  int rc;
  if (c == NULL) return SIMBA_TCK_ERROR;
  rc = r->broken ? broken_write(c, r->name, token, value)
                 : fence_redis_write(c, r->name, token, value);
  pool_put(r->pool, c);
  return rc;
}

static int res_read(void *ud, char *buf, size_t cap) {
  redis_res_t *r = ud;
  redisContext *c = pool_get(r->pool);
  int rc;
  if (c == NULL) return -1;
  rc = fence_redis_read(c, r->name, buf, cap);
  pool_put(r->pool, c);
  return rc;
}

int main(void) {
  const char *url = getenv("SIMBA_TEST_REDIS_URL");
  pool_t pool;
  redis_res_t rr;
  simba_tck_resource_t res;
  simba_tck_options_t opts = tck_options(150);
  simba_tck_report_t *rep;
  redisContext *c;
  int i;

  if (url == NULL || *url == '\0') {
    printf("SKIP: SIMBA_TEST_REDIS_URL is not set (scripts/test.sh starts a redis-server)\n");
    return TCK_SKIP;
  }
  memset(&pool, 0, sizeof pool);
  pthread_mutex_init(&pool.mu, NULL);
  if (parse_url(&pool, url) != 0) {
    fprintf(stderr, "cannot parse SIMBA_TEST_REDIS_URL=%s\n", url);
    return 1;
  }
  memset(&rr, 0, sizeof rr);
  rr.pool = &pool;
  memset(&res, 0, sizeof res);
  res.version = SIMBA_TCK_RESOURCE_V1;
  res.reset = res_reset;
  res.write = res_write;
  res.read = res_read;
  res.ud = &rr;

  /* The recipe, on the real server. */
  tck_expect_pass("Redis recipe (one Lua script)", &res, &opts);

  /* The token and the value are the two keys of one hash tag, {resource}: one
   * hash slot, so the script also runs on Redis Cluster. */
  c = pool_get(&pool);
  TCK_CHECK(c != NULL);
  if (c) {
    redisReply *e = redisCommand(c, "EXISTS {%s}:token {%s}:value", rr.name, rr.name);
    TCK_CHECK(e != NULL && e->type == REDIS_REPLY_INTEGER && e->integer == 2);
    if (e) freeReplyObject(e);
    pool_put(&pool, c);
  }

  /* Negative control on the same server: GET, then SET. */
  rr.broken = 1;
  opts = tck_options(60);
  rep = tck_run("negative control: GET then SET (not atomic)", &res, &opts);
  if (rep) {
    TCK_CHECK(simba_tck_report_passed(rep) == 0);
    TCK_CHECK(tck_case_passed(rep, "equal_token_accepted") == 1);
    TCK_CHECK(tck_case_passed(rep, "lower_token_rejected") == 1);
    TCK_CHECK(tck_case_passed(rep, "concurrent_writers") == 0);
    simba_tck_report_free(rep);
  }

  c = pool_get(&pool);
  if (c) {
    fence_redis_delete(c, rr.name);
    pool_put(&pool, c);
  }
  for (i = 0; i < pool.n_idle; ++i) redisFree(pool.idle[i]);
  pthread_mutex_destroy(&pool.mu);
  return tck_finish("tck_redis");
}
