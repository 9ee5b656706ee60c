/* The request spec (engine/rv_whatif_spec.c) against the parser, the
 * pipeline and docs/whatif.md: every example parses; every numeric field
 * accepts its bounds and rejects values past them naming the field; every
 * enum rejects an unknown value; every documented default takes effect
 * (absent and explicitly default give the same answer on a real trace);
 * and docs/whatif.md names every kind, field and default. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/rv_graph.h"
#include "reader/rv_kineto.h"
#include "run/rv_run.h"
#include "simulate/rv_sim.h"
#include "whatif/rv_whatif.h"
#include "common/rv_test_util.h"

static int parse(json_t *doc, rv_error *err)
{
    rv_whatif *w = NULL;
    rv_error_clear(err);
    int rc = rv_whatif_parse(doc, &w, err);
    rv_whatif_free(w);
    return rc;
}

/* doc with base[field] = v (v is consumed) parses or not as expected. */
static void check(json_t *doc, json_t *base, const char *field, json_t *v, int ok, const char *path)
{
    rv_error err;
    json_object_set_new(base, field, v);
    int rc = parse(doc, &err);
    if ((rc == 0) != ok) {
        char *txt = json_dumps(doc, JSON_COMPACT);
        printf("\n  %s: %s -> rc %d (%s)", path, txt, rc, err.message);
        free(txt);
    }
    CU_ASSERT_EQUAL(rc == 0, ok);
    if (!ok)
        CU_ASSERT_STRING_EQUAL(err.field, path);
}

static void check_fields(json_t *fields, json_t *doc, json_t *base, const char *prefix)
{
    size_t i;
    json_t *f;
    json_array_foreach(fields, i, f)
    {
        const char *name = json_string_value(json_object_get(f, "name"));
        const char *type = json_string_value(json_object_get(f, "type"));
        char path[128];
        snprintf(path, sizeof(path), "%s%s", prefix, name);
        json_t *saved = json_object_get(base, name);
        if (saved)
            json_incref(saved);
        if (!strcmp(type, "number") || !strcmp(type, "integer")) {
            double lo = json_real_value(json_object_get(f, "min"));
            double hi = json_real_value(json_object_get(f, "max"));
            int excl = json_is_true(json_object_get(f, "min_exclusive"));
            int is_int = !strcmp(type, "integer");
            check(doc, base, name, is_int ? json_integer((json_int_t)hi) : json_real(hi), 1, path);
            check(doc, base, name,
                  is_int ? json_integer((json_int_t)hi + 1) : json_real(hi * 2 + 1), 0, path);
            if (excl)
                check(doc, base, name, json_real(lo), 0, path);
            check(doc, base, name, is_int ? json_integer((json_int_t)lo - 1) : json_real(lo - 1), 0,
                  path);
        } else if (!strcmp(type, "enum")) {
            json_t *vals = json_object_get(f, "values");
            size_t k;
            json_t *v;
            json_array_foreach(vals, k, v) check(doc, base, name, json_incref(v), 1, path);
            check(doc, base, name, json_string("no-such-value"), 0, path);
        }
        if (saved)
            json_object_set_new(base, name, saved);
        else
            json_object_del(base, name);
    }
}

static void test_catalogue_matches_parser(void)
{
    json_t *cat = rv_whatif_kinds();
    CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
    json_t *opts = json_object_get(cat, "optimizations");
    CU_ASSERT(json_array_size(opts) >= 13);
    size_t i;
    json_t *k;
    rv_error err;
    json_array_foreach(opts, i, k)
    {
        json_t *example = json_object_get(k, "example");
        CU_ASSERT_PTR_NOT_NULL_FATAL(example);
        json_t *doc = json_pack("{s:[O]}", "optimizations", example);
        CU_ASSERT_EQUAL(parse(doc, &err), 0);
        json_t *base = json_array_get(json_object_get(doc, "optimizations"), 0);
        check_fields(json_object_get(k, "fields"), doc, base, "optimizations[0].");
        json_decref(doc);
    }
    json_t *ddoc = json_pack("{s:{s:i}}", "distributed", "workers", 2);
    check_fields(json_object_get(cat, "distributed"), ddoc, json_object_get(ddoc, "distributed"),
                 "distributed.");
    json_decref(ddoc);
    json_t *tdoc = json_object();
    json_t *top = json_object_get(cat, "top_level");
    check_fields(top, tdoc, tdoc, "");
    json_decref(tdoc);
    /* Unknown kinds are refused, naming the field. */
    json_t *bad = json_pack("{s:[{s:s}]}", "optimizations", "kind", "teleport");
    CU_ASSERT_EQUAL(parse(bad, &err), RV_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(err.field, "optimizations[0].kind");
    json_decref(bad);
    json_decref(cat);
}

#define SAMPLE "data/samples/resnet50-v100-workers0.pt.trace.json.gz"

static rv_trace *s_tr;
static rv_graph *s_g;
static rv_sim *s_base;

static int load_sample(void)
{
    rv_error err;
    if (rv_kineto_read_file(SAMPLE, NULL, &s_tr, &err) != 0 ||
        rv_graph_build(s_tr, NULL, &s_g, &err) != 0 ||
        rv_sim_run(s_g, RV_SCHED_EARLIEST_START, &s_base, &err) != 0) {
        fprintf(stderr, "%s: %s\n", SAMPLE, err.message);
        return -1;
    }
    return 0;
}

static int free_sample(void)
{
    rv_sim_free(s_base);
    rv_graph_free(s_g);
    rv_trace_free(s_tr);
    return 0;
}

/* The answer to doc (borrowed) on the sample, through rv_run; NULL when
 * the document is refused. */
static json_t *answer(const json_t *doc)
{
    rv_whatif *w = NULL;
    rv_run_result *r = NULL;
    rv_run_opts o = {.iteration = RV_ITER_MEDIAN};
    rv_error err;
    json_t *out = NULL;
    rv_error_clear(&err);
    if (rv_whatif_parse(doc, &w, &err) == 0 && rv_run(s_g, s_base, w, &o, &r, &err) == 0) {
        out = json_pack("{s:f,s:O}", "predicted_us", r->sum.predicted_us, "applied", r->applied);
    } else {
        char *t = json_dumps(doc, JSON_COMPACT);
        printf("\n  %s refused: %s", t, err.message);
        free(t);
    }
    rv_run_result_free(r);
    rv_whatif_free(w);
    return out;
}

/* For every field of fields (catalogue JSON) with a default: doc with
 * base[name] absent and doc with base[name] = default answer the same. */
static void check_defaults(json_t *fields, json_t *doc, json_t *base, const char *where)
{
    size_t i;
    json_t *f;
    json_array_foreach(fields, i, f)
    {
        const char *name = json_string_value(json_object_get(f, "name"));
        json_t *dflt = json_object_get(f, "default");
        if (!dflt || json_object_get(base, name))
            continue;
        json_t *absent = answer(doc);
        json_object_set(base, name, dflt);
        json_t *given = answer(doc);
        json_object_del(base, name);
        CU_ASSERT_PTR_NOT_NULL(absent);
        CU_ASSERT_PTR_NOT_NULL(given);
        int same = absent && given && json_equal(absent, given);
        if (!same) {
            char *a = json_dumps(absent, JSON_COMPACT), *b = json_dumps(given, JSON_COMPACT);
            printf("\n  %s.%s: absent %s, default given %s", where, name, a, b);
            free(a);
            free(b);
        }
        CU_ASSERT(same);
        json_decref(absent);
        json_decref(given);
    }
}

static void test_defaults_take_effect(void)
{
    json_t *cat = rv_whatif_kinds();
    json_t *opts = json_object_get(cat, "optimizations");
    size_t i;
    json_t *k;
    json_array_foreach(opts, i, k)
    {
        json_t *doc = json_pack("{s:[O]}", "optimizations", json_object_get(k, "example"));
        json_t *base = json_array_get(json_object_get(doc, "optimizations"), 0);
        check_defaults(json_object_get(k, "fields"), doc, base,
                       json_string_value(json_object_get(k, "kind")));
        json_decref(doc);
    }
    json_t *ddoc = json_pack("{s:{s:i}}", "distributed", "workers", 4);
    check_defaults(json_object_get(cat, "distributed"), ddoc, json_object_get(ddoc, "distributed"),
                   "distributed");
    json_decref(ddoc);
    json_t *tdoc = json_object();
    check_defaults(json_object_get(cat, "top_level"), tdoc, tdoc, "top level");
    json_decref(tdoc);
    json_decref(cat);
}

/* The catalogue's own example: scale without select scales every task. */
static void test_scale_defaults_to_everything(void)
{
    json_t *doc = json_loads("{\"optimizations\":[{\"kind\":\"scale\",\"factor\":0.5}]}", 0, NULL);
    json_t *a = answer(doc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    json_t *ap = json_array_get(json_object_get(a, "applied"), 0);
    json_int_t n = json_integer_value(json_object_get(ap, "tasks_scaled"));
    printf("\n    scale 0.5 without select: %lld of %zu tasks scaled, %.1f -> %.1f us",
           (long long)n, s_g->ntasks, json_number_value(json_object_get(ap, "busy_us_before")),
           json_number_value(json_object_get(ap, "busy_us_after")));
    CU_ASSERT_EQUAL((size_t)n, s_g->ntasks);
    json_decref(a);
    json_decref(doc);
}

/* The row of docs/whatif.md that starts with "| `key`" (or NULL). */
static const char *doc_row(const char *md, const char *key, char *row, size_t cap)
{
    char head[96];
    snprintf(head, sizeof(head), "\n| `%s`", key);
    const char *p = strstr(md, head);
    if (!p)
        return NULL;
    p++;
    const char *e = strchr(p, '\n');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n >= cap)
        n = cap - 1;
    memcpy(row, p, n);
    row[n] = '\0';
    return row;
}

/* A default as docs/whatif.md writes it: strings in backticks, numbers
 * and booleans as they are, the everything selector as "everything". */
static void default_text(const json_t *d, char *out, size_t cap)
{
    if (json_is_string(d))
        snprintf(out, cap, "`%s`", json_string_value(d));
    else if (json_is_object(d))
        snprintf(out, cap, "everything");
    else if (json_is_true(d) || json_is_false(d))
        snprintf(out, cap, "%s", json_is_true(d) ? "true" : "false");
    else
        snprintf(out, cap, "%g", json_number_value(d));
}

static void check_doc_fields(const char *md, json_t *fields, const char *row_key)
{
    size_t i;
    json_t *f;
    char row[2048], want[96], name[80];
    json_array_foreach(fields, i, f)
    {
        const char *nm = json_string_value(json_object_get(f, "name"));
        /* A kind's row is in the Optimizations table (batch_size is also
         * a top-level field). */
        const char *opt = strstr(md, "## Optimizations");
        const char *r = row_key ? doc_row(opt ? opt : md, row_key, row, sizeof(row)) : NULL;
        if (!row_key) {
            /* Distributed and top-level fields: a row each, or a row shared
             * by a pair ("| `bucket_mb`, `first_bucket_mb` |"). */
            r = doc_row(md, nm, row, sizeof(row));
            snprintf(name, sizeof(name), ", `%s`", nm);
            if (!r && (r = strstr(md, name)) != NULL) {
                const char *s = r;
                while (s > md && s[-1] != '\n')
                    s--;
                const char *e = strchr(s, '\n');
                size_t n = e ? (size_t)(e - s) : strlen(s);
                n = n < sizeof(row) - 1 ? n : sizeof(row) - 1;
                memcpy(row, s, n);
                row[n] = '\0';
                r = row;
            }
        }
        snprintf(name, sizeof(name), "`%s`", nm);
        if (!r || !strstr(r, name)) {
            printf("\n  docs/whatif.md: no row names %s%s%s", name, row_key ? " for " : "",
                   row_key ? row_key : "");
            CU_FAIL("field missing from docs/whatif.md");
            continue;
        }
        json_t *d = json_object_get(f, "default");
        if (!d)
            continue;
        default_text(d, want, sizeof(want));
        if (!strstr(r, want)) {
            printf("\n  docs/whatif.md: %s%s%s has default %s in the spec; the row says: %s",
                   row_key ? row_key : "", row_key ? "." : "", nm, want, r);
            CU_FAIL("default missing from docs/whatif.md");
        }
    }
}

static void test_docs_agree(void)
{
    size_t len = 0;
    char *md = rv_test_read_file("docs/whatif.md", &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(md);
    json_t *cat = rv_whatif_kinds();
    size_t i;
    json_t *k;
    char row[2048];
    json_array_foreach(json_object_get(cat, "optimizations"), i, k)
    {
        const char *kind = json_string_value(json_object_get(k, "kind"));
        if (!doc_row(md, kind, row, sizeof(row))) {
            printf("\n  docs/whatif.md: no row for kind %s", kind);
            CU_FAIL("kind missing from docs/whatif.md");
            continue;
        }
        check_doc_fields(md, json_object_get(k, "fields"), kind);
    }
    check_doc_fields(md, json_object_get(cat, "distributed"), NULL);
    check_doc_fields(md, json_object_get(cat, "top_level"), NULL);
    check_doc_fields(md, json_object_get(cat, "job"), NULL);
    json_decref(cat);
    free(md);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("whatif_kinds", NULL, NULL);
    CU_add_test(s, "catalogue matches the parser", test_catalogue_matches_parser);
    CU_add_test(s, "docs/whatif.md agrees with the spec", test_docs_agree);
    CU_pSuite r = CU_add_suite("whatif_defaults", load_sample, free_sample);
    CU_add_test(r, "every documented default takes effect", test_defaults_take_effect);
    CU_add_test(r, "scale without select scales every task", test_scale_defaults_to_everything);
    return rv_test_run() ? 1 : 0;
}
