/* Route table and the endpoints that need no database: health, metrics,
 * the hardware table. The trace, what-if, platform and job endpoints live
 * in rv_api_traces.c, rv_api_whatif.c and rv_api_fleet.c. */
#include "rv_api.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rv_api_internal.h"
#include "rv_gcache.h"
#include "rv_auth.h"
#include "util/rv_buf.h"
#include "rv_db.h"
#include "hw/rv_hw.h"
#include "rv_metrics.h"

static void h_healthz(rv_req *r, void *app)
{
    const rv_app *a = app;
    rv_req_respond_json(r, 200, json_pack("{s:s,s:s}", "status", "ok", "version", a->version));
}

static void h_readyz(rv_req *r, void *app)
{
    rv_app *a = app;
    rv_error e;

    rv_error_clear(&e);
    if (rv_api_draining(a)) {
        rv_req_error(r, 503, "draining", NULL, "the server is shutting down");
        return;
    }
    if (!a->db || rv_db_ping(a->db, &e) != 0) {
        rv_req_error(r, 503, "database_unavailable", NULL, "the database is not reachable%s%s",
                     e.message[0] ? ": " : "", e.message);
        return;
    }
    json_t *body = json_pack("{s:s,s:s}", "status", "ready", "database", "ok");
    /* Reads and what-ifs go on when the disk is low; uploads do not. */
    int64_t free_b = -1;
    int low = rv_api_disk_low(a, 0, &free_b);
    if (body && free_b >= 0)
        json_object_set_new(body, "disk",
                            json_pack("{s:I,s:I,s:b}", "free_bytes", (json_int_t)free_b,
                                      "reserve_bytes", (json_int_t)a->cfg.disk_reserve,
                                      "uploads_accepted", !low));
    if (body && low)
        json_object_set_new(body, "warnings",
                            json_pack("[s]", "the database's disk is below its free-space "
                                             "reserve (--disk-reserve): uploads are refused "
                                             "(507)"));
    rv_req_respond_json(r, 200, body);
}

static void h_metrics(rv_req *r, void *app)
{
    rv_app *a = app;
    size_t len = 0;
    char *text = rv_metrics_render(a->metrics, &len);

    if (!text) {
        rv_req_error(r, 503, "unavailable", NULL, "cannot render metrics");
        return;
    }
    /* The loaded-trace cache keeps its own counters: they follow the
     * registry's text in one capped buffer. */
    rv_gcache_counts gc;
    rv_gcache_stats(a->gcache, &gc);
    rv_buf all = RV_BUF_INIT(len + 8192);
    rv_buf_add(&all, text, len);
    free(text);
    rv_buf_printf(&all,
                  "# HELP reveried_graph_cache_hits_total Loads answered by the loaded-trace "
                  "cache.\n# TYPE reveried_graph_cache_hits_total counter\n"
                  "reveried_graph_cache_hits_total %llu\n"
                  "# HELP reveried_graph_cache_misses_total Loads that read the database.\n"
                  "# TYPE reveried_graph_cache_misses_total counter\n"
                  "reveried_graph_cache_misses_total %llu\n"
                  "# HELP reveried_graph_cache_bytes Memory held by the loaded-trace cache.\n"
                  "# TYPE reveried_graph_cache_bytes gauge\nreveried_graph_cache_bytes %zu\n"
                  "# HELP reveried_graph_cache_entries Traces held by the loaded-trace cache.\n"
                  "# TYPE reveried_graph_cache_entries gauge\nreveried_graph_cache_entries %zu\n",
                  (unsigned long long)gc.hits, (unsigned long long)gc.misses, gc.bytes, gc.entries);
    rv_buf_printf(&all,
                  "# HELP reveried_graph_cache_evictions_total Entries dropped to make room.\n"
                  "# TYPE reveried_graph_cache_evictions_total counter\n"
                  "reveried_graph_cache_evictions_total %llu\n"
                  "# HELP reveried_graph_cache_rejected_total Loads not kept (too big, or asked "
                  "for less often than what they would evict).\n"
                  "# TYPE reveried_graph_cache_rejected_total counter\n"
                  "reveried_graph_cache_rejected_total %llu\n"
                  "# HELP reveried_graph_cache_hit_ratio Hits over lookups since the start.\n"
                  "# TYPE reveried_graph_cache_hit_ratio gauge\n"
                  "reveried_graph_cache_hit_ratio %.4f\n",
                  (unsigned long long)gc.evictions, (unsigned long long)gc.rejected,
                  gc.hits + gc.misses ? (double)gc.hits / (double)(gc.hits + gc.misses) : 0.0);
    int64_t free_b = -1;
    int low = rv_api_disk_low(a, 0, &free_b);
    rv_buf_printf(&all,
                  "# HELP reveried_disk_free_bytes Free bytes on the database's disk (-1: not "
                  "watched).\n# TYPE reveried_disk_free_bytes gauge\n"
                  "reveried_disk_free_bytes %lld\n"
                  "# HELP reveried_disk_reserve_bytes Free space kept there (--disk-reserve).\n"
                  "# TYPE reveried_disk_reserve_bytes gauge\nreveried_disk_reserve_bytes %llu\n"
                  "# HELP reveried_disk_uploads_refused 1 while uploads are refused (507) for "
                  "the reserve.\n# TYPE reveried_disk_uploads_refused gauge\n"
                  "reveried_disk_uploads_refused %d\n",
                  (long long)free_b, (unsigned long long)a->cfg.disk_reserve, low);
    text = rv_buf_take(&all, &len);
    if (!text) {
        rv_req_error(r, 503, "unavailable", NULL, "cannot render metrics");
        return;
    }
    rv_req_respond_buf(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
}

json_t *rv_api_hw_json(const rv_hw *t)
{
    json_t *tf = json_object();
    for (int d = 0; tf && d < RV_DT_COUNT; d++)
        if (t->tflops[d] > 0)
            json_object_set_new(tf, rv_dtype_name(d), json_real(t->tflops[d]));
    /* The table holds no settable limit above the default: the default is
     * the highest cap a what-if models (docs/models/power.md). */
    return json_pack("{s:s,s:s,s:i,s:f,s:f,s:f,s:o,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "name", t->name,
                     "vendor", t->vendor, "sms", t->sms, "max_sm_mhz", t->max_sm_mhz, "min_sm_mhz",
                     t->min_sm_mhz, "hbm_gbps", t->hbm_gbps, "tflops", tf ? tf : json_object(),
                     "default_power_limit_w", t->default_pl_w, "min_power_limit_w", t->min_pl_w,
                     "max_power_limit_w", t->default_pl_w, "idle_w", t->idle_w, "nvlink_gbps",
                     t->nvlink_gbps, "pcie_gbps", t->pcie_gbps, "launch_us", t->launch_us);
}

static void h_hardware(rv_req *r, void *app)
{
    size_t n = 0;
    const rv_hw *t = rv_hw_table(&n);
    json_t *arr = json_array();

    for (size_t i = 0; i < n && arr; i++)
        json_array_append_new(arr, rv_api_hw_json(&t[i]));
    rv_req_respond_json(r, 200, json_pack("{s:o}", "hardware", arr));
}

/* GET /v1/whoami: the caller's token id and scopes (any valid token, so
 * the route itself asks for no scope). */
static void h_whoami(rv_req *r, void *app)
{
    rv_app *a = app;
    char who[32], csv[64];
    unsigned scopes = 0;

    if (rv_auth_whoami(a->auth, rv_req_header(r, "Authorization"), who, sizeof(who), &scopes) !=
        0) {
        rv_req_error(r, 401, "unauthorized", "Authorization", "missing, unknown or revoked token");
        return;
    }
    rv_auth_scopes_str(scopes, csv, sizeof(csv));
    json_t *arr = json_array();
    for (char *tok = csv, *save = NULL; (tok = strtok_r(tok, ",", &save)); tok = NULL)
        json_array_append_new(arr, json_string(tok));
    rv_req_respond_json(r, 200,
                        json_pack("{s:s,s:o,s:b}", "name", who, "scopes", arr, "auth_required",
                                  rv_auth_required(a->auth)));
}

static const rv_route routes[] = {
    {"GET", "/healthz", h_healthz, RV_BODY_NONE, 0, RV_ROUTE_INLINE, "healthz"},
    {"GET", "/readyz", h_readyz, RV_BODY_NONE, 0, 0, "readyz"},
    {"GET", "/metrics", h_metrics, RV_BODY_NONE, 0, RV_ROUTE_INLINE, "metrics"},
    {"POST", "/v1/traces", rv_api_trace_upload, RV_BODY_UPLOAD, RV_SCOPE_INGEST, 0,
     "traces_upload"},
    {"GET", "/v1/traces", rv_api_trace_list, RV_BODY_NONE, RV_SCOPE_READ, 0, "traces_list"},
    {"GET", "/v1/traces/{id}", rv_api_trace_get, RV_BODY_NONE, RV_SCOPE_READ, 0, "traces_get"},
    {"DELETE", "/v1/traces/{id}", rv_api_trace_delete, RV_BODY_NONE, RV_SCOPE_ADMIN, 0,
     "traces_delete"},
    {"GET", "/v1/traces/{id}/original", rv_api_trace_original, RV_BODY_NONE, RV_SCOPE_READ, 0,
     "traces_original"},
    {"GET", "/v1/traces/{id}/timeline", rv_api_trace_timeline, RV_BODY_NONE, RV_SCOPE_READ, 0,
     "traces_timeline"},
    {"POST", "/v1/traces/{id}/whatif", rv_api_trace_whatif, RV_BODY_JSON, RV_SCOPE_READ, 0,
     "traces_whatif"},
    {"POST", "/v1/traces/{id}/advise", rv_api_trace_advise, RV_BODY_JSON, RV_SCOPE_READ, 0,
     "traces_advise"},
    {"PUT", "/v1/traces/{id}/et", rv_api_trace_et_attach, RV_BODY_UPLOAD, RV_SCOPE_INGEST, 0,
     "traces_et"},
    {"POST", "/v1/traces/{id}/whatif/export", rv_api_trace_export, RV_BODY_JSON, RV_SCOPE_READ, 0,
     "traces_whatif_export"},
    {"GET", "/v1/traces/{id}/diff", rv_api_trace_diff_get, RV_BODY_NONE, RV_SCOPE_READ, 0,
     "traces_diff"},
    {"POST", "/v1/traces/{id}/diff", rv_api_trace_diff_post, RV_BODY_JSON, RV_SCOPE_READ, 0,
     "traces_diff_whatif"},
    {"POST", "/v1/fleet/whatif", rv_api_fleet_whatif, RV_BODY_JSON, RV_SCOPE_READ, 0,
     "fleet_whatif"},
    {"GET", "/v1/jobs/{id}", rv_api_job_get, RV_BODY_NONE, RV_SCOPE_READ, 0, "jobs_get"},
    /* The token that queued the job or an admin one (checked in the handler). */
    {"DELETE", "/v1/jobs/{id}", rv_api_job_cancel, RV_BODY_NONE, RV_SCOPE_READ, 0, "jobs_cancel"},
    {"GET", "/v1/platforms", rv_api_platform_list, RV_BODY_NONE, RV_SCOPE_READ, 0,
     "platforms_list"},
    {"GET", "/v1/platforms/{id}/overheads", rv_api_platform_overheads, RV_BODY_NONE, RV_SCOPE_READ,
     0, "platforms_overheads"},
    {"GET", "/v1/platforms/{id}/kernel-models", rv_api_platform_kmodels, RV_BODY_NONE,
     RV_SCOPE_READ, 0, "platforms_kernel_models"},
    {"GET", "/v1/training-jobs", rv_api_training_list, RV_BODY_NONE, RV_SCOPE_READ, 0,
     "training_jobs_list"},
    {"POST", "/v1/training-jobs", rv_api_training_upload, RV_BODY_UPLOAD, RV_SCOPE_INGEST, 0,
     "training_jobs_upload"},
    {"GET", "/v1/training-jobs/{id}", rv_api_training_get, RV_BODY_NONE, RV_SCOPE_READ, 0,
     "training_jobs_get"},
    {"POST", "/v1/training-jobs/{id}/whatif", rv_api_training_whatif, RV_BODY_JSON, RV_SCOPE_READ,
     0, "training_jobs_whatif"},
    {"POST", "/v1/training-jobs/{id}/advise", rv_api_training_advise, RV_BODY_JSON, RV_SCOPE_READ,
     0, "training_jobs_advise"},
    {"GET", "/v1/whoami", h_whoami, RV_BODY_NONE, 0, RV_ROUTE_INLINE, "whoami"},
    {"GET", "/v1/hardware", h_hardware, RV_BODY_NONE, RV_SCOPE_READ, RV_ROUTE_INLINE, "hardware"},
    {"GET", "/v1/whatif/kinds", rv_api_whatif_kinds, RV_BODY_NONE, RV_SCOPE_READ, RV_ROUTE_INLINE,
     "whatif_kinds"},
};

#define NROUTES (sizeof(routes) / sizeof(routes[0]))

/* A handler that found the database unreachable (the server gone, shutting
 * down or starting up: rv_db_take_unavailable) answers 503
 * database_unavailable with Retry-After, not 500 internal, whatever it had
 * answered. Every route that runs on the worker pool goes through it. */
static void db_guard(rv_req *r, void *app, rv_handler fn)
{
    rv_db_take_unavailable();
    fn(r, app);
    if (rv_db_take_unavailable()) {
        rv_req_error(r, 503, "database_unavailable", NULL,
                     "the database is not reachable; retry shortly");
        rv_req_add_header(r, "Retry-After", "2");
    }
}

/* The table is served through a copy whose worker-pool handlers are these
 * trampolines, one per row, so that a route added above is guarded too. */
#define TRAMPOLINE(i)                                                                              \
    static void tramp_##i(rv_req *r, void *app)                                                    \
    {                                                                                              \
        db_guard(r, app, routes[i].fn);                                                            \
    }
TRAMPOLINE(0)
TRAMPOLINE(1)
TRAMPOLINE(2)
TRAMPOLINE(3)
TRAMPOLINE(4)
TRAMPOLINE(5)
TRAMPOLINE(6)
TRAMPOLINE(7)
TRAMPOLINE(8)
TRAMPOLINE(9)
TRAMPOLINE(10)
TRAMPOLINE(11)
TRAMPOLINE(12)
TRAMPOLINE(13)
TRAMPOLINE(14)
TRAMPOLINE(15)
TRAMPOLINE(16)
TRAMPOLINE(17)
TRAMPOLINE(18)
TRAMPOLINE(19)
TRAMPOLINE(20)
TRAMPOLINE(21)
TRAMPOLINE(22)
TRAMPOLINE(23)
TRAMPOLINE(24)
TRAMPOLINE(25)
TRAMPOLINE(26)
TRAMPOLINE(27)
TRAMPOLINE(28)
TRAMPOLINE(29)
TRAMPOLINE(30)
TRAMPOLINE(31)
static const rv_handler trampolines[] = {
    tramp_0,  tramp_1,  tramp_2,  tramp_3,  tramp_4,  tramp_5,  tramp_6,  tramp_7,
    tramp_8,  tramp_9,  tramp_10, tramp_11, tramp_12, tramp_13, tramp_14, tramp_15,
    tramp_16, tramp_17, tramp_18, tramp_19, tramp_20, tramp_21, tramp_22, tramp_23,
    tramp_24, tramp_25, tramp_26, tramp_27, tramp_28, tramp_29, tramp_30, tramp_31,
};
_Static_assert(NROUTES <= sizeof(trampolines) / sizeof(trampolines[0]),
               "more routes than trampolines: add TRAMPOLINE rows");

static rv_route guarded[NROUTES];
static pthread_once_t guarded_once = PTHREAD_ONCE_INIT;

static void guard_routes(void)
{
    for (size_t i = 0; i < NROUTES; i++) {
        guarded[i] = routes[i];
        if (!(routes[i].flags & RV_ROUTE_INLINE))
            guarded[i].fn = trampolines[i];
    }
}

const rv_route *rv_api_routes(size_t *n)
{
    pthread_once(&guarded_once, guard_routes);
    *n = NROUTES;
    return guarded;
}

int64_t rv_api_id_param(rv_req *r, const char *name)
{
    const char *s = rv_req_param(r, name);
    char *end;

    if (!s || !*s || *s == '-' || *s == '+')
        goto bad;
    long long v = strtoll(s, &end, 10);
    if (*end || v <= 0 || v == (long long)INT64_MAX)
        goto bad;
    return v;
bad:
    rv_req_error(r, 404, "not_found", name, "no such %s: '%s'", name, s ? s : "");
    return -1;
}
