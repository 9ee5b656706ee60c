/* Measured all-reduce tables (distributed.allreduce_table): interpolation
 * and validation. Their use by the data-parallel model on a real trace is in
 * test_coll_table_real.c. */
#include <CUnit/Basic.h>
#include <math.h>
#include <string.h>

#include "trace/rv_coll.h"
#include "whatif/rv_whatif.h"
#include "common/rv_test_util.h"

static void test_interpolation(void)
{
    rv_coll_table t = {.n = 2, .bytes = {1e6, 1e8}, .seconds = {100e-6, 1000e-6}};
    CU_ASSERT_DOUBLE_EQUAL(rv_coll_table_time(&t, 1e6), 100e-6, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(rv_coll_table_time(&t, 1e8), 1000e-6, 1e-12);
    /* Halfway in log size is the geometric mean in time. */
    CU_ASSERT_DOUBLE_EQUAL(rv_coll_table_time(&t, 1e7), 100e-6 * sqrt(10.0), 1e-10);
    /* Past the ends the end segments' slope (0.5 here) continues. */
    CU_ASSERT_DOUBLE_EQUAL(rv_coll_table_time(&t, 1e10), 10000e-6, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(rv_coll_table_time(&t, 1e4), 10e-6, 1e-11);
    rv_coll_table one = {.n = 1, .bytes = {1e6}, .seconds = {50e-6}};
    CU_ASSERT_DOUBLE_EQUAL(rv_coll_table_time(&one, 4e6), 200e-6, 1e-12);
}

static void test_validation(void)
{
    static const struct {
        const char *doc;
        const char *field;
    } bad[] = {
        {"{\"distributed\":{\"workers\":8,\"allreduce_table\":[]}}", "distributed.allreduce_table"},
        {"{\"distributed\":{\"workers\":8,\"allreduce_table\":[[1e6,10],[1e6,20]]}}",
         "distributed.allreduce_table[1]"},
        {"{\"distributed\":{\"workers\":8,\"allreduce_table\":[[1e6,-1]]}}",
         "distributed.allreduce_table[0]"},
        {"{\"distributed\":{\"workers\":8,\"allreduce_table\":[[1e6]]}}",
         "distributed.allreduce_table[0]"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        rv_whatif *w = NULL;
        rv_error err;
        rv_error_clear(&err);
        CU_ASSERT_EQUAL(rv_whatif_parse_text(bad[i].doc, &w, &err), RV_ERR_INVALID);
        CU_ASSERT_STRING_EQUAL(err.field, bad[i].field);
        rv_whatif_free(w);
    }
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("coll_table", NULL, NULL);
    CU_add_test(s, "log-log interpolation", test_interpolation);
    CU_add_test(s, "validation names the field", test_validation);
    return rv_test_run() ? 1 : 0;
}
