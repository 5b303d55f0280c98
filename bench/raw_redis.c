/* The raw baseline on Redis: plain hiredis, synchronous, one command in flight.
 *
 *   ping   PING
 *   read   EVALSHA of a script doing one HGET         (no write, so no fsync)
 *   write  EVALSHA of a script doing HGET then HSET   (a write: with
 *          appendfsync always, Redis fsyncs its AOF before it answers)
 *
 * "write" has the shape of Simba's own scripts (acquire: PTTL, HGET, HINCRBY,
 * HSET, SADD; release: HMGET, HDEL, SREM, PUBLISH): one EVALSHA that reads a
 * lease hash and writes it, so one durable round trip. Its keys live under
 * "{prefix}:bench:" so they never meet Simba's.
 */
#define _POSIX_C_SOURCE 200809L
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raw_backend.h"

struct raw_conn {
  redisContext *ctx;
  char prefix[80];
  char sha_read[48];
  char sha_write[48];
  char key[160];
};

static const char kReadScript[] = "return redis.call('HGET', KEYS[1], 'token')";
static const char kWriteScript[] =
    "local t = tonumber(redis.call('HGET', KEYS[1], 'token') or '0')\n"
    "redis.call('HSET', KEYS[1], 'token', t + 1)\n"
    "return t + 1";

/* redis://[user:pass@]host[:port][/db][?prefix=P]: host, port, db, auth, prefix. */
typedef struct {
  char host[256];
  int port;
  int db;
  char user[128], pass[128];
  char prefix[80];
} redis_url_t;

/* Copies at most len - 1 bytes of src, always terminated. */
static void copy(char *dst, size_t len, const char *src) {
  size_t n = strlen(src);
  if (n >= len) n = len - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* Percent-decoding of the user and password. */
static void unescape(char *s) {
  char *w = s;
  for (char *r = s; *r; r++) {
    if (r[0] == '%' && r[1] && r[2]) {
      char hex[3] = {r[1], r[2], 0};
      *w++ = (char)strtol(hex, NULL, 16);
      r += 2;
    } else {
      *w++ = *r;
    }
  }
  *w = '\0';
}

static int parse_url(const char *url, redis_url_t *u, char *err, size_t errlen) {
  memset(u, 0, sizeof *u);
  u->port = 6379;
  snprintf(u->prefix, sizeof u->prefix, "simba");
  if (strncmp(url, "redis://", 8) != 0) {
    snprintf(err, errlen, "not a redis:// URL");
    return -1;
  }
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", url + 8);
  char *query = strchr(buf, '?');
  if (query) {
    *query++ = '\0';
    for (char *tok = strtok(query, "&"); tok; tok = strtok(NULL, "&")) {
      if (strncmp(tok, "prefix=", 7) == 0) copy(u->prefix, sizeof u->prefix, tok + 7);
    }
  }
  char *path = strchr(buf, '/');
  if (path) {
    *path++ = '\0';
    if (*path) u->db = atoi(path);
  }
  char *hostport = buf;
  char *at = strrchr(buf, '@');
  if (at) {
    *at = '\0';
    hostport = at + 1;
    char *colon = strchr(buf, ':');
    if (colon) {
      *colon = '\0';
      copy(u->pass, sizeof u->pass, colon + 1);
    }
    copy(u->user, sizeof u->user, buf);
    unescape(u->user);
    unescape(u->pass);
  }
  if (hostport[0] == '[') {
    char *end = strchr(hostport, ']');
    if (!end) {
      snprintf(err, errlen, "bad IPv6 host");
      return -1;
    }
    *end = '\0';
    copy(u->host, sizeof u->host, hostport + 1);
    if (end[1] == ':') u->port = atoi(end + 2);
  } else {
    char *colon = strrchr(hostport, ':');
    if (colon) {
      *colon = '\0';
      u->port = atoi(colon + 1);
    }
    copy(u->host, sizeof u->host, hostport);
  }
  if (!u->host[0]) {
    snprintf(err, errlen, "no host in the URL");
    return -1;
  }
  return 0;
}

/* Runs a command; returns its reply (caller frees) or NULL with err set. An
 * error reply also counts as a failure. */
static redisReply *command(raw_conn_t *c, char *err, size_t errlen, int argc, const char **argv) {
  redisReply *r = redisCommandArgv(c->ctx, argc, argv, NULL);
  if (!r) {
    snprintf(err, errlen, "redis: %s", c->ctx->errstr[0] ? c->ctx->errstr : "no reply");
    return NULL;
  }
  if (r->type == REDIS_REPLY_ERROR) {
    snprintf(err, errlen, "redis %s: %s", argv[0], r->str);
    freeReplyObject(r);
    return NULL;
  }
  return r;
}

static raw_conn_t *redis_connect(const char *url, char *err, size_t errlen) {
  redis_url_t u;
  if (parse_url(url, &u, err, errlen) != 0) return NULL;
  raw_conn_t *c = calloc(1, sizeof *c);
  if (!c) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  struct timeval tv = {5, 0};
  c->ctx = redisConnectWithTimeout(u.host, u.port, tv);
  if (!c->ctx || c->ctx->err) {
    snprintf(err, errlen, "cannot connect to %s:%d: %s", u.host, u.port,
             c->ctx ? c->ctx->errstr : "out of memory");
    if (c->ctx) redisFree(c->ctx);
    free(c);
    return NULL;
  }
  redisSetTimeout(c->ctx, tv);
  snprintf(c->prefix, sizeof c->prefix, "%s", u.prefix);
  redisReply *r = NULL;
  if (u.pass[0]) {
    const char *a2[] = {"AUTH", u.pass};
    const char *a3[] = {"AUTH", u.user, u.pass};
    r = u.user[0] ? command(c, err, errlen, 3, a3) : command(c, err, errlen, 2, a2);
    if (!r) goto fail;
    freeReplyObject(r);
  }
  if (u.db) {
    char db[16];
    snprintf(db, sizeof db, "%d", u.db);
    const char *argv[] = {"SELECT", db};
    if (!(r = command(c, err, errlen, 2, argv))) goto fail;
    freeReplyObject(r);
  }
  return c;
fail:
  redisFree(c->ctx);
  free(c);
  return NULL;
}

static void redis_disconnect(raw_conn_t *c) {
  if (!c) return;
  redisFree(c->ctx);
  free(c);
}

static int load(raw_conn_t *c, const char *body, char *sha, size_t shalen, char *err,
                size_t errlen) {
  const char *argv[] = {"SCRIPT", "LOAD", body};
  redisReply *r = command(c, err, errlen, 3, argv);
  if (!r) return -1;
  snprintf(sha, shalen, "%s", r->str ? r->str : "");
  freeReplyObject(r);
  return 0;
}

static int redis_prepare(raw_conn_t *c, char *err, size_t errlen) {
  snprintf(c->key, sizeof c->key, "%s:bench:lease", c->prefix);
  if (load(c, kReadScript, c->sha_read, sizeof c->sha_read, err, errlen) != 0) return -1;
  if (load(c, kWriteScript, c->sha_write, sizeof c->sha_write, err, errlen) != 0) return -1;
  const char *argv[] = {"HSET", c->key, "token", "0", "session", "bench"};
  redisReply *r = command(c, err, errlen, 6, argv);
  if (!r) return -1;
  freeReplyObject(r);
  return 0;
}

static int redis_round_trip(raw_conn_t *c, int op, char *err, size_t errlen) {
  redisReply *r = NULL;
  if (op == RAW_OP_PING) {
    const char *argv[] = {"PING"};
    r = command(c, err, errlen, 1, argv);
  } else {
    const char *argv[] = {"EVALSHA", op == RAW_OP_READ ? c->sha_read : c->sha_write, "1", c->key};
    r = command(c, err, errlen, 4, argv);
  }
  if (!r) return -1;
  freeReplyObject(r);
  return 0;
}

/* "cmdstat_evalsha:calls=N,usec=U,..." from INFO commandstats. */
static int redis_server_calls(raw_conn_t *c, uint64_t *calls, uint64_t *usec, char *err,
                              size_t errlen) {
  const char *argv[] = {"INFO", "commandstats"};
  redisReply *r = command(c, err, errlen, 2, argv);
  if (!r) return -1;
  *calls = 0;
  *usec = 0;
  const char *line = r->str ? strstr(r->str, "cmdstat_evalsha:") : NULL;
  if (line) {
    const char *p = strstr(line, "calls=");
    const char *q = strstr(line, "usec=");
    if (p) *calls = strtoull(p + 6, NULL, 10);
    if (q) *usec = strtoull(q + 5, NULL, 10);
  }
  freeReplyObject(r);
  return 0;
}

static int64_t info_field(raw_conn_t *c, const char *section, const char *field, char *out,
                          size_t outlen) {
  char err[256];
  const char *argv[] = {"INFO", section};
  redisReply *r = command(c, err, sizeof err, 2, argv);
  if (!r) return -1;
  int64_t v = -1;
  char pat[96];
  snprintf(pat, sizeof pat, "\r\n%s:", field);
  const char *p = r->str ? strstr(r->str, pat) : NULL;
  if (p) {
    p += strlen(pat);
    v = strtoll(p, NULL, 10);
    if (out) {
      size_t n = strcspn(p, "\r\n");
      if (n >= outlen) n = outlen - 1;
      memcpy(out, p, n);
      out[n] = '\0';
    }
  }
  freeReplyObject(r);
  return v;
}

static int64_t redis_connected_clients(raw_conn_t *c) {
  return info_field(c, "clients", "connected_clients", NULL, 0);
}

static void config_get(raw_conn_t *c, const char *key, char *out, size_t outlen) {
  char err[256];
  const char *argv[] = {"CONFIG", "GET", key};
  redisReply *r = command(c, err, sizeof err, 3, argv);
  snprintf(out, outlen, "?");
  if (!r) return;
  if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->str) {
    snprintf(out, outlen, "%s", r->element[1]->str);
  }
  freeReplyObject(r);
}

static void redis_describe(raw_conn_t *c, char *version, size_t vlen, char *durability,
                           size_t dlen) {
  char v[64] = "?";
  info_field(c, "server", "redis_version", v, sizeof v);
  snprintf(version, vlen, "redis %s", v);
  char aof[16], fsync[16];
  config_get(c, "appendonly", aof, sizeof aof);
  config_get(c, "appendfsync", fsync, sizeof fsync);
  if (strcmp(aof, "yes") == 0) {
    snprintf(durability, dlen, "appendonly yes, appendfsync %s", fsync);
  } else {
    snprintf(durability, dlen, "appendonly %s (no AOF)", aof);
  }
}

static int redis_set_durability(raw_conn_t *c, const char *value, char *previous, size_t plen,
                                char *err, size_t errlen) {
  config_get(c, "appendfsync", previous, plen);
  const char *argv[] = {"CONFIG", "SET", "appendfsync", value};
  redisReply *r = command(c, err, errlen, 4, argv);
  if (!r) return -1;
  freeReplyObject(r);
  return 0;
}

const raw_backend_t raw_redis_backend = {
    .name = "redis",
    .scheme = "redis",
    .op_desc = {"PING", "EVALSHA of a script doing HGET (no write)",
                "EVALSHA of a script doing HGET + HSET (a write)"},
    .op_label = {"raw PING", "raw EVALSHA, HGET (read)", "raw EVALSHA, HGET+HSET"},
    .calls_desc = "INFO commandstats: cmdstat_evalsha calls and usec",
    .namespace_param = "prefix",
    .namespace_fmt = "simba-bench-%ld",
    .connect = redis_connect,
    .disconnect = redis_disconnect,
    .prepare = redis_prepare,
    .round_trip = redis_round_trip,
    .server_calls = redis_server_calls,
    .connected_clients = redis_connected_clients,
    .describe = redis_describe,
    .set_durability = redis_set_durability,
};
