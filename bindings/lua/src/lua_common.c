/* Shared plumbing of the Lua binding: names (from the library), checked
 * strings, results of calls into libsimba, the client's anchors, entering and
 * leaving libsimba, callbacks. */
#include "simba_lua.h"

int64_t slua_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------- */
/* Names (from the library) and checked strings */

/* The library's name @p lib of value @p v, or "UNKNOWN(v)" (in @p buf) when
 * the library does not know it: a newer library may add values. */
const char *slua_name(char *buf, size_t n, const char *lib, int v) {
  if (strcmp(lib, "UNKNOWN") != 0) return lib;
  snprintf(buf, n, "UNKNOWN(%d)", v);
  return buf;
}

void slua_push_name(lua_State *L, const char *lib, int v) {
  char buf[32];
  lua_pushstring(L, slua_name(buf, sizeof buf, lib, v));
}

void slua_push_code(lua_State *L, int rc) { slua_push_name(L, simba_code_name(rc), rc); }

/* libsimba takes C strings: an embedded NUL would silently cut @p s there
 * ("a\0b" would be "a"). Raise EINVAL misuse naming the call @p fn and the
 * string @p what instead. Every string the binding passes to C is checked here
 * (lease names through slua_check_name, which asks the library). */
void slua_check_nul(lua_State *L, const char *s, size_t len, const char *fn, const char *what) {
  const char *z = (const char *)memchr(s, '\0', len);
  if (z) {
    result_t r;
    r.rc = SIMBA_EINVAL;
    snprintf(r.msg, sizeof r.msg, "%s: %s contains a NUL byte at index %lu",
             simba_strerror(SIMBA_EINVAL), what, (unsigned long)(z - s));
    slua_raise_misuse(L, fn, &r);
  }
}

/* The string argument @p i, without a NUL byte. */
const char *slua_check_text(lua_State *L, int i, const char *fn, const char *what) {
  size_t len;
  const char *s = luaL_checklstring(L, i, &len);
  slua_check_nul(L, s, len, fn, what);
  return s;
}

/* The lease name argument @p i, checked by the library's rule with its
 * length (a NUL byte is refused, not cut). */
const char *slua_check_name(lua_State *L, int i, const char *fn) {
  size_t len;
  const char *s = luaL_checklstring(L, i, &len);
  result_t r;
  slua_capture(&r, simba_lease_name_check(s, len));
  if (r.rc != SIMBA_OK) slua_raise_misuse(L, fn, &r);
  return s;
}

void slua_capture(result_t *r, int rc) {
  r->rc = rc;
  r->msg[0] = '\0';
  if (rc < 0) {
    const char *d = simba_last_error();
    snprintf(r->msg, sizeof r->msg, "%s%s%s", simba_strerror(rc), (d && *d) ? ": " : "",
             d ? d : "");
  }
}

/* nil, message, code: an operational failure. */
int slua_push_fail(lua_State *L, const result_t *r) {
  lua_pushnil(L);
  lua_pushstring(L, r->msg);
  slua_push_code(L, r->rc);
  return 3;
}

/* error(): misuse (bad argument, wrong state, a blocking call from a callback). */
int slua_raise_misuse(lua_State *L, const char *what, const result_t *r) {
  char buf[32];
  return luaL_error(L, "simba: %s: %s (%s)", what, r->msg,
                    slua_name(buf, sizeof buf, simba_code_name(r->rc), r->rc));
}

static int is_misuse(int rc) {
  return rc == SIMBA_EINVAL || rc == SIMBA_ESTATE || rc == SIMBA_EWOULDBLOCK;
}

/* Either misuse (raises) or nil, msg, code. */
int slua_fail(lua_State *L, const char *what, const result_t *r) {
  if (is_misuse(r->rc)) return slua_raise_misuse(L, what, r);
  return slua_push_fail(L, r);
}

/* ------------------------------------------------------------------------- */
/* Anchors */

/* Push the client userdata of @p cl, or nothing and return 0. */
int slua_push_client(lua_State *L, lclient *cl) {
  if (cl->self_ref != LUA_NOREF) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, cl->self_ref);
    return 1;
  }
  lua_getfield(L, LUA_REGISTRYINDEX, WEAK_KEY);
  lua_rawgetp(L, -1, cl);
  lua_remove(L, -2);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return 0;
  }
  return 1;
}

/* anchors[key] = value at top (popped). Client userdata at @p cidx. */
void slua_anchor_set(lua_State *L, int cidx, const void *key) {
  cidx = lua_absindex(L, cidx);
  lua_getiuservalue(L, cidx, 1);
  lua_insert(L, -2);
  lua_rawsetp(L, -2, key);
  lua_pop(L, 1);
}

void slua_anchor_clear(lua_State *L, lclient *cl, const void *key) {
  if (!slua_push_client(L, cl)) return;
  lua_getiuservalue(L, -1, 1);
  lua_pushnil(L);
  lua_rawsetp(L, -2, key);
  lua_pop(L, 2);
}

/* Push anchors[key] (nil if none or the client is unreachable). */
void slua_anchor_get(lua_State *L, lclient *cl, const void *key) {
  if (!slua_push_client(L, cl)) {
    lua_pushnil(L);
    return;
  }
  lua_getiuservalue(L, -1, 1);
  lua_rawgetp(L, -1, key);
  lua_replace(L, -3);
  lua_pop(L, 1);
}

/* Push anchors[key] and return 1 if it is a function; else push nothing, 0. */
int slua_anchor_fn(lua_State *L, lclient *cl, const void *key) {
  slua_anchor_get(L, cl, key);
  if (lua_isfunction(L, -1)) return 1;
  lua_pop(L, 1);
  return 0;
}

/* A table for user value 1 of an election or task userdata, with the client
 * (argument 1) and the name (argument 2) of the call that makes it. */
void slua_push_owner_table(lua_State *L) {
  lua_createtable(L, 0, 4);
  lua_pushvalue(L, 1);
  lua_setfield(L, -2, "client");
  lua_pushvalue(L, 2);
  lua_setfield(L, -2, "name");
}

/* Push the name in user value 1 of the election or task userdata at index 1. */
void slua_push_owner_name(lua_State *L) {
  lua_getiuservalue(L, 1, 1);
  lua_getfield(L, -1, "name");
}

/* ------------------------------------------------------------------------- */
/* Calls into libsimba */

/* Calls into libsimba that may run callbacks: slua_enter() records the Lua
 * state they run on; slua_leave() restores it and re-raises a callback's
 * error. */
call_t slua_enter(lclient *cl, lua_State *L) {
  call_t k;
  k.cl = cl;
  k.prev = cl->L;
  cl->L = L;
  return k;
}

void slua_leave_noraise(call_t k) { k.cl->L = k.prev; }

void slua_leave(lua_State *L, call_t k) {
  lclient *cl = k.cl;
  cl->L = k.prev;
  if (cl->pending != LUA_NOREF && cl->depth == 0) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, cl->pending);
    luaL_unref(L, LUA_REGISTRYINDEX, cl->pending);
    cl->pending = LUA_NOREF;
    lua_error(L);
  }
}

/* slua_leave(), then the call's result: true, or slua_fail(). */
int slua_leave_result(lua_State *L, call_t k, const char *what, const result_t *r) {
  slua_leave(L, k);
  if (r->rc != SIMBA_OK) return slua_fail(L, what, r);
  lua_pushboolean(L, 1);
  return 1;
}

/* The same for a call given the anchored record @p rec (a malloc'ed callback
 * record): when the call failed, no callback comes, and rec is dropped. */
int slua_leave_rec_result(lua_State *L, call_t k, void *rec, const char *what, const result_t *r) {
  if (r->rc != SIMBA_OK) {
    slua_anchor_clear(L, k.cl, rec);
    free(rec);
  }
  return slua_leave_result(L, k, what, r);
}

/* The end of a call that started an election or a task, anchored under
 * @p obj: its userdata (at @p top), or the failure (the anchor dropped). */
int slua_leave_started(lua_State *L, call_t k, const void *obj, const char *what, const result_t *r,
                       int top) {
  if (r->rc != SIMBA_OK) slua_anchor_clear(L, k.cl, obj);
  slua_leave(L, k);
  if (r->rc != SIMBA_OK) return slua_fail(L, what, r);
  lua_settop(L, top);
  return 1;
}

/* ------------------------------------------------------------------------- */
/* Callbacks */

/* Drop a stored callback error (finalizers cannot raise). */
void slua_drop_pending(lua_State *L, lclient *cl) {
  if (cl->pending != LUA_NOREF) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, cl->pending);
    lua_warning(L, "simba: error in a callback during collection: ", 1);
    lua_warning(L, lua_isstring(L, -1) ? lua_tostring(L, -1) : "(not a string)", 0);
    lua_pop(L, 1);
    luaL_unref(L, LUA_REGISTRYINDEX, cl->pending);
    cl->pending = LUA_NOREF;
  }
}

/* The Lua state a callback may use: the current call's, and only on the host
 * thread (EXTERNAL mode runs every callback there; anything else is counted
 * and dropped rather than touching Lua from a second thread). */
lua_State *slua_cb_state(lclient *cl) {
  if (!pthread_equal(pthread_self(), cl->host)) {
    __atomic_add_fetch(&cl->foreign, 1, __ATOMIC_RELAXED);
    return NULL;
  }
  return cl->L;
}

/* Trampoline core: function and @p nargs arguments are on cl->L; call them
 * protected; keep the first error. Never raises. */
void slua_cb_invoke(lclient *cl, lua_State *L, int nargs) {
  int rc;
  cl->depth++;
  rc = lua_pcall(L, nargs, 0, 0);
  cl->depth--;
  if (rc != LUA_OK) slua_keep_error(L, cl);
}

/* A completion: the function at the top of @p L called as fn(true, nil) on
 * SIMBA_OK, else fn(nil, code). Never raises. */
void slua_cb_invoke_done(lclient *cl, lua_State *L, int err) {
  if (err == SIMBA_OK) {
    lua_pushboolean(L, 1);
    lua_pushnil(L);
  } else {
    lua_pushnil(L);
    slua_push_code(L, err);
  }
  slua_cb_invoke(cl, L, 2);
}

/* Keep the error at the top of @p L (popped) for slua_leave() to raise,
 * unless an earlier one is kept already. */
void slua_keep_error(lua_State *L, lclient *cl) {
  if (cl->pending == LUA_NOREF) {
    cl->pending = luaL_ref(L, LUA_REGISTRYINDEX);
  } else {
    lua_pop(L, 1);
  }
}

/* A client hook (event sink, logger) anchored under @p key: fn(a, b). */
void slua_invoke_hook(lclient *cl, const void *key, const char *a, const char *b) {
  lua_State *L = slua_cb_state(cl);
  if (!L || !lua_checkstack(L, 6)) return;
  if (!slua_anchor_fn(L, cl, key)) return;
  lua_pushstring(L, a);
  lua_pushstring(L, b);
  slua_cb_invoke(cl, L, 2);
}
