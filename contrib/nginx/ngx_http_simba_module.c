/*
 * ngx_http_simba_module: the module (see ngx_http_simba_module.h for how it
 * works), its directives and configuration, the rewrite-phase handler of
 * simba_leader_only, the variables $simba_leader and $simba_token, and the
 * simba_status handler.
 */
#include "ngx_http_simba_module.h"

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

/* A directive's argument as a C string for the library; NULL (logged) when it has
   a NUL byte inside, which the library would read as its end. */
static u_char *
ngx_http_simba_cstr(ngx_conf_t *cf, ngx_str_t *s)
{
    ngx_str_t  *value = cf->args->elts;
    u_char     *p, *nul;

    nul = ngx_strlchr(s->data, s->data + s->len, '\0');
    if (nul != NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%V\": an argument has a NUL byte at index %uz",
                           &value[0], (size_t) (nul - s->data));
        return NULL;
    }
    p = ngx_pnalloc(cf->pool, s->len + 1);
    if (p != NULL) {
        ngx_memcpy(p, s->data, s->len);
        p[s->len] = '\0';
    }
    return p;
}

/* The library's name of a session status in the documented lowercase ("live"). */
static u_char *
ngx_http_simba_session_name(uint32_t s, u_char buf[24])
{
    const char  *name = simba_session_status_name((simba_session_status_t) s);
    size_t       n = ngx_min(ngx_strlen(name), 23);

    ngx_strlow(buf, (u_char *) name, n);
    buf[n] = '\0';
    return buf;
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
    if (simba_version() < 0x010300 || (simba_version() >> 16) != SIMBA_VERSION_MAJOR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "libsimba %s is loaded, this module needs 1.3 or later",
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
    mcf->backend.data = ngx_http_simba_cstr(cf, &value[1]);
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

    if (mcf->lease.len) {
        return "is duplicate (one lease per instance)";
    }
    /* Counted: a NUL byte inside is refused, not read as the name's end. */
    if (simba_lease_name_check((const char *) value[1].data, value[1].len) != SIMBA_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"simba_lease\": %s", simba_last_error());
        return NGX_CONF_ERROR;
    }
    mcf->lease.data = ngx_http_simba_cstr(cf, &value[1]);
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

    key = ngx_http_simba_cstr(cf, &value[1]);
    val = ngx_http_simba_cstr(cf, &value[2]);
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

    /* The status answers on followers too: a "simba_leader_only on" above it is not
       inherited, only one in its own location counts. */
    if (conf->status && conf->leader_only == NGX_CONF_UNSET) {
        conf->leader_only = 0;
    }
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

/* One contender of our lease in simba_status's JSON. */
static void
ngx_http_simba_status_contender(ngx_buf_t *b, ngx_http_simba_slot_view_t *sv, int64_t now,
    ngx_uint_t first)
{
    int64_t  remaining;
    u_char   session[24];

    remaining = sv->leader && now < sv->deadline_ns ? (sv->deadline_ns - now) / 1000000 : 0;
    b->last = ngx_sprintf(b->last,
                          "%s{\"pid\":%uL,\"alive\":%s,\"leader\":%s,\"token\":%uL,"
                          "\"remaining_ms\":%L,\"session\":\"%s\",\"updated_ms_ago\":%L,"
                          "\"snapshot\":",
                          first ? "" : ",", sv->owner,
                          ngx_http_simba_pid_dead(sv->owner) ? "false" : "true",
                          remaining > 0 ? "true" : "false",
                          sv->token, remaining, ngx_http_simba_session_name(sv->session, session),
                          (now - sv->updated_ns) / 1000000);
    if (sv->snapshot_len > 0) {
        b->last = ngx_cpymem(b->last, sv->snapshot, sv->snapshot_len);
    } else {
        b->last = ngx_cpymem(b->last, "null", 4);
    }
    *b->last++ = '}';
}

/* simba_status's JSON: the instance's view and every contending process's slot. */
static ngx_buf_t *
ngx_http_simba_status_body(ngx_http_request_t *r, ngx_http_simba_main_conf_t *mcf,
    ngx_http_simba_view_t *v, ngx_http_simba_slot_view_t *sv)
{
    ngx_http_simba_shm_t  *sh;
    ngx_buf_t             *b;
    ngx_uint_t             i, first = 1;
    int64_t                now;
    size_t                 size;

    size = 512 + NGX_SIMBA_SLOTS * (NGX_SIMBA_SNAPSHOT_MAX + NGX_SIMBA_NAME_MAX + 256);
    b = ngx_create_temp_buf(r->pool, size);
    if (b == NULL) {
        return NULL;
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
        ngx_http_simba_status_contender(b, sv, now, first);
        first = 0;
    }
    b->last = ngx_cpymem(b->last, "]}\n", 3);
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;
    return b;
}

/* simba_status: the instance's view and every contending process's slot, as JSON. */
static ngx_int_t
ngx_http_simba_status_handler(ngx_http_request_t *r)
{
    ngx_http_simba_main_conf_t  *mcf;
    ngx_http_simba_view_t       *v;
    ngx_http_simba_slot_view_t  *sv;
    ngx_buf_t                   *b;
    ngx_chain_t                  out;
    ngx_int_t                    rc;

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
    b = ngx_http_simba_status_body(r, mcf, v, sv);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

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
