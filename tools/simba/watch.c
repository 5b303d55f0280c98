/* simba watch NAME...: print each change of each NAME's holder as it happens,
 * without contending (simba_observe_start). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "json.h"

static const char kWatchUsage[] =
    "usage: simba watch NAME... [--poll D] [--json] [--count N] [OPTIONS]\n"
    "\n"
    "Follow who holds each NAME, without contending for it: one line with the\n"
    "state at start, then one line per change (another holder, another token,\n"
    "free), as it happens: at once after a release, within one poll otherwise\n"
    "(a take-over of a free name, an expiry).\n"
    "\n"
    "  --poll D       how often to read the backend (default: the renew interval;\n"
    "                 at least 10ms)\n"
    "  --json         one JSON object per line: {\"name\", \"holder\" (session id or\n"
    "                 null), \"holder_client\", \"token\", \"at_ms\", \"initial\"}\n"
    "  --count N      exit 0 after N changes (the lines at start not counted)\n"
    "\n"
    "Runs until SIGINT, SIGTERM or SIGHUP (exit 0). Common options: simba --help.\n";

/* One holder change, from the library's callback thread to the main thread. */
typedef struct event {
  struct event *next;
  const char *name; /* the watch's, lives as long as argv */
  char *session;    /* NULL: free */
  char *client;     /* NULL: free or unknown */
  uint64_t token;
  int64_t at_ms; /* CLOCK_REALTIME, when the callback ran */
  bool initial;  /* the state at start */
} event_t;

typedef struct {
  pthread_mutex_t mu;
  event_t *head, *tail;
  size_t lost; /* changes dropped for want of memory */
  int wake[2]; /* a byte per batch: wakes the main thread */
} queue_t;

typedef struct {
  queue_t *q;
  const char *name;
  bool started; /* the first call (the state at start) came */
  simba_observer_t *observer;
} watch_t;

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void event_free(event_t *e) {
  if (!e) return;
  free(e->session);
  free(e->client);
  free(e);
}

/* The callback executor: one call at a time per observer, in order. Never
 * blocks: a lock held only to link a node, and a non-blocking write. */
static void on_change(void *ud, const char *name, const char *holder_session,
                      const char *holder_client, uint64_t token) {
  (void)name;
  watch_t *w = ud;
  event_t *e = calloc(1, sizeof *e);
  const bool initial = !w->started;
  w->started = true;
  if (e) {
    e->name = w->name;
    e->session = holder_session ? strdup(holder_session) : NULL;
    e->client = holder_client ? strdup(holder_client) : NULL;
    e->token = token;
    e->at_ms = wall_ms();
    e->initial = initial;
    if ((holder_session && !e->session) || (holder_client && !e->client)) {
      event_free(e);
      e = NULL;
    }
  }
  pthread_mutex_lock(&w->q->mu);
  if (!e) {
    ++w->q->lost;
  } else if (w->q->tail) {
    w->q->tail->next = e;
    w->q->tail = e;
  } else {
    w->q->head = w->q->tail = e;
  }
  pthread_mutex_unlock(&w->q->mu);
  const char b = 1;
  /* A full pipe already holds a wake-up. */
  ssize_t n = write(w->q->wake[1], &b, 1);
  (void)n;
}

static void format_time(int64_t at_ms, char *out, size_t cap) {
  const time_t secs = (time_t)(at_ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char when[32];
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out, cap, "%s.%03dZ", when, (int)(at_ms % 1000));
}

/* Prints one event; false when stdout failed. */
static bool print_event(const event_t *e, bool as_json) {
  if (as_json) {
    char *name = json_quote(e->name), *session = json_quote(e->session),
         *client = json_quote(e->client);
    if (name && session && client) {
      printf("{\"name\":%s,\"holder\":%s,\"holder_client\":%s,\"token\":%" PRIu64
             ",\"at_ms\":%" PRId64 ",\"initial\":%s}\n",
             name, session, client, e->token, e->at_ms, e->initial ? "true" : "false");
    }
    free(name);
    free(session);
    free(client);
  } else {
    char when[48];
    format_time(e->at_ms, when, sizeof when);
    if (e->session) {
      printf("%s %s %s (session %s) token %" PRIu64 "\n", when, e->name,
             e->client ? e->client : "?", e->session, e->token);
    } else {
      printf("%s %s free token %" PRIu64 "\n", when, e->name, e->token);
    }
  }
  /* One line at a time: a reader of a pipe sees each change as it happens. */
  return fflush(stdout) == 0 && !ferror(stdout);
}

typedef struct {
  const char **names;
  size_t n;
  bool as_json;
  int64_t poll_ms;
  long long count; /* 0: unbounded */
} watch_options_t;

/* Returns -1 to go on, else an exit status. */
static int parse(cli_common_t *common, int argc, char **argv, watch_options_t *o) {
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(kWatchUsage, stdout);
      return 0;
    }
    if (strcmp(a, "--json") == 0) {
      o->as_json = true;
      continue;
    }
    if (strncmp(a, "--poll", 6) == 0 && (a[6] == '\0' || a[6] == '=')) {
      const char *v = a[6] == '=' ? a + 7 : (i + 1 < argc ? argv[++i] : NULL);
      if (!v || !cli_parse_duration(v, &o->poll_ms) || (o->poll_ms > 0 && o->poll_ms < 10)) {
        LOG_ERROR("--poll needs a duration of at least 10ms, such as 500ms or 2s (got \"%s\")",
                  v ? v : "");
        return EXIT_SIMBA_FAILED;
      }
      continue;
    }
    if (strncmp(a, "--count", 7) == 0 && (a[7] == '\0' || a[7] == '=')) {
      const char *v = a[7] == '=' ? a + 8 : (i + 1 < argc ? argv[++i] : NULL);
      char *end = NULL;
      errno = 0;
      o->count = v && *v >= '0' && *v <= '9' ? strtoll(v, &end, 10) : 0;
      if (!v || !end || *end || errno || o->count <= 0) {
        LOG_ERROR("--count needs a positive whole number (got \"%s\")", v ? v : "");
        return EXIT_SIMBA_FAILED;
      }
      continue;
    }
    const int r = cli_common_option(common, argc, argv, &i);
    if (r < 0) return EXIT_SIMBA_FAILED;
    if (r > 0) continue;
    if (a[0] == '-') {
      LOG_ERROR("watch: unknown option %s (see simba watch --help)", a);
      return EXIT_SIMBA_FAILED;
    }
    for (size_t k = 0; k < o->n; ++k) {
      if (strcmp(o->names[k], a) == 0) {
        LOG_ERROR("watch: \"%s\" given twice", a);
        return EXIT_SIMBA_FAILED;
      }
    }
    o->names[o->n++] = a;
  }
  if (o->n == 0) {
    LOG_ERROR("watch: no lease name (usage: simba watch NAME...)");
    return EXIT_SIMBA_FAILED;
  }
  if (simba_config_set_logger(common->cfg, cli_library_log, NULL, SIMBA_LOG_DEBUG) != SIMBA_OK) {
    LOG_ERROR("%s", simba_last_error());
    return EXIT_SIMBA_FAILED;
  }
  /* Name this command's own session, unless the user named it. */
  if (!common->client_named) {
    simba_config_set(common->cfg, "client.name", "simba watch");
    common->client_named = true;
  }
  return -1;
}

/* Takes the queued events; *lost gets the count of dropped ones. */
static event_t *take_all(queue_t *q, size_t *lost) {
  pthread_mutex_lock(&q->mu);
  event_t *all = q->head;
  q->head = q->tail = NULL;
  *lost = q->lost;
  q->lost = 0;
  pthread_mutex_unlock(&q->mu);
  return all;
}

/* Starts one observer per name; false (logged) when one cannot start. */
static bool start_watches(simba_client_t *c, const watch_options_t *o, queue_t *q,
                          watch_t *watches) {
  for (size_t k = 0; k < o->n; ++k) {
    watches[k].q = q;
    watches[k].name = o->names[k];
    if (simba_observe_start(&watches[k].observer, c, o->names[k], o->poll_ms, on_change,
                            &watches[k]) != SIMBA_OK) {
      LOG_ERROR("cannot watch %s: %s", o->names[k], simba_last_error());
      return false;
    }
  }
  return true;
}

/* Prints and frees a batch of events; returns -1 to go on, else an exit status. */
static int print_batch(event_t *e, const watch_options_t *o, long long *changes) {
  bool done = false, failed = false;
  int write_err = 0;
  while (e) {
    event_t *next = e->next;
    if (!done && !failed) {
      if (!print_event(e, o->as_json)) {
        failed = true;
        write_err = errno;
      } else if (!e->initial && o->count > 0 && ++*changes >= o->count) {
        done = true;
      }
    }
    event_free(e);
    e = next;
  }
  if (failed) {
    /* A reader that went away (`simba watch ... | head -1`) is a normal end. */
    if (write_err == EPIPE) return 0;
    LOG_ERROR("cannot write to stdout: %s", strerror(write_err));
    return EXIT_SIMBA_FAILED;
  }
  return done ? 0 : -1;
}

/* Prints the queued changes as they come until a signal, --count or an error;
   returns the exit status. */
static int watch_loop(queue_t *q, int signal_fd, const watch_options_t *o) {
  long long changes = 0;
  for (;;) {
    struct pollfd fds[2] = {{q->wake[0], POLLIN, 0}, {signal_fd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) {
      LOG_ERROR("poll: %s", strerror(errno));
      return EXIT_SIMBA_FAILED;
    }
    if ((fds[1].revents & POLLIN) && cli_signals_drain(signal_fd)) {
      return 0; /* interrupted: the normal way to stop watching */
    }
    if (!(fds[0].revents & POLLIN)) continue;
    char buf[64];
    while (read(q->wake[0], buf, sizeof buf) > 0) {
    }
    size_t lost = 0;
    event_t *e = take_all(q, &lost);
    if (lost) LOG_WARN("out of memory: %zu change(s) not shown", lost);
    const int status = print_batch(e, o, &changes);
    if (status >= 0) return status;
  }
}

/* Stops the observers, closes the client, then empties and frees the queue and
   the watches. */
static void watch_cleanup(watch_t *watches, size_t n, simba_client_t *c, queue_t *q) {
  /* Each free waits until no callback of its observer runs: then the queue can go. */
  for (size_t k = 0; watches && k < n; ++k) simba_observer_free(watches[k].observer);
  simba_client_close(c);
  size_t lost = 0;
  for (event_t *e = take_all(q, &lost); e;) {
    event_t *next = e->next;
    event_free(e);
    e = next;
  }
  if (q->wake[0] >= 0) close(q->wake[0]);
  if (q->wake[1] >= 0) close(q->wake[1]);
  pthread_mutex_destroy(&q->mu);
  free(watches);
}

int cli_watch(cli_common_t *common, int argc, char **argv) {
  watch_options_t o;
  memset(&o, 0, sizeof o);
  o.names = calloc((size_t)argc, sizeof *o.names);
  if (!o.names) return EXIT_SIMBA_FAILED;
  int status = parse(common, argc, argv, &o);
  if (status >= 0) {
    free(o.names);
    return status;
  }
  status = EXIT_SIMBA_FAILED;

  queue_t q;
  memset(&q, 0, sizeof q);
  pthread_mutex_init(&q.mu, NULL);
  q.wake[0] = q.wake[1] = -1;
  watch_t *watches = calloc(o.n, sizeof *watches);
  simba_client_t *c = NULL;
  const int signal_fd = cli_signals_install();
  if (!watches || signal_fd < 0 || pipe2(q.wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    LOG_ERROR("cannot set up: %s", strerror(errno));
  } else if ((c = cli_open_client(common)) != NULL && start_watches(c, &o, &q, watches)) {
    LOG_DEBUG("watching %zu name(s)", o.n);
    status = watch_loop(&q, signal_fd, &o);
  }
  watch_cleanup(watches, o.n, c, &q);
  free(o.names);
  return status;
}
