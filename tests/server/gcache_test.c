/* The loaded-trace cache (server/rv_gcache.c): hits and misses, LRU
 * eviction within the byte budget, entries outliving eviction and deletion
 * while a request holds them, and concurrent use. Run under ASan+UBSan in
 * `make test`, which also catches double frees and leaks. */
#include <CUnit/Basic.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "rv_gcache.h"

/* A small real graph: one launch and one kernel. */
static void make(int64_t tasks_scale, rv_trace **t, rv_graph **g, rv_sim **s)
{
    rv_error err;
    *t = rv_trace_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(*t);
    for (int64_t i = 0; i < tasks_scale; i++) {
        rv_event e;
        rv_event_init(&e);
        e.cat = RV_CAT_RUNTIME;
        e.name = rv_strtab_intern(&(*t)->strings, "cudaLaunchKernel", 16);
        e.pid = e.tid = rv_strtab_intern(&(*t)->strings, "1", 1);
        e.ts_ns = 1000 + i * 10000;
        e.dur_ns = 2000;
        e.correlation = i + 1;
        CU_ASSERT_FATAL(rv_trace_push(*t, &e) >= 0);
        e.cat = RV_CAT_KERNEL;
        e.name = rv_strtab_intern(&(*t)->strings, "k", 1);
        e.pid = rv_strtab_intern(&(*t)->strings, "0", 1);
        e.tid = rv_strtab_intern(&(*t)->strings, "7", 1);
        e.device = 0;
        e.stream = 7;
        e.ts_ns += 5000;
        CU_ASSERT_FATAL(rv_trace_push(*t, &e) >= 0);
    }
    CU_ASSERT_EQUAL_FATAL(rv_graph_build(*t, NULL, g, &err), 0);
    CU_ASSERT_EQUAL_FATAL(rv_sim_run(*g, RV_SCHED_EARLIEST_START, s, &err), 0);
}

static rv_gentry *put(rv_gcache *c, int64_t id, int64_t scale)
{
    rv_trace *t;
    rv_graph *g;
    rv_sim *s;
    make(scale, &t, &g, &s);
    return rv_gcache_put(c, id, t, g, s);
}

static void test_hits_and_eviction(void)
{
    /* Room for about three small entries. */
    rv_gentry *probe = put(NULL, 0, 100);
    size_t one = probe->bytes;
    rv_gcache_release(NULL, probe);
    rv_gcache *c = rv_gcache_new(one * 3 + one / 2);
    CU_ASSERT_PTR_NULL(rv_gcache_get(c, 1));
    for (int64_t id = 1; id <= 3; id++)
        rv_gcache_release(c, put(c, id, 100));
    rv_gentry *e = rv_gcache_get(c, 1); /* 1 becomes the most recent */
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(e->graph->ntasks, 200);
    rv_gcache_release(c, e);
    /* The server asks before it loads; asked for more often than 2 (never
     * asked for), 4 takes 2's room: 2 is the least recent. */
    CU_ASSERT_PTR_NULL(rv_gcache_get(c, 4));
    rv_gcache_release(c, put(c, 4, 100));
    rv_gentry *two = rv_gcache_get(c, 2), *four = rv_gcache_get(c, 4);
    CU_ASSERT_PTR_NULL(two);
    CU_ASSERT_PTR_NOT_NULL(four);
    rv_gcache_release(c, four);
    rv_gcache_counts gc;
    rv_gcache_stats(c, &gc);
    CU_ASSERT_EQUAL(gc.hits, 2);
    CU_ASSERT_EQUAL(gc.misses, 3);
    CU_ASSERT_EQUAL(gc.entries, 3);
    CU_ASSERT_EQUAL(gc.evictions, 1);
    CU_ASSERT(gc.bytes <= one * 3 + one / 2);
    /* Bigger than the whole cache: answered, not kept. */
    rv_gentry *big = put(c, 9, 20000);
    CU_ASSERT_PTR_NOT_NULL(big);
    rv_gcache_release(c, big);
    CU_ASSERT_PTR_NULL(rv_gcache_get(c, 9));
    rv_gcache_free(c);
}

static void test_held_entries_survive(void)
{
    rv_gcache *c = rv_gcache_new(64u << 20);
    rv_gentry *held = put(c, 1, 50);
    /* Deleted while a request holds it: gone for new requests, intact for
     * the holder until it lets go (ASan would see a use after free). */
    rv_gcache_forget(c, 1);
    CU_ASSERT_PTR_NULL(rv_gcache_get(c, 1));
    CU_ASSERT_EQUAL(held->graph->ntasks, 100);
    rv_gcache_release(c, held);
    /* Two loads racing: the second put returns the first's entry. */
    rv_gentry *a = put(c, 2, 10), *b = put(c, 2, 10);
    CU_ASSERT_PTR_EQUAL(a, b);
    rv_gcache_release(c, a);
    rv_gcache_release(c, b);
    rv_gcache_free(c);
}

/* A fleet scan over 10 traces, repeated 5 times, through a cache with room
 * for 4: plain LRU evicts each trace just before the next scan needs it
 * (no hit at all); with admission by frequency the cache keeps a stable
 * subset that every later scan hits. */
static void test_scan_resistance(void)
{
    rv_gentry *probe = put(NULL, 0, 100);
    size_t one = probe->bytes;
    rv_gcache_release(NULL, probe);
    rv_gcache *c = rv_gcache_new(one * 4 + one / 2);
    uint64_t later_hits = 0;
    for (int scan = 0; scan < 5; scan++)
        for (int64_t id = 1; id <= 10; id++) {
            rv_gentry *e = rv_gcache_get(c, id);
            if (e)
                later_hits += scan > 0;
            else
                e = put(c, id, 100);
            CU_ASSERT_PTR_NOT_NULL_FATAL(e);
            CU_ASSERT_EQUAL(e->graph->ntasks, 200);
            rv_gcache_release(c, e);
        }
    rv_gcache_counts gc;
    rv_gcache_stats(c, &gc);
    fprintf(stderr,
            "\n    repeated scans of 10 traces, room for 4: %llu hits in scans 2-5 "
            "(at most 16), %llu evictions, %llu loads not kept\n",
            (unsigned long long)later_hits, (unsigned long long)gc.evictions,
            (unsigned long long)gc.rejected);
    CU_ASSERT(later_hits >= 12);
    CU_ASSERT(gc.entries == 4);
    /* A trace asked for often enough still gets in. */
    for (int i = 0; i < 20; i++)
        CU_ASSERT_PTR_NULL(rv_gcache_get(c, 42));
    rv_gcache_release(c, put(c, 42, 100));
    rv_gentry *hot = rv_gcache_get(c, 42);
    CU_ASSERT_PTR_NOT_NULL(hot);
    rv_gcache_release(c, hot);
    rv_gcache_free(c);
}

static rv_gcache *shared;

static void *worker(void *arg)
{
    int64_t base = (int64_t)(intptr_t)arg;
    for (int i = 0; i < 200; i++) {
        int64_t id = base + i % 7;
        rv_gentry *e = rv_gcache_get(shared, id);
        if (!e)
            e = put(shared, id, 5);
        if (e && e->graph->ntasks != 10)
            return (void *)1;
        rv_gcache_release(shared, e);
        if (i % 50 == 0)
            rv_gcache_forget(shared, id);
    }
    return NULL;
}

static void test_threads(void)
{
    shared = rv_gcache_new(200u << 10);
    pthread_t t[4];
    for (intptr_t i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, worker, (void *)(i % 2 * 3));
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        CU_ASSERT_PTR_NULL(r);
    }
    rv_gcache_free(shared);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("gcache", NULL, NULL);
    CU_add_test(s, "hits, misses and LRU eviction", test_hits_and_eviction);
    CU_add_test(s, "repeated scans keep a stable subset", test_scan_resistance);
    CU_add_test(s, "held entries survive eviction and deletion", test_held_entries_survive);
    CU_add_test(s, "concurrent use", test_threads);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned fails = CU_get_number_of_failures();
    CU_cleanup_registry();
    return fails ? 1 : 0;
}
