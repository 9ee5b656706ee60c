/* Platform overhead statistics as mergeable sketches (migrations/0004,
 * store/rv_db_overheads.c): an upload merges its own sketches into its
 * platform's without reading what is stored, so the platform's sketches
 * after two uploads are exactly the merge of each upload's own; a delete
 * leaves exactly the remaining traces' merge; raw samples are not stored;
 * and the migration turns stored samples into the same buckets as the
 * engine. Needs PostgreSQL and the public traces (skips with 77 without). */
#include <CUnit/CUnit.h>
#include <libpq-fe.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rv_test_util.h"
#include "pg_helper.h"
#include "rv_db.h"
#include "rv_db_ingest.h"
#include "rv_db_migrate.h"
#include "rv_db_overheads.h"
#include "rv_db_traces.h"
#include "reader/rv_kineto.h"
#include "graph/rv_overhead.h"
#include "util/rv_sketch.h"

static rv_testpg g_pg;
static rv_db *g_db;
static const char *g_shared;
static char g_migrations[1024];

static const char *const g_a = "param/dlrm-8rank/worker0.kineto.json.gz";
static const char *const g_b = "param/dlrm-8rank/worker1.kineto.json.gz";

static PGresult *sql(const char *q)
{
    PGconn *c = PQconnectdb(g_pg.conninfo);
    PGresult *r = PQexec(c, q);
    if (PQresultStatus(r) != PGRES_TUPLES_OK && PQresultStatus(r) != PGRES_COMMAND_OK)
        fprintf(stderr, "%s: %s", q, PQerrorMessage(c));
    PQfinish(c);
    return r;
}

static long long scalar(const char *q)
{
    PGresult *r = sql(q);
    long long v = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1
                      ? strtoll(PQgetvalue(r, 0, 0), NULL, 10)
                      : -1;
    PQclear(r);
    return v;
}

/* A trace's own groups, names as text ("*" = overall). */
typedef struct own {
    rv_trace *t;
    rv_overhead_samples s;
    rv_overhead_sketch_group *g;
    size_t ng;
    uint8_t *bytes;
    size_t len;
} own;

static int load_own(const char *rel, own *o)
{
    char p[4096];
    rv_error e;
    memset(o, 0, sizeof(*o));
    snprintf(p, sizeof(p), "%s/%s", g_shared, rel);
    o->bytes = rv_test_read_file(p, &o->len);
    if (!o->bytes || rv_kineto_read_buffer(o->bytes, o->len, NULL, &o->t, &e) ||
        rv_overhead_extract(o->t, &o->s, &e) || rv_overhead_sketch(&o->s, &o->g, &o->ng, &e))
        return -1;
    return 0;
}

static void free_own(own *o)
{
    rv_overhead_sketch_groups_free(o->g, o->ng);
    rv_overhead_samples_free(&o->s);
    rv_trace_free(o->t);
    free(o->bytes);
}

static const char *name_of(const own *o, size_t i)
{
    return o->g[i].name == RV_OH_OVERALL ? "*" : rv_trace_str(o->t, o->g[i].name);
}

/* The merged expectation: (type, name) -> sketch, over several traces. */
typedef struct expect {
    int type[4096];
    char *name[4096];
    rv_sketch sk[4096];
    size_t n;
} expect;

static void expect_add(expect *x, const own *o)
{
    for (size_t i = 0; i < o->ng; i++) {
        size_t k = 0;
        while (k < x->n && !(x->type[k] == o->g[i].type && !strcmp(x->name[k], name_of(o, i))))
            k++;
        if (k == x->n) {
            CU_ASSERT_FATAL(x->n < 4096);
            x->type[k] = o->g[i].type;
            x->name[k] = strdup(name_of(o, i));
            memset(&x->sk[k], 0, sizeof(x->sk[k]));
            x->n++;
        }
        CU_ASSERT_EQUAL(rv_sketch_merge(&x->sk[k], &o->g[i].sk), 0);
    }
}

static void expect_free(expect *x)
{
    for (size_t k = 0; k < x->n; k++) {
        free(x->name[k]);
        rv_sketch_free(&x->sk[k]);
    }
    x->n = 0;
}

/* "{k,...}|{c,...}" of a sketch, as PostgreSQL prints the two arrays. */
static void arrays_text(const rv_sketch *sk, char *out, size_t cap)
{
    size_t len = 0;
    int first = 1;
    len += (size_t)snprintf(out + len, cap - len, "{");
    for (uint32_t i = 0; i < sk->nbins && len < cap; i++)
        if (sk->bins[i]) {
            len +=
                (size_t)snprintf(out + len, cap - len, first ? "%d" : ",%d", sk->lo + (int32_t)i);
            first = 0;
        }
    first = 1;
    len += (size_t)snprintf(out + len, cap - len, "}|{");
    for (uint32_t i = 0; i < sk->nbins && len < cap; i++)
        if (sk->bins[i]) {
            len += (size_t)snprintf(out + len, cap - len, first ? "%llu" : ",%llu",
                                    (unsigned long long)sk->bins[i]);
            first = 0;
        }
    snprintf(out + len, cap - len, "}");
}

/* Number of platform rows that differ from x (missing, extra, or with other
 * counts, buckets, min or max); sums are compared to rounding. */
static size_t differences(int64_t platform_id, const expect *x)
{
    char q[512];
    snprintf(q, sizeof(q),
             "SELECT type, op_name, n, zeros, min, max, sum, keys::text || '|' || counts::text "
             "FROM platform_overhead_sketches WHERE platform_id = %lld",
             (long long)platform_id);
    PGresult *r = sql(q);
    size_t bad = 0, rows = (size_t)PQntuples(r);
    char *want = malloc(65536);
    if (rows != x->n)
        bad++;
    for (size_t i = 0; i < rows; i++) {
        int ri = (int)i, type = atoi(PQgetvalue(r, ri, 0));
        const char *nm = PQgetvalue(r, ri, 1);
        size_t k = 0;
        while (k < x->n && !(x->type[k] == type && !strcmp(x->name[k], nm)))
            k++;
        if (k == x->n) {
            bad++;
            continue;
        }
        const rv_sketch *sk = &x->sk[k];
        arrays_text(sk, want, 65536);
        double sum = strtod(PQgetvalue(r, ri, 6), NULL);
        if (strtoull(PQgetvalue(r, ri, 2), NULL, 10) != sk->n ||
            strtoull(PQgetvalue(r, ri, 3), NULL, 10) != sk->zeros ||
            strtod(PQgetvalue(r, ri, 4), NULL) != sk->min ||
            strtod(PQgetvalue(r, ri, 5), NULL) != sk->max ||
            fabs(sum - sk->sum) > 1e-9 * (fabs(sk->sum) + 1) || strcmp(PQgetvalue(r, ri, 7), want))
            bad++;
    }
    free(want);
    PQclear(r);
    return bad;
}

static int64_t ingest(const own *o, const char *gpu, int64_t *platform_id)
{
    rv_db_ingest_meta m = {.rank = RV_NONE, .world_size = RV_NONE, .job = "sketch-test"};
    m.platform.gpu_model = gpu;
    rv_db_ingest_result r;
    rv_error e;
    int rc = rv_db_ingest(g_db, o->t, o->bytes, o->len, &m, &r, &e);
    if (rc)
        fprintf(stderr, "ingest: %s\n", e.message);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(r.duplicate, 0);
    *platform_id = r.platform_id;
    return r.trace_id;
}

static void test_merge_and_delete(void)
{
    own a, b;
    expect *x = calloc(1, sizeof(*x));
    rv_error e;
    int64_t pid = 0, pid2 = 0;
    CU_ASSERT_FATAL(x != NULL);
    CU_ASSERT_EQUAL_FATAL(load_own(g_a, &a), 0);
    CU_ASSERT_EQUAL_FATAL(load_own(g_b, &b), 0);

    int64_t ta = ingest(&a, "test-gpu-sketch-merge", &pid);
    expect_add(x, &a);
    CU_ASSERT_EQUAL(differences(pid, x), 0);
    int64_t tb = ingest(&b, "test-gpu-sketch-merge", &pid2);
    CU_ASSERT_EQUAL(pid, pid2);
    /* Two uploads: exactly the merge of each upload's own sketches. */
    expect_add(x, &b);
    CU_ASSERT(x->n > 0);
    CU_ASSERT_EQUAL(differences(pid, x), 0);
    /* The statistics read back are the merged sketch's. */
    rv_db_overhead_row *rows = NULL;
    size_t nrows = 0, same = 0;
    CU_ASSERT_EQUAL_FATAL(rv_db_overheads_load(g_db, pid, &rows, &nrows, &e), 0);
    CU_ASSERT_EQUAL(nrows, x->n);
    for (size_t i = 0; i < nrows; i++)
        for (size_t k = 0; k < x->n; k++)
            if (x->type[k] == rows[i].type && !strcmp(x->name[k], rows[i].op_name)) {
                rv_overhead_stat st;
                rv_overhead_stat_of_sketch(&x->sk[k], &st);
                same += st.count == rows[i].stat.count && st.median == rows[i].stat.median &&
                        fabs(st.mean - rows[i].stat.mean) <= 1e-9 * (fabs(st.mean) + 1);
            }
    CU_ASSERT_EQUAL(same, nrows);
    rv_db_overhead_rows_free(rows, nrows);

    /* Deleting A leaves exactly B's own sketches (A-only groups gone). */
    CU_ASSERT_EQUAL(rv_db_trace_delete(g_db, ta, &e), 0);
    expect_free(x);
    expect_add(x, &b);
    CU_ASSERT_EQUAL(differences(pid, x), 0);
    /* And deleting B leaves nothing. */
    CU_ASSERT_EQUAL(rv_db_trace_delete(g_db, tb, &e), 0);
    expect_free(x);
    CU_ASSERT_EQUAL(differences(pid, x), 0);
    CU_ASSERT_EQUAL(rv_db_overheads_load(g_db, pid, &rows, &nrows, &e), 0);
    CU_ASSERT_EQUAL(nrows, 0);
    rv_db_overhead_rows_free(rows, nrows);

    /* Raw samples are not stored; a trace's sketches are small. */
    CU_ASSERT_EQUAL(scalar("SELECT count(*) FROM pg_tables WHERE tablename = 'overhead_samples'"),
                    0);
    ingest(&a, "test-gpu-sketch-size", &pid2);
    long long bytes = scalar("SELECT pg_total_relation_size('trace_overhead_sketches')");
    long long traces = scalar("SELECT count(DISTINCT trace_id) FROM trace_overhead_sketches");
    printf("\n  %zu samples of %s -> %zu groups; trace_overhead_sketches %lld bytes for %lld "
           "trace(s)\n",
           a.s.n, g_a, a.ng, bytes, traces);
    CU_ASSERT(traces > 0 && bytes / traces < 1024 * 1024);
    free_own(&a);
    free_own(&b);
    free(x);
}

/* Migration 0004 turns stored samples (schema 3) into the engine's
 * buckets: its SQL key function and rv_sketch_key agree. */
static void test_migration_backfill(void)
{
    own a;
    rv_error e;
    int64_t v = 0;
    int dirty = 0;
    int64_t latest = 0;
    CU_ASSERT_EQUAL_FATAL(load_own(g_a, &a), 0);
    CU_ASSERT_EQUAL(rv_db_schema_version(g_db, &latest, &dirty, &e), 0);
    /* Down one migration at a time to schema 3, whatever came after 0004. */
    for (int guard = 0; guard < 16; guard++) {
        CU_ASSERT_EQUAL_FATAL(rv_db_schema_version(g_db, &v, &dirty, &e), 0);
        if (v <= 3)
            break;
        CU_ASSERT_EQUAL_FATAL(rv_db_migrate_down(g_db, g_migrations, 1, &e), 0);
    }
    CU_ASSERT_EQUAL(v, 3);
    PQclear(sql("INSERT INTO platforms (identity_key, gpu_model) VALUES (repeat('b', 64), "
                "'test-gpu-backfill')"));
    long long pid = scalar("SELECT id FROM platforms WHERE gpu_model = 'test-gpu-backfill'");
    char *q = malloc(a.s.n * 160 + 1024);
    CU_ASSERT_FATAL(q != NULL);
    size_t len = (size_t)sprintf(q,
                                 "INSERT INTO traces (platform_id, source_format, tasks, "
                                 "content_sha256) VALUES (%lld, 'kineto', 1, repeat('c', 64))",
                                 pid);
    PQclear(sql(q));
    long long tid = scalar("SELECT id FROM traces WHERE content_sha256 = repeat('c', 64)");
    len = (size_t)sprintf(q, "INSERT INTO overhead_samples VALUES ");
    for (size_t i = 0; i < a.s.n; i++) {
        char nm[96];
        /* The DLRM op names need no SQL quoting; checked, not assumed. */
        snprintf(nm, sizeof(nm), "%s", rv_trace_str(a.t, a.s.v[i].name));
        CU_ASSERT_PTR_NULL(strchr(nm, '\''));
        long long ns = (long long)a.s.v[i].value_ns;
        len += (size_t)sprintf(q + len, "%s(%lld, %zu, %lld, %d, '%s', %lld.%03lld)", i ? ", " : "",
                               tid, i, pid, a.s.v[i].type, nm, ns / 1000, ns % 1000);
    }
    PQclear(sql(q));
    free(q);
    CU_ASSERT_EQUAL(scalar("SELECT count(*) FROM overhead_samples"), (long long)a.s.n);
    CU_ASSERT_EQUAL_FATAL(rv_db_migrate(g_db, g_migrations, &e), 0);
    CU_ASSERT_EQUAL(rv_db_schema_version(g_db, &v, &dirty, &e), 0);
    CU_ASSERT_EQUAL(v, latest);
    expect *x = calloc(1, sizeof(*x));
    CU_ASSERT_FATAL(x != NULL);
    expect_add(x, &a);
    CU_ASSERT_EQUAL(differences(pid, x), 0);
    expect_free(x);
    free(x);
    free_own(&a);
}

int main(void)
{
    g_shared = rv_test_shared_traces(g_b);
    if (!g_shared) {
        printf("skipped: the DLRM traces (RV_SHARED_TRACES) are not available\n");
        return 77;
    }
    const char *src = getenv("RV_SOURCE_DIR");
    snprintf(g_migrations, sizeof(g_migrations), "%s/migrations", src ? src : ".");
    int rc = rv_testpg_start(&g_pg);
    if (rc)
        return rc;
    rv_error e;
    if (rv_db_open(g_pg.conninfo, 2, &g_db, &e) != 0 ||
        rv_db_migrate(g_db, g_migrations, &e) != 0) {
        fprintf(stderr, "%s\n", e.message);
        rv_testpg_stop(&g_pg);
        return 1;
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("db overheads", NULL, NULL);
    CU_add_test(s, "two uploads = merge of their own sketches; delete", test_merge_and_delete);
    CU_add_test(s, "migration 0004 backfills the engine's buckets", test_migration_backfill);
    unsigned fails = rv_test_run();
    rv_db_close(g_db);
    rv_testpg_stop(&g_pg);
    return fails ? 1 : 0;
}
