/* The raw baseline on etcd (issue 38): the transport Simba's etcd backend
 * uses, gRPC over HTTP/2 (etcd_grpc.c, shared with raw_etcd), driven
 * synchronously on a uv loop of its own, one call in flight:
 *
 *   ping   LeaseKeepAlive of its lease on the open stream (no raft entry)
 *   read   Range of the baseline key (a linearizable read)
 *   write  alternately Simba's acquire Txn (create_revision == 0 -> put with
 *          the lease) and its release Txn (lease and create_revision guard ->
 *          delete), each a raft entry fsynced before the answer (write_pairs)
 *
 * The run's namespace is the URL's prefix (namespace_in_path); the baseline key
 * is "{prefix}-bench/k", outside Simba's "{prefix}/..." ranges. Server-side
 * counts come from etcd's /metrics on the client port (HTTP next to gRPC):
 * grpc_server_msg_received_total over every method, i.e. unary requests plus
 * messages on streams (a keep-alive is one); etcd keeps no per-call server time
 * unless started with --metrics extensive (calls_untimed). A keep-alive of the
 * backend is two of them: LeaseKeepAlive and LeaseTimeToLive(keys) beside it.
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "etcd_grpc.h"
#include "raw_backend.h"

struct raw_conn {
  uv_loop_t loop;
  void *g; /* etcd_grpc_transport's connection */
  char host[64];
  int port;
  char key[300];
  args_t a;
  int held; /* the key is ours: the next write is the release */
};

static int rpc(raw_conn_t *c, int op, reply_t *r, char *err, size_t errlen) {
  if (etcd_call(&c->loop, &etcd_grpc_transport, c->g, op, &c->a, r) == 0) return 0;
  snprintf(err, errlen, "etcd %s:%d: %.150s", c->host, c->port, r->err);
  return -1;
}

static void close_conn(raw_conn_t *c) {
  if (c->g) etcd_grpc_transport.close(c->g);
  uv_run(&c->loop, UV_RUN_DEFAULT); /* the close callbacks */
  uv_loop_close(&c->loop);
  free(c);
}

/* etcd://host:port[,...][/prefix]: the first member, IPv4 (the test servers'). */
static raw_conn_t *etcd_connect(const char *url, char *err, size_t errlen) {
  raw_conn_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  char prefix[200] = "/simba";
  if (sscanf(url, "etcd://%63[^:/,]:%d", c->host, &c->port) != 2) {
    snprintf(err, errlen, "raw baseline: need etcd://IPV4:PORT[/prefix], not %s", url);
    free(c);
    return NULL;
  }
  const char *path = strchr(url + 7, '/');
  if (path && path[1]) snprintf(prefix, sizeof prefix, "%.*s", (int)strcspn(path, "?"), path);
  snprintf(c->key, sizeof c->key, "%s-bench/k", prefix);
  c->a.key = c->key;
  c->a.ttl = 3600; /* outlives the run: nothing renews it between round trips */
  uv_loop_init(&c->loop);
  c->g = etcd_grpc_transport.open(&c->loop, c->host, c->port, err, errlen);
  reply_t r;
  if (!c->g || rpc(c, OP_GRANT, &r, err, errlen) != 0) {
    close_conn(c);
    return NULL;
  }
  c->a.lease = r.id;
  return c;
}

/* Deletes the baseline key and revokes the lease (best effort), then closes. */
static void etcd_disconnect(raw_conn_t *c) {
  if (!c) return;
  reply_t r;
  char err[256];
  if (c->held) rpc(c, OP_RELEASE, &r, err, sizeof err);
  if (c->a.lease) rpc(c, OP_REVOKE, &r, err, sizeof err);
  close_conn(c);
}

static int etcd_prepare(raw_conn_t *c, char *err, size_t errlen) {
  (void)c, (void)err, (void)errlen;
  return 0; /* the lease is granted at connect */
}

static int etcd_round_trip(raw_conn_t *c, int op, char *err, size_t errlen) {
  reply_t r;
  switch (op) {
    case RAW_OP_PING:
      if (rpc(c, OP_KEEPALIVE, &r, err, errlen) != 0) return -1;
      if (r.ttl > 0) return 0;
      snprintf(err, errlen, "etcd: lease %lld expired", (long long)c->a.lease);
      return -1;
    case RAW_OP_READ:
      return rpc(c, OP_RANGE, &r, err, errlen);
    default:
      if (rpc(c, c->held ? OP_RELEASE : OP_ACQUIRE, &r, err, errlen) != 0) return -1;
      if (!r.succeeded) {
        snprintf(err, errlen, "etcd: %s Txn's compare failed", c->held ? "release" : "acquire");
        return -1;
      }
      if (!c->held) c->a.token = r.revision;
      c->held = !c->held;
      return 0;
  }
}

/* GET path from the member's client port; the body, malloc'ed, or NULL. HTTP/1.0:
 * no chunked encoding to split a metrics line. */
static char *http_get(const raw_conn_t *c, const char *path) {
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)c->port);
  if (inet_pton(AF_INET, c->host, &sa.sin_addr) != 1) return NULL;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return NULL;
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char req[256];
  const int n =
      snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: %s:%d\r\n\r\n", path, c->host, c->port);
  buf_t b = {0};
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && write(fd, req, (size_t)n) == n) {
    char chunk[16384];
    ssize_t got;
    while ((got = read(fd, chunk, sizeof chunk)) > 0) buf_add(&b, chunk, (size_t)got);
  }
  close(fd);
  buf_add(&b, "", 1);
  char *body = strstr((char *)b.p, "\r\n\r\n");
  if (strncmp((char *)b.p + 8, " 200", 4) != 0 || !body) {
    free(b.p);
    return NULL;
  }
  memmove(b.p, body + 4, strlen(body + 4) + 1);
  return (char *)b.p;
}

static int etcd_server_calls(raw_conn_t *c, uint64_t *calls, uint64_t *usec, char *err,
                             size_t errlen) {
  char *m = http_get(c, "/metrics");
  if (!m) {
    snprintf(err, errlen, "etcd %s:%d: no answer to GET /metrics", c->host, c->port);
    return -1;
  }
  static const char kName[] = "\ngrpc_server_msg_received_total{";
  double total = 0;
  for (const char *p = strstr(m, kName); p; p = strstr(p + 1, kName)) {
    const char *v = strchr(p + 1, '}');
    if (v) total += strtod(v + 1, NULL);
  }
  free(m);
  *calls = (uint64_t)total;
  *usec = 0;
  return 0;
}

static int64_t etcd_connected_clients(raw_conn_t *c) {
  (void)c;
  return -1; /* etcd has no such metric */
}

static void etcd_describe(raw_conn_t *c, char *version, size_t vlen, char *durability,
                          size_t dlen) {
  char *v = http_get(c, "/version"); /* {"etcdserver":"3.4.23","etcdcluster":"3.4.0"} */
  const char *s = v ? strstr(v, "\"etcdserver\":\"") : NULL;
  snprintf(version, vlen, "etcd %.*s", s ? (int)strcspn(s + 14, "\"") : 1, s ? s + 14 : "?");
  free(v);
  snprintf(durability, dlen, "one member, WAL fsync before each write's answer");
}

const raw_backend_t raw_etcd_backend = {
    .name = "etcd",
    .scheme = "etcd",
    .op_desc = {"LeaseKeepAlive on the open stream (no raft entry)",
                "Range of one key (a linearizable read)",
                "alternately: Simba's acquire Txn (put with the lease), then its release Txn "
                "(guarded delete), each a durable raft entry"},
    .op_label = {"raw keep-alive", "raw Range (read)", "raw acquire|release Txn"},
    .calls_desc =
        "/metrics: grpc_server_msg_received_total over every method (unary requests "
        "and stream messages); no server time",
    .namespace_fmt = "simba-bench-%ld",
    .namespace_in_path = 1,
    .write_pairs = 1,
    .counts_lag_ms = 0, /* the counters move at once */
    .calls_untimed = 1,
    .calls_per_keep_alive = 2, /* LeaseKeepAlive + LeaseTimeToLive(keys), ADR 0045 */
    .connect = etcd_connect,
    .disconnect = etcd_disconnect,
    .prepare = etcd_prepare,
    .round_trip = etcd_round_trip,
    .server_calls = etcd_server_calls,
    .connected_clients = etcd_connected_clients,
    .describe = etcd_describe,
    .set_durability = NULL, /* etcd has no switch for its fsync but --unsafe-no-fsync at start */
};
