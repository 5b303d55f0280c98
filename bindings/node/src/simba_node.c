/* simba.node: the Node-API addon under bindings/node (lib/index.js is the API).
 *
 * Every client runs in libsimba's EXTERNAL loop mode on Node's own libuv loop
 * (napi_get_uv_event_loop): a uv_poll_t watches simba_client_fd(), a
 * uv_timer_t follows simba_client_timeout_ms(), and both call
 * simba_client_process(), inside which every callback runs on the JS thread
 * and calls JavaScript directly. No thread is started by the binding. Leader
 * work (run_while_leader, schedule, group_join) is called by libsimba on a
 * thread of its own: that thread queues the run (uv_async_t) and waits until
 * the JavaScript function's promise settled, so the lease is released after
 * the work ended (handover order). Calls that may wait for the backend
 * (try-lock, inspect) run on libuv's pool, never on the JS thread.
 * Design: docs/adr/0033-node-binding-on-nodes-loop.md. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <node_api.h>
#include <pthread.h>
#include <simba.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define NAME_MAX_BYTES 1024

typedef struct nclient nclient;

/* An election, task or observer (kind), with its JS function. */
typedef struct nhandle {
  int kind; /* H_ELECTION, H_TASK, H_OBSERVER */
  void *h;
  nclient *cl;
  napi_ref fn;
  napi_ref done; /* the JS function of a pending stop */
  int stopping, freed, refs;
  struct nhandle *next, *prev;
} nhandle;

enum { H_ELECTION = 1, H_TASK = 2, H_OBSERVER = 3 };

/* One run of leader work, queued by a library thread. */
typedef struct run {
  struct run *next;
  nclient *cl;
  nhandle *task;
  int task_ref; /* the run holds a reference of its task (JS thread only) */
  simba_term_t *term;
  int finished, refs;
  pthread_cond_t cv;
  double id;
  int polling;     /* rpoll watches the term's revoke fd (JS thread only) */
  uv_poll_t rpoll; /* the run's abort: a term's on_revoked would wait for the work */
} run_t;

struct nclient {
  napi_env env;
  simba_client_t *c;
  uv_poll_t poll;
  uv_timer_t timer;
  uv_idle_t idle; /* work due now: once per loop iteration (see arm) */
  uv_async_t async;
  uv_loop_t *loop;
  uint64_t timer_due; /* the timer's deadline in loop time, while active */
  double run_seq;
  int depth;   /* inside simba_client_process() */
  int unrefd;  /* client.unref() */
  int pending; /* JS-visible waits (lock) that keep an unref'd client alive */
  int closed, shutting, refs;
  int closing;                            /* simba_client_close_async() started (libsimba 1.5) */
  int close_done;                         /* its done ran: free outside process() (finish_close) */
  int close_err;                          /* its done's err */
  napi_ref close_cb;                      /* JS close callback (err) */
  int in_turn;                            /* inside turn()'s callback scope, which uses actx */
  int uv_open;                            /* poll, timer, idle, async: not closed yet */
  napi_async_cleanup_hook_handle cleanup; /* removed once they closed */
  int sync_budget;                        /* see SYNC_BUDGET */
  pthread_mutex_t mu;
  run_t *queued;  /* runs queued by work threads */
  run_t *running; /* runs handed to JavaScript, not finished */
  napi_ref event_fn, log_fn, error;
  napi_ref lock_fn; /* onLock(id, err, term): one function for every lock result */
  napi_ref resource;
  napi_async_context actx;
  nhandle *handles;
  pthread_t main;
  unsigned long foreign;
};

/* The GC safety net of a term JavaScript kept past a loop turn (termNet):
 * its finalizer drops the term's reference unless release() did. Terms
 * released before that never get one (ADR 0036). */
typedef struct tnet {
  simba_term_t *t;
  uint32_t h; /* its handle */
  int released;
} tnet;

/* Lock results delivered while lock() drives the client at once: at most this
 * many per loop turn, so that a loop of lock/release still yields to Node's
 * loop (memory:// completes without I/O). */
#define SYNC_BUDGET 16

/* ------------------------------------------------------------------------- */
/* Errors */

static napi_value make_error(napi_env env, int rc, const char *msg) {
  napi_value m, e, code, no;
  char buf[64];
  if (!msg || !*msg) msg = simba_strerror(rc);
  snprintf(buf, sizeof buf, "SIMBA_%s", simba_code_name(rc));
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &m);
  napi_create_string_utf8(env, buf, NAPI_AUTO_LENGTH, &code);
  napi_create_error(env, code, m, &e);
  napi_create_int32(env, rc, &no);
  napi_set_named_property(env, e, "errno", no);
  return e;
}

/* Throw the library's error @p rc with this thread's simba_last_error(). */
static napi_value throw_last(napi_env env, int rc) {
  napi_throw(env, make_error(env, rc, simba_last_error()));
  return NULL;
}

/* A call given a callback record failed, so its callback never comes: drop
 * the record's JS reference and the record, throw the call's error. */
static napi_value throw_dropped(napi_env env, int rc, napi_ref ref, void *rec) {
  napi_value e = make_error(env, rc, simba_last_error());
  napi_delete_reference(env, ref);
  free(rec);
  napi_throw(env, e);
  return NULL;
}

static napi_value throw_simba(napi_env env, int rc, const char *msg) {
  napi_throw(env, make_error(env, rc, msg));
  return NULL;
}

static napi_value throw_type(napi_env env, const char *msg) {
  napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", msg);
  return NULL;
}

/* ------------------------------------------------------------------------- */
/* Semaphores and read/write locks (1.5): looked up in the loaded libsimba, so
 * that the addon builds against and loads with 1.4 (a direct reference to a
 * SIMBA_1.5 symbol would refuse to load there); a call then says what it needs. */

typedef int (*sem_async_fn)(simba_client_t *, const char *, uint32_t, int64_t, simba_lock_fn,
                            void *);
typedef int (*rw_async_fn)(simba_client_t *, const char *, int, int64_t, simba_lock_fn, void *);
typedef int (*sem_try_fn)(simba_term_t **, simba_client_t *, const char *, uint32_t);
typedef int (*rw_try_fn)(simba_term_t **, simba_client_t *, const char *, int);
typedef int (*term_kind_fn)(const simba_term_t *);
typedef const char *(*kind_name_fn)(int);

static struct {
  sem_async_fn sem_async;
  rw_async_fn rw_async;
  sem_try_fn sem_try;
  rw_try_fn rw_try;
  term_kind_fn term_kind;
  kind_name_fn kind_name;
} p15;
static pthread_once_t p15_once = PTHREAD_ONCE_INIT;

static void p15_resolve(void) {
  /* the libsimba.so.1 this addon was loaded with (RTLD_NOLOAD: no second copy) */
  void *h = dlopen("libsimba.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return;
  *(void **)&p15.sem_async = dlsym(h, "simba_semaphore_acquire_async");
  *(void **)&p15.rw_async = dlsym(h, "simba_rwlock_acquire_async");
  *(void **)&p15.sem_try = dlsym(h, "simba_semaphore_try_acquire");
  *(void **)&p15.rw_try = dlsym(h, "simba_rwlock_try_acquire");
  *(void **)&p15.term_kind = dlsym(h, "simba_term_kind");
  *(void **)&p15.kind_name = dlsym(h, "simba_term_kind_name");
}

static napi_value throw_needs_1_5(napi_env env, const char *what) {
  char buf[160];
  snprintf(buf, sizeof buf, "%s needs libsimba 1.5.0 or later; the loaded one is %s", what,
           simba_version_string());
  return throw_simba(env, SIMBA_EUNSUPPORTED, buf);
}

#define CHECK(call)                                                           \
  do {                                                                        \
    if ((call) != napi_ok) {                                                  \
      bool pend_ = false;                                                     \
      napi_is_exception_pending(env, &pend_);                                 \
      if (!pend_) napi_throw_error(env, NULL, "simba: Node-API call failed"); \
      return NULL;                                                            \
    }                                                                         \
  } while (0)

/* Keep the first exception a JS callback threw inside process(); re-raised
 * as an uncaught exception once process() returned (like an EventEmitter). */
static void keep_error(nclient *cl) {
  napi_value e;
  if (napi_get_and_clear_last_exception(cl->env, &e) != napi_ok) return;
  if (!cl->error) napi_create_reference(cl->env, e, 1, &cl->error);
}

static void raise_kept(nclient *cl) {
  napi_value e;
  if (!cl->error) return;
  napi_get_reference_value(cl->env, cl->error, &e);
  napi_delete_reference(cl->env, cl->error);
  cl->error = NULL;
  napi_fatal_exception(cl->env, e);
}

/* Call @p fn (a reference) with argv; an exception is kept (keep_error). */
static void call_ref(nclient *cl, napi_ref fn, size_t argc, napi_value *argv) {
  napi_env env = cl->env;
  napi_value f, recv, res;
  if (!fn || napi_get_reference_value(env, fn, &f) != napi_ok || !f) return;
  napi_get_undefined(env, &recv);
  if (napi_call_function(env, recv, f, argc, argv, &res) != napi_ok) keep_error(cl);
}

/* Call a completion's JS done(err|null) once, then drop its reference. */
static void call_done(nclient *cl, napi_ref cb, int err) {
  napi_handle_scope hs;
  napi_value argv[1];
  napi_open_handle_scope(cl->env, &hs);
  if (err == SIMBA_OK) {
    napi_get_null(cl->env, &argv[0]);
  } else {
    argv[0] = make_error(cl->env, err, NULL);
  }
  call_ref(cl, cb, 1, argv);
  napi_delete_reference(cl->env, cb);
  napi_close_handle_scope(cl->env, hs);
}

/* ------------------------------------------------------------------------- */
/* Argument helpers */

static int get_args(napi_env env, napi_callback_info info, size_t n, napi_value *argv) {
  size_t argc = n;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return -1;
  for (size_t i = argc; i < n; i++) napi_get_undefined(env, &argv[i]);
  return 0;
}

/* The pointer of an external; NULL for any other value (napi_invalid_arg). */
static void *get_ptr(napi_env env, napi_value v) {
  void *p = NULL;
  if (napi_get_value_external(env, v, &p) != napi_ok) return NULL;
  return p;
}

/* A JS string into a malloc'd buffer; NULL with a TypeError thrown. */
static char *get_string(napi_env env, napi_value v, const char *what, size_t *len_out) {
  napi_valuetype t;
  size_t len = 0;
  char *s;
  char msg[160];
  if (napi_typeof(env, v, &t) != napi_ok || t != napi_string) {
    snprintf(msg, sizeof msg, "The \"%s\" argument must be of type string", what);
    throw_type(env, msg);
    return NULL;
  }
  napi_get_value_string_utf8(env, v, NULL, 0, &len);
  s = (char *)malloc(len + 1);
  if (!s) {
    throw_simba(env, SIMBA_ENOMEM, "out of memory");
    return NULL;
  }
  napi_get_value_string_utf8(env, v, s, len + 1, &len);
  if (len_out) *len_out = len;
  return s;
}

/* A string the library takes as a C string: a NUL byte inside is refused. */
static char *get_cstring(napi_env env, napi_value v, const char *what) {
  size_t len = 0;
  char *s = get_string(env, v, what, &len);
  if (s && strlen(s) != len) {
    char msg[200];
    snprintf(msg, sizeof msg, "%s contains a NUL byte at index %zu", what, strlen(s));
    free(s);
    throw_simba(env, SIMBA_EINVAL, msg);
    return NULL;
  }
  return s;
}

/* A lease name, checked with the library's rule on its bytes (NUL included). */
static char *get_name(napi_env env, napi_value v, const char *what) {
  size_t len = 0;
  char *s = get_string(env, v, what, &len);
  if (!s) return NULL;
  if (simba_lease_name_check(s, len) != SIMBA_OK) {
    free(s);
    throw_last(env, SIMBA_EINVAL);
    return NULL;
  }
  return s;
}

static int64_t get_i64(napi_env env, napi_value v, int64_t dflt) {
  double d;
  if (napi_get_value_double(env, v, &d) != napi_ok) return dflt; /* not a number */
  if (d != d) return dflt;
  if (d > 9e15) return INT64_MAX / 2;
  if (d < -9e15) return -1;
  return (int64_t)d;
}

static napi_value str(napi_env env, const char *s) {
  napi_value v;
  if (!s) {
    napi_get_null(env, &v);
    return v;
  }
  napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v);
  return v;
}

static napi_value num(napi_env env, double d) {
  napi_value v;
  napi_create_double(env, d, &v);
  return v;
}

static napi_value undef(napi_env env) {
  napi_value v;
  napi_get_undefined(env, &v);
  return v;
}

static napi_value boolean(napi_env env, bool b) {
  napi_value v;
  napi_get_boolean(env, b, &v);
  return v;
}

/* ------------------------------------------------------------------------- */
/* The client on Node's loop */

static void client_unref_struct(nclient *cl) {
  if (--cl->refs > 0) return;
  pthread_mutex_destroy(&cl->mu);
  free(cl);
}

/* The environment's cleanup waits for the async hook's removal: the handles'
 * close callbacks (this addon's code) must run before a worker unloads it. */
static void handle_closed(uv_handle_t *h) {
  nclient *cl = (nclient *)h->data;
  if (--cl->uv_open == 0 && cl->cleanup) {
    napi_remove_async_cleanup_hook(cl->cleanup);
    cl->cleanup = NULL;
  }
  client_unref_struct(cl);
}

/* Poll and timer keep the process alive unless unref'd and idle. */
static void update_ref(nclient *cl) {
  if (cl->closed) return;
  if (cl->unrefd && cl->pending <= 0 && !cl->closing) {
    uv_unref((uv_handle_t *)&cl->poll);
    uv_unref((uv_handle_t *)&cl->timer);
    uv_unref((uv_handle_t *)&cl->idle);
  } else {
    uv_ref((uv_handle_t *)&cl->poll);
    uv_ref((uv_handle_t *)&cl->timer);
    uv_ref((uv_handle_t *)&cl->idle);
  }
}

static void on_timer(uv_timer_t *t);
static void on_idle(uv_idle_t *h);

/* Follow simba_client_timeout_ms(): a timer for a later deadline; for work due
 * now an idle handle, which runs once per loop iteration. A 0 ms timer re-armed
 * from its own callback would run again in the same timers phase (libuv before
 * 1.47), and a loop of lock/release would never let the loop poll. */
static void arm(nclient *cl) {
  int64_t ms;
  if (cl->closed || !cl->c) return;
  ms = simba_client_timeout_ms(cl->c);
  if (ms == 0) {
    uv_timer_stop(&cl->timer);
    uv_idle_start(&cl->idle, on_idle);
    return;
  }
  uv_idle_stop(&cl->idle);
  if (ms < 0) {
    uv_timer_stop(&cl->timer);
  } else if (!uv_is_active((uv_handle_t *)&cl->timer) ||
             cl->timer_due != uv_now(cl->loop) + (uint64_t)ms) {
    /* re-armed only when the deadline moved (twice a lock cycle otherwise) */
    cl->timer_due = uv_now(cl->loop) + (uint64_t)ms;
    uv_timer_start(&cl->timer, on_timer, (uint64_t)ms, 0);
  }
}

/* simba_client_process() on the JS thread, outside callbacks; then re-raise
 * what a callback threw and re-arm. */
static void finish_close(nclient *cl);

static void drive(nclient *cl) {
  if (cl->closed || !cl->c || cl->depth) return;
  cl->depth++;
  (void)simba_client_process(cl->c);
  cl->depth--;
  if (cl->close_done) finish_close(cl);
  arm(cl);
  raise_kept(cl);
}

/* A turn inside a call from JavaScript (lock()): what a callback threw is
 * raised by the next loop turn, not inside the caller's call. */
static void drive_in_call(nclient *cl) {
  if (cl->closed || !cl->c || cl->depth) return;
  cl->depth++;
  (void)simba_client_process(cl->c);
  cl->depth--;
  if (cl->close_done) finish_close(cl);
}

/* A turn from the loop: a handle scope and a callback scope (so that promise
 * jobs and process.nextTick run after it, as after any I/O callback). */
static void turn(nclient *cl) {
  napi_env env = cl->env;
  napi_handle_scope hs;
  napi_callback_scope cs = NULL;
  napi_value res;
  int k;
  if (cl->closed) return;
  cl->sync_budget = SYNC_BUDGET;
  cl->in_turn = 1;
  napi_open_handle_scope(env, &hs);
  if (napi_get_reference_value(env, cl->resource, &res) == napi_ok && res)
    napi_open_callback_scope(env, res, cl->actx, &cs);
  /* what the library has due at once (a reply's callbacks, deferred to its
   * next turn) in this iteration, as a 0 ms timer did; bounded, so that the
   * loop still turns (JavaScript's reactions run after the scope) */
  for (k = 0; k < 4; k++) {
    drive(cl);
    if (cl->closed || !cl->c || cl->error || simba_client_timeout_ms(cl->c) != 0) break;
  }
  if (cs) napi_close_callback_scope(env, cs);
  napi_close_handle_scope(env, hs);
  cl->in_turn = 0;
  if (cl->closed) napi_async_destroy(env, cl->actx); /* closed in this turn (finish_close) */
}

static void on_poll(uv_poll_t *p, int status, int events) {
  (void)status;
  (void)events;
  turn((nclient *)p->data);
}

static void on_timer(uv_timer_t *t) { turn((nclient *)t->data); }

static void on_idle(uv_idle_t *h) {
  uv_idle_stop(h);
  turn((nclient *)h->data);
}

static int on_js_thread(nclient *cl) { return pthread_equal(pthread_self(), cl->main); }

static void tr_event(void *ud, simba_event_type_t type, const char *detail) {
  nclient *cl = (nclient *)ud;
  napi_handle_scope hs;
  napi_value argv[3];
  if (!on_js_thread(cl)) {
    cl->foreign++;
    return;
  }
  if (!cl->event_fn) return;
  napi_open_handle_scope(cl->env, &hs);
  argv[0] = str(cl->env, simba_event_name(type));
  argv[1] = num(cl->env, (double)type);
  argv[2] = str(cl->env, detail ? detail : "{}");
  call_ref(cl, cl->event_fn, 3, argv);
  napi_close_handle_scope(cl->env, hs);
}

static void tr_log(void *ud, int level, const char *msg) {
  nclient *cl = (nclient *)ud;
  napi_handle_scope hs;
  napi_value argv[2];
  if (!on_js_thread(cl)) {
    cl->foreign++;
    return;
  }
  if (!cl->log_fn) return;
  napi_open_handle_scope(cl->env, &hs);
  argv[0] = num(cl->env, level);
  argv[1] = str(cl->env, msg);
  call_ref(cl, cl->log_fn, 2, argv);
  napi_close_handle_scope(cl->env, hs);
}

static void handle_unref(napi_env env, nhandle *h);

static void run_unref(nclient *cl, run_t *r) {
  int last;
  pthread_mutex_lock(&cl->mu);
  last = --r->refs == 0;
  pthread_mutex_unlock(&cl->mu);
  if (last) {
    pthread_cond_destroy(&r->cv);
    free(r);
  }
}

static void run_poll_closed(uv_handle_t *h) {
  run_t *r = (run_t *)h->data;
  run_unref(r->cl, r);
}

/* JavaScript is done with run r (or the client closes): wake its work thread. */
static void run_finish(nclient *cl, run_t *r) {
  run_t **pp;
  pthread_mutex_lock(&cl->mu);
  if (r->finished) {
    pthread_mutex_unlock(&cl->mu);
    return;
  }
  r->finished = 1;
  for (pp = &cl->running; *pp; pp = &(*pp)->next) {
    if (*pp == r) {
      *pp = r->next;
      break;
    }
  }
  pthread_cond_signal(&r->cv);
  pthread_mutex_unlock(&cl->mu);
  if (r->polling) {
    r->polling = 0;
    uv_poll_stop(&r->rpoll);
    uv_close((uv_handle_t *)&r->rpoll, run_poll_closed);
  }
  if (r->task_ref) {
    r->task_ref = 0;
    handle_unref(cl->env, r->task);
  }
  run_unref(cl, r);
}

static void client_free_handles(nclient *cl);

/* Before a close, on the JS thread outside callbacks: runs end (their work
 * threads return, so the close does not wait for them) and no new one starts. */
static void end_runs(nclient *cl) {
  run_t *r;
  pthread_mutex_lock(&cl->mu);
  cl->shutting = 1;
  r = cl->queued;
  cl->queued = NULL;
  pthread_mutex_unlock(&cl->mu);
  while (r) {
    run_t *n = r->next;
    r->next = NULL;
    pthread_mutex_lock(&cl->mu);
    r->refs++; /* run_finish drops the queue's reference */
    r->next = cl->running;
    cl->running = r;
    pthread_mutex_unlock(&cl->mu);
    run_finish(cl, r);
    run_unref(cl, r);
    r = n;
  }
  for (;;) {
    pthread_mutex_lock(&cl->mu);
    r = cl->running;
    pthread_mutex_unlock(&cl->mu);
    if (!r) break;
    run_finish(cl, r);
  }
}

/* simba_client_close() (blocking, or at once once close_async's done ran),
 * then the handles and the uv handles. Returns the close's code. */
static int client_free(nclient *cl) {
  int rc;
  cl->depth++; /* callbacks inside close may not re-enter process() */
  rc = simba_client_close(cl->c);
  cl->depth--;
  cl->c = NULL;
  cl->closed = 1;
  client_free_handles(cl);
  uv_poll_stop(&cl->poll);
  uv_timer_stop(&cl->timer);
  uv_idle_stop(&cl->idle);
  uv_close((uv_handle_t *)&cl->poll, handle_closed);
  uv_close((uv_handle_t *)&cl->timer, handle_closed);
  uv_close((uv_handle_t *)&cl->idle, handle_closed);
  uv_close((uv_handle_t *)&cl->async, handle_closed);
  if (cl->event_fn) napi_delete_reference(cl->env, cl->event_fn);
  if (cl->log_fn) napi_delete_reference(cl->env, cl->log_fn);
  if (cl->resource) napi_delete_reference(cl->env, cl->resource);
  if (cl->lock_fn) napi_delete_reference(cl->env, cl->lock_fn);
  if (!cl->in_turn) napi_async_destroy(cl->env, cl->actx); /* else at the turn's end */
  cl->event_fn = cl->log_fn = cl->resource = cl->lock_fn = NULL;
  return rc;
}

/* Close the client on the JS thread, outside callbacks, blocking: one round
 * trip to the backend, up to the session's local deadline when it does not
 * answer. A pending close_async is finished so (its JS callback is dropped:
 * only the cleanup hook and the finalizer get here then). */
static int client_close(nclient *cl) {
  int rc;
  if (!cl->c) return SIMBA_OK;
  if (cl->depth) return SIMBA_EWOULDBLOCK;
  end_runs(cl);
  rc = client_free(cl);
  if (cl->close_cb) napi_delete_reference(cl->env, cl->close_cb);
  cl->close_cb = NULL;
  raise_kept(cl);
  return rc;
}

/* close_async's done (inside simba_client_process(), the client's last
 * callback): the handle is freed once process() returned (finish_close). */
static void tr_client_closed(void *ud, int err) {
  nclient *cl = (nclient *)ud;
  cl->close_err = err;
  cl->close_done = 1;
}

/* After the process() call in which the close completed: free the handle
 * (simba_client_close returns at once now), then JS's callback(err). */
static void finish_close(nclient *cl) {
  napi_ref cb = cl->close_cb;
  napi_handle_scope hs;
  napi_value argv[1];
  cl->close_cb = NULL;
  (void)client_free(cl);
  if (!cb) return;
  napi_open_handle_scope(cl->env, &hs);
  argv[0] = num(cl->env, cl->close_err);
  call_ref(cl, cb, 1, argv);
  napi_delete_reference(cl->env, cb);
  napi_close_handle_scope(cl->env, hs);
}

/* Process or worker exit with the client open (or its close_async pending):
 * the blocking close, since the loop no longer drives process() for it; the
 * hook is removed once the uv handles closed (handle_closed). */
static void cleanup_hook(napi_async_cleanup_hook_handle hh, void *arg) {
  nclient *cl = (nclient *)arg;
  (void)hh;
  if (cl->c) {
    cl->depth = 0;
    (void)client_close(cl);
  }
}

static void client_finalize(napi_env env, void *data, void *hint) {
  nclient *cl = (nclient *)data;
  (void)hint;
  (void)env;
  /* unreachable while open (the JS side anchors open clients), but be safe */
  if (cl->c) (void)client_close(cl);
  client_unref_struct(cl);
}

static nclient *get_client(napi_env env, napi_value v) {
  nclient *cl = (nclient *)get_ptr(env, v);
  if (!cl) {
    throw_type(env, "not a simba client");
    return NULL;
  }
  if (!cl->c) {
    throw_simba(env, SIMBA_ECLOSED, "the client is closed");
    return NULL;
  }
  return cl;
}

static void on_async(uv_async_t *a);

/* open(url, keys[], values[], onEvent, onLog, logLevel, resource, onLock) -> client */
static napi_value n_open(napi_env env, napi_callback_info info) {
  napi_value argv[8], out, name;
  char *url;
  uint32_t n = 0, i;
  simba_config_t *cfg = NULL;
  nclient *cl;
  int rc;
  napi_valuetype t;
  uv_loop_t *loop;
  if (get_args(env, info, 8, argv)) return NULL;
  url = get_cstring(env, argv[0], "backend URL");
  if (!url) return NULL;
  cl = (nclient *)calloc(1, sizeof *cl);
  if (!cl || simba_config_new(&cfg) != SIMBA_OK) {
    free(url);
    free(cl);
    return throw_simba(env, SIMBA_ENOMEM, "out of memory");
  }
  cl->env = env;
  cl->main = pthread_self();
  pthread_mutex_init(&cl->mu, NULL);
  rc = simba_config_set(cfg, "loop.mode", "external");
  napi_get_array_length(env, argv[1], &n);
  for (i = 0; rc == SIMBA_OK && i < n; i++) {
    napi_value k, v;
    char *ks, *vs;
    napi_get_element(env, argv[1], i, &k);
    napi_get_element(env, argv[2], i, &v);
    ks = get_cstring(env, k, "configuration key");
    vs = ks ? get_cstring(env, v, "configuration value") : NULL;
    if (!vs) {
      free(ks);
      free(url);
      simba_config_free(cfg);
      pthread_mutex_destroy(&cl->mu);
      free(cl);
      return NULL;
    }
    rc = simba_config_set(cfg, ks, vs);
    free(ks);
    free(vs);
  }
  if (rc == SIMBA_OK) rc = simba_config_set_event_sink(cfg, tr_event, cl);
  if (rc == SIMBA_OK && napi_typeof(env, argv[4], &t) == napi_ok && t == napi_function) {
    rc = simba_config_set_logger(cfg, tr_log, cl, (int)get_i64(env, argv[5], SIMBA_LOG_INFO));
    if (rc == SIMBA_OK) napi_create_reference(env, argv[4], 1, &cl->log_fn);
  }
  if (napi_typeof(env, argv[3], &t) == napi_ok && t == napi_function)
    napi_create_reference(env, argv[3], 1, &cl->event_fn);
  if (rc == SIMBA_OK) rc = simba_config_validate(cfg);
  if (rc == SIMBA_OK) {
    cl->depth++; /* the sink may be called before open returns: queue it */
    rc = simba_client_open(&cl->c, url, cfg);
    cl->depth--;
  }
  free(url);
  simba_config_free(cfg);
  if (rc != SIMBA_OK) {
    napi_value e = make_error(env, rc, simba_last_error());
    if (cl->log_fn) napi_delete_reference(env, cl->log_fn);
    if (cl->event_fn) napi_delete_reference(env, cl->event_fn);
    pthread_mutex_destroy(&cl->mu);
    free(cl);
    napi_throw(env, e);
    return NULL;
  }
  if (napi_get_uv_event_loop(env, &loop) != napi_ok ||
      uv_poll_init(loop, &cl->poll, simba_client_fd(cl->c)) != 0) {
    simba_client_close(cl->c);
    pthread_mutex_destroy(&cl->mu);
    free(cl);
    return throw_simba(env, SIMBA_EBACKEND, "could not watch the client's fd on Node's loop");
  }
  uv_timer_init(loop, &cl->timer);
  uv_idle_init(loop, &cl->idle);
  uv_async_init(loop, &cl->async, on_async);
  cl->poll.data = cl->timer.data = cl->idle.data = cl->async.data = cl;
  cl->loop = loop;
  uv_unref((uv_handle_t *)&cl->async); /* leader work never keeps the process alive alone */
  cl->refs = 5;                        /* the JS external + four uv handles */
  uv_poll_start(&cl->poll, UV_READABLE, on_poll);
  napi_create_reference(env, argv[6], 1, &cl->resource);
  napi_create_reference(env, argv[7], 1, &cl->lock_fn);
  napi_create_string_utf8(env, "simba.client", NAPI_AUTO_LENGTH, &name);
  napi_async_init(env, argv[6], name, &cl->actx);
  cl->uv_open = 4;
  napi_add_async_cleanup_hook(env, cleanup_hook, cl, &cl->cleanup);
  arm(cl);
  CHECK(napi_create_external(env, cl, client_finalize, NULL, &out));
  return out;
}

/* close(client, done(err)) -> true when the close goes on without blocking
 * (libsimba 1.5: simba_client_close_async on Node's loop; done(err) once it
 * completed and the handle is freed, err SIMBA_OK, SIMBA_ETIMEDOUT or
 * SIMBA_EBACKEND), false when it closed already (blocking, libsimba 1.4, or
 * nothing to close). */
static napi_value n_close(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  napi_valuetype t;
  nclient *cl;
  int rc;
  if (get_args(env, info, 2, argv)) return NULL;
  cl = (nclient *)get_ptr(env, argv[0]);
  if (!cl) return throw_type(env, "not a simba client");
  if (!cl->c || cl->closing) return boolean(env, false);
  if (cl->depth) return throw_simba(env, SIMBA_EWOULDBLOCK, "close from inside a callback");
  if (simba_version() >= 0x010500 && napi_typeof(env, argv[1], &t) == napi_ok &&
      t == napi_function) {
    end_runs(cl);
    rc = simba_client_close_async(cl->c, tr_client_closed, cl);
    if (rc == SIMBA_OK) {
      cl->closing = 1;
      napi_create_reference(env, argv[1], 1, &cl->close_cb);
      update_ref(cl);
      arm(cl); /* the close starts on the next process() turn */
      return boolean(env, true);
    }
  }
  rc = client_close(cl);
  if (rc == SIMBA_EWOULDBLOCK) return throw_simba(env, rc, "close from inside a callback");
  return boolean(env, false);
}

static napi_value n_set_ref(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  nclient *cl;
  bool b = true;
  if (get_args(env, info, 2, argv)) return NULL;
  cl = (nclient *)get_ptr(env, argv[0]);
  if (!cl || cl->closed) return undef(env);
  napi_get_value_bool(env, argv[1], &b);
  cl->unrefd = !b;
  update_ref(cl);
  return undef(env);
}

/* pending(client, n): n JS-visible waits (lock) keep an unref'd client alive. */
static napi_value n_pending(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  nclient *cl;
  if (get_args(env, info, 2, argv)) return NULL;
  cl = (nclient *)get_ptr(env, argv[0]);
  if (!cl || cl->closed) return undef(env);
  cl->pending = (int)get_i64(env, argv[1], 0);
  update_ref(cl);
  return undef(env);
}

static napi_value n_status(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  nclient *cl;
  if (get_args(env, info, 1, argv)) return NULL;
  cl = (nclient *)get_ptr(env, argv[0]);
  return num(env, simba_client_status(cl ? cl->c : NULL));
}

static napi_value n_foreign(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  nclient *cl;
  if (get_args(env, info, 1, argv)) return NULL;
  cl = (nclient *)get_ptr(env, argv[0]);
  return num(env, cl ? (double)cl->foreign : 0);
}

static napi_value owned_string(napi_env env, char *s, int rc_if_null) {
  napi_value v;
  if (!s) return throw_last(env, rc_if_null);
  v = str(env, s);
  simba_free(s);
  return v;
}

static napi_value n_snapshot(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  nclient *cl;
  if (get_args(env, info, 1, argv)) return NULL;
  if (!(cl = get_client(env, argv[0]))) return NULL;
  return owned_string(env, simba_client_snapshot_json(cl->c), SIMBA_ECLOSED);
}

static napi_value n_metrics(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  nclient *cl;
  if (get_args(env, info, 1, argv)) return NULL;
  if (!(cl = get_client(env, argv[0]))) return NULL;
  return owned_string(env, simba_client_metrics_text(cl->c), SIMBA_ECLOSED);
}

static napi_value n_set_event(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  nclient *cl;
  napi_valuetype t;
  if (get_args(env, info, 2, argv)) return NULL;
  if (!(cl = get_client(env, argv[0]))) return NULL;
  if (cl->event_fn) napi_delete_reference(env, cl->event_fn);
  cl->event_fn = NULL;
  if (napi_typeof(env, argv[1], &t) == napi_ok && t == napi_function)
    napi_create_reference(env, argv[1], 1, &cl->event_fn);
  return undef(env);
}

/* ------------------------------------------------------------------------- */
/* Terms */

/* Per environment (main thread or worker): the terms JavaScript holds, by
 * handle (index + 1, a small integer: no V8 object or global handle per term,
 * and a forged handle reaches no memory but a live term's), and out[0] of
 * termRelease (a JS Int32Array read after the call). */
typedef struct addon_data {
  napi_ref out_ref;
  int32_t *out;
  simba_term_t **terms;
  uint32_t *free_next; /* free list through unused slots (handles, 0 ends) */
  uint32_t cap, free_head;
} addon_data;

static addon_data *adata(napi_env env) {
  addon_data *d = NULL;
  napi_get_instance_data(env, (void **)&d);
  return d;
}

static void addon_data_free(napi_env env, void *data, void *hint) {
  addon_data *d = (addon_data *)data;
  (void)hint;
  if (d->out_ref) napi_delete_reference(env, d->out_ref);
  free(d->terms);
  free(d->free_next);
  free(d);
}

static uint32_t slot_put(addon_data *d, simba_term_t *t) {
  uint32_t h;
  if (!d->free_head) {
    uint32_t ncap = d->cap ? d->cap * 2 : 64, k;
    simba_term_t **nt = (simba_term_t **)realloc(d->terms, ncap * sizeof *nt);
    uint32_t *nn;
    if (!nt) return 0;
    d->terms = nt;
    nn = (uint32_t *)realloc(d->free_next, ncap * sizeof *nn);
    if (!nn) return 0;
    d->free_next = nn;
    for (k = d->cap; k < ncap; k++) {
      nt[k] = NULL;
      nn[k] = k + 1 < ncap ? k + 2 : 0;
    }
    d->free_head = d->cap + 1;
    d->cap = ncap;
  }
  h = d->free_head;
  d->free_head = d->free_next[h - 1];
  d->terms[h - 1] = t;
  return h;
}

static void slot_free(addon_data *d, uint32_t h) {
  d->terms[h - 1] = NULL;
  d->free_next[h - 1] = d->free_head;
  d->free_head = h;
}

/* A handle of @p t, owning one reference (taken by the caller). No finalizer:
 * JavaScript drops the reference with release(), or through the net
 * (termNet) it attaches to terms it keeps past a loop turn (ADR 0036). */
static napi_value wrap_term(napi_env env, simba_term_t *t) {
  napi_value v;
  addon_data *d = adata(env);
  uint32_t h = d ? slot_put(d, t) : 0;
  if (!h) {
    simba_term_release(t);
    return undef(env);
  }
  napi_create_uint32(env, h, &v);
  return v;
}

static simba_term_t *get_term_h(napi_env env, napi_value v, uint32_t *h_out) {
  addon_data *d = adata(env);
  uint32_t h = 0;
  if (!d || napi_get_value_uint32(env, v, &h) != napi_ok || h == 0 || h > d->cap ||
      !d->terms[h - 1]) {
    throw_type(env, "not a simba term (or a released one)");
    return NULL;
  }
  if (h_out) *h_out = h;
  return d->terms[h - 1];
}

static simba_term_t *get_term(napi_env env, napi_value v) { return get_term_h(env, v, NULL); }

#define TERM_FN(fname, body)                                       \
  static napi_value fname(napi_env env, napi_callback_info info) { \
    napi_value argv[3];                                            \
    simba_term_t *t;                                               \
    if (get_args(env, info, 3, argv)) return NULL;                 \
    if (!(t = get_term(env, argv[0]))) return NULL;                \
    body                                                           \
  }

TERM_FN(n_term_name, { return str(env, simba_term_name(t)); })
TERM_FN(n_term_kind, {
  if (!p15.term_kind) return throw_needs_1_5(env, "simba_term_kind");
  return num(env, p15.term_kind(t));
})
TERM_FN(n_term_token, {
  napi_value v;
  napi_create_bigint_uint64(env, simba_term_token(t), &v);
  return v;
})
TERM_FN(n_term_valid, {
  napi_value v;
  napi_get_boolean(env, simba_term_is_valid(t), &v);
  return v;
})
TERM_FN(n_term_remaining, { return num(env, (double)simba_term_remaining_ms(t)); })
TERM_FN(n_term_reason, { return num(env, (int)simba_term_revoke_reason(t)); })
TERM_FN(n_term_ensure_valid, {
  int64_t ms = get_i64(env, argv[1], 0);
  int rc;
  if (ms < 0) return throw_simba(env, SIMBA_EINVAL, "ensureValid: negative minimum");
  rc = simba_term_ensure_valid(t, ms);
  if (rc != SIMBA_OK) return throw_last(env, rc);
  return undef(env);
})
TERM_FN(n_term_revoke_fd, {
  int fd = simba_term_revoke_fd(t);
  if (fd < 0) return throw_last(env, SIMBA_ENOMEM);
  return num(env, fd);
})

static void term_net_finalize(napi_env env, void *data, void *hint) {
  tnet *n = (tnet *)data;
  addon_data *d = adata(env);
  (void)hint;
  /* The last reference of an unreleased lock term releases the lock, without
   * waiting and without calling JavaScript (simba_term_release). */
  if (!n->released) {
    if (d && n->h <= d->cap && d->terms[n->h - 1] == n->t) slot_free(d, n->h);
    simba_term_release(n->t);
  }
  free(n);
}

/* termNet(term) -> net: an external whose finalizer drops the term's
 * reference, unless termRelease(term, client, net) was called. */
TERM_FN(n_term_net, {
  napi_value v;
  tnet *n = (tnet *)calloc(1, sizeof *n);
  if (!n) return throw_simba(env, SIMBA_ENOMEM, "out of memory");
  n->t = t;
  napi_get_value_uint32(env, argv[0], &n->h);
  if (napi_create_external(env, n, term_net_finalize, NULL, &v) != napi_ok) {
    free(n);
    return NULL;
  }
  return v;
})

/* setOut(int32Array) */
static napi_value n_set_out(napi_env env, napi_callback_info info) {
  napi_value argv[1], ab;
  napi_typedarray_type type;
  size_t len = 0, off = 0;
  void *p = NULL;
  addon_data *d = NULL;
  if (get_args(env, info, 1, argv)) return NULL;
  if (napi_get_typedarray_info(env, argv[0], &type, &len, &p, &ab, &off) != napi_ok ||
      type != napi_int32_array || len < 1)
    return throw_type(env, "setOut needs an Int32Array");
  if (!(d = adata(env))) return throw_simba(env, SIMBA_ENOMEM, "out of memory");
  if (d->out_ref) napi_delete_reference(env, d->out_ref);
  napi_create_reference(env, argv[0], 1, &d->out_ref);
  d->out = (int32_t *)p;
  return undef(env);
}

/* release(term, client, net|null, wantToken) -> token|undefined: revoke the
 * lock term and release the lease with its token without waiting for the
 * backend (simba_term_release of the last reference); the next turn sends it.
 * The token (bigint) is returned when asked for; the term's revoke reason
 * (STOPPED unless revoked before) goes to setOut's array. */
static napi_value n_term_release(napi_env env, napi_callback_info info) {
  napi_value argv[4], tok;
  simba_term_t *t;
  nclient *cl;
  tnet *n;
  addon_data *d = adata(env);
  bool want = false;
  int reason;
  uint32_t h = 0;
  if (get_args(env, info, 4, argv)) return NULL;
  if (!(t = get_term_h(env, argv[0], &h))) return NULL;
  cl = (nclient *)get_ptr(env, argv[1]);
  n = (tnet *)get_ptr(env, argv[2]);
  napi_get_value_bool(env, argv[3], &want);
  reason = (int)simba_term_revoke_reason(t);
  if (reason == SIMBA_REVOKE_NONE) reason = SIMBA_REVOKE_STOPPED;
  if (d->out) d->out[0] = reason;
  slot_free(d, h);
  if (want) napi_create_bigint_uint64(env, simba_term_token(t), &tok);
  if (n) n->released = 1;
  simba_term_release(t);
  if (cl && cl->c) arm(cl);
  return want ? tok : undef(env);
}

typedef struct revoked_cb {
  nclient *cl;
  napi_ref fn;
} revoked_cb;

/* The done of termCloseAsync: JS's done(null), once. */
static void tr_term_close_done(void *ud, int err) {
  revoked_cb *r = (revoked_cb *)ud;
  nclient *cl = r->cl;
  if (on_js_thread(cl) && cl->refs > 0) {
    call_done(cl, r->fn, err);
  } else {
    cl->foreign++; /* the reference leaks rather than touch JS off-thread */
  }
  free(r);
}

/* termCloseAsync(term, client, net|null, done(err|null)) -> token (bigint):
 * drop the term's reference with simba_term_close_async (a lock not released
 * yet is released: done once the backend answered and its on_revoked ran);
 * the revoke reason goes to setOut's array, as with termRelease. */
static napi_value n_term_close_async(napi_env env, napi_callback_info info) {
  napi_value argv[4], tok;
  simba_term_t *t;
  nclient *cl;
  tnet *n;
  revoked_cb *r;
  addon_data *d = adata(env);
  uint32_t h = 0;
  int rc;
  if (get_args(env, info, 4, argv)) return NULL;
  if (!(t = get_term_h(env, argv[0], &h))) return NULL;
  if (!(cl = get_client(env, argv[1]))) return NULL;
  n = (tnet *)get_ptr(env, argv[2]);
  r = (revoked_cb *)calloc(1, sizeof *r);
  if (!r) return throw_simba(env, SIMBA_ENOMEM, "out of memory");
  r->cl = cl;
  napi_create_reference(env, argv[3], 1, &r->fn);
  napi_create_bigint_uint64(env, simba_term_token(t), &tok);
  rc = (int)simba_term_revoke_reason(t);
  if (d->out) d->out[0] = rc == SIMBA_REVOKE_NONE ? SIMBA_REVOKE_STOPPED : rc;
  rc = simba_term_close_async(t, tr_term_close_done, r);
  if (rc != SIMBA_OK) return throw_dropped(env, rc, r->fn, r);
  slot_free(d, h);
  if (n) n->released = 1;
  arm(cl);
  return tok;
}

static void tr_term_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t reason) {
  revoked_cb *r = (revoked_cb *)ud;
  nclient *cl = r->cl;
  (void)t;
  if (on_js_thread(cl) && cl->refs > 0) {
    napi_handle_scope hs;
    napi_value argv[1];
    napi_open_handle_scope(cl->env, &hs);
    argv[0] = num(cl->env, reason);
    call_ref(cl, r->fn, 1, argv);
    napi_close_handle_scope(cl->env, hs);
    napi_delete_reference(cl->env, r->fn);
  } else {
    cl->foreign++; /* the reference leaks rather than touch JS off-thread */
  }
  free(r);
}

/* onRevoked(term, client, fn(reason)): fn runs once, inside a turn. */
TERM_FN(n_term_on_revoked, {
  napi_value a[3];
  nclient *cl;
  revoked_cb *r;
  int rc;
  size_t argc = 3;
  napi_get_cb_info(env, info, &argc, a, NULL, NULL);
  if (!(cl = get_client(env, a[1]))) return NULL;
  r = (revoked_cb *)calloc(1, sizeof *r);
  if (!r) return throw_simba(env, SIMBA_ENOMEM, "out of memory");
  r->cl = cl;
  napi_create_reference(env, a[2], 1, &r->fn);
  rc = simba_term_on_revoked(t, tr_term_revoked, r);
  if (rc != SIMBA_OK) return throw_dropped(env, rc, r->fn, r);
  arm(cl);
  return undef(env);
})

/* ------------------------------------------------------------------------- */
/* Locks (and permits: what 1 semaphore, 2 read/write lock) */

typedef struct lock_req {
  nclient *cl;
  double id;
  int in_call; /* lock() is driving the client: keep the result for it */
  int done, err;
  simba_term_t *term;
  char msg[200]; /* SIMBA_ESTATE's detail (a semaphore's size), read in the callback */
} lock_req;

static void tr_lock(void *ud, int err, simba_term_t *term) {
  lock_req *q = (lock_req *)ud;
  nclient *cl = q->cl;
  napi_handle_scope hs;
  napi_value argv[3];
  if (!on_js_thread(cl)) {
    cl->foreign++;
    if (term) simba_term_release(term);
    free(q);
    return;
  }
  if (err == SIMBA_ESTATE) snprintf(q->msg, sizeof q->msg, "%s", simba_last_error());
  if (q->in_call) {
    q->done = 1;
    q->err = err;
    q->term = term;
    return;
  }
  napi_open_handle_scope(cl->env, &hs);
  argv[0] = num(cl->env, q->id);
  if (err == SIMBA_OK) {
    napi_get_null(cl->env, &argv[1]);
    argv[2] = wrap_term(cl->env, term);
  } else {
    argv[1] = make_error(cl->env, err, q->msg);
    napi_get_null(cl->env, &argv[2]);
  }
  call_ref(cl, cl->lock_fn, 3, argv);
  napi_close_handle_scope(cl->env, hs);
  free(q);
}

/* lock(client, name, timeoutMs, id) -> term | undefined:
 * simba_lock_acquire_async. A result the library has ready at once (memory://:
 * queued to the loop when the call returns) is taken by turns of the client
 * inside this call and returned (no loop iteration, no JS callback), within
 * SYNC_BUDGET per loop turn; otherwise undefined, and the result
 * goes to the client's onLock(id, err, term). */
static napi_value acquire(napi_env env, napi_value *argv, int what, int64_t arg, napi_value timeout,
                          napi_value id) {
  nclient *cl;
  char buf[NAME_MAX_BYTES + 2], *name;
  size_t len = 0;
  lock_req *q;
  napi_valuetype vt;
  int rc, k;
  if (!(cl = get_client(env, argv[0]))) return NULL;
  if (what == 1 && !p15.sem_async) return throw_needs_1_5(env, "simba_semaphore_acquire_async");
  if (what == 2 && !p15.rw_async) return throw_needs_1_5(env, "simba_rwlock_acquire_async");
  /* the name on the stack when it fits (the common case), else malloc'd */
  if (napi_typeof(env, argv[1], &vt) == napi_ok && vt == napi_string &&
      napi_get_value_string_utf8(env, argv[1], buf, sizeof buf, &len) == napi_ok &&
      len < sizeof buf - 1) {
    if (simba_lease_name_check(buf, len) != SIMBA_OK) return throw_last(env, SIMBA_EINVAL);
    name = buf;
  } else if (!(name = get_name(env, argv[1], "name"))) {
    return NULL;
  }
  q = (lock_req *)calloc(1, sizeof *q);
  if (!q) {
    if (name != buf) free(name);
    return throw_simba(env, SIMBA_ENOMEM, "out of memory");
  }
  q->cl = cl;
  q->id = (double)get_i64(env, id, 0);
  q->in_call = !cl->depth && cl->sync_budget > 0;
  if (what == 1)
    rc = p15.sem_async(cl->c, name, (uint32_t)arg, get_i64(env, timeout, -1), tr_lock, q);
  else if (what == 2)
    rc = p15.rw_async(cl->c, name, (int)arg, get_i64(env, timeout, -1), tr_lock, q);
  else
    rc = simba_lock_acquire_async(cl->c, name, get_i64(env, timeout, -1), tr_lock, q);
  if (name != buf) free(name);
  if (rc != SIMBA_OK) {
    napi_value e = make_error(env, rc, simba_last_error());
    free(q);
    napi_throw(env, e);
    return NULL;
  }
  /* the result is due when the client has work now (timeout 0); a few turns
   * bound the cost when it is not (a network backend) */
  for (k = 0; q->in_call && !q->done && k < 3 && cl->c && simba_client_timeout_ms(cl->c) == 0; k++)
    drive_in_call(cl);
  q->in_call = 0;
  arm(cl);
  if (cl->error) uv_idle_start(&cl->idle, on_idle); /* raised by the next turn */
  if (!q->done) return undef(env);                  /* tr_lock delivers it later, and frees q */
  cl->sync_budget--;
  rc = q->err;
  {
    simba_term_t *t = q->term;
    napi_value v = rc != SIMBA_OK ? throw_simba(env, rc, q->msg) : wrap_term(env, t);
    free(q);
    return v;
  }
}

static napi_value n_lock(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  if (get_args(env, info, 4, argv)) return NULL;
  return acquire(env, argv, 0, 0, argv[2], argv[3]);
}

/* permit(client, name, what, arg, timeoutMs, id) -> term | undefined, as lock():
 * what 1: simba_semaphore_acquire_async (arg: the size); 2:
 * simba_rwlock_acquire_async (arg: the mode). */
static napi_value n_permit(napi_env env, napi_callback_info info) {
  napi_value argv[6];
  int64_t what;
  if (get_args(env, info, 6, argv)) return NULL;
  what = get_i64(env, argv[2], 0);
  if (what != 1 && what != 2) return throw_type(env, "permit: what must be 1 or 2");
  return acquire(env, argv, (int)what, get_i64(env, argv[3], 0), argv[4], argv[5]);
}

/* Calls that may wait for the backend run on libuv's pool: the JS thread's
 * loop answers them meanwhile (EXTERNAL mode queues them to it). */
typedef struct pool_op {
  napi_async_work work;
  nclient *cl;
  simba_client_t *c;
  napi_deferred deferred;
  int kind; /* 1 try-lock, 2 inspect, 3 wait_live, 4 try a permit */
  int what; /* kind 4: 1 semaphore (arg: size), 2 read/write lock (arg: mode) */
  int64_t arg;
  char *name;
  char **names;
  size_t n_names;
  int64_t timeout;
  int rc;
  char msg[512];
  simba_term_t *term;
  char *json;
} pool_op;

static void pool_exec(napi_env env, void *data) {
  pool_op *o = (pool_op *)data;
  (void)env;
  if (o->kind == 1) {
    o->rc = simba_lock_try_acquire(&o->term, o->c, o->name);
  } else if (o->kind == 4) {
    o->rc = o->what == 1 ? p15.sem_try(&o->term, o->c, o->name, (uint32_t)o->arg)
                         : p15.rw_try(&o->term, o->c, o->name, (int)o->arg);
  } else if (o->kind == 2) {
    o->rc = simba_client_inspect_json(o->c, (const char *const *)o->names, o->n_names, o->timeout,
                                      &o->json);
  } else {
    o->rc = simba_client_wait_live(o->c, o->timeout);
  }
  if (o->rc != SIMBA_OK) snprintf(o->msg, sizeof o->msg, "%s", simba_last_error());
}

static void pool_done(napi_env env, napi_status status, void *data) {
  pool_op *o = (pool_op *)data;
  size_t i;
  if (o->rc != SIMBA_OK) {
    napi_reject_deferred(env, o->deferred, make_error(env, o->rc, o->msg));
  } else if (o->kind == 1 || o->kind == 4) {
    napi_resolve_deferred(env, o->deferred, wrap_term(env, o->term));
  } else if (o->kind == 2) {
    napi_resolve_deferred(env, o->deferred, str(env, o->json));
    simba_free(o->json);
  } else {
    napi_resolve_deferred(env, o->deferred, undef(env));
  }
  (void)status;
  napi_delete_async_work(env, o->work);
  free(o->name);
  for (i = 0; i < o->n_names; i++) free(o->names[i]);
  free(o->names);
  free(o);
}

static napi_value start_pool(napi_env env, pool_op *o, const char *what) {
  napi_value promise, name;
  napi_create_promise(env, &o->deferred, &promise);
  napi_create_string_utf8(env, what, NAPI_AUTO_LENGTH, &name);
  napi_create_async_work(env, NULL, name, pool_exec, pool_done, o, &o->work);
  napi_queue_async_work(env, o->work);
  return promise;
}

/* A try on libuv's pool: kind 1 a lock, 4 a permit (what, arg as permit()). */
static napi_value start_try(napi_env env, napi_value *argv, int kind, int what, int64_t arg,
                            const char *label) {
  nclient *cl;
  pool_op *o;
  char *name;
  if (!(cl = get_client(env, argv[0]))) return NULL;
  if (!(name = get_name(env, argv[1], "name"))) return NULL;
  o = (pool_op *)calloc(1, sizeof *o);
  if (!o) {
    free(name);
    return throw_simba(env, SIMBA_ENOMEM, "out of memory");
  }
  o->cl = cl;
  o->c = cl->c;
  o->kind = kind;
  o->what = what;
  o->arg = arg;
  o->name = name;
  return start_pool(env, o, label);
}

/* tryLock(client, name) -> Promise<term> */
static napi_value n_try_lock(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  if (get_args(env, info, 2, argv)) return NULL;
  return start_try(env, argv, 1, 0, 0, "simba.tryLock");
}

/* tryPermit(client, name, what, arg) -> Promise<term>: what as permit(). */
static napi_value n_try_permit(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  int64_t what;
  if (get_args(env, info, 4, argv)) return NULL;
  what = get_i64(env, argv[2], 0);
  if (what != 1 && what != 2) return throw_type(env, "tryPermit: what must be 1 or 2");
  if (what == 1 && !p15.sem_try) return throw_needs_1_5(env, "simba_semaphore_try_acquire");
  if (what == 2 && !p15.rw_try) return throw_needs_1_5(env, "simba_rwlock_try_acquire");
  return start_try(env, argv, 4, (int)what, get_i64(env, argv[3], 0), "simba.tryPermit");
}

/* inspect(client, names[]|null, timeoutMs) -> Promise<json> */
static napi_value n_inspect(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  nclient *cl;
  pool_op *o;
  bool is_arr = false;
  uint32_t n = 0, i;
  if (get_args(env, info, 3, argv)) return NULL;
  if (!(cl = get_client(env, argv[0]))) return NULL;
  o = (pool_op *)calloc(1, sizeof *o);
  if (!o) return throw_simba(env, SIMBA_ENOMEM, "out of memory");
  napi_is_array(env, argv[1], &is_arr);
  if (is_arr) napi_get_array_length(env, argv[1], &n);
  if (n) {
    o->names = (char **)calloc(n, sizeof *o->names);
    for (i = 0; i < n; i++) {
      napi_value v;
      napi_get_element(env, argv[1], i, &v);
      if (!(o->names[i] = get_name(env, v, "name"))) {
        o->n_names = i;
        pool_done(env, napi_ok, o); /* frees; the deferred is unused */
        return NULL;
      }
    }
  }
  o->n_names = n;
  o->cl = cl;
  o->c = cl->c;
  o->kind = 2;
  o->timeout = get_i64(env, argv[2], 5000);
  return start_pool(env, o, "simba.inspect");
}

/* waitLive(client, timeoutMs) -> Promise<void> */
static napi_value n_wait_live(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  nclient *cl;
  pool_op *o;
  if (get_args(env, info, 2, argv)) return NULL;
  if (!(cl = get_client(env, argv[0]))) return NULL;
  o = (pool_op *)calloc(1, sizeof *o);
  if (!o) return throw_simba(env, SIMBA_ENOMEM, "out of memory");
  o->cl = cl;
  o->c = cl->c;
  o->kind = 3;
  o->timeout = get_i64(env, argv[1], -1);
  return start_pool(env, o, "simba.waitLive");
}

/* ------------------------------------------------------------------------- */
/* Elections, tasks, observers */

static void handle_unref(napi_env env, nhandle *h) {
  if (--h->refs > 0) return;
  if (h->fn) napi_delete_reference(env, h->fn);
  if (h->done) napi_delete_reference(env, h->done);
  free(h);
}

static void handle_link(nclient *cl, nhandle *h) {
  h->next = cl->handles;
  if (cl->handles) cl->handles->prev = h;
  cl->handles = h;
}

static void handle_unlink(nclient *cl, nhandle *h) {
  if (h->prev) h->prev->next = h->next;
  if (h->next) h->next->prev = h->prev;
  if (cl->handles == h) cl->handles = h->next;
  h->next = h->prev = NULL;
}

/* Free the library's handle (the stop completed, or the client closed). */
static void handle_free_native(nhandle *h) {
  if (h->freed) return;
  h->freed = 1;
  if (h->kind == H_ELECTION) {
    simba_election_free((simba_election_t *)h->h);
  } else if (h->kind == H_TASK) {
    (void)simba_task_close((simba_task_t *)h->h);
  } else {
    simba_observer_free((simba_observer_t *)h->h);
  }
  h->h = NULL;
  handle_unlink(h->cl, h);
  handle_unref(h->cl->env, h); /* the client's list */
}

static void client_free_handles(nclient *cl) {
  while (cl->handles) {
    nhandle *h = cl->handles;
    napi_ref done = h->done;
    h->done = NULL;
    handle_free_native(h);
    if (done) {
      napi_value argv[1];
      napi_handle_scope hs;
      napi_open_handle_scope(cl->env, &hs);
      napi_get_null(cl->env, &argv[0]);
      call_ref(cl, done, 1, argv);
      napi_delete_reference(cl->env, done);
      napi_close_handle_scope(cl->env, hs);
    }
  }
}

static void handle_js_finalize(napi_env env, void *data, void *hint) {
  (void)hint;
  handle_unref(env, (nhandle *)data);
}

static nhandle *new_handle(napi_env env, nclient *cl, int kind, napi_value fn, napi_value *out) {
  nhandle *h = (nhandle *)calloc(1, sizeof *h);
  if (!h) {
    throw_simba(env, SIMBA_ENOMEM, "out of memory");
    return NULL;
  }
  h->kind = kind;
  h->cl = cl;
  h->refs = 1; /* the JS external; the client's list takes one once started */
  napi_create_reference(env, fn, 1, &h->fn);
  if (napi_create_external(env, h, handle_js_finalize, NULL, out) != napi_ok) {
    napi_delete_reference(env, h->fn);
    free(h);
    return NULL;
  }
  return h;
}

static void started(nclient *cl, nhandle *h) {
  h->refs++;
  handle_link(cl, h);
  arm(cl);
}

/* An election's callback to its JS listener fn(kind, term, reason): kind 1
 * elected, 2 revoked. */
static void deliver_term(nhandle *h, int kind, simba_term_t *term, int reason) {
  nclient *cl = h->cl;
  napi_handle_scope hs;
  napi_value argv[3];
  if (!on_js_thread(cl)) {
    cl->foreign++;
    return;
  }
  napi_open_handle_scope(cl->env, &hs);
  simba_term_retain(term);
  argv[0] = num(cl->env, kind);
  argv[1] = wrap_term(cl->env, term);
  argv[2] = num(cl->env, reason);
  call_ref(cl, h->fn, 3, argv);
  napi_close_handle_scope(cl->env, hs);
}

static void tr_elected(void *ud, simba_term_t *term) { deliver_term((nhandle *)ud, 1, term, 0); }

static void tr_revoked(void *ud, simba_term_t *term, simba_revoke_reason_t reason) {
  deliver_term((nhandle *)ud, 2, term, (int)reason);
}

/* electionStart(client, name, fn(kind, term, reason)) -> handle */
static napi_value n_election_start(napi_env env, napi_callback_info info) {
  napi_value argv[3], out;
  nclient *cl;
  nhandle *h;
  char *name;
  simba_listener_t l;
  simba_election_t *e = NULL;
  int rc;
  if (get_args(env, info, 3, argv)) return NULL;
  if (!(cl = get_client(env, argv[0]))) return NULL;
  if (!(name = get_name(env, argv[1], "name"))) return NULL;
  if (!(h = new_handle(env, cl, H_ELECTION, argv[2], &out))) {
    free(name);
    return NULL;
  }
  l.on_elected = tr_elected;
  l.on_revoked = tr_revoked;
  l.ud = h;
  rc = simba_election_start(&e, cl->c, name, &l);
  free(name);
  if (rc != SIMBA_OK) return throw_last(env, rc);
  h->h = e;
  started(cl, h);
  return out;
}

/* The done of a stop or step-down: call the JS done(err|null); after a stop,
 * free the library's handle (documented as safe in the stop's done). */
typedef struct done_req {
  nhandle *h;
  napi_ref cb;
  int is_stop;
} done_req;

static void tr_done(void *ud, int err) {
  done_req *d = (done_req *)ud;
  nhandle *h = d->h;
  nclient *cl = h->cl;
  if (!on_js_thread(cl)) {
    cl->foreign++;
    free(d);
    return;
  }
  if (d->is_stop) {
    if (h->done == d->cb) h->done = NULL;
    handle_free_native(h);
  }
  call_done(cl, d->cb, err);
  handle_unref(cl->env, h);
  free(d);
}

/* stop(handle, cb) / stepDown(handle, ms, cb) of an election or a task. */
static napi_value stop_common(napi_env env, napi_callback_info info, int is_stop) {
  napi_value argv[3], cbv;
  nhandle *h;
  done_req *d;
  int rc;
  int64_t ms = 0;
  if (get_args(env, info, 3, argv)) return NULL;
  h = (nhandle *)get_ptr(env, argv[0]);
  if (!h) return throw_type(env, "not a simba handle");
  cbv = is_stop ? argv[1] : argv[2];
  if (!is_stop) {
    ms = get_i64(env, argv[1], -1);
    if (ms < 0) return throw_simba(env, SIMBA_EINVAL, "stepDown: negative cooldown");
  }
  if (h->freed || !h->cl->c) return throw_simba(env, SIMBA_ESTATE, "already stopped");
  if (is_stop && h->stopping) return throw_simba(env, SIMBA_ESTATE, "already stopping");
  d = (done_req *)calloc(1, sizeof *d);
  if (!d) return throw_simba(env, SIMBA_ENOMEM, "out of memory");
  d->h = h;
  d->is_stop = is_stop;
  napi_create_reference(env, cbv, 1, &d->cb);
  if (h->kind == H_ELECTION) {
    rc = is_stop ? simba_election_stop((simba_election_t *)h->h, tr_done, d)
                 : simba_election_step_down((simba_election_t *)h->h, ms, tr_done, d);
  } else {
    rc = is_stop ? simba_task_stop((simba_task_t *)h->h, tr_done, d)
                 : simba_task_step_down((simba_task_t *)h->h, ms, tr_done, d);
  }
  if (rc != SIMBA_OK) return throw_dropped(env, rc, d->cb, d);
  h->refs++;
  if (is_stop) {
    h->stopping = 1;
    h->done = d->cb; /* called by client_free_handles if the client closes first */
  }
  arm(h->cl);
  return undef(env);
}

static napi_value n_stop(napi_env env, napi_callback_info info) {
  return stop_common(env, info, 1);
}
static napi_value n_step_down(napi_env env, napi_callback_info info) {
  return stop_common(env, info, 0);
}

/* The work trampoline of every task: queue the run for the JS thread and
 * wait until JavaScript finished it. */
static void tr_work(void *ud, simba_term_t *term) {
  nhandle *h = (nhandle *)ud;
  nclient *cl = h->cl;
  run_t *r = (run_t *)calloc(1, sizeof *r);
  if (!r) return;
  pthread_cond_init(&r->cv, NULL);
  r->task = h;
  r->cl = cl;
  r->term = term;
  r->refs = 2; /* this thread, the queue (then the running list) */
  simba_term_retain(term);
  pthread_mutex_lock(&cl->mu);
  if (cl->shutting) {
    pthread_mutex_unlock(&cl->mu);
    simba_term_release(term);
    pthread_cond_destroy(&r->cv);
    free(r);
    return;
  }
  r->next = cl->queued;
  cl->queued = r;
  uv_async_send(&cl->async);
  while (!r->finished) pthread_cond_wait(&r->cv, &cl->mu);
  pthread_mutex_unlock(&cl->mu);
  simba_term_release(term);
  run_unref(cl, r);
}

/* done() of a run, called by JavaScript once its promise settled. */
static napi_value n_run_done(napi_env env, napi_callback_info info) {
  run_t *r = NULL;
  size_t argc = 0;
  napi_get_cb_info(env, info, &argc, NULL, NULL, (void **)&r);
  if (r) run_finish(r->cl, r);
  return undef(env);
}

static void run_fn_finalize(napi_env env, void *data, void *hint) {
  run_t *r = (run_t *)data;
  nclient *cl = (nclient *)hint;
  (void)env;
  run_unref(cl, r);
}

/* The term of a run was revoked: the task's fn(id, null, null) aborts the
 * run's AbortSignal. */
static void on_run_revoked(uv_poll_t *p, int status, int events) {
  run_t *r = (run_t *)p->data;
  nclient *cl = r->cl;
  napi_env env = cl->env;
  napi_handle_scope hs;
  napi_callback_scope cs = NULL;
  napi_value res, argv[3];
  (void)status;
  (void)events;
  if (!r->polling) return;
  r->polling = 0;
  uv_poll_stop(&r->rpoll);
  uv_close((uv_handle_t *)&r->rpoll, run_poll_closed);
  if (cl->closed || r->finished || !r->task->fn) return;
  napi_open_handle_scope(env, &hs);
  if (napi_get_reference_value(env, cl->resource, &res) == napi_ok && res)
    napi_open_callback_scope(env, res, cl->actx, &cs);
  argv[0] = num(env, r->id);
  napi_get_null(env, &argv[1]);
  napi_get_null(env, &argv[2]);
  call_ref(cl, r->task->fn, 3, argv);
  raise_kept(cl);
  if (cs) napi_close_callback_scope(env, cs);
  napi_close_handle_scope(env, hs);
}

/* Queued runs: call the task's fn(id, term, done) for each on the JS thread. */
static void on_async(uv_async_t *a) {
  nclient *cl = (nclient *)a->data;
  napi_env env = cl->env;
  napi_handle_scope hs;
  napi_callback_scope cs = NULL;
  napi_value res;
  run_t *take, *r;
  if (cl->closed) return;
  pthread_mutex_lock(&cl->mu);
  take = cl->queued;
  cl->queued = NULL;
  pthread_mutex_unlock(&cl->mu);
  if (!take) return;
  napi_open_handle_scope(env, &hs);
  if (napi_get_reference_value(env, cl->resource, &res) == napi_ok && res)
    napi_open_callback_scope(env, res, cl->actx, &cs);
  while (take) {
    napi_value argv[3];
    r = take;
    take = r->next;
    pthread_mutex_lock(&cl->mu);
    r->next = cl->running;
    cl->running = r;
    pthread_mutex_unlock(&cl->mu);
    if (r->task->freed || !r->task->fn) {
      run_finish(cl, r);
      continue;
    }
    r->task->refs++;
    r->task_ref = 1;
    simba_term_retain(r->term);
    argv[1] = wrap_term(env, r->term);
    pthread_mutex_lock(&cl->mu);
    r->refs++; /* the done function's */
    pthread_mutex_unlock(&cl->mu);
    if (napi_create_function(env, "done", NAPI_AUTO_LENGTH, n_run_done, r, &argv[2]) != napi_ok ||
        napi_add_finalizer(env, argv[2], r, run_fn_finalize, cl, NULL) != napi_ok) {
      run_unref(cl, r);
      run_finish(cl, r);
      continue;
    }
    r->id = ++cl->run_seq;
    argv[0] = num(env, r->id);
    {
      int fd = simba_term_revoke_fd(r->term);
      if (fd >= 0 && uv_poll_init(cl->loop, &r->rpoll, fd) == 0) {
        r->rpoll.data = r;
        r->polling = 1;
        pthread_mutex_lock(&cl->mu);
        r->refs++; /* the poll's, dropped in run_poll_closed */
        pthread_mutex_unlock(&cl->mu);
        uv_poll_start(&r->rpoll, UV_READABLE, on_run_revoked);
        uv_unref((uv_handle_t *)&r->rpoll);
      }
    }
    call_ref(cl, r->task->fn, 3, argv);
  }
  raise_kept(cl);
  if (cs) napi_close_callback_scope(env, cs);
  napi_close_handle_scope(env, hs);
}

/* taskStart(client, kind, name, a, b, fn(term, done)) -> handle; kind 0
 * run_while_leader, 1 schedule (a: initial delay, b: period), 2 group_join
 * (a: partitions). */
static napi_value n_task_start(napi_env env, napi_callback_info info) {
  napi_value argv[6], out;
  nclient *cl;
  nhandle *h;
  char *name;
  simba_task_t *t = NULL;
  int rc, kind;
  int64_t a, b;
  if (get_args(env, info, 6, argv)) return NULL;
  if (!(cl = get_client(env, argv[0]))) return NULL;
  kind = (int)get_i64(env, argv[1], 0);
  name = kind == 2 ? get_cstring(env, argv[2], "group name") : get_name(env, argv[2], "name");
  if (!name) return NULL;
  a = get_i64(env, argv[3], 0);
  b = get_i64(env, argv[4], 0);
  if (kind == 2 && (a < 0 || a > 0xffffffffLL)) {
    free(name);
    return throw_simba(env, SIMBA_EINVAL, "partitions out of range");
  }
  if (!(h = new_handle(env, cl, H_TASK, argv[5], &out))) {
    free(name);
    return NULL;
  }
  if (kind == 0) {
    rc = simba_run_while_leader(&t, cl->c, name, tr_work, h);
  } else if (kind == 1) {
    rc = simba_schedule(&t, cl->c, name, a, b, tr_work, h);
  } else {
    rc = simba_group_join(&t, cl->c, name, (uint32_t)a, tr_work, h);
  }
  free(name);
  if (rc != SIMBA_OK) return throw_last(env, rc);
  h->h = t;
  started(cl, h);
  return out;
}

static void tr_observe(void *ud, const char *name, const char *session, const char *client,
                       uint64_t token) {
  nhandle *h = (nhandle *)ud;
  nclient *cl = h->cl;
  napi_handle_scope hs;
  napi_value argv[4];
  if (!on_js_thread(cl)) {
    cl->foreign++;
    return;
  }
  if (h->freed) return;
  napi_open_handle_scope(cl->env, &hs);
  argv[0] = str(cl->env, name);
  argv[1] = str(cl->env, session);
  argv[2] = str(cl->env, client);
  napi_create_bigint_uint64(cl->env, token, &argv[3]);
  call_ref(cl, h->fn, 4, argv);
  napi_close_handle_scope(cl->env, hs);
}

/* observeStart(client, name, pollMs, fn(name, session, client, token)) -> handle */
static napi_value n_observe_start(napi_env env, napi_callback_info info) {
  napi_value argv[4], out;
  nclient *cl;
  nhandle *h;
  char *name;
  simba_observer_t *o = NULL;
  int rc;
  if (get_args(env, info, 4, argv)) return NULL;
  if (!(cl = get_client(env, argv[0]))) return NULL;
  if (!(name = get_name(env, argv[1], "name"))) return NULL;
  if (!(h = new_handle(env, cl, H_OBSERVER, argv[3], &out))) {
    free(name);
    return NULL;
  }
  rc = simba_observe_start(&o, cl->c, name, get_i64(env, argv[2], 0), tr_observe, h);
  free(name);
  if (rc != SIMBA_OK) return throw_last(env, rc);
  h->h = o;
  started(cl, h);
  return out;
}

/* The done of closeAsync: the handle's last callback (libsimba 1.4). JS's
 * done(null); the done's reference of the handle goes. */
static void tr_close_done(void *ud, int err) {
  done_req *d = (done_req *)ud;
  nhandle *h = d->h;
  nclient *cl = h->cl;
  if (!on_js_thread(cl)) {
    cl->foreign++; /* h and the reference leak rather than touch JS off-thread */
    free(d);
    return;
  }
  call_done(cl, d->cb, err);
  handle_unref(cl->env, h);
  free(d);
}

/* closeAsync(handle, done(err|null)) -> true, or false when there is nothing
 * to close (the stop completed, or the client closed: the library handle is
 * freed already). An election, task or observer: the one close shape
 * (X_close_async), callable from its own callbacks; done is its last callback.
 * The client's list lets go of the handle; its reference passes to done. */
static napi_value n_close_async(napi_env env, napi_callback_info info) {
  napi_value argv[2], res;
  nhandle *h;
  done_req *d;
  int rc;
  if (get_args(env, info, 2, argv)) return NULL;
  h = (nhandle *)get_ptr(env, argv[0]);
  if (!h) return throw_type(env, "not a simba handle");
  if (h->freed || !h->cl->c) {
    napi_get_boolean(env, false, &res);
    return res;
  }
  d = (done_req *)calloc(1, sizeof *d);
  if (!d) return throw_simba(env, SIMBA_ENOMEM, "out of memory");
  d->h = h;
  napi_create_reference(env, argv[1], 1, &d->cb);
  if (h->kind == H_ELECTION) {
    rc = simba_election_close_async((simba_election_t *)h->h, tr_close_done, d);
  } else if (h->kind == H_TASK) {
    rc = simba_task_close_async((simba_task_t *)h->h, tr_close_done, d);
  } else {
    rc = simba_observer_close_async((simba_observer_t *)h->h, tr_close_done, d);
  }
  if (rc != SIMBA_OK) return throw_dropped(env, rc, d->cb, d);
  h->freed = 1; /* the library frees it after done; an earlier stop's done skips it */
  h->h = NULL;
  handle_unlink(h->cl, h);
  arm(h->cl);
  napi_get_boolean(env, true, &res);
  return res;
}

/* ------------------------------------------------------------------------- */
/* Module functions */

static napi_value n_version(napi_env env, napi_callback_info info) {
  (void)info;
  return num(env, simba_version());
}

static napi_value n_version_string(napi_env env, napi_callback_info info) {
  (void)info;
  return str(env, simba_version_string());
}

#define NAME_FN(fname, call)                                       \
  static napi_value fname(napi_env env, napi_callback_info info) { \
    napi_value argv[1];                                            \
    if (get_args(env, info, 1, argv)) return NULL;                 \
    return str(env, call((int)get_i64(env, argv[0], 0)));          \
  }

static const char *reason_name(int v) { return simba_revoke_reason_name((simba_revoke_reason_t)v); }
static const char *status_name(int v) {
  return simba_session_status_name((simba_session_status_t)v);
}
static const char *event_name(int v) { return simba_event_name((simba_event_type_t)v); }

NAME_FN(n_code_name, simba_code_name)
NAME_FN(n_strerror, simba_strerror)
NAME_FN(n_reason_name, reason_name)
NAME_FN(n_status_name, status_name)
NAME_FN(n_event_name, event_name)

static napi_value n_kind_name(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (get_args(env, info, 1, argv)) return NULL;
  if (!p15.kind_name) return throw_needs_1_5(env, "simba_term_kind_name");
  return str(env, p15.kind_name((int)get_i64(env, argv[0], 0)));
}

static napi_value n_check_name(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  char *s;
  if (get_args(env, info, 1, argv)) return NULL;
  if (!(s = get_name(env, argv[0], "name"))) return NULL;
  free(s);
  return undef(env);
}

static napi_value n_schema(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  char *url, *out = NULL;
  int rc;
  if (get_args(env, info, 1, argv)) return NULL;
  if (!(url = get_cstring(env, argv[0], "backend URL"))) return NULL;
  rc = simba_backend_schema(url, &out);
  free(url);
  if (rc != SIMBA_OK) return throw_last(env, rc);
  return owned_string(env, out, SIMBA_ENOMEM);
}

/* checkConfig(keys[], values[]) -> {durations in ms, drift} */
static napi_value n_check_config(napi_env env, napi_callback_info info) {
  static const char *const keys[] = {"session.lease-duration", "session.renew-interval",
                                     "session.margin", "session.retry-jitter",
                                     "session.min-backoff"};
  static const char *const props[] = {"lease", "renew", "margin", "retryJitter", "minBackoff"};
  napi_value argv[2], out;
  simba_config_t *cfg = NULL;
  uint32_t n = 0, i;
  int rc;
  double drift = 0;
  if (get_args(env, info, 2, argv)) return NULL;
  if (simba_config_new(&cfg) != SIMBA_OK) return throw_simba(env, SIMBA_ENOMEM, "out of memory");
  napi_get_array_length(env, argv[0], &n);
  rc = SIMBA_OK;
  for (i = 0; rc == SIMBA_OK && i < n; i++) {
    napi_value k, v;
    char *ks, *vs;
    napi_get_element(env, argv[0], i, &k);
    napi_get_element(env, argv[1], i, &v);
    ks = get_cstring(env, k, "configuration key");
    vs = ks ? get_cstring(env, v, "configuration value") : NULL;
    if (!vs) {
      free(ks);
      simba_config_free(cfg);
      return NULL;
    }
    rc = simba_config_set(cfg, ks, vs);
    free(ks);
    free(vs);
  }
  if (rc == SIMBA_OK) rc = simba_config_validate(cfg);
  if (rc != SIMBA_OK) {
    napi_value e = make_error(env, rc, simba_last_error());
    simba_config_free(cfg);
    napi_throw(env, e);
    return NULL;
  }
  napi_create_object(env, &out);
  for (i = 0; i < 5; i++) {
    int64_t ms = 0;
    simba_config_get_ms(cfg, keys[i], &ms);
    napi_set_named_property(env, out, props[i], num(env, (double)ms));
  }
  simba_config_get_double(cfg, "session.drift", &drift);
  napi_set_named_property(env, out, "drift", num(env, drift));
  simba_config_free(cfg);
  return out;
}

NAPI_MODULE_INIT() {
  static const struct {
    const char *name;
    napi_callback fn;
  } fns[] = {{"open", n_open},
             {"close", n_close},
             {"setRef", n_set_ref},
             {"pending", n_pending},
             {"status", n_status},
             {"foreign", n_foreign},
             {"snapshot", n_snapshot},
             {"metrics", n_metrics},
             {"setEvent", n_set_event},
             {"lock", n_lock},
             {"tryLock", n_try_lock},
             {"permit", n_permit},
             {"tryPermit", n_try_permit},
             {"termKind", n_term_kind},
             {"kindName", n_kind_name},
             {"inspect", n_inspect},
             {"waitLive", n_wait_live},
             {"termName", n_term_name},
             {"termToken", n_term_token},
             {"termValid", n_term_valid},
             {"termRemaining", n_term_remaining},
             {"termReason", n_term_reason},
             {"termEnsureValid", n_term_ensure_valid},
             {"termRevokeFd", n_term_revoke_fd},
             {"termRelease", n_term_release},
             {"termCloseAsync", n_term_close_async},
             {"closeAsync", n_close_async},
             {"termNet", n_term_net},
             {"setOut", n_set_out},
             {"termOnRevoked", n_term_on_revoked},
             {"electionStart", n_election_start},
             {"stop", n_stop},
             {"stepDown", n_step_down},
             {"taskStart", n_task_start},
             {"observeStart", n_observe_start},
             {"version", n_version},
             {"versionString", n_version_string},
             {"codeName", n_code_name},
             {"strerror", n_strerror},
             {"reasonName", n_reason_name},
             {"statusName", n_status_name},
             {"eventName", n_event_name},
             {"checkName", n_check_name},
             {"schema", n_schema},
             {"checkConfig", n_check_config}};
  size_t i;
  addon_data *d;
  if (simba_version() < 0x010400) { /* 1.4: the closes (X_close_async) */
    napi_throw_error(env, "SIMBA_EUNSUPPORTED", "simba: the loaded libsimba is older than 1.4");
    return NULL;
  }
  pthread_once(&p15_once, p15_resolve);
  d = (addon_data *)calloc(1, sizeof *d);
  if (!d || napi_set_instance_data(env, d, addon_data_free, NULL) != napi_ok) {
    free(d);
    napi_throw_error(env, "SIMBA_ENOMEM", "simba: out of memory");
    return NULL;
  }
  for (i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    napi_value f;
    napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, NULL, &f);
    napi_set_named_property(env, exports, fns[i].name, f);
  }
  return exports;
}
