/* The gRPC transport of the etcd benchmarks (issue 38, ADR 0044): gRPC over
 * HTTP/2 (libnghttp2 on a uv_tcp_t) with protobuf-c messages, one connection,
 * a unary call per stream, LeaseKeepAlive as one bidirectional stream kept open.
 * Shared by raw_etcd.c (the transports side by side) and raw_etcd_baseline.c
 * (simba_bench's raw baseline on etcd://), so that both send the same bytes
 * Simba's acquire and release send. */
#ifndef SIMBA_BENCH_ETCD_GRPC_H
#define SIMBA_BENCH_ETCD_GRPC_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

enum { OP_GRANT, OP_ACQUIRE, OP_RELEASE, OP_KEEPALIVE, OP_REVOKE, OP_RANGE };

typedef struct {
  const char *key;
  int64_t lease;
  int64_t token;
  int64_t ttl; /* LeaseGrant, in seconds; 0: 60 */
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

typedef struct {
  uint8_t *p;
  size_t len, cap;
} buf_t;

void buf_add(buf_t *b, const void *d, size_t n);
void buf_consume(buf_t *b, size_t n);

/* gRPC over HTTP/2. */
extern const transport_t etcd_grpc_transport;

/* Starts op on t and runs loop until its reply (at most 5 s). 0 or -1 (err in out). */
int etcd_call(uv_loop_t *loop, const transport_t *tr, void *t, int op, const args_t *a,
              reply_t *out);

#endif
