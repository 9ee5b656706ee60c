/* Trace store tests (store/) against a real PostgreSQL started by
 * tests/store/pg_helper.c. Needs the public traces ($RV_SHARED_TRACES); skips
 * (77) without them or without PostgreSQL binaries. */
#include <CUnit/Basic.h>
#include <libpq-fe.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pg_helper.h"
#include "rv_db.h"
#include "reader/rv_kineto.h"
#include "graph/rv_overhead.h"
#include "util/rv_sha256.h"
#include "common/rv_test_util.h"

static rv_testpg g_pg;
static rv_db *g_db;
static const char *g_shared;
static char g_migrations[4096];

/* ------------------------------------------------------------------ helpers */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void shared_path(char *out, size_t cap, const char *rel)
{
    snprintf(out, cap, "%s/%s", g_shared, rel);
}

/* One scalar from a fresh connection (not the pool): what another client
 * sees. */
static long long scalar(const char *sql)
{
    PGconn *c = PQconnectdb(g_pg.conninfo);
    long long v = -1;
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0))
        v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    else if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fprintf(stderr, "scalar(%s): %s", sql, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
    return v;
}

static long long total_rows(void)
{
    return scalar("SELECT (SELECT count(*) FROM traces) + (SELECT count(*) FROM trace_originals) "
                  "+ (SELECT count(*) FROM trace_snapshots) + (SELECT count(*) FROM "
                  "trace_overhead_sketches)");
}

static long long count_sha(const char *sha)
{
    char sql[200];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM traces WHERE content_sha256 = '%s'", sha);
    return scalar(sql);
}

/* ------------------------------------------------------------- migrations */

typedef struct mig_arg {
    int rc;
    char msg[256];
} mig_arg;

static void *mig_thread(void *p)
{
    mig_arg *a = p;
    rv_db *db = NULL;
    rv_error e;
    rv_error_clear(&e);
    a->rc = rv_db_open(g_pg.conninfo, 1, &db, &e);
    if (!a->rc)
        a->rc = rv_db_migrate(db, g_migrations, &e);
    snprintf(a->msg, sizeof(a->msg), "%s", e.message);
    rv_db_close(db);
    return NULL;
}

/* The newest migration in migrations/ and how many there are, and the
 * what-if cache's columns. */
#define LATEST      9
#define NMIGRATIONS 8
#define CACHE_COLUMNS                                                                              \
    "SELECT count(*) FROM information_schema.columns WHERE table_name = 'whatif_cache'"

static void test_migrations(void)
{
    rv_error e;
    int64_t v;
    int dirty;
    CU_ASSERT_EQUAL(rv_db_schema_version(g_db, &v, &dirty, &e), 0);
    CU_ASSERT_EQUAL(v, -1);
    CU_ASSERT_EQUAL_FATAL(rv_db_migrate(g_db, g_migrations, &e), 0);
    CU_ASSERT_EQUAL(rv_db_schema_version(g_db, &v, &dirty, &e), 0);
    CU_ASSERT_EQUAL(v, LATEST);
    CU_ASSERT_EQUAL(dirty, 0);
    long long tables = scalar("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'");
    CU_ASSERT_EQUAL(tables, 14); /* 13 + schema_migrations */
    /* Re-running is a no-op. */
    CU_ASSERT_EQUAL(rv_db_migrate(g_db, g_migrations, &e), 0);
    CU_ASSERT_EQUAL(scalar("SELECT count(*) FROM schema_migrations"), 1);
    CU_ASSERT_EQUAL(scalar("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"), tables);
    /* Down to 0001: 0002 gives the what-if cache its 0001 shape back. */
    CU_ASSERT_EQUAL_FATAL(rv_db_migrate_down(g_db, g_migrations, NMIGRATIONS - 1, &e), 0);
    CU_ASSERT_EQUAL(rv_db_schema_version(g_db, &v, &dirty, &e), 0);
    CU_ASSERT_EQUAL(v, 1);
    CU_ASSERT_EQUAL(scalar(CACHE_COLUMNS), 4);
    CU_ASSERT_EQUAL(scalar(CACHE_COLUMNS " AND column_name = 'result' AND data_type = 'jsonb'"), 1);
    /* Up to the latest again: body text plus the typed summary columns. */
    CU_ASSERT_EQUAL_FATAL(rv_db_migrate(g_db, g_migrations, &e), 0);
    CU_ASSERT_EQUAL(scalar(CACHE_COLUMNS), 13);
    CU_ASSERT_EQUAL(scalar(CACHE_COLUMNS " AND column_name = 'body' AND data_type = 'text'"), 1);
    CU_ASSERT_EQUAL(scalar(CACHE_COLUMNS " AND is_nullable = 'NO'"), 13);
    /* Down removes everything it made. */
    CU_ASSERT_EQUAL_FATAL(rv_db_migrate_down(g_db, g_migrations, 0, &e), 0);
    CU_ASSERT_EQUAL(rv_db_schema_version(g_db, &v, &dirty, &e), 0);
    CU_ASSERT_EQUAL(v, -1);
    CU_ASSERT_EQUAL(scalar("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"), 1);
    /* Up again, from 4 racing runners: the advisory lock serializes them. */
    pthread_t th[4];
    mig_arg args[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, mig_thread, &args[i]);
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        if (args[i].rc)
            fprintf(stderr, "runner %d: %s\n", i, args[i].msg);
        CU_ASSERT_EQUAL(args[i].rc, 0);
    }
    CU_ASSERT_EQUAL(rv_db_schema_version(g_db, &v, &dirty, &e), 0);
    CU_ASSERT_EQUAL(v, LATEST);
    CU_ASSERT_EQUAL(scalar("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"), tables);
    /* A broken migration directory is refused with a clear message. */
    CU_ASSERT_NOT_EQUAL(rv_db_migrate(g_db, "/nonexistent-dir", &e), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "/nonexistent-dir"));
}

/* ------------------------------------------------------------------ ingest */

static void test_ingest_and_duplicate(void)
{
    char p[4096];
    rv_error e;
    rv_db_ingest_result r1, r2;
    shared_path(p, sizeof(p), "hta/cuda-event-sync.json.gz");
    rv_error_clear(&e);
    int rc = rv_db_ingest_file(g_db, p, NULL, &r1, &e);
    if (rc)
        fprintf(stderr, "ingest: %s\n", e.message);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT(r1.trace_id > 0);
    CU_ASSERT_EQUAL(r1.duplicate, 0);
    /* Same bytes again: the same id, nothing new stored. */
    long long before = total_rows();
    CU_ASSERT_EQUAL(rv_db_ingest_file(g_db, p, NULL, &r2, &e), 0);
    CU_ASSERT_EQUAL(r2.duplicate, 1);
    CU_ASSERT_EQUAL(r2.trace_id, r1.trace_id);
    CU_ASSERT_EQUAL(total_rows(), before);
    CU_ASSERT_EQUAL(count_sha(r1.sha256), 1);

    /* The stored original is the upload, byte for byte. */
    size_t len, got_len, recv;
    uint8_t *orig = rv_test_read_file(p, &len), *got = NULL;
    int wrapped = -1;
    CU_ASSERT_EQUAL_FATAL(
        rv_db_original_get(g_db, r1.trace_id, &got, &got_len, &wrapped, &recv, &e), 0);
    CU_ASSERT_EQUAL(wrapped, 0); /* it arrived gzip'ed: kept as is */
    CU_ASSERT_EQUAL(recv, len);
    CU_ASSERT(got_len == len && memcmp(got, orig, len) == 0);
    free(got);
    free(orig);

    /* A plain JSON upload is stored gzip-wrapped and its sha is the plain one. */
    char plain[4096];
    const char *src = getenv("RV_SOURCE_DIR");
    snprintf(plain, sizeof(plain), "%s/tests/data/kineto/bare-array.json", src ? src : ".");
    rv_db_ingest_result r3;
    rc = rv_db_ingest_file(g_db, plain, NULL, &r3, &e);
    if (rc)
        fprintf(stderr, "ingest plain: %s\n", e.message);
    CU_ASSERT_EQUAL(rc, 0);
    if (!rc) {
        orig = rv_test_read_file(plain, &len);
        char sha[65];
        rv_sha256_hex(orig, len, sha);
        CU_ASSERT_STRING_EQUAL(sha, r3.sha256);
        CU_ASSERT_EQUAL(rv_db_original_get(g_db, r3.trace_id, &got, &got_len, &wrapped, &recv, &e),
                        0);
        CU_ASSERT_EQUAL(wrapped, 1);
        CU_ASSERT_EQUAL(recv, len);
        CU_ASSERT(got_len >= 2 && got[0] == 0x1f && got[1] == 0x8b);
        free(got);
        free(orig);
    }

    /* get / list */
    json_t *j = NULL;
    CU_ASSERT_EQUAL_FATAL(rv_db_trace_get(g_db, r1.trace_id, &j, &e), 0);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "id")), r1.trace_id);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "content_sha256")), r1.sha256);
    CU_ASSERT(json_integer_value(json_object_get(j, "tasks")) > 0);
    CU_ASSERT_PTR_NOT_NULL(json_object_get(json_object_get(j, "summary"), "by_category"));
    json_decref(j);
    CU_ASSERT_EQUAL(rv_db_trace_get(g_db, 999999, &j, &e), RV_ERR_NOTFOUND);
    CU_ASSERT_EQUAL(rv_db_trace_list(g_db, NULL, &j, &e), 0);
    CU_ASSERT(json_array_size(j) >= 2);
    json_decref(j);
}

/* Bad uploads are rejected with a reason and store nothing. */
static void test_bad_inputs(void)
{
    rv_error e;
    rv_db_ingest_result r;
    long long before = total_rows();
    const char *src = getenv("RV_SOURCE_DIR");
    char p[4096];
    static const char *files[] = {"err-not-json.txt", "err-empty-events.json",
                                  "err-no-kept-events.json", "err-no-trace-events.json"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(p, sizeof(p), "%s/tests/data/kineto/%s", src ? src : ".", files[i]);
        rv_error_clear(&e);
        int rc = rv_db_ingest_file(g_db, p, NULL, &r, &e);
        CU_ASSERT(rc < 0);
        CU_ASSERT(e.message[0] != '\0');
        printf("\n  %s -> %s: %s", files[i], rv_err_name(rc), e.message);
    }
    /* Truncated gzip: a real trace cut in half. */
    size_t len;
    shared_path(p, sizeof(p), "hta/critical-path-alexnet.json.gz");
    uint8_t *b = rv_test_read_file(p, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    rv_error_clear(&e);
    int rc = rv_db_ingest_buffer(g_db, b, len / 2, NULL, &r, &e);
    CU_ASSERT(rc < 0);
    printf("\n  truncated gzip -> %s: %s", rv_err_name(rc), e.message);
    /* Over the size cap. */
    rv_db_ingest_meta m = {.rank = RV_NONE, .world_size = RV_NONE, .max_bytes = len - 1};
    rc = rv_db_ingest_buffer(g_db, b, len, &m, &r, &e);
    CU_ASSERT_EQUAL(rc, RV_ERR_LIMIT);
    printf("\n  over the cap -> %s: %s", rv_err_name(rc), e.message);
    /* Empty. */
    CU_ASSERT_EQUAL(rv_db_ingest_buffer(g_db, b, 0, NULL, &r, &e), RV_ERR_INVALID);
    /* A parsed trace without events. */
    rv_trace *t = rv_trace_new();
    CU_ASSERT_EQUAL(rv_db_ingest(g_db, t, b, len, NULL, &r, &e), RV_ERR_INVALID);
    rv_trace_free(t);
    free(b);
    printf("\n");
    CU_ASSERT_EQUAL(total_rows(), before);
}

/* 8 traces from 8 threads, each with its own connection. */
static const char *eight[] = {
    "hta/critical-path-alexnet.json.gz",
    "hta/critical-path-simple-add.json.gz",
    "hta/cuda-event-sync-multi-stream.json.gz",
    "hta/a100-2rank-nccl.json.gz",
    "hta/v100-1rank-ns-resolution.json.gz",
    "kineto/resnet50-v100-workers0.pt.trace.json.gz",
    "kineto/resnet50-v100-workers4.pt.trace.json.gz",
    "kineto/h100-sync-after-fix.json",
};

typedef struct ing_arg {
    const char *rel;
    int rc;
    rv_db_ingest_result res;
    char msg[256];
} ing_arg;

static void *ingest_thread(void *p)
{
    ing_arg *a = p;
    rv_db *db = NULL;
    rv_error e;
    char path[4096];
    rv_error_clear(&e);
    shared_path(path, sizeof(path), a->rel);
    a->rc = rv_db_open(g_pg.conninfo, 1, &db, &e);
    if (!a->rc)
        a->rc = rv_db_ingest_file(db, path, NULL, &a->res, &e);
    snprintf(a->msg, sizeof(a->msg), "%s", e.message);
    rv_db_close(db);
    return NULL;
}

static void test_concurrent_ingest(void)
{
    pthread_t th[8];
    ing_arg args[8];
    double t0 = now_ms();
    for (int i = 0; i < 8; i++) {
        memset(&args[i], 0, sizeof(args[i]));
        args[i].rel = eight[i];
        pthread_create(&th[i], NULL, ingest_thread, &args[i]);
    }
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    double t1 = now_ms();
    printf("\n  8 concurrent ingests: %.0f ms\n", t1 - t0);
    rv_error e;
    for (int i = 0; i < 8; i++) {
        if (args[i].rc)
            fprintf(stderr, "%s: %s\n", eight[i], args[i].msg);
        CU_ASSERT_EQUAL(args[i].rc, 0);
        if (args[i].rc)
            continue;
        CU_ASSERT_EQUAL(count_sha(args[i].res.sha256), 1);
        /* Each trace: its sketches hold the engine's samples. */
        char p[4096], sql[200];
        rv_trace *t = NULL;
        shared_path(p, sizeof(p), eight[i]);
        CU_ASSERT_EQUAL_FATAL(rv_kineto_read_file(p, NULL, &t, &e), 0);
        rv_overhead_samples s;
        CU_ASSERT_EQUAL_FATAL(rv_overhead_extract(t, &s, &e), 0);
        snprintf(sql, sizeof(sql),
                 "SELECT coalesce(sum(n), 0) FROM trace_overhead_sketches WHERE trace_id = %lld "
                 "AND op_name = '*'",
                 (long long)args[i].res.trace_id);
        CU_ASSERT_EQUAL(scalar(sql), (long long)s.n);
        snprintf(sql, sizeof(sql), "SELECT tasks FROM traces WHERE id = %lld",
                 (long long)args[i].res.trace_id);
        CU_ASSERT_EQUAL(scalar(sql), (long long)t->nevents);
        /* The snapshot loads back to the same trace. */
        rv_trace *u = NULL;
        CU_ASSERT_EQUAL(rv_db_snapshot_load(g_db, args[i].res.trace_id, &u, &e), 0);
        CU_ASSERT(u && u->nevents == t->nevents && u->strings.count == t->strings.count);
        if (u && u->nevents == t->nevents)
            CU_ASSERT(
                memcmp(&u->events[t->nevents / 2].ts_ns, &t->events[t->nevents / 2].ts_ns, 8) == 0);
        rv_trace_free(u);
        rv_overhead_samples_free(&s);
        rv_trace_free(t);
    }
    /* Sketches merged incrementally by 8 concurrent ingests of one platform
     * equal a rebuild from the traces' own sketches: histograms and counts
     * exactly, sums to rounding (summation order). */
    PGconn *c = PQconnectdb(g_pg.conninfo);
    PQclear(PQexec(c, "DROP TABLE IF EXISTS rv_before"));
    PQclear(PQexec(c, "CREATE TABLE rv_before AS SELECT * FROM platform_overhead_sketches"));
    size_t groups = 0;
    CU_ASSERT_EQUAL(rv_db_overheads_rebuild(g_db, 0, &groups, &e), 0);
    CU_ASSERT(groups > 0);
    CU_ASSERT_EQUAL(scalar("SELECT count(*) FROM platform_overhead_sketches"),
                    scalar("SELECT count(*) FROM rv_before"));
    long long differ = scalar(
        "SELECT count(*) FROM platform_overhead_sketches a JOIN rv_before b USING (platform_id, "
        "type, op_name) WHERE a.n <> b.n OR a.zeros <> b.zeros OR a.keys <> b.keys OR a.counts "
        "<> b.counts OR a.min <> b.min OR a.max <> b.max OR abs(a.sum - b.sum) > 1e-9 * "
        "greatest(1, abs(b.sum))");
    CU_ASSERT_EQUAL(differ, 0);
    PQclear(PQexec(c, "DROP TABLE rv_before"));
    PQfinish(c);
}

/* ---------------------------------------------------------- crash mid-ingest */

static int g_hook_stage, g_hook_fd;

static void crash_hook(int stage, void *ctx)
{
    (void)ctx;
    if (stage != g_hook_stage)
        return;
    char c = (char)stage;
    if (write(g_hook_fd, &c, 1) != 1)
        _exit(3);
    for (;;)
        pause(); /* the parent kills us here, before COMMIT */
}

static void test_crash_mid_ingest(void)
{
    char p[4096];
    shared_path(p, sizeof(p), "hta/critical-path-alexnet.json.gz");
    size_t len;
    uint8_t *b = rv_test_read_file(p, &len);
    char sha[65];
    rv_sha256_hex(b, len, sha);
    free(b);
    /* The alexnet trace was stored by the concurrent test: delete it. */
    long long existing = scalar("SELECT coalesce(max(id), 0) FROM traces WHERE content_sha256 "
                                "IN (SELECT content_sha256 FROM traces)");
    (void)existing;
    char sql[200];
    snprintf(sql, sizeof(sql),
             "SELECT coalesce(max(id), 0) FROM traces WHERE content_sha256 = '%s'", sha);
    long long id = scalar(sql);
    rv_error e;
    if (id > 0)
        CU_ASSERT_EQUAL_FATAL(rv_db_trace_delete(g_db, id, &e), 0);
    long long rows_before = total_rows();

    for (int stage = 1; stage <= 3; stage++) {
        int fds[2];
        CU_ASSERT_EQUAL_FATAL(pipe(fds), 0);
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            rv_db *db = NULL;
            rv_db_ingest_result r;
            rv_error ce;
            if (rv_db_open(g_pg.conninfo, 1, &db, &ce) != 0)
                _exit(2);
            g_hook_stage = stage;
            g_hook_fd = fds[1];
            rv_db_set_ingest_hook(db, crash_hook, NULL);
            rv_db_ingest_file(db, p, NULL, &r, &ce);
            _exit(4); /* not reached: the hook never returns */
        }
        close(fds[1]);
        char c = 0;
        CU_ASSERT_EQUAL(read(fds[0], &c, 1), 1);
        CU_ASSERT_EQUAL(c, stage);
        /* Mid-transaction: another client sees nothing of it. */
        CU_ASSERT_EQUAL(count_sha(sha), 0);
        kill(pid, SIGKILL);
        int st;
        waitpid(pid, &st, 0);
        CU_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        close(fds[0]);
        /* The server notices the dead client and rolls back; wait for its
         * backend to go. */
        for (int i = 0; i < 100 && scalar("SELECT count(*) FROM pg_stat_activity WHERE state "
                                          "LIKE 'idle in transaction%'") > 0;
             i++)
            usleep(50000);
        CU_ASSERT_EQUAL(count_sha(sha), 0);
        CU_ASSERT_EQUAL(total_rows(), rows_before);
    }
    /* And the upload still goes through afterwards, as a new trace. */
    rv_db_ingest_result r;
    CU_ASSERT_EQUAL(rv_db_ingest_file(g_db, p, NULL, &r, &e), 0);
    CU_ASSERT_EQUAL(r.duplicate, 0);
    CU_ASSERT_EQUAL(count_sha(sha), 1);
}

/* ------------------------------------------------- overhead statistics */

static int close_rel(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b));
}

static void test_overhead_stats(void)
{
    char p[4096];
    rv_error e;
    shared_path(p, sizeof(p), "hta/critical-path-simple-add.json.gz");
    size_t len;
    uint8_t *b = rv_test_read_file(p, &len);
    rv_trace *t = NULL;
    CU_ASSERT_EQUAL_FATAL(rv_kineto_read_buffer(b, len, NULL, &t, &e), 0);
    /* A platform of its own, so the DB statistics are this trace's alone.
     * Different bytes (a trailing newline inside a new gzip member would
     * change the content) are not needed: the platform override changes
     * nothing in the content hash, so delete the earlier copy first. */
    char sql[256];
    char sha[65];
    rv_sha256_hex(b, len, sha);
    snprintf(sql, sizeof(sql),
             "SELECT coalesce(max(id), 0) FROM traces WHERE content_sha256 = '%s'", sha);
    long long old = scalar(sql);
    if (old > 0)
        CU_ASSERT_EQUAL_FATAL(rv_db_trace_delete(g_db, old, &e), 0);
    rv_db_ingest_meta m = {.rank = RV_NONE, .world_size = RV_NONE, .job = "simple-add"};
    m.platform.gpu_model = "test-gpu-simple-add";
    rv_db_ingest_result r;
    CU_ASSERT_EQUAL_FATAL(rv_db_ingest(g_db, t, b, len, &m, &r, &e), 0);
    CU_ASSERT_EQUAL(r.duplicate, 0);

    /* The database reads each group's statistics from the stored sketch:
     * the same figures as the engine's sketch of the trace. */
    rv_overhead_samples s;
    rv_overhead_sketch_group *g = NULL;
    size_t ng = 0;
    CU_ASSERT_EQUAL_FATAL(rv_overhead_extract(t, &s, &e), 0);
    CU_ASSERT_EQUAL_FATAL(rv_overhead_sketch(&s, &g, &ng, &e), 0);
    CU_ASSERT_EQUAL(r.samples, s.n);

    rv_db_overhead_row *rows = NULL;
    size_t nrows = 0;
    CU_ASSERT_EQUAL_FATAL(rv_db_overheads_load(g_db, r.platform_id, &rows, &nrows, &e), 0);
    CU_ASSERT_EQUAL(nrows, ng);
    size_t matched = 0;
    for (size_t i = 0; i < ng; i++) {
        const char *name = g[i].name == RV_OH_OVERALL ? "*" : rv_trace_str(t, g[i].name);
        const rv_db_overhead_row *row = NULL;
        for (size_t k = 0; k < nrows && !row; k++)
            if (rows[k].type == g[i].type && strcmp(rows[k].op_name, name) == 0)
                row = &rows[k];
        CU_ASSERT_PTR_NOT_NULL(row);
        if (!row)
            continue;
        rv_overhead_stat want;
        rv_overhead_stat_of_sketch(&g[i].sk, &want);
        int ok = row->stat.samples == want.samples && row->stat.count == want.count &&
                 close_rel(row->stat.mean, want.mean) && close_rel(row->stat.std, want.std) &&
                 close_rel(row->stat.median, want.median) && close_rel(row->stat.p90, want.p90);
        if (!ok)
            fprintf(stderr,
                    "T%d %s: db %zu/%zu %.17g %.17g %.17g %.17g engine %zu/%zu %.17g "
                    "%.17g %.17g %.17g\n",
                    row->type, name, row->stat.samples, row->stat.count, row->stat.mean,
                    row->stat.std, row->stat.median, row->stat.p90, want.samples, want.count,
                    want.mean, want.std, want.median, want.p90);
        CU_ASSERT(ok);
        matched += ok;
    }
    printf("\n  %zu statistic groups equal between the database and the engine\n", matched);
    rv_db_overhead_rows_free(rows, nrows);

    /* JSON form and rebuild. */
    json_t *j = NULL;
    CU_ASSERT_EQUAL(rv_db_overheads_get(g_db, r.platform_id, &j, &e), 0);
    CU_ASSERT_EQUAL(json_array_size(j), ng);
    json_decref(j);
    size_t groups = 0;
    CU_ASSERT_EQUAL(rv_db_overheads_rebuild(g_db, r.platform_id, &groups, &e), 0);
    CU_ASSERT_EQUAL(groups, ng);
    /* Deleting the only trace of the platform removes its statistics. */
    CU_ASSERT_EQUAL(rv_db_trace_delete(g_db, r.trace_id, &e), 0);
    CU_ASSERT_EQUAL(rv_db_overheads_load(g_db, r.platform_id, &rows, &nrows, &e), 0);
    CU_ASSERT_EQUAL(nrows, 0);
    rv_db_overhead_rows_free(rows, nrows);
    CU_ASSERT_EQUAL(rv_db_trace_delete(g_db, r.trace_id, &e), RV_ERR_NOTFOUND);

    rv_overhead_sketch_groups_free(g, ng);
    rv_overhead_samples_free(&s);
    rv_trace_free(t);
    free(b);
}

/* ------------------------------------------------------- snapshot load time */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void test_snapshot_load_time(void)
{
    char p[4096];
    rv_error e;
    shared_path(p, sizeof(p), "kineto/resnet50-v100-workers0.pt.trace.json.gz");
    rv_trace *t = NULL;
    CU_ASSERT_EQUAL_FATAL(rv_kineto_read_file(p, NULL, &t, &e), 0);
    /* Grow it past 100k tasks: append shifted copies of the events. */
    size_t n0 = t->nevents;
    int64_t span = 0;
    for (size_t i = 0; i < n0; i++)
        if (t->events[i].ts_ns + t->events[i].dur_ns - t->events[0].ts_ns > span)
            span = t->events[i].ts_ns + t->events[i].dur_ns - t->events[0].ts_ns;
    for (int k = 1; t->nevents < 100000; k++)
        for (size_t i = 0; i < n0 && t->nevents < 100000; i++) {
            rv_event ev = t->events[i];
            ev.ts_ns += k * (span + 1000);
            rv_trace_push(t, &ev);
        }
    /* Made-up original bytes, unique to this test. */
    char orig[64];
    int olen = snprintf(orig, sizeof(orig), "{\"synthetic\": %zu}", t->nevents);
    rv_db_ingest_result r;
    double t0 = now_ms();
    CU_ASSERT_EQUAL_FATAL(rv_db_ingest(g_db, t, orig, (size_t)olen, NULL, &r, &e), 0);
    double t1 = now_ms();
    double ms[21];
    rv_trace *u = NULL;
    for (int i = 0; i < 21; i++) {
        double a = now_ms();
        CU_ASSERT_EQUAL_FATAL(rv_db_snapshot_load(g_db, r.trace_id, &u, &e), 0);
        ms[i] = now_ms() - a;
        if (i < 20)
            rv_trace_free(u);
    }
    CU_ASSERT_EQUAL(u->nevents, t->nevents);
    CU_ASSERT_EQUAL(u->events[t->nevents - 1].ts_ns, t->events[t->nevents - 1].ts_ns);
    rv_trace_free(u);
    qsort(ms, 21, sizeof(ms[0]), cmp_double);
    long long bytes = scalar("SELECT max(length(bytes)) FROM trace_snapshots");
    printf("\n  %zu-task trace: ingest %.1f ms; snapshot %lld bytes; load min %.2f ms, median "
           "%.2f ms, max %.2f ms (21 loads)\n",
           t->nevents, t1 - t0, bytes, ms[0], ms[10], ms[20]);
    /* Printed, not asserted: speed is measured by the benchmarks
     * (bench/run_sim.sh), not by a timed unit test on a shared machine. */
    rv_trace_free(t);
}

/* -------------------------------------------- cache, tokens, jobs */

/* A summary with every kind of value a double column must keep. */
static const rv_run_summary g_sum = {.measured_us = 1234.5,
                                     .baseline_us = 1200.25,
                                     .predicted_us = 987.0625,
                                     .speedup = 1.2158762 / 3.0,
                                     .replay_error = -0.0277,
                                     .have_energy = 1,
                                     .baseline_energy_j = 1e-300,
                                     .energy_j = 6.02214076e23,
                                     .warnings = 3};

static int same_summary(const rv_run_summary *a, const rv_run_summary *b)
{
    return a->measured_us == b->measured_us && a->baseline_us == b->baseline_us &&
           a->predicted_us == b->predicted_us && a->speedup == b->speedup &&
           a->replay_error == b->replay_error && a->have_energy == b->have_energy &&
           a->baseline_energy_j == b->baseline_energy_j && a->energy_j == b->energy_j &&
           a->warnings == b->warnings;
}

static void test_cache(void)
{
    rv_error e;
    long long tid = scalar("SELECT min(id) FROM traces");
    CU_ASSERT_FATAL(tid > 0);
    char hash[65];
    rv_sha256_hex("{\"amp\":true}", 12, hash);
    /* Keys out of order, odd spacing and number forms: jsonb would change
     * all of them, the cache must not. */
    const char *body = "{\"trace_id\":1,\"b\":1.50,\"a\":[1e3, 2],\"\\u00e9t\u00e9\":\"x\"}";
    size_t blen = strlen(body);
    char *got = NULL;
    size_t glen = 99;
    rv_run_summary sum;
    memset(&sum, 0x55, sizeof(sum));
    CU_ASSERT_EQUAL(rv_db_whatif_cache_get(g_db, tid, hash, &got, &glen, &sum, &e), 0);
    CU_ASSERT_PTR_NULL(got);
    CU_ASSERT_EQUAL(glen, 0);
    CU_ASSERT_EQUAL(rv_db_whatif_cache_put(g_db, tid, hash, body, blen, &g_sum, &e), 0);
    CU_ASSERT_EQUAL(rv_db_whatif_cache_get(g_db, tid, hash, &got, &glen, &sum, &e), 0);
    CU_ASSERT_EQUAL(glen, blen);
    CU_ASSERT(got && memcmp(got, body, blen) == 0 && got[glen] == '\0');
    CU_ASSERT(same_summary(&sum, &g_sum));
    free(got);
    /* Replace: new bytes (only a prefix of a longer buffer: len counts, not
     * a NUL), new figures (NaN and infinity survive); sum NULL is fine. */
    rv_run_summary s2 = g_sum;
    s2.speedup = NAN;
    s2.replay_error = -INFINITY;
    s2.have_energy = 0;
    s2.warnings = 0;
    CU_ASSERT_EQUAL(rv_db_whatif_cache_put(g_db, tid, hash, "{\"v\":2}TRAILING", 7, &s2, &e), 0);
    CU_ASSERT_EQUAL(rv_db_whatif_cache_get(g_db, tid, hash, &got, &glen, NULL, &e), 0);
    CU_ASSERT(got && glen == 7 && strcmp(got, "{\"v\":2}") == 0);
    free(got);
    CU_ASSERT_EQUAL(rv_db_whatif_cache_get(g_db, tid, hash, &got, &glen, &sum, &e), 0);
    CU_ASSERT(isnan(sum.speedup) && isinf(sum.replay_error) && sum.replay_error < 0);
    CU_ASSERT(sum.have_energy == 0 && sum.warnings == 0 && sum.energy_j == g_sum.energy_j);
    free(got);
    CU_ASSERT_EQUAL(scalar("SELECT count(*) FROM whatif_cache"), 1);
    /* The typed columns are queryable as such. */
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM whatif_cache WHERE trace_id = %lld AND measured_us = 1234.5 "
             "AND NOT have_energy",
             tid);
    CU_ASSERT_EQUAL(scalar(sql), 1);
    /* A missing trace, a NUL inside the body. */
    CU_ASSERT_EQUAL(rv_db_whatif_cache_put(g_db, 987654321, hash, body, blen, &g_sum, &e),
                    RV_ERR_NOTFOUND);
    CU_ASSERT_EQUAL(rv_db_whatif_cache_put(g_db, 987654321, hash, body, blen, &g_sum, NULL),
                    RV_ERR_NOTFOUND);
    CU_ASSERT_EQUAL(rv_db_whatif_cache_put(g_db, tid, hash, "{}\0{}", 5, &g_sum, &e),
                    RV_ERR_INVALID);
    /* No row outlives its trace (ON DELETE CASCADE). */
    CU_ASSERT_EQUAL(scalar("SELECT count(*) FROM whatif_cache WHERE trace_id NOT IN (SELECT id "
                           "FROM traces)"),
                    0);
}

/* last_used_at of the token with this hash: 1 set, 0 NULL, -1 no row. */
static long long token_used(const char *hash)
{
    char sql[200];
    snprintf(sql, sizeof(sql),
             "SELECT (last_used_at IS NOT NULL)::int FROM api_tokens WHERE token_sha256 = '%s'",
             hash);
    return scalar(sql);
}

static void test_tokens(void)
{
    rv_error e;
    char tok[RV_DB_TOKEN_LEN + 1], pub[RV_DB_TOKEN_ID_LEN + 1], th[65], other[65];
    CU_ASSERT_EQUAL_FATAL(rv_db_token_generate(tok, pub), 0);
    CU_ASSERT_EQUAL(strlen(tok), RV_DB_TOKEN_LEN);
    CU_ASSERT(strncmp(tok, "rvt_", 4) == 0 && tok[12] == '_' && strncmp(tok + 4, pub, 8) == 0);
    rv_sha256_hex(tok, strlen(tok), th);
    /* Scope names. */
    char sc[48];
    CU_ASSERT_EQUAL(rv_db_scopes_parse("ingest,read"), RV_DB_SCOPE_INGEST | RV_DB_SCOPE_READ);
    CU_ASSERT_EQUAL(rv_db_scopes_parse("admin"), RV_DB_SCOPE_ADMIN);
    CU_ASSERT_EQUAL(rv_db_scopes_parse("read,write"), 0);
    CU_ASSERT_EQUAL(rv_db_scopes_parse(""), 0);
    rv_db_scopes_str(RV_DB_SCOPE_INGEST | RV_DB_SCOPE_ADMIN, sc, sizeof(sc));
    CU_ASSERT_STRING_EQUAL(sc, "ingest,admin");

    int64_t id = 0;
    CU_ASSERT_EQUAL(
        rv_db_token_create(g_db, "ci", RV_DB_SCOPE_INGEST | RV_DB_SCOPE_READ, th, &id, &e), 0);
    CU_ASSERT_EQUAL(token_used(th), 0);
    rv_db_token tok_row;
    CU_ASSERT_EQUAL(rv_db_token_verify(g_db, th, &tok_row, &e), 0);
    CU_ASSERT_EQUAL(tok_row.id, id);
    CU_ASSERT_EQUAL(tok_row.scopes, RV_DB_SCOPE_INGEST | RV_DB_SCOPE_READ);
    CU_ASSERT_STRING_EQUAL(tok_row.name, "ci");
    CU_ASSERT_EQUAL(token_used(th), 1); /* verify writes it at once */

    /* The server's path: a noted use is written by the next list. */
    PGconn *c = PQconnectdb(g_pg.conninfo);
    PQclear(PQexec(c, "UPDATE api_tokens SET last_used_at = NULL"));
    PQfinish(c);
    rv_sha256_hex("rvt_other", 9, other);
    CU_ASSERT_EQUAL(rv_db_token_create(g_db, "other", RV_DB_SCOPE_READ, other, NULL, &e), 0);
    rv_db_token_note_use(th);
    rv_db_token_note_use(th);
    rv_db_token_note_use("not a hash");
    CU_ASSERT_EQUAL(token_used(th), 0); /* noting never touches the database */
    rv_db_token *rows = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(rv_db_token_list(g_db, 0, &rows, &n, &e), 0);
    CU_ASSERT_EQUAL(n, 2);
    rv_db_token_list_free(rows, n);
    CU_ASSERT_EQUAL(token_used(th), 1);
    CU_ASSERT_EQUAL(token_used(other), 0);

    CU_ASSERT_EQUAL(rv_db_token_revoke(g_db, id, &e), 0);
    CU_ASSERT_EQUAL(rv_db_token_verify(g_db, th, &tok_row, &e), RV_ERR_NOTFOUND);
    CU_ASSERT_EQUAL(rv_db_token_list(g_db, 0, &rows, &n, &e), 0);
    CU_ASSERT_EQUAL(n, 1);
    rv_db_token_list_free(rows, n);
    CU_ASSERT_EQUAL(rv_db_token_list(g_db, 1, &rows, &n, &e), 0);
    CU_ASSERT(n == 2 && rows[0].revoked && !rows[1].revoked);
    rv_db_token_list_free(rows, n);
    CU_ASSERT_EQUAL(rv_db_token_revoke(g_db, id + 1000, &e), RV_ERR_NOTFOUND);
}

static void test_jobs_platforms(void)
{
    rv_error e;
    /* Jobs: two claims never get the same job; empty queue = NOTFOUND. */
    int64_t j1, j2;
    json_t *req = json_pack("{s:i}", "n", 1);
    CU_ASSERT_EQUAL(rv_db_job_enqueue(g_db, "fleet", req, &j1, &e), 0);
    CU_ASSERT_EQUAL(rv_db_job_enqueue(g_db, "fleet", req, &j2, &e), 0);
    json_decref(req);
    rv_db_job a, b2, c;
    CU_ASSERT_EQUAL(rv_db_job_claim(g_db, "w1", "fleet", &a, &e), 0);
    CU_ASSERT_EQUAL(rv_db_job_claim(g_db, "w2", NULL, &b2, &e), 0);
    CU_ASSERT_NOT_EQUAL(a.id, b2.id);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(a.request, "n")), 1);
    CU_ASSERT_EQUAL(rv_db_job_claim(g_db, "w3", NULL, &c, &e), RV_ERR_NOTFOUND);
    CU_ASSERT_EQUAL(rv_db_job_progress(g_db, a.id, 0.5, &e), 0);
    json_t *out = json_pack("{s:b}", "ok", 1);
    CU_ASSERT_EQUAL(rv_db_job_finish(g_db, a.id, 1, out, NULL, &e), 0);
    json_decref(out);
    CU_ASSERT_EQUAL(rv_db_job_finish(g_db, a.id, 1, NULL, NULL, &e), RV_ERR_NOTFOUND);
    json_t *jj = NULL;
    CU_ASSERT_EQUAL(rv_db_job_get(g_db, a.id, &jj, &e), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(jj, "state")), "done");
    json_decref(jj);
    /* b2's worker "dies": requeue it, claim it again. */
    PGconn *pc = PQconnectdb(g_pg.conninfo);
    PQclear(PQexec(pc, "UPDATE jobs SET heartbeat_at = now() - interval '1 hour' WHERE state = "
                       "'running'"));
    PQfinish(pc);
    size_t nre = 0;
    CU_ASSERT_EQUAL(rv_db_job_requeue_stale(g_db, 60, &nre, &e), 0);
    CU_ASSERT_EQUAL(nre, 1);
    CU_ASSERT_EQUAL(rv_db_job_claim(g_db, "w4", NULL, &c, &e), 0);
    CU_ASSERT_EQUAL(c.id, b2.id);
    CU_ASSERT_EQUAL(c.attempts, 2);
    CU_ASSERT_EQUAL(rv_db_job_finish(g_db, c.id, 0, NULL, "boom", &e), 0);
    rv_db_job_clear(&a);
    rv_db_job_clear(&b2);
    rv_db_job_clear(&c);

    json_t *pl = NULL;
    CU_ASSERT_EQUAL(rv_db_platform_list(g_db, &pl, &e), 0);
    CU_ASSERT(json_array_size(pl) >= 1);
    json_decref(pl);
    CU_ASSERT_EQUAL(rv_db_ping(g_db, &e), 0);
}

int main(void)
{
    g_shared = rv_test_shared_traces("README.md");
    if (!g_shared) {
        printf("skipped: the public traces (RV_SHARED_TRACES) are not available\n");
        return 77;
    }
    const char *src = getenv("RV_SOURCE_DIR");
    snprintf(g_migrations, sizeof(g_migrations), "%s/migrations", src ? src : ".");
    int rc = rv_testpg_start(&g_pg);
    if (rc)
        return rc;
    rv_error e;
    if (rv_db_open(g_pg.conninfo, 4, &g_db, &e) != 0) {
        fprintf(stderr, "%s\n", e.message);
        return 1;
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("db", NULL, NULL);
    CU_add_test(s, "migrations up/down/up, no-op rerun, racing runners", test_migrations);
    CU_add_test(s, "ingest, duplicate, original bytes, get/list", test_ingest_and_duplicate);
    CU_add_test(s, "bad inputs store nothing", test_bad_inputs);
    CU_add_test(s, "8 concurrent ingests", test_concurrent_ingest);
    CU_add_test(s, "crash mid-ingest", test_crash_mid_ingest);
    CU_add_test(s, "overhead statistics: db == engine", test_overhead_stats);
    CU_add_test(s, "snapshot load time (100k tasks)", test_snapshot_load_time);
    CU_add_test(s, "what-if cache: the bytes sent, the summary beside them", test_cache);
    CU_add_test(s, "tokens: create, verify, last use, revoke, list", test_tokens);
    CU_add_test(s, "jobs, platforms, ping", test_jobs_platforms);
    unsigned fails = rv_test_run();
    rv_db_close(g_db);
    rv_testpg_stop(&g_pg);
    return fails ? 1 : 0;
}
