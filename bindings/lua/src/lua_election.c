/* Elections of the Lua binding (simba.election): client:election(), the
 * listener trampolines, stop, step_down, close. */
#include "simba_lua.h"

/* User value 1 of the election userdata: {client = ud, on_elected = f, on_revoked = f}. */
static void push_election_field(lua_State *L, lelection *el, const char *field) {
  slua_anchor_get(L, el->cl, el);
  if (lua_isnil(L, -1)) return;
  lua_getiuservalue(L, -1, 1);
  lua_getfield(L, -1, field);
  lua_replace(L, -3);
  lua_pop(L, 1);
}

/* Push the listener function @p field of the election (1), or nothing (0);
 * 0 as well when no Lua state may run it. */
static int push_listener(lua_State *L, lelection *el, const char *field) {
  if (!L || !lua_checkstack(L, 8)) return 0;
  push_election_field(L, el, field);
  if (lua_isfunction(L, -1)) return 1;
  lua_pop(L, 1);
  return 0;
}

static void tr_elected(void *ud, simba_term_t *t) {
  lelection *el = (lelection *)ud;
  lclient *cl = el->cl;
  lua_State *L = slua_cb_state(cl);
  if (el->term) simba_term_release(el->term);
  simba_term_retain(t);
  el->term = t;
  if (!push_listener(L, el, "on_elected")) return;
  slua_push_term(L, cl, t, 0, 0);
  slua_cb_invoke(cl, L, 1);
}

static void tr_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t reason) {
  lelection *el = (lelection *)ud;
  lclient *cl = el->cl;
  lua_State *L = slua_cb_state(cl);
  if (el->term == t) {
    el->term = NULL;
    simba_term_release(t);
  }
  if (!push_listener(L, el, "on_revoked")) return;
  slua_push_term(L, cl, t, 0, 0);
  lua_pushstring(L, slua_reason_name(reason) ? slua_reason_name(reason) : "NONE");
  slua_cb_invoke(cl, L, 2);
}

static election_ud *check_election(lua_State *L, int i) {
  return (election_ud *)luaL_checkudata(L, i, ELECTION_MT);
}

static lelection *live_election(lua_State *L, int i) {
  election_ud *u = check_election(L, i);
  if (!u->el || !u->el->e) luaL_error(L, "simba: election closed");
  return u->el;
}

static int start_stop(void *e, int64_t cooldown, simba_done_fn done, void *rec) {
  (void)cooldown;
  return simba_election_stop((simba_election_t *)e, done, rec);
}

static int start_step_down(void *e, int64_t cooldown, simba_done_fn done, void *rec) {
  return simba_election_step_down((simba_election_t *)e, cooldown, done, rec);
}

/* election:stop([done]) : starts the stop; done(ok, code) runs after the last on_revoked. */
int slua_election_stop(lua_State *L) {
  lelection *el;
  lua_settop(L, 2);
  el = live_election(L, 1);
  return slua_done_call(L, el->cl, el->e, start_stop, 0, 2, el, "stop", &el->stopped);
}

/* election:step_down(cooldown_ms[, done]) */
int slua_election_step_down(lua_State *L) {
  lelection *el;
  lua_Integer cooldown;
  lua_settop(L, 3);
  el = live_election(L, 1);
  cooldown = slua_check_cooldown(L, 2);
  return slua_done_call(L, el->cl, el->e, start_step_down, (int64_t)cooldown, 3, NULL, "step_down",
                        NULL);
}

/* election:stop_wait([timeout_ms]) : blocking stop, drives the loop. */
int slua_election_stop_wait(lua_State *L) {
  lelection *el = live_election(L, 1);
  lua_Integer ms = luaL_optinteger(L, 2, -1);
  result_t r;
  call_t k = slua_enter(el->cl, L);
  el->stopped = 1;
  slua_capture(&r, simba_election_stop_wait(el->e, (int64_t)ms));
  if (r.rc == SIMBA_OK) slua_anchor_clear(L, el->cl, el); /* stop completed: no callback comes */
  return slua_leave_result(L, k, "stop_wait", &r);
}

static void election_free_now(lua_State *L, lelection *el, int raise) {
  call_t k;
  simba_election_t *e = el->e;
  if (!e) return;
  k = slua_enter(el->cl, L);
  /* simba_election_free() detaches the listener before it stops the election,
   * so that the last term's on_revoked would not be delivered: outside
   * callbacks, stop and wait first (a no-op wait when already stopped), so
   * every on_elected keeps its on_revoked. */
  if (raise && el->cl->depth == 0 && el->cl->c) (void)simba_election_stop_wait(e, -1);
  simba_election_free(e); /* outside callbacks: waits for the stop and every callback */
  el->e = NULL;
  if (el->term) {
    simba_term_release(el->term);
    el->term = NULL;
  }
  slua_anchor_clear(L, el->cl, el);
  if (raise) {
    slua_leave(L, k);
  } else {
    slua_leave_noraise(k);
  }
}

/* election:close() : stop (if needed), wait, free. Idempotent. */
int slua_election_close(lua_State *L) {
  election_ud *u = check_election(L, 1);
  if (u->el) election_free_now(L, u->el, 1);
  lua_pushboolean(L, 1);
  return 1;
}

int slua_election_gc(lua_State *L) {
  election_ud *u = check_election(L, 1);
  lelection *el = u->el;
  if (el) {
    election_free_now(L, el, 0);
    slua_drop_pending(L, el->cl);
    /* Called from a callback, simba_election_free starts the stop and returns
     * with no further callback of the election starting: freeing is safe. */
    free(el);
    u->el = NULL;
  }
  return 0;
}

/* election:term() : the current term, or nil. */
int slua_election_term(lua_State *L) {
  lelection *el = check_election(L, 1)->el;
  if (!el || !el->term) {
    lua_pushnil(L);
    return 1;
  }
  slua_push_term(L, el->cl, el->term, 0, 0);
  return 1;
}

int slua_election_is_leader(lua_State *L) {
  lelection *el = check_election(L, 1)->el;
  lua_pushboolean(L, el && el->term && simba_term_is_valid(el->term));
  return 1;
}

int slua_election_name(lua_State *L) {
  check_election(L, 1);
  slua_push_owner_name(L);
  return 1;
}

int slua_election_tostring(lua_State *L) {
  election_ud *u = check_election(L, 1);
  slua_push_owner_name(L);
  lua_pushfstring(L, "simba.election(%s%s)", lua_tostring(L, -1),
                  !u->el || !u->el->e ? ", closed" : (u->el->term ? ", leader" : ""));
  return 1;
}

/* client:election(name, {on_elected = f(term), on_revoked = f(term, reason)}) */
int slua_client_election(lua_State *L) {
  lclient *cl = slua_live_client(L, 1);
  const char *name = luaL_checkstring(L, 2);
  lelection *el;
  election_ud *u;
  simba_listener_t lis;
  result_t r;
  call_t k;
  int i;
  static const char *const fields[] = {"on_elected", "on_revoked", NULL};
  luaL_checktype(L, 3, LUA_TTABLE);
  lua_settop(L, 3);
  for (i = 0; fields[i]; ++i) {
    int t = lua_getfield(L, 3, fields[i]);
    if (t != LUA_TNIL && t != LUA_TFUNCTION)
      return luaL_error(L, "simba: election listener field '%s' must be a function", fields[i]);
    lua_pop(L, 1);
  }
  el = (lelection *)calloc(1, sizeof *el);
  if (!el) return luaL_error(L, "simba: out of memory");
  el->cl = cl;
  u = (election_ud *)lua_newuserdatauv(L, sizeof *u, 1);
  u->el = el;
  luaL_setmetatable(L, ELECTION_MT); /* from here __gc frees el */
  slua_push_owner_table(L);
  for (i = 0; fields[i]; ++i) {
    lua_getfield(L, 3, fields[i]);
    lua_setfield(L, -2, fields[i]);
  }
  lua_setiuservalue(L, 4, 1);
  /* While started, the client's anchors keep the election (and its listener). */
  lua_pushvalue(L, 4);
  slua_anchor_set(L, 1, el);
  lis.on_elected = tr_elected;
  lis.on_revoked = tr_revoked;
  lis.ud = el;
  k = slua_enter(cl, L);
  slua_capture(&r, simba_election_start(&el->e, cl->c, name, &lis));
  if (r.rc != SIMBA_OK) el->e = NULL;
  return slua_leave_started(L, k, el, "election", &r, 4);
}
