/* Options of simba.open(url, opts) for the Lua binding: checked and applied
 * to the client's configuration; the client's hooks (logger, event sink);
 * simba.check_config(opts). */
#include "simba_lua.h"

/* The hooks: anchored in the client under these keys. */
static char LOG_KEY, EVENT_KEY;

static void tr_log(void *ud, int level, const char *msg) {
  static const char *const names[] = {"debug", "info", "warn", "error"};
  slua_invoke_hook((lclient *)ud, &LOG_KEY, (level >= 0 && level <= 3) ? names[level] : "info",
                   msg ? msg : "");
}

static void tr_event(void *ud, simba_event_type_t type, const char *detail) {
  char buf[32];
  slua_invoke_hook((lclient *)ud, &EVENT_KEY,
                   slua_name(buf, sizeof buf, simba_event_name(type), (int)type),
                   detail ? detail : "{}");
}

/* Options of simba.open(url, opts): Lua name -> config key. Numbers are
 * milliseconds for durations; strings are passed as text ("1.5s"). */
static const struct {
  const char *opt;
  const char *key;
  int duration;
} OPTIONS[] = {
    {"lease", "session.lease-duration", 1},
    {"renew", "session.renew-interval", 1},
    {"drift", "session.drift", 0},
    {"margin", "session.margin", 1},
    {"retry_jitter", "session.retry-jitter", 1},
    {"min_backoff", "session.min-backoff", 1},
    {"name", "client.name", 0},
    {NULL, NULL, 0},
};

/* Unknown option names are misuse: catch typos (and a name with a NUL byte,
 * which would otherwise pass as the option before it). */
static void check_option_names(lua_State *L, int oidx) {
  int i;
  lua_pushnil(L);
  while (lua_next(L, oidx)) {
    int known = 0;
    lua_pop(L, 1);
    if (lua_type(L, -1) == LUA_TSTRING) {
      size_t len;
      const char *k = lua_tolstring(L, -1, &len);
      slua_check_nul(L, k, len, "open", "an option name");
      for (i = 0; OPTIONS[i].opt; ++i) known |= strcmp(k, OPTIONS[i].opt) == 0;
      known |= strcmp(k, "logger") == 0 || strcmp(k, "log_level") == 0 ||
               strcmp(k, "on_event") == 0 || strcmp(k, "config") == 0;
      if (!known) {
        lua_pop(L, 1);
        luaL_error(L, "simba.open: unknown option '%s'", k);
      }
    }
  }
}

/* The options of OPTIONS. */
static int set_named_options(lua_State *L, int oidx, simba_config_t *cfg, result_t *r) {
  int i;
  for (i = 0; OPTIONS[i].opt; ++i) {
    int t = lua_getfield(L, oidx, OPTIONS[i].opt);
    int rc = SIMBA_OK;
    if (t == LUA_TNUMBER && OPTIONS[i].duration) {
      if (!lua_isinteger(L, -1)) {
        double d = lua_tonumber(L, -1);
        rc = simba_config_set_ms(cfg, OPTIONS[i].key, (int64_t)d);
      } else {
        rc = simba_config_set_ms(cfg, OPTIONS[i].key, (int64_t)lua_tointeger(L, -1));
      }
    } else if (t == LUA_TNUMBER || t == LUA_TSTRING) {
      rc = simba_config_set(cfg, OPTIONS[i].key, slua_check_text(L, -1, "open", OPTIONS[i].key));
    } else if (t != LUA_TNIL) {
      return luaL_error(L, "simba.open: option '%s' must be a number or a string", OPTIONS[i].opt);
    }
    lua_pop(L, 1);
    if (rc != SIMBA_OK) {
      slua_capture(r, rc);
      return rc;
    }
  }
  return SIMBA_OK;
}

/* Raw keys: config = {["session.drift"] = "0.02", ...}. The table is left on
 * the stack (nil when there is none). */
static int set_raw_config(lua_State *L, int oidx, simba_config_t *cfg, result_t *r) {
  if (lua_getfield(L, oidx, "config") == LUA_TTABLE) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      const char *k, *v;
      size_t len;
      int rc;
      if (lua_type(L, -2) != LUA_TSTRING)
        return luaL_error(L, "simba.open: a config key is not a string");
      k = lua_tolstring(L, -2, &len);
      slua_check_nul(L, k, len, "open", "a config key");
      v = luaL_tolstring(L, -1, &len);
      lua_pushfstring(L, "the value of config key '%s'", k);
      slua_check_nul(L, v, len, "open", lua_tostring(L, -1));
      lua_pop(L, 1);
      if (strcmp(k, "loop.mode") == 0 || strcmp(k, "callback.executor") == 0 ||
          strcmp(k, "callback.threads") == 0) {
        return luaL_error(L, "simba.open: '%s' is fixed by the Lua binding (external loop)", k);
      }
      rc = simba_config_set(cfg, k, v);
      lua_pop(L, 2);
      if (rc != SIMBA_OK) {
        slua_capture(r, rc);
        return rc;
      }
    }
  }
  lua_pop(L, 1);
  return SIMBA_OK;
}

/* logger = fn(level, msg), log_level = "info"; on_event = fn(kind, detail):
 * set on the configuration (the sink also sees the first SESSION_OPENED). */
static int set_hooks(lua_State *L, int oidx, simba_config_t *cfg, lclient *cl, result_t *r) {
  int rc = SIMBA_OK;
  if (lua_getfield(L, oidx, "logger") != LUA_TNIL) {
    static const char *const lv[] = {"debug", "info", "warn", "error", NULL};
    int level = SIMBA_LOG_INFO;
    luaL_checktype(L, -1, LUA_TFUNCTION);
    if (lua_getfield(L, oidx, "log_level") != LUA_TNIL) {
      slua_check_text(L, -1, "open", "log_level");
      level = luaL_checkoption(L, -1, NULL, lv);
    }
    lua_pop(L, 1);
    rc = simba_config_set_logger(cfg, tr_log, cl, level);
  }
  lua_pop(L, 1);
  if (rc == SIMBA_OK && lua_getfield(L, oidx, "on_event") != LUA_TNIL) {
    luaL_checktype(L, -1, LUA_TFUNCTION);
    rc = simba_config_set_event_sink(cfg, tr_event, cl);
  }
  lua_pop(L, 1);
  if (rc != SIMBA_OK) slua_capture(r, rc);
  return rc;
}

int slua_apply_options(lua_State *L, int oidx, simba_config_t *cfg, lclient *cl, result_t *r) {
  int rc;
  slua_capture(r, SIMBA_OK);
  if (lua_isnoneornil(L, oidx)) return SIMBA_OK;
  luaL_checktype(L, oidx, LUA_TTABLE);
  check_option_names(L, oidx);
  rc = set_named_options(L, oidx, cfg, r);
  if (rc == SIMBA_OK) rc = set_raw_config(L, oidx, cfg, r);
  if (rc == SIMBA_OK) rc = set_hooks(L, oidx, cfg, cl, r);
  return rc;
}

/* Anchor the hooks of the options at @p oidx to the client userdata at @p cidx. */
void slua_anchor_hooks(lua_State *L, int oidx, int cidx) {
  if (!lua_istable(L, oidx)) return;
  lua_getfield(L, oidx, "logger");
  slua_anchor_set(L, cidx, &LOG_KEY);
  lua_getfield(L, oidx, "on_event");
  slua_anchor_set(L, cidx, &EVENT_KEY);
}

/* client:on_event(fn | nil): the function at @p fidx (client at 1) replaces
 * the sink. */
int slua_set_on_event(lua_State *L, lclient *cl, int fidx, result_t *r) {
  int has = !lua_isnil(L, fidx);
  slua_capture(r, simba_client_on_event(cl->c, has ? tr_event : NULL, has ? cl : NULL));
  lua_pushvalue(L, fidx);
  slua_anchor_set(L, 1, &EVENT_KEY);
  return r->rc;
}

int slua_config_box_gc(lua_State *L) {
  simba_config_t **box = (simba_config_t **)luaL_checkudata(L, 1, CONFIG_BOX_MT);
  simba_config_free(*box);
  *box = NULL;
  return 0;
}

/* simba.check_config([opts]) -> {lease = ms, renew = ms, ...} : the options
 * as simba.open() would take them, with the library's defaults and derived
 * values, checked by its rules (a broken rule raises, like open). */
int slua_check_config(lua_State *L) {
  simba_config_t *cfg = NULL, **box;
  result_t r;
  double drift = 0;
  int i, rc;
  lua_settop(L, 1);
  slua_capture(&r, SIMBA_OK);
  box = (simba_config_t **)lua_newuserdatauv(L, sizeof *box, 0); /* frees cfg on a raise */
  *box = NULL;
  luaL_setmetatable(L, CONFIG_BOX_MT);
  rc = simba_config_new(box);
  cfg = *box;
  if (rc == SIMBA_OK) rc = slua_apply_options(L, 1, cfg, NULL, &r);
  if (rc == SIMBA_OK) rc = simba_config_validate(cfg);
  if (rc != SIMBA_OK) {
    if (r.rc == SIMBA_OK) slua_capture(&r, rc);
    return slua_raise_misuse(L, "check_config", &r);
  }
  lua_createtable(L, 0, 6);
  for (i = 0; OPTIONS[i].opt; ++i) {
    int64_t ms = 0;
    if (!OPTIONS[i].duration) continue;
    simba_config_get_ms(cfg, OPTIONS[i].key, &ms);
    lua_pushinteger(L, (lua_Integer)ms);
    lua_setfield(L, -2, OPTIONS[i].opt);
  }
  simba_config_get_double(cfg, "session.drift", &drift);
  lua_pushnumber(L, drift);
  lua_setfield(L, -2, "drift");
  simba_config_free(cfg);
  *box = NULL;
  return 1;
}
