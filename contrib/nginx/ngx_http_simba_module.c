/*
 * ngx_http_simba_module: an nginx instance contends for a Simba lease, and its
 * locations can serve only while the instance leads.
 *
 *   load_module modules/ngx_http_simba_module.so;
 *   http {
 *       simba_backend  redis://10.0.0.5:6379;
 *       simba_lease    app.primary;
 *       simba_option   session.lease-duration 6s;      # any library key
 *       server {
 *           location /jobs/ {
 *               simba_leader_only on;                    # followers answer 503
 *               proxy_set_header X-Fencing-Token $simba_token;
 *               proxy_pass http://app;
 *           }
 *           location = /simba { simba_status; }          # JSON
 *       }
 *   }
 *
 * One session per instance: worker 0 (ngx_worker == 0) owns the only simba
 * client, opened in init_process in EXTERNAL mode and driven on the worker's
 * own event loop: simba_client_fd() is the read event of an nginx connection,
 * simba_client_timeout_ms() one nginx timer (deleted before it is re-added:
 * ngx_add_timer keeps an armed timer whose deadline moves by less than 300 ms).
 * After every simba_client_process() the owner publishes the leadership state
 * into a slot of the shared memory zone "simba": leader, token, and the term's
 * local deadline on CLOCK_MONOTONIC (the same clock in every process of the
 * machine). Every worker reads the slots without locking (a seqlock) and treats
 * a term as valid only until that deadline, so a stale slot (an owner paused,
 * busy or killed) never claims leadership past the lease's safety deadline.
 *
 * Reload and shutdown: a new generation's worker 0 opens a new session in a
 * slot of its own while the old one still leads; the old worker 0 marks its
 * slot "not leader" before it releases the lease (on QUIT, as soon as it sees
 * ngx_exiting, and at the latest in exit_process), so the instance never has two
 * valid leaders. See docs/embedding.md.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <stdint.h>
#include <string.h>
#include <time.h>

#include <simba.h>

#define NGX_SIMBA_NAME_MAX 128
#define NGX_SIMBA_SLOTS 8
#define NGX_SIMBA_SNAPSHOT_MAX 3072
#define NGX_SIMBA_ZONE_SIZE (128 * 1024)
#define NGX_SIMBA_MAX_WAIT_MS 500 /* the owner looks at ngx_exiting this often */
#define NGX_SIMBA_READ_TRIES 1000 /* a slot torn by a killed writer reads invalid */

/* --- shared memory: one slot per contending process (worker 0 of a generation) ----- */

typedef struct {
    uint64_t owner;        /* pid of the writer; 0 when free (atomic) */
    uint64_t seq;          /* seqlock: odd while the writer writes (atomic) */
    /* written under seq: */
    char     name[NGX_SIMBA_NAME_MAX + 1];
    uint32_t leader;       /* 1 while the owner holds a valid term */
    uint32_t session;      /* simba_session_status_t */
    uint64_t token;        /* the term's token (or the last one) */
    int64_t  deadline_ns;  /* CLOCK_MONOTONIC: the term is valid before this */
    int64_t  updated_ns;   /* CLOCK_MONOTONIC of the last publish */
    uint32_t snapshot_len;
    char     snapshot[NGX_SIMBA_SNAPSHOT_MAX]; /* simba_client_snapshot_json() */
} ngx_http_simba_slot_t;

typedef struct {
    ngx_http_simba_slot_t slot[NGX_SIMBA_SLOTS];
} ngx_http_simba_shm_t;

/* What one reader makes of a slot. */
typedef struct {
    uint64_t owner;
    char     name[NGX_SIMBA_NAME_MAX + 1];
    uint32_t leader;
    uint32_t session;
    uint64_t token;
    int64_t  deadline_ns;
    int64_t  updated_ns;
    uint32_t snapshot_len;
    char     snapshot[NGX_SIMBA_SNAPSHOT_MAX];
} ngx_http_simba_slot_view_t;

/* The instance's leadership as one request sees it. */
typedef struct {
    ngx_uint_t leader;
    uint64_t   token;
    int64_t    remaining_ms;
} ngx_http_simba_view_t;

/* --- configuration ------------------------------------------------------------------ */

typedef struct {
    ngx_str_t        backend; /* NUL-terminated */
    ngx_str_t        lease;   /* NUL-terminated */
    simba_config_t  *cfg;     /* simba_option values, validated at configuration time */
    ngx_flag_t       client_name_set;
    ngx_shm_zone_t  *zone;
} ngx_http_simba_main_conf_t;

typedef struct {
    ngx_flag_t leader_only;
    ngx_flag_t status;
} ngx_http_simba_loc_conf_t;

/* --- the owner: worker 0's client (process-local) ----------------------------------- */

typedef struct {
    simba_client_t        *client;
    simba_election_t      *election;
    simba_term_t          *term;    /* retained while elected */
    ngx_connection_t      *conn;    /* the client's fd as an nginx connection */
    ngx_event_t            timer;   /* simba_client_timeout_ms() */
    ngx_http_simba_slot_t *slot;
    ngx_http_simba_shm_t  *shm;
    int64_t                reaped_ns;
    ngx_log_t             *log;
    ngx_uint_t             releasing; /* stop started (QUIT) or closing: publish leader 0 */
} ngx_http_simba_owner_t;

static ngx_http_simba_owner_t ngx_http_simba_owner;

static ngx_int_t ngx_http_simba_add_variables(ngx_conf_t *cf);
static ngx_int_t ngx_http_simba_postconfiguration(ngx_conf_t *cf);
static void *ngx_http_simba_create_main_conf(ngx_conf_t *cf);
static char *ngx_http_simba_init_main_conf(ngx_conf_t *cf, void *conf);
static void *ngx_http_simba_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_simba_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child);
static char *ngx_http_simba_backend(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_simba_lease(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_simba_option(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static char *ngx_http_simba_status(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
static ngx_uint_t ngx_http_simba_pid_dead(uint64_t pid);
static void ngx_http_simba_reap(ngx_http_simba_shm_t *sh);
static ngx_int_t ngx_http_simba_init_process(ngx_cycle_t *cycle);
static void ngx_http_simba_exit_process(ngx_cycle_t *cycle);

static ngx_command_t ngx_http_simba_commands[] = {

    { ngx_string("simba_backend"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_simba_backend,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("simba_lease"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_simba_lease,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("simba_option"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE2,
      ngx_http_simba_option,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("simba_leader_only"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_simba_loc_conf_t, leader_only),
      NULL },

    { ngx_string("simba_status"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_simba_status,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

      ngx_null_command
};

static ngx_http_module_t ngx_http_simba_module_ctx = {
    ngx_http_simba_add_variables,      /* preconfiguration */
    ngx_http_simba_postconfiguration,  /* postconfiguration */
    ngx_http_simba_create_main_conf,   /* create main configuration */
    ngx_http_simba_init_main_conf,     /* init main configuration */
    NULL,                              /* create server configuration */
    NULL,                              /* merge server configuration */
    ngx_http_simba_create_loc_conf,    /* create location configuration */
    ngx_http_simba_merge_loc_conf      /* merge location configuration */
};

ngx_module_t ngx_http_simba_module = {
    NGX_MODULE_V1,
    &ngx_http_simba_module_ctx,        /* module context */
    ngx_http_simba_commands,           /* module directives */
    NGX_HTTP_MODULE,                   /* module type */
    NULL,                              /* init master */
    NULL,                              /* init module */
    ngx_http_simba_init_process,       /* init process */
    NULL,                              /* init thread */
    NULL,                              /* exit thread */
    ngx_http_simba_exit_process,       /* exit process */
    NULL,                              /* exit master */
    NGX_MODULE_V1_PADDING
};

static ngx_str_t ngx_http_simba_zone_name = ngx_string("simba");

/* --- helpers ------------------------------------------------------------------------- */

static int64_t
ngx_http_simba_now_ns(void)
{
    struct timespec ts;

    /* CLOCK_MONOTONIC is the clock libsimba's deadlines are on (steady_clock). */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The documented lease-name rule (docs/concepts.md). */
static const char *
ngx_http_simba_check_name(ngx_str_t *s)
{
    size_t  i;
    u_char  c;

    if (s->len == 0) {
        return "is empty";
    }
    if (s->len > NGX_SIMBA_NAME_MAX) {
        return "is longer than 128 characters";
    }
    for (i = 0; i < s->len; i++) {
        c = s->data[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
              || c == '.' || c == '_' || c == ':' || c == '-'))
        {
            return "has a character outside [A-Za-z0-9._:-]";
        }
    }
    if ((s->len == 1 && s->data[0] == '.')
        || (s->len == 2 && s->data[0] == '.' && s->data[1] == '.'))
    {
        return "may not be \".\" or \"..\"";
    }
    return NULL;
}

static u_char *
ngx_http_simba_cstr(ngx_pool_t *pool, ngx_str_t *s)
{
    u_char *p = ngx_pnalloc(pool, s->len + 1);

    if (p != NULL) {
        ngx_memcpy(p, s->data, s->len);
        p[s->len] = '\0';
    }
    return p;
}

static const char *
ngx_http_simba_session_name(uint32_t s)
{
    switch (s) {
    case SIMBA_SESSION_OPENING: return "opening";
    case SIMBA_SESSION_LIVE: return "live";
    case SIMBA_SESSION_SUSPENDED: return "suspended";
    default: return "closed";
    }
}

/* --- the seqlock ---------------------------------------------------------------------- */

/* The owner's write; name (when not NULL) renames the slot, snapshot (when not
   NULL) replaces the snapshot. */
static void
ngx_http_simba_slot_write(ngx_http_simba_slot_t *s, const ngx_str_t *name, uint32_t leader,
    uint64_t token, int64_t deadline_ns, uint32_t session, const char *snapshot)
{
    uint64_t  seq = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
    size_t    n;

    __atomic_store_n(&s->seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);

    if (name != NULL) {
        ngx_memcpy(s->name, name->data, name->len);
        s->name[name->len] = '\0';
    }
    s->leader = leader;
    s->token = token;
    s->deadline_ns = deadline_ns;
    s->session = session;
    s->updated_ns = ngx_http_simba_now_ns();
    if (snapshot != NULL) {
        n = strlen(snapshot);
        if (n >= NGX_SIMBA_SNAPSHOT_MAX) {
            n = 0; /* too big to show whole: leave it out rather than cut the JSON */
        }
        ngx_memcpy(s->snapshot, snapshot, n);
        s->snapshot_len = (uint32_t) n;
    }

    __atomic_store_n(&s->seq, seq + 2, __ATOMIC_RELEASE);
}

/* A consistent copy of slot s; 0 when it is free or could not be read whole. */
static ngx_uint_t
ngx_http_simba_slot_read(ngx_http_simba_slot_t *s, ngx_http_simba_slot_view_t *v,
    ngx_uint_t with_snapshot)
{
    uint64_t    s1, s2;
    ngx_uint_t  tries;

    for (tries = 0; tries < NGX_SIMBA_READ_TRIES; tries++) {
        v->owner = __atomic_load_n(&s->owner, __ATOMIC_ACQUIRE);
        if (v->owner == 0) {
            return 0;
        }
        s1 = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
        if (s1 & 1) {
            continue;
        }
        ngx_memcpy(v->name, s->name, sizeof v->name);
        v->leader = s->leader;
        v->session = s->session;
        v->token = s->token;
        v->deadline_ns = s->deadline_ns;
        v->updated_ns = s->updated_ns;
        v->snapshot_len = s->snapshot_len;
        if (v->snapshot_len > NGX_SIMBA_SNAPSHOT_MAX) {
            v->snapshot_len = 0;
        }
        if (with_snapshot) {
            ngx_memcpy(v->snapshot, s->snapshot, v->snapshot_len);
        }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        s2 = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
        if (s1 == s2) {
            v->name[NGX_SIMBA_NAME_MAX] = '\0';
            return 1;
        }
    }
    return 0;
}

/* The instance's leadership: a slot of our lease whose term is valid now. */
static void
ngx_http_simba_read_view(ngx_http_simba_main_conf_t *mcf, ngx_http_simba_view_t *out)
{
    ngx_http_simba_shm_t        *sh;
    ngx_http_simba_slot_view_t   v;
    int64_t                      now;
    ngx_uint_t                   i;

    out->leader = 0;
    out->token = 0;
    out->remaining_ms = 0;
    if (mcf->zone == NULL || mcf->zone->data == NULL) {
        return;
    }
    sh = mcf->zone->data;
    now = ngx_http_simba_now_ns();
    for (i = 0; i < NGX_SIMBA_SLOTS; i++) {
        if (!ngx_http_simba_slot_read(&sh->slot[i], &v, 0)) {
            continue;
        }
        if (ngx_strcmp(v.name, mcf->lease.data) != 0) {
            continue; /* an older generation's lease, after a reload changed it */
        }
        /* Valid only before the deadline, whatever the slot says: its writer may be
           paused or dead. The lease guarantees at most one valid term among them. */
        if (v.leader && now < v.deadline_ns && v.token > out->token) {
            out->leader = 1;
            out->token = v.token;
            out->remaining_ms = (v.deadline_ns - now) / 1000000;
        }
    }
}

/* One view per request: the leader check and $simba_token agree. */
static ngx_http_simba_view_t *
ngx_http_simba_request_view(ngx_http_request_t *r)
{
    ngx_http_simba_view_t       *v;
    ngx_http_simba_main_conf_t  *mcf;

    v = ngx_http_get_module_ctx(r, ngx_http_simba_module);
    if (v != NULL) {
        return v;
    }
    v = ngx_palloc(r->pool, sizeof(ngx_http_simba_view_t));
    if (v == NULL) {
        return NULL;
    }
    mcf = ngx_http_get_module_main_conf(r, ngx_http_simba_module);
    ngx_http_simba_read_view(mcf, v);
    ngx_http_set_ctx(r, v, ngx_http_simba_module);
    return v;
}

/* --- the owner: publish, drive, callbacks -------------------------------------------- */

static void
ngx_http_simba_publish(void)
{
    ngx_http_simba_owner_t  *o = &ngx_http_simba_owner;
    uint32_t                 leader = 0;
    uint64_t                 token = 0;
    int64_t                  deadline = 0, remaining;
    char                    *snap;

    if (o->slot == NULL) {
        return;
    }
    if (!o->releasing && o->term != NULL && simba_term_is_valid(o->term)) {
        remaining = simba_term_remaining_ms(o->term);
        if (remaining > 1) {
            leader = 1;
            token = simba_term_token(o->term);
            /* remaining_ms is rounded: one millisecond less keeps the deadline
               before the session's own. */
            deadline = ngx_http_simba_now_ns() + (remaining - 1) * 1000000;
        }
    }
    snap = o->client ? simba_client_snapshot_json(o->client) : NULL;
    ngx_http_simba_slot_write(o->slot, NULL, leader, token, deadline,
                              (uint32_t) simba_client_status(o->client), snap);
    simba_free(snap);
}

static void
ngx_http_simba_arm(void)
{
    ngx_http_simba_owner_t  *o = &ngx_http_simba_owner;
    int64_t                  to;

    /* ngx_add_timer keeps an armed timer when the new deadline is within
       NGX_TIMER_LAZY_DELAY (300 ms) of the old one: delete it first. */
    if (o->timer.timer_set) {
        ngx_del_timer(&o->timer);
    }
    if (o->client == NULL) {
        return;
    }
    to = simba_client_timeout_ms(o->client);
    if (to < 0 || to > NGX_SIMBA_MAX_WAIT_MS) {
        to = NGX_SIMBA_MAX_WAIT_MS;
    }
    ngx_add_timer(&o->timer, (ngx_msec_t) to);
}

/* Stop contending on QUIT: the slot says "not leader" before the release leaves. */
static void
ngx_http_simba_begin_release(void)
{
    ngx_http_simba_owner_t  *o = &ngx_http_simba_owner;
    int                      rc;

    if (o->releasing || o->client == NULL) {
        return;
    }
    o->releasing = 1;
    ngx_http_simba_publish();
    if (o->election != NULL) {
        rc = simba_election_stop(o->election, NULL, NULL);
        ngx_log_error(NGX_LOG_NOTICE, o->log, 0,
                      "simba: shutting down: releasing the lease (%s)",
                      rc == SIMBA_OK ? "started" : simba_strerror(rc));
    }
}

static void
ngx_http_simba_drive(void)
{
    ngx_http_simba_owner_t  *o = &ngx_http_simba_owner;
    int                      rc;

    if (o->client == NULL) {
        return;
    }
    if (ngx_exiting || ngx_quit || ngx_terminate) {
        ngx_http_simba_begin_release();
    }
    rc = simba_client_process(o->client);
    if (rc != SIMBA_OK) {
        ngx_log_error(NGX_LOG_WARN, o->log, 0, "simba: simba_client_process: %s (%s)",
                      simba_strerror(rc), simba_last_error());
    }
    ngx_http_simba_publish();
    if (o->shm != NULL && ngx_http_simba_now_ns() - o->reaped_ns > 1000000000) {
        o->reaped_ns = ngx_http_simba_now_ns();
        ngx_http_simba_reap(o->shm);
    }
    ngx_http_simba_arm();
}

static void
ngx_http_simba_read_handler(ngx_event_t *ev)
{
    ngx_http_simba_drive();
}

static void
ngx_http_simba_timer_handler(ngx_event_t *ev)
{
    ngx_http_simba_drive();
}

static void
ngx_http_simba_on_elected(void *ud, simba_term_t *t)
{
    ngx_http_simba_owner_t  *o = &ngx_http_simba_owner;

    simba_term_retain(t);
    if (o->term != NULL) {
        simba_term_release(o->term);
    }
    o->term = t;
    ngx_log_error(NGX_LOG_NOTICE, o->log, 0, "simba: elected for \"%s\" with token %uL",
                  simba_term_name(t), (uint64_t) simba_term_token(t));
    ngx_http_simba_publish();
}

static void
ngx_http_simba_on_revoked(void *ud, simba_term_t *t, simba_revoke_reason_t reason)
{
    static const char *reasons[] = { "none", "stopped", "stepped down", "deadline passed",
                                     "session expired", "taken over" };
    ngx_http_simba_owner_t  *o = &ngx_http_simba_owner;

    if (o->term == t) {
        simba_term_release(o->term);
        o->term = NULL;
    }
    ngx_log_error(NGX_LOG_NOTICE, o->log, 0, "simba: term of \"%s\" (token %uL) revoked: %s",
                  simba_term_name(t), (uint64_t) simba_term_token(t),
                  (unsigned) reason <= 5 ? reasons[reason] : "unknown");
    ngx_http_simba_publish();
}

static void
ngx_http_simba_log(void *ud, int level, const char *msg)
{
    static const ngx_uint_t levels[] = { NGX_LOG_DEBUG, NGX_LOG_INFO, NGX_LOG_WARN,
                                         NGX_LOG_ERR };

    ngx_log_error(levels[level >= 0 && level <= 3 ? level : 3], ngx_cycle->log, 0,
                  "simba: %s", msg);
}

static ngx_uint_t
ngx_http_simba_pid_dead(uint64_t pid)
{
    return kill((pid_t) pid, 0) == -1 && ngx_errno == ESRCH;
}

/* Free the slots of dead owners (a worker 0 that crashed) once they claim nothing:
   not leader, or past their deadline. A slot still within its deadline tells the
   truth (the dead session holds the lease until it expires) and is left. */
static void
ngx_http_simba_reap(ngx_http_simba_shm_t *sh)
{
    ngx_http_simba_slot_view_t  v;
    ngx_uint_t                  i;
    int64_t                     now = ngx_http_simba_now_ns();
    uint64_t                    cur;

    for (i = 0; i < NGX_SIMBA_SLOTS; i++) {
        cur = __atomic_load_n(&sh->slot[i].owner, __ATOMIC_ACQUIRE);
        if (cur == 0 || cur == (uint64_t) ngx_pid || !ngx_http_simba_pid_dead(cur)) {
            continue;
        }
        if (ngx_http_simba_slot_read(&sh->slot[i], &v, 0) && v.owner == cur && v.leader
            && now < v.deadline_ns)
        {
            continue;
        }
        /* Fails if a new owner claimed it meanwhile. */
        __atomic_compare_exchange_n(&sh->slot[i].owner, &cur, 0, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE);
    }
}

/* A slot of our own: a free one, else one whose owner died. */
static ngx_http_simba_slot_t *
ngx_http_simba_claim_slot(ngx_http_simba_shm_t *sh, ngx_str_t *lease)
{
    uint64_t                me = (uint64_t) ngx_pid, cur;
    ngx_uint_t              i, pass;
    ngx_http_simba_slot_t  *s;

    ngx_http_simba_reap(sh);
    for (pass = 0; pass < 2; pass++) {
        for (i = 0; i < NGX_SIMBA_SLOTS; i++) {
            s = &sh->slot[i];
            cur = __atomic_load_n(&s->owner, __ATOMIC_ACQUIRE);
            /* First pass: free slots. Second: slots of dead owners (a crashed
               worker 0 whose slot was never freed), whose deadline has passed or
               will pass on its own. */
            if (pass == 0 ? cur != 0 : (cur == 0 || !ngx_http_simba_pid_dead(cur))) {
                continue;
            }
            if (!__atomic_compare_exchange_n(&s->owner, &cur, me, 0, __ATOMIC_ACQ_REL,
                                             __ATOMIC_ACQUIRE))
            {
                continue;
            }
            /* Ours, with whatever a dead owner left: "not leader", our lease. */
            ngx_http_simba_slot_write(s, lease, 0, 0, 0, SIMBA_SESSION_OPENING, "");
            return s;
        }
    }
    return NULL;
}

static void
ngx_http_simba_free_slot(void)
{
    ngx_http_simba_owner_t  *o = &ngx_http_simba_owner;

    if (o->slot != NULL) {
        ngx_http_simba_slot_write(o->slot, NULL, 0, 0, 0, SIMBA_SESSION_CLOSED, "");
        __atomic_store_n(&o->slot->owner, 0, __ATOMIC_RELEASE);
        o->slot = NULL;
    }
}

static ngx_int_t
ngx_http_simba_init_process(ngx_cycle_t *cycle)
{
    ngx_http_simba_main_conf_t  *mcf;
    ngx_http_simba_owner_t      *o = &ngx_http_simba_owner;
    simba_config_t              *cfg = NULL;
    simba_listener_t             l;
    ngx_connection_t            *c;
    int                          rc, fd;

    ngx_memzero(o, sizeof(*o));
    if (ngx_process != NGX_PROCESS_WORKER && ngx_process != NGX_PROCESS_SINGLE) {
        return NGX_OK;
    }
    if (ngx_worker != 0) {
        return NGX_OK; /* one session per instance: worker 0 contends */
    }
    mcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_simba_module);
    if (mcf == NULL || mcf->lease.len == 0 || mcf->zone == NULL || mcf->zone->data == NULL) {
        return NGX_OK;
    }
    o->log = cycle->log;

    o->shm = mcf->zone->data;
    o->slot = ngx_http_simba_claim_slot(o->shm, &mcf->lease);
    if (o->slot == NULL) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "simba: no free slot in the shared zone \"simba\" (%d contending "
                      "processes alive): this worker does not contend", NGX_SIMBA_SLOTS);
        return NGX_OK;
    }

    if (simba_config_copy(&cfg, mcf->cfg) != SIMBA_OK
        || simba_config_set(cfg, "loop.mode", "external") != SIMBA_OK
        || simba_config_set_logger(cfg, ngx_http_simba_log, NULL, SIMBA_LOG_INFO) != SIMBA_OK)
    {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0, "simba: cannot configure the client: %s",
                      simba_last_error());
        goto failed;
    }
    if (!mcf->client_name_set) {
        char name[128];

        ngx_snprintf((u_char *) name, sizeof(name) - 1, "nginx@%V:%P%Z", &cycle->hostname,
                     ngx_pid);
        name[sizeof(name) - 1] = '\0';
        simba_config_set(cfg, "client.name", name);
    }

    rc = simba_client_open(&o->client, (const char *) mcf->backend.data, cfg);
    simba_config_free(cfg);
    cfg = NULL;
    if (rc != SIMBA_OK) {
        o->client = NULL;
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "simba: cannot open a client on the backend: %s (%s)",
                      simba_strerror(rc), simba_last_error());
        goto failed;
    }

    fd = simba_client_fd(o->client);
    c = fd >= 0 ? ngx_get_connection(fd, cycle->log) : NULL;
    if (c == NULL) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "simba: cannot watch the client's fd %d on the event loop", fd);
        goto failed;
    }
    c->read->handler = ngx_http_simba_read_handler;
    c->read->log = cycle->log;
    c->write->log = cycle->log;
    /* Level-triggered: the fd stays readable while the library has work ready. */
    if (ngx_add_event(c->read, NGX_READ_EVENT, NGX_LEVEL_EVENT) != NGX_OK) {
        ngx_free_connection(c);
        c->fd = (ngx_socket_t) -1;
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0, "simba: cannot add the client's fd");
        goto failed;
    }
    o->conn = c;

    o->timer.handler = ngx_http_simba_timer_handler;
    o->timer.log = cycle->log;
    o->timer.data = o;
    /* Cancelable: the timer alone does not keep a gracefully exiting worker alive;
       exit_process releases the lease. */
    o->timer.cancelable = 1;

    l.on_elected = ngx_http_simba_on_elected;
    l.on_revoked = ngx_http_simba_on_revoked;
    l.ud = o;
    rc = simba_election_start(&o->election, o->client, (const char *) mcf->lease.data, &l);
    if (rc != SIMBA_OK) {
        o->election = NULL;
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0, "simba: cannot contend for \"%V\": %s (%s)",
                      &mcf->lease, simba_strerror(rc), simba_last_error());
        goto failed;
    }
    ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                  "simba: worker %P contends for \"%V\" (libsimba %s, EXTERNAL mode)",
                  ngx_pid, &mcf->lease, simba_version_string());
    ngx_http_simba_publish();
    ngx_http_simba_arm();
    return NGX_OK;

failed:
    /* The worker serves on as a follower: leader-only locations answer 503. */
    simba_config_free(cfg);
    ngx_http_simba_exit_process(cycle);
    return NGX_OK;
}

static void
ngx_http_simba_exit_process(ngx_cycle_t *cycle)
{
    ngx_http_simba_owner_t  *o = &ngx_http_simba_owner;

    if (o->client != NULL) {
        /* "Not leader" in the slot before anything is released. */
        o->releasing = 1;
        ngx_http_simba_publish();
    }
    if (o->timer.timer_set) {
        ngx_del_timer(&o->timer);
    }
    if (o->conn != NULL) {
        if (o->conn->read->active) {
            ngx_del_event(o->conn->read, NGX_READ_EVENT, 0);
        }
        ngx_free_connection(o->conn);
        o->conn->fd = (ngx_socket_t) -1; /* the library owns and closes it */
        o->conn = NULL;
    }
    if (o->client != NULL) {
        /* Revokes the term, releases the lease with its token, closes the session:
           at most about one renew period when the backend is unreachable. */
        simba_client_close(o->client);
        o->client = NULL;
        ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0, "simba: session closed");
    }
    if (o->term != NULL) {
        simba_term_release(o->term);
        o->term = NULL;
    }
    simba_election_free(o->election);
    o->election = NULL;
    ngx_http_simba_free_slot();
}

/* --- shared zone ---------------------------------------------------------------------- */

static ngx_int_t
ngx_http_simba_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_slab_pool_t       *shpool;
    ngx_http_simba_shm_t  *sh;

    if (data != NULL) {
        /* A reload kept the zone: the old generation's slots stay readable. */
        shm_zone->data = data;
        return NGX_OK;
    }
    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;
    if (shm_zone->shm.exists) {
        shm_zone->data = shpool->data;
        return NGX_OK;
    }
    sh = ngx_slab_calloc(shpool, sizeof(ngx_http_simba_shm_t));
    if (sh == NULL) {
        return NGX_ERROR;
    }
    shpool->data = sh;
    shm_zone->data = sh;
    return NGX_OK;
}

/* --- configuration --------------------------------------------------------------------- */

static void
ngx_http_simba_cleanup_cfg(void *data)
{
    simba_config_free(data);
}

static void *
ngx_http_simba_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_simba_main_conf_t  *mcf;
    ngx_pool_cleanup_t          *cln;

    mcf = ngx_pcalloc(cf->pool, sizeof(ngx_http_simba_main_conf_t));
    if (mcf == NULL) {
        return NULL;
    }
    cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL || simba_config_new(&mcf->cfg) != SIMBA_OK) {
        return NULL;
    }
    cln->handler = ngx_http_simba_cleanup_cfg;
    cln->data = mcf->cfg;
    return mcf;
}

static char *
ngx_http_simba_init_main_conf(ngx_conf_t *cf, void *conf)
{
    ngx_http_simba_main_conf_t  *mcf = conf;

    if (mcf->lease.len == 0 && mcf->backend.len == 0) {
        return NGX_CONF_OK; /* the module is loaded but unused */
    }
    if (mcf->lease.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"simba_backend\" is set but \"simba_lease\" is not: "
                           "name the lease this instance contends for");
        return NGX_CONF_ERROR;
    }
    if (mcf->backend.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"simba_lease %V\" needs \"simba_backend URL\" in the http block",
                           &mcf->lease);
        return NGX_CONF_ERROR;
    }
    if (simba_config_validate(mcf->cfg) != SIMBA_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "simba_option values break a rule: %s",
                           simba_last_error());
        return NGX_CONF_ERROR;
    }
    if (simba_version() < 0x010200 || (simba_version() >> 16) != SIMBA_VERSION_MAJOR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "libsimba %s is loaded, this module needs 1.2 or later",
                           simba_version_string());
        return NGX_CONF_ERROR;
    }
    mcf->zone = ngx_shared_memory_add(cf, &ngx_http_simba_zone_name, NGX_SIMBA_ZONE_SIZE,
                                      &ngx_http_simba_module);
    if (mcf->zone == NULL) {
        return NGX_CONF_ERROR;
    }
    if (mcf->zone->data != NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "shared zone \"simba\" is already in use");
        return NGX_CONF_ERROR;
    }
    mcf->zone->init = ngx_http_simba_init_zone;
    return NGX_CONF_OK;
}

static char *
ngx_http_simba_backend(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    static const char *schemes[] = { "memory://", "redis://", "postgresql://", "postgres://",
                                     "zookeeper://", NULL };
    ngx_http_simba_main_conf_t  *mcf = conf;
    ngx_str_t                   *value = cf->args->elts;
    ngx_uint_t                   i;
    char                        *schema;
    int                          rc;

    if (mcf->backend.len) {
        return "is duplicate";
    }
    for (i = 0; schemes[i] != NULL; i++) {
        if (value[1].len > ngx_strlen(schemes[i])
            && ngx_strncmp(value[1].data, schemes[i], ngx_strlen(schemes[i])) == 0)
        {
            break;
        }
    }
    if (schemes[i] == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"simba_backend\": unsupported URL (expected redis://, "
                           "postgresql://, zookeeper:// or memory://)");
        return NGX_CONF_ERROR;
    }
    mcf->backend.data = ngx_http_simba_cstr(cf->pool, &value[1]);
    if (mcf->backend.data == NULL) {
        return NGX_CONF_ERROR;
    }
    mcf->backend.len = value[1].len;
    if (ngx_strncmp(value[1].data, "postgres", 8) == 0) {
        /* Parses the URL without connecting: a bad port or parameter fails nginx -t. */
        schema = NULL;
        rc = simba_backend_schema((const char *) mcf->backend.data, &schema);
        simba_free(schema);
        if (rc == SIMBA_EINVAL) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"simba_backend\": %s",
                               simba_last_error());
            return NGX_CONF_ERROR;
        }
    }
    return NGX_CONF_OK;
}

static char *
ngx_http_simba_lease(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_simba_main_conf_t  *mcf = conf;
    ngx_str_t                   *value = cf->args->elts;
    const char                  *bad;

    if (mcf->lease.len) {
        return "is duplicate (one lease per instance)";
    }
    bad = ngx_http_simba_check_name(&value[1]);
    if (bad != NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"simba_lease\": lease name \"%V\" %s (1-128 characters of "
                           "[A-Za-z0-9._:-], other than \".\" and \"..\")", &value[1], bad);
        return NGX_CONF_ERROR;
    }
    mcf->lease.data = ngx_http_simba_cstr(cf->pool, &value[1]);
    if (mcf->lease.data == NULL) {
        return NGX_CONF_ERROR;
    }
    mcf->lease.len = value[1].len;
    return NGX_CONF_OK;
}

static char *
ngx_http_simba_option(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_simba_main_conf_t  *mcf = conf;
    ngx_str_t                   *value = cf->args->elts;
    u_char                      *key, *val;

    key = ngx_http_simba_cstr(cf->pool, &value[1]);
    val = ngx_http_simba_cstr(cf->pool, &value[2]);
    if (key == NULL || val == NULL) {
        return NGX_CONF_ERROR;
    }
    if (ngx_strcmp(key, "loop.mode") == 0 || ngx_strncmp(key, "callback.", 9) == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"simba_option %V\" is set by the module (EXTERNAL mode on the "
                           "worker's event loop)", &value[1]);
        return NGX_CONF_ERROR;
    }
    if (simba_config_set(mcf->cfg, (const char *) key, (const char *) val) != SIMBA_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"simba_option %V %V\": %s", &value[1],
                           &value[2], simba_last_error());
        return NGX_CONF_ERROR;
    }
    if (ngx_strcmp(key, "client.name") == 0) {
        mcf->client_name_set = 1;
    }
    return NGX_CONF_OK;
}

static void *
ngx_http_simba_create_loc_conf(ngx_conf_t *cf)
{
    ngx_http_simba_loc_conf_t  *lcf;

    lcf = ngx_pcalloc(cf->pool, sizeof(ngx_http_simba_loc_conf_t));
    if (lcf == NULL) {
        return NULL;
    }
    lcf->leader_only = NGX_CONF_UNSET;
    return lcf;
}

static char *
ngx_http_simba_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_http_simba_loc_conf_t   *prev = parent;
    ngx_http_simba_loc_conf_t   *conf = child;
    ngx_http_simba_main_conf_t  *mcf;

    ngx_conf_merge_value(conf->leader_only, prev->leader_only, 0);
    if (conf->leader_only || conf->status) {
        mcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_simba_module);
        if (mcf->lease.len == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"%s\" needs \"simba_backend\" and \"simba_lease\" in the "
                               "http block",
                               conf->leader_only ? "simba_leader_only on" : "simba_status");
            return NGX_CONF_ERROR;
        }
    }
    return NGX_CONF_OK;
}

/* --- requests ---------------------------------------------------------------------------- */

static ngx_int_t
ngx_http_simba_leader_only_handler(ngx_http_request_t *r)
{
    ngx_http_simba_loc_conf_t  *lcf;
    ngx_http_simba_view_t      *v;

    lcf = ngx_http_get_module_loc_conf(r, ngx_http_simba_module);
    if (!lcf->leader_only) {
        return NGX_DECLINED;
    }
    v = ngx_http_simba_request_view(r);
    if (v == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    if (!v->leader) {
        ngx_log_debug0(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "simba: not the leader: 503");
        return NGX_HTTP_SERVICE_UNAVAILABLE;
    }
    return NGX_DECLINED;
}

static ngx_int_t
ngx_http_simba_variable(ngx_http_request_t *r, ngx_http_variable_value_t *vv, uintptr_t data)
{
    ngx_http_simba_view_t  *v;
    u_char                 *p;

    v = ngx_http_simba_request_view(r);
    if (v == NULL) {
        return NGX_ERROR;
    }
    vv->valid = 1;
    vv->no_cacheable = 0;
    vv->not_found = 0;
    if (data == 0) { /* $simba_leader */
        vv->data = (u_char *) (v->leader ? "1" : "0");
        vv->len = 1;
        return NGX_OK;
    }
    /* $simba_token: empty unless leading, so an upstream never gets a stale token
       from this instance (proxy_set_header leaves an empty header out). */
    if (!v->leader) {
        vv->data = (u_char *) "";
        vv->len = 0;
        return NGX_OK;
    }
    p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
    if (p == NULL) {
        return NGX_ERROR;
    }
    vv->data = p;
    vv->len = ngx_sprintf(p, "%uL", v->token) - p;
    return NGX_OK;
}

static ngx_http_variable_t ngx_http_simba_vars[] = {

    { ngx_string("simba_leader"), NULL, ngx_http_simba_variable, 0,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("simba_token"), NULL, ngx_http_simba_variable, 1,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

      ngx_http_null_variable
};

static ngx_int_t
ngx_http_simba_add_variables(ngx_conf_t *cf)
{
    ngx_http_variable_t  *var, *v;

    for (v = ngx_http_simba_vars; v->name.len; v++) {
        var = ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL) {
            return NGX_ERROR;
        }
        var->get_handler = v->get_handler;
        var->data = v->data;
    }
    return NGX_OK;
}

static ngx_int_t
ngx_http_simba_postconfiguration(ngx_conf_t *cf)
{
    ngx_http_handler_pt        *h;
    ngx_http_core_main_conf_t  *cmcf;

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
    /* The rewrite phase of the location: before a "return" or "rewrite" there (the
       rewrite module registered its handler earlier, and a phase runs its handlers
       last-registered first), and before access checks and content. */
    h = ngx_array_push(&cmcf->phases[NGX_HTTP_REWRITE_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }
    *h = ngx_http_simba_leader_only_handler;
    return NGX_OK;
}

/* simba_status: the instance's view and every contending process's slot, as JSON. */
static ngx_int_t
ngx_http_simba_status_handler(ngx_http_request_t *r)
{
    ngx_http_simba_main_conf_t  *mcf;
    ngx_http_simba_shm_t        *sh;
    ngx_http_simba_view_t       *v;
    ngx_http_simba_slot_view_t  *sv;
    ngx_buf_t                   *b;
    ngx_chain_t                  out;
    ngx_int_t                    rc;
    ngx_uint_t                   i, first = 1;
    int64_t                      now, remaining;
    size_t                       size;

    if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }
    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }
    mcf = ngx_http_get_module_main_conf(r, ngx_http_simba_module);
    v = ngx_http_simba_request_view(r);
    sv = ngx_palloc(r->pool, sizeof(ngx_http_simba_slot_view_t));
    if (v == NULL || sv == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    size = 512 + NGX_SIMBA_SLOTS * (NGX_SIMBA_SNAPSHOT_MAX + NGX_SIMBA_NAME_MAX + 256);
    b = ngx_create_temp_buf(r->pool, size);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    b->last = ngx_sprintf(b->last, "{\"lease\":\"%V\",\"leader\":%s,\"token\":",
                          &mcf->lease, v->leader ? "true" : "false");
    b->last = v->leader ? ngx_sprintf(b->last, "%uL", v->token)
                        : ngx_cpymem(b->last, "null", 4);
    b->last = ngx_sprintf(b->last, ",\"remaining_ms\":%L,\"worker_pid\":%P,\"contenders\":[",
                          v->remaining_ms, ngx_pid);
    sh = mcf->zone ? mcf->zone->data : NULL;
    now = ngx_http_simba_now_ns();
    for (i = 0; sh != NULL && i < NGX_SIMBA_SLOTS; i++) {
        if (!ngx_http_simba_slot_read(&sh->slot[i], sv, 1)
            || ngx_strcmp(sv->name, mcf->lease.data) != 0)
        {
            continue;
        }
        remaining = sv->leader && now < sv->deadline_ns ? (sv->deadline_ns - now) / 1000000 : 0;
        b->last = ngx_sprintf(b->last,
                              "%s{\"pid\":%uL,\"alive\":%s,\"leader\":%s,\"token\":%uL,"
                              "\"remaining_ms\":%L,\"session\":\"%s\",\"updated_ms_ago\":%L,"
                              "\"snapshot\":",
                              first ? "" : ",", sv->owner,
                              ngx_http_simba_pid_dead(sv->owner) ? "false" : "true",
                              remaining > 0 ? "true" : "false",
                              sv->token, remaining, ngx_http_simba_session_name(sv->session),
                              (now - sv->updated_ns) / 1000000);
        if (sv->snapshot_len > 0) {
            b->last = ngx_cpymem(b->last, sv->snapshot, sv->snapshot_len);
        } else {
            b->last = ngx_cpymem(b->last, "null", 4);
        }
        *b->last++ = '}';
        first = 0;
    }
    b->last = ngx_cpymem(b->last, "]}\n", 3);
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = b->last - b->pos;
    ngx_str_set(&r->headers_out.content_type, "application/json");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }
    out.buf = b;
    out.next = NULL;
    return ngx_http_output_filter(r, &out);
}

static char *
ngx_http_simba_status(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_simba_loc_conf_t  *lcf = conf;
    ngx_http_core_loc_conf_t   *clcf;

    if (lcf->status) {
        return "is duplicate";
    }
    lcf->status = 1;
    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_simba_status_handler;
    return NGX_CONF_OK;
}
