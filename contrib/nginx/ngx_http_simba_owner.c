/*
 * ngx_http_simba_module: the owner, worker 0's simba client in EXTERNAL mode
 * on the worker's nginx event loop (its fd a read event, its timeout an nginx
 * timer), the election's callbacks, and publishing the leadership into the
 * owner's slot of the shared zone.
 */
#include "ngx_http_simba_module.h"

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
    ngx_http_simba_owner_t  *o = &ngx_http_simba_owner;

    if (o->term == t) {
        simba_term_release(o->term);
        o->term = NULL;
    }
    ngx_log_error(NGX_LOG_NOTICE, o->log, 0,
                  "simba: term of \"%s\" (token %uL) revoked: %s (%d)", simba_term_name(t),
                  (uint64_t) simba_term_token(t), simba_revoke_reason_name(reason), (int) reason);
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

/* The owner's client, configured from the simba_option values; NGX_ERROR when
   it could not be opened (logged). */
static ngx_int_t
ngx_http_simba_open_client(ngx_cycle_t *cycle, ngx_http_simba_main_conf_t *mcf)
{
    ngx_http_simba_owner_t  *o = &ngx_http_simba_owner;
    simba_config_t          *cfg = NULL;
    int                      rc;

    if (simba_config_copy(&cfg, mcf->cfg) != SIMBA_OK
        || simba_config_set(cfg, "loop.mode", "external") != SIMBA_OK
        || simba_config_set_logger(cfg, ngx_http_simba_log, NULL, SIMBA_LOG_INFO) != SIMBA_OK)
    {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0, "simba: cannot configure the client: %s",
                      simba_last_error());
        simba_config_free(cfg);
        return NGX_ERROR;
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
    if (rc != SIMBA_OK) {
        o->client = NULL;
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "simba: cannot open a client on the backend: %s (%s)",
                      simba_strerror(rc), simba_last_error());
        return NGX_ERROR;
    }
    return NGX_OK;
}

/* The client's fd as the read event of an nginx connection, and the timer. */
static ngx_int_t
ngx_http_simba_watch_client(ngx_cycle_t *cycle)
{
    ngx_http_simba_owner_t  *o = &ngx_http_simba_owner;
    ngx_connection_t        *c;
    int                      fd;

    fd = simba_client_fd(o->client);
    c = fd >= 0 ? ngx_get_connection(fd, cycle->log) : NULL;
    if (c == NULL) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "simba: cannot watch the client's fd %d on the event loop", fd);
        return NGX_ERROR;
    }
    c->read->handler = ngx_http_simba_read_handler;
    c->read->log = cycle->log;
    c->write->log = cycle->log;
    /* Level-triggered: the fd stays readable while the library has work ready. */
    if (ngx_add_event(c->read, NGX_READ_EVENT, NGX_LEVEL_EVENT) != NGX_OK) {
        ngx_free_connection(c);
        c->fd = (ngx_socket_t) -1;
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0, "simba: cannot add the client's fd");
        return NGX_ERROR;
    }
    o->conn = c;

    o->timer.handler = ngx_http_simba_timer_handler;
    o->timer.log = cycle->log;
    o->timer.data = o;
    /* Cancelable: the timer alone does not keep a gracefully exiting worker alive;
       exit_process releases the lease. */
    o->timer.cancelable = 1;
    return NGX_OK;
}

static ngx_int_t
ngx_http_simba_start_election(ngx_cycle_t *cycle, ngx_http_simba_main_conf_t *mcf)
{
    ngx_http_simba_owner_t  *o = &ngx_http_simba_owner;
    simba_listener_t         l;
    int                      rc;

    l.on_elected = ngx_http_simba_on_elected;
    l.on_revoked = ngx_http_simba_on_revoked;
    l.ud = o;
    rc = simba_election_start(&o->election, o->client, (const char *) mcf->lease.data, &l);
    if (rc != SIMBA_OK) {
        o->election = NULL;
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0, "simba: cannot contend for \"%V\": %s (%s)",
                      &mcf->lease, simba_strerror(rc), simba_last_error());
        return NGX_ERROR;
    }
    return NGX_OK;
}

ngx_int_t
ngx_http_simba_init_process(ngx_cycle_t *cycle)
{
    ngx_http_simba_main_conf_t  *mcf;
    ngx_http_simba_owner_t      *o = &ngx_http_simba_owner;

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

    if (ngx_http_simba_open_client(cycle, mcf) != NGX_OK
        || ngx_http_simba_watch_client(cycle) != NGX_OK
        || ngx_http_simba_start_election(cycle, mcf) != NGX_OK)
    {
        /* The worker serves on as a follower: leader-only locations answer 503. */
        ngx_http_simba_exit_process(cycle);
        return NGX_OK;
    }
    ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                  "simba: worker %P contends for \"%V\" (libsimba %s, EXTERNAL mode)",
                  ngx_pid, &mcf->lease, simba_version_string());
    ngx_http_simba_publish();
    ngx_http_simba_arm();
    return NGX_OK;
}

void
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
           at most until the session's local deadline when the backend does not
           answer (ADR 0030). */
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

