/* simba: the Lua 5.4 binding of libsimba, a C module (see simba_lua.h): the
 * module's functions, the classes' method tables and luaopen_simba. The
 * methods are in lua_client.c, lua_handle.c, lua_election.c, lua_task.c,
 * lua_term.c, lua_lock.c and lua_observe.c. */
#include "simba_lua.h"

static int l_version(lua_State *L) {
  lua_pushstring(L, simba_version_string());
  lua_pushinteger(L, (lua_Integer)simba_version());
  return 2;
}

static int l_strerror(lua_State *L) {
  lua_pushstring(L, simba_strerror((int)luaL_checkinteger(L, 1)));
  return 1;
}

/* simba.code_name(-9) == "EBUSY", reason_name, event_name, status_name: the
 * library's names (upvalue 1 says which); a value the library does not know
 * gives "UNKNOWN(n)". */
static const char *const NAME_FNS[] = {"code_name", "reason_name", "event_name", "status_name",
                                       NULL};

static int l_name(lua_State *L) {
  int v = (int)luaL_checkinteger(L, 1);
  const char *n;
  switch (lua_tointeger(L, lua_upvalueindex(1))) {
    case 0:
      n = simba_code_name(v);
      break;
    case 1:
      n = simba_revoke_reason_name((simba_revoke_reason_t)v);
      break;
    case 2:
      n = simba_event_name((simba_event_type_t)v);
      break;
    default:
      n = simba_session_status_name((simba_session_status_t)v);
      break;
  }
  slua_push_name(L, n, v);
  return 1;
}

/* simba.check_name(name) -> true | nil, msg, "EINVAL" (the library's rule) */
static int l_check_name(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  result_t r;
  slua_capture(&r, simba_lease_name_check(s, len));
  if (r.rc != SIMBA_OK) return slua_push_fail(L, &r);
  lua_pushboolean(L, 1);
  return 1;
}

/* simba.schema(url) -> sql | nil, msg, code */
static int l_schema(lua_State *L) {
  const char *url = slua_check_text(L, 1, "schema", "backend URL");
  char *out = NULL;
  result_t r;
  slua_capture(&r, simba_backend_schema(url, &out));
  if (r.rc != SIMBA_OK) return slua_push_fail(L, &r);
  lua_pushstring(L, out);
  simba_free(out);
  return 1;
}

static int l_now_ms(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)slua_now_ms());
  return 1;
}

static const luaL_Reg term_methods[] = {
    {"name", slua_term_name},
    {"token", slua_term_token},
    {"valid", slua_term_valid},
    {"remaining", slua_term_remaining},
    {"ensure_valid", slua_term_ensure_valid},
    {"reason", slua_term_reason},
    {"is_lock", slua_term_is_lock},
    {"kind", slua_term_kind},
    {"on_revoked", slua_term_on_revoked},
    {"close_async", slua_term_close_async},
    {"revoke_fd", slua_term_revoke_fd},
    {"wait_revoked", slua_term_wait_revoked},
    {"release", slua_term_release},
    {NULL, NULL},
};

/* Elections, tasks and observers share their handle's methods (lua_handle.c). */
static const luaL_Reg election_methods[] = {
    {"stop", slua_handle_stop},
    {"stop_wait", slua_handle_stop_wait},
    {"step_down", slua_handle_step_down},
    {"close", slua_handle_close},
    {"close_async", slua_handle_close_async},
    {"is_closed", slua_handle_is_closed},
    {"name", slua_handle_name},
    {"term", slua_election_term},
    {"is_leader", slua_election_is_leader},
    {NULL, NULL},
};

static const luaL_Reg task_methods[] = {
    {"stop", slua_handle_stop},
    {"stop_wait", slua_handle_stop_wait},
    {"step_down", slua_handle_step_down},
    {"close", slua_handle_close},
    {"close_async", slua_handle_close_async},
    {"is_closed", slua_handle_is_closed},
    {"name", slua_handle_name},
    {NULL, NULL},
};

static const luaL_Reg observer_methods[] = {
    {"close", slua_handle_close},
    {"close_async", slua_handle_close_async},
    {"name", slua_handle_name},
    {"is_closed", slua_handle_is_closed},
    {NULL, NULL},
};

static const luaL_Reg client_methods[] = {
    {"fd", slua_client_fd},
    {"timeout", slua_client_timeout},
    {"process", slua_client_process},
    {"run", slua_client_run},
    {"wait_live", slua_client_wait_live},
    {"status", slua_client_status},
    {"is_closed", slua_client_is_closed},
    {"is_closing", slua_client_is_closing},
    {"foreign_callbacks", slua_client_foreign},
    {"snapshot", slua_client_snapshot},
    {"metrics", slua_client_metrics},
    {"inspect", slua_client_inspect},
    {"observe", slua_client_observe},
    {"on_event", slua_client_on_event},
    {"close", slua_client_close},
    {"election", slua_client_election},
    {"lock", slua_client_lock},
    {"try_lock", slua_client_try_lock},
    {"unlock", slua_client_unlock},
    {"lock_async", slua_client_lock_async},
    {"semaphore", slua_client_semaphore},
    {"try_semaphore", slua_client_try_semaphore},
    {"semaphore_async", slua_client_semaphore_async},
    {"read_lock", slua_client_read_lock},
    {"try_read_lock", slua_client_try_read_lock},
    {"read_lock_async", slua_client_read_lock_async},
    {"write_lock", slua_client_write_lock},
    {"try_write_lock", slua_client_try_write_lock},
    {"write_lock_async", slua_client_write_lock_async},
    {"run_while_leader", slua_client_run_while_leader},
    {"schedule", slua_client_schedule},
    {"join_group", slua_client_join_group},
    {"_bench_c_cycle", slua_client_bench_c_cycle},
    {NULL, NULL},
};

static const luaL_Reg module_fns[] = {
    {"open", slua_open},
    {"version", l_version},
    {"strerror", l_strerror},
    {"check_name", l_check_name},
    {"kind_name", slua_kind_name},
    {"check_config", slua_check_config},
    {"schema", l_schema},
    {"now_ms", l_now_ms},
    {"_orphans", slua_orphans},
    {"sleep", slua_sleep},
    {NULL, NULL},
};

/* A class: metatable @p mt whose __index is the method table. The method
 * table is also package.loaded[mt] (e.g. "simba.term"), where luaL_argerror
 * finds a method's name when the call site gives none (pcall(t.ensure_valid,
 * t, -1)): "bad argument #2 to 'simba.term.ensure_valid'", never '?'. */
static void new_class(lua_State *L, const char *mt, const luaL_Reg *methods, lua_CFunction gc,
                      lua_CFunction close, lua_CFunction tostring) {
  luaL_newmetatable(L, mt);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, mt);
  lua_remove(L, -2);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, close);
  lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushstring(L, mt);
  lua_setfield(L, -2, "__name");
  lua_pop(L, 1);
}

/* A term's __close: release (a lock is released; an election term only drops
 * the reference). Errors of a to-be-closed variable's __close propagate. */
static int term_close(lua_State *L) {
  lua_settop(L, 1);
  return slua_term_release(L) > 1 ? 0 : 0;
}

static int client_close_tbc(lua_State *L) {
  lua_settop(L, 1);
  slua_client_close(L);
  return 0;
}

static int handle_close_tbc(lua_State *L) {
  lua_settop(L, 1);
  slua_handle_close(L);
  return 0;
}

#if defined(__GNUC__)
__attribute__((visibility("default")))
#endif
int luaopen_simba(lua_State *L) {
  unsigned v = simba_version();
  /* 1.3: the names (simba_*_name) and simba_lease_name_check; 1.4: the
   * closes (X_close_async) */
  if ((v >> 16) != SIMBA_VERSION_MAJOR || v < 0x010400u)
    return luaL_error(L, "simba: libsimba %s is too old (need 1.4 or later)",
                      simba_version_string());
  slua_resolve_1_5();
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushstring(L, "v");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, WEAK_KEY);

  new_class(L, CLIENT_MT, client_methods, slua_client_gc, client_close_tbc, slua_client_tostring);
  new_class(L, ELECTION_MT, election_methods, slua_handle_gc, handle_close_tbc,
            slua_handle_tostring);
  new_class(L, TERM_MT, term_methods, slua_term_gc, term_close, slua_term_tostring);
  new_class(L, TASK_MT, task_methods, slua_handle_gc, handle_close_tbc, slua_handle_tostring);
  new_class(L, OBSERVER_MT, observer_methods, slua_handle_gc, handle_close_tbc,
            slua_handle_tostring);
  luaL_newmetatable(L, CONFIG_BOX_MT);
  lua_pushcfunction(L, slua_config_box_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  luaL_getmetatable(L, TERM_MT);
  lua_pushcfunction(L, slua_term_eq);
  lua_setfield(L, -2, "__eq");
  lua_pop(L, 1);

  /* A sentinel finalized at lua_close, after every client (finalizers run in
   * the reverse order of their marking): it finishes pending orphan closes. */
  lua_getfield(L, LUA_REGISTRYINDEX, "simba.sentinel");
  if (lua_isnil(L, -1)) {
    lua_newuserdatauv(L, 1, 0);
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, slua_sentinel_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    lua_setfield(L, LUA_REGISTRYINDEX, "simba.sentinel");
  }
  lua_pop(L, 1);

  luaL_newlib(L, module_fns);
  lua_pushstring(L, simba_version_string());
  lua_setfield(L, -2, "VERSION");
  {
    int i;
    for (i = 0; NAME_FNS[i]; ++i) {
      lua_pushinteger(L, i);
      lua_pushcclosure(L, l_name, 1);
      lua_setfield(L, -2, NAME_FNS[i]);
    }
  }
  {
    /* codes.EBUSY == -9, ...: every code this library names */
    int rc;
    lua_newtable(L);
    for (rc = -1; rc >= -64; --rc) {
      const char *n = simba_code_name(rc);
      if (strcmp(n, "UNKNOWN") == 0) continue;
      lua_pushinteger(L, rc);
      lua_setfield(L, -2, n);
    }
    lua_setfield(L, -2, "codes");
  }
  return 1;
}
