/* Fleet-wide what-ifs: every selected trace under every scenario.
 *
 * Small requests (traces x scenarios <= fleet_inline_max) are answered in
 * the request. Larger ones become a "fleet" job in the database queue and
 * the answer is 202 + job id. A fleet worker (any replica) claims the job,
 * resolves the selection and expands it, once, into "fleet_shard" jobs of a
 * few traces each (rv_db_job_expand: a parent claimed again after a restart
 * inserts nothing), and goes back to the queue: no thread waits on a
 * parent. Fleet workers of every replica claim shards (FOR UPDATE SKIP
 * LOCKED, lowest shard index first across jobs); finishing a shard counts it
 * on its parent in the same transaction, and the worker that finished the
 * last one merges the rows into the aggregates and finishes the parent.
 * Workers stop between traces when the server drains (the shard goes back
 * to the queue) or when the job was cancelled (DELETE /v1/jobs/{id}). */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rv_api_internal.h"
#include "rv_auth.h"
#include "util/rv_buf.h"
#include "rv_db.h"
#include "rv_metrics.h"
#include "graph/rv_retime.h"
#include "run/rv_run.h"
#include "util/rv_sha256.h"
#include "util/rv_sort.h"
#include "whatif/rv_whatif.h"
#include "util/rv_round.h"

#define MAX_SCENARIOS 64
/* Without shard_size, a job is cut into about SHARDS_TARGET shards of at
 * least SHARD_MIN traces: enough shards for every fleet thread of a few
 * replicas to take some and to even out the last ones, few enough that
 * the per-shard claim, finish and merge stay small beside the rows. */
#define SHARD_MIN     4
#define SHARD_MAX     256
#define SHARDS_TARGET 64
#define STALE_JOB_S   60
/* Traces one request may select (REVERIE_FLEET_MAX_TRACES, 1..1,000,000). */
#define DEFAULT_MAX_TRACES 10000
#define HARD_MAX_TRACES    1000000
/* Bytes of a CSV answer: 64 scenarios x 10,000 traces of ~300 bytes fit. */
#define FLEET_CSV_MAX ((size_t)256 << 20)

static char worker_prefix[128];
static size_t max_traces = DEFAULT_MAX_TRACES;

void rv_api_fleet_init(rv_app *a)
{
    char host[64] = "host";
    const char *env = getenv("REVERIE_FLEET_MAX_TRACES");

    (void)a;
    gethostname(host, sizeof(host) - 1);
    snprintf(worker_prefix, sizeof(worker_prefix), "%s:%d", host, (int)getpid());
    if (env && *env) {
        char *end;
        unsigned long long v = strtoull(env, &end, 10);
        if (*end || v < 1 || v > HARD_MAX_TRACES)
            fprintf(stderr,
                    "reveried: REVERIE_FLEET_MAX_TRACES=%s is not 1..%d; keeping %d traces per "
                    "fleet request\n",
                    env, HARD_MAX_TRACES, DEFAULT_MAX_TRACES);
        else
            max_traces = (size_t)v;
    }
}

/* Validates the request document; 0 or an rv_err with err->field set. */
static int fleet_validate(const json_t *req, rv_error *err)
{
    const json_t *sel = json_object_get(req, "select");
    const json_t *sc = json_object_get(req, "scenarios");

    if (!json_is_object(req))
        return rv_error_field(err, RV_ERR_INVALID, "", "the request must be a JSON object");
    if (sel && !json_is_object(sel))
        return rv_error_field(err, RV_ERR_INVALID, "select", "select must be an object");
    if (!json_is_array(sc) || json_array_size(sc) == 0 || json_array_size(sc) > MAX_SCENARIOS)
        return rv_error_field(err, RV_ERR_INVALID, "scenarios",
                              "scenarios must be an array of 1 to %d what-if documents",
                              MAX_SCENARIOS);
    for (size_t i = 0; i < json_array_size(sc); i++) {
        rv_whatif *w = NULL;
        if (rv_whatif_parse(json_array_get(sc, i), &w, err) != 0) {
            char f[sizeof(err->field) + 32];
            snprintf(f, sizeof(f), "scenarios[%zu]%s%s", i, err->field[0] ? "." : "", err->field);
            memcpy(err->field, f, sizeof(err->field) - 1);
            err->field[sizeof(err->field) - 1] = '\0';
            return err->code;
        }
        rv_whatif_free(w);
    }
    const json_t *v;
    if (sel) {
        if ((v = json_object_get(sel, "platform")) && !json_is_integer(v))
            return rv_error_field(err, RV_ERR_INVALID, "select.platform",
                                  "select.platform must be a platform id");
        if ((v = json_object_get(sel, "job")) && !json_is_string(v))
            return rv_error_field(err, RV_ERR_INVALID, "select.job",
                                  "select.job must be a string (a glob like 'bert-*')");
        char t[RV_DB_TIME_MAX];
        if ((v = json_object_get(sel, "since")) &&
            (!json_is_string(v) || rv_db_time_parse(json_string_value(v), t, sizeof(t)) != 0))
            return rv_error_field(err, RV_ERR_INVALID, "select.since",
                                  "select.since must be an RFC 3339 / ISO 8601 time, e.g. "
                                  "2024-05-01 or 2024-05-01T12:00:00Z");
        if ((v = json_object_get(sel, "trace_ids"))) {
            if (!json_is_array(v))
                return rv_error_field(err, RV_ERR_INVALID, "select.trace_ids",
                                      "select.trace_ids must be an array of ids");
            if (json_array_size(v) > max_traces)
                return rv_error_field(err, RV_ERR_INVALID, "select.trace_ids",
                                      "select.trace_ids has %zu ids, over the limit of %zu per "
                                      "request (REVERIE_FLEET_MAX_TRACES)",
                                      json_array_size(v), max_traces);
            for (size_t i = 0; i < json_array_size(v); i++)
                if (!json_is_integer(json_array_get(v, i)) ||
                    json_integer_value(json_array_get(v, i)) <= 0)
                    return rv_error_field(err, RV_ERR_INVALID, "select.trace_ids",
                                          "select.trace_ids[%zu] is not a trace id", i);
        }
    }
    if ((v = json_object_get(req, "shard_size")) &&
        (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 1000))
        return rv_error_field(err, RV_ERR_INVALID, "shard_size", "shard_size must be 1..1000");
    return 0;
}

static size_t auto_shard(size_t n)
{
    size_t k = (n + SHARDS_TARGET - 1) / SHARDS_TARGET;
    return k < SHARD_MIN ? SHARD_MIN : k > SHARD_MAX ? SHARD_MAX : k;
}

static int cmp_id_desc(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a > b ? -1 : a < b;
}

/* Resolves the selection into distinct trace ids, newest first, at most
 * max_traces of them (more is RV_ERR_INVALID naming the limit). *ids is
 * new. *dropped (may be NULL) = distinct ids of select.trace_ids that
 * selected no trace (no such trace, or left out by the other filters). */
static int fleet_select(rv_app *a, const json_t *sel, int64_t **ids, size_t *n, size_t *dropped,
                        rv_error *err)
{
    const json_t *tid = json_object_get(sel, "trace_ids");
    const char *job = json_string_value(json_object_get(sel, "job"));
    int glob = job && strpbrk(job, "*?[") != NULL;
    rv_db_trace_filter f = {0};
    int64_t *want = NULL;
    size_t nwant = 0;
    int rc = 0;

    *ids = NULL;
    *n = 0;
    if (dropped)
        *dropped = 0;
    if (tid) {
        /* Distinct ids: the same trace twice is one row. */
        nwant = json_array_size(tid);
        want = malloc((nwant ? nwant : 1) * sizeof(*want));
        if (!want)
            return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        for (size_t i = 0; i < nwant; i++)
            want[i] = (int64_t)json_integer_value(json_array_get(tid, i));
        qsort(want, nwant, sizeof(*want), cmp_id_desc);
        size_t k = 0;
        for (size_t i = 0; i < nwant; i++)
            if (k == 0 || want[k - 1] != want[i])
                want[k++] = want[i];
        nwant = k;
        f.ids = want;
        f.nids = nwant;
    }
    f.platform_id = (int64_t)json_integer_value(json_object_get(sel, "platform"));
    f.since = json_string_value(json_object_get(sel, "since"));
    f.job = job && !glob ? job : NULL;
    if (!glob) {
        f.limit = (unsigned)max_traces + 1;
        rc = rv_db_trace_ids(a->db, &f, ids, n, err);
    } else {
        /* Globs are matched here, a page at a time. */
        size_t cap = 0;
        f.limit = 1000;
        for (;;) {
            json_t *page = NULL;
            if ((rc = rv_db_trace_list(a->db, &f, &page, err)) != 0)
                break;
            size_t np = json_array_size(page);
            for (size_t i = 0; i < np && *n <= max_traces; i++) {
                json_t *t = json_array_get(page, i);
                const char *tj = json_string_value(json_object_get(t, "job"));
                f.before_id = (int64_t)json_integer_value(json_object_get(t, "id"));
                if (fnmatch(job, tj ? tj : "", 0) != 0)
                    continue;
                if (*n == cap) {
                    size_t nc = cap ? cap * 2 : 64;
                    int64_t *ni = realloc(*ids, nc * sizeof(*ni));
                    if (!ni) {
                        json_decref(page);
                        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
                        goto out;
                    }
                    *ids = ni;
                    cap = nc;
                }
                (*ids)[(*n)++] = f.before_id;
            }
            json_decref(page);
            if (np < f.limit || *n > max_traces)
                break;
        }
    }
    if (rc == RV_ERR_INVALID && err && strcmp(err->field, "since") == 0)
        snprintf(err->field, sizeof(err->field), "select.since");
    if (rc == 0 && *n > max_traces)
        rc = rv_error_field(err, RV_ERR_INVALID, "select",
                            "the selection matches more than %zu traces, the limit per request "
                            "(REVERIE_FLEET_MAX_TRACES): narrow it with platform, job, since or "
                            "trace_ids",
                            max_traces);
    if (rc == 0 && dropped && tid)
        *dropped = nwant - *n;
out:
    if (rc != 0) {
        free(*ids);
        *ids = NULL;
        *n = 0;
    }
    free(want);
    return rc;
}

/* What one trace needs across scenarios, fetched at most once each: the
 * loaded graph, and for scenarios with "host_overheads": "platform" the
 * version of its platform's statistics (cache key) and their table. */
typedef struct fleet_trace {
    int64_t id;
    rv_loaded l;
    int loaded;    /* 0 not tried, 1 loaded, -1 failed (load_err) */
    int versioned; /* same for version */
    int tabled;    /* same for oh */
    char version[192];
    rv_oh_table *oh;
    /* The scenario "gpu" the version and table were read for: a host of
     * another GPU's platform may answer another target (rv_db_host_overheads). */
    char host_gpu[64];
    rv_error load_err, version_err, table_err;
} fleet_trace;

/* Forgets ft's platform version and table when doc moves the trace to
 * another GPU than the one they were read for. */
static void host_for(fleet_trace *ft, const json_t *doc)
{
    const char *gpu = json_string_value(json_object_get(doc, "gpu"));
    if (!gpu)
        gpu = "";
    if (strcmp(ft->host_gpu, gpu) == 0)
        return;
    ft->versioned = ft->tabled = 0;
    rv_oh_table_free(ft->oh);
    ft->oh = NULL;
    snprintf(ft->host_gpu, sizeof(ft->host_gpu), "%s", gpu);
}

/* The keys a fleet row of the answer keyed hash is cached under when it
 * is no full answer: its figures alone ("fleet-row") or a stable error
 * ("fleet-error"). Never the answer's own key, so a single-trace what-if
 * never reads them. */
static void derived_hash(const char *kind, const char *hash, char out[RV_SHA256_HEX_LEN + 1])
{
    char in[16 + RV_SHA256_HEX_LEN + 1];
    int n = snprintf(in, sizeof(in), "%s\n%s", kind, hash);
    rv_sha256_hex(in, (size_t)n, out);
}

static void error_hash(const char *hash, char out[RV_SHA256_HEX_LEN + 1])
{
    derived_hash("fleet-error", hash, out);
}

static void row_hash(const char *hash, char out[RV_SHA256_HEX_LEN + 1])
{
    derived_hash("fleet-row", hash, out);
}

/* Errors that the same trace and document always give (until the model
 * version changes, which changes the key): cached like answers. Running
 * out of time or memory, or a database or load failure, is not. */
static int error_is_stable(int code)
{
    return code == RV_ERR_PARSE || code == RV_ERR_INVALID || code == RV_ERR_UNSUPPORTED ||
           code == RV_ERR_LIMIT;
}

/* The message of a cached error body {"error":{"code","message"}} (borrowed
 * into e). 0, or -1 when the body is not one. */
static int cached_error(const char *body, rv_error *e)
{
    json_t *j = json_loads(body, 0, NULL);
    const char *m = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    int rc = m ? 0 : -1;
    if (m) {
        rv_error_clear(e);
        e->code = RV_ERR_UNSUPPORTED;
        snprintf(e->message, sizeof(e->message), "%s", m);
    }
    json_decref(j);
    return rc;
}

static void put_error(rv_app *a, int64_t id, const char *hash, const rv_error *e)
{
    char eh[RV_SHA256_HEX_LEN + 1];
    rv_error e2;
    json_t *j = json_pack("{s:{s:s,s:s}}", "error", "code", rv_err_name(e->code), "message",
                          e->message[0] ? e->message : rv_err_name(e->code));
    char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!body)
        return;
    error_hash(hash, eh);
    rv_error_clear(&e2);
    rv_db_whatif_cache_put(a->db, id, eh, body, strlen(body), NULL, &e2);
    free(body);
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Microseconds since t0 (mono_s), for the fleet phase counters. */
static uint64_t us_since(double t0)
{
    double d = (mono_s() - t0) * 1e6;
    return d > 0 ? (uint64_t)d : 0;
}

/* The figures of one scenario (borrowed) on one trace, from the cache's
 * summary columns (a full answer's, or a fleet row's) or computed: only
 * the figures (RV_API_RUN_SUMMARY: no reports, nothing rendered), cached
 * under the row key; a stable error is cached under its own key.
 * known_miss: the caller looked the keys up already and found nothing.
 * 0 and *sum, or a negative rv_err with *e. */
static int fleet_one(rv_app *a, fleet_trace *ft, const json_t *doc, const char *plain_hash,
                     int known_miss, rv_run_summary *sum, rv_error *e)
{
    char hash[RV_SHA256_HEX_LEN + 1];
    rv_run_result *res = NULL;
    int platform = rv_api_doc_uses_platform(doc);
    /* Rows on the platform's kernel models are not cached: those follow
     * every upload, and a version per row would cost a query per row. */
    int uncached = rv_api_doc_uses_platform_kmodels(doc);

    snprintf(hash, sizeof(hash), "%s", plain_hash);
    if (uncached)
        known_miss = 1;
    if (platform) {
        host_for(ft, doc);
        if (!ft->versioned) {
            rv_error_clear(&ft->version_err);
            ft->versioned = rv_api_platform_version(a, ft->id, doc, ft->version,
                                                    sizeof(ft->version), &ft->version_err) == 0
                                ? 1
                                : -1;
        }
        if (ft->versioned < 0) {
            *e = ft->version_err;
            return e->code;
        }
        rv_api_request_hash(doc, ft->version, hash);
        known_miss = uncached;
    }
    rv_error_clear(e);
    if (!known_miss) {
        /* The answer, a row and a cached error in one read. */
        char eh[RV_SHA256_HEX_LEN + 1], rh[RV_SHA256_HEX_LEN + 1];
        const char *hs[3] = {hash, eh, rh};
        static const int want[3] = {0, 1, 0};
        rv_db_cache_row *rows = NULL;
        size_t nrows = 0;
        error_hash(hash, eh);
        row_hash(hash, rh);
        double t0 = mono_s();
        if (rv_db_whatif_cache_rows(a->db, &ft->id, 1, hs, want, 3, &rows, &nrows, e) == 0) {
            int hit = 0;
            for (size_t i = 0; i < nrows && !hit; i++)
                if (rows[i].hash == 0 || rows[i].hash == 2) {
                    *sum = rows[i].sum;
                    hit = 1;
                }
            for (size_t i = 0; i < nrows && !hit; i++)
                if (rows[i].hash == 1 && rows[i].body && cached_error(rows[i].body, e) == 0)
                    hit = -1;
            rv_db_cache_rows_free(rows, nrows);
            rv_metrics_add(a->metrics, RV_M_FLEET_READ_US, us_since(t0));
            if (hit) {
                rv_metrics_add(a->metrics, RV_M_CACHE_HITS, 1);
                return hit > 0 ? 0 : e->code;
            }
        }
        rv_error_clear(e);
    }
    rv_metrics_add(a->metrics, RV_M_CACHE_MISSES, 1);
    if (!ft->loaded) {
        double t0 = mono_s();
        rv_error_clear(&ft->load_err);
        ft->loaded = rv_api_load(a, ft->id, &ft->l, &ft->load_err) == 0 ? 1 : -1;
        rv_metrics_add(a->metrics, RV_M_FLEET_LOAD_US, us_since(t0));
    }
    if (ft->loaded < 0) {
        *e = ft->load_err;
        return e->code;
    }
    if (platform) {
        if (!ft->tabled) {
            rv_error_clear(&ft->table_err);
            ft->tabled = rv_api_platform_table(a, ft->id, doc, &ft->oh, ft->version,
                                               sizeof(ft->version), &ft->table_err) == 0
                             ? 1
                             : -1;
        }
        if (ft->tabled < 0) {
            *e = ft->table_err;
            return e->code;
        }
        /* Keyed by the statistics actually used. */
        rv_api_request_hash(doc, ft->version, hash);
    }
    rv_error_clear(e);
    double t0 = mono_s();
    rv_api_et_model etm = {0};
    int rc = rv_api_whatif_run(a, &ft->l, doc, ft->oh, RV_API_RUN_SUMMARY, &etm, &res, e);
    rv_metrics_add(a->metrics, RV_M_FLEET_RUN_US, us_since(t0));
    t0 = mono_s();
    if (rc != 0) {
        rv_api_et_model_free(&etm);
        if (error_is_stable(rc) && !uncached)
            put_error(a, ft->id, hash, e);
        rv_metrics_add(a->metrics, RV_M_FLEET_STORE_US, us_since(t0));
        return rc;
    }
    *sum = res->sum;
    rv_run_result_free(res);
    rv_api_et_model_free(&etm);
    /* The figures only: a single-trace what-if computes its full answer. */
    char rh[RV_SHA256_HEX_LEN + 1];
    rv_error e2;
    row_hash(hash, rh);
    rv_error_clear(&e2);
    if (!uncached)
        rv_db_whatif_cache_put(a->db, ft->id, rh, "{}", 2, sum, &e2);
    rv_metrics_add(a->metrics, RV_M_FLEET_STORE_US, us_since(t0));
    return 0;
}

/* Why fleet_rows stopped before the last trace. */
enum { ROWS_ALL = 0, ROWS_DRAINING, ROWS_GONE };

/* A job's progress (and with it whether it still runs) is written at most
 * this often. */
#define CHECK_EVERY_S 0.5

/* Traces whose listings and cached rows are read in one go. */
#define CHUNK 256

/* What a chunk of traces has already: listings (job, GPU model) and the
 * cached rows of the scenarios whose key does not depend on the trace. */
typedef struct fleet_pre {
    json_t *listing;       /* array of trace objects, NULL when unread */
    rv_db_cache_row *rows; /* sorted by (trace_id, hash) */
    size_t nrows;
    int ok; /* the rows were read: a pair that is not there is a miss */
} fleet_pre;

static int cmp_row(const void *x, const void *y)
{
    const rv_db_cache_row *a = x, *b = y;
    if (a->trace_id != b->trace_id)
        return a->trace_id < b->trace_id ? -1 : 1;
    return a->hash < b->hash ? -1 : a->hash > b->hash;
}

static const rv_db_cache_row *pre_row(const fleet_pre *p, int64_t id, size_t hash)
{
    rv_db_cache_row key;
    key.trace_id = id;
    key.hash = hash;
    return p->ok && p->nrows ? bsearch(&key, p->rows, p->nrows, sizeof(key), cmp_row) : NULL;
}

static const json_t *pre_listing(const fleet_pre *p, int64_t id)
{
    for (size_t i = 0; i < json_array_size(p->listing); i++) {
        const json_t *t = json_array_get(p->listing, i);
        if (json_integer_value(json_object_get(t, "id")) == id)
            return t;
    }
    return NULL;
}

/* Reads the listings of ids[0..n) (n <= CHUNK) and their cached rows under
 * the keys of each scenario s with lookup[s] set: hashes[3s] its answer,
 * 3s + 1 its error, 3s + 2 its row. A failed read only costs speed: rows are
 * then looked up one by one. */
static void pre_read(rv_app *a, const int64_t *ids, size_t n, char (*hashes)[RV_SHA256_HEX_LEN + 1],
                     const int *lookup, size_t ns, fleet_pre *p)
{
    rv_db_trace_filter f = {0};
    const char **hs = calloc(3 * ns + 1, sizeof(*hs));
    int *want = calloc(3 * ns + 1, sizeof(*want));
    size_t nh = 0, *which = calloc(3 * ns + 1, sizeof(*which));
    rv_error e;
    double t0 = mono_s();

    memset(p, 0, sizeof(*p));
    f.ids = ids;
    f.nids = n;
    f.limit = CHUNK;
    rv_error_clear(&e);
    if (rv_db_trace_list(a->db, &f, &p->listing, &e) != 0)
        p->listing = NULL;
    if (!hs || !want || !which)
        goto out;
    for (size_t s = 0; s < ns; s++) {
        if (!lookup[s])
            continue;
        for (size_t k = 0; k < 3; k++) {
            which[nh] = 3 * s + k;
            want[nh] = k == 1; /* an error's message is in its body */
            hs[nh++] = hashes[3 * s + k];
        }
    }
    rv_error_clear(&e);
    if (nh && rv_db_whatif_cache_rows(a->db, ids, n, hs, want, nh, &p->rows, &p->nrows, &e) == 0) {
        /* Back from the asked order to the scenario's slots. */
        for (size_t i = 0; i < p->nrows; i++)
            p->rows[i].hash = which[p->rows[i].hash];
        qsort(p->rows, p->nrows, sizeof(*p->rows), cmp_row);
        p->ok = 1;
    }
out:
    free(hs);
    free(want);
    free(which);
    rv_metrics_add(a->metrics, RV_M_FLEET_READ_US, us_since(t0));
}

static void pre_clear(fleet_pre *p)
{
    json_decref(p->listing);
    rv_db_cache_rows_free(p->rows, p->nrows);
    memset(p, 0, sizeof(*p));
}

/* Rows for ids[0..n) under every scenario: [[row per trace] per scenario].
 * Listings and cached rows are read a chunk of traces at a time; only the
 * rows not cached are computed (fleet_one). With a progress_job, its
 * progress (the heartbeat, and the check that it still runs) is written
 * when CHECK_EVERY_S has passed, checked after every trace and between
 * scenarios; the rows stop early (NULL, *stopped set) when the server
 * drains (checked before every scenario) or when the job is no longer
 * running (cancelled, or requeued and taken by another worker). */
static json_t *fleet_rows(rv_app *a, const int64_t *ids, size_t n, const json_t *scenarios,
                          int64_t progress_job, double p0, double p1, int *stopped)
{
    size_t ns = json_array_size(scenarios);
    json_t *per = json_array();
    /* Per scenario: the answer's key (3s), its error key (3s + 1) and its
     * row key (3s + 2). */
    char(*hashes)[RV_SHA256_HEX_LEN + 1] = calloc(3 * ns + 1, sizeof(*hashes));
    int *lookup = calloc(ns + 1, sizeof(*lookup));
    fleet_pre pre;

    memset(&pre, 0, sizeof(pre));
    if (!per || !hashes || !lookup) {
        free(hashes);
        free(lookup);
        json_decref(per);
        return NULL;
    }
    for (size_t s = 0; s < ns; s++) {
        const json_t *doc = json_array_get(scenarios, s);
        json_array_append_new(per, json_array());
        rv_api_request_hash(doc, NULL, hashes[3 * s]);
        error_hash(hashes[3 * s], hashes[3 * s + 1]);
        row_hash(hashes[3 * s], hashes[3 * s + 2]);
        /* A platform document's key holds its trace's statistics version. */
        lookup[s] = !rv_api_doc_platform_dependent(doc);
    }
    *stopped = ROWS_ALL;
    double checked = mono_s();
    for (size_t i = 0; i < n && !*stopped; i++) {
        fleet_trace ft;
        rv_error e;
        if (i % CHUNK == 0) {
            pre_clear(&pre);
            pre_read(a, ids + i, n - i < CHUNK ? n - i : CHUNK, hashes, lookup, ns, &pre);
        }
        memset(&ft, 0, sizeof(ft));
        ft.id = ids[i];
        /* The trace's job and GPU model for every row, from its listing
         * (also on cache hits, which load no trace). */
        const json_t *listing = pre_listing(&pre, ft.id);
        const char *tjob = json_string_value(json_object_get(listing, "job"));
        const char *gpu =
            json_string_value(json_object_get(json_object_get(listing, "platform"), "gpu_model"));
        for (size_t s = 0; s < ns; s++) {
            rv_run_summary sum;
            json_t *row;
            int rc;
            if (progress_job > 0 && rv_api_draining(a)) {
                *stopped = ROWS_DRAINING;
                break;
            }
            if (progress_job > 0 && s > 0 && mono_s() - checked >= CHECK_EVERY_S) {
                checked = mono_s();
                rv_error_clear(&e);
                if (rv_db_job_progress(a->db, progress_job,
                                       p0 + (p1 - p0) * ((double)i + (double)s / (double)ns) /
                                                (double)n,
                                       &e) == RV_ERR_NOTFOUND) {
                    *stopped = ROWS_GONE;
                    break;
                }
            }
            const rv_db_cache_row *hit = NULL, *err_hit = NULL;
            if (lookup[s]) {
                hit = pre_row(&pre, ft.id, 3 * s);
                if (!hit)
                    hit = pre_row(&pre, ft.id, 3 * s + 2);
                err_hit = hit ? NULL : pre_row(&pre, ft.id, 3 * s + 1);
            }
            rv_error_clear(&e);
            if (hit) {
                sum = hit->sum;
                rc = 0;
            } else if (err_hit && err_hit->body && cached_error(err_hit->body, &e) == 0) {
                rc = e.code;
            } else {
                rc = fleet_one(a, &ft, json_array_get(scenarios, s), hashes[3 * s],
                               lookup[s] && pre.ok, &sum, &e);
            }
            if (hit || err_hit) {
                rv_metrics_add(a->metrics, RV_M_CACHE_HITS, 1);
                rv_metrics_add(a->metrics, RV_M_FLEET_ROWS_CACHED, 1);
            }
            rv_metrics_add(a->metrics, RV_M_FLEET_ROWS, 1);
            if (rc == 0) {
                row = rv_run_summary_render(&sum);
                if (row)
                    json_object_set_new(row, "trace_id", json_integer((json_int_t)ids[i]));
            } else {
                row = json_pack("{s:I,s:s}", "trace_id", (json_int_t)ids[i], "error",
                                e.message[0] ? e.message : rv_err_name(e.code));
            }
            if (row) {
                json_object_set_new(row, "job", json_string(tjob ? tjob : ""));
                json_object_set_new(row, "platform", json_string(gpu ? gpu : ""));
                /* A rank of a multi-GPU job: the aggregate groups its job. */
                json_int_t rank = json_integer_value(json_object_get(listing, "rank"));
                json_int_t world = json_integer_value(json_object_get(listing, "world_size"));
                if (tjob && *tjob && world > 1 && json_is_integer(json_object_get(listing, "rank")))
                    json_object_set_new(row, "rank", json_integer(rank));
            }
            json_array_append_new(json_array_get(per, s), row);
        }
        rv_api_loaded_free(&ft.l);
        rv_oh_table_free(ft.oh);
        if (progress_job > 0 && !*stopped && mono_s() - checked >= CHECK_EVERY_S) {
            checked = mono_s();
            rv_error_clear(&e);
            if (rv_db_job_progress(a->db, progress_job,
                                   p0 + (p1 - p0) * (double)(i + 1) / (double)n,
                                   &e) == RV_ERR_NOTFOUND)
                *stopped = ROWS_GONE;
        }
    }
    pre_clear(&pre);
    free(hashes);
    free(lookup);
    if (*stopped) {
        json_decref(per);
        return NULL;
    }
    return per;
}

/* Quantile with linear interpolation over sorted v[0..n). */
static double quantile(const double *v, size_t n, double q)
{
    if (n == 0)
        return 0;
    double pos = q * (double)(n - 1);
    size_t lo = (size_t)floor(pos), hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + (v[hi] - v[lo]) * (pos - (double)lo);
}

/* The ranks of one training job among the rows, as one entry: its step is
 * its slowest rank's (ranks meet at every collective), its energy every
 * rank's. The rows simulate each rank alone, so waits at collectives are
 * as traced; POST /v1/training-jobs/{id}/whatif runs the ranks as one
 * graph. New array (NULL on OOM). */
static json_t *fleet_training_jobs(const json_t *rows)
{
    json_t *byjob = json_object(), *out = json_array();
    size_t n = json_array_size(rows);
    for (size_t i = 0; byjob && out && i < n; i++) {
        const json_t *row = json_array_get(rows, i);
        const char *job = json_string_value(json_object_get(row, "job"));
        if (!json_object_get(row, "rank") || !job || !*job)
            continue;
        json_t *e = json_object_get(byjob, job);
        if (!e) {
            e = json_pack("{s:s,s:[],s:[],s:i,s:f,s:f,s:f,s:f}", "job", job, "trace_ids", "ranks",
                          "failed", 0, "baseline_us", 0.0, "predicted_us", 0.0, "energy_before_j",
                          0.0, "energy_after_j", 0.0);
            if (!e || json_object_set_new(byjob, job, e) != 0)
                break;
            json_array_append(out, e);
        }
        json_array_append(json_object_get(e, "trace_ids"), json_object_get(row, "trace_id"));
        json_array_append(json_object_get(e, "ranks"), json_object_get(row, "rank"));
        if (!json_object_get(row, "speedup")) {
            json_object_set_new(e, "failed",
                                json_integer(json_integer_value(json_object_get(e, "failed")) + 1));
            continue;
        }
        static const char *const keys[] = {"baseline_us", "predicted_us"};
        for (int k = 0; k < 2; k++) {
            double v = json_number_value(json_object_get(row, keys[k]));
            if (v > json_number_value(json_object_get(e, keys[k])))
                json_object_set_new(e, keys[k], json_real(v));
        }
        const json_t *en = json_object_get(row, "energy_j");
        json_object_set_new(e, "energy_before_j",
                            json_real(json_number_value(json_object_get(e, "energy_before_j")) +
                                      json_number_value(json_object_get(en, "baseline"))));
        json_object_set_new(e, "energy_after_j",
                            json_real(json_number_value(json_object_get(e, "energy_after_j")) +
                                      json_number_value(json_object_get(en, "predicted"))));
    }
    for (size_t i = 0; out && i < json_array_size(out); i++) {
        json_t *e = json_array_get(out, i);
        double b = json_number_value(json_object_get(e, "baseline_us"));
        double p = json_number_value(json_object_get(e, "predicted_us"));
        json_object_set_new(e, "speedup", p > 0 ? json_real(b / p) : json_null());
    }
    json_decref(byjob);
    return out;
}

/* Aggregates for one scenario's rows (borrowed). */
static json_t *fleet_aggregate(const json_t *rows)
{
    size_t n = json_array_size(rows), ok = 0;
    double *sp = calloc(n ? n : 1, sizeof(double));
    double before_us = 0, after_us = 0, e_before = 0, e_after = 0;
    size_t warned = 0;
    json_t *gainers = json_array();

    for (size_t i = 0; i < n && sp; i++) {
        const json_t *row = json_array_get(rows, i);
        const json_t *s = json_object_get(row, "speedup");
        if (!s)
            continue;
        double speed = json_number_value(s);
        sp[ok++] = speed;
        warned += json_integer_value(json_object_get(row, "warning_count")) > 0;
        before_us += json_number_value(json_object_get(row, "baseline_us"));
        after_us += json_number_value(json_object_get(row, "predicted_us"));
        const json_t *en = json_object_get(row, "energy_j");
        e_before += json_number_value(json_object_get(en, "baseline"));
        e_after += json_number_value(json_object_get(en, "predicted"));
        if (speed > 1.10)
            json_array_append_new(
                gainers, json_integer(json_integer_value(json_object_get(row, "trace_id"))));
    }
    double mean = 0;
    for (size_t i = 0; i < ok; i++)
        mean += sp[i] / (double)ok;
    if (sp)
        rv_sort_doubles(sp, ok);
    /* GPU time per iteration summed over traces; a trace stands for one
     * GPU-iteration of its job here (no job length is known). */
    json_t *agg = json_pack(
        "{s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:o,s:I}", "count", (json_int_t)ok, "failed",
        (json_int_t)(n - ok), "mean_speedup", mean, "median_speedup", quantile(sp, ok, 0.5),
        "p90_speedup", quantile(sp, ok, 0.9), "gpu_time_before_s", before_us / 1e6,
        "gpu_time_after_s", after_us / 1e6, "gpu_time_saved_s", (before_us - after_us) / 1e6,
        "energy_before_j", e_before, "energy_after_j", e_after, "gain_over_10pct", gainers,
        "gain_over_10pct_count", (json_int_t)json_array_size(gainers));
    /* How many answers rest on something the rows' warnings name. */
    if (agg) {
        json_object_set_new(agg, "with_warnings", json_integer((json_int_t)warned));
        json_object_set_new(agg, "energy_saved_j", json_real(e_before - e_after));
        json_t *tj = fleet_training_jobs(rows);
        if (tj && json_array_size(tj))
            json_object_set_new(agg, "training_jobs", tj);
        else
            json_decref(tj);
    }
    free(sp);
    return agg;
}

/* The final answer from per-scenario rows (borrowed). */
static json_t *fleet_result(const json_t *scenarios, const json_t *per, size_t ntraces,
                            json_t *workers)
{
    json_t *out = json_array();

    for (size_t s = 0; s < json_array_size(scenarios); s++) {
        const json_t *rows = json_array_get(per, s);
        json_array_append_new(out, json_pack("{s:I,s:O,s:o,s:O}", "index", (json_int_t)s,
                                             "scenario", json_array_get(scenarios, s), "aggregate",
                                             fleet_aggregate(rows), "rows", rows));
    }
    json_t *res = json_pack("{s:I,s:o}", "traces", (json_int_t)ntraces, "scenarios", out);
    if (res && workers)
        json_object_set(res, "workers", workers);
    rv_round_json(res); /* rounded once: the JSON, the CSV and the stored job agree */
    return res;
}

/* Appends s to the CSV buffer as one field, quoted when it holds a comma, a
 * quote or a line break (RFC 4180). */
static void csv_field(rv_buf *b, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        rv_buf_adds(b, s);
        return;
    }
    rv_buf_addc(b, '"');
    for (; *s; s++) {
        if (*s == '"')
            rv_buf_addc(b, '"');
        rv_buf_addc(b, *s);
    }
    rv_buf_addc(b, '"');
}

/* A number member of row as CSV text ("" when absent), full precision. */
static void csv_number(rv_buf *b, const json_t *v)
{
    if (json_is_integer(v))
        rv_buf_printf(b, "%lld", (long long)json_integer_value(v));
    else if (json_is_number(v))
        rv_buf_printf(b, "%.15g", json_number_value(v)); /* as RV_ROUND_DUMP_FLAGS */
}

/* The answer (borrowed) as CSV, one line per (scenario, trace) row. new
 * NUL-terminated text (free()) and *len, or NULL on OOM. */
static char *fleet_csv(const json_t *res, size_t *len)
{
    rv_buf b;
    const json_t *sc = json_object_get(res, "scenarios");
    static const char *const nums[] = {"measured_us", "baseline_us", "predicted_us", "speedup",
                                       "replay_error"};
    rv_buf_init(&b, FLEET_CSV_MAX);
    rv_buf_adds(&b, "scenario,trace_id,job,platform,measured_us,baseline_us,predicted_us,"
                    "speedup,replay_error,energy_baseline_j,energy_predicted_j,warning_count,"
                    "error\r\n");
    for (size_t s = 0; s < json_array_size(sc); s++) {
        const json_t *rows = json_object_get(json_array_get(sc, s), "rows");
        for (size_t i = 0; i < json_array_size(rows); i++) {
            const json_t *row = json_array_get(rows, i);
            const json_t *en = json_object_get(row, "energy_j");
            const char *job = json_string_value(json_object_get(row, "job"));
            const char *gpu = json_string_value(json_object_get(row, "platform"));
            const char *error = json_string_value(json_object_get(row, "error"));
            rv_buf_printf(&b, "%zu,", s);
            csv_number(&b, json_object_get(row, "trace_id"));
            rv_buf_addc(&b, ',');
            csv_field(&b, job ? job : "");
            rv_buf_addc(&b, ',');
            csv_field(&b, gpu ? gpu : "");
            for (size_t k = 0; k < sizeof(nums) / sizeof(nums[0]); k++) {
                rv_buf_addc(&b, ',');
                csv_number(&b, json_object_get(row, nums[k]));
            }
            rv_buf_addc(&b, ',');
            csv_number(&b, json_object_get(en, "baseline"));
            rv_buf_addc(&b, ',');
            csv_number(&b, json_object_get(en, "predicted"));
            rv_buf_addc(&b, ',');
            csv_number(&b, json_object_get(row, "warning_count"));
            rv_buf_addc(&b, ',');
            csv_field(&b, error ? error : "");
            rv_buf_adds(&b, "\r\n");
        }
    }
    return rv_buf_take(&b, len);
}

/* Sends a fleet answer (borrowed) as text/csv, one line per row. */
static void respond_csv(rv_req *r, const json_t *res)
{
    size_t len = 0;
    char *text = fleet_csv(res, &len);
    if (!text) {
        rv_req_error(r, 503, "unavailable", NULL, "out of memory");
        return;
    }
    rv_req_respond_buf(r, 200, "text/csv; charset=utf-8", text, len);
}

/* The token id of the request ("" without authentication), for the job's
 * owner. */
static void request_principal(rv_app *a, rv_req *r, char *out, size_t cap)
{
    out[0] = '\0';
    if (a->auth)
        rv_auth_check(a->auth, rv_req_header(r, "Authorization"),
                      RV_SCOPE_READ | RV_SCOPE_INGEST | RV_SCOPE_ADMIN, out, cap);
}

void rv_api_fleet_whatif(rv_req *r, void *app)
{
    rv_app *a = app;
    json_t *req = rv_req_json(r);
    int64_t *ids = NULL;
    size_t n = 0, dropped = 0;
    int stopped = 0;
    rv_error e;

    rv_error_clear(&e);
    if (!req)
        return;
    const char *format = rv_req_query(r, "format");
    int as_csv = format && strcmp(format, "csv") == 0;
    if (format && !as_csv && strcmp(format, "json") != 0) {
        rv_req_error(r, 400, "invalid_parameter", "format", "format must be json or csv");
        goto out;
    }
    if (fleet_validate(req, &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    /* Resolved once, here: a selection over the limit is refused now
     * rather than failing as a job, and a queued job keeps the ids it was
     * answered with ("resolved" in its request) instead of selecting
     * again. */
    const json_t *sc = json_object_get(req, "scenarios");
    int want_async = json_is_true(json_object_get(req, "async"));
    if (fleet_select(a, json_object_get(req, "select"), &ids, &n, &dropped, &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    if (!want_async && n * json_array_size(sc) <= a->cfg.fleet_inline_max) {
        json_t *per = fleet_rows(a, ids, n, sc, 0, 0, 0, &stopped);
        json_t *res = per ? fleet_result(sc, per, n, NULL) : NULL;
        json_decref(per);
        if (!res) {
            rv_req_error(r, 503, "unavailable", NULL, "out of memory");
            goto out;
        }
        json_object_set_new(res, "state", json_string("done"));
        if (json_object_get(json_object_get(req, "select"), "trace_ids"))
            json_object_set_new(res, "trace_ids_dropped", json_integer((json_int_t)dropped));
        if (as_csv) {
            respond_csv(r, res);
            json_decref(res);
            goto out;
        }
        rv_req_respond_json(r, 200, res);
        goto out;
    }
    int64_t job = 0;
    char owner[64];
    request_principal(a, r, owner, sizeof(owner));
    json_t *resolved = json_array();
    for (size_t i = 0; resolved && i < n; i++)
        if (json_array_append_new(resolved, json_integer((json_int_t)ids[i])) != 0) {
            json_decref(resolved);
            resolved = NULL;
        }
    if (!resolved ||
        json_object_set_new(req, "resolved",
                            json_pack("{s:o,s:I}", "trace_ids", resolved, "trace_ids_dropped",
                                      (json_int_t)dropped)) != 0) {
        rv_req_error(r, 503, "unavailable", NULL, "out of memory");
        goto out;
    }
    if (rv_db_job_enqueue_by(a->db, "fleet", req, owner, &job, &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    if (a->fleet_wake)
        a->fleet_wake(a->fleet_wake_ctx);
    char loc[64];
    snprintf(loc, sizeof(loc), "/v1/jobs/%lld", (long long)job);
    rv_req_add_header(r, "Location", loc);
    rv_req_respond_json(r, 202,
                        json_pack("{s:I,s:s,s:s}", "job_id", (json_int_t)job, "state", "queued",
                                  "status_url", loc));
out:
    free(ids);
    json_decref(req);
}

/* GET /v1/jobs/{id}: the job as JSON; with ?format=csv a finished fleet
 * job's answer as the same CSV an inline fleet answer gives, and 409 while
 * it has none yet. */
void rv_api_job_get(rv_req *r, void *app)
{
    rv_app *a = app;
    const char *format = rv_req_query(r, "format");
    if (!format || strcmp(format, "json") == 0) {
        rv_api_get_by_id(r, app, rv_db_job_get);
        return;
    }
    if (strcmp(format, "csv") != 0) {
        rv_req_error(r, 400, "invalid_parameter", "format", "format must be json or csv");
        return;
    }
    int64_t id;
    json_t *j;
    if (rv_api_fetch_by_id(r, a, rv_db_job_get, &id, &j) != 0)
        return;
    const char *state = json_string_value(json_object_get(j, "state"));
    const json_t *res = json_object_get(j, "result");
    if (!json_is_object(res) || !json_is_array(json_object_get(res, "scenarios")))
        rv_req_error(r, 409, "not_ready", "format",
                     "job %lld is %s and has no fleet answer to give as CSV yet", (long long)id,
                     state ? state : "unknown");
    else
        respond_csv(r, res);
    json_decref(j);
}

/* DELETE /v1/jobs/{id}: the token that queued the job, or an admin token,
 * cancels it with its shards (a shard's id cancels its whole job). Workers
 * stop at their next trace. Answers the job, now cancelled (or as it was
 * when it had ended already). */
void rv_api_job_cancel(rv_req *r, void *app)
{
    rv_app *a = app;
    int64_t id = rv_api_id_param(r, "id");
    char owner[64], who[64] = "";
    json_t *j = NULL;
    rv_error e;

    rv_error_clear(&e);
    if (id < 0)
        return;
    if (rv_db_job_owner(a->db, id, owner, sizeof(owner), &e) != 0) {
        rv_req_error_rv(r, &e);
        return;
    }
    int admin = !a->auth || rv_auth_check(a->auth, rv_req_header(r, "Authorization"),
                                          RV_SCOPE_ADMIN, who, sizeof(who)) == 0;
    if (!admin && (!owner[0] || strcmp(owner, who) != 0)) {
        rv_req_error(r, 403, "forbidden", NULL,
                     "only the token that queued job %lld, or an admin token, may cancel it",
                     (long long)id);
        return;
    }
    if (rv_db_job_cancel(a->db, id, &j, &e) != 0) {
        rv_req_error_rv(r, &e);
        return;
    }
    rv_req_respond_json(r, 200, j);
}

/* Merges the rows of a parent's shards into its answer and finishes it
 * (done, or failed when a shard failed). scenarios is borrowed. */
static void fleet_merge(rv_app *a, int64_t parent, const json_t *scenarios)
{
    rv_db_job_counts c;
    json_t *results = NULL, *per = json_array(), *workers = json_array(), *res = NULL;
    char first_err[256] = "", msg[400] = "out of memory";
    rv_error e;
    double t0 = mono_s();

    rv_error_clear(&e);
    if (rv_db_job_counts_get(a->db, parent, &c, &e) != 0)
        goto out_nofinish;
    if (strcmp(c.state, "running") != 0)
        goto out_nofinish;
    if (rv_db_job_shard_results(a->db, parent, &results, first_err, sizeof(first_err), &e) != 0) {
        snprintf(msg, sizeof(msg), "reading the shards' results: %s", e.message);
        goto out;
    }
    if (c.failed > 0) {
        snprintf(msg, sizeof(msg), "%zu of %zu shards failed: %s", c.failed, c.shards, first_err);
        goto out;
    }
    for (size_t s = 0; per && s < json_array_size(scenarios); s++)
        json_array_append_new(per, json_array());
    for (size_t i = 0; per && workers && i < json_array_size(results); i++) {
        const json_t *sr = json_array_get(results, i);
        const json_t *rows = json_object_get(sr, "rows");
        const char *w = json_string_value(json_object_get(sr, "worker"));
        for (size_t k = 0; k < json_array_size(rows); k++)
            json_array_extend(json_array_get(per, k), json_array_get(rows, k));
        int seen = 0;
        for (size_t k = 0; w && k < json_array_size(workers); k++)
            seen |= strcmp(json_string_value(json_array_get(workers, k)), w) == 0;
        if (w && !seen)
            json_array_append_new(workers, json_string(w));
    }
    size_t ntraces = json_array_size(json_array_get(per, 0));
    res = per && workers ? fleet_result(scenarios, per, ntraces, workers) : NULL;
    if (res) {
        json_object_set_new(res, "shards", json_integer((json_int_t)c.shards));
        json_t *dropped = json_object_get(c.info, "trace_ids_dropped");
        if (dropped)
            json_object_set(res, "trace_ids_dropped", dropped);
    }
out:
    rv_error_clear(&e);
    if (rv_db_job_finish(a->db, parent, res != NULL, res, res ? NULL : msg, &e) == 0 && res)
        rv_metrics_add(a->metrics, RV_M_FLEET_JOBS, 1);
out_nofinish:
    rv_metrics_add(a->metrics, RV_M_FLEET_MERGE_US, us_since(t0));
    json_decref(c.info);
    json_decref(res);
    json_decref(results);
    json_decref(per);
    json_decref(workers);
}

/* Runs one shard job: rows for its traces under its scenarios. Stopped by
 * draining, it goes back to the queue; cancelled, it is left as it is. The
 * worker that finishes a parent's last shard merges the parent. */
static void run_shard(rv_app *a, const char *worker, rv_db_job *j)
{
    const json_t *tid = json_object_get(j->request, "trace_ids");
    const json_t *sc = json_object_get(j->request, "scenarios");
    size_t n = json_array_size(tid);
    int64_t *ids = calloc(n ? n : 1, sizeof(*ids));
    int stopped = ROWS_ALL, last = 0;
    int64_t parent = 0;
    rv_error e;

    rv_error_clear(&e);
    for (size_t i = 0; ids && i < n; i++)
        ids[i] = (int64_t)json_integer_value(json_array_get(tid, i));
    json_t *per = ids ? fleet_rows(a, ids, n, sc, j->id, 0, 1, &stopped) : NULL;
    free(ids);
    if (stopped == ROWS_DRAINING) {
        rv_db_job_release(a->db, j->id, &e);
        return;
    }
    if (stopped == ROWS_GONE)
        return;
    json_t *res = per ? json_pack("{s:s,s:o}", "worker", worker, "rows", per) : NULL;
    rv_db_job_finish_shard(a->db, j->id, res != NULL, res, res ? NULL : "out of memory", &parent,
                           &last, &e);
    json_decref(res);
    if (last && parent > 0)
        fleet_merge(a, parent, sc);
}

/* A claimed parent: resolve and expand it (once: a parent claimed again
 * after a restart finds itself expanded and queues nothing), then leave it
 * running for its shards; merge at once when they are all finished
 * already (none selected, or the worker that was to merge died). */
static void run_parent(rv_app *a, rv_db_job *j)
{
    const json_t *sc = json_object_get(j->request, "scenarios");
    int64_t *ids = NULL;
    size_t n = 0, dropped = 0;
    json_t *reqs = NULL, *info = NULL;
    rv_db_job_counts c = {0};
    char msg[400] = "";
    rv_error e;

    rv_error_clear(&e);
    if (!j->expanded) {
        const json_t *resolved = json_object_get(j->request, "resolved");
        const json_t *rids = json_object_get(resolved, "trace_ids");
        if (json_is_array(rids)) {
            /* Selected when the request came (jobs queued by this version). */
            n = json_array_size(rids);
            ids = calloc(n ? n : 1, sizeof(*ids));
            if (!ids) {
                snprintf(msg, sizeof(msg), "out of memory");
                goto fail;
            }
            for (size_t i = 0; i < n; i++)
                ids[i] = (int64_t)json_integer_value(json_array_get(rids, i));
            dropped = (size_t)json_integer_value(json_object_get(resolved, "trace_ids_dropped"));
        } else if (fleet_select(a, json_object_get(j->request, "select"), &ids, &n, &dropped, &e) !=
                   0) {
            snprintf(msg, sizeof(msg), "selecting traces: %s", e.message);
            goto fail;
        }
        size_t shard = (size_t)json_integer_value(json_object_get(j->request, "shard_size"));
        if (shard == 0)
            shard = auto_shard(n);
        size_t nshards = (n + shard - 1) / shard;
        reqs = json_array();
        for (size_t s = 0; reqs && s < nshards; s++) {
            json_t *tid = json_array();
            for (size_t i = s * shard; tid && i < n && i < (s + 1) * shard; i++)
                json_array_append_new(tid, json_integer(ids[i]));
            if (!tid ||
                json_array_append_new(reqs, json_pack("{s:I,s:o,s:O}", "parent", (json_int_t)j->id,
                                                      "trace_ids", tid, "scenarios", sc)) != 0) {
                snprintf(msg, sizeof(msg), "out of memory");
                goto fail;
            }
        }
        info = json_object();
        if (info && json_object_get(json_object_get(j->request, "select"), "trace_ids"))
            json_object_set_new(info, "trace_ids_dropped", json_integer((json_int_t)dropped));
        if (!reqs || !info) {
            snprintf(msg, sizeof(msg), "out of memory");
            goto fail;
        }
        rv_error_clear(&e);
        int rc = rv_db_job_expand(a->db, j->id, "fleet_shard", reqs, info, NULL, &e);
        if (rc == RV_ERR_NOTFOUND)
            goto out; /* cancelled meanwhile */
        if (rc != 0) {
            snprintf(msg, sizeof(msg), "queueing shards: %s", e.message);
            goto fail;
        }
        /* The other fleet threads of this replica take shards now. */
        if (a->fleet_wake)
            a->fleet_wake(a->fleet_wake_ctx);
    }
    rv_error_clear(&e);
    if (rv_db_job_counts_get(a->db, j->id, &c, &e) == 0 && strcmp(c.state, "running") == 0 &&
        c.done + c.failed >= c.shards)
        fleet_merge(a, j->id, sc);
    goto out;
fail:
    rv_error_clear(&e);
    rv_db_job_finish(a->db, j->id, 0, NULL, msg, &e);
out:
    json_decref(c.info);
    json_decref(reqs);
    json_decref(info);
    free(ids);
}

int rv_api_fleet_run_one(rv_app *a)
{
    rv_db_job j = {0};
    rv_error e;
    const char *worker = worker_prefix;

    if (rv_api_draining(a))
        return 0;
    rv_error_clear(&e);
    rv_db_job_requeue_stale(a->db, STALE_JOB_S, NULL, &e);
    /* Parents first: expanding one is a few statements, and its shards
     * then take their turn beside every other job's (lowest index first). */
    rv_error_clear(&e);
    if (rv_db_job_claim(a->db, worker, "fleet", &j, &e) == 0) {
        run_parent(a, &j);
        rv_db_job_clear(&j);
        return 1;
    }
    rv_error_clear(&e);
    if (rv_db_job_claim(a->db, worker, "fleet_shard", &j, &e) == 0) {
        run_shard(a, worker, &j);
        rv_db_job_clear(&j);
        return 1;
    }
    return 0;
}
