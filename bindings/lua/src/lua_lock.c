/* Locks of the Lua binding: client:lock(), try_lock(), unlock(), lock_async(),
 * and the benchmark helper of the raw C lock cycle. */
#include "simba_lua.h"

/* The end of a blocking lock call: the term (pushed before slua_leave() may
 * raise, so that its __gc releases it), or the failure. */
static int lock_result(lua_State *L, call_t k, simba_term_t *t, const char *what,
                       const result_t *r) {
  if (r->rc == SIMBA_OK) slua_push_term(L, k.cl, t, 1, 1);
  slua_leave(L, k);
  if (r->rc != SIMBA_OK) return slua_fail(L, what, r);
  return 1;
}

/* client:lock(name[, timeout_ms]) -> term | nil, msg, code. Without a timeout
 * it waits without bound. */
int slua_client_lock(lua_State *L) {
  lclient *cl = slua_live_client(L, 1);
  const char *name = slua_check_name(L, 2, "lock");
  lua_Integer ms = luaL_optinteger(L, 3, -1);
  simba_term_t *t = NULL;
  result_t r;
  call_t k = slua_enter(cl, L);
  slua_capture(&r, simba_lock_acquire(&t, cl->c, name, (int64_t)ms));
  return lock_result(L, k, t, "lock", &r);
}

int slua_client_try_lock(lua_State *L) {
  lclient *cl = slua_live_client(L, 1);
  const char *name = slua_check_name(L, 2, "try_lock");
  simba_term_t *t = NULL;
  result_t r;
  call_t k = slua_enter(cl, L);
  slua_capture(&r, simba_lock_try_acquire(&t, cl->c, name));
  return lock_result(L, k, t, "try_lock", &r);
}

int slua_client_unlock(lua_State *L) {
  term_ud *u = slua_check_term(L, 2);
  if (!u->is_lock) return luaL_argerror(L, 2, "not a lock term");
  lua_settop(L, 2);
  lua_remove(L, 1);
  return slua_term_release(L);
}

/* client:lock_async(name, timeout_ms, fn(term | nil, msg, code)) */
typedef struct {
  lclient *cl;
} lock_rec;

static void tr_lock(void *ud, int err, simba_term_t *t) {
  lock_rec *rec = (lock_rec *)ud;
  lclient *cl = rec->cl;
  lua_State *L = slua_cb_state(cl);
  if (L && !lua_checkstack(L, 8)) L = NULL;
  if (L) slua_anchor_get(L, cl, rec);
  if (!L || !lua_isfunction(L, -1)) {
    if (L) lua_pop(L, 1);
    if (err == SIMBA_OK) simba_term_release(t); /* nobody can take it: release */
    free(rec);
    return;
  }
  slua_anchor_clear(L, cl, rec);
  if (err == SIMBA_OK) {
    slua_push_term(L, cl, t, 1, 1);
    lua_pushnil(L);
    lua_pushnil(L);
  } else {
    lua_pushnil(L);
    lua_pushstring(L, simba_strerror(err));
    slua_push_code(L, err);
  }
  slua_cb_invoke(cl, L, 3);
  free(rec);
}

int slua_client_lock_async(lua_State *L) {
  lclient *cl = slua_live_client(L, 1);
  const char *name = slua_check_name(L, 2, "lock_async");
  lua_Integer ms = luaL_checkinteger(L, 3);
  lock_rec *rec;
  result_t r;
  call_t k;
  luaL_checktype(L, 4, LUA_TFUNCTION);
  rec = (lock_rec *)malloc(sizeof *rec);
  if (!rec) return luaL_error(L, "simba: out of memory");
  rec->cl = cl;
  lua_pushvalue(L, 4);
  slua_anchor_set(L, 1, rec);
  k = slua_enter(cl, L);
  slua_capture(&r, simba_lock_acquire_async(cl->c, name, (int64_t)ms, tr_lock, rec));
  return slua_leave_rec_result(L, k, rec, "lock_async", &r);
}

/* Benchmark helper: the raw C lock cycle on the same client, same process. */
int slua_client_bench_c_cycle(lua_State *L) {
  lclient *cl = slua_live_client(L, 1);
  const char *name = slua_check_name(L, 2, "_bench_c_cycle");
  lua_Integer n = luaL_checkinteger(L, 3), i;
  int64_t t0 = slua_now_ms();
  result_t r;
  call_t k = slua_enter(cl, L);
  slua_capture(&r, SIMBA_OK);
  for (i = 0; i < n; ++i) {
    simba_term_t *t = NULL;
    int rc = simba_lock_acquire(&t, cl->c, name, 10000);
    if (rc == SIMBA_OK) rc = simba_lock_release(t);
    if (rc != SIMBA_OK) {
      slua_capture(&r, rc);
      break;
    }
  }
  slua_leave(L, k);
  if (r.rc != SIMBA_OK) return slua_push_fail(L, &r);
  lua_pushinteger(L, (lua_Integer)(slua_now_ms() - t0));
  return 1;
}
