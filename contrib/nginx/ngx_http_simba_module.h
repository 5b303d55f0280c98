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
 *
 * This private header is shared by the module's sources (listed in config):
 *   ngx_http_simba_module.c  the module, its directives, the request phase
 *                            handler, $simba_leader/$simba_token, simba_status;
 *   ngx_http_simba_zone.c    the shared zone: its slots and their seqlock;
 *   ngx_http_simba_owner.c   worker 0's client on the nginx event loop.
 */
#ifndef NGX_HTTP_SIMBA_MODULE_H
#define NGX_HTTP_SIMBA_MODULE_H

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

extern ngx_module_t ngx_http_simba_module;

/* Shared between the module's files, not exported from the .so. */
#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

/* ngx_http_simba_zone.c */
int64_t ngx_http_simba_now_ns(void);
void ngx_http_simba_slot_write(ngx_http_simba_slot_t *s, const ngx_str_t *name, uint32_t leader,
    uint64_t token, int64_t deadline_ns, uint32_t session, const char *snapshot);
ngx_uint_t ngx_http_simba_slot_read(ngx_http_simba_slot_t *s, ngx_http_simba_slot_view_t *v,
    ngx_uint_t with_snapshot);
void ngx_http_simba_read_view(ngx_http_simba_main_conf_t *mcf, ngx_http_simba_view_t *out);
ngx_uint_t ngx_http_simba_pid_dead(uint64_t pid);
void ngx_http_simba_reap(ngx_http_simba_shm_t *sh);
ngx_http_simba_slot_t *ngx_http_simba_claim_slot(ngx_http_simba_shm_t *sh, ngx_str_t *lease);
ngx_int_t ngx_http_simba_init_zone(ngx_shm_zone_t *shm_zone, void *data);

/* ngx_http_simba_owner.c */
ngx_int_t ngx_http_simba_init_process(ngx_cycle_t *cycle);
void ngx_http_simba_exit_process(ngx_cycle_t *cycle);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif /* NGX_HTTP_SIMBA_MODULE_H */
