/* Leader work of the Lua binding: run_while_leader, schedule, join_group
 * (simba.task), and the pump that runs it on the Lua thread.
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

static void tr_work(void *ud, simba_term_t *term) {
  ltask *tk = (ltask *)ud;
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
int64_t slua_run_due_ms(const work_req *q) {
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
int64_t slua_pump(lua_State *L, lclient *cl) {
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
      int64_t due = slua_run_due_ms(q);
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

static task_ud *check_task(lua_State *L, int i) {
  return (task_ud *)luaL_checkudata(L, i, TASK_MT);
}

static ltask *live_task(lua_State *L, int i) {
  task_ud *u = check_task(L, i);
  if (!u->tk || !u->tk->t) luaL_error(L, "simba: task closed");
  return u->tk;
}

typedef int (*task_start_fn)(lua_State *L, lclient *cl, ltask *tk, const char *name);

static int start_task(lua_State *L, const char *what, int fidx, task_start_fn start) {
  lclient *cl = slua_live_client(L, 1);
  const char *name = luaL_checkstring(L, 2);
  ltask *tk;
  task_ud *u;
  result_t r;
  call_t k;
  int top;
  luaL_checktype(L, fidx, LUA_TFUNCTION);
  tk = (ltask *)calloc(1, sizeof *tk);
  if (!tk) return luaL_error(L, "simba: out of memory");
  tk->cl = cl;
  u = (task_ud *)lua_newuserdatauv(L, sizeof *u, 1);
  u->tk = tk;
  luaL_setmetatable(L, TASK_MT);
  top = lua_gettop(L);
  slua_push_owner_table(L);
  lua_pushvalue(L, fidx);
  lua_setfield(L, -2, "fn");
  lua_newtable(L);
  lua_setfield(L, -2, "runs");
  lua_setiuservalue(L, top, 1);
  lua_pushvalue(L, top);
  slua_anchor_set(L, 1, tk);
  k = slua_enter(cl, L);
  slua_capture(&r, start(L, cl, tk, name));
  if (r.rc != SIMBA_OK) tk->t = NULL;
  return slua_leave_started(L, k, tk, what, &r, top);
}

static int start_rwl(lua_State *L, lclient *cl, ltask *tk, const char *name) {
  (void)L;
  return simba_run_while_leader(&tk->t, cl->c, name, tr_work, tk);
}

/* client:run_while_leader(name, fn(term)) -> task */
int slua_client_run_while_leader(lua_State *L) {
  lua_settop(L, 3);
  return start_task(L, "run_while_leader", 3, start_rwl);
}

static int start_schedule(lua_State *L, lclient *cl, ltask *tk, const char *name) {
  return simba_schedule(&tk->t, cl->c, name, (int64_t)lua_tointeger(L, 3),
                        (int64_t)lua_tointeger(L, 4), tr_work, tk);
}

/* client:schedule(name, initial_delay_ms, period_ms, fn(term)) -> task */
int slua_client_schedule(lua_State *L) {
  lua_settop(L, 5);
  luaL_checkinteger(L, 3);
  luaL_checkinteger(L, 4);
  return start_task(L, "schedule", 5, start_schedule);
}

static int start_group(lua_State *L, lclient *cl, ltask *tk, const char *name) {
  return simba_group_join(&tk->t, cl->c, name, (uint32_t)lua_tointeger(L, 3), tr_work, tk);
}

/* client:join_group(group, partitions, fn(term)) -> task */
int slua_client_join_group(lua_State *L) {
  lua_Integer n;
  lua_settop(L, 4);
  n = luaL_checkinteger(L, 3);
  if (n < 0 || n > 0xffffffffLL) return luaL_argerror(L, 3, "partitions out of range");
  return start_task(L, "join_group", 4, start_group);
}

static int start_stop(void *t, int64_t cooldown, simba_done_fn done, void *rec) {
  (void)cooldown;
  return simba_task_stop((simba_task_t *)t, done, rec);
}

static int start_step_down(void *t, int64_t cooldown, simba_done_fn done, void *rec) {
  return simba_task_step_down((simba_task_t *)t, cooldown, done, rec);
}

int slua_task_stop(lua_State *L) {
  ltask *tk;
  lua_settop(L, 2);
  tk = live_task(L, 1);
  return slua_done_call(L, tk->cl, tk->t, start_stop, 0, 2, tk, "stop", &tk->stopped);
}

int slua_task_step_down(lua_State *L) {
  ltask *tk;
  lua_Integer cooldown;
  lua_settop(L, 3);
  tk = live_task(L, 1);
  cooldown = slua_check_cooldown(L, 2);
  return slua_done_call(L, tk->cl, tk->t, start_step_down, (int64_t)cooldown, 3, NULL, "step_down",
                        NULL);
}

static void stop_done_flag(void *ud, int err) {
  (void)err;
  *(int *)ud = 1;
}

/* task:close() from a callback or leader work: waiting there would wait for
 * itself (a work thread waits for a coroutine only this thread resumes).
 * Start the stop; the handle is freed once it completed and the task is
 * collected, or by a close() outside. */
static void task_stop_from_inside(lua_State *L, lclient *cl, ltask *tk) {
  done_rec *rec = slua_new_done_for(L, cl, lua_gettop(L) + 1, tk);
  result_t r;
  call_t k = slua_enter(cl, L);
  slua_capture(&r, simba_task_stop(tk->t, slua_tr_done, rec));
  if (r.rc != SIMBA_OK) {
    slua_anchor_clear(L, cl, rec);
    free(rec);
  }
  slua_leave(L, k);
  tk->stopped = 1;
}

/* task:close() outside: stop, then drive the loop and the runs until the
 * stop completed (the work threads wait for their coroutine to end, which
 * only this thread does). */
static void task_stop_and_drive(lua_State *L, lclient *cl, ltask *tk) {
  int done = 0;
  int rc;
  call_t k = slua_enter(cl, L);
  rc = simba_task_stop(tk->t, stop_done_flag, &done);
  slua_leave(L, k);
  if (rc != SIMBA_OK) return;
  while (!done && cl->c) {
    int64_t wait = simba_client_timeout_ms(cl->c), due;
    result_t r;
    due = slua_pump(L, cl);
    if (due >= 0 && (wait < 0 || due < wait)) wait = due;
    if (wait < 0 || wait > 20) wait = 20;
    (void)slua_poll_client(cl, wait);
    slua_process_ready(L, cl, &r);
    if (r.rc != SIMBA_OK) break;
    (void)slua_pump(L, cl);
  }
}

/* task:close() : stop, wait until every run ended and the lease is handed
 * over, free. Outside leader work and callbacks it drives the client (and
 * its runs) itself; from inside them it starts the stop and returns. */
int slua_task_close(lua_State *L) {
  task_ud *u = check_task(L, 1);
  ltask *tk = u->tk;
  lclient *cl;
  call_t k;
  if (!tk || !tk->t) {
    lua_pushboolean(L, 1);
    return 1;
  }
  cl = tk->cl;
  if (cl->c && (cl->depth > 0 || cl->pumping)) {
    task_stop_from_inside(L, cl, tk);
    lua_pushboolean(L, 1);
    return 1;
  }
  if (cl->c) task_stop_and_drive(L, cl, tk);
  k = slua_enter(cl, L);
  simba_task_close(tk->t);
  tk->t = NULL;
  slua_anchor_clear(L, cl, tk);
  slua_leave(L, k);
  lua_pushboolean(L, 1);
  return 1;
}

int slua_task_gc(lua_State *L) {
  task_ud *u = check_task(L, 1);
  ltask *tk = u->tk;
  if (tk) {
    if (tk->t) {
      /* Not anchored any more: stopped, or its client closed. */
      call_t k = slua_enter(tk->cl, L);
      simba_task_close(tk->t);
      tk->t = NULL;
      slua_leave_noraise(k);
    }
    free(tk);
    u->tk = NULL;
  }
  return 0;
}

int slua_task_name(lua_State *L) {
  check_task(L, 1);
  slua_push_owner_name(L);
  return 1;
}

int slua_task_tostring(lua_State *L) {
  task_ud *u = check_task(L, 1);
  slua_push_owner_name(L);
  lua_pushfstring(L, "simba.task(%s%s)", lua_tostring(L, -1),
                  !u->tk || !u->tk->t ? ", closed" : "");
  return 1;
}

/* simba.sleep(ms): inside leader work, yield for ms milliseconds. */
int slua_sleep(lua_State *L) {
  lua_Integer ms = luaL_optinteger(L, 1, 0);
  if (!lua_isyieldable(L)) return luaL_error(L, "simba.sleep: only inside leader work");
  lua_settop(L, 0);
  lua_pushinteger(L, ms);
  return lua_yield(L, 1);
}
