/* The kinds catalogue (rv_whatif_kinds) against the parser: every example
 * parses, every numeric field accepts its bounds and rejects values past
 * them naming the field, every enum rejects an unknown value. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rv_whatif.h"
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

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("whatif_kinds", NULL, NULL);
    CU_add_test(s, "catalogue matches the parser", test_catalogue_matches_parser);
    return rv_test_run() ? 1 : 0;
}
