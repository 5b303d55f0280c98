/* Locks of the Lua binding: client:lock(), try_lock(), unlock(), lock_async(),
 * semaphores and read/write locks (1.5), term:kind(), and the benchmark helper
 * of the raw C lock cycle. */
#include <dlfcn.h>

#include "simba_lua.h"

enum { SIMBA_LOCK_READ_ = 1, SIMBA_LOCK_WRITE_ = 2 }; /* simba_lock_mode_t (1.5) */

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
  } else if (err == SIMBA_ESTATE) { /* a semaphore's size: the detail is set for this call */
    result_t r;
    slua_capture(&r, err);
    slua_push_fail(L, &r);
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

/* ------------------------------------------------------------------------- */
/* Semaphores and read/write locks (1.5): looked up in the loaded libsimba, so
 * that the module builds against and loads with 1.4 (a reference to a SIMBA_1.5
 * symbol would refuse to load there); a call then says what it needs. */

static struct {
  int (*sem)(simba_term_t **, simba_client_t *, const char *, uint32_t, int64_t);
  int (*sem_try)(simba_term_t **, simba_client_t *, const char *, uint32_t);
  int (*sem_async)(simba_client_t *, const char *, uint32_t, int64_t, simba_lock_fn, void *);
  int (*rw)(simba_term_t **, simba_client_t *, const char *, int, int64_t);
  int (*rw_try)(simba_term_t **, simba_client_t *, const char *, int);
  int (*rw_async)(simba_client_t *, const char *, int, int64_t, simba_lock_fn, void *);
  int (*term_kind)(const simba_term_t *);
  const char *(*kind_name)(int);
} p15;
static pthread_once_t p15_once = PTHREAD_ONCE_INIT;

static void p15_resolve(void) {
  static const char *const names[] = {
      "simba_semaphore_acquire", "simba_semaphore_try_acquire", "simba_semaphore_acquire_async",
      "simba_rwlock_acquire",    "simba_rwlock_try_acquire",    "simba_rwlock_acquire_async",
      "simba_term_kind",         "simba_term_kind_name"};
  void **slots[] = {(void **)&p15.sem,       (void **)&p15.sem_try,  (void **)&p15.sem_async,
                    (void **)&p15.rw,        (void **)&p15.rw_try,   (void **)&p15.rw_async,
                    (void **)&p15.term_kind, (void **)&p15.kind_name};
  void *h = dlopen("libsimba.so.1", RTLD_LAZY | RTLD_NOLOAD); /* the one loaded */
  size_t i;
  if (!h) return;
  for (i = 0; i < sizeof slots / sizeof slots[0]; ++i) *slots[i] = dlsym(h, names[i]);
}

void slua_resolve_1_5(void) { pthread_once(&p15_once, p15_resolve); }

static void need_1_5(lua_State *L, int present, const char *what) {
  if (!present)
    luaL_error(L, "simba: %s needs libsimba 1.5.0 or later; the loaded one is %s", what,
               simba_version_string());
}

/* A permit call: kind 'S' semaphore (its size at argument 3), 'R' read, 'W'
 * write; how 0 waits (an optional timeout, ms), 1 tries once, 2 is async
 * (timeout_ms, fn). A semaphore of another size is an operational failure
 * (nil, "...: semaphore NAME has N permits, not M", "ESTATE"): another
 * process chose the size. */
static int permit(lua_State *L, int kind, int how, const char *what) {
  lclient *cl = slua_live_client(L, 1);
  const char *name = slua_check_name(L, 2, what);
  int at = kind == 'S' ? 4 : 3, mode = kind == 'W' ? SIMBA_LOCK_WRITE_ : SIMBA_LOCK_READ_;
  uint32_t size = 0;
  simba_term_t *t = NULL;
  result_t r;
  call_t k;
  const int present[2][3] = {{!!p15.sem, !!p15.sem_try, !!p15.sem_async},
                             {!!p15.rw, !!p15.rw_try, !!p15.rw_async}};
  need_1_5(L, present[kind != 'S'][how], what);
  if (kind == 'S') {
    lua_Integer n = luaL_checkinteger(L, 3);
    luaL_argcheck(L, n >= 1 && n <= (lua_Integer)UINT32_MAX, 3, "permits must be 1..4294967295");
    size = (uint32_t)n;
  }
  if (how == 2) {
    lua_Integer ms = luaL_checkinteger(L, at);
    lock_rec *rec;
    luaL_checktype(L, at + 1, LUA_TFUNCTION);
    rec = (lock_rec *)malloc(sizeof *rec);
    if (!rec) return luaL_error(L, "simba: out of memory");
    rec->cl = cl;
    lua_pushvalue(L, at + 1);
    slua_anchor_set(L, 1, rec);
    k = slua_enter(cl, L);
    slua_capture(&r, kind == 'S' ? p15.sem_async(cl->c, name, size, (int64_t)ms, tr_lock, rec)
                                 : p15.rw_async(cl->c, name, mode, (int64_t)ms, tr_lock, rec));
    return slua_leave_rec_result(L, k, rec, what, &r);
  }
  {
    int64_t ms = (int64_t)luaL_optinteger(L, at, -1);
    k = slua_enter(cl, L);
    if (kind == 'S')
      slua_capture(&r,
                   how ? p15.sem_try(&t, cl->c, name, size) : p15.sem(&t, cl->c, name, size, ms));
    else
      slua_capture(&r, how ? p15.rw_try(&t, cl->c, name, mode) : p15.rw(&t, cl->c, name, mode, ms));
  }
  if (r.rc == SIMBA_ESTATE) {
    slua_leave(L, k);
    return slua_push_fail(L, &r);
  }
  return lock_result(L, k, t, what, &r);
}

int slua_client_semaphore(lua_State *L) { return permit(L, 'S', 0, "semaphore"); }
int slua_client_try_semaphore(lua_State *L) { return permit(L, 'S', 1, "try_semaphore"); }
int slua_client_semaphore_async(lua_State *L) { return permit(L, 'S', 2, "semaphore_async"); }
int slua_client_read_lock(lua_State *L) { return permit(L, 'R', 0, "read_lock"); }
int slua_client_try_read_lock(lua_State *L) { return permit(L, 'R', 1, "try_read_lock"); }
int slua_client_read_lock_async(lua_State *L) { return permit(L, 'R', 2, "read_lock_async"); }
int slua_client_write_lock(lua_State *L) { return permit(L, 'W', 0, "write_lock"); }
int slua_client_try_write_lock(lua_State *L) { return permit(L, 'W', 1, "try_write_lock"); }
int slua_client_write_lock_async(lua_State *L) { return permit(L, 'W', 2, "write_lock_async"); }

/* term:kind() -> "ELECTION", "LOCK", "SEMAPHORE", "READ" or "WRITE" */
int slua_term_kind(lua_State *L) {
  term_ud *u = slua_check_term(L, 1);
  int v;
  need_1_5(L, !!p15.term_kind, "term:kind");
  v = p15.term_kind(u->t);
  slua_push_name(L, p15.kind_name(v), v);
  return 1;
}

/* simba.kind_name(n) -> the library's name, "UNKNOWN(n)" for one it does not define */
int slua_kind_name(lua_State *L) {
  int v = (int)luaL_checkinteger(L, 1);
  need_1_5(L, !!p15.kind_name, "kind_name");
  slua_push_name(L, p15.kind_name(v), v);
  return 1;
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
