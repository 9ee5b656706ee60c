/* Trace diff: GET /v1/traces/{id}/diff?with={id2}[&top=N] compares two
 * stored traces; POST /v1/traces/{id}/diff[?top=N] with a what-if document
 * compares the trace's baseline with its prediction under it. The engine's
 * rv_diff computes and renders the answer (engine/rv_diff.h); this file
 * loads the traces and adds the ids. Answers are cached like what-if
 * answers, in the same table under trace {id} with a key of their own
 * (diff_key); a what-if that uses the platform's overheads is not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_api_internal.h"
#include "rv_db_cache.h"
#include "rv_db_traces.h"
#include "export/rv_diff.h"
#include "rv_metrics.h"
#include "graph/rv_retime.h"
#include "simulate/rv_report.h"
#include "run/rv_run.h"
#include "util/rv_sha256.h"
#include "whatif/rv_whatif.h"
#include "util/rv_round.h"

/* Renders d with the ids (a side's "trace_id"; b's is 0 for a what-if) and
 * answers 200, or a 500 when out of memory. */
/* The cache key of a diff: what it compares and how many rows, hashed
 * with the model version as a what-if's key is; the "diff" member keeps it
 * apart from every what-if document's key. */
static void diff_key(const json_t *doc, int64_t with, int64_t top, char *hash)
{
    json_t *k = json_pack("{s:{s:O?,s:I,s:I}}", "diff", "whatif", doc, "with", (json_int_t)with,
                          "top", (json_int_t)top);
    rv_api_request_hash(k, "diff-1", hash);
    json_decref(k);
}

/* Sends a cached diff of trace id (with: the other trace, 0 for a what-if)
 * when there is one and its other trace still exists: 1 when sent. */
static int send_cached(rv_req *r, rv_app *a, int64_t id, int64_t with, const char *hash)
{
    char *body = NULL;
    size_t len = 0;
    rv_error e;
    json_t *other = NULL;
    rv_error_clear(&e);
    if (rv_api_cache_get(a, id, hash, &body, &len) != 0)
        return 0;
    if (with > 0 && rv_db_trace_get(a->db, with, &other, &e) != 0) {
        free(body); /* the other trace went: compute, and say so */
        return 0;
    }
    json_decref(other);
    rv_metrics_add(a->metrics, RV_M_CACHE_HITS, 1);
    rv_req_add_header(r, "X-Reverie-Cache", "hit");
    rv_req_respond_buf(r, 200, "application/json", body, len);
    return 1;
}

static void answer(rv_req *r, rv_app *app, const rv_diff *d, int top, int64_t id, int64_t with,
                   const rv_run_result *run, const char *hash)
{
    json_t *o = rv_diff_render(d, top, NULL, with > 0 ? NULL : "what-if", run);
    json_t *a = o ? json_object_get(o, "a") : NULL, *b = o ? json_object_get(o, "b") : NULL;
    if (!a || !b || json_object_set_new(a, "trace_id", json_integer(id)) != 0 ||
        (with > 0 && json_object_set_new(b, "trace_id", json_integer(with)) != 0) ||
        json_object_set_new(o, "trace_id", json_integer(id)) != 0) {
        json_decref(o);
        rv_error e;
        rv_error_set(&e, RV_ERR_NOMEM, -1, -1, "out of memory rendering the diff");
        rv_req_error_rv(r, &e);
        return;
    }
    if (!hash) {
        rv_req_respond_json(r, 200, o);
        return;
    }
    /* The bytes sent are the bytes kept, as for what-if answers. */
    char *text = rv_round_dumps(o, JSON_COMPACT);
    json_decref(o);
    size_t n = text ? strlen(text) : 0;
    if (!text) {
        rv_error e;
        rv_error_set(&e, RV_ERR_NOMEM, -1, -1, "out of memory rendering the diff");
        rv_req_error_rv(r, &e);
        return;
    }
    rv_api_cache_put(r, app, id, hash, text, n, NULL);
    rv_req_add_header(r, "X-Reverie-Cache", "miss");
    rv_req_respond_buf(r, 200, "application/json", text, n);
}

static void diff(rv_req *r, rv_app *a, int post)
{
    int64_t id = rv_api_id_param(r, "id"), with = 0, top;
    rv_loaded la = {0}, lb = {0};
    json_t *doc = NULL;
    rv_oh_table *oh = NULL;
    rv_run_result *res = NULL;
    rv_api_et_model etm = {0};
    rv_api_whatif_pre pre = {0};
    rv_diff *d = NULL;
    rv_diff_side sa, sb;
    rv_error e;
    char hash[RV_SHA256_HEX_LEN + 1];
    int cache = 1;

    rv_error_clear(&e);
    memset(&sa, 0, sizeof(sa));
    memset(&sb, 0, sizeof(sb));
    if (id < 0)
        return;
    top = rv_req_query_int(r, "top", RV_DIFF_TOP_DEFAULT, RV_DIFF_TOP_MAX);
    if (top < 0)
        return;
    if (post) {
        doc = rv_api_whatif_doc(r);
        if (!doc)
            return;
        /* Parsed once: a bad document costs no load, and the run takes it. */
        if (rv_whatif_parse(doc, &pre.w, &e) != 0) {
            rv_req_error_rv(r, &e);
            goto out;
        }
    } else {
        with = rv_req_query_int(r, "with", -1, INT64_MAX);
        if (with == -1 && rv_req_query(r, "with"))
            return;
        if (with <= 0) {
            rv_req_error(r, 400, "invalid_parameter", "with",
                         "'with' names the trace to compare with (a positive id)");
            goto out;
        }
    }
    /* With the platform's overheads or kernel models the answer follows
     * every upload on the platform: not cached. */
    cache = !(post && rv_api_doc_platform_dependent(doc));
    if (cache) {
        diff_key(post ? doc : NULL, with, top, hash);
        if (send_cached(r, a, id, with, hash))
            goto out;
        rv_metrics_add(a->metrics, RV_M_CACHE_MISSES, 1);
    }
    if (rv_api_load(a, id, &la, &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    if (post) {
        if (rv_api_doc_uses_platform(doc) &&
            rv_api_platform_table(a, id, doc, &oh, NULL, 0, &e) != 0) {
            rv_req_error_rv(r, &e);
            goto out;
        }
        if (rv_api_whatif_run_req(a, r, &la, doc, oh, 1, &etm, &pre, &res, &e) != 0) {
            rv_req_error_rv(r, &e);
            goto out;
        }
        rv_diff_sides_of_run(res, &sa, &sb);
    } else {
        if (rv_api_load(a, with, &lb, &e) != 0) {
            if (e.code == RV_ERR_NOTFOUND)
                snprintf(e.field, sizeof(e.field), "with");
            rv_req_error_rv(r, &e);
            goto out;
        }
        if (rv_diff_side_baseline(la.graph, la.base, &sa, &e) != 0 ||
            rv_diff_side_baseline(lb.graph, lb.base, &sb, &e) != 0) {
            rv_req_error_rv(r, &e);
            goto out;
        }
    }
    if (rv_diff_compute(&sa, &sb, &d, &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    answer(r, a, d, (int)top, id, with, res, cache ? hash : NULL);
out:
    rv_diff_free(d);
    rv_run_result_free(res);
    rv_api_et_model_free(&etm);
    rv_api_whatif_pre_free(&pre);
    rv_oh_table_free(oh);
    rv_api_loaded_free(&lb);
    rv_api_loaded_free(&la);
    json_decref(doc);
}

void rv_api_trace_diff_get(rv_req *r, void *app)
{
    diff(r, app, 0);
}

void rv_api_trace_diff_post(rv_req *r, void *app)
{
    diff(r, app, 1);
}
