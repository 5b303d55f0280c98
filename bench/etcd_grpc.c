/* gRPC over HTTP/2 to etcd on a uv loop: see etcd_grpc.h. */
#define _POSIX_C_SOURCE 200809L
#include "etcd_grpc.h"

#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etcd_rpc.pb-c.h"

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* ---- growable byte buffer ---------------------------------------------------- */

void buf_add(buf_t *b, const void *d, size_t n) {
  if (b->len + n > b->cap) {
    b->cap = (b->len + n) * 2 + 256;
    b->p = realloc(b->p, b->cap);
    if (!b->p) abort();
  }
  memcpy(b->p + b->len, d, n);
  b->len += n;
}

void buf_consume(buf_t *b, size_t n) {
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
      r.ttl = a->ttl > 0 ? a->ttl : 60;
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

const transport_t etcd_grpc_transport = {"grpc", g_open, g_start, g_fds, g_close};

int etcd_call(uv_loop_t *loop, const transport_t *tr, void *t, int op, const args_t *a,
              reply_t *out) {
  memset(out, 0, sizeof *out);
  if (tr->start(t, op, a, out) != 0) return -1;
  double deadline = now_us() + 5e6;
  while (!out->done) {
    uv_run(loop, UV_RUN_ONCE);
    if (now_us() > deadline) {
      snprintf(out->err, sizeof out->err, "%s: no reply within 5 s", tr->name);
      return -1;
    }
  }
  return out->failed ? -1 : 0;
}
