/* Options of simba.open(url, opts) for the Lua binding: checked and applied
 * to the client's configuration; the logger hook. */
#include "simba_lua.h"

/* The logger: anchored under this key. */
static char LOG_KEY;

static void tr_log(void *ud, int level, const char *msg) {
  static const char *const names[] = {"debug", "info", "warn", "error"};
  slua_invoke_hook((lclient *)ud, &LOG_KEY, (level >= 0 && level <= 3) ? names[level] : "info",
                   msg ? msg : "");
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

/* Unknown option names are misuse: catch typos. */
static void check_option_names(lua_State *L, int oidx) {
  int i;
  lua_pushnil(L);
  while (lua_next(L, oidx)) {
    int known = 0;
    lua_pop(L, 1);
    if (lua_type(L, -1) == LUA_TSTRING) {
      const char *k = lua_tostring(L, -1);
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
      rc = simba_config_set(cfg, OPTIONS[i].key, lua_tostring(L, -1));
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
      const char *k = luaL_checkstring(L, -2);
      const char *v = luaL_tolstring(L, -1, NULL);
      int rc;
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
  return SIMBA_OK;
}

/* logger = fn(level, msg), log_level = "info". The logger (or nil) is left on
 * the stack. */
static int set_logger(lua_State *L, int oidx, simba_config_t *cfg, lclient *cl, result_t *r,
                      int *log_level) {
  if (lua_getfield(L, oidx, "logger") != LUA_TNIL) {
    static const char *const lv[] = {"debug", "info", "warn", "error", NULL};
    luaL_checktype(L, -1, LUA_TFUNCTION);
    lua_getfield(L, oidx, "log_level");
    *log_level = lua_isnil(L, -1) ? SIMBA_LOG_INFO : luaL_checkoption(L, -1, NULL, lv);
    lua_pop(L, 1);
    {
      int rc = simba_config_set_logger(cfg, tr_log, cl, *log_level);
      if (rc != SIMBA_OK) {
        lua_pop(L, 1);
        slua_capture(r, rc);
        return rc;
      }
    }
  }
  return SIMBA_OK;
}

int slua_apply_options(lua_State *L, int oidx, simba_config_t *cfg, lclient *cl, result_t *r,
                       int *log_level) {
  int rc;
  slua_capture(r, SIMBA_OK);
  if (lua_isnoneornil(L, oidx)) return SIMBA_OK;
  luaL_checktype(L, oidx, LUA_TTABLE);
  check_option_names(L, oidx);
  rc = set_named_options(L, oidx, cfg, r);
  if (rc != SIMBA_OK) return rc;
  rc = set_raw_config(L, oidx, cfg, r);
  if (rc != SIMBA_OK) return rc;
  lua_pop(L, 1);
  rc = set_logger(L, oidx, cfg, cl, r, log_level);
  if (rc != SIMBA_OK) return rc;
  lua_pop(L, 1);
  return SIMBA_OK;
}

/* Anchor the logger of the options at @p oidx to the client userdata at @p cidx. */
void slua_anchor_logger(lua_State *L, int oidx, int cidx) {
  lua_getfield(L, oidx, "logger");
  slua_anchor_set(L, cidx, &LOG_KEY);
}

int slua_config_box_gc(lua_State *L) {
  simba_config_t **box = (simba_config_t **)luaL_checkudata(L, 1, CONFIG_BOX_MT);
  simba_config_free(*box);
  *box = NULL;
  return 0;
}
