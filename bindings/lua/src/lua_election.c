/* Elections of the Lua binding (simba.election): client:election() and the
 * listener trampolines. Stop, step_down, stop_wait and close are the
 * handle's (lua_handle.c). */
#include "simba_lua.h"

/* User value 1 of the election userdata: {client = ud, on_elected = f, on_revoked = f}. */
static void push_election_field(lua_State *L, lhandle *el, const char *field) {
  slua_anchor_get(L, el->cl, el);
  if (lua_isnil(L, -1)) return;
  lua_getiuservalue(L, -1, 1);
  lua_getfield(L, -1, field);
  lua_replace(L, -3);
  lua_pop(L, 1);
}

/* Push the listener function @p field of the election (1), or nothing (0);
 * 0 as well when no Lua state may run it. */
static int push_listener(lua_State *L, lhandle *el, const char *field) {
  if (!L || !lua_checkstack(L, 8)) return 0;
  push_election_field(L, el, field);
  if (lua_isfunction(L, -1)) return 1;
  lua_pop(L, 1);
  return 0;
}

static void tr_elected(void *ud, simba_term_t *t) {
  lhandle *el = (lhandle *)ud;
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
  lhandle *el = (lhandle *)ud;
  lclient *cl = el->cl;
  lua_State *L = slua_cb_state(cl);
  if (el->term == t) {
    el->term = NULL;
    simba_term_release(t);
  }
  if (!push_listener(L, el, "on_revoked")) return;
  slua_push_term(L, cl, t, 0, 0);
  slua_push_name(L, simba_revoke_reason_name(reason), (int)reason);
  slua_cb_invoke(cl, L, 2);
}

static int election_stop(void *e, simba_done_fn done, void *ud) {
  return simba_election_stop((simba_election_t *)e, done, ud);
}

static int election_step_down(void *e, int64_t cooldown, simba_done_fn done, void *ud) {
  return simba_election_step_down((simba_election_t *)e, cooldown, done, ud);
}

static void election_free(void *e) { simba_election_free((simba_election_t *)e); }

static int election_close_async(void *e, simba_done_fn done, void *ud) {
  return simba_election_close_async((simba_election_t *)e, done, ud);
}

static const slua_kind ELECTION = {ELECTION_MT,        "election",    election_stop,
                                   election_step_down, election_free, election_close_async};

static lhandle *check_election(lua_State *L, int i) {
  return ((handle_ud *)luaL_checkudata(L, i, ELECTION_MT))->hd;
}

/* election:term() : the current term, or nil. */
int slua_election_term(lua_State *L) {
  lhandle *el = check_election(L, 1);
  if (!el || !el->term) {
    lua_pushnil(L);
    return 1;
  }
  slua_push_term(L, el->cl, el->term, 0, 0);
  return 1;
}

int slua_election_is_leader(lua_State *L) {
  lhandle *el = check_election(L, 1);
  lua_pushboolean(L, el && el->term && simba_term_is_valid(el->term));
  return 1;
}

static int start_election(lua_State *L, lhandle *el) {
  simba_election_t *e = NULL;
  simba_listener_t lis;
  int rc;
  lis.on_elected = tr_elected;
  lis.on_revoked = tr_revoked;
  lis.ud = el;
  rc = simba_election_start(&e, el->cl->c, lua_tostring(L, 2), &lis);
  el->h = e;
  return rc;
}

/* client:election(name, {on_elected = f(term), on_revoked = f(term, reason)}) */
int slua_client_election(lua_State *L) {
  lclient *cl = slua_live_client(L, 1);
  lhandle *el;
  int i;
  static const char *const fields[] = {"on_elected", "on_revoked", NULL};
  slua_check_name(L, 2, "election");
  luaL_checktype(L, 3, LUA_TTABLE);
  lua_settop(L, 3);
  for (i = 0; fields[i]; ++i) {
    int t = lua_getfield(L, 3, fields[i]);
    if (t != LUA_TNIL && t != LUA_TFUNCTION)
      return luaL_error(L, "simba: election listener field '%s' must be a function", fields[i]);
    lua_pop(L, 1);
  }
  el = slua_new_handle(L, cl, &ELECTION);
  for (i = 0; fields[i]; ++i) {
    lua_getfield(L, 3, fields[i]);
    lua_setfield(L, -2, fields[i]);
  }
  return slua_start_handle(L, el, 4, "election", start_election);
}
