/* The answers held while their cache rows are written (server/rv_pending.c):
 * a held answer is found by trace and request hash as a copy, a full table
 * refuses (the caller keeps its body and writes first), done frees the
 * body and the slot, and concurrent use. Run under ASan+UBSan and TSan in
 * `make test`, which also catch leaks, double frees and races. */
#include <CUnit/Basic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_pending.h"

static const char H1[] = "1111111111111111111111111111111111111111111111111111111111111111";
static const char H2[] = "2222222222222222222222222222222222222222222222222222222222222222";

static char *text(const char *s)
{
    char *p = malloc(strlen(s) + 1);
    if (!p)
        abort();
    memcpy(p, s, strlen(s) + 1);
    return p;
}

static void test_hold_and_find(void)
{
    rv_pending *p = rv_pending_new(2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    char *b1 = text("{\"a\":1}"), *b2 = text("{\"b\":2}"), *b3 = text("{\"c\":3}");
    rv_pending_entry *e1 = rv_pending_add(p, 7, H1, b1, strlen(b1));
    rv_pending_entry *e2 = rv_pending_add(p, 8, H1, b2, strlen(b2));
    CU_ASSERT_PTR_NOT_NULL_FATAL(e1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e2);
    /* Full: refused, and the body stays the caller's. */
    CU_ASSERT_PTR_NULL(rv_pending_add(p, 9, H1, b3, strlen(b3)));
    char *got = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL(rv_pending_get(p, 7, H1, &got, &len), 0);
    CU_ASSERT_EQUAL(len, 7);
    CU_ASSERT_STRING_EQUAL(got, "{\"a\":1}");
    CU_ASSERT_PTR_NOT_EQUAL(got, b1); /* a copy */
    free(got);
    /* Another hash or another trace is no hit. */
    CU_ASSERT_EQUAL(rv_pending_get(p, 7, H2, &got, &len), -1);
    CU_ASSERT_PTR_NULL(got);
    CU_ASSERT_EQUAL(rv_pending_get(p, 9, H1, &got, &len), -1);
    size_t blen = 0;
    CU_ASSERT_PTR_EQUAL(rv_pending_body(e2, &blen), b2);
    CU_ASSERT_EQUAL(blen, 7);
    /* Done: gone, and the slot takes another. */
    rv_pending_done(p, e1);
    CU_ASSERT_EQUAL(rv_pending_get(p, 7, H1, &got, &len), -1);
    rv_pending_entry *e3 = rv_pending_add(p, 9, H1, b3, strlen(b3));
    CU_ASSERT_PTR_NOT_NULL(e3);
    /* A malformed hash or no table: refused. */
    char *b4 = text("{}");
    CU_ASSERT_PTR_NULL(rv_pending_add(p, 1, "abc", b4, 2));
    CU_ASSERT_PTR_NULL(rv_pending_add(NULL, 1, H1, b4, 2));
    CU_ASSERT_EQUAL(rv_pending_get(NULL, 1, H1, &got, &len), -1);
    free(b4);
    rv_pending_done(p, e2);
    rv_pending_done(p, e3);
    rv_pending_done(p, NULL);
    rv_pending_free(p);
    rv_pending_free(NULL);
    CU_ASSERT_PTR_NULL(rv_pending_new(0));
}

/* Each thread holds, finds and drops its own answers while the others do. */
#define NTHREADS 4
#define ROUNDS   2000

static rv_pending *shared;

static void *worker(void *arg)
{
    int64_t id = (int64_t)(intptr_t)arg;
    long bad = 0;
    for (int i = 0; i < ROUNDS; i++) {
        char *b = malloc(16);
        if (!b)
            return (void *)1;
        int n = snprintf(b, 16, "{\"i\":%d}", i);
        rv_pending_entry *e = rv_pending_add(shared, id, H1, b, (size_t)n);
        if (!e) {
            free(b);
            bad++;
            continue;
        }
        char *got = NULL;
        size_t len = 0;
        if (rv_pending_get(shared, id, H1, &got, &len) != 0 || len != (size_t)n ||
            memcmp(got, b, len) != 0)
            bad++;
        free(got);
        rv_pending_done(shared, e);
    }
    return (void *)(intptr_t)bad;
}

static void test_concurrent(void)
{
    pthread_t th[NTHREADS];
    shared = rv_pending_new(NTHREADS);
    CU_ASSERT_PTR_NOT_NULL_FATAL(shared);
    for (intptr_t i = 0; i < NTHREADS; i++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, worker, (void *)(i + 1)), 0);
    for (int i = 0; i < NTHREADS; i++) {
        void *bad = NULL;
        pthread_join(th[i], &bad);
        CU_ASSERT_PTR_NULL(bad); /* one slot per thread: never full, always found */
    }
    rv_pending_free(shared);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("pending", NULL, NULL);
    CU_add_test(s, "hold_and_find", test_hold_and_find);
    CU_add_test(s, "concurrent", test_concurrent);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned fails = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return fails ? 1 : 0;
}
