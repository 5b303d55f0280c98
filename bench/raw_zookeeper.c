/* The raw baseline on ZooKeeper: the plain single-threaded C client
 * (libzookeeper_st), driven synchronously with poll(), one request in flight.
 *
 *   ping   exists on a node                          (a read)
 *   read   get of a small node                       (a read)
 *   write  create of an ephemeral node, then (next call) its delete: each one
 *          durable write (the server fsyncs its transaction log before it
 *          answers, forceSync=yes by default); write_pairs: a baseline sample
 *          is the mean of one create + delete, so two raw round trips are the
 *          raw create+delete that one Simba acquire+release (two multis) is
 *          compared with
 *
 * The run's namespace is the URL's chroot (namespace_in_path: the bench adds
 * "/simba-bench-<pid>" when the URL has none). Its nodes live under
 * "{chroot}-bench" so they never meet Simba's; disconnect() removes them.
 * Server-side counts come from the `srvr` four-letter word (whitelisted by the
 * test servers): "Received" packets (requests and pings of every connection,
 * counted at once) and "Connections"; ZooKeeper does not say how much server
 * time they took (calls_untimed).
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zookeeper/zookeeper.h>

#include "raw_backend.h"

struct raw_conn {
  zhandle_t *zh;
  char hosts[512]; /* "host:port,..." */
  char host[256];  /* the first host, for the four-letter words */
  int port;
  char base[256];      /* "{chroot}-bench" */
  char node[300];      /* base + "/n": the node "write" creates and deletes */
  int node_exists;     /* whether the next write is a delete */
  int64_t last_use_ms; /* nobody pings the session between round trips */
};

typedef struct {
  int done;
  int rc;
} result_t;

static void watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
  (void)zh, (void)type, (void)state, (void)path, (void)ctx;
}

static void void_done(int rc, const void *data) {
  result_t *r = (result_t *)data;
  r->rc = rc;
  r->done = 1;
}
static void stat_done(int rc, const struct Stat *st, const void *data) {
  (void)st;
  void_done(rc, data);
}
static void data_done(int rc, const char *v, int len, const struct Stat *st, const void *data) {
  (void)v, (void)len, (void)st;
  void_done(rc, data);
}
static void string_done(int rc, const char *v, const void *data) {
  (void)v;
  void_done(rc, data);
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Drives the client until *done (or the handle is connected when done is
 * NULL), at most timeout_ms. 0 or -1. */
static int drive(raw_conn_t *c, const int *done, int timeout_ms) {
  const int64_t until = now_ms() + timeout_ms;
  for (;;) {
    if (done ? *done : zoo_state(c->zh) == ZOO_CONNECTED_STATE) return 0;
    if (now_ms() >= until) return -1;
    int fd = -1, interest = 0;
    struct timeval tv = {0, 0};
    if (zookeeper_interest(c->zh, &fd, &interest, &tv) != ZOK) fd = -1;
    struct pollfd p = {fd, 0, 0};
    if (interest & ZOOKEEPER_READ) p.events |= POLLIN;
    if (interest & ZOOKEEPER_WRITE) p.events |= POLLOUT;
    int wait = (int)(tv.tv_sec * 1000 + tv.tv_usec / 1000);
    if (wait > 50) wait = 50;
    int events = 0;
    if (fd >= 0) {
      if (poll(&p, 1, wait) > 0) {
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) events |= ZOOKEEPER_READ;
        if (p.revents & (POLLOUT | POLLHUP | POLLERR)) events |= ZOOKEEPER_WRITE;
      }
    } else {
      const struct timespec ts = {0, (long)wait * 1000000L};
      nanosleep(&ts, NULL);
    }
    zookeeper_process(c->zh, events);
  }
}

/* A new session when there is none (first use, or expired while the bench did
 * other things: nobody drives this handle between round trips). */
static int ensure_session(raw_conn_t *c, char *err, size_t errlen) {
  const int64_t now = now_ms();
  const int64_t idle = now - c->last_use_ms;
  c->last_use_ms = now;
  if (c->zh) {
    const int st = zoo_state(c->zh);
    if (idle < 20000 && st != ZOO_EXPIRED_SESSION_STATE && st != ZOO_AUTH_FAILED_STATE) return 0;
    zookeeper_close(c->zh);
    c->zh = NULL;
    c->node_exists = 0;
  }
  zoo_set_debug_level((ZooLogLevel)0);
  c->zh = zookeeper_init(c->hosts, watcher, 30000, NULL, NULL, 0);
  if (!c->zh || drive(c, NULL, 10000) != 0) {
    snprintf(err, errlen, "zookeeper %s: cannot connect", c->hosts);
    return -1;
  }
  return 0;
}

static raw_conn_t *zk_connect(const char *url, char *err, size_t errlen) {
  if (strncmp(url, "zookeeper://", 12) != 0) {
    snprintf(err, errlen, "not a zookeeper:// URL");
    return NULL;
  }
  raw_conn_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", url + 12);
  char *q = strchr(buf, '?');
  if (q) *q = '\0'; /* the bench's server has no auth */
  char *path = strchr(buf, '/');
  const char *chroot = "/simba";
  if (path) {
    if (path[1]) chroot = path;
    char tmp[200];
    snprintf(tmp, sizeof tmp, "%s", chroot);
    *path = '\0';
    snprintf(c->base, sizeof c->base, "%s-bench", tmp);
  } else {
    snprintf(c->base, sizeof c->base, "%s-bench", chroot);
  }
  snprintf(c->node, sizeof c->node, "%s/n", c->base);
  /* Hosts with default ports; the first one for the four-letter words. */
  c->hosts[0] = '\0';
  for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    char host[256];
    int port = 2181;
    snprintf(host, sizeof host, "%s", tok);
    char *colon = strrchr(host, ':');
    if (colon && !strchr(colon, ']')) {
      *colon = '\0';
      port = atoi(colon + 1);
    }
    if (!c->host[0]) {
      snprintf(c->host, sizeof c->host, "%s", host);
      c->port = port;
    }
    size_t used = strlen(c->hosts);
    snprintf(c->hosts + used, sizeof c->hosts - used, "%s%s:%d", used ? "," : "", host, port);
  }
  if (!c->host[0] || ensure_session(c, err, errlen) != 0) {
    if (c->zh) zookeeper_close(c->zh);
    free(c);
    return NULL;
  }
  return c;
}

static int finish(raw_conn_t *c, int rc, result_t *r, const char *what, char *err, size_t errlen,
                  int ok2) {
  if (rc == ZOK && drive(c, &r->done, 10000) != 0) rc = ZOPERATIONTIMEOUT;
  if (rc == ZOK) rc = r->rc;
  if (rc != ZOK && rc != ok2) {
    snprintf(err, errlen, "zookeeper %s: %s", what, zerror(rc));
    return -1;
  }
  return 0;
}

/* Removes the nodes of this connection (best effort), then closes it. */
static void zk_disconnect(raw_conn_t *c) {
  if (!c) return;
  char err[256];
  if (c->zh && ensure_session(c, err, sizeof err) == 0) {
    if (c->node_exists) {
      result_t r = {0, 0};
      finish(c, zoo_adelete(c->zh, c->node, -1, void_done, &r), &r, "delete", err, sizeof err,
             ZNONODE);
    }
    result_t r = {0, 0};
    finish(c, zoo_adelete(c->zh, c->base, -1, void_done, &r), &r, "delete", err, sizeof err,
           ZNONODE);
  }
  if (c->zh) zookeeper_close(c->zh);
  free(c);
}

static int zk_prepare(raw_conn_t *c, char *err, size_t errlen) {
  result_t r = {0, 0};
  int rc = zoo_acreate(c->zh, c->base, "bench", 5, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT,
                       string_done, &r);
  return finish(c, rc, &r, "create", err, errlen, ZNODEEXISTS);
}

static int zk_round_trip(raw_conn_t *c, int op, char *err, size_t errlen) {
  if (ensure_session(c, err, errlen) != 0) return -1;
  result_t r = {0, 0};
  int rc;
  switch (op) {
    case RAW_OP_PING:
      rc = zoo_aexists(c->zh, c->base, 0, stat_done, &r);
      return finish(c, rc, &r, "exists", err, errlen, ZOK);
    case RAW_OP_READ:
      rc = zoo_aget(c->zh, c->base, 0, data_done, &r);
      return finish(c, rc, &r, "get", err, errlen, ZOK);
    default:
      if (c->node_exists) {
        rc = zoo_adelete(c->zh, c->node, -1, void_done, &r);
        c->node_exists = 0;
        return finish(c, rc, &r, "delete", err, errlen, ZNONODE);
      }
      rc =
          zoo_acreate(c->zh, c->node, "x", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, string_done, &r);
      c->node_exists = 1;
      return finish(c, rc, &r, "create", err, errlen, ZNODEEXISTS);
  }
}

/* The answer of a four-letter word; 0 or -1. */
static int four_letter(raw_conn_t *c, const char *word, char *out, size_t outlen) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)c->port);
  if (inet_pton(AF_INET, c->host, &a.sin_addr) != 1) return -1;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct timeval tv = {2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  size_t used = 0;
  if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      write(fd, word, strlen(word)) == (ssize_t)strlen(word)) {
    ssize_t n;
    while (used + 1 < outlen && (n = read(fd, out + used, outlen - 1 - used)) > 0) {
      used += (size_t)n;
    }
  }
  close(fd);
  out[used] = '\0';
  return used ? 0 : -1;
}

static int64_t srvr_field(raw_conn_t *c, const char *field, char *text, size_t textlen) {
  char buf[2048];
  if (four_letter(c, "srvr", buf, sizeof buf) != 0) return -1;
  const char *p = strstr(buf, field);
  if (!p) return -1;
  p += strlen(field);
  if (text) {
    size_t n = strcspn(p, "\n");
    if (n >= textlen) n = textlen - 1;
    memcpy(text, p, n);
    text[n] = '\0';
  }
  return strtoll(p, NULL, 10);
}

static int zk_server_calls(raw_conn_t *c, uint64_t *calls, uint64_t *usec, char *err,
                           size_t errlen) {
  const int64_t received = srvr_field(c, "Received: ", NULL, 0);
  if (received < 0) {
    snprintf(err, errlen, "zookeeper: no answer to srvr (is it in 4lw.commands.whitelist?)");
    return -1;
  }
  *calls = (uint64_t)received;
  *usec = 0; /* not reported by ZooKeeper */
  return 0;
}

static int64_t zk_connected_clients(raw_conn_t *c) {
  return srvr_field(c, "Connections: ", NULL, 0);
}

static void zk_describe(raw_conn_t *c, char *version, size_t vlen, char *durability, size_t dlen) {
  char v[128] = "?";
  srvr_field(c, "Zookeeper version: ", v, sizeof v);
  v[strcspn(v, ",")] = '\0';
  char *unexpanded = strstr(v, "-${"); /* Debian's: "3.8.0-${mvngit.commit.id}" */
  if (unexpanded) *unexpanded = '\0';
  snprintf(version, vlen, "zookeeper %s", v);
  snprintf(durability, dlen, "standalone, txn log fsync per write (forceSync=yes)");
}

const raw_backend_t raw_zookeeper_backend = {
    .name = "zookeeper",
    .scheme = "zookeeper",
    .op_desc = {"exists of a node (a read)", "get of a small node (a read)",
                "alternately: create of an ephemeral node, then its delete (each a durable "
                "write)"},
    .op_label = {"raw exists", "raw get (read)", "raw create|delete"},
    .calls_desc =
        "srvr four-letter word: Received packets (requests and pings of every "
        "connection); no server time",
    .namespace_fmt = "simba-bench-%ld",
    .namespace_in_path = 1,
    .write_pairs = 1,
    .counts_lag_ms = 0, /* Received counts at once */
    .calls_untimed = 1,
    .connect = zk_connect,
    .disconnect = zk_disconnect,
    .prepare = zk_prepare,
    .round_trip = zk_round_trip,
    .server_calls = zk_server_calls,
    .connected_clients = zk_connected_clients,
    .describe = zk_describe,
    .set_durability = NULL, /* forceSync is in zoo.cfg: a restart would change it */
};
