/* POST /v1/traces/{id}/whatif/export[?run=predicted|baseline] with a
 * what-if document: the predicted (or baseline) run of a stored trace as a
 * Kineto trace in the dialect of its stored original (engine/rv_kexport.h),
 * for Perfetto, TensorBoard and HTA. Not cached: the answer is as large as
 * the trace. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_api_internal.h"
#include "rv_db_traces.h"
#include "export/rv_kexport.h"
#include "run/rv_run.h"

void rv_api_trace_export(rv_req *r, void *app)
{
    rv_app *a = app;
    int64_t id = rv_api_id_param(r, "id");
    json_t *doc = NULL;
    rv_loaded l = {0};
    rv_run_result *res = NULL;
    rv_api_mapped orig = {0};
    rv_buf out = RV_BUF_INIT(RV_KEXPORT_MAX_OUTPUT);
    rv_error e;

    rv_error_clear(&e);
    if (id < 0)
        return;
    const char *run = rv_req_query(r, "run");
    int baseline = run && strcmp(run, "baseline") == 0;
    if (run && !baseline && strcmp(run, "predicted") != 0) {
        rv_req_error(r, 400, "invalid_parameter", "run", "run is predicted or baseline, not '%s'",
                     run);
        return;
    }
    doc = rv_api_whatif_doc(r);
    if (!doc)
        return;
    if (rv_api_doc_uses_platform(doc)) {
        rv_req_error(r, 400, "invalid", "host_overheads",
                     "an export does not take host_overheads platform; ask the what-if "
                     "endpoint for its figures");
        goto out;
    }
    if (rv_api_load(a, id, &l, &e) != 0) {
        if (e.code == RV_ERR_NOTFOUND && !e.field[0])
            rv_error_field(&e, RV_ERR_NOTFOUND, "id", "trace %lld does not exist", (long long)id);
        rv_req_error_rv(r, &e);
        goto out;
    }
    /* The export rewrites the original Kineto JSON; an ET alone has none. */
    if (rv_trace_source(l.trace) == RV_SOURCE_ET) {
        rv_req_error(r, 409, "conflict", "id",
                     "trace %lld is an execution trace alone: there is no Kineto trace to "
                     "rewrite; ask the what-if endpoint, or upload the run's Kineto trace",
                     (long long)id);
        goto out;
    }
    if (rv_api_whatif_run_req(a, r, &l, doc, NULL, 1, NULL, NULL, &res, &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    /* The original is streamed into a mapped spool file as JSON, bounded by
     * the upload's cap on decompressed bytes (never inflated on the heap). */
    rv_kexport_opts ko = {.max_input = (size_t)a->cfg.max_trace_bytes};
    if (rv_api_original_map(a, id, RV_DB_ORIGINAL_PLAIN, &orig, &e) != 0 ||
        rv_kexport_run(orig.bytes, orig.len, res, baseline, &ko, &out, NULL, &e) != 0) {
        if (e.code == RV_ERR_LIMIT && strcmp(e.field, "disk_reserve") == 0) {
            rv_api_spool_full(r, a, rv_api_spool_room(a));
            goto out;
        }
        rv_req_error_rv(r, &e);
        goto out;
    }
    char cd[96];
    snprintf(cd, sizeof(cd), "attachment; filename=\"trace-%lld-%s.json\"", (long long)id,
             baseline ? "baseline" : "predicted");
    rv_req_add_header(r, "Content-Disposition", cd);
    size_t n = out.len;
    char *body = rv_buf_take(&out, NULL);
    if (!body) {
        rv_req_error(r, 500, "internal", NULL, "out of memory writing the export");
        goto out;
    }
    rv_req_respond_buf(r, 200, "application/json", body, n);
out:
    rv_buf_free(&out);
    rv_api_unmap(&orig);
    rv_run_result_free(res);
    rv_api_loaded_free(&l);
    json_decref(doc);
}
