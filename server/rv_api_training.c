/* Training jobs: the traces of one distributed run (GET /v1/training-jobs,
 * GET /v1/training-jobs/{id}, POST /v1/training-jobs/{id}/whatif), and one
 * upload of an archive holding every rank (POST /v1/training-jobs).
 *
 * The store says which ranks a job has (store/rv_db_training.c); the what-if
 * loads each rank the way a single-trace what-if does (the loaded-trace
 * cache) and hands them to the engine's job model (engine/rv_job.h), whose
 * renderer writes the answer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_api_internal.h"
#include "util/rv_buf.h"
#include "rv_db.h"
#include "job/rv_job.h"
#include "rv_metrics.h"
#include "rv_auth.h"
#include "util/rv_sha256.h"
#include "util/rv_tar.h"
#include "whatif/rv_whatif.h"
#include "util/rv_round.h"

/* A job past this many ranks is refused (413) rather than loaded: every
 * rank's graph is held in memory for the run. */
#define TRAINING_MAX_RANKS 1024
/* Members of one archive upload past this many are refused. */
#define ARCHIVE_MAX_MEMBERS 4096

void rv_api_training_list(rv_req *r, void *app)
{
    rv_app *a = app;
    const char *cursor = rv_req_query(r, "cursor");
    int64_t before = 0;
    json_t *jobs = NULL;
    rv_error e;

    rv_error_clear(&e);
    int64_t limit = rv_req_query_int(r, "limit", 100, 1000);
    if (limit < 0)
        return;
    if (limit == 0)
        limit = 100;
    if (cursor) {
        char *end;
        long long c = strtoll(cursor, &end, 10);
        if (!*cursor || *end || c <= 0 || c == (long long)INT64_MAX) {
            rv_req_error(r, 400, "invalid_parameter", "cursor", "cursor is not one we issued");
            return;
        }
        before = c;
    }
    /* One more than asked says whether there is a next page. */
    if (rv_db_training_list(a->db, before, (unsigned)limit + 1, &jobs, &e) != 0) {
        rv_req_error_rv(r, &e);
        return;
    }
    json_t *next = json_null();
    if (json_array_size(jobs) > (size_t)limit) {
        json_array_remove(jobs, (size_t)limit);
        json_t *last = json_array_get(jobs, (size_t)limit - 1);
        char c[32];
        snprintf(c, sizeof(c), "%lld", (long long)json_integer_value(json_object_get(last, "id")));
        next = json_string(c);
    }
    rv_req_respond_json(r, 200,
                        json_pack("{s:o,s:I,s:o}", "training_jobs", jobs, "count",
                                  (json_int_t)json_array_size(jobs), "next_cursor", next));
}

void rv_api_training_get(rv_req *r, void *app)
{
    rv_api_get_by_id(r, app, rv_db_training_get);
}

/* rv_run_opts.cancel_fn for a request: its client went away. */
static int client_gone(void *r)
{
    return rv_req_client_gone(r);
}

/* The ranks present as a JSON array, and [0, world_size) minus them. */
static json_t *missing_ranks(const rv_db_training_job *j)
{
    json_t *arr = json_array();
    size_t k = 0;

    for (int32_t q = 0; arr && q < j->world_size && json_array_size(arr) < 1024; q++) {
        while (k < j->nranks && j->ranks[k].rank < q)
            k++;
        if (k < j->nranks && j->ranks[k].rank == q)
            continue;
        json_array_append_new(arr, json_integer(q));
    }
    return arr;
}

/* Checks the optional top-level "ranks" (ranks of the job to simulate) and
 * removes it from doc. keep[i] = 1 for the job's rank positions it names
 * (all when absent). -1 with a 400 set when it is not a list of present
 * ranks. */
static int take_ranks(rv_req *r, json_t *doc, const rv_db_training_job *j, unsigned char *keep)
{
    json_t *sel = json_object_get(doc, "ranks");

    if (!sel) {
        memset(keep, 1, j->nranks);
        return 0;
    }
    memset(keep, 0, j->nranks);
    if (!json_is_array(sel) || json_array_size(sel) == 0) {
        rv_req_error(r, 400, "invalid", "ranks", "ranks must be a non-empty list of rank numbers");
        return -1;
    }
    size_t i;
    json_t *v;
    json_array_foreach(sel, i, v)
    {
        size_t k = 0;
        json_int_t q = json_is_integer(v) ? json_integer_value(v) : -1;
        while (k < j->nranks && j->ranks[k].rank != q)
            k++;
        if (k == j->nranks) {
            rv_req_error(r, 400, "invalid", "ranks", "ranks[%zu] is not a rank this job has", i);
            return -1;
        }
        keep[k] = 1;
    }
    json_object_del(doc, "ranks");
    return 0;
}

/* The cache key of a job's answer: the document with the job's declared
 * world size and the stored trace of each rank simulated (in rank order),
 * kept with the first of those traces (*key_trace). */
static int job_key(const rv_db_training_job *j, const unsigned char *keep, const json_t *doc,
                   int64_t *key_trace, char *hash)
{
    rv_buf b = RV_BUF_INIT(1u << 20);
    int rc = rv_buf_printf(&b, "job world_size %d traces", (int)j->world_size);
    *key_trace = 0;
    for (size_t i = 0; i < j->nranks && !rc; i++) {
        if (!keep[i])
            continue;
        if (!*key_trace)
            *key_trace = j->ranks[i].trace_id;
        rc = rv_buf_printf(&b, " %d:%lld", (int)j->ranks[i].rank, (long long)j->ranks[i].trace_id);
    }
    if (!rc)
        rv_api_request_hash(doc, rv_buf_str(&b), hash);
    rv_buf_free(&b);
    return rc;
}

/* Answers from the cache when the key has an entry: 1 when sent. */
static int send_cached(rv_req *r, rv_app *a, int64_t key_trace, const char *hash)
{
    char *body = NULL;
    size_t len = 0;
    if (rv_api_cache_get(a, key_trace, hash, &body, &len) != 0)
        return 0;
    json_t *ans = json_loadb(body, len, 0, NULL);
    free(body);
    if (!ans)
        return 0;
    json_object_set_new(ans, "cached", json_true());
    rv_metrics_add(a->metrics, RV_M_CACHE_HITS, 1);
    rv_req_respond_json(r, 200, ans);
    return 1;
}

/* The answer's training_job entry (new reference, NULL on OOM): the job,
 * and each simulated rank's trace and time origin, so that a client can
 * put the rank's own timeline on the job's clock: trace time + origin +
 * the rank's clock offset. l holds the nl loaded ranks keep[] selected. */
static json_t *job_entry(const rv_db_training_job *j, const unsigned char *keep, const rv_loaded *l,
                         size_t nl)
{
    json_t *rk = json_array();
    for (size_t i = 0, k = 0; rk && i < j->nranks; i++) {
        if (!keep[i])
            continue;
        json_array_append_new(rk, json_pack("{s:i,s:I,s:f}", "rank", (int)j->ranks[i].rank,
                                            "trace_id", (json_int_t)j->ranks[i].trace_id,
                                            "origin_us", (double)l[k].graph->origin_ns / 1e3));
        k++;
    }
    return rk ? json_pack(
                    "{s:I,s:s,s:o,s:I,s:o,s:o}", "id", (json_int_t)j->id, "name", j->name,
                    "world_size", j->world_size >= 1 ? json_integer(j->world_size) : json_null(),
                    "ranks_simulated", (json_int_t)nl, "missing", missing_ranks(j), "ranks", rk)
              : NULL;
}

void rv_api_training_whatif(rv_req *r, void *app)
{
    rv_app *a = app;
    int64_t id = rv_api_id_param(r, "id");
    json_t *doc = NULL, *ans = NULL;
    rv_db_training_job *j = NULL;
    rv_loaded *l = NULL;
    rv_job_rank *ranks = NULL;
    char(*labels)[32] = NULL;
    unsigned char *keep = NULL;
    rv_whatif *w = NULL;
    rv_job *job = NULL;
    rv_job_result *res = NULL;
    size_t nl = 0;
    rv_error e;
    int64_t key_trace = 0;
    char hash[RV_SHA256_HEX_LEN + 1];

    rv_error_clear(&e);
    if (id < 0)
        return;
    doc = rv_api_whatif_doc(r);
    if (!doc)
        return;
    /* The timeline is the single-trace answer's; a job has none yet. */
    json_object_del(doc, "timeline");
    if (rv_db_training_ranks(a->db, id, &j, &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    if (j->nranks == 0) {
        rv_req_error(r, 400, "invalid", NULL,
                     "training job %lld has no ranks stored (all its traces were deleted)",
                     (long long)id);
        goto out;
    }
    if (j->nranks > TRAINING_MAX_RANKS) {
        rv_error_set(&e, RV_ERR_LIMIT, -1, -1,
                     "training job %lld has %zu ranks; at most %d are simulated together",
                     (long long)id, j->nranks, TRAINING_MAX_RANKS);
        rv_req_error_rv(r, &e);
        goto out;
    }
    if (!(keep = calloc(j->nranks, 1)) || !(l = calloc(j->nranks, sizeof(*l))) ||
        !(ranks = calloc(j->nranks, sizeof(*ranks))) ||
        !(labels = calloc(j->nranks, sizeof(*labels)))) {
        rv_error_set(&e, RV_ERR_NOMEM, -1, -1, "out of memory");
        rv_req_error_rv(r, &e);
        goto out;
    }
    if (take_ranks(r, doc, j, keep) != 0)
        goto out;
    if (rv_api_doc_uses_platform(doc)) {
        rv_req_error(r, 400, "unsupported", "host_overheads",
                     "host_overheads \"platform\" is answered per trace "
                     "(/v1/traces/{id}/whatif), not for a training job");
        goto out;
    }
    /* A bad document costs no load of the ranks. */
    if (rv_whatif_parse(doc, &w, &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    /* The answer is cached with the first rank's trace, keyed by the
     * document and the stored traces it ran on: a rank uploaded again or
     * deleted changes the key, and a deleted first rank takes its entries
     * with it. */
    if (job_key(j, keep, doc, &key_trace, hash) != 0) {
        rv_error_set(&e, RV_ERR_NOMEM, -1, -1, "out of memory");
        rv_req_error_rv(r, &e);
        goto out;
    }
    if (send_cached(r, a, key_trace, hash))
        goto out;
    rv_metrics_add(a->metrics, RV_M_CACHE_MISSES, 1);
    for (size_t i = 0; i < j->nranks; i++) {
        if (!keep[i])
            continue;
        if (rv_api_load(a, j->ranks[i].trace_id, &l[nl], &e) != 0) {
            rv_req_error_rv(r, &e);
            goto out;
        }
        /* The answer names each rank's stored trace. */
        snprintf(labels[nl], sizeof(labels[nl]), "trace %lld", (long long)j->ranks[i].trace_id);
        ranks[nl] = (rv_job_rank){.graph = l[nl].graph,
                                  .base = l[nl].base,
                                  .rank = j->ranks[i].rank,
                                  .world_size = j->world_size,
                                  .label = labels[nl]};
        nl++;
    }
    if (rv_job_build(ranks, nl, &job, &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    rv_run_opts opts = {.iteration = RV_ITER_MEDIAN,
                        .budget_ms = a->cfg.whatif_budget_ms,
                        .budget_from_ms = rv_req_started_ms(r),
                        .cancel = &a->draining,
                        .cancel_fn = client_gone,
                        .cancel_arg = r};
    if (rv_job_run(job, w, &opts, &res, &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    if (!rv_whatif_is_empty(w))
        rv_metrics_add(a->metrics, RV_M_SIMULATIONS, 1);
    ans = rv_job_render(res, j->name);
    json_t *tj = job_entry(j, keep, l, nl);
    if (!ans || !tj || json_object_set(ans, "training_job", tj) != 0) {
        json_decref(tj);
        rv_error_set(&e, RV_ERR_NOMEM, -1, -1, "out of memory rendering the answer");
        rv_req_error_rv(r, &e);
        goto out;
    }
    json_decref(tj);
    json_object_set_new(ans, "cached", json_false());
    json_object_set_new(ans, "request_hash", json_string(hash));
    {
        char *text = rv_round_dumps(ans, JSON_COMPACT);
        if (text)
            rv_api_cache_put(r, a, key_trace, hash, text, strlen(text), NULL);
        free(text);
    }
    rv_req_respond_json(r, 200, ans);
    ans = NULL;
out:
    json_decref(ans);
    rv_job_result_free(res);
    rv_job_free(job);
    rv_whatif_free(w);
    for (size_t i = 0; i < nl; i++)
        rv_api_loaded_free(&l[i]);
    free(l);
    free(ranks);
    free(labels);
    free(keep);
    rv_db_training_job_free(j);
    json_decref(doc);
}

void rv_api_job_free(rv_api_job *jl)
{
    rv_job_free(jl->job);
    for (size_t i = 0; i < jl->nl; i++)
        rv_api_loaded_free(&jl->l[i]);
    free(jl->l);
    free(jl->ranks);
    free(jl->labels);
    rv_db_training_job_free(jl->j);
    memset(jl, 0, sizeof(*jl));
}

int rv_api_job_load(rv_req *r, rv_app *a, int64_t id, rv_api_job *jl)
{
    rv_error e;
    rv_error_clear(&e);
    memset(jl, 0, sizeof(*jl));
    if (rv_db_training_ranks(a->db, id, &jl->j, &e) != 0)
        goto fail;
    const rv_db_training_job *j = jl->j;
    if (j->nranks == 0) {
        rv_req_error(r, 400, "invalid", NULL,
                     "training job %lld has no ranks stored (all its traces were deleted)",
                     (long long)id);
        return -1;
    }
    if (j->nranks > TRAINING_MAX_RANKS) {
        rv_error_set(&e, RV_ERR_LIMIT, -1, -1,
                     "training job %lld has %zu ranks; at most %d are simulated together",
                     (long long)id, j->nranks, TRAINING_MAX_RANKS);
        goto fail;
    }
    if (!(jl->l = calloc(j->nranks, sizeof(*jl->l))) ||
        !(jl->ranks = calloc(j->nranks, sizeof(*jl->ranks))) ||
        !(jl->labels = calloc(j->nranks, sizeof(*jl->labels)))) {
        rv_error_set(&e, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < j->nranks; i++) {
        if (rv_api_load(a, j->ranks[i].trace_id, &jl->l[jl->nl], &e) != 0)
            goto fail;
        size_t k = jl->nl++;
        snprintf(jl->labels[k], sizeof(jl->labels[k]), "trace %lld",
                 (long long)j->ranks[i].trace_id);
        jl->ranks[k] = (rv_job_rank){.graph = jl->l[k].graph,
                                     .base = jl->l[k].base,
                                     .rank = j->ranks[i].rank,
                                     .world_size = j->world_size,
                                     .label = jl->labels[k]};
    }
    if (rv_job_build(jl->ranks, jl->nl, &jl->job, &e) != 0)
        goto fail;
    return 0;
fail:
    rv_req_error_rv(r, &e);
    return -1;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* One member of an archive upload: ingested as a trace of job `job`, its
 * rank from the trace. The row for the answer is appended to rows. Returns
 * 1 stored, 2 duplicate, 0 refused (the row says why), or RV_ERR_IO when
 * the database failed or RV_ERR_FORBIDDEN when the job turned out to be
 * another token's (the whole upload stops). */
static int archive_member(rv_app *a, const char *job, const char *writer, int writer_admin,
                          const char *name, const uint8_t *data, size_t len, json_t *rows,
                          rv_error *dberr)
{
    rv_db_ingest_meta meta = {.job = job, .rank = RV_NONE, .world_size = RV_NONE};
    rv_db_ingest_result res = {0};
    json_t *t = NULL;
    rv_error e;

    rv_error_clear(&e);
    meta.max_bytes = (size_t)a->cfg.upload_cap;
    meta.max_trace_bytes = (size_t)a->cfg.max_trace_bytes;
    meta.max_events = (size_t)a->cfg.max_events;
    meta.writer = writer;
    meta.writer_admin = writer_admin;
    if (rv_db_ingest_buffer(a->db, data, len, &meta, &res, &e) != 0) {
        if (e.code == RV_ERR_IO || e.code == RV_ERR_NOMEM || e.code == RV_ERR_FORBIDDEN) {
            *dberr = e;
            return e.code;
        }
        json_array_append_new(rows, json_pack("{s:s,s:s,s:s}", "name", name, "error",
                                              rv_err_name(e.code), "message", e.message));
        return 0;
    }
    rv_metrics_add(a->metrics, RV_M_INGEST_BYTES, len);
    rv_metrics_add(a->metrics, res.duplicate ? RV_M_UPLOAD_DUPLICATES : RV_M_UPLOADS, 1);
    json_t *rank = json_null();
    if (rv_db_trace_get(a->db, res.trace_id, &t, &e) == 0 && t)
        rank = json_incref(json_object_get(t, "rank"));
    if (!rank)
        rank = json_null();
    json_decref(t);
    json_array_append_new(rows, json_pack("{s:s,s:I,s:o,s:b}", "name", name, "trace_id",
                                          (json_int_t)res.trace_id, "rank", rank, "duplicate",
                                          res.duplicate));
    return res.duplicate ? 2 : 1;
}

/* The first pass over an archive upload: 0 when its members (the tar
 * stream inflated) add up to at most cfg.max_archive bytes, else -1 with
 * 413 naming max_archive (or the archive's own error) set on r. */
static int archive_size_ok(rv_req *r, rv_app *a, const char *spool)
{
    rv_tar *tar = NULL;
    char *name = malloc(RV_TAR_NAME_MAX);
    uint64_t total = 0;
    size_t len = 0, members = 0;
    int rc, ok = -1;
    rv_error e;

    rv_error_clear(&e);
    if (!name || rv_tar_open_file(spool, &tar, &e) != 0) {
        if (!name)
            rv_error_set(&e, RV_ERR_NOMEM, -1, -1, "out of memory");
        rv_req_error_rv(r, &e);
        goto out;
    }
    while ((rc = rv_tar_next(tar, (size_t)a->cfg.upload_cap, name, NULL, &len, &e)) == 1) {
        total += len;
        if (++members > ARCHIVE_MAX_MEMBERS) {
            rv_error_set(&e, RV_ERR_LIMIT, -1, -1, "the archive holds more than %d files",
                         ARCHIVE_MAX_MEMBERS);
            rc = RV_ERR_LIMIT;
            break;
        }
        if (a->cfg.max_archive && total > a->cfg.max_archive) {
            rv_req_error(r, 413, "limit_exceeded", "max_archive",
                         "the archive's files add up to more than this server's limit of %llu "
                         "bytes (max_archive, --max-archive) by member '%.200s'; nothing was "
                         "stored",
                         (unsigned long long)a->cfg.max_archive, name);
            goto out;
        }
    }
    if (rc < 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    ok = 0;
out:
    rv_tar_close(tar);
    free(name);
    return ok;
}

/* POST /v1/training-jobs?job=NAME: a .tar or .tar.gz of the rank traces
 * (each .json or .json.gz member is one trace, its rank from its
 * distributedInfo). Each member is its own ingest, so one bad member costs
 * only itself; the answer lists every member. */
void rv_api_training_upload(rv_req *r, void *app)
{
    rv_app *a = app;
    uint64_t size = 0;
    const char *spool = rv_req_spool(r, &size);
    const char *job = rv_req_query(r, "job");
    rv_tar *tar = NULL;
    json_t *rows = json_array(), *tj = NULL;
    char *name = malloc(RV_TAR_NAME_MAX);
    uint8_t *data = NULL;
    size_t len = 0, stored = 0, dups = 0, members = 0;
    int64_t id = 0;
    char who[32];
    unsigned scopes = 0;
    rv_error e;

    rv_error_clear(&e);
    if (!job)
        job = rv_req_header(r, "X-Reverie-Job");
    if (!rows || !name) {
        rv_error_set(&e, RV_ERR_NOMEM, -1, -1, "out of memory");
        rv_req_error_rv(r, &e);
        goto out;
    }
    if (!job || !*job || strlen(job) > 256) {
        rv_req_error(r, 400, "invalid_parameter", "job",
                     "job=NAME (1 to 256 characters) names the training job of the archive");
        goto out;
    }
    if (!spool || size == 0) {
        rv_req_error(r, 400, "body_required", NULL,
                     "the request body must be a .tar or .tar.gz of the rank traces");
        goto out;
    }
    if (rv_api_disk_guard(r, a, size) != 0)
        goto out;
    /* Writing into an existing job is its creator's or an admin's. */
    rv_api_caller(a, r, who, sizeof(who), &scopes);
    if (rv_db_training_may_write(a->db, job, who, (scopes & RV_SCOPE_ADMIN) != 0, &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    /* What the archive inflates to is bounded before any member is
     * stored: a first pass reads the headers and skips the bytes. */
    if (archive_size_ok(r, a, spool) != 0)
        goto out;
    if (rv_tar_open_file(spool, &tar, &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    for (;;) {
        int rc = rv_tar_next(tar, (size_t)a->cfg.upload_cap, name, &data, &len, &e);
        if (rc == 0)
            break;
        if (rc < 0) {
            rv_req_error_rv(r, &e);
            goto out;
        }
        if (++members > ARCHIVE_MAX_MEMBERS) {
            rv_error_set(&e, RV_ERR_LIMIT, -1, -1, "the archive holds more than %d files",
                         ARCHIVE_MAX_MEMBERS);
            rv_req_error_rv(r, &e);
            goto out;
        }
        const char *base = strrchr(name, '/');
        base = base ? base + 1 : name;
        if (base[0] == '.' || (!ends_with(base, ".json") && !ends_with(base, ".json.gz"))) {
            json_array_append_new(rows, json_pack("{s:s,s:s,s:s}", "name", name, "error", "skipped",
                                                  "message", "not a .json or .json.gz file"));
        } else {
            rc = archive_member(a, job, who, (scopes & RV_SCOPE_ADMIN) != 0, name, data, len, rows,
                                &e);
            if (rc < 0) {
                rv_req_error_rv(r, &e);
                goto out;
            }
            stored += rc == 1;
            dups += rc == 2;
        }
        free(data);
        data = NULL;
    }
    if (stored + dups == 0) {
        json_t *first = json_array_get(rows, 0);
        const char *why = json_string_value(json_object_get(first, "message"));
        rv_req_error(r, 400, "invalid", NULL,
                     "the archive holds no trace the reader accepts (%zu files%s%s)",
                     json_array_size(rows), why ? "; the first: " : "", why ? why : "");
        rv_metrics_add(a->metrics, RV_M_UPLOAD_REJECTED, 1);
        goto out;
    }
    /* The job exists once a member had a rank; else the traces are only
     * labelled with the name. */
    if (rv_db_training_id(a->db, job, &id, &e) == 0 && rv_db_training_get(a->db, id, &tj, &e) != 0)
        tj = NULL;
    if (e.code == RV_ERR_IO) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    if (tj) {
        char loc[64];
        snprintf(loc, sizeof(loc), "/v1/training-jobs/%lld", (long long)id);
        rv_req_add_header(r, "Location", loc);
    }
    rv_req_respond_json(r, stored ? 201 : 200,
                        json_pack("{s:o,s:O,s:I,s:I,s:I}", "training_job", tj ? tj : json_null(),
                                  "members", rows, "stored", (json_int_t)stored, "duplicates",
                                  (json_int_t)dups, "refused",
                                  (json_int_t)(json_array_size(rows) - stored - dups)));
out:
    free(data);
    free(name);
    json_decref(rows);
    rv_tar_close(tar);
}
