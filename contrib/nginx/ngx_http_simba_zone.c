/*
 * ngx_http_simba_module: the shared zone "simba". One slot per contending
 * process (worker 0 of a generation), written by its owner under a seqlock
 * and read by every worker without locking; dead owners' slots are reaped.
 */
#include "ngx_http_simba_module.h"

/* --- the clock ----------------------------------------------------------------------- */

int64_t
ngx_http_simba_now_ns(void)
{
    struct timespec ts;

    /* CLOCK_MONOTONIC is the clock libsimba's deadlines are on (steady_clock). */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* --- the seqlock ---------------------------------------------------------------------- */

/* The owner's write; name (when not NULL) renames the slot, snapshot (when not
   NULL) replaces the snapshot. */
void
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
ngx_uint_t
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
void
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
ngx_uint_t
ngx_http_simba_pid_dead(uint64_t pid)
{
    return kill((pid_t) pid, 0) == -1 && ngx_errno == ESRCH;
}

/* Free the slots of dead owners (a worker 0 that crashed) once they claim nothing:
   not leader, or past their deadline. A slot still within its deadline tells the
   truth (the dead session holds the lease until it expires) and is left. */
void
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
ngx_http_simba_slot_t *
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
/* --- shared zone ---------------------------------------------------------------------- */

ngx_int_t
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

