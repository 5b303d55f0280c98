/* Observers of the Lua binding (simba.observer): client:observe() follows who
 * holds a name without contending for it (simba_observe_start). The function
 * runs on the Lua thread, inside process()/run() like every callback. An
 * observer is a handle (lua_handle.c) without a stop: anchored in its client
 * until closed (or the client closed), like an election. */
#include "simba_lua.h"

/* fn(name, holder_session | nil, holder_client | nil, token) */
static void tr_observe(void *ud, const char *name, const char *session, const char *client,
                       uint64_t token) {
  lhandle *ob = (lhandle *)ud;
  lclient *cl = ob->cl;
  lua_State *L = slua_cb_state(cl);
  if (!L || !lua_checkstack(L, 8)) return;
  slua_anchor_get(L, cl, ob);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  lua_getiuservalue(L, -1, 1);
  lua_getfield(L, -1, "fn");
  lua_replace(L, -3);
  lua_pop(L, 1);
  lua_pushstring(L, name);
  if (session) {
    lua_pushstring(L, session);
  } else {
    lua_pushnil(L);
  }
  if (client) {
    lua_pushstring(L, client);
  } else {
    lua_pushnil(L);
  }
  lua_pushinteger(L, (lua_Integer)token);
  slua_cb_invoke(cl, L, 4); /* ob may be freed from here on */
}

/* Outside callbacks it waits for none (they all run on the Lua thread); from
 * a callback no further call starts. */
static void observer_free(void *o) { simba_observer_free((simba_observer_t *)o); }

static int observer_close_async(void *o, simba_done_fn done, void *ud) {
  return simba_observer_close_async((simba_observer_t *)o, done, ud);
}

static const slua_kind OBSERVER = {OBSERVER_MT, "observer",    NULL,
                                   NULL,        observer_free, observer_close_async};

/* name at 2, poll_ms at 4 */
static int start_observer(lua_State *L, lhandle *ob) {
  int64_t poll_ms = (int64_t)lua_tointeger(L, 4);
  simba_observer_t *o = NULL;
  int rc = simba_observe_start(&o, ob->cl->c, lua_tostring(L, 2), poll_ms, tr_observe, ob);
  ob->h = o;
  return rc;
}

/* client:observe(name, fn(name, session, client, token)[, poll_ms]) -> observer */
int slua_client_observe(lua_State *L) {
  lclient *cl = slua_live_client(L, 1);
  lhandle *ob;
  slua_check_name(L, 2, "observe");
  luaL_checktype(L, 3, LUA_TFUNCTION);
  luaL_optinteger(L, 4, 0);
  lua_settop(L, 4);
  ob = slua_new_handle(L, cl, &OBSERVER);
  lua_pushvalue(L, 3);
  lua_setfield(L, -2, "fn");
  return slua_start_handle(L, ob, 5, "observe", start_observer);
}
