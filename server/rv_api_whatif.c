/* What-ifs on stored traces: POST /v1/traces/{id}/whatif, the timeline, the
 * list of what-if kinds, and rv_api_whatif_run which the fleet jobs share.
 *
 * The engine's rv_run computes every answer and rv_run_render_bytes writes
 * it; this file only adds the cache and the HTTP around them. Every answer
 * carries the replay error of the unmodified graph and its warnings. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rv_api_internal.h"
#include "rv_db.h"
#include "rv_db_kmodels.h"
#include "rv_gcache.h"
#include "hw/rv_hw.h"
#include "cost/rv_kmodel_acc.h"
#include "rv_metrics.h"
#include "simulate/rv_report.h"
#include "graph/rv_retime.h"
#include "run/rv_run.h"
#include "util/rv_jsonw.h"
#include "util/rv_sha256.h"
#include "whatif/rv_whatif.h"

/* Bumped whenever a model changes its answers, so cached results expire.
 * 2: replay_error is |baseline - measured| / measured (was signed).
 * 3: answers carry flops, mfu, throughput, utilization and memory.
 * 4: "gpu" rescales kernel times when the trace has op shapes.
 * 6: measured over the steady steps, numbers rounded (rv_round.h), bound
 *    warnings, null figures for a modelled trace. */
#define RV_MODEL_VERSION "reverie-models-6"

#define TIMELINE_DEFAULT_TASKS 20000

void rv_api_request_hash(const json_t *doc, const char *inputs, char *out)
{
    char *canon = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    rv_sha256 s;
    uint8_t d[RV_SHA256_LEN];

    rv_sha256_init(&s);
    rv_sha256_update(&s, RV_MODEL_VERSION "\n", strlen(RV_MODEL_VERSION) + 1);
    if (canon)
        rv_sha256_update(&s, canon, strlen(canon));
    if (inputs) {
        rv_sha256_update(&s, "\n", 1);
        rv_sha256_update(&s, inputs, strlen(inputs));
    }
    rv_sha256_final(&s, d);
    rv_sha256_to_hex(d, out);
    free(canon);
}

json_t *rv_api_whatif_doc(rv_req *r)
{
    json_t *doc = rv_req_json(r);
    if (doc && !json_is_object(doc)) {
        rv_req_error(r, 400, "invalid", NULL, "the what-if document must be a JSON object");
        json_decref(doc);
        return NULL;
    }
    return doc;
}

int rv_api_doc_uses_platform(const json_t *doc)
{
    const char *how = json_string_value(json_object_get(doc, "host_overheads"));
    return how && strcmp(how, "platform") == 0;
}

int rv_api_doc_uses_platform_kmodels(const json_t *doc)
{
    const char *how = json_string_value(json_object_get(doc, "kernel_models"));
    return how && strcmp(how, "platform") == 0;
}

int rv_api_doc_platform_dependent(const json_t *doc)
{
    return rv_api_doc_uses_platform(doc) || rv_api_doc_uses_platform_kmodels(doc);
}

/* The model of acc on hw (*out new, free(); NULL when acc is empty). */
static int model_of(const rv_kmodel_acc *acc, const rv_hw *hw, rv_kmodel **out, rv_error *err)
{
    *out = NULL;
    if (rv_kmodel_acc_count(acc) <= 0)
        return 0;
    if ((*out = malloc(sizeof(**out))) == NULL)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    rv_kmodel_from_acc(*out, acc, hw);
    return 0;
}

int rv_api_gpu_kmodel(rv_app *a, const char *gpu, rv_kmodel **out, char *version, size_t cap,
                      rv_error *err)
{
    rv_kmodel_acc *acc = malloc(sizeof(*acc));
    *out = NULL;
    if (!acc)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    int rc = rv_db_gpu_kmodel(a->db, gpu, acc, version, cap, err);
    if (!rc)
        rc = model_of(acc, rv_hw_lookup(gpu), out, err);
    free(acc);
    return rc;
}

/* The kernel models a "kernel_models": "platform" document (borrowed)
 * asks for, read from the store: the sums of trace_id's platform (*acc,
 * new, free()) and the models of the stored platforms of the document's
 * "gpu", else of the trace's own GPU (an execution trace alone has no
 * measured kernels of its own; *tgt new, free(), NULL when none). version
 * (may be NULL) receives what they were read at. Refused when neither has
 * any. */
static int platform_kmodels_read(rv_app *a, int64_t trace_id, const json_t *doc,
                                 rv_kmodel_acc **acc_out, rv_kmodel **tgt_out, char *version,
                                 size_t cap, rv_error *err)
{
    rv_kmodel_acc *acc = malloc(sizeof(*acc));
    rv_kmodel *tgt = NULL;
    const char *gpu = json_string_value(json_object_get(doc, "gpu"));
    char v1[128] = "", v2[128] = "", own_gpu[128] = "";
    int64_t pid = 0;
    int rc = 0;
    *acc_out = NULL;
    *tgt_out = NULL;
    if (!acc)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    rc = rv_db_trace_kmodel(a->db, trace_id, &pid, own_gpu, sizeof(own_gpu), v1, sizeof(v1), acc,
                            err);
    if (!rc)
        rc = rv_api_gpu_kmodel(a, gpu && *gpu ? gpu : own_gpu, &tgt, v2, sizeof(v2), err);
    if (rc)
        goto out;
    if (rv_kmodel_acc_count(acc) <= 0 && !tgt) {
        rc = rv_error_field(err, RV_ERR_UNSUPPORTED, "kernel_models",
                            "kernel_models is platform but platform %lld (of trace %lld) has no "
                            "kernel models yet%s (they come from stored traces with op shapes, "
                            "on a GPU of the hardware table); ask with \"kernel_models\": "
                            "\"trace\"",
                            (long long)pid, (long long)trace_id,
                            gpu && *gpu ? ", nor has any platform of the requested gpu" : "");
        goto out;
    }
    if (version && cap)
        snprintf(version, cap, "%s; %s", v1, v2);
    *acc_out = acc;
    *tgt_out = tgt;
    acc = NULL;
    tgt = NULL;
out:
    free(acc);
    free(tgt);
    return rc;
}

void rv_api_whatif_pre_free(rv_api_whatif_pre *p)
{
    if (!p)
        return;
    rv_whatif_free(p->w);
    free(p->acc);
    free(p->tgt);
    memset(p, 0, sizeof(*p));
}

/* The engine's table from stored rows (borrowed). Names are interned first
 * and pointed at afterwards, because interning may move the string data. */
static int oh_table_from_rows(const rv_db_overhead_row *rows, size_t n, rv_oh_table **out,
                              rv_error *err)
{
    rv_oh_table *tab = calloc(1, sizeof(*tab));
    uint32_t *ids = calloc(n ? n : 1, sizeof(*ids));
    int rc = 0;

    *out = NULL;
    if (!tab || !ids || !(tab->entries = calloc(n ? n : 1, sizeof(*tab->entries))) ||
        rv_strtab_intern(&tab->names, "", 0) == UINT32_MAX) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const char *nm = rows[i].op_name ? rows[i].op_name : "*";
        if (strcmp(nm, "*") == 0) {
            ids[i] = RV_OH_OVERALL;
            continue;
        }
        ids[i] = rv_strtab_intern(&tab->names, nm, strlen(nm));
        if (ids[i] == UINT32_MAX) {
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (rows[i].type < 1 || rows[i].type > RV_OH_NTYPES || rows[i].stat.count == 0)
            continue;
        rv_oh_entry *e = &tab->entries[tab->n++];
        e->type = (uint8_t)rows[i].type;
        e->name = ids[i] == RV_OH_OVERALL ? NULL : rv_strtab_get(&tab->names, ids[i]);
        e->mean_us = rows[i].stat.mean;
    }
    *out = tab;
    tab = NULL;
out:
    free(ids);
    rv_oh_table_free(tab);
    return rc;
}

/* The document's "gpu" (borrowed), or NULL. */
static const char *doc_gpu(const json_t *doc)
{
    return json_string_value(json_object_get(doc, "gpu"));
}

int rv_api_platform_version(rv_app *a, int64_t trace_id, const json_t *doc, char *version,
                            size_t cap, rv_error *err)
{
    rv_db_host_stats hs;
    int rc = rv_db_host_overheads(a->db, trace_id, doc_gpu(doc), &hs, NULL, NULL, err);
    if (rc == 0 && version && cap)
        snprintf(version, cap, "%s", hs.version);
    return rc;
}

int rv_api_platform_table(rv_app *a, int64_t trace_id, const json_t *doc, rv_oh_table **out,
                          char *version, size_t cap, rv_error *err)
{
    rv_db_overhead_row *rows = NULL;
    rv_db_host_stats hs;
    size_t n = 0;

    *out = NULL;
    int rc = rv_db_host_overheads(a->db, trace_id, doc_gpu(doc), &hs, &rows, &n, err);
    if (rc != 0)
        return rc;
    if (version && cap)
        snprintf(version, cap, "%s", hs.version);
    if (n > 0)
        rc = oh_table_from_rows(rows, n, out, err);
    rv_db_overhead_rows_free(rows, n);
    if (rc == 0 && *out)
        snprintf((*out)->gpu, sizeof((*out)->gpu), "%s", hs.gpu_model);
    if (rc == 0 && (!*out || (*out)->n == 0)) {
        rv_oh_table_free(*out);
        *out = NULL;
        rc = rv_error_field(err, RV_ERR_UNSUPPORTED, "host_overheads",
                            "host_overheads is platform but platform %lld (of trace %lld) has no "
                            "host-overhead statistics yet (they come from the launch calls of "
                            "its traces); ask with \"host_overheads\": \"trace\" instead",
                            (long long)hs.platform_id, (long long)trace_id);
    }
    return rc;
}

/* rv_run_opts.cancel_fn for a request: its client went away. */
static int client_gone(void *r)
{
    return rv_req_client_gone(r);
}

int rv_api_whatif_run(rv_app *a, const rv_loaded *l, const json_t *doc, const rv_oh_table *oh,
                      int keep_predicted, rv_api_et_model *etm, rv_run_result **out, rv_error *err)
{
    return rv_api_whatif_run_req(a, NULL, l, doc, oh, keep_predicted, etm, NULL, out, err);
}

/* The kernel models of w on the loaded trace: from pre when it read them,
 * else read now. *km new (free()); *tgt borrowed from pre or new (then
 * *tgt_owned is set). */
static int run_kmodels(rv_app *a, const rv_loaded *l, const json_t *doc,
                       const rv_api_whatif_pre *pre, rv_kmodel **km, rv_kmodel **tgt,
                       int *tgt_owned, rv_error *err)
{
    rv_kmodel_acc *acc = NULL;
    const rv_kmodel_acc *use = pre ? pre->acc : NULL;
    int rc = 0;
    *km = NULL;
    *tgt = pre ? pre->tgt : NULL;
    *tgt_owned = 0;
    if (!use) {
        if ((rc = platform_kmodels_read(a, l->id, doc, &acc, tgt, NULL, 0, err)) != 0)
            return rc;
        *tgt_owned = 1;
        use = acc;
    }
    rc = model_of(use, rv_hw_lookup(rv_trace_str(l->trace, l->trace->platform_gpu)), km, err);
    free(acc);
    return rc;
}

int rv_api_whatif_run_req(rv_app *a, rv_req *r, const rv_loaded *l0, const json_t *doc0,
                          const rv_oh_table *oh, int keep_predicted, rv_api_et_model *etm,
                          rv_api_whatif_pre *pre, rv_run_result **out, rv_error *err)
{
    rv_whatif *own = NULL, *w = NULL;
    rv_kmodel *km = NULL, *km_gpu = NULL;
    int km_gpu_owned = 0;
    rv_loaded lo = *l0;
    const rv_loaded *l = &lo;
    const json_t *doc = doc0;
    json_t *et_doc = NULL;
    /* The budget always; for a request also its client and the server's
     * drain (a fleet job is neither: it is requeued if the server dies). */
    rv_run_opts opts = {.iteration = RV_ITER_MEDIAN,
                        .budget_ms = a->cfg.whatif_budget_ms,
                        .budget_from_ms = r ? rv_req_started_ms(r) : 0,
                        .keep_predicted = keep_predicted == 1,
                        .summary_only = keep_predicted == RV_API_RUN_SUMMARY,
                        .cancel = r ? &a->draining : NULL,
                        .cancel_fn = r ? client_gone : NULL,
                        .cancel_arg = r};
    int rc;

    *out = NULL;
    /* An execution trace alone is modelled on the document's GPU, on every
     * route (the model lives in *etm, which must outlive *out). Its
     * document loses "gpu", so what pre read from it does not hold. */
    if (etm && rv_trace_source(l0->trace) == RV_SOURCE_ET) {
        if ((et_doc = json_deep_copy(doc0)) == NULL) {
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
            goto out;
        }
        if ((rc = rv_api_et_resolve(a, &lo, et_doc, etm, err)) != 0)
            goto out;
        doc = et_doc;
        pre = NULL;
    }
    /* The document as the request parsed it, else parsed here. */
    if (pre && pre->w)
        w = pre->w;
    else if ((rc = rv_whatif_parse(doc, &own, err)) != 0)
        goto out;
    else
        w = own;
    if (rv_whatif_uses_platform_kmodels(w)) {
        if ((rc = run_kmodels(a, l, doc, pre, &km, &km_gpu, &km_gpu_owned, err)) != 0)
            goto out;
        rv_whatif_set_kmodel(w, km, km_gpu);
    }
    if (rv_whatif_uses_platform_overheads(w)) {
        if (!oh) {
            rc = rv_error_field(err, RV_ERR_UNSUPPORTED, "host_overheads",
                                "host_overheads is platform but the platform's statistics are "
                                "not available");
            goto out;
        }
        rv_whatif_set_overheads(w, oh);
    }
    /* The baseline's figures, made once per loaded trace; not for an
     * execution trace modelled on the document's GPU (another graph). */
    if (l->entry && l->graph == l->entry->graph && l->base == l->entry->base)
        opts.prep = rv_gcache_prep(l->entry);
    rc = rv_run(l->graph, l->base, w, &opts, out, err);
    if (rc == 0 && !rv_whatif_is_empty(w))
        rv_metrics_add(a->metrics, RV_M_SIMULATIONS, 1);
out:
    /* pre's document outlives the run: it must not keep pointers to the
     * models freed here. */
    if (w && w != own)
        rv_whatif_set_kmodel(w, NULL, NULL);
    rv_whatif_free(own);
    free(km);
    if (km_gpu_owned)
        free(km_gpu);
    json_decref(et_doc);
    return rc;
}

/* The bytes sent for an answer: body (the renderer's object, or the cached
 * copy of it) with "cached" and "request_hash" spliced in after its "{",
 * and the predicted timeline (Chrome JSON, may be NULL) before its "}".
 * Nothing is parsed again. New buffer, or NULL on OOM. */
static char *answer_bytes(const char *body, size_t len, int cached, const char *hash,
                          const char *timeline, size_t tl_len, size_t *out_len)
{
    static const char tl_key[] = ",\"timeline\":";
    char head[160];
    int hn = snprintf(head, sizeof(head), "{\"cached\":%s,\"request_hash\":\"%s\",",
                      cached ? "true" : "false", hash);
    if (len < 2 || body[0] != '{' || body[len - 1] != '}' || hn < 0 || (size_t)hn >= sizeof(head))
        return NULL;
    size_t inner = len - 2;
    size_t n = (size_t)hn + inner + 1 + (timeline ? tl_len + sizeof(tl_key) - 1 : 0);
    char *out = malloc(n + 1), *p = out;
    if (!out)
        return NULL;
    memcpy(p, head, (size_t)hn);
    p += hn;
    memcpy(p, body + 1, inner);
    p += inner;
    if (timeline) {
        memcpy(p, tl_key, sizeof(tl_key) - 1);
        p += sizeof(tl_key) - 1;
        memcpy(p, timeline, tl_len);
        p += tl_len;
    }
    *p++ = '}';
    *p = '\0';
    *out_len = (size_t)(p - out);
    return out;
}

/* The predicted timeline of res as Chrome JSON (new buffer), or NULL. */
static char *predicted_chrome(const rv_run_result *res, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        return NULL;
    int rc =
        rv_report_timeline_chrome(rv_run_pred_graph(res), rv_run_pred_sim(res), &res->pred_win, f);
    if (fclose(f) != 0 || rc != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

void rv_api_trace_whatif(rv_req *r, void *app)
{
    rv_app *a = app;
    int64_t id = rv_api_id_param(r, "id");
    json_t *doc = NULL;
    rv_loaded l = {0};
    rv_api_et_model etm = {0};
    rv_api_whatif_pre pre = {0};
    rv_oh_table *oh = NULL;
    rv_run_result *res = NULL;
    char *body = NULL, *tl = NULL, *ans = NULL;
    size_t len = 0, tl_len = 0, ans_len = 0;
    rv_error e;
    char hash[RV_SHA256_HEX_LEN + 1], version[512] = "";

    rv_error_clear(&e);
    if (id < 0)
        return;
    doc = rv_api_whatif_doc(r);
    if (!doc)
        return;
    /* "timeline": true asks for the predicted timeline; it is not part of
     * the model, so it stays out of the cache key. */
    int with_tl = json_is_true(json_object_get(doc, "timeline"));
    json_object_del(doc, "timeline");
    /* With the platform's overheads the answer also depends on the platform's
     * statistics, which change with every upload: their version joins the key. */
    int platform = rv_api_doc_uses_platform(doc);
    if (platform && rv_api_platform_version(a, id, doc, version, sizeof(version), &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    /* So do the platform's kernel models, read once here for the key and
     * the run. */
    if (rv_api_doc_uses_platform_kmodels(doc)) {
        size_t vl = strlen(version);
        if (platform_kmodels_read(a, id, doc, &pre.acc, &pre.tgt, version + vl,
                                  sizeof(version) - vl, &e) != 0) {
            rv_req_error_rv(r, &e);
            goto out;
        }
        platform = 1;
    }
    rv_api_request_hash(doc, platform ? version : NULL, hash);
    if (!with_tl) {
        /* A hit sends the stored bytes as they are: nothing is parsed. An
         * answer whose row is still being written is a hit too. */
        if (rv_api_cache_get(a, id, hash, &body, &len) == 0) {
            rv_metrics_add(a->metrics, RV_M_CACHE_HITS, 1);
            ans = answer_bytes(body, len, 1, hash, NULL, 0, &ans_len);
            if (ans) {
                rv_req_respond_buf(r, 200, "application/json", ans, ans_len);
                ans = NULL;
                goto out;
            }
            free(body);
            body = NULL;
        }
        rv_error_clear(&e);
    }
    rv_metrics_add(a->metrics, RV_M_CACHE_MISSES, 1);
    /* Parsed once, before the load: a bad document (a refused pattern,
     * say) costs no load of the trace, and the run takes it as it is. */
    if (rv_whatif_parse(doc, &pre.w, &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    if (rv_api_load(a, id, &l, &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    if (rv_api_doc_uses_platform(doc)) {
        if (rv_api_platform_table(a, id, doc, &oh, version, sizeof(version), &e) != 0) {
            rv_req_error_rv(r, &e);
            goto out;
        }
        /* The statistics may have changed since the lookup: key by those used. */
        rv_api_request_hash(doc, version, hash);
    }
    if (rv_api_whatif_run_req(a, r, &l, doc, oh, with_tl, &etm, &pre, &res, &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    if (with_tl) {
        /* The predicted timeline is as large as the prediction: bounded
         * like every timeline answer, before it is written. */
        size_t cap = a->cfg.timeline_max_tasks ? a->cfg.timeline_max_tasks : 200000;
        size_t n =
            rv_report_timeline_count(rv_run_pred_graph(res), rv_run_pred_sim(res), &res->pred_win);
        if (n > cap) {
            rv_req_error(r, 422, "limit_exceeded", "timeline",
                         "the predicted timeline has %zu tasks, over the limit of %zu; leave "
                         "out \"timeline\" and ask GET /v1/traces/%lld/timeline?source="
                         "predicted with from_us/to_us for a window of it",
                         n, cap, (long long)id);
            goto out;
        }
    }
    body = rv_run_render_bytes(res, id, &len);
    if (with_tl)
        tl = predicted_chrome(res, &tl_len);
    ans = body && (!with_tl || tl) ? answer_bytes(body, len, 0, hash, tl, tl_len, &ans_len) : NULL;
    if (!ans) {
        rv_error_set(&e, RV_ERR_NOMEM, -1, -1, "out of memory rendering the answer");
        rv_req_error_rv(r, &e);
        goto out;
    }
    if (!with_tl)
        rv_api_cache_put(r, a, id, hash, body, len, &res->sum);
    rv_req_respond_buf(r, 200, "application/json", ans, ans_len);
    ans = NULL;
out:
    free(ans);
    free(tl);
    free(body);
    rv_run_result_free(res);
    rv_api_loaded_free(&l);
    rv_api_et_model_free(&etm);
    rv_api_whatif_pre_free(&pre);
    rv_oh_table_free(oh);
    json_decref(doc);
}

/* Steps past this many in one timeline answer are left out (and the answer
 * says truncated); a step is a marker event, so real traces stay far below. */
#define TIMELINE_MAX_ITERS 100000

/* A measured time on the thread of the trace's steps (else its first CPU
 * thread with tasks) mapped onto the baseline simulation's clock, for the
 * critical path of a measured window. Unbounded ends stay unbounded. */
static int64_t measured_to_sim(const rv_graph *g, const rv_sim *s, int64_t meas_ns)
{
    int32_t th = -1;

    if (meas_ns <= INT64_MIN / 4 || meas_ns >= INT64_MAX / 4)
        return meas_ns;
    if (g->niters > 0)
        th = g->iters[0].thread;
    for (size_t t = 0; th < 0 && t < g->nthreads; t++)
        if (g->threads[t].kind == RV_THREAD_CPU && g->threads[t].norig > 0)
            th = (int32_t)t;
    if (th < 0 || g->threads[th].norig == 0)
        return meas_ns;
    if (meas_ns >= g->span_ns)
        return INT64_MAX;
    return rv_sim_map_time(g, s, th, meas_ns);
}

/* The steps that overlap [from, to), in the tasks' time base: measured
 * markers, or the markers mapped onto the simulation (rv_sim_map_time). */
static int timeline_iterations(FILE *f, const rv_graph *g, const rv_sim *s, int measured,
                               int64_t from_ns, int64_t to_ns)
{
    size_t n = 0;

    for (size_t i = 0; i < g->niters; i++) {
        const rv_iter *it = &g->iters[i];
        int64_t a = it->start_ns, b = it->end_ns;
        if (!measured) {
            a = rv_sim_map_time(g, s, it->thread, a);
            b = rv_sim_map_time(g, s, it->thread, b);
        }
        if (b < from_ns || a >= to_ns)
            continue;
        if (n >= TIMELINE_MAX_ITERS)
            return 1;
        fprintf(f, "%s{\"step\":%lld,\"start_us\":%.3f,\"end_us\":%.3f}", n ? "," : "",
                (long long)it->step, (double)a / 1e3, (double)b / 1e3);
        n++;
    }
    return 0;
}

/* JSON timeline for the dashboard, written straight to f (a jansson tree of
 * 100k tasks costs about 1 KB per task and three times the time): threads,
 * then tasks inside [from, to) with their layer, phase and whether they are
 * on the critical path of the window, then the steps in the window.
 * measured: times from the trace, the critical path from the baseline
 * simulation s over the same window. Returns 0, or RV_ERR_NOMEM. */
static int timeline_write(FILE *f, int64_t trace_id, const char *source, const rv_graph *g,
                          const rv_sim *s, int measured, int64_t from_ns, int64_t to_ns,
                          size_t max_tasks)
{
    static const char *kinds[] = {"cpu", "gpu", "comm"};
    size_t kept = 0, skipped = 0;
    uint8_t *crit = calloc(g->ntasks + 1, 1);

    if (!crit)
        return RV_ERR_NOMEM;
    rv_window win = {from_ns, to_ns, 1, -1, -1};
    if (measured) {
        win.t0_ns = measured_to_sim(g, s, from_ns);
        win.t1_ns = measured_to_sim(g, s, to_ns);
    }
    rv_report_critical_tasks(g, s, &win, crit);
    fprintf(f, "{\"trace_id\":%lld,\"source\":\"%s\",\"threads\":[", (long long)trace_id, source);
    for (size_t t = 0; t < g->nthreads; t++) {
        const rv_thread *th = &g->threads[t];
        fprintf(f, "%s{\"id\":%zu,\"label\":", t ? "," : "", t);
        rv_jsonw_str_file(f, rv_trace_str(g->trace, th->label));
        fprintf(f, ",\"kind\":\"%s\"}", th->kind < 3 ? kinds[th->kind] : "other");
    }
    fputs("],\"tasks\":[", f);
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *k = &g->tasks[i];
        int64_t st, du;
        if (k->flags & RV_TF_REMOVED)
            continue;
        if (measured) {
            if (k->meas_start_ns < 0)
                continue;
            st = k->meas_start_ns;
            du = k->meas_dur_ns;
        } else {
            st = s->start_ns[i];
            du = s->end_ns[i] - s->start_ns[i];
        }
        if (st + du < from_ns || st >= to_ns)
            continue;
        if (kept >= max_tasks) {
            skipped++;
            continue;
        }
        fprintf(f, "%s\n{\"id\":%zu,\"thread\":%d,\"name\":", kept ? "," : "", i, k->thread);
        rv_jsonw_str_file(f, rv_trace_str(g->trace, k->name));
        fprintf(f, ",\"kind\":\"%s\",\"layer\":", rv_task_kind_name(k->kind));
        rv_jsonw_str_file(f, rv_trace_str(g->trace, k->layer));
        fprintf(f, ",\"phase\":\"%s\",\"critical\":%s,\"start_us\":%.3f,\"dur_us\":%.3f}",
                rv_phase_name(k->phase), crit[i] ? "true" : "false", (double)st / 1e3,
                (double)du / 1e3);
        kept++;
    }
    free(crit);
    fputs("],\"iterations\":[", f);
    int cut = timeline_iterations(f, g, s, measured, from_ns, to_ns);
    fprintf(f, "],\"omitted\":%zu,\"truncated\":%s}\n", skipped,
            skipped > 0 || cut ? "true" : "false");
    return ferror(f) ? RV_ERR_NOMEM : 0;
}

void rv_api_trace_timeline(rv_req *r, void *app)
{
    rv_app *a = app;
    int64_t id = rv_api_id_param(r, "id");
    const char *source = rv_req_query(r, "source");
    const char *format = rv_req_query(r, "format");
    rv_loaded l = {0};
    rv_run_result *res = NULL;
    rv_api_whatif_pre pre = {0};
    rv_oh_table *oh = NULL;
    rv_api_et_model etm = {0};
    json_t *doc = NULL;
    rv_error e;

    rv_error_clear(&e);
    if (id < 0)
        return;
    if (!source)
        source = "baseline";
    if (strcmp(source, "measured") != 0 && strcmp(source, "baseline") != 0 &&
        strcmp(source, "predicted") != 0) {
        rv_req_error(r, 400, "invalid_parameter", "source",
                     "source must be measured, baseline or predicted");
        return;
    }
    if (format && strcmp(format, "json") != 0 && strcmp(format, "chrome") != 0) {
        rv_req_error(r, 400, "invalid_parameter", "format", "format must be json or chrome");
        return;
    }
    int64_t from_us = rv_req_query_int(r, "from_us", 0, INT64_MAX / 2000);
    int64_t to_us = rv_req_query_int(r, "to_us", INT64_MAX / 2000, INT64_MAX / 2000);
    int64_t max_cap = a->cfg.timeline_max_tasks ? a->cfg.timeline_max_tasks : 200000;
    int64_t max_tasks = rv_req_query_int(
        r, "max_tasks", TIMELINE_DEFAULT_TASKS < max_cap ? TIMELINE_DEFAULT_TASKS : max_cap,
        max_cap);
    if (from_us < 0 || to_us < 0 || max_tasks < 0)
        return;
    if (strcmp(source, "predicted") == 0) {
        const char *text = rv_req_query(r, "whatif");
        if (!text) {
            rv_req_error(r, 400, "invalid_parameter", "whatif",
                         "source=predicted needs whatif=<the what-if JSON document>");
            return;
        }
        json_error_t je;
        doc = json_loads(text, 0, &je);
        if (!doc) {
            rv_req_error(r, 400, "invalid_json", "whatif", "whatif is not JSON: %s", je.text);
            return;
        }
        /* Checked before the trace is loaded, so a bad document costs nothing. */
        if (rv_whatif_parse(doc, &pre.w, &e) != 0) {
            rv_req_error_rv(r, &e);
            goto out;
        }
        if (rv_whatif_uses_platform_overheads(pre.w) &&
            rv_api_platform_table(a, id, doc, &oh, NULL, 0, &e) != 0) {
            rv_req_error_rv(r, &e);
            goto out;
        }
    }
    if (rv_api_load(a, id, &l, &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    const rv_graph *g = l.graph;
    const rv_sim *s = l.base;
    if (doc) {
        if (rv_api_whatif_run_req(a, r, &l, doc, oh, 1, &etm, &pre, &res, &e) != 0) {
            rv_req_error_rv(r, &e);
            goto out;
        }
        g = rv_run_pred_graph(res);
        s = rv_run_pred_sim(res);
    }
    if (format && strcmp(format, "chrome") == 0) {
        rv_window win = {from_us * 1000, to_us * 1000, 1, -1, -1};
        /* Chrome events cannot be cut short with a note the way the JSON
         * form's are: a window over the cap is refused, before writing. */
        size_t cap = (size_t)(rv_req_query(r, "max_tasks") ? max_tasks : max_cap);
        size_t n = rv_report_timeline_count(g, s, &win);
        if (n > cap) {
            rv_req_error(r, 422, "limit_exceeded", "max_tasks",
                         "the window has %zu tasks, over the limit of %zu for format=chrome; "
                         "narrow it with from_us/to_us",
                         n, cap);
            goto out;
        }
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (!f || rv_report_timeline_chrome(g, s, &win, f) != 0) {
            if (f)
                fclose(f);
            free(buf);
            rv_req_error(r, 500, "internal", NULL, "cannot write the timeline");
            goto out;
        }
        fclose(f);
        rv_req_respond_buf(r, 200, "application/json", buf, len);
        goto out;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    int rc = f ? timeline_write(
                     f, id, source, g, s, strcmp(source, "measured") == 0, from_us * 1000,
                     to_us > INT64_MAX / 2000 - 1 ? INT64_MAX : to_us * 1000, (size_t)max_tasks)
               : RV_ERR_NOMEM;
    if (f && fclose(f) != 0)
        rc = RV_ERR_NOMEM;
    if (rc != 0) {
        free(buf);
        rv_req_error(r, 500, "internal", NULL, "out of memory writing the timeline");
        goto out;
    }
    rv_req_respond_buf(r, 200, "application/json", buf, len);
out:
    json_decref(doc);
    rv_api_whatif_pre_free(&pre);
    rv_oh_table_free(oh);
    rv_run_result_free(res);
    rv_api_et_model_free(&etm);
    rv_api_loaded_free(&l);
}

void rv_api_whatif_kinds(rv_req *r, void *app)
{
    (void)app;
    rv_req_respond_json(r, 200, rv_whatif_kinds());
}
