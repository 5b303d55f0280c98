/* Terms of the Lua binding (simba.term): an election's, a task run's or a
 * lock's term, its accessors, on_revoked and release. An ended term (revoked,
 * released) stays readable: the userdata keeps its reference until it is
 * collected; only ensure_valid() fails (EEXPIRED). */
#include "simba_lua.h"

/* Push a term userdata holding a reference to @p t (retained unless @p owned);
 * its user value is the client userdata (pushed by the caller at @p cidx, or
 * looked up). */
void slua_push_term(lua_State *L, lclient *cl, simba_term_t *t, int owned, int is_lock) {
  term_ud *u = (term_ud *)lua_newuserdatauv(L, sizeof *u, 1);
  u->t = t;
  u->cl = cl;
  u->is_lock = is_lock;
  u->released = 0;
  if (!owned) simba_term_retain(t);
  luaL_setmetatable(L, TERM_MT);
  if (slua_push_client(L, cl)) lua_setiuservalue(L, -2, 1);
}

term_ud *slua_check_term(lua_State *L, int i) { return (term_ud *)luaL_checkudata(L, i, TERM_MT); }

int slua_term_name(lua_State *L) {
  lua_pushstring(L, simba_term_name(slua_check_term(L, 1)->t));
  return 1;
}

int slua_term_token(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)simba_term_token(slua_check_term(L, 1)->t));
  return 1;
}

int slua_term_valid(lua_State *L) {
  lua_pushboolean(L, simba_term_is_valid(slua_check_term(L, 1)->t));
  return 1;
}

int slua_term_remaining(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)simba_term_remaining_ms(slua_check_term(L, 1)->t));
  return 1;
}

int slua_term_ensure_valid(lua_State *L) {
  term_ud *u = slua_check_term(L, 1);
  lua_Integer min = luaL_optinteger(L, 2, 0);
  result_t r;
  if (min < 0) luaL_argerror(L, 2, "negative minimum");
  slua_capture(&r, simba_term_ensure_valid(u->t, (int64_t)min));
  if (r.rc != SIMBA_OK) return slua_fail(L, "ensure_valid", &r);
  lua_pushvalue(L, 1);
  return 1;
}

/* term:reason() : nil while not revoked, else the library's name. */
int slua_term_reason(lua_State *L) {
  simba_revoke_reason_t why = simba_term_revoke_reason(slua_check_term(L, 1)->t);
  if (why == SIMBA_REVOKE_NONE) {
    lua_pushnil(L);
  } else {
    slua_push_name(L, simba_revoke_reason_name(why), (int)why);
  }
  return 1;
}

int slua_term_is_lock(lua_State *L) {
  lua_pushboolean(L, slua_check_term(L, 1)->is_lock);
  return 1;
}

int slua_term_revoke_fd(lua_State *L) {
  term_ud *u = slua_check_term(L, 1);
  int fd = simba_term_revoke_fd(u->t);
  result_t r;
  if (fd < 0) {
    slua_capture(&r, SIMBA_ENOMEM);
    return slua_push_fail(L, &r);
  }
  lua_pushinteger(L, fd);
  return 1;
}

static int term_ended(const void *t) { return !simba_term_is_valid((const simba_term_t *)t); }

/* term:wait_revoked([timeout_ms]) -> true | nil, msg, "ETIMEDOUT": drive the
 * term's client until the term is revoked or no longer valid (the library's
 * simba_term_wait_revoked would block the Lua thread, which runs the loop
 * that revokes it). */
int slua_term_wait_revoked(lua_State *L) {
  term_ud *u = slua_check_term(L, 1);
  lua_Integer ms = luaL_optinteger(L, 2, -1);
  result_t r;
  slua_check_may_wait(L, u->cl, "wait_revoked");
  if (!slua_drive_until(L, u->cl, term_ended, u->t,
                        ms < 0 ? INT64_MAX : slua_now_ms() + (int64_t)ms)) {
    r.rc = SIMBA_ETIMEDOUT;
    snprintf(r.msg, sizeof r.msg, "%s: the term was not revoked within the timeout",
             simba_strerror(SIMBA_ETIMEDOUT));
    return slua_push_fail(L, &r);
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* term:on_revoked(fn): fn(term, reason) runs exactly once. */
typedef struct {
  lclient *cl;
} revoked_rec;

static void tr_term_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t reason) {
  revoked_rec *rec = (revoked_rec *)ud;
  lclient *cl = rec->cl;
  lua_State *L = slua_cb_state(cl);
  if (L && lua_checkstack(L, 6)) {
    if (slua_anchor_fn(L, cl, rec)) {
      slua_anchor_clear(L, cl, rec);
      slua_push_term(L, cl, t, 0, 0);
      slua_push_name(L, simba_revoke_reason_name(reason), (int)reason);
      slua_cb_invoke(cl, L, 2);
    } else {
      slua_anchor_clear(L, cl, rec);
    }
  }
  free(rec);
}

/* A callback record of @p u's client, the function at @p fidx (or false when
 * none) anchored under it. */
static revoked_rec *anchored_rec(lua_State *L, term_ud *u, int fidx) {
  revoked_rec *rec;
  if (!slua_push_client(L, u->cl)) luaL_error(L, "simba: the term's client is gone");
  rec = (revoked_rec *)malloc(sizeof *rec);
  if (!rec) luaL_error(L, "simba: out of memory");
  rec->cl = u->cl;
  if (lua_isnil(L, fidx)) {
    lua_pushboolean(L, 0);
  } else {
    lua_pushvalue(L, fidx);
  }
  slua_anchor_set(L, -2, rec);
  lua_pop(L, 1);
  return rec;
}

int slua_term_on_revoked(lua_State *L) {
  term_ud *u = slua_check_term(L, 1);
  revoked_rec *rec;
  result_t r;
  call_t k;
  luaL_checktype(L, 2, LUA_TFUNCTION);
  rec = anchored_rec(L, u, 2);
  k = slua_enter(u->cl, L);
  slua_capture(&r, simba_term_on_revoked(u->t, tr_term_revoked, rec));
  return slua_leave_rec_result(L, k, rec, "on_revoked", &r);
}

/* Release: a lock term's release (waits for the backend); any other term
 * has nothing to release. The term stays readable. Idempotent. */
int slua_term_release(lua_State *L) {
  term_ud *u = slua_check_term(L, 1);
  result_t r;
  call_t k;
  if (u->released || !u->is_lock) {
    u->released = 1;
    lua_pushboolean(L, 1);
    return 1;
  }
  u->released = 1;
  simba_term_retain(u->t); /* ours, for the accessors; the release drops the caller's */
  k = slua_enter(u->cl, L);
  slua_capture(&r, simba_lock_release(u->t));
  return slua_leave_result(L, k, "release", &r);
}

/* The done of term:close_async: done(ok, code), if a function was given. */
static void tr_term_close_done(void *ud, int err) {
  revoked_rec *rec = (revoked_rec *)ud;
  lclient *cl = rec->cl;
  lua_State *L = slua_cb_state(cl);
  if (L && lua_checkstack(L, 6)) {
    int has_fn = slua_anchor_fn(L, cl, rec);
    slua_anchor_clear(L, cl, rec);
    if (has_fn) slua_cb_invoke_done(cl, L, err);
  }
  free(rec);
}

/* term:close_async([done]) : the one close shape (libsimba 1.4), from
 * anywhere, never waiting. A lock term not released yet is released (as
 * release() does, revoked STOPPED); done(ok, code) runs once the backend
 * answered and every on_revoked of the term ran, inside a later
 * process()/run(). Any other term: done follows the callbacks already queued
 * for it. The term stays readable (the userdata keeps its own reference). */
int slua_term_close_async(lua_State *L) {
  term_ud *u = slua_check_term(L, 1);
  revoked_rec *rec;
  result_t r;
  call_t k;
  lua_settop(L, 2);
  if (!lua_isnil(L, 2)) luaL_checktype(L, 2, LUA_TFUNCTION);
  if (!u->cl->c) {
    slua_capture(&r, SIMBA_ECLOSED); /* no loop left to run done */
    return slua_fail(L, "close_async", &r);
  }
  rec = anchored_rec(L, u, 2);
  /* A lock's close releases it once; later ones (and other terms') only drop
   * the extra reference taken here. */
  simba_term_retain(u->t);
  k = slua_enter(u->cl, L);
  slua_capture(&r, simba_term_close_async(u->t, tr_term_close_done, rec));
  if (r.rc == SIMBA_OK) {
    u->released = 1;
  } else {
    simba_term_release(u->t);
  }
  return slua_leave_rec_result(L, k, rec, "close_async", &r);
}

int slua_term_gc(lua_State *L) {
  term_ud *u = slua_check_term(L, 1);
  if (u->t) {
    /* The last reference of a held lock term releases it without waiting.
     * Not simba_term_close_async: with the client closed its done would run
     * on a thread of the library, maybe after lua_close unloaded us. */
    call_t k = slua_enter(u->cl, L);
    simba_term_release(u->t);
    slua_leave_noraise(k);
    u->t = NULL;
  }
  return 0;
}

int slua_term_tostring(lua_State *L) {
  term_ud *u = slua_check_term(L, 1);
  simba_revoke_reason_t why = simba_term_revoke_reason(u->t);
  char buf[32];
  lua_pushfstring(L, "simba.term(%s, token %I, %s)", simba_term_name(u->t),
                  (lua_Integer)simba_term_token(u->t),
                  simba_term_is_valid(u->t) ? "valid"
                  : why == SIMBA_REVOKE_NONE
                      ? "invalid"
                      : slua_name(buf, sizeof buf, simba_revoke_reason_name(why), (int)why));
  return 1;
}

int slua_term_eq(lua_State *L) {
  term_ud *a = (term_ud *)luaL_testudata(L, 1, TERM_MT);
  term_ud *b = (term_ud *)luaL_testudata(L, 2, TERM_MT);
  lua_pushboolean(L, a && b && a->t && a->t == b->t);
  return 1;
}
