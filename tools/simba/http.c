/* simba run --listen ADDR: GET /healthz, /leader and /metrics over HTTP, on
 * libmicrohttpd's own threads (one per connection, so a slow or stuck client
 * holds only its own). Handlers only read state that other threads keep up to
 * date, under one mutex, and call the library's non-blocking functions:
 *   - the term this process holds, set by run.c (validity from the local clock);
 *   - the holder of the name, followed by an observer (for followers' answers);
 *   - the last time the client's loop answered, from a watchdog thread that
 *     takes a snapshot every second (a snapshot runs on the loop).
 * Only /metrics calls into the client's loop (simba_client_metrics_text). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#ifdef SIMBA_CLI_WITH_MICROHTTPD

#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "json.h"

enum {
  kWatchdogIntervalMs = 1000, /* how often the watchdog takes a snapshot */
  kLoopStaleMs = 3000,        /* /healthz fails when the last one is older */
  kConnectionLimit = 32,      /* connections at once (a thread each) */
  kConnectionTimeoutS = 10    /* an idle or slow connection is closed after it */
};

struct cli_http {
  struct MHD_Daemon *daemon;
  simba_client_t *client;
  char *name;
  simba_observer_t *observer;
  pthread_t watchdog;
  bool watchdog_running;

  pthread_mutex_t mu;
  pthread_cond_t wake; /* the watchdog's sleep; signalled to stop it */
  /* Under mu: */
  bool stopping;
  simba_term_t *term; /* retained; NULL while not leading */
  int64_t loop_ok_ms; /* cli_now_ms() of the last snapshot; 0: none yet */
  char *session_id;   /* from the last snapshot */
  char *client_name;
  bool holder_known;    /* the observer has called at least once */
  char *holder_session; /* NULL: free */
  char *holder_client;  /* NULL: free or unknown */
  uint64_t holder_token;
};

bool cli_http_available(void) { return true; }

/* --- shared state ----------------------------------------------------------- */

static void replace(char **slot, const char *value) {
  free(*slot);
  *slot = value ? strdup(value) : NULL;
}

static void on_holder(void *ud, const char *name, const char *holder_session,
                      const char *holder_client, uint64_t token) {
  (void)name;
  cli_http_t *h = ud;
  pthread_mutex_lock(&h->mu);
  replace(&h->holder_session, holder_session);
  replace(&h->holder_client, holder_client);
  h->holder_token = token;
  h->holder_known = true;
  pthread_mutex_unlock(&h->mu);
}

/* Takes a snapshot every second: one that returns proves the loop turns. */
static void *watchdog_main(void *arg) {
  cli_http_t *h = arg;
  pthread_mutex_lock(&h->mu);
  while (!h->stopping) {
    pthread_mutex_unlock(&h->mu);
    char *text = simba_client_snapshot_json(h->client);
    json_value_t *root = text ? json_parse(text) : NULL;
    const json_value_t *session = json_get(root, "session");
    pthread_mutex_lock(&h->mu);
    if (text) h->loop_ok_ms = cli_now_ms();
    if (root) {
      replace(&h->client_name, json_string(root, "client"));
      replace(&h->session_id, json_string(session, "id"));
    }
    json_free(root);
    simba_free(text);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += kWatchdogIntervalMs / 1000;
    while (!h->stopping && pthread_cond_timedwait(&h->wake, &h->mu, &until) != ETIMEDOUT) {
    }
  }
  pthread_mutex_unlock(&h->mu);
  return NULL;
}

void cli_http_set_term(cli_http_t *h, simba_term_t *term) {
  if (!h) return;
  if (term) simba_term_retain(term);
  pthread_mutex_lock(&h->mu);
  simba_term_t *old = h->term;
  h->term = term;
  pthread_mutex_unlock(&h->mu);
  simba_term_release(old);
}

/* --- responses -------------------------------------------------------------- */

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned code, const char *type,
                               char *body, MHD_ContentReaderFreeCallback free_body) {
  if (!body) return MHD_NO; /* out of memory: MHD closes the connection */
  struct MHD_Response *r =
      MHD_create_response_from_buffer_with_free_callback(strlen(body), body, free_body);
  if (!r) {
    free_body(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  if (code == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(r, "Allow", "GET, HEAD");
  const enum MHD_Result ok = MHD_queue_response(conn, code, r);
  MHD_destroy_response(r);
  return ok;
}

static char *format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *format(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0) s = NULL;
  va_end(ap);
  return s;
}

static void free_body(void *p) { free(p); }

static enum MHD_Result respond_json(struct MHD_Connection *conn, unsigned code, char *body) {
  return respond(conn, code, "application/json", body, free_body);
}

/* A JSON body {"error": MESSAGE}. */
static enum MHD_Result respond_error(struct MHD_Connection *conn, unsigned code,
                                     const char *message) {
  char *quoted = json_quote(message);
  char *body = quoted ? format("{\"error\":%s}\n", quoted) : NULL;
  free(quoted);
  return respond_json(conn, code, body);
}

/* 200 while the session is LIVE and the loop answered a snapshot within
 * kLoopStaleMs; 503 with the reason otherwise. */
static enum MHD_Result serve_healthz(cli_http_t *h, struct MHD_Connection *conn) {
  const simba_session_status_t status = simba_client_status(h->client);
  pthread_mutex_lock(&h->mu);
  const int64_t loop_ok_ms = h->loop_ok_ms;
  pthread_mutex_unlock(&h->mu);
  const int64_t ago = loop_ok_ms ? cli_now_ms() - loop_ok_ms : -1;
  char reason[160] = "";
  if (ago < 0) {
    snprintf(reason, sizeof reason, "the client's loop has not answered yet");
  } else if (ago > kLoopStaleMs) {
    snprintf(reason, sizeof reason, "the client's loop has not answered for %" PRId64 " ms", ago);
  } else if (status == SIMBA_SESSION_OPENING) {
    snprintf(reason, sizeof reason, "no session yet: the backend has not answered");
  } else if (status == SIMBA_SESSION_SUSPENDED) {
    snprintf(reason, sizeof reason, "the session is suspended: the last keep-alive failed");
  } else if (status != SIMBA_SESSION_LIVE) {
    snprintf(reason, sizeof reason, "the client is closed");
  }
  char loop[32] = "null";
  if (ago >= 0) snprintf(loop, sizeof loop, "%" PRId64, ago);
  if (!reason[0]) {
    return respond_json(
        conn, MHD_HTTP_OK,
        format("{\"healthy\":true,\"session\":\"%s\",\"loop_answered_ms_ago\":%s}\n",
               simba_session_status_name(status), loop));
  }
  char *quoted = json_quote(reason);
  char *body = quoted ? format(
                            "{\"healthy\":false,\"session\":\"%s\",\"loop_answered_ms_ago\":%s,"
                            "\"reason\":%s}\n",
                            simba_session_status_name(status), loop, quoted)
                      : NULL;
  free(quoted);
  return respond_json(conn, MHD_HTTP_SERVICE_UNAVAILABLE, body);
}

/* 200 while this process holds a valid term of the name, 503 otherwise; both
 * say who holds it, as far as known. */
static enum MHD_Result serve_leader(cli_http_t *h, struct MHD_Connection *conn) {
  pthread_mutex_lock(&h->mu);
  const bool leading = h->term && simba_term_is_valid(h->term);
  const int64_t remaining = leading ? simba_term_remaining_ms(h->term) : 0;
  const uint64_t token = leading ? simba_term_token(h->term) : h->holder_token;
  const bool known = leading || h->holder_known;
  char *name = json_quote(h->name);
  char *session = json_quote(leading ? h->session_id : h->holder_session);
  char *client = json_quote(leading ? h->client_name : h->holder_client);
  pthread_mutex_unlock(&h->mu);
  char *body = NULL;
  if (name && session && client) {
    if (leading) {
      body = format("{\"leader\":true,\"name\":%s,\"token\":%" PRIu64 ",\"remaining_ms\":%" PRId64
                    ",\"holder\":%s,\"holder_client\":%s}\n",
                    name, token, remaining, session, client);
    } else if (known) {
      body = format("{\"leader\":false,\"name\":%s,\"token\":%" PRIu64
                    ",\"holder\":%s,\"holder_client\":%s}\n",
                    name, token, session, client);
    } else {
      body = format("{\"leader\":false,\"name\":%s}\n", name); /* holder not read yet */
    }
  }
  free(name);
  free(session);
  free(client);
  return respond_json(conn, leading ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, body);
}

static enum MHD_Result serve_metrics(cli_http_t *h, struct MHD_Connection *conn) {
  char *text = simba_client_metrics_text(h->client);
  if (!text) return respond_error(conn, MHD_HTTP_SERVICE_UNAVAILABLE, simba_last_error());
  return respond(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", text, simba_free);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
  (void)version;
  (void)upload_data;
  (void)con_cls;
  cli_http_t *h = cls;
  /* Answered on the first call, before any body: none of these reads one, and
   * MHD closes the connection after the answer if a body was on its way. */
  *upload_data_size = 0;
  if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
    return respond_error(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD are allowed");
  }
  if (strcmp(url, "/healthz") == 0) return serve_healthz(h, conn);
  if (strcmp(url, "/leader") == 0) return serve_leader(h, conn);
  if (strcmp(url, "/metrics") == 0) return serve_metrics(h, conn);
  return respond_error(conn, MHD_HTTP_NOT_FOUND, "not found: try /healthz, /leader or /metrics");
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  size_t n = strlen(msg);
  while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = '\0';
  LOG_DEBUG("libmicrohttpd: %s", msg);
}

/* --- the listening socket --------------------------------------------------- */

/* Splits "HOST:PORT" or "[V6]:PORT" into host and port; false on bad text. */
static bool split_addr(const char *addr, char *host, size_t host_cap, char *port, size_t port_cap) {
  const char *colon;
  const char *h = addr;
  size_t hlen;
  if (addr[0] == '[') {
    const char *close = strchr(addr, ']');
    if (!close || close[1] != ':') return false;
    h = addr + 1;
    hlen = (size_t)(close - h);
    colon = close + 1;
  } else {
    colon = strrchr(addr, ':');
    if (!colon || memchr(addr, ':', (size_t)(colon - addr))) return false; /* v6 needs [] */
    hlen = (size_t)(colon - addr);
  }
  const char *p = colon + 1;
  if (hlen == 0 || hlen >= host_cap || !*p || strlen(p) >= port_cap) return false;
  for (const char *q = p; *q; ++q) {
    if (*q < '0' || *q > '9') return false;
  }
  if (strtol(p, NULL, 10) > 65535) return false;
  memcpy(host, h, hlen);
  host[hlen] = '\0';
  strcpy(port, p);
  return true;
}

/* A listening socket on addr, or -1 (logged). *shown gets "HOST:PORT" as bound. */
static int listen_on(const char *addr, char *shown, size_t shown_cap) {
  char host[256], port[8];
  if (!split_addr(addr, host, sizeof host, port, sizeof port)) {
    LOG_ERROR("--listen %s: expected HOST:PORT, e.g. 127.0.0.1:8080, 0.0.0.0:4040 or [::1]:0",
              addr);
    return -1;
  }
  struct addrinfo hints, *list = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  const int gai = getaddrinfo(host, port, &hints, &list);
  if (gai != 0) {
    LOG_ERROR("--listen %s: %s", addr, gai_strerror(gai));
    return -1;
  }
  int fd = -1, err = 0;
  for (struct addrinfo *ai = list; ai && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
      err = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(list);
  if (fd < 0) {
    LOG_ERROR("--listen %s: %s", addr, strerror(err));
    return -1;
  }
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  socklen_t len = sizeof ss;
  char h[NI_MAXHOST] = "?", p[NI_MAXSERV] = "?";
  if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
    getnameinfo((struct sockaddr *)&ss, len, h, sizeof h, p, sizeof p,
                NI_NUMERICHOST | NI_NUMERICSERV);
  }
  snprintf(shown, shown_cap, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", h, p);
  return fd;
}

/* --- start and stop --------------------------------------------------------- */

cli_http_t *cli_http_start(const char *addr, simba_client_t *c, const char *name, int64_t poll_ms) {
  cli_http_t *h = calloc(1, sizeof *h);
  if (!h || !(h->name = strdup(name))) {
    free(h);
    LOG_ERROR("--listen: out of memory");
    return NULL;
  }
  h->client = c;
  pthread_mutex_init(&h->mu, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&h->wake, &attr);
  pthread_condattr_destroy(&attr);

  char shown[300];
  const int fd = listen_on(addr, shown, sizeof shown);
  if (fd < 0) {
    cli_http_stop(h);
    return NULL;
  }
  const int err = pthread_create(&h->watchdog, NULL, watchdog_main, h);
  if (err != 0) {
    LOG_ERROR("--listen: cannot start a thread: %s", strerror(err));
    close(fd);
    cli_http_stop(h);
    return NULL;
  }
  h->watchdog_running = true;
  /* Followers' /leader answers say who leads; without it they still answer. */
  if (simba_observe_start(&h->observer, c, name, poll_ms, on_holder, h) != SIMBA_OK) {
    LOG_WARN("--listen: cannot follow the holder of %s (/leader will not name it): %s", name,
             simba_last_error());
    h->observer = NULL;
  }
  h->daemon = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                                   MHD_USE_POLL | MHD_USE_ERROR_LOG,
                               0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log,
                               NULL, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
                               (unsigned)kConnectionLimit, MHD_OPTION_CONNECTION_TIMEOUT,
                               (unsigned)kConnectionTimeoutS, MHD_OPTION_END);
  if (!h->daemon) {
    /* Not closing fd: whether MHD closed it on this path depends on where it
     * failed; closing twice could close another thread's new descriptor. simba
     * exits next. */
    LOG_ERROR("--listen %s: libmicrohttpd could not start (simba -v tells why)", addr);
    cli_http_stop(h);
    return NULL;
  }
  LOG_INFO("listening on %s (/healthz, /leader, /metrics)", shown);
  return h;
}

void cli_http_stop(cli_http_t *h) {
  if (!h) return;
  /* Waits for every connection's thread: no handler runs after it (it also
   * closes the listening socket). */
  if (h->daemon) MHD_stop_daemon(h->daemon);
  pthread_mutex_lock(&h->mu);
  h->stopping = true;
  pthread_cond_signal(&h->wake);
  pthread_mutex_unlock(&h->mu);
  if (h->watchdog_running) pthread_join(h->watchdog, NULL);
  simba_observer_free(h->observer); /* waits until no callback of it runs */
  simba_term_release(h->term);
  pthread_cond_destroy(&h->wake);
  pthread_mutex_destroy(&h->mu);
  free(h->name);
  free(h->session_id);
  free(h->client_name);
  free(h->holder_session);
  free(h->holder_client);
  free(h);
}

#else /* !SIMBA_CLI_WITH_MICROHTTPD */

bool cli_http_available(void) { return false; }

cli_http_t *cli_http_start(const char *addr, simba_client_t *c, const char *name, int64_t poll_ms) {
  (void)addr;
  (void)c;
  (void)name;
  (void)poll_ms;
  LOG_ERROR(
      "--listen: this simba was built without libmicrohttpd (install libmicrohttpd-dev "
      "and rebuild)");
  return NULL;
}

void cli_http_set_term(cli_http_t *h, simba_term_t *term) {
  (void)h;
  (void)term;
}

void cli_http_stop(cli_http_t *h) { (void)h; }

#endif
