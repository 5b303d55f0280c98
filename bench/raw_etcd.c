/* raw_etcd: the two candidate transports of the etcd backend (issue 38, ADR
 * 0044), measured on one real etcd 3.4 in one run, each driven from a libuv
 * loop with no thread of its own (as EXTERNAL mode needs):
 *
 *   grpc  gRPC over HTTP/2 (libnghttp2 on a uv_tcp_t) with protobuf-c messages
 *         (src/backend/etcd/etcd_rpc.proto, a subset of etcd's rpc.proto); one
 *         connection; a unary call is one stream; LeaseKeepAlive is one
 *         bidirectional stream kept open, one message per renewal.
 *   json  etcd's v3 JSON gateway (/v3/...) over HTTP/1.1 with libcurl's
 *         multi-socket API (uv_poll_t per socket, a uv_timer_t for curl's
 *         timeouts); one kept-alive connection; every call (keep-alive too)
 *         is one POST.
 *
 * Each transport: LeaseGrant once, then N cycles of Simba's shapes: acquire
 * (Txn: create_revision(key) == 0 -> put key with the lease, else range key),
 * acquire again while held (the else branch: reads the holder), release (Txn:
 * lease(key) == lease and create_revision(key) == token -> delete key), and one
 * LeaseKeepAlive; then LeaseRevoke. Percentiles of each round trip, encoding
 * and decoding included.
 *
 *   raw_etcd [--url etcd://127.0.0.1:2379] [-n 2000] [--transport grpc|json|both]
 *   (the URL defaults to $SIMBA_TEST_ETCD_URL)
 */
#define _POSIX_C_SOURCE 200809L
#include <curl/curl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "etcd_grpc.h"

static uv_loop_t *g_loop;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* ===================== JSON gateway over HTTP/1.1 (libcurl) =================== */

typedef struct {
  CURLM *m;
  CURL *e;
  uv_timer_t timer;
  struct curl_slist *hdrs;
  char base[80];
  char body[1024];
  buf_t resp;
  int op;
  reply_t *out;
  int nsock;
  long connects; /* connections opened, over all calls */
} cjson_t;

typedef struct {
  uv_poll_t poll;
  cjson_t *c;
  curl_socket_t fd;
} csock_t;

/* The integer after "name":" (the gateway writes int64 as strings), or 0. */
static int64_t j_int(const char *s, const char *name) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":\"", name);
  const char *p = strstr(s, pat);
  return p ? strtoll(p + strlen(pat), NULL, 10) : 0;
}

static void c_done(cjson_t *c, CURLcode rc) {
  reply_t *out = c->out;
  long code = 0;
  long connects = 0;
  curl_easy_getinfo(c->e, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_getinfo(c->e, CURLINFO_NUM_CONNECTS, &connects);
  c->connects += connects;
  curl_multi_remove_handle(c->m, c->e); /* the connection stays in the multi's cache */
  buf_add(&c->resp, "", 1);
  const char *s = (const char *)c->resp.p;
  if (rc != CURLE_OK || code != 200) {
    snprintf(out->err, sizeof out->err, "json: %s, HTTP %ld: %.150s", curl_easy_strerror(rc), code,
             s);
    out->failed = out->done = 1;
    return;
  }
  /* The gateway leaves out fields of value 0 or false ("succeeded" when the
   * compare failed); keep-alive answers come as {"result":{...}}. */
  switch (c->op) {
    case OP_GRANT:
    case OP_KEEPALIVE:
      out->id = j_int(s, "ID"), out->ttl = j_int(s, "TTL");
      break;
    case OP_ACQUIRE:
    case OP_RELEASE:
      out->succeeded = strstr(s, "\"succeeded\":true") != NULL;
      out->revision = j_int(s, "revision");
      if (!out->succeeded) out->holder = j_int(s, "create_revision");
      break;
  }
  out->done = 1;
}

static void c_check(cjson_t *c) {
  CURLMsg *msg;
  int left;
  while ((msg = curl_multi_info_read(c->m, &left))) {
    if (msg->msg == CURLMSG_DONE && c->out && !c->out->done) c_done(c, msg->data.result);
  }
}

static void c_on_poll(uv_poll_t *p, int status, int events) {
  csock_t *cs = p->data;
  int flags = 0, running;
  if (status < 0) flags = CURL_CSELECT_ERR;
  if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
  if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
  curl_multi_socket_action(cs->c->m, cs->fd, flags, &running);
  c_check(cs->c);
}

static void c_on_timer(uv_timer_t *t) {
  cjson_t *c = t->data;
  int running;
  curl_multi_socket_action(c->m, CURL_SOCKET_TIMEOUT, 0, &running);
  c_check(c);
}

static void c_free_sock(uv_handle_t *h) { free(h->data); }

static int c_socket(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp) {
  (void)e;
  cjson_t *c = userp;
  csock_t *cs = socketp;
  if (what == CURL_POLL_REMOVE) {
    if (cs) {
      uv_close((uv_handle_t *)&cs->poll, c_free_sock);
      curl_multi_assign(c->m, fd, NULL);
      c->nsock--;
    }
    return 0;
  }
  if (!cs) {
    cs = calloc(1, sizeof *cs);
    cs->c = c;
    cs->fd = fd;
    uv_poll_init_socket(uv_handle_get_loop((uv_handle_t *)&c->timer), &cs->poll, fd);
    cs->poll.data = cs;
    curl_multi_assign(c->m, fd, cs);
    c->nsock++;
  }
  int ev = (what & CURL_POLL_IN ? UV_READABLE : 0) | (what & CURL_POLL_OUT ? UV_WRITABLE : 0);
  uv_poll_start(&cs->poll, ev, c_on_poll);
  return 0;
}

static int c_timer(CURLM *m, long ms, void *userp) {
  (void)m;
  cjson_t *c = userp;
  if (ms < 0) {
    uv_timer_stop(&c->timer);
  } else {
    uv_timer_start(&c->timer, c_on_timer, (uint64_t)ms, 0);
  }
  return 0;
}

static size_t c_write(char *d, size_t size, size_t n, void *userp) {
  buf_add(&((cjson_t *)userp)->resp, d, size * n);
  return size * n;
}

static void *c_open(uv_loop_t *loop, const char *host, int port, char *err, size_t errlen) {
  (void)err, (void)errlen;
  cjson_t *c = calloc(1, sizeof *c);
  snprintf(c->base, sizeof c->base, "http://%s:%d", host, port);
  uv_timer_init(loop, &c->timer);
  c->timer.data = c;
  c->m = curl_multi_init();
  curl_multi_setopt(c->m, CURLMOPT_SOCKETFUNCTION, c_socket);
  curl_multi_setopt(c->m, CURLMOPT_SOCKETDATA, c);
  curl_multi_setopt(c->m, CURLMOPT_TIMERFUNCTION, c_timer);
  curl_multi_setopt(c->m, CURLMOPT_TIMERDATA, c);
  c->e = curl_easy_init();
  c->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
  c->hdrs = curl_slist_append(c->hdrs, "Expect:");
  curl_easy_setopt(c->e, CURLOPT_HTTPHEADER, c->hdrs);
  curl_easy_setopt(c->e, CURLOPT_WRITEFUNCTION, c_write);
  curl_easy_setopt(c->e, CURLOPT_WRITEDATA, c);
  curl_easy_setopt(c->e, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(c->e, CURLOPT_NOSIGNAL, 1L);
  return c;
}

/* base64 of a short key, for the gateway's bytes fields. */
static void b64(const char *s, char *out) {
  static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t n = strlen(s), i;
  const unsigned char *u = (const unsigned char *)s;
  for (i = 0; i + 2 < n; i += 3) {
    *out++ = t[u[i] >> 2];
    *out++ = t[(u[i] & 3) << 4 | u[i + 1] >> 4];
    *out++ = t[(u[i + 1] & 15) << 2 | u[i + 2] >> 6];
    *out++ = t[u[i + 2] & 63];
  }
  if (i < n) {
    *out++ = t[u[i] >> 2];
    *out++ = t[(u[i] & 3) << 4 | (i + 1 < n ? u[i + 1] >> 4 : 0)];
    *out++ = i + 1 < n ? t[(u[i + 1] & 15) << 2] : '=';
    *out++ = '=';
  }
  *out = '\0';
}

static int c_start(void *t, int op, const args_t *a, reply_t *out) {
  cjson_t *c = t;
  char url[160], k[128];
  const char *path = "/v3/kv/txn";
  b64(a->key, k);
  switch (op) {
    case OP_GRANT:
      path = "/v3/lease/grant";
      snprintf(c->body, sizeof c->body, "{\"TTL\":\"60\"}");
      break;
    case OP_REVOKE:
      path = "/v3/lease/revoke";
      snprintf(c->body, sizeof c->body, "{\"ID\":\"%" PRId64 "\"}", a->lease);
      break;
    case OP_RANGE:
      path = "/v3/kv/range";
      snprintf(c->body, sizeof c->body, "{\"key\":\"%s\"}", k);
      break;
    case OP_KEEPALIVE:
      path = "/v3/lease/keepalive";
      snprintf(c->body, sizeof c->body, "{\"ID\":\"%" PRId64 "\"}", a->lease);
      break;
    case OP_ACQUIRE:
      snprintf(c->body, sizeof c->body,
               "{\"compare\":[{\"target\":\"CREATE\",\"key\":\"%s\",\"create_revision\":\"0\"}],"
               "\"success\":[{\"request_put\":{\"key\":\"%s\",\"value\":\"b3duZXI=\",\"lease\":"
               "\"%" PRId64 "\"}}],\"failure\":[{\"request_range\":{\"key\":\"%s\"}}]}",
               k, k, a->lease, k);
      break;
    case OP_RELEASE:
      snprintf(c->body, sizeof c->body,
               "{\"compare\":[{\"target\":\"LEASE\",\"key\":\"%s\",\"lease\":\"%" PRId64
               "\"},{\"target\":\"CREATE\",\"key\":\"%s\",\"create_revision\":\"%" PRId64
               "\"}],\"success\":[{\"request_delete_range\":{\"key\":\"%s\"}}]}",
               k, a->lease, k, a->token, k);
      break;
  }
  snprintf(url, sizeof url, "%s%s", c->base, path);
  c->op = op;
  c->out = out;
  c->resp.len = 0;
  curl_easy_setopt(c->e, CURLOPT_URL, url);
  curl_easy_setopt(c->e, CURLOPT_POSTFIELDS, c->body);
  curl_easy_setopt(c->e, CURLOPT_POSTFIELDSIZE, (long)strlen(c->body));
  curl_multi_add_handle(c->m, c->e);
  /* Start it now rather than from the 0 ms timer curl just asked for: saves a
   * loop turn (legal outside curl's callbacks). */
  int running;
  curl_multi_socket_action(c->m, CURL_SOCKET_TIMEOUT, 0, &running);
  c_check(c);
  return 0;
}

static int c_fds(void *t) { return (int)((cjson_t *)t)->connects; }

static void c_close(void *t) {
  cjson_t *c = t;
  curl_easy_cleanup(c->e);
  curl_multi_cleanup(c->m); /* closes the sockets: CURL_POLL_REMOVE closes the polls */
  curl_slist_free_all(c->hdrs);
  free(c->resp.p);
  uv_close((uv_handle_t *)&c->timer, NULL);
  /* c itself is leaked on purpose: the timer's close runs on a later loop turn. */
}

static const transport_t kJson = {"json", c_open, c_start, c_fds, c_close};

/* ================================ driver ==================================== */

static int call(const transport_t *tr, void *t, int op, const args_t *a, reply_t *out) {
  return etcd_call(g_loop, tr, t, op, a, out);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void report(const char *tr, const char *what, double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  printf("%-5s %-28s n=%-5d p50 %7.1f  p90 %7.1f  p99 %7.1f  max %8.1f us\n", tr, what, n, v[n / 2],
         v[n * 90 / 100], v[n * 99 / 100], v[n - 1]);
}

enum { S_ACQ, S_HELD, S_REL, S_KA, S_RANGE, S_COUNT };
static const char *const kSampleNames[S_COUNT] = {
    "acquire Txn (put, won)", "acquire Txn (range, held)", "release Txn (delete)", "LeaseKeepAlive",
    "Range (linearizable read)"};

typedef struct {
  const transport_t *tr;
  void *t;
  char key[64];
  args_t a;
  double *v[S_COUNT];
} bench_t;

/* One cycle of Simba's shapes on b; samples stored at i when i >= 0. */
static int cycle(bench_t *b, int i) {
  reply_t r;
  const char *name = b->tr->name;
  double t[S_COUNT + 1];
  t[0] = now_us();
  if (call(b->tr, b->t, OP_ACQUIRE, &b->a, &r) != 0 || !r.succeeded) {
    return fprintf(stderr, "%s acquire: %s (succeeded %d)\n", name, r.err, r.succeeded), -1;
  }
  t[1] = now_us();
  b->a.token = r.revision;
  if (call(b->tr, b->t, OP_ACQUIRE, &b->a, &r) != 0 || r.succeeded || r.holder != b->a.token) {
    return fprintf(stderr, "%s acquire held: %s (holder %" PRId64 ", token %" PRId64 ")\n", name,
                   r.err, r.holder, b->a.token),
           -1;
  }
  t[2] = now_us();
  if (call(b->tr, b->t, OP_RELEASE, &b->a, &r) != 0 || !r.succeeded) {
    return fprintf(stderr, "%s release: %s\n", name, r.err), -1;
  }
  t[3] = now_us();
  if (call(b->tr, b->t, OP_KEEPALIVE, &b->a, &r) != 0 || r.ttl <= 0) {
    return fprintf(stderr, "%s keepalive: %s (ttl %" PRId64 ")\n", name, r.err, r.ttl), -1;
  }
  t[4] = now_us();
  if (call(b->tr, b->t, OP_RANGE, &b->a, &r) != 0) {
    return fprintf(stderr, "%s range: %s\n", name, r.err), -1;
  }
  t[5] = now_us();
  if (i >= 0) {
    for (int k = 0; k < S_COUNT; k++) b->v[k][i] = t[k + 1] - t[k];
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *url = getenv("SIMBA_TEST_ETCD_URL"), *which = "both";
  int n = 2000;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--url") && i + 1 < argc) {
      url = argv[++i];
    } else if (!strcmp(argv[i], "-n") && i + 1 < argc) {
      n = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--transport") && i + 1 < argc) {
      which = argv[++i];
    } else {
      fprintf(stderr,
              "usage: raw_etcd [--url etcd://IP:PORT] [-n N] [--transport grpc|json|both]\n");
      return 2;
    }
  }
  char host[64];
  int port = 0;
  if (!url || sscanf(url, "etcd://%63[^:/]:%d", host, &port) != 2 || n < 1) {
    fprintf(stderr, "raw_etcd: need --url etcd://IP:PORT (or SIMBA_TEST_ETCD_URL)\n");
    return 2;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  g_loop = uv_default_loop();
  bench_t b[2];
  int nb = 0;
  if (!strcmp(which, "both") || !strcmp(which, "grpc")) b[nb++].tr = &etcd_grpc_transport;
  if (!strcmp(which, "both") || !strcmp(which, "json")) b[nb++].tr = &kJson;
  for (int j = 0; j < nb; j++) {
    char err[256];
    reply_t r;
    b[j].t = b[j].tr->open(g_loop, host, port, err, sizeof err);
    if (!b[j].t) return fprintf(stderr, "%s: %s\n", b[j].tr->name, err), 1;
    snprintf(b[j].key, sizeof b[j].key, "/simba-bench-%d/%s", (int)uv_os_getpid(), b[j].tr->name);
    memset(&b[j].a, 0, sizeof b[j].a);
    b[j].a.key = b[j].key;
    if (call(b[j].tr, b[j].t, OP_GRANT, &b[j].a, &r) != 0) return fprintf(stderr, "%s\n", r.err), 1;
    b[j].a.lease = r.id;
    for (int k = 0; k < S_COUNT; k++) b[j].v[k] = malloc(sizeof(double) * (size_t)n);
  }
  /* Interleaved cycle by cycle: both transports see the same machine and the
   * same server state (a shared, noisy machine). */
  for (int i = -(n / 10 + 1); i < n; i++) {
    for (int j = 0; j < nb; j++) {
      if (cycle(&b[j], i) != 0) return 1;
    }
  }
  printf("etcd %s:%d, %d cycles per transport, interleaved; microseconds\n", host, port, n);
  for (int j = 0; j < nb; j++) {
    reply_t r;
    if (call(b[j].tr, b[j].t, OP_REVOKE, &b[j].a, &r) != 0) {
      return fprintf(stderr, "%s revoke: %s\n", b[j].tr->name, r.err), 1;
    }
    for (int k = 0; k < S_COUNT; k++) report(b[j].tr->name, kSampleNames[k], b[j].v[k], n);
    printf("%-5s TCP connections opened: %d\n", b[j].tr->name, b[j].tr->fds(b[j].t));
    b[j].tr->close(b[j].t);
  }
  uv_run(g_loop, UV_RUN_NOWAIT);
  curl_global_cleanup();
  return 0;
}
