/* Leader work of the Lua binding (simba.task): run_while_leader, schedule,
 * join_group. Each run of the work is a coroutine on the Lua thread
 * (lua_loop.c); stop, step_down, stop_wait and close are the handle's
 * (lua_handle.c). */
#include "simba_lua.h"

static int task_stop(void *t, simba_done_fn done, void *ud) {
  return simba_task_stop((simba_task_t *)t, done, ud);
}

static int task_step_down(void *t, int64_t cooldown, simba_done_fn done, void *ud) {
  return simba_task_step_down((simba_task_t *)t, cooldown, done, ud);
}

static void task_free(void *t) { (void)simba_task_close((simba_task_t *)t); }

static int task_close_async(void *t, simba_done_fn done, void *ud) {
  return simba_task_close_async((simba_task_t *)t, done, ud);
}

static const slua_kind TASK = {TASK_MT,        "task",    task_stop,
                               task_step_down, task_free, task_close_async};

/* A task for the client at 1 and the name at 2 whose work is the function at
 * @p fidx, started by @p call. */
static int start_task(lua_State *L, const char *what, int fidx,
                      int (*call)(lua_State *L, lhandle *tk)) {
  lclient *cl = slua_live_client(L, 1);
  lhandle *tk;
  luaL_checktype(L, fidx, LUA_TFUNCTION);
  tk = slua_new_handle(L, cl, &TASK);
  lua_pushvalue(L, fidx);
  lua_setfield(L, -2, "fn");
  lua_newtable(L);
  lua_setfield(L, -2, "runs");
  return slua_start_handle(L, tk, lua_gettop(L) - 1, what, call);
}

static int start_rwl(lua_State *L, lhandle *tk) {
  simba_task_t *t = NULL;
  int rc = simba_run_while_leader(&t, tk->cl->c, lua_tostring(L, 2), slua_tr_work, tk);
  tk->h = t;
  return rc;
}

/* client:run_while_leader(name, fn(term)) -> task */
int slua_client_run_while_leader(lua_State *L) {
  lua_settop(L, 3);
  slua_check_name(L, 2, "run_while_leader");
  return start_task(L, "run_while_leader", 3, start_rwl);
}

static int start_schedule(lua_State *L, lhandle *tk) {
  simba_task_t *t = NULL;
  int rc = simba_schedule(&t, tk->cl->c, lua_tostring(L, 2), (int64_t)lua_tointeger(L, 3),
                          (int64_t)lua_tointeger(L, 4), slua_tr_work, tk);
  tk->h = t;
  return rc;
}

/* client:schedule(name, initial_delay_ms, period_ms, fn(term)) -> task */
int slua_client_schedule(lua_State *L) {
  lua_settop(L, 5);
  slua_check_name(L, 2, "schedule");
  luaL_checkinteger(L, 3);
  luaL_checkinteger(L, 4);
  return start_task(L, "schedule", 5, start_schedule);
}

static int start_group(lua_State *L, lhandle *tk) {
  simba_task_t *t = NULL;
  int rc = simba_group_join(&t, tk->cl->c, lua_tostring(L, 2), (uint32_t)lua_tointeger(L, 3),
                            slua_tr_work, tk);
  tk->h = t;
  return rc;
}

/* client:join_group(group, partitions, fn(term)) -> task */
int slua_client_join_group(lua_State *L) {
  lua_Integer n;
  lua_settop(L, 4);
  slua_check_text(L, 2, "join_group", "group name");
  n = luaL_checkinteger(L, 3);
  if (n < 0 || n > 0xffffffffLL) return luaL_argerror(L, 3, "partitions out of range");
  return start_task(L, "join_group", 4, start_group);
}
