/* The raw baseline of a backend: the same server Simba talks to, driven by the
 * backend's own client library synchronously, one request in flight. Every
 * Simba figure is reported as a multiple of the round trip measured here, in
 * the same run.
 *
 * One table per backend; the program picks it by the scheme of the Simba URL.
 * Redis (plain hiredis) is raw_redis.c, ZooKeeper (the plain single-threaded C
 * client) raw_zookeeper.c. A PostgreSQL column later is a
 * raw_postgres.c with libpq giving the same operations: "ping" = `select 1`,
 * "read" = a single-row SELECT, "write" = a single-row UPDATE ... RETURNING (the
 * shape of Simba's acquire), server_calls = pg_stat_statements over Simba's
 * statements, durability = synchronous_commit.
 */
#ifndef SIMBA_BENCH_RAW_BACKEND_H
#define SIMBA_BENCH_RAW_BACKEND_H

#include <stddef.h>
#include <stdint.h>

typedef struct raw_conn raw_conn_t; /* one connection; opaque, per backend */

/* Round-trip kinds every backend offers. RAW_OP_WRITE is the baseline: one
 * request doing the work of one Simba operation (read a lease record and
 * write it back), durably as the server is configured. */
enum { RAW_OP_PING = 0, RAW_OP_READ = 1, RAW_OP_WRITE = 2, RAW_OP_COUNT = 3 };

typedef struct raw_backend {
  const char *name;   /* "redis" */
  const char *scheme; /* URL scheme it serves: "redis" */
  const char *op_desc[RAW_OP_COUNT]; /* what each round trip is, for the report */

  /* Connects to the server of a Simba URL of this scheme. NULL on failure,
   * with the reason in err. */
  raw_conn_t *(*connect)(const char *url, char *err, size_t errlen);
  void (*disconnect)(raw_conn_t *c);
  /* Creates what the round trips need (loads scripts, creates rows). 0 or -1. */
  int (*prepare)(raw_conn_t *c, char *err, size_t errlen);
  /* One synchronous round trip of kind op. 0 or -1. */
  int (*round_trip)(raw_conn_t *c, int op, char *err, size_t errlen);

  /* Server-side count of the calls Simba makes (its operations, not this
   * connection's statistics queries): total calls and total server time in
   * microseconds. 0 or -1. */
  int (*server_calls)(raw_conn_t *c, uint64_t *calls, uint64_t *usec, char *err, size_t errlen);
  /* Number of client connections the server has now (ours included); -1 if unknown. */
  int64_t (*connected_clients)(raw_conn_t *c);
  /* Server version and durability setting, for the report. */
  void (*describe)(raw_conn_t *c, char *version, size_t vlen, char *durability, size_t dlen);
  /* Changes the durability setting (Redis: appendfsync) until changed back,
   * giving the previous value; NULL if the backend cannot. 0 or -1. */
  int (*set_durability)(raw_conn_t *c, const char *value, char *previous, size_t plen, char *err,
                        size_t errlen);
} raw_backend_t;

/* One per backend; simba_bench.c lists them in its table of raw backends. */
extern const raw_backend_t raw_redis_backend;
#ifdef SIMBA_BENCH_ZOOKEEPER
extern const raw_backend_t raw_zookeeper_backend; /* raw_zookeeper.c */
#endif

#endif
