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
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "etcd_rpc.pb-c.h"

enum { OP_GRANT, OP_ACQUIRE, OP_RELEASE, OP_KEEPALIVE, OP_REVOKE, OP_RANGE };

typedef struct {
  const char *key;
  int64_t lease;
  int64_t token;
} args_t;

typedef struct {
  int done, failed;
  int succeeded;    /* Txn: the compare held */
  int64_t revision; /* acquire won: the key's create_revision (= the Txn's revision) */
  int64_t holder;   /* acquire lost: the holder's create_revision */
  int64_t id, ttl;  /* LeaseGrant / LeaseKeepAlive */
  char err[256];
} reply_t;

typedef struct transport {
  const char *name;
  void *(*open)(uv_loop_t *loop, const char *host, int port, char *err, size_t errlen);
  /* Sends op; the reply arrives on the loop. 0 or -1 (err in out). */
  int (*start)(void *t, int op, const args_t *a, reply_t *out);
  int (*fds)(void *t); /* sockets it opened */
  void (*close)(void *t);
} transport_t;

static uv_loop_t *g_loop;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* ---- growable byte buffer ---------------------------------------------------- */

typedef struct {
  uint8_t *p;
  size_t len, cap;
} buf_t;

static void buf_add(buf_t *b, const void *d, size_t n) {
  if (b->len + n > b->cap) {
    b->cap = (b->len + n) * 2 + 256;
    b->p = realloc(b->p, b->cap);
    if (!b->p) abort();
  }
  memcpy(b->p + b->len, d, n);
  b->len += n;
}

static void buf_consume(buf_t *b, size_t n) {
  memmove(b->p, b->p + n, b->len - n);
  b->len -= n;
}

/* ============================ gRPC over HTTP/2 ================================ */

typedef struct grpc grpc_t;

typedef struct {
  grpc_t *g;
  int32_t id;
  int op;
  reply_t *out;
  buf_t body;      /* gRPC frames not yet handed to nghttp2 */
  size_t body_off; /* of body, handed already */
  int half_close;  /* unary: END_STREAM after the body; a bidi stream stays open */
  buf_t in;        /* DATA received, not yet a whole gRPC message */
  int got;         /* a unary call's reply decoded: done at the stream's close */
  int grpc_status; /* -1 until the trailers say */
  char grpc_message[128];
} gstream_t;

struct grpc {
  uv_tcp_t tcp;
  uv_connect_t connect;
  nghttp2_session *s;
  int connected, broken;
  char authority[64];
  gstream_t unary;     /* one unary call in flight at a time here */
  gstream_t keepalive; /* the LeaseKeepAlive stream, opened on first use */
  buf_t out;
};

static void g_fail(grpc_t *g, const char *why) {
  g->broken = 1;
  gstream_t *sts[] = {&g->unary, &g->keepalive};
  for (int i = 0; i < 2; i++) {
    if (sts[i]->out && !sts[i]->out->done) {
      snprintf(sts[i]->out->err, sizeof sts[i]->out->err, "grpc: %s", why);
      sts[i]->out->failed = sts[i]->out->done = 1;
    }
  }
}

static void g_write_done(uv_write_t *req, int status) {
  if (status < 0) g_fail((grpc_t *)req->data, uv_strerror(status));
  free(req);
}

/* Everything nghttp2 has to send, in one write (HEADERS and DATA of a call
 * leave in one segment). */
static void g_flush(grpc_t *g) {
  g->out.len = 0;
  for (;;) {
    const uint8_t *data;
    ssize_t n = nghttp2_session_mem_send(g->s, &data);
    if (n < 0) return g_fail(g, nghttp2_strerror((int)n));
    if (n == 0) break;
    buf_add(&g->out, data, (size_t)n);
  }
  if (!g->out.len) return;
  uv_buf_t b = uv_buf_init((char *)g->out.p, (unsigned)g->out.len);
  int w = uv_try_write((uv_stream_t *)&g->tcp, &b, 1);
  if (w == (int)g->out.len) return;
  if (w < 0 && w != UV_EAGAIN) return g_fail(g, uv_strerror(w));
  if (w < 0) w = 0;
  uv_write_t *req = malloc(sizeof *req + g->out.len - (size_t)w);
  if (!req) abort();
  char *copy = (char *)(req + 1);
  memcpy(copy, g->out.p + w, g->out.len - (size_t)w);
  req->data = g;
  b = uv_buf_init(copy, (unsigned)(g->out.len - (size_t)w));
  uv_write(req, (uv_stream_t *)&g->tcp, &b, 1, g_write_done);
}

static ssize_t g_read_body(nghttp2_session *s, int32_t sid, uint8_t *buf, size_t length,
                           uint32_t *flags, nghttp2_data_source *src, void *ud) {
  (void)s, (void)sid, (void)ud;
  gstream_t *st = src->ptr;
  size_t left = st->body.len - st->body_off;
  if (left == 0 && !st->half_close) return NGHTTP2_ERR_DEFERRED;
  size_t n = left < length ? left : length;
  memcpy(buf, st->body.p + st->body_off, n);
  st->body_off += n;
  if (st->body_off == st->body.len) {
    st->body.len = st->body_off = 0;
    if (st->half_close) *flags |= NGHTTP2_DATA_FLAG_EOF;
  }
  return (ssize_t)n;
}

/* Decodes one gRPC message of st->op into st->out. */
/* A unary call completes with its stream (the trailers carry grpc-status);
 * a message on the keep-alive stream completes its call at once. */
static void g_got(gstream_t *st) {
  if (st->half_close) {
    st->got = 1;
  } else {
    st->out->done = 1;
  }
}

static void g_message(gstream_t *st, const uint8_t *m, size_t n) {
  reply_t *out = st->out;
  if (!out || out->done) return;
  switch (st->op) {
    case OP_GRANT: {
      Etcdserverpb__LeaseGrantResponse *r = etcdserverpb__lease_grant_response__unpack(NULL, n, m);
      if (!r) break;
      out->id = r->id, out->ttl = r->ttl;
      if (r->error && r->error[0])
        snprintf(out->err, sizeof out->err, "%s", r->error), out->failed = 1;
      etcdserverpb__lease_grant_response__free_unpacked(r, NULL);
      return g_got(st);
    }
    case OP_ACQUIRE:
    case OP_RELEASE: {
      Etcdserverpb__TxnResponse *r = etcdserverpb__txn_response__unpack(NULL, n, m);
      if (!r) break;
      out->succeeded = r->succeeded;
      out->revision = r->header ? r->header->revision : 0;
      if (!r->succeeded && r->n_responses == 1 &&
          r->responses[0]->response_case == ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE &&
          r->responses[0]->response_range->n_kvs == 1) {
        out->holder = r->responses[0]->response_range->kvs[0]->create_revision;
      }
      etcdserverpb__txn_response__free_unpacked(r, NULL);
      return g_got(st);
    }
    case OP_KEEPALIVE: {
      Etcdserverpb__LeaseKeepAliveResponse *r =
          etcdserverpb__lease_keep_alive_response__unpack(NULL, n, m);
      if (!r) break;
      out->id = r->id, out->ttl = r->ttl;
      etcdserverpb__lease_keep_alive_response__free_unpacked(r, NULL);
      return g_got(st);
    }
    case OP_REVOKE:
    case OP_RANGE:
      return g_got(st);
  }
  snprintf(out->err, sizeof out->err, "grpc: undecodable reply (%zu bytes)", n);
  out->failed = out->done = 1;
}

static int g_on_data(nghttp2_session *s, uint8_t flags, int32_t sid, const uint8_t *data,
                     size_t len, void *ud) {
  (void)flags, (void)ud;
  gstream_t *st = nghttp2_session_get_stream_user_data(s, sid);
  if (!st) return 0;
  buf_add(&st->in, data, len);
  while (st->in.len >= 5) { /* 1 byte compressed flag, 4 bytes length, message */
    const uint8_t *p = st->in.p;
    size_t mlen = (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | p[4];
    if (st->in.len < 5 + mlen) break;
    g_message(st, p + 5, mlen);
    buf_consume(&st->in, 5 + mlen);
  }
  return 0;
}

static int g_on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
                       size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                       void *ud) {
  (void)flags, (void)ud;
  gstream_t *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
  if (!st) return 0;
  if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
    st->grpc_status = atoi((const char *)value);
  } else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0) {
    snprintf(st->grpc_message, sizeof st->grpc_message, "%.*s", (int)valuelen, value);
  }
  return 0;
}

static int g_on_close(nghttp2_session *s, int32_t sid, uint32_t code, void *ud) {
  (void)ud;
  gstream_t *st = nghttp2_session_get_stream_user_data(s, sid);
  if (!st) return 0;
  if (st->out && !st->out->done && st->got && st->grpc_status == 0) {
    st->out->done = 1;
  } else if (st->out && !st->out->done) {
    snprintf(st->out->err, sizeof st->out->err,
             "grpc: stream closed (h2 error %u, grpc-status %d %s)", code, st->grpc_status,
             st->grpc_message);
    st->out->failed = st->out->done = 1;
  }
  st->id = 0;
  return 0;
}

static void g_alloc(uv_handle_t *h, size_t size, uv_buf_t *b) {
  (void)h, (void)size;
  static char mem[65536];
  *b = uv_buf_init(mem, sizeof mem);
}

static void g_on_read(uv_stream_t *tcp, ssize_t n, const uv_buf_t *b) {
  grpc_t *g = tcp->data;
  if (n < 0) return g_fail(g, uv_strerror((int)n));
  if (nghttp2_session_mem_recv(g->s, (const uint8_t *)b->base, (size_t)n) < 0)
    return g_fail(g, "bad HTTP/2 input");
  g_flush(g); /* SETTINGS and PING acks, WINDOW_UPDATEs */
}

static void g_on_connect(uv_connect_t *req, int status) {
  grpc_t *g = req->data;
  if (status < 0) return g_fail(g, uv_strerror(status));
  g->connected = 1;
  uv_tcp_nodelay(&g->tcp, 1);
  uv_read_start((uv_stream_t *)&g->tcp, g_alloc, g_on_read);
  g_flush(g); /* the connection preface and SETTINGS */
}

static void *g_open(uv_loop_t *loop, const char *host, int port, char *err, size_t errlen) {
  grpc_t *g = calloc(1, sizeof *g);
  struct sockaddr_in sa;
  if (!g || uv_ip4_addr(host, port, &sa) != 0) {
    snprintf(err, errlen, "bad address %s:%d", host, port);
    free(g);
    return NULL;
  }
  snprintf(g->authority, sizeof g->authority, "%s:%d", host, port);
  nghttp2_session_callbacks *cb;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, g_on_data);
  nghttp2_session_callbacks_set_on_header_callback(cb, g_on_header);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, g_on_close);
  nghttp2_session_client_new(&g->s, cb, g);
  nghttp2_session_callbacks_del(cb);
  nghttp2_submit_settings(g->s, NGHTTP2_FLAG_NONE, NULL, 0);
  uv_tcp_init(loop, &g->tcp);
  g->tcp.data = g;
  g->connect.data = g;
  uv_tcp_connect(&g->connect, &g->tcp, (const struct sockaddr *)&sa, g_on_connect);
  return g;
}

/* Appends message m as one gRPC frame to st's body. */
static void g_frame(gstream_t *st, const ProtobufCMessage *m) {
  size_t n = protobuf_c_message_get_packed_size(m);
  uint8_t hdr[5] = {0, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};
  buf_add(&st->body, hdr, 5);
  if (st->body.len + n > st->body.cap) {
    st->body.cap = st->body.len + n + 256;
    st->body.p = realloc(st->body.p, st->body.cap);
  }
  protobuf_c_message_pack(m, st->body.p + st->body.len);
  st->body.len += n;
}

#define NV(n, v) \
  { (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE }

static int g_submit(grpc_t *g, gstream_t *st, const char *path) {
  nghttp2_nv hdrs[] = {NV(":method", "POST"),
                       NV(":scheme", "http"),
                       NV(":path", path),
                       NV(":authority", g->authority),
                       NV("content-type", "application/grpc"),
                       NV("te", "trailers")};
  nghttp2_data_provider prd = {.source.ptr = st, .read_callback = g_read_body};
  st->g = g;
  st->in.len = 0;
  st->got = 0;
  st->grpc_status = -1;
  st->grpc_message[0] = '\0';
  st->id = nghttp2_submit_request(g->s, NULL, hdrs, sizeof hdrs / sizeof hdrs[0], &prd, st);
  return st->id < 0 ? -1 : 0;
}

static int g_start(void *t, int op, const args_t *a, reply_t *out) {
  grpc_t *g = t;
  if (g->broken) {
    snprintf(out->err, sizeof out->err, "grpc: connection broken");
    return -1;
  }
  ProtobufCBinaryData key = {strlen(a->key), (uint8_t *)a->key};
  gstream_t *st = op == OP_KEEPALIVE ? &g->keepalive : &g->unary;
  st->op = op;
  st->out = out;
  st->body.len = st->body_off = 0;
  const char *path = "/etcdserverpb.KV/Txn";
  switch (op) {
    case OP_GRANT: {
      Etcdserverpb__LeaseGrantRequest r = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
      r.ttl = 60;
      g_frame(st, &r.base);
      path = "/etcdserverpb.Lease/LeaseGrant";
      break;
    }
    case OP_REVOKE: {
      Etcdserverpb__LeaseRevokeRequest r = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
      r.id = a->lease;
      g_frame(st, &r.base);
      path = "/etcdserverpb.Lease/LeaseRevoke";
      break;
    }
    case OP_RANGE: {
      Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
      r.key = key;
      g_frame(st, &r.base);
      path = "/etcdserverpb.KV/Range";
      break;
    }
    case OP_KEEPALIVE: {
      Etcdserverpb__LeaseKeepAliveRequest r = ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;
      r.id = a->lease;
      g_frame(st, &r.base);
      if (st->id > 0) { /* the stream is open: one more message on it */
        nghttp2_session_resume_data(g->s, st->id);
        g_flush(g);
        return 0;
      }
      path = "/etcdserverpb.Lease/LeaseKeepAlive";
      break;
    }
    case OP_ACQUIRE: {
      /* create_revision(key) == 0 ? put key (lease) : range key */
      Etcdserverpb__Compare cmp = ETCDSERVERPB__COMPARE__INIT;
      cmp.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
      cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
      cmp.key = key;
      cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
      cmp.create_revision = 0;
      Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
      put.key = key;
      put.value = (ProtobufCBinaryData){5, (uint8_t *)"owner"};
      put.lease = a->lease;
      Etcdserverpb__RangeRequest range = ETCDSERVERPB__RANGE_REQUEST__INIT;
      range.key = key;
      Etcdserverpb__RequestOp ok = ETCDSERVERPB__REQUEST_OP__INIT,
                              ko = ETCDSERVERPB__REQUEST_OP__INIT;
      ok.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
      ok.request_put = &put;
      ko.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
      ko.request_range = &range;
      Etcdserverpb__Compare *cmps[] = {&cmp};
      Etcdserverpb__RequestOp *oks[] = {&ok}, *kos[] = {&ko};
      Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
      txn.n_compare = 1, txn.compare = cmps;
      txn.n_success = 1, txn.success = oks;
      txn.n_failure = 1, txn.failure = kos;
      g_frame(st, &txn.base);
      break;
    }
    case OP_RELEASE: {
      /* lease(key) == lease && create_revision(key) == token ? delete key */
      Etcdserverpb__Compare c1 = ETCDSERVERPB__COMPARE__INIT, c2 = ETCDSERVERPB__COMPARE__INIT;
      c1.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__LEASE;
      c1.key = key;
      c1.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_LEASE;
      c1.lease = a->lease;
      c2.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
      c2.key = key;
      c2.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
      c2.create_revision = a->token;
      Etcdserverpb__DeleteRangeRequest del = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
      del.key = key;
      Etcdserverpb__RequestOp ok = ETCDSERVERPB__REQUEST_OP__INIT;
      ok.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
      ok.request_delete_range = &del;
      Etcdserverpb__Compare *cmps[] = {&c1, &c2};
      Etcdserverpb__RequestOp *oks[] = {&ok};
      Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
      txn.n_compare = 2, txn.compare = cmps;
      txn.n_success = 1, txn.success = oks;
      g_frame(st, &txn.base);
      break;
    }
  }
  st->half_close = op != OP_KEEPALIVE;
  if (g_submit(g, st, path) != 0) {
    snprintf(out->err, sizeof out->err, "grpc: cannot submit");
    return -1;
  }
  if (g->connected) g_flush(g); /* else the connect callback flushes */
  return 0;
}

static int g_fds(void *t) {
  grpc_t *g = t;
  uv_os_fd_t fd;
  return uv_fileno((uv_handle_t *)&g->tcp, &fd) == 0 ? 1 : 0;
}

static void g_closed(uv_handle_t *h) {
  grpc_t *g = h->data;
  free(g->unary.body.p), free(g->unary.in.p);
  free(g->keepalive.body.p), free(g->keepalive.in.p);
  free(g->out.p);
  free(g);
}

static void g_close(void *t) {
  grpc_t *g = t;
  nghttp2_session_del(g->s);
  uv_close((uv_handle_t *)&g->tcp, g_closed);
}

static const transport_t kGrpc = {"grpc", g_open, g_start, g_fds, g_close};

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
  memset(out, 0, sizeof *out);
  if (tr->start(t, op, a, out) != 0) return -1;
  double deadline = now_us() + 5e6;
  while (!out->done) {
    uv_run(g_loop, UV_RUN_ONCE);
    if (now_us() > deadline) {
      snprintf(out->err, sizeof out->err, "%s: no reply within 5 s", tr->name);
      return -1;
    }
  }
  return out->failed ? -1 : 0;
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
  if (!strcmp(which, "both") || !strcmp(which, "grpc")) b[nb++].tr = &kGrpc;
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
