/* The answer cache as the handlers use it (what-ifs, diffs, training jobs):
 * one lookup that also sees answers whose rows are still being written
 * (rv_pending), and one store that writes the row after the answer is
 * sent when it can. docs/internals/server.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_api_internal.h"
#include "rv_db.h"
#include "rv_db_cache.h"
#include "rv_pending.h"
#include "util/rv_sha256.h"

int rv_api_cache_get(rv_app *a, int64_t trace_id, const char *hash, char **body, size_t *len)
{
    rv_error e;
    rv_error_clear(&e);
    if (rv_pending_get(a->pending, trace_id, hash, body, len) == 0)
        return 0;
    if (rv_db_whatif_cache_get(a->db, trace_id, hash, body, len, NULL, &e) == 0 && *body)
        return 0;
    free(*body);
    *body = NULL;
    *len = 0;
    return -1;
}

/* Writes a row. A failed write costs a recomputation later, nothing more. */
static void put_now(rv_app *a, int64_t trace_id, const char *hash, const char *body, size_t len,
                    const rv_run_summary *sum)
{
    rv_error e;
    rv_error_clear(&e);
    if (rv_db_whatif_cache_put(a->db, trace_id, hash, body, len, sum, &e) != 0)
        fprintf(stderr, "reveried: cache write for trace %lld: %s\n", (long long)trace_id,
                e.message);
}

/* A row written after the answer is sent (rv_req_after). */
typedef struct put_job {
    rv_app *a;
    int64_t trace_id;
    char hash[RV_SHA256_HEX_LEN + 1];
    rv_run_summary sum;
    int have_sum;
    rv_pending_entry *held;
} put_job;

static void put_job_run(void *arg)
{
    put_job *j = arg;
    size_t len = 0;
    const char *body = rv_pending_body(j->held, &len);
    put_now(j->a, j->trace_id, j->hash, body, len, j->have_sum ? &j->sum : NULL);
    rv_pending_done(j->a->pending, j->held);
    free(j);
}

void rv_api_cache_put(rv_req *r, rv_app *a, int64_t trace_id, const char *hash, const char *body,
                      size_t len, const rv_run_summary *sum)
{
    put_job *j = calloc(1, sizeof(*j));
    char *copy = j ? malloc(len + 1) : NULL;
    if (copy) {
        memcpy(copy, body, len);
        copy[len] = '\0';
        j->held = rv_pending_add(a->pending, trace_id, hash, copy, len);
    }
    if (!j || !j->held) {
        free(copy);
        free(j);
        put_now(a, trace_id, hash, body, len, sum);
        return;
    }
    j->a = a;
    j->trace_id = trace_id;
    snprintf(j->hash, sizeof(j->hash), "%s", hash);
    if (sum) {
        j->sum = *sum;
        j->have_sum = 1;
    }
    rv_req_after(r, put_job_run, j);
}
