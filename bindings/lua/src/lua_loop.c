/* The host loop of the Lua binding: one turn runs what libsimba has ready
 * (callbacks included) and then the leader work that is due, as coroutines.
 * Every wait of the binding (client:run(), close and stop_wait of elections
 * and tasks) drives the client through these turns.
 *
 * The library calls work(ud, term) on a thread of its own. That thread never
 * touches Lua: it queues the run (cl->queued, cl->evfd wakes client:fd()) and
 * waits until the Lua side finished it. The Lua thread, in client:process()
 * (and run(), and the luv driver), starts each queued run as a coroutine
 * fn(term), resumes it when it is due, and ends it: when fn returns, raises,
 * or, the first time it is due after its term stopped being valid, by closing
 * the coroutine (coroutine.close: its to-be-closed variables run). A run is
 * never resumed once its term is invalid, so no step of the work runs after
 * the revocation, and the work thread returns only once the coroutine is
 * gone: the library releases the lease after that (handover order).
 * Inside fn, coroutine.yield(ms) sleeps ms milliseconds (no argument: until
 * the next turn of the loop); simba.sleep(ms) is the same. */
#include "simba_lua.h"

/* coroutine.close() from C (5.4.6 renamed lua_resetthread). */
static int co_close(lua_State *co, lua_State *from) {
#if LUA_VERSION_RELEASE_NUM >= 50406
  return lua_closethread(co, from);
#else
  (void)from;
  return lua_resetthread(co);
#endif
}

static void work_unref(lclient *cl, work_req *q) {
  int last;
  pthread_mutex_lock(&cl->mu);
  last = --q->refs == 0;
  pthread_mutex_unlock(&cl->mu);
  if (last) {
    pthread_cond_destroy(&q->cv);
    free(q);
  }
}

/* The work trampoline of every task (ud: its lhandle): queue the run for
 * the Lua thread and wait until it ended there. */
void slua_tr_work(void *ud, simba_term_t *term) {
  lhandle *tk = (lhandle *)ud;
  lclient *cl = tk->cl;
  work_req *q = (work_req *)calloc(1, sizeof *q);
  uint64_t one = 1;
  if (!q) return; /* the run is skipped: the library contends again */
  pthread_cond_init(&q->cv, NULL);
  q->task = tk;
  q->term = term;
  q->refs = 2;
  simba_term_retain(term);
  pthread_mutex_lock(&cl->mu);
  if (cl->evfd < 0 || cl->c == NULL || cl->shutting) {
    pthread_mutex_unlock(&cl->mu);
    simba_term_release(term);
    pthread_cond_destroy(&q->cv);
    free(q);
    return;
  }
  q->next = cl->queued;
  cl->queued = q;
  if (write(cl->evfd, &one, sizeof one) < 0) {
    /* the counter is saturated: the fd is readable anyway */
  }
  while (!q->finished) pthread_cond_wait(&q->cv, &cl->mu);
  pthread_mutex_unlock(&cl->mu);
  simba_term_release(term);
  work_unref(cl, q);
}

/* The Lua side is done with q: wake its work thread. */
static void run_finish(lclient *cl, work_req *q) {
  pthread_mutex_lock(&cl->mu);
  q->finished = 1;
  pthread_cond_signal(&q->cv);
  pthread_mutex_unlock(&cl->mu);
  work_unref(cl, q);
}

/* Push the coroutine of run q (stored in the task's user value "runs"), or nil. */
static void push_run_thread(lua_State *L, lclient *cl, work_req *q) {
  slua_anchor_get(L, cl, q->task);
  if (lua_isnil(L, -1)) return;
  lua_getiuservalue(L, -1, 1);
  lua_getfield(L, -1, "runs");
  lua_rawgetp(L, -1, q);
  lua_replace(L, -4);
  lua_pop(L, 2);
}

static void set_run_thread(lua_State *L, lclient *cl, work_req *q, int vidx) {
  vidx = lua_absindex(L, vidx);
  slua_anchor_get(L, cl, q->task);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  lua_getiuservalue(L, -1, 1);
  lua_getfield(L, -1, "runs");
  lua_pushvalue(L, vidx);
  lua_rawsetp(L, -2, q);
  lua_pop(L, 3);
}

/* End run q: close its coroutine (if any), forget it, wake the work thread. */
static void run_end(lua_State *L, lclient *cl, work_req *q, int close_thread) {
  if (close_thread) {
    push_run_thread(L, cl, q);
    if (lua_isthread(L, -1)) {
      lua_State *co = lua_tothread(L, -1);
      if (co_close(co, L) != LUA_OK) {
        /* an error in a __close of the work: keep it like a callback's */
        lua_xmove(co, L, 1);
        slua_keep_error(L, cl);
      }
    }
    lua_pop(L, 1);
  }
  lua_pushnil(L);
  set_run_thread(L, cl, q, -1);
  lua_pop(L, 1);
  run_finish(cl, q);
}

/* The runs queued by work threads, taken off the queue. */
static work_req *take_queued(lclient *cl) {
  work_req *take;
  pthread_mutex_lock(&cl->mu);
  take = cl->queued;
  cl->queued = NULL;
  pthread_mutex_unlock(&cl->mu);
  return take;
}

/* Unlink run *pp from cl->active and end it. */
static void unlink_end(lua_State *L, lclient *cl, work_req **pp, int close_thread) {
  work_req *q = *pp;
  *pp = q->next;
  run_end(L, cl, q, close_thread);
}

/* ms until run q is due: 0 to 20 (a sleeping run is checked at least every
 * 20 ms for revocation). */
static int64_t run_due_ms(const work_req *q) {
  int64_t due = q->wake_at - slua_now_ms();
  if (due < 0) due = 0;
  if (due > 20) due = 20;
  return due;
}

/* The coroutine fn(term) of run q, new and its arguments pushed; NULL when
 * its task is gone. */
static lua_State *run_start(lua_State *L, lclient *cl, work_req *q) {
  lua_State *co;
  slua_anchor_get(L, cl, q->task);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return NULL;
  }
  lua_getiuservalue(L, -1, 1);
  co = lua_newthread(L);
  set_run_thread(L, cl, q, -1);
  lua_getfield(L, -2, "fn");
  lua_xmove(L, co, 1);
  slua_push_term(L, cl, q->term, 0, 0);
  lua_xmove(L, co, 1);
  lua_pop(L, 3);
  q->started = 1;
  return co;
}

/* Resume run *pp (it is due). Returns 1 when it ended (it is unlinked and
 * ended), 0 when it yielded: it sleeps until q->wake_at. */
static int run_resume(lua_State *L, lclient *cl, work_req **pp) {
  work_req *q = *pp;
  lua_State *co;
  int nargs = 0, nres = 0, st;
  if (!q->started) {
    co = run_start(L, cl, q);
    nargs = 1;
  } else {
    push_run_thread(L, cl, q);
    co = lua_tothread(L, -1);
    lua_pop(L, 1); /* still referenced by the runs table */
  }
  if (!co) {
    unlink_end(L, cl, pp, 0);
    return 1;
  }
  st = lua_resume(co, L, nargs, &nres);
  if (st == LUA_YIELD) {
    lua_Integer ms = 0;
    if (nres > 0 && lua_isinteger(co, -nres))
      ms = lua_tointeger(co, -nres);
    else if (nres > 0 && lua_isnumber(co, -nres))
      ms = (lua_Integer)lua_tonumber(co, -nres);
    lua_pop(co, nres);
    q->wake_at = slua_now_ms() + (ms > 0 ? ms : 0);
    return 0;
  }
  if (st == LUA_OK) {
    lua_pop(co, nres);
    unlink_end(L, cl, pp, 0);
  } else {
    lua_xmove(co, L, 1);
    slua_keep_error(L, cl);
    unlink_end(L, cl, pp, 1);
  }
  return 1;
}

/* Take queued runs, start, resume and end runs. Lua thread only, outside
 * libsimba. Returns the ms until the next run is due (-1: none). */
static int64_t pump(lua_State *L, lclient *cl) {
  work_req *take, **pp;
  uint64_t v;
  int64_t now, next = -1;
  if (cl->pumping || cl->evfd < 0) return -1;
  cl->pumping = 1;
  if (read(cl->evfd, &v, sizeof v) < 0) {
    /* EAGAIN: nothing queued */
  }
  take = take_queued(cl);
  while (take) {
    work_req *q = take;
    take = q->next;
    q->next = cl->active;
    cl->active = q;
  }
  lua_checkstack(L, 10);
  now = slua_now_ms();
  pp = &cl->active;
  while (*pp) {
    work_req *q = *pp;
    if (!simba_term_is_valid(q->term) || !cl->c) {
      unlink_end(L, cl, pp, q->started);
      continue;
    }
    if (q->wake_at <= now && run_resume(L, cl, pp)) continue;
    {
      int64_t due = run_due_ms(q);
      if (next < 0 || due < next) next = due;
    }
    pp = &q->next;
  }
  cl->pumping = 0;
  return next;
}

/* Close every run before the client closes (their terms are revoked by it). */
void slua_end_all_runs(lua_State *L, lclient *cl) {
  work_req *take = take_queued(cl);
  while (take) {
    work_req *q = take;
    take = q->next;
    run_finish(cl, q);
  }
  while (cl->active) {
    work_req *q = cl->active;
    cl->active = q->next;
    run_end(L, cl, q, q->started);
  }
}

/* ms before a turn must run although client:fd() is not readable; -1: no
 * timer (libsimba's timers and the runs that are due). */
int64_t slua_next_timeout(lclient *cl) {
  int64_t to = simba_client_timeout_ms(cl->c);
  work_req *q;
  for (q = cl->active; q; q = q->next) {
    int64_t due = run_due_ms(q);
    if (to < 0 || due < to) to = due;
  }
  return to;
}

/* Wait up to @p wait_ms for client:fd() to become readable (poll's result). */
int slua_poll_client(lclient *cl, int64_t wait_ms) {
  struct pollfd p;
  p.fd = cl->epfd;
  p.events = POLLIN;
  p.revents = 0;
  return poll(&p, 1, (int)wait_ms);
}

/* simba_client_process(): run what is ready, callbacks included. */
void slua_process_ready(lua_State *L, lclient *cl, result_t *r) {
  call_t k = slua_enter(cl, L);
  slua_capture(r, simba_client_process(cl->c));
  slua_leave(L, k);
}

/* One turn: what libsimba has ready, then the leader work that is due. */
void slua_turn(lua_State *L, lclient *cl, result_t *r) {
  slua_process_ready(L, cl, r);
  if (r->rc == SIMBA_OK) (void)pump(L, cl);
}

/* True inside a callback or leader work, where a wait would wait for itself. */
int slua_inside(const lclient *cl) { return cl->depth > 0 || cl->pumping; }

/* Raise EWOULDBLOCK misuse for the blocking call @p what when slua_inside(). */
void slua_check_may_wait(lua_State *L, lclient *cl, const char *what) {
  if (cl->c && slua_inside(cl)) {
    result_t r;
    r.rc = SIMBA_EWOULDBLOCK;
    snprintf(r.msg, sizeof r.msg, "%s: %s from a callback or leader work would wait for itself",
             simba_strerror(SIMBA_EWOULDBLOCK), what);
    slua_raise_misuse(L, what, &r);
  }
}

/* Drive the client (turns, waiting on its fd in between) until @p until(arg)
 * holds (1), the client closed, a turn failed, or @p deadline (slua_now_ms(),
 * INT64_MAX: none) passed (0). */
int slua_drive_until(lua_State *L, lclient *cl, slua_until_fn until, const void *arg,
                     int64_t deadline) {
  while (!until(arg) && cl->c) {
    int64_t wait = slua_next_timeout(cl), left = deadline - slua_now_ms();
    result_t r;
    if (deadline != INT64_MAX && left <= 0) break;
    if (wait < 0 || wait > 20) wait = 20;
    if (wait > left) wait = left;
    (void)slua_poll_client(cl, wait);
    slua_turn(L, cl, &r);
    if (r.rc != SIMBA_OK) break;
  }
  return until(arg);
}

/* simba.sleep(ms): inside leader work, yield for ms milliseconds. */
int slua_sleep(lua_State *L) {
  lua_Integer ms = luaL_optinteger(L, 1, 0);
  if (!lua_isyieldable(L)) return luaL_error(L, "simba.sleep: only inside leader work");
  lua_settop(L, 0);
  lua_pushinteger(L, ms);
  return lua_yield(L, 1);
}
