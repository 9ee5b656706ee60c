/* Execution traces through the API: an ET uploaded alone (POST /v1/traces
 * with an ET body or ?kind=et), an ET attached to a stored Kineto trace
 * (PUT /v1/traces/{id}/et), and the GPU an ET-alone trace's what-if is
 * modelled on. See docs/internals/server.md and docs/models/et.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_api_internal.h"
#include "rv_db.h"
#include "reader/rv_et.h"
#include "rv_gcache.h"
#include "hw/rv_hw.h"
#include "ingest/rv_ingest.h"
#include "cost/rv_kmodel.h"
#include "rv_metrics.h"
#include "reader/rv_snapshot.h"

/* The spooled body, read whole (cap: the upload cap). 0 or -1 answered. */
static int read_body(rv_req *r, rv_app *a, uint8_t **out, size_t *len)
{
    uint64_t size = 0;
    const char *spool = rv_req_spool(r, &size);
    *out = NULL;
    *len = 0;
    if (!spool || size == 0) {
        rv_req_error(r, 400, "body_required", NULL, "the request body must be an execution trace");
        return -1;
    }
    if (a->cfg.upload_cap && size > a->cfg.upload_cap) {
        rv_req_error(r, 413, "limit", NULL, "the body is larger than %llu bytes",
                     (unsigned long long)a->cfg.upload_cap);
        return -1;
    }
    FILE *f = fopen(spool, "rb");
    uint8_t *buf = malloc((size_t)size + 1);
    if (!f || !buf || fread(buf, 1, (size_t)size, f) != (size_t)size) {
        if (f)
            fclose(f);
        free(buf);
        rv_req_error(r, 500, "internal", NULL, "cannot read the spooled body");
        return -1;
    }
    fclose(f);
    *out = buf;
    *len = (size_t)size;
    return 0;
}

static rv_et_opts et_opts(const rv_app *a)
{
    rv_et_opts o = {.max_input_bytes = (size_t)a->cfg.max_trace_bytes};
    return o;
}

/* A reader's refusal: 400 (malformed) or 422 (a cap), with what and where
 * (rv_ingest_read's message names the execution trace already). */
static void et_refused(rv_req *r, const rv_error *e)
{
    if (e->code == RV_ERR_NOMEM) {
        rv_req_error_rv(r, e);
        return;
    }
    rv_req_error(r, e->code == RV_ERR_LIMIT ? 422 : 400, rv_err_name(e->code), "et", "%s",
                 e->message);
}

int rv_api_trace_upload_et(rv_req *r, rv_app *a, rv_db_ingest_meta *meta)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    rv_trace *t = NULL;
    rv_db_ingest_result res = {0};
    rv_error e;
    int rc = -1;

    rv_error_clear(&e);
    if (read_body(r, a, &buf, &len) != 0)
        goto out;
    const char *gpu = rv_req_query(r, "gpu");
    if (!gpu)
        gpu = rv_req_header(r, "X-Reverie-Gpu");
    /* One ingest path (engine/ingest): read, then laid out on the GPU. */
    rv_ingest_opts io = {
        .format = RV_INGEST_ET, .max_input_bytes = (size_t)a->cfg.max_trace_bytes, .gpu = gpu};
    if (rv_ingest_read(buf, len, &io, &t, &e) != 0) {
        if (e.reason == RV_REASON_ET_LAYOUT && e.code == RV_ERR_UNSUPPORTED)
            rv_req_error(r, 422, "unsupported", e.field, "%s", e.message);
        else if (e.reason == RV_REASON_ET_LAYOUT)
            rv_req_error_rv(r, &e);
        else
            et_refused(r, &e);
        goto out;
    }
    meta->source_format = rv_trace_source_name(RV_SOURCE_ET);
    if (rv_db_ingest(a->db, t, buf, len, meta, &res, &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    rv_api_upload_answer(r, a, &res, len);
    rc = 0;
out:
    rv_trace_free(t);
    free(buf);
    return rc;
}

void rv_api_trace_et_attach(rv_req *r, void *app)
{
    rv_app *a = app;
    int64_t id = rv_api_id_param(r, "id");
    uint8_t *buf = NULL, *snap = NULL;
    size_t len = 0, snap_len = 0;
    rv_et *et = NULL;
    rv_trace *t = NULL;
    rv_et_join j = {0};
    rv_error e;

    rv_error_clear(&e);
    if (id < 0)
        return;
    if (read_body(r, a, &buf, &len) != 0)
        goto out;
    rv_et_opts o = et_opts(a);
    if (rv_et_read_buffer(buf, len, &o, &et, &e) != 0) {
        rv_error x;
        rv_error_field(&x, e.code, "et", "execution trace: %s", e.message);
        et_refused(r, &x);
        goto out;
    }
    if (rv_db_snapshot_load(a->db, id, &t, &e) != 0) {
        if (e.code == RV_ERR_NOTFOUND)
            rv_req_error(r, 404, "not_found", "id", "no trace with id %lld", (long long)id);
        else
            rv_req_error_rv(r, &e);
        goto out;
    }
    if (rv_trace_source(t) == RV_SOURCE_ET) {
        rv_req_error(r, 409, "conflict", "id",
                     "trace %lld is an execution trace itself: attach an ET to a Kineto trace",
                     (long long)id);
        goto out;
    }
    int have = rv_db_et_exists(a->db, id, &e);
    if (have < 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    if (have) {
        rv_req_error(r, 409, "conflict", "et", "trace %lld has an execution trace already",
                     (long long)id);
        goto out;
    }
    if (rv_et_join_trace(et, t, &j, &e) != 0) {
        if (e.code == RV_ERR_NOTFOUND)
            rv_req_error(r, 422, "not_joined", "et", "%s", e.message);
        else
            rv_req_error_rv(r, &e);
        goto out;
    }
    if (rv_et_shapes_to_trace(et, &j, t) != 0 ||
        rv_snapshot_encode(t, 1, &snap, &snap_len, &e) != 0) {
        rv_error_set(&e, RV_ERR_NOMEM, -1, -1, "out of memory joining the execution trace");
        rv_req_error_rv(r, &e);
        goto out;
    }
    rv_db_et_join dj = {(int64_t)j.ops_joined, j.method == RV_ET_JOIN_ID ? "id" : "order"};
    if (rv_db_et_attach(a->db, id, buf, len, snap, snap_len, &dj, &e) != 0) {
        if (e.code == RV_ERR_INVALID)
            rv_req_error(r, 409, "conflict", "et", "%s", e.message);
        else if (e.code == RV_ERR_NOTFOUND)
            rv_req_error(r, 404, "not_found", "id", "%s", e.message);
        else
            rv_req_error_rv(r, &e);
        goto out;
    }
    /* This replica's loaded graph had no shapes; the next what-if reloads. */
    rv_gcache_forget(a->gcache, id);
    rv_metrics_add(a->metrics, RV_M_INGEST_BYTES, len);
    rv_req_respond_json(r, 200,
                        json_pack("{s:I,s:{s:I,s:s,s:I,s:I,s:I,s:I}}", "trace_id", (json_int_t)id,
                                  "et", "size", (json_int_t)len, "join_method", dj.method, "ops",
                                  (json_int_t)j.ops, "ops_joined", (json_int_t)j.ops_joined,
                                  "gpu_tasks_launched", (json_int_t)j.kernels_launched,
                                  "gpu_tasks_attributed", (json_int_t)j.kernels_joined));
out:
    rv_et_join_free(&j);
    free(snap);
    rv_trace_free(t);
    rv_et_free(et);
    free(buf);
}

void rv_api_et_model_free(rv_api_et_model *m)
{
    if (!m)
        return;
    if (m->entry) {
        rv_gcache_release(m->cache, m->entry);
        memset(m, 0, sizeof(*m));
        return;
    }
    rv_sim_free(m->base);
    rv_graph_free(m->graph);
    rv_trace_free(m->trace);
    memset(m, 0, sizeof(*m));
}

/* The kernel models of the stored traces of GPU hw (*out new, free());
 * refused when none of them has a costed kernel. */
static int gpu_kmodel(rv_app *a, const rv_hw *hw, rv_kmodel **out, rv_error *err)
{
    int rc = rv_api_gpu_kmodel(a, hw->name, out, NULL, 0, err);
    if (!rc && !*out)
        rc = rv_error_field(err, RV_ERR_UNSUPPORTED, "kernel_models",
                            "kernel_models is platform but no stored trace of %s has kernels "
                            "with op shapes to fit them on; ask with \"kernel_models\": "
                            "\"trace\"",
                            hw->name);
    return rc;
}

int64_t rv_api_et_key(int64_t id, const rv_hw *hw)
{
    size_t n = 0;
    const rv_hw *table = rv_hw_table(&n);
    return rv_gcache_derived_key(id, (unsigned)(hw - table));
}

int rv_api_et_resolve(rv_app *a, rv_loaded *l, json_t *doc, rv_api_et_model *m, rv_error *err)
{
    const rv_trace *t = l->trace;
    rv_api_mapped orig = {0};
    rv_et *et = NULL;
    rv_kmodel *km = NULL;
    int rc = 0;

    memset(m, 0, sizeof(*m));
    if (rv_trace_source(t) != RV_SOURCE_ET)
        return 0;
    const char *want = json_string_value(json_object_get(doc, "gpu"));
    const char *have = rv_trace_str(t, t->platform_gpu);
    const rv_hw *hw_want = want ? rv_hw_lookup(want) : NULL;
    const rv_hw *hw_have = have[0] ? rv_hw_lookup(have) : NULL;
    if (!want && !hw_have)
        return rv_error_field(err, RV_ERR_UNSUPPORTED, "gpu",
                              "trace %lld is an execution trace alone uploaded without a GPU: "
                              "give \"gpu\" in the what-if to model its kernels on",
                              (long long)l->id);
    if (want && !hw_want)
        return rv_error_field(err, RV_ERR_UNSUPPORTED, "gpu",
                              "gpu '%.64s' is not in the hardware table", want);
    /* The graph is built on that GPU: nothing is left to rescale. */
    json_object_del(doc, "gpu");
    const rv_hw *on = hw_want ? hw_want : hw_have;
    /* With the platform's kernel models, the kernels take the efficiencies
     * the stored traces of that GPU measured (the ET trace has none). */
    if (rv_api_doc_uses_platform_kmodels(doc)) {
        json_object_del(doc, "kernel_models");
        if ((rc = gpu_kmodel(a, on, &km, err)) != 0)
            goto out;
    } else if (!want || hw_want == hw_have) {
        return 0;
    }
    /* Modelled on another GPU without the platform's models: the same
     * graph for every such request, held in the loaded-trace cache. */
    int64_t key = km ? 0 : rv_api_et_key(l->id, on);
    if (key && (m->entry = rv_gcache_get(a->gcache, key)) != NULL) {
        m->cache = a->gcache;
        goto use;
    }
    /* The stored (gzip) bytes through a mapped spool file; the reader
     * inflates them as it parses, within its cap. */
    if ((rc = rv_api_original_map(a, l->id, RV_DB_ORIGINAL_STORED, &orig, err)) != 0)
        goto out;
    rv_et_opts o = et_opts(a);
    if ((rc = rv_et_read_buffer(orig.bytes, orig.len, &o, &et, err)) != 0 ||
        (rc = rv_et_to_trace_fitted(et, on->name, km, &m->trace, NULL, err)) != 0 ||
        (rc = rv_graph_build(m->trace, NULL, &m->graph, err)) != 0 ||
        (rc = rv_sim_run(m->graph, RV_SCHED_EARLIEST_START, &m->base, err)) != 0)
        goto out;
    rv_metrics_add(a->metrics, RV_M_SIMULATIONS, 1);
    if (key) {
        /* The cache takes the three (and frees them on OOM). */
        m->entry = rv_gcache_put(a->gcache, key, m->trace, m->graph, m->base);
        m->trace = NULL;
        m->graph = NULL;
        m->base = NULL;
        if (!m->entry) {
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
            goto out;
        }
        m->cache = a->gcache;
    }
use:
    if (m->entry) {
        l->trace = m->entry->trace;
        l->graph = m->entry->graph;
        l->base = m->entry->base;
        /* Its baseline figures are the entry's (rv_gcache_prep). */
        l->entry = m->entry;
    } else {
        l->trace = m->trace;
        l->graph = m->graph;
        l->base = m->base;
    }
out:
    if (rc != 0)
        rv_api_et_model_free(m);
    rv_et_free(et);
    rv_api_unmap(&orig);
    free(km);
    return rc;
}
