/* Trace diff: GET /v1/traces/{id}/diff?with={id2}[&top=N] compares two
 * stored traces; POST /v1/traces/{id}/diff[?top=N] with a what-if document
 * compares the trace's baseline with its prediction under it. The engine's
 * rv_diff computes and renders the answer (engine/rv_diff.h); this file
 * loads the traces and adds the ids. Answers are not cached. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_api_internal.h"
#include "rv_diff.h"
#include "rv_retime.h"
#include "rv_report.h"
#include "rv_run.h"
#include "rv_whatif.h"

/* Renders d with the ids (a side's "trace_id"; b's is 0 for a what-if) and
 * answers 200, or a 500 when out of memory. */
static void answer(rv_req *r, const rv_diff *d, int top, int64_t id, int64_t with,
                   const rv_run_result *run)
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
    rv_req_respond_json(r, 200, o);
}

static void diff(rv_req *r, rv_app *a, int post)
{
    int64_t id = rv_api_id_param(r, "id"), with = 0, top;
    rv_loaded la = {0}, lb = {0};
    json_t *doc = NULL;
    rv_oh_table *oh = NULL;
    rv_run_result *res = NULL;
    rv_diff *d = NULL;
    rv_diff_side sa, sb;
    rv_error e;

    rv_error_clear(&e);
    memset(&sa, 0, sizeof(sa));
    memset(&sb, 0, sizeof(sb));
    if (id < 0)
        return;
    top = rv_req_query_int(r, "top", RV_DIFF_TOP_DEFAULT, RV_DIFF_TOP_MAX);
    if (top < 0)
        return;
    if (post) {
        doc = rv_req_json(r);
        if (!doc)
            return;
        if (!json_is_object(doc)) {
            rv_req_error(r, 400, "invalid", NULL, "the what-if document must be a JSON object");
            goto out;
        }
        rv_whatif *check = NULL;
        if (rv_whatif_parse(doc, &check, &e) != 0) {
            rv_req_error_rv(r, &e);
            goto out;
        }
        rv_whatif_free(check);
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
    if (rv_api_load(a, id, &la, &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    if (post) {
        if (rv_api_doc_uses_platform(doc) && rv_api_platform_table(a, id, &oh, NULL, 0, &e) != 0) {
            rv_req_error_rv(r, &e);
            goto out;
        }
        if (rv_api_whatif_run_req(a, r, &la, doc, oh, 1, &res, &e) != 0) {
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
    answer(r, d, (int)top, id, with, res);
out:
    rv_diff_free(d);
    rv_run_result_free(res);
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
