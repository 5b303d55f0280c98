/* Clients of the Lua binding (simba.client): simba.open(), the loop driven by
 * the Lua thread (process, run), queries, close, and orphans (clients
 * collected inside callbacks). */
#include "simba_lua.h"

client_ud *slua_check_client_ud(lua_State *L, int i) {
  return (client_ud *)luaL_checkudata(L, i, CLIENT_MT);
}

lclient *slua_live_client(lua_State *L, int i) {
  client_ud *u = slua_check_client_ud(L, i);
  if (!u->cl || !u->cl->c) luaL_error(L, "simba: client closed");
  return u->cl;
}

/* A new lclient and its userdata (pushed), registered in the weak table. */
static lclient *new_client_ud(lua_State *L) {
  lclient *cl;
  client_ud *u;
  cl = (lclient *)calloc(1, sizeof *cl);
  if (!cl) luaL_error(L, "simba: out of memory");
  cl->pending = LUA_NOREF;
  cl->self_ref = LUA_NOREF;
  cl->epfd = cl->evfd = -1;
  cl->host = pthread_self();
  pthread_mutex_init(&cl->mu, NULL);
  /* The userdata first, so that a raise below frees cl through __gc. */
  u = (client_ud *)lua_newuserdatauv(L, sizeof *u, 1);
  u->cl = cl;
  luaL_setmetatable(L, CLIENT_MT);
  lua_newtable(L);
  lua_setiuservalue(L, -2, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, WEAK_KEY);
  lua_pushvalue(L, -2);
  lua_rawsetp(L, -2, cl);
  lua_pop(L, 1);
  return cl;
}

/* Apply the options at index 2 to @p cfg (freed here) and open the client.
 * Stack on entry and on return: url opts ud. */
static int open_with_config(lua_State *L, lclient *cl, const char *url, simba_config_t *cfg,
                            result_t *r) {
  int rc;
  {
    /* A box at index 4 frees cfg if an option raises below. */
    simba_config_t **box = (simba_config_t **)lua_newuserdatauv(L, sizeof *box, 0);
    *box = cfg;
    luaL_setmetatable(L, CONFIG_BOX_MT);
  }
  rc = simba_config_set(cfg, "loop.mode", "external");
  if (rc == SIMBA_OK) {
    rc = slua_apply_options(L, 2, cfg, cl, r);
  } else {
    slua_capture(r, rc);
  }
  if (rc == SIMBA_OK) {
    rc = simba_config_validate(cfg);
    if (rc != SIMBA_OK) slua_capture(r, rc);
  }
  if (rc == SIMBA_OK) {
    int64_t lease = 0;
    simba_config_get_ms(cfg, "session.lease-duration", &lease);
    cl->lease_ms = lease;
    slua_capture(r, simba_client_open(&cl->c, url, cfg));
    rc = r->rc;
  }
  simba_config_free(cfg);
  *(simba_config_t **)lua_touserdata(L, 4) = NULL;
  lua_settop(L, 3);
  return rc;
}

/* client:fd(): an epoll fd over the library's fd and the leader-work queue's
 * eventfd. 0, or 3 results (nil, msg, code) once the client was closed again. */
static int make_fds(lua_State *L, lclient *cl) {
  struct epoll_event ev;
  int sfd = simba_client_fd(cl->c);
  cl->epfd = epoll_create1(EPOLL_CLOEXEC);
  cl->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  memset(&ev, 0, sizeof ev);
  ev.events = EPOLLIN;
  if (cl->epfd < 0 || cl->evfd < 0 || epoll_ctl(cl->epfd, EPOLL_CTL_ADD, sfd, &ev) != 0 ||
      epoll_ctl(cl->epfd, EPOLL_CTL_ADD, cl->evfd, &ev) != 0) {
    lua_pushnil(L);
    lua_pushfstring(L, "simba.open: cannot make the client's fd: %s", strerror(errno));
    lua_pushstring(L, "ENOMEM");
    simba_client_close(cl->c);
    cl->c = NULL;
    return 3;
  }
  return 0;
}

/* simba.open(url[, opts]) -> client | nil, msg, code */
int slua_open(lua_State *L) {
  const char *url = slua_check_text(L, 1, "open", "backend URL");
  simba_config_t *cfg = NULL;
  lclient *cl;
  result_t r;
  int rc;
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
  lua_settop(L, 2);
  slua_finish_orphans(L);
  cl = new_client_ud(L); /* stack: url opts ud */
  rc = simba_config_new(&cfg);
  if (rc != SIMBA_OK) {
    slua_capture(&r, rc);
    return slua_push_fail(L, &r);
  }
  rc = open_with_config(L, cl, url, cfg, &r);
  if (rc != SIMBA_OK) {
    cl->c = NULL;
    if (rc == SIMBA_EINVAL || rc == SIMBA_EUNSUPPORTED) return slua_raise_misuse(L, "open", &r);
    return slua_push_fail(L, &r);
  }
  if (make_fds(L, cl)) return 3;
  slua_anchor_hooks(L, 2, 3);
  lua_settop(L, 3);
  return 1;
}

/* client:fd(): readable when process() has something to do (an epoll fd over
 * the library's fd and the leader-work queue). */
int slua_client_fd(lua_State *L) {
  lua_pushinteger(L, slua_live_client(L, 1)->epfd);
  return 1;
}

int slua_client_timeout(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)slua_next_timeout(slua_live_client(L, 1)));
  return 1;
}

static int do_close(lua_State *L, lclient *cl, int raise);

/* One turn of process() and run(): what is ready, then the leader work, the
 * orphans and a close that leader work deferred. Returns the count of
 * results to return (a failure), or 0; *closed: the deferred close is done. */
static int process_turn(lua_State *L, lclient *cl, const char *what, int *closed) {
  result_t r;
  *closed = 0;
  slua_turn(L, cl, &r);
  if (r.rc != SIMBA_OK) return slua_fail(L, what, &r);
  if (cl->depth == 0 && !cl->pumping) slua_finish_orphans(L);
  if (cl->deferred_close && !cl->pumping && cl->depth == 0) {
    cl->deferred_close = 0;
    if (do_close(L, cl, 1)) return 3;
    *closed = 1;
  }
  return 0;
}

/* Raise the error of a leader work run, if one is kept. */
static void raise_kept(lua_State *L, lclient *cl) {
  call_t k = slua_enter(cl, L);
  slua_leave(L, k);
}

/* client:process() -> true | nil, msg, code (ECLOSED once a close started in a
 * callback has completed). Runs what is ready, callbacks included. */
int slua_client_process(lua_State *L) {
  lclient *cl = slua_live_client(L, 1);
  int n, closed;
  if (cl->depth == 0 && !cl->pumping) slua_finish_orphans(L);
  n = process_turn(L, cl, "process", &closed);
  if (n) return n;
  if (closed) {
    lua_pushnil(L);
    lua_pushstring(L, "the client closed (close() from leader work)");
    lua_pushstring(L, "ECLOSED");
    return 3;
  }
  raise_kept(L, cl);
  lua_pushboolean(L, 1);
  return 1;
}

/* until() at index 3 (if any) holds. */
static int until_holds(lua_State *L, int has_until) {
  int holds;
  if (!has_until) return 0;
  lua_pushvalue(L, 3);
  lua_call(L, 0, 1);
  holds = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return holds;
}

/* client:run(ms[, until]) : drive the client for up to ms milliseconds (a
 * negative ms: without bound), or until until() returns true. Returns true if
 * until held, false when the time ran out; nil, msg, code on failure. */
int slua_client_run(lua_State *L) {
  lclient *cl = slua_live_client(L, 1);
  lua_Integer ms = luaL_checkinteger(L, 2);
  int has_until = !lua_isnoneornil(L, 3);
  int64_t deadline = ms < 0 ? INT64_MAX : slua_now_ms() + (int64_t)ms;
  if (has_until) luaL_checktype(L, 3, LUA_TFUNCTION);
  if (cl->depth > 0) return luaL_error(L, "simba: run() called from a callback");
  if (!cl->pumping) slua_finish_orphans(L);
  for (;;) {
    int64_t wait, to;
    int n, closed;
    if (until_holds(L, has_until)) {
      lua_pushboolean(L, 1);
      return 1;
    }
    if (!cl->c) {
      lua_pushnil(L);
      lua_pushstring(L, "the client was closed while it ran");
      lua_pushstring(L, "ECLOSED");
      return 3;
    }
    wait = deadline == INT64_MAX ? INT64_MAX : deadline - slua_now_ms();
    if (wait <= 0) {
      lua_pushboolean(L, 0);
      return 1;
    }
    to = slua_next_timeout(cl);
    if (to >= 0 && to < wait) wait = to;
    if (has_until && wait > 50) wait = 50; /* re-check the condition now and then */
    if (wait > 1000) wait = 1000;
    if (slua_poll_client(cl, wait) < 0 && errno != EINTR) {
      lua_pushnil(L);
      lua_pushstring(L, strerror(errno));
      lua_pushstring(L, "EBACKEND");
      return 3;
    }
    n = process_turn(L, cl, "run", &closed);
    if (n) return n;
    raise_kept(L, cl);
  }
}

int slua_client_wait_live(lua_State *L) {
  lclient *cl = slua_live_client(L, 1);
  lua_Integer ms = luaL_optinteger(L, 2, -1);
  result_t r;
  call_t k = slua_enter(cl, L);
  slua_capture(&r, simba_client_wait_live(cl->c, (int64_t)ms));
  return slua_leave_result(L, k, "wait_live", &r);
}

static simba_session_status_t client_status(const client_ud *u) {
  return u->cl && u->cl->c ? simba_client_status(u->cl->c) : SIMBA_SESSION_CLOSED;
}

int slua_client_status(lua_State *L) {
  simba_session_status_t s = client_status(slua_check_client_ud(L, 1));
  slua_push_name(L, simba_session_status_name(s), (int)s);
  return 1;
}

/* True between a close() from a callback and the close() that finishes it. */
int slua_client_is_closing(lua_State *L) {
  client_ud *u = slua_check_client_ud(L, 1);
  lua_pushboolean(L, u->cl && u->cl->c && u->cl->closing);
  return 1;
}

/* Callbacks that arrived on a thread other than the Lua thread (dropped);
 * always 0 unless libsimba breaks its EXTERNAL-mode promise. */
int slua_client_foreign(lua_State *L) {
  client_ud *u = slua_check_client_ud(L, 1);
  lua_pushinteger(L, u->cl ? (lua_Integer)__atomic_load_n(&u->cl->foreign, __ATOMIC_RELAXED) : 0);
  return 1;
}

int slua_client_is_closed(lua_State *L) {
  client_ud *u = slua_check_client_ud(L, 1);
  lua_pushboolean(L, !u->cl || !u->cl->c);
  return 1;
}

/* A JSON or text report of the client (libsimba's string, freed here), or
 * nil, msg, code. */
static int push_report(lua_State *L, lclient *cl, char *text) {
  result_t r;
  if (!text) {
    slua_capture(&r,
                 simba_client_status(cl->c) == SIMBA_SESSION_CLOSED ? SIMBA_ECLOSED : SIMBA_ENOMEM);
    return slua_push_fail(L, &r);
  }
  lua_pushstring(L, text);
  simba_free(text);
  return 1;
}

/* client:snapshot() -> json */
int slua_client_snapshot(lua_State *L) {
  lclient *cl = slua_live_client(L, 1);
  return push_report(L, cl, simba_client_snapshot_json(cl->c));
}

/* client:metrics() -> Prometheus text */
int slua_client_metrics(lua_State *L) {
  lclient *cl = slua_live_client(L, 1);
  return push_report(L, cl, simba_client_metrics_text(cl->c));
}

/* client:inspect([names][, timeout_ms]) -> json | nil, msg, code */
int slua_client_inspect(lua_State *L) {
  lclient *cl = slua_live_client(L, 1);
  const char **names = NULL;
  size_t n = 0, i;
  lua_Integer ms = luaL_optinteger(L, 3, cl->lease_ms > 0 ? cl->lease_ms : 5000);
  char *out = NULL;
  result_t r;
  call_t k;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    n = (size_t)luaL_len(L, 2);
    names = (const char **)lua_newuserdatauv(L, (n ? n : 1) * sizeof *names, 0);
    for (i = 0; i < n; ++i) {
      if (lua_geti(L, 2, (lua_Integer)i + 1) != LUA_TSTRING)
        luaL_error(L, "simba: inspect: names[%d] is not a string", (int)i + 1);
      names[i] = slua_check_name(L, -1, "inspect");
      lua_pop(L, 1); /* the string stays alive in the table */
    }
  }
  k = slua_enter(cl, L);
  slua_capture(&r, simba_client_inspect_json(cl->c, names, n, (int64_t)ms, &out));
  slua_leave(L, k);
  if (r.rc != SIMBA_OK) return slua_fail(L, "inspect", &r);
  lua_pushstring(L, out);
  simba_free(out);
  return 1;
}

/* client:on_event(fn | nil) */
int slua_client_on_event(lua_State *L) {
  lclient *cl = slua_live_client(L, 1);
  result_t r;
  lua_settop(L, 2);
  if (!lua_isnil(L, 2)) luaL_checktype(L, 2, LUA_TFUNCTION);
  if (slua_set_on_event(L, cl, 2, &r) != SIMBA_OK) return slua_fail(L, "on_event", &r);
  lua_pushboolean(L, 1);
  return 1;
}

/* The close of cl->c completed: forget the handle, end the runs left. */
static void mark_closed(lua_State *L, lclient *cl) {
  pthread_mutex_lock(&cl->mu);
  cl->c = NULL;
  pthread_mutex_unlock(&cl->mu);
  slua_end_all_runs(L, cl);
}

/* Close: stops every election and lock, closes the session, frees the handle.
 * From a callback it starts the close and returns nil, msg, "EWOULDBLOCK":
 * call close() again outside callbacks (run() and process() report ECLOSED
 * once it completed). */
static int do_close(lua_State *L, lclient *cl, int raise) {
  result_t r;
  call_t k;
  if (!cl->c) return 0;
  if (cl->pumping) {
    /* From leader work: the close would wait for this very coroutine. It
     * runs when the work yields or returns, at the end of this process(). */
    cl->deferred_close = 1;
    lua_pushnil(L);
    lua_pushstring(L, "the close runs once the leader work yields (called from leader work)");
    lua_pushstring(L, "EWOULDBLOCK");
    return 3;
  }
  k = slua_enter(cl, L);
  if (cl->depth == 0 && !cl->pumping) {
    /* Leader work first (handover order): its coroutines end, then the
     * close revokes the terms and releases the leases. */
    pthread_mutex_lock(&cl->mu);
    cl->shutting = 1;
    pthread_mutex_unlock(&cl->mu);
    slua_end_all_runs(L, cl);
  }
  slua_capture(&r, simba_client_close(cl->c));
  if (r.rc == SIMBA_OK && raise) slua_finish_orphans(L);
  if (r.rc == SIMBA_OK) {
    mark_closed(L, cl);
    /* Every election is stopped and no callback runs any more: drop the
     * anchors but the client's own (nothing can call them). */
    if (slua_push_client(L, cl)) {
      lua_newtable(L);
      lua_setiuservalue(L, -2, 1);
      lua_pop(L, 1);
    }
  } else {
    cl->closing = 1;
  }
  if (raise) {
    slua_leave(L, k);
  } else {
    slua_leave_noraise(k);
  }
  if (r.rc != SIMBA_OK) return slua_push_fail(L, &r);
  return 0;
}

int slua_client_close(lua_State *L) {
  client_ud *u = slua_check_client_ud(L, 1);
  int n;
  if (!u->cl) {
    lua_pushboolean(L, 1);
    return 1;
  }
  n = do_close(L, u->cl, 1);
  if (n) return n;
  lua_pushboolean(L, 1);
  return 1;
}

/* Orphans: clients collected while a callback ran (of another client, or
 * leader work), whose close libsimba started but could only finish outside
 * callbacks (EXTERNAL mode). Their Lua side is gone: their callbacks find no
 * Lua value and do nothing. The next call into the module on their host thread
 * outside callbacks (open, process, run, close, or the module's own finalizer
 * at lua_close) finishes each close and frees it. */
typedef struct orphan {
  lclient *cl;
  struct orphan *next;
} orphan;

static pthread_mutex_t orphans_mu = PTHREAD_MUTEX_INITIALIZER;
static orphan *orphans;
static size_t orphans_n;

static void free_lclient(lclient *cl) {
  if (cl->epfd >= 0) close(cl->epfd);
  if (cl->evfd >= 0) close(cl->evfd);
  pthread_mutex_destroy(&cl->mu);
  free(cl);
}

static void push_orphan(orphan *o) {
  pthread_mutex_lock(&orphans_mu);
  o->next = orphans;
  orphans = o;
  orphans_n++;
  pthread_mutex_unlock(&orphans_mu);
}

static void add_orphan(lclient *cl) {
  orphan *o = (orphan *)malloc(sizeof *o);
  if (!o) return; /* out of memory: the handle leaks, as it would have */
  o->cl = cl;
  push_orphan(o);
}

/* Finish the close of this thread's orphans (libsimba refuses with
 * EWOULDBLOCK while a callback runs: those stay for the next time). */
void slua_finish_orphans(lua_State *L) {
  orphan *mine = NULL, **pp, *o;
  pthread_t me = pthread_self();
  pthread_mutex_lock(&orphans_mu);
  if (!orphans) {
    pthread_mutex_unlock(&orphans_mu);
    return;
  }
  pp = &orphans;
  while ((o = *pp) != NULL) {
    if (pthread_equal(o->cl->host, me)) {
      *pp = o->next;
      o->next = mine;
      mine = o;
      orphans_n--;
    } else {
      pp = &o->next;
    }
  }
  pthread_mutex_unlock(&orphans_mu);
  while ((o = mine) != NULL) {
    lclient *cl = o->cl;
    mine = o->next;
    slua_end_all_runs(L, cl); /* wake its work threads: their coroutines are gone */
    if (simba_client_close(cl->c) == SIMBA_OK) {
      mark_closed(L, cl);
      slua_drop_pending(L, cl);
      free_lclient(cl);
      free(o);
    } else {
      push_orphan(o);
    }
  }
}

/* simba._orphans(): closes waiting to be finished (for tests). */
int slua_orphans(lua_State *L) {
  size_t n;
  pthread_mutex_lock(&orphans_mu);
  n = orphans_n;
  pthread_mutex_unlock(&orphans_mu);
  lua_pushinteger(L, (lua_Integer)n);
  return 1;
}

/* The module's finalizer (lua_close): finish what can be finished. */
int slua_sentinel_gc(lua_State *L) {
  slua_finish_orphans(L);
  return 0;
}

int slua_client_gc(lua_State *L) {
  client_ud *u = slua_check_client_ud(L, 1);
  lclient *cl = u->cl;
  if (!cl) return 0;
  if (cl->c) {
    lua_pushvalue(L, 1);
    cl->self_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_settop(L, 1);
    do_close(L, cl, 0);
    lua_settop(L, 1);
    luaL_unref(L, LUA_REGISTRYINDEX, cl->self_ref);
    cl->self_ref = LUA_NOREF;
    slua_drop_pending(L, cl);
  }
  if (cl->c) {
    /* Collected inside a callback of the library: the close goes on; the
     * handle and cl stay allocated (its callbacks find no Lua value and do
     * nothing) until the next call outside callbacks finishes the close. */
    u->cl = NULL;
    add_orphan(cl);
    return 0;
  }
  free_lclient(cl);
  u->cl = NULL;
  return 0;
}

int slua_client_tostring(lua_State *L) {
  simba_session_status_t s = client_status(slua_check_client_ud(L, 1));
  char buf[32];
  lua_pushfstring(L, "simba.client(%s)",
                  slua_name(buf, sizeof buf, simba_session_status_name(s), (int)s));
  return 1;
}
