/* Elections, tasks and observers of the Lua binding share one handle
 * (lhandle) and one path to start, stop, step down, wait for a stop, close
 * and free them; a kind (slua_kind) names the library functions of each (an
 * observer has no stop).
 *
 * A started handle is anchored in its client (it lives while it contends,
 * even when the Lua code drops it) until its stop or its close completed or
 * the client closed; only then can it be collected. Closing goes through the
 * library's one close shape (X_close_async, libsimba 1.4): close(),
 * close_async() and __gc alike; the lhandle the library's callbacks reach is
 * freed once nothing can reach it (a close's done, or __gc after it). */
#include "simba_lua.h"

/* A new handle of @p kind, for the client at index 1 and the name at index 2:
 * its userdata is pushed, then its owner table (for the caller to fill). */
lhandle *slua_new_handle(lua_State *L, lclient *cl, const slua_kind *kind) {
  handle_ud *u;
  lhandle *hd = (lhandle *)calloc(1, sizeof *hd);
  if (!hd) luaL_error(L, "simba: out of memory");
  hd->kind = kind;
  hd->cl = cl;
  u = (handle_ud *)lua_newuserdatauv(L, sizeof *u, 1);
  u->hd = hd;
  luaL_setmetatable(L, kind->mt); /* from here __gc frees hd */
  slua_push_owner_table(L);
  return hd;
}

/* The end of a start: the owner table at the top becomes user value 1 of the
 * userdata at @p top, which is anchored while the call @p call (made here,
 * inside the client) runs; returns the userdata, or the failure of @p what. */
int slua_start_handle(lua_State *L, lhandle *hd, int top, const char *what,
                      int (*call)(lua_State *L, lhandle *hd)) {
  result_t r;
  call_t k;
  lua_setiuservalue(L, top, 1);
  lua_pushvalue(L, top);
  slua_anchor_set(L, 1, hd);
  k = slua_enter(hd->cl, L);
  slua_capture(&r, call(L, hd));
  if (r.rc != SIMBA_OK) hd->h = NULL;
  return slua_leave_started(L, k, hd, what, &r, top);
}

lhandle *slua_check_handle(lua_State *L, int i) {
  handle_ud *u = (handle_ud *)luaL_testudata(L, i, ELECTION_MT);
  if (!u) u = (handle_ud *)luaL_testudata(L, i, TASK_MT);
  if (!u) u = (handle_ud *)luaL_testudata(L, i, OBSERVER_MT);
  if (!u) luaL_typeerror(L, i, "simba.election, simba.task or simba.observer");
  return u->hd;
}

static lhandle *live_handle(lua_State *L, int i) {
  lhandle *hd = slua_check_handle(L, i);
  if (!hd || !hd->h) luaL_error(L, "simba: %s closed", hd ? hd->kind->what : "handle");
  return hd;
}

static void close_after_stop(lua_State *L, lhandle *hd);

/* Completion of a stop or a step-down: done(ok, code), if a function was
 * given. A stop's completion also marks the handle and drops its anchor, or
 * starts the close that close() asked for. */
static void tr_done(void *ud, int err) {
  done_rec *rec = (done_rec *)ud;
  lclient *cl = rec->cl;
  lua_State *L;
  if (rec->stop_of) rec->stop_of->stop_done = 1;
  L = slua_cb_state(cl);
  if (L && lua_checkstack(L, 6)) {
    int has_fn = slua_anchor_fn(L, cl, rec);
    slua_anchor_clear(L, cl, rec);
    if (rec->stop_of && rec->stop_of->close_after_stop) close_after_stop(L, rec->stop_of);
    /* nothing more comes, unless a close is pending (its done drops it) */
    if (rec->stop_of && !rec->stop_of->closing) slua_anchor_clear(L, cl, rec->stop_of);
    if (has_fn) slua_cb_invoke_done(cl, L, err);
  }
  free(rec);
}

/* Start a stop (@p cooldown < 0) or a step-down of @p hd whose done calls the
 * function at @p fidx (if any). */
static void start_stop(lua_State *L, lhandle *hd, int64_t cooldown, int fidx, result_t *r,
                       call_t *k) {
  lclient *cl = hd->cl;
  done_rec *rec;
  int rc;
  if (!lua_isnoneornil(L, fidx)) luaL_checktype(L, fidx, LUA_TFUNCTION);
  if (!slua_push_client(L, cl)) luaL_error(L, "simba: the client is gone");
  rec = (done_rec *)malloc(sizeof *rec);
  if (!rec) luaL_error(L, "simba: out of memory");
  rec->cl = cl;
  rec->stop_of = cooldown < 0 ? hd : NULL;
  if (!lua_isnoneornil(L, fidx)) {
    lua_pushvalue(L, fidx);
  } else {
    lua_pushboolean(L, 0);
  }
  slua_anchor_set(L, -2, rec);
  lua_pop(L, 1);
  *k = slua_enter(cl, L);
  rc = cooldown < 0 ? hd->kind->stop(hd->h, tr_done, rec)
                    : hd->kind->step_down(hd->h, cooldown, tr_done, rec);
  slua_capture(r, rc);
  if (rc == SIMBA_OK && cooldown < 0) hd->stopping = 1;
  if (rc != SIMBA_OK) {
    slua_anchor_clear(L, cl, rec); /* no done comes */
    free(rec);
  }
}

/* :stop([done]) : starts the stop; done(ok, code) is its last callback. */
int slua_handle_stop(lua_State *L) {
  lhandle *hd;
  result_t r;
  call_t k;
  lua_settop(L, 2);
  hd = live_handle(L, 1);
  start_stop(L, hd, -1, 2, &r, &k);
  return slua_leave_result(L, k, "stop", &r);
}

/* :step_down(cooldown_ms[, done]) */
int slua_handle_step_down(lua_State *L) {
  lhandle *hd;
  lua_Integer cooldown;
  result_t r;
  call_t k;
  lua_settop(L, 3);
  hd = live_handle(L, 1);
  cooldown = luaL_checkinteger(L, 2);
  if (cooldown < 0) luaL_argerror(L, 2, "negative cooldown");
  start_stop(L, hd, (int64_t)cooldown, 3, &r, &k);
  return slua_leave_result(L, k, "step_down", &r);
}

static int stop_completed(const void *hd) { return ((const lhandle *)hd)->stop_done; }

/* Start the stop unless one was started, then drive the client until it
 * completed (1), the client closed, or @p deadline passed (0). */
static int stop_and_drive(lua_State *L, lhandle *hd, int64_t deadline) {
  lclient *cl = hd->cl;
  if (!cl->c) return 1;
  if (!hd->stopping) {
    result_t r;
    call_t k;
    lua_settop(L, 1);
    start_stop(L, hd, -1, 2, &r, &k);
    slua_leave(L, k);
    if (r.rc != SIMBA_OK) return 1; /* stopped with the client */
  }
  return slua_drive_until(L, cl, stop_completed, hd, deadline) || !cl->c;
}

/* :stop_wait([timeout_ms]) : stop and drive the client (callbacks, leader
 * work) until the stop completed: true, or nil, msg, "ETIMEDOUT" (the stop
 * goes on). */
int slua_handle_stop_wait(lua_State *L) {
  lhandle *hd = live_handle(L, 1);
  lua_Integer ms = luaL_optinteger(L, 2, -1);
  result_t r;
  slua_check_may_wait(L, hd->cl, "stop_wait");
  if (!stop_and_drive(L, hd, ms < 0 ? INT64_MAX : slua_now_ms() + (int64_t)ms)) {
    r.rc = SIMBA_ETIMEDOUT;
    snprintf(r.msg, sizeof r.msg, "%s: the stop goes on", simba_strerror(SIMBA_ETIMEDOUT));
    return slua_push_fail(L, &r);
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* Free the library handle with its client closed (nothing waits any more). */
static void handle_free(lua_State *L, lhandle *hd) {
  call_t k = slua_enter(hd->cl, L);
  hd->kind->free(hd->h);
  hd->h = NULL;
  if (hd->term) {
    simba_term_release(hd->term);
    hd->term = NULL;
  }
  slua_anchor_clear(L, hd->cl, hd);
  slua_leave(L, k);
}

/* The done of a close: the handle's last callback. done(ok, code) if a
 * function was given; the handle's anchor goes (it may be collected). */
static void tr_close_done(void *ud, int err) {
  done_rec *rec = (done_rec *)ud;
  lclient *cl = rec->cl;
  lua_State *L = slua_cb_state(cl);
  if (L && lua_checkstack(L, 6)) {
    int has_fn = slua_anchor_fn(L, cl, rec);
    rec->stop_of->close_done = 1;
    slua_anchor_clear(L, cl, rec);
    slua_anchor_clear(L, cl, rec->stop_of);
    if (has_fn) slua_cb_invoke_done(cl, L, err);
  }
  free(rec);
}

/* Start the close of @p hd (live client; its userdata at @p uidx) whose done
 * calls the function at @p fidx (0: none). The handle stays anchored until
 * that done. Raises nothing (it also runs inside a stop's done). */
static void start_close(lua_State *L, lhandle *hd, int uidx, int fidx, result_t *r, call_t *k) {
  lclient *cl = hd->cl;
  done_rec *rec;
  *k = slua_enter(cl, L);
  uidx = lua_absindex(L, uidx);
  rec = (done_rec *)malloc(sizeof *rec);
  if (!rec || !lua_checkstack(L, 4) || !slua_push_client(L, cl)) {
    free(rec);
    slua_capture(r, SIMBA_ENOMEM);
    return;
  }
  rec->cl = cl;
  rec->stop_of = hd;
  if (fidx && !lua_isnoneornil(L, fidx)) {
    lua_pushvalue(L, fidx);
  } else {
    lua_pushboolean(L, 0);
  }
  slua_anchor_set(L, -2, rec);
  lua_pushvalue(L, uidx);
  slua_anchor_set(L, -2, hd); /* an earlier stop's done may have dropped it */
  lua_pop(L, 1);
  slua_capture(r, hd->kind->close_async(hd->h, tr_close_done, rec));
  if (r->rc != SIMBA_OK) {
    slua_anchor_clear(L, cl, rec); /* no done comes; the handle is as it was */
    free(rec);
    return;
  }
  hd->closing = 1;
  hd->h = NULL; /* the library frees it after done */
  if (hd->term) {
    simba_term_release(hd->term); /* the listener is detached: nothing sets it again */
    hd->term = NULL;
  }
}

/* The close ran its done (or never started: a stop's close out of memory). */
static int close_completed(const void *p) {
  const lhandle *hd = (const lhandle *)p;
  return hd->close_done || (!hd->closing && !hd->close_after_stop);
}

/* The stop close() started completed (inside its done): now the close. */
static void close_after_stop(lua_State *L, lhandle *hd) {
  result_t r;
  call_t k;
  hd->close_after_stop = 0;
  if (!hd->h || hd->closing || !hd->cl->c) return;
  slua_anchor_get(L, hd->cl, hd);
  if (!lua_isnil(L, -1)) {
    start_close(L, hd, -1, 0, &r, &k);
    slua_leave_noraise(k); /* inside a callback: nothing may unwind */
  }
  lua_pop(L, 1);
}

/* :close_async([done]) : close without waiting, from anywhere (a callback of
 * the handle, leader work, the luv loop): true, then done(ok, code) runs once,
 * the handle's last callback (after every other one, the done of an earlier
 * stop included), inside a later process()/run(). With the client closed there
 * is no loop to run done: the handle is freed, and nil, msg, "ECLOSED" comes
 * back instead. A second close is an error. */
int slua_handle_close_async(lua_State *L) {
  lhandle *hd;
  result_t r;
  call_t k;
  lua_settop(L, 2);
  hd = live_handle(L, 1);
  if (!hd->cl->c) {
    handle_free(L, hd);
    slua_capture(&r, SIMBA_ECLOSED);
    return slua_fail(L, "close_async", &r);
  }
  if (!lua_isnil(L, 2)) luaL_checktype(L, 2, LUA_TFUNCTION);
  start_close(L, hd, 1, 2, &r, &k);
  return slua_leave_result(L, k, "close_async", &r);
}

/* :close() : stop (the listener hears the STOPPED revocation, as before
 * 1.4), then close_async from the stop's done; outside callbacks and leader
 * work, drive the client until the close's done ran (every on_revoked
 * delivered, every run of the work ended, the lease handed over). From a
 * callback or leader work it returns at once; the close completes in a
 * later process()/run(). Idempotent. */
int slua_handle_close(lua_State *L) {
  lhandle *hd = slua_check_handle(L, 1);
  result_t r;
  call_t k;
  lua_settop(L, 1);
  if (hd && hd->h && !hd->cl->c) {
    handle_free(L, hd);
  } else if (hd && hd->h && !hd->closing && !hd->close_after_stop) {
    if (hd->kind->stop && !hd->stop_done) {
      hd->close_after_stop = 1;
      if (!hd->stopping) {
        start_stop(L, hd, -1, 2, &r, &k);
        slua_leave(L, k);
        if (r.rc != SIMBA_OK) hd->close_after_stop = 0; /* stopped already: close now */
      }
    }
    if (!hd->close_after_stop) {
      start_close(L, hd, 1, 0, &r, &k);
      slua_leave(L, k);
      if (r.rc != SIMBA_OK) return slua_fail(L, "close", &r);
    }
  }
  if (hd && (hd->closing || hd->close_after_stop) && !slua_inside(hd->cl))
    (void)slua_drive_until(L, hd->cl, close_completed, hd, INT64_MAX);
  lua_pushboolean(L, 1);
  return 1;
}

/* The done of a close from __gc: the lhandle is ours alone, nothing else. */
static void tr_gc_done(void *ud, int err) { free(ud); }

int slua_handle_gc(lua_State *L) {
  handle_ud *u = (handle_ud *)lua_touserdata(L, 1);
  lhandle *hd = u->hd;
  if (hd) {
    /* Not anchored any more: its stop or close completed, or its client
     * closed. Its listener or work may still hold hd: free it in done. */
    u->hd = NULL;
    slua_drop_pending(L, hd->cl);
    if (hd->term) simba_term_release(hd->term);
    /* With its client closed the free waits for nothing, and a close's done
     * would run on a thread of the library, maybe after this module is
     * unloaded (lua_close at exit): free it here. */
    if (!hd->h || !hd->cl->c || hd->kind->close_async(hd->h, tr_gc_done, hd) != SIMBA_OK) {
      if (hd->h) hd->kind->free(hd->h); /* closed client, or out of memory: the blocking way */
      free(hd);
    }
  }
  return 0;
}

int slua_handle_is_closed(lua_State *L) {
  lhandle *hd = slua_check_handle(L, 1);
  lua_pushboolean(L, !hd || !hd->h);
  return 1;
}

int slua_handle_name(lua_State *L) {
  slua_check_handle(L, 1);
  slua_push_owner_name(L);
  return 1;
}

int slua_handle_tostring(lua_State *L) {
  lhandle *hd = slua_check_handle(L, 1);
  slua_push_owner_name(L);
  lua_pushfstring(L, "simba.%s(%s%s)", hd->kind->what, lua_tostring(L, -1),
                  !hd->h ? ", closed" : (hd->term ? ", leader" : ""));
  return 1;
}
