/* The raw baseline of a backend: the same server Simba talks to, driven by the
 * backend's own client library synchronously, one request in flight. Every
 * Simba figure is reported as a multiple of the round trip measured here, in
 * the same run.
 *
 * One table per backend; the program picks it by the scheme of the Simba URL
 * (kRawBackends in simba_bench.c). raw_redis.c is plain hiredis, raw_postgres.c
 * plain libpq, raw_zookeeper.c the plain single-threaded ZooKeeper C client
 * (libzookeeper_st), raw_etcd_baseline.c gRPC over HTTP/2 (etcd_grpc.c). A new backend is a
 * raw_<name>.c defining one table (designated initializers: the fields it leaves out are 0/NULL,
 * which is always the plain behaviour), a line in kRawBackends and a block in bench/CMakeLists.txt.
 */
#ifndef SIMBA_BENCH_RAW_BACKEND_H
#define SIMBA_BENCH_RAW_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "bench_util.h"

typedef struct raw_conn raw_conn_t; /* one connection; opaque, per backend */

/* Round-trip kinds every backend offers. RAW_OP_WRITE is the baseline: one
 * request doing the work of one Simba operation (read a lease record and
 * write it back), durably as the server is configured. */
enum { RAW_OP_PING = 0, RAW_OP_READ = 1, RAW_OP_WRITE = 2, RAW_OP_COUNT = 3 };

typedef struct raw_backend {
  const char *name;                   /* "redis" */
  const char *scheme;                 /* URL scheme it serves: "redis" */
  const char *alt_scheme;             /* another spelling of it ("postgres"), or NULL */
  const char *op_desc[RAW_OP_COUNT];  /* what each round trip is, for the JSON */
  const char *op_label[RAW_OP_COUNT]; /* the same in a few words, for the table */
  const char *calls_desc;             /* what server_calls counts, and how */

  /* The URL parameter that gives a run a namespace of its own on a shared
   * server, and its value, a format taking the bench's pid as a long:
   * "prefix", "simba-bench-%ld". The bench adds it when the URL has none.
   * NULL: the backend has none (unless namespace_in_path). */
  const char *namespace_param;
  const char *namespace_fmt;
  /* Nonzero: the namespace is the URL's path instead of a parameter
   * (ZooKeeper's chroot): "/" + namespace_fmt is added when the URL has no
   * path, or only "/". */
  int namespace_in_path;

  /* Nonzero: RAW_OP_WRITE alternates two requests (Simba's acquire, then its
   * release), and a baseline sample is the mean of one such pair, so that
   * "two raw round trips" is exactly one raw acquire plus one raw release. */
  int write_pairs;
  /* How long the server may keep another connection's calls out of
   * server_calls before publishing them, in batches that each include every
   * earlier call (PostgreSQL's cumulative statistics: 1000); 0 when they count
   * at once. The keep-alive window then starts and ends on observed changes
   * of the count rather than on the clock. */
  int counts_lag_ms;
  /* Nonzero: server_calls counts calls but cannot tell the server time they
   * took (ZooKeeper); its usec is ignored and every "inside the server"
   * figure is reported as unknown (null in the JSON). */
  int calls_untimed;
  /* Server calls one keep-alive makes, 0 meaning 1 (etcd: 2, a LeaseKeepAlive
   * stream message with a LeaseTimeToLive sent beside it, ADR 0045). The
   * keep-alive target is one keep-alive, so this many calls, per interval. */
  int calls_per_keep_alive;

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
   * microseconds (0 with calls_untimed). 0 or -1. */
  int (*server_calls)(raw_conn_t *c, uint64_t *calls, uint64_t *usec, char *err, size_t errlen);
  /* Number of client connections the server has now (ours included); -1 if unknown. */
  int64_t (*connected_clients)(raw_conn_t *c);
  /* Server version and durability setting, for the report. */
  void (*describe)(raw_conn_t *c, char *version, size_t vlen, char *durability, size_t dlen);
  /* Changes the durability setting (Redis: appendfsync) until changed back,
   * giving the previous value; NULL if the backend cannot. 0 or -1. */
  int (*set_durability)(raw_conn_t *c, const char *value, char *previous, size_t plen, char *err,
                        size_t errlen);

  /* Optional: the server's own lock, as an application would use it without
   * Simba (PostgreSQL: session advisory locks), measured in the same run as
   * Simba's lock cycle and handover. NULL when the backend has none. */
  const char *native_lock_desc;
  /* One lock and one unlock on c (two round trips). 0 or -1. */
  int (*native_lock_cycle)(raw_conn_t *c, char *err, size_t errlen);
  /* n handovers of the native lock between two processes of their own, each
   * with its connection to the server of url: the holder waits until the
   * other one is blocked in its lock call, idles gap_ms (as between two Simba
   * handovers), then unlocks; a sample (pushed to out) is the time from just
   * before the holder's unlock call to the other's blocking lock call
   * returning. Call it before this process has any thread (fork). 0 or -1. */
  int (*native_handover)(const char *url, int n, int gap_ms, bench_samples_t *out, char *err,
                         size_t errlen);
} raw_backend_t;

/* One per backend; simba_bench.c lists those built (SIMBA_BENCH_RAW_<NAME>). */
extern const raw_backend_t raw_redis_backend;
extern const raw_backend_t raw_postgres_backend;
extern const raw_backend_t raw_zookeeper_backend;
extern const raw_backend_t raw_etcd_backend;

#endif
