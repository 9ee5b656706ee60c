/* Tests for the engine's shared utilities: the capped buffer (rv_buf), the
 * JSON string writer (rv_jsonw), the radix sort (rv_sort) and the hash map
 * (rv_map). */
#include <CUnit/Basic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/rv_bg.h"
#include "util/rv_buf.h"
#include "util/rv_error.h"
#include "util/rv_jsonw.h"
#include "util/rv_map.h"
#include "util/rv_names.h"
#include "util/rv_sort.h"
#include "common/rv_test_util.h"

/* ---------------------------------------------------------------- rv_buf */

static void test_buf_basic(void)
{
    rv_buf b;
    rv_buf_init(&b, 1 << 20);
    CU_ASSERT_STRING_EQUAL(rv_buf_str(&b), "");
    CU_ASSERT_EQUAL(rv_buf_add(&b, "abc", 3), 0);
    CU_ASSERT_EQUAL(rv_buf_addc(&b, '-'), 0);
    CU_ASSERT_EQUAL(rv_buf_adds(&b, "def"), 0);
    CU_ASSERT_EQUAL(rv_buf_add(&b, NULL, 0), 0);
    CU_ASSERT_EQUAL(b.len, 7);
    CU_ASSERT_STRING_EQUAL(rv_buf_str(&b), "abc-def");
    /* Growth over many small appends keeps every byte. */
    for (int i = 0; i < 10000; i++)
        CU_ASSERT_EQUAL_FATAL(rv_buf_addc(&b, 'a' + i % 26), 0);
    CU_ASSERT_EQUAL(b.len, 10007);
    CU_ASSERT_EQUAL(b.p[7], 'a');
    CU_ASSERT_EQUAL(b.p[10006], 'a' + 9999 % 26);
    CU_ASSERT_EQUAL(b.p[b.len], '\0');
    rv_buf_reset(&b);
    CU_ASSERT_EQUAL(b.len, 0);
    CU_ASSERT_STRING_EQUAL(rv_buf_str(&b), "");
    rv_buf_free(&b);
    CU_ASSERT_PTR_NULL(b.p);
    CU_ASSERT_EQUAL(b.max, 1 << 20);
    rv_buf_free(&b); /* twice is fine */
    rv_buf_free(NULL);
}

static void test_buf_cap(void)
{
    rv_buf b = RV_BUF_INIT(10);
    CU_ASSERT_EQUAL(rv_buf_add(&b, "0123456789", 10), 0); /* exactly the cap */
    CU_ASSERT_EQUAL(b.len, 10);
    CU_ASSERT(b.alloc <= 11); /* never allocates past cap + NUL */
    CU_ASSERT_EQUAL(rv_buf_addc(&b, 'x'), RV_ERR_LIMIT);
    CU_ASSERT_STRING_EQUAL(rv_buf_str(&b), "0123456789");
    /* Sticky: a later append that would fit fails too. */
    CU_ASSERT_EQUAL(rv_buf_add(&b, "", 0), RV_ERR_LIMIT);
    CU_ASSERT_EQUAL(b.err, RV_ERR_LIMIT);
    /* A failed write is taken as NULL (and freed). */
    size_t n = 99;
    CU_ASSERT_PTR_NULL(rv_buf_take(&b, &n));
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_PTR_NULL(b.p);

    /* All or nothing: an append that would cross the cap adds nothing. */
    rv_buf_init(&b, 8);
    CU_ASSERT_EQUAL(rv_buf_adds(&b, "abcde"), 0);
    CU_ASSERT_EQUAL(rv_buf_adds(&b, "fghij"), RV_ERR_LIMIT);
    CU_ASSERT_STRING_EQUAL(rv_buf_str(&b), "abcde");
    rv_buf_reset(&b); /* clears the error */
    CU_ASSERT_EQUAL(rv_buf_adds(&b, "12345678"), 0);
    CU_ASSERT_EQUAL(rv_buf_printf(&b, "%d", 9), RV_ERR_LIMIT);
    CU_ASSERT_STRING_EQUAL(rv_buf_str(&b), "12345678");
    rv_buf_free(&b);

    /* A zero cap holds nothing; a huge one does not overflow. */
    rv_buf_init(&b, 0);
    CU_ASSERT_EQUAL(rv_buf_addc(&b, 'a'), RV_ERR_LIMIT);
    rv_buf_free(&b);
    rv_buf_init(&b, SIZE_MAX);
    CU_ASSERT_EQUAL(rv_buf_adds(&b, "ok"), 0);
    CU_ASSERT_EQUAL(rv_buf_add(&b, "x", SIZE_MAX), RV_ERR_LIMIT);
    rv_buf_free(&b);
}

static void test_buf_printf(void)
{
    rv_buf b = RV_BUF_INIT(1 << 20);
    CU_ASSERT_EQUAL(rv_buf_printf(&b, "%s=%d", "x", 42), 0);
    CU_ASSERT_EQUAL(rv_buf_printf(&b, "%s", ""), 0);
    CU_ASSERT_STRING_EQUAL(rv_buf_str(&b), "x=42");
    /* Longer than any room there is: grows to fit in one call. */
    char big[5000];
    memset(big, 'q', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    CU_ASSERT_EQUAL(rv_buf_printf(&b, "[%s]", big), 0);
    CU_ASSERT_EQUAL(b.len, 4 + 2 + 4999);
    CU_ASSERT_EQUAL(b.p[4], '[');
    CU_ASSERT_EQUAL(b.p[b.len - 1], ']');
    CU_ASSERT_EQUAL(strlen(b.p), b.len);
    rv_buf_free(&b);

    /* A printf that passes the cap leaves the old contents NUL-terminated. */
    rv_buf_init(&b, 300);
    CU_ASSERT_EQUAL(rv_buf_adds(&b, "keep"), 0);
    CU_ASSERT_EQUAL(rv_buf_printf(&b, "%s", big), RV_ERR_LIMIT);
    CU_ASSERT_STRING_EQUAL(rv_buf_str(&b), "keep");
    rv_buf_free(&b);
}

static void test_buf_take_reserve(void)
{
    rv_buf b = RV_BUF_INIT(64);
    size_t n = 99;
    char *s = rv_buf_take(&b, &n); /* never written: a fresh "" */
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_STRING_EQUAL(s, "");
    CU_ASSERT_EQUAL(n, 0);
    free(s);
    CU_ASSERT_EQUAL(rv_buf_adds(&b, "hello"), 0);
    s = rv_buf_take(&b, &n);
    CU_ASSERT_STRING_EQUAL(s, "hello");
    CU_ASSERT_EQUAL(n, 5);
    CU_ASSERT_PTR_NULL(b.p); /* b gave the bytes away and is empty */
    CU_ASSERT_EQUAL(b.len, 0);
    CU_ASSERT_EQUAL(b.max, 64);
    free(s);

    /* Writing the tail directly. */
    char *w = rv_buf_reserve(&b, 10);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    CU_ASSERT(rv_buf_room(&b) >= 10);
    memcpy(w, "0123456789", 10);
    rv_buf_commit(&b, 10);
    CU_ASSERT_STRING_EQUAL(rv_buf_str(&b), "0123456789");
    CU_ASSERT(b.len + rv_buf_room(&b) <= 64); /* room stays under the cap */
    CU_ASSERT_PTR_NULL(rv_buf_reserve(&b, 55));
    CU_ASSERT_EQUAL(b.err, RV_ERR_LIMIT);
    rv_buf_free(&b);
}

/* ---------------------------------------------------------------- rv_jsonw */

/* The literal rv_jsonw_strn writes for n bytes of s. */
static char *lit(const char *s, size_t n)
{
    rv_buf b = RV_BUF_INIT(1 << 16);
    CU_ASSERT_EQUAL(rv_jsonw_strn(&b, s, n), 0);
    return rv_buf_take(&b, NULL);
}

static void check_lit(const char *in, size_t n, const char *want)
{
    char *got = lit(in, n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    if (strcmp(got, want) != 0)
        fprintf(stderr, "\n  rv_jsonw: got %s want %s\n", got, want);
    CU_ASSERT_STRING_EQUAL(got, want);
    free(got);
}

#define CHECK_LIT(in, want) check_lit((in), sizeof(in) - 1, (want))

static void test_jsonw_ascii(void)
{
    CHECK_LIT("", "\"\"");
    CHECK_LIT("ampere_sgemm_128x64_nn", "\"ampere_sgemm_128x64_nn\"");
    CHECK_LIT("a\"b\\c/d", "\"a\\\"b\\\\c/d\"");
    /* Control characters as \u00xx, lowercase; DEL passes. */
    CHECK_LIT("\x01\t\n\r\x1f\x7f", "\"\\u0001\\u0009\\u000a\\u000d\\u001f\x7f\"");
    CHECK_LIT("a\0b", "\"a\\u0000b\"");
}

static void test_jsonw_utf8(void)
{
    /* Well-formed multi-byte sequences are kept as they are. */
    CHECK_LIT("caf\xc3\xa9", "\"caf\xc3\xa9\"");           /* U+00E9 */
    CHECK_LIT("\xe2\x82\xac", "\"\xe2\x82\xac\"");         /* U+20AC */
    CHECK_LIT("\xed\x9f\xbf", "\"\xed\x9f\xbf\"");         /* U+D7FF */
    CHECK_LIT("\xee\x80\x80", "\"\xee\x80\x80\"");         /* U+E000 */
    CHECK_LIT("\xf0\x9f\x98\x80", "\"\xf0\x9f\x98\x80\""); /* U+1F600 */
    CHECK_LIT("\xf4\x8f\xbf\xbf", "\"\xf4\x8f\xbf\xbf\""); /* U+10FFFF */
    CHECK_LIT("\xef\xbf\xbd", "\"\xef\xbf\xbd\"");         /* U+FFFD itself */
    /* Overlong forms. */
    CHECK_LIT("\xc0\xaf", "\"\\ufffd\\ufffd\"");
    CHECK_LIT("\xc1\xbf", "\"\\ufffd\\ufffd\"");
    CHECK_LIT("\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\"");
    CHECK_LIT("\xf0\x80\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
    /* UTF-16 surrogates encoded in UTF-8 (CESU). */
    CHECK_LIT("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");
    CHECK_LIT("\xed\xbf\xbf", "\"\\ufffd\\ufffd\\ufffd\"");
    /* Past U+10FFFF and bytes that never occur. */
    CHECK_LIT("\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
    CHECK_LIT("\xf5\xff\xfe", "\"\\ufffd\\ufffd\\ufffd\"");
    /* A lone continuation byte, and sequences cut short: one \ufffd per
     * byte, and the byte after the cut is read on its own again. */
    CHECK_LIT("a\x80z", "\"a\\ufffdz\"");
    CHECK_LIT("\xe2\x82", "\"\\ufffd\\ufffd\"");
    CHECK_LIT("\xe2\x82z", "\"\\ufffd\\ufffdz\"");
    CHECK_LIT("\xf0\x9f\x98", "\"\\ufffd\\ufffd\\ufffd\"");
    CHECK_LIT("\xc3\"", "\"\\ufffd\\\"\"");
    CHECK_LIT("x\xc3", "\"x\\ufffd\"");
}

static void test_jsonw_file_and_fix(void)
{
    /* The FILE variant writes what the buffer variant writes. */
    const char *s = "k\xc3\xa9rnel \"x\"\n\xff";
    char *want = lit(s, strlen(s));
    char got[256] = "";
    FILE *f = fmemopen(got, sizeof(got), "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(rv_jsonw_str_file(f, s), 0);
    fclose(f);
    CU_ASSERT_STRING_EQUAL(got, want);
    free(want);
    /* rv_jsonw_str is rv_jsonw_strn up to the NUL. */
    rv_buf b = RV_BUF_INIT(64);
    CU_ASSERT_EQUAL(rv_jsonw_str(&b, "ab"), 0);
    CU_ASSERT_STRING_EQUAL(rv_buf_str(&b), "\"ab\"");
    /* The cap of the buffer applies. */
    rv_buf_free(&b);
    rv_buf_init(&b, 4);
    CU_ASSERT_EQUAL(rv_jsonw_str(&b, "abcdef"), RV_ERR_LIMIT);
    rv_buf_free(&b);

    /* UTF-8 checks and repair. */
    CU_ASSERT_EQUAL(rv_jsonw_utf8_seq("\xc3\xa9", 2), 2);
    CU_ASSERT_EQUAL(rv_jsonw_utf8_seq("\xc3\xa9", 1), 0);
    CU_ASSERT_EQUAL(rv_jsonw_utf8_seq("", 0), 0);
    CU_ASSERT_EQUAL(rv_jsonw_utf8_valid("plain ascii text, long", 22), 22);
    CU_ASSERT_EQUAL(rv_jsonw_utf8_valid("0123456789\xe2\x82\xac\x80", 14), 13);
    rv_buf_init(&b, 64);
    CU_ASSERT_EQUAL(rv_jsonw_utf8_fix(&b, "a\xff\xc3\xa9\xe2\x82", 6), 0);
    CU_ASSERT_STRING_EQUAL(rv_buf_str(&b), "a\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd");
    CU_ASSERT_EQUAL(rv_jsonw_utf8_valid(b.p, b.len), b.len);
    rv_buf_free(&b);
}

/* ---------------------------------------------------------------- rv_sort */

typedef struct rec {
    int64_t key;
    uint32_t seq; /* input position, to check stability */
    uint32_t pad;
    uint64_t ukey;
} rec;

static uint64_t g_rng = 88172645463325252ULL;
static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

/* Sorted by key (signed or not) and, among equal keys, by input order. */
static int sorted_stable(const rec *v, size_t n, int is_signed)
{
    for (size_t i = 1; i < n; i++) {
        int lt = is_signed ? v[i - 1].key < v[i].key : v[i - 1].ukey < v[i].ukey;
        int eq = is_signed ? v[i - 1].key == v[i].key : v[i - 1].ukey == v[i].ukey;
        if (!lt && !(eq && v[i - 1].seq < v[i].seq))
            return 0;
    }
    return 1;
}

static void fill(rec *v, size_t n, uint64_t mask, int negative)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rnd() & mask;
        v[i].key = negative ? (int64_t)r - (int64_t)(mask / 2) : (int64_t)r;
        v[i].ukey = rnd() & mask;
        v[i].seq = (uint32_t)i;
        v[i].pad = 0;
    }
}

/* Whether n 11-byte records keyed at byte 3 are in key order. */
static int odd_sorted(const char *odd, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        uint64_t a, b;
        memcpy(&a, odd + (i - 1) * 11 + 3, 8);
        memcpy(&b, odd + i * 11 + 3, 8);
        if (a > b)
            return 0;
    }
    return 1;
}

static void *add_one(void *arg)
{
    ++*(int *)arg;
    return NULL;
}

/* Work on the side is done once by the join, whichever thread ran it;
 * joining again, or a zeroed handle, does nothing. */
static void test_bg(void)
{
    int n = 0;
    rv_bg b = {0}, idle = {0};
    rv_bg_start(&b, add_one, &n);
    rv_bg_join(&b);
    CU_ASSERT_EQUAL(n, 1);
    rv_bg_join(&b);
    rv_bg_join(&idle);
    CU_ASSERT_EQUAL(n, 1);
    CU_ASSERT_FALSE(b.running);
}

/* A name table finds exact names only: not a prefix, not a longer name,
 * not another case; an empty key finds an empty name only. */
static void test_names(void)
{
    static const rv_name tab[] = {RV_NAME("int", 1), RV_NAME("int64_t", 2), RV_NAME("", 3),
                                  RV_NAME("Half", 4)};
    size_t n = sizeof(tab) / sizeof(tab[0]);
    CU_ASSERT_EQUAL(tab[1].len, 7);
    CU_ASSERT_EQUAL(rv_names_find(tab, n, "int", 3, -1), 1);
    CU_ASSERT_EQUAL(rv_names_find(tab, n, "int64_t", 7, -1), 2);
    CU_ASSERT_EQUAL(rv_names_find(tab, n, "int64_t", 3, -1), 1); /* the first 3 bytes */
    CU_ASSERT_EQUAL(rv_names_find(tab, n, "in", 2, -1), -1);
    CU_ASSERT_EQUAL(rv_names_find(tab, n, "int6", 4, -1), -1);
    CU_ASSERT_EQUAL(rv_names_find(tab, n, "half", 4, -1), -1);
    CU_ASSERT_EQUAL(rv_names_find(tab, n, "Half", 4, -1), 4);
    CU_ASSERT_EQUAL(rv_names_find(tab, n, "", 0, -1), 3);
    CU_ASSERT_EQUAL(rv_names_find(tab, 0, "int", 3, -7), -7);
}

static void test_sort(void)
{
    /* 1100000: past a million records the digits are 16 bits, not 11. */
    const size_t sizes[] = {0, 1, 2, 31, 33, 1000, 100000, 1100000};
    const uint64_t masks[] = {0, 7, 0xffff, 0xfffffffffULL, UINT64_MAX};
    size_t nmax = 1100000;
    rec *v = malloc(nmax * sizeof(*v));
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
        for (size_t mi = 0; mi < sizeof(masks) / sizeof(masks[0]); mi++) {
            size_t n = sizes[si];
            fill(v, n, masks[mi], mi % 2);
            rv_sort_i64(v, n, sizeof(rec), offsetof(rec, key));
            CU_ASSERT(sorted_stable(v, n, 1));
            for (size_t i = 0; i < n; i++)
                v[i].seq = (uint32_t)i;
            rv_sort_u64(v, n, sizeof(rec), offsetof(rec, ukey));
            CU_ASSERT(sorted_stable(v, n, 0));
            /* The fallback on its own (it runs when scratch is short). */
            fill(v, n < 5000 ? n : 5000, masks[mi], mi % 2);
            rv_sort__inplace(v, n < 5000 ? n : 5000, sizeof(rec), offsetof(rec, key), 1);
            CU_ASSERT(sorted_stable(v, n < 5000 ? n : 5000, 1));
        }
    /* Extremes of the signed range. */
    rec e[4] = {{INT64_MAX, 0, 0, 0}, {INT64_MIN, 1, 0, 0}, {-1, 2, 0, 0}, {0, 3, 0, 0}};
    rv_sort_i64(e, 4, sizeof(rec), offsetof(rec, key));
    CU_ASSERT(e[0].key == INT64_MIN && e[1].key == -1 && e[2].key == 0 && e[3].key == INT64_MAX);
    /* Two stable passes give a two-key order: (ukey, key). */
    size_t n = 50000;
    fill(v, n, 0xff, 1);
    for (size_t i = 0; i < n; i++)
        v[i].ukey &= 3;
    rv_sort_i64(v, n, sizeof(rec), offsetof(rec, key));
    rv_sort_u64(v, n, sizeof(rec), offsetof(rec, ukey));
    int ok = 1;
    for (size_t i = 1; i < n; i++)
        if (v[i - 1].ukey > v[i].ukey || (v[i - 1].ukey == v[i].ukey && v[i - 1].key > v[i].key))
            ok = 0;
    CU_ASSERT(ok);
    /* An odd record size takes the generic copy. */
    char odd[1000 * 11];
    for (size_t i = 0; i < 1000; i++) {
        uint64_t k = rnd() % 5000;
        memcpy(odd + i * 11 + 3, &k, 8);
        odd[i * 11] = (char)(i & 0x7f);
    }
    rv_sort_u64(odd, 1000, 11, 3);
    CU_ASSERT(odd_sorted(odd, 1000));
    /* Presorted runs (a stream's tasks in time order) are merged, stably,
     * up to the run count where the radix passes take over; ties across
     * runs keep their input order. */
    const size_t runs[] = {1, 2, 3, 7, 8, 9, 40};
    for (size_t ri = 0; ri < sizeof(runs) / sizeof(runs[0]); ri++) {
        size_t per = 5000, m = runs[ri] * per;
        for (size_t r = 0; r < runs[ri]; r++) {
            int64_t at = (int64_t)(rnd() % 100);
            for (size_t i = 0; i < per; i++) {
                rec *x = &v[r * per + i];
                at += (int64_t)(rnd() % 3); /* steps of 0 make ties */
                x->key = at - 1000;
                x->ukey = (uint64_t)at;
                x->seq = (uint32_t)(r * per + i);
                x->pad = 0;
            }
        }
        rv_sort_i64(v, m, sizeof(rec), offsetof(rec, key));
        CU_ASSERT(sorted_stable(v, m, 1));
        for (size_t i = 0; i < m; i++)
            v[i].seq = (uint32_t)i;
        rv_sort_u64(v, m, sizeof(rec), offsetof(rec, ukey)); /* one run now */
        CU_ASSERT(sorted_stable(v, m, 0));
    }
    /* Runs of odd-sized records take the generic copy. */
    for (size_t i = 0; i < 1000; i++) {
        uint64_t k = (i % 500) * 3 + (i / 500);
        memcpy(odd + i * 11 + 3, &k, 8);
    }
    rv_sort_u64(odd, 1000, 11, 3);
    CU_ASSERT(odd_sorted(odd, 1000));
    free(v);
}

/* ---------------------------------------------------------------- rv_map */

static void test_map_u64(void)
{
    rv_map m;
    rv_map_init(&m, 1u << 20);
    uint32_t v = 7;
    CU_ASSERT_EQUAL(rv_map_get(&m, 1, &v), 0); /* empty: no table yet */
    CU_ASSERT_EQUAL(v, 7);
    /* Keys that differ in the high bits only, and 0 and ~0. */
    for (uint64_t i = 0; i < 100000; i++)
        CU_ASSERT_EQUAL_FATAL(rv_map_put(&m, i << 40 | 5, (uint32_t)i), 1);
    CU_ASSERT_EQUAL(rv_map_put(&m, 0, 11), 1);
    CU_ASSERT_EQUAL(rv_map_put(&m, UINT64_MAX, RV_MAP_MAX_VALUE), 1);
    CU_ASSERT_EQUAL(m.n, 100002);
    CU_ASSERT(m.n * 2 <= m.cap);
    for (uint64_t i = 0; i < 100000; i++) {
        CU_ASSERT_EQUAL_FATAL(rv_map_get(&m, i << 40 | 5, &v), 1);
        CU_ASSERT_EQUAL_FATAL(v, (uint32_t)i);
    }
    CU_ASSERT(rv_map_get(&m, 0, &v) == 1 && v == 11);
    CU_ASSERT(rv_map_get(&m, UINT64_MAX, &v) == 1 && v == RV_MAP_MAX_VALUE);
    CU_ASSERT_EQUAL(rv_map_get(&m, 6, NULL), 0);
    /* First put wins. */
    CU_ASSERT_EQUAL(rv_map_put(&m, 5, 99), 0);
    CU_ASSERT(rv_map_get(&m, 5, &v) == 1 && v == 0);
    CU_ASSERT_EQUAL(rv_map_put(&m, 12345, UINT32_MAX), RV_ERR_INVALID);
    CU_ASSERT(rv_map_bytes(&m) == m.cap * 12);
    rv_map_free(&m);
    CU_ASSERT_EQUAL(m.cap, 0);
    CU_ASSERT_EQUAL(rv_map_get(&m, 5, NULL), 0);
    rv_map_free(NULL);

    /* The cap on entries. */
    rv_map_init(&m, 3);
    CU_ASSERT_EQUAL(rv_map_put(&m, 1, 1), 1);
    CU_ASSERT_EQUAL(rv_map_put(&m, 2, 2), 1);
    CU_ASSERT_EQUAL(rv_map_put(&m, 3, 3), 1);
    CU_ASSERT_EQUAL(rv_map_put(&m, 4, 4), RV_ERR_LIMIT);
    CU_ASSERT_EQUAL(rv_map_put(&m, 3, 9), 0); /* present is not an error */
    CU_ASSERT_EQUAL(rv_map_reserve(&m, 4), RV_ERR_LIMIT);
    rv_map_free(&m);
    /* Reserve up front: no rehash (the table stays put) while filling. */
    rv_map_init(&m, 1000);
    CU_ASSERT_EQUAL(rv_map_reserve(&m, 1000), 0);
    uint64_t *keys = m.keys;
    for (uint32_t i = 0; i < 1000; i++)
        rv_map_put(&m, i * 3, i);
    CU_ASSERT_PTR_EQUAL(m.keys, keys);
    rv_map_free(&m);
}

/* String keys kept outside the map, as the trace's string table does. */
typedef struct strs {
    const char *s[8];
} strs;

static int same_str(const void *ctx, uint32_t id, const void *key, size_t n)
{
    const strs *t = ctx;
    return strlen(t->s[id]) == n && memcmp(t->s[id], key, n) == 0;
}

static void test_map_strings(void)
{
    strs t = {{"", "kernel", "cpu_op", "ncclKernel_AllReduce", "kern"}};
    rv_map m;
    rv_map_init(&m, 100);
    for (uint32_t i = 0; i < 5; i++) {
        uint64_t h = rv_map_hash(t.s[i], strlen(t.s[i]));
        CU_ASSERT_EQUAL(rv_map_find(&m, h, same_str, &t, t.s[i], strlen(t.s[i]), NULL), 0);
        CU_ASSERT_EQUAL(rv_map_add(&m, h, i), 0);
    }
    for (uint32_t i = 0; i < 5; i++) {
        uint32_t id = 99;
        CU_ASSERT_EQUAL(rv_map_find(&m, rv_map_hash(t.s[i], strlen(t.s[i])), same_str, &t, t.s[i],
                                    strlen(t.s[i]), &id),
                        1);
        CU_ASSERT_EQUAL(id, i);
    }
    CU_ASSERT_EQUAL(rv_map_find(&m, rv_map_hash("kerne", 5), same_str, &t, "kerne", 5, NULL), 0);
    /* Entries that share a hash: same() tells them apart. */
    t.s[5] = "alpha";
    t.s[6] = "beta";
    CU_ASSERT_EQUAL(rv_map_add(&m, 42, 5), 0);
    CU_ASSERT_EQUAL(rv_map_add(&m, 42, 6), 0);
    uint32_t id = 0;
    CU_ASSERT(rv_map_find(&m, 42, same_str, &t, "beta", 4, &id) == 1 && id == 6);
    CU_ASSERT(rv_map_find(&m, 42, same_str, &t, "alpha", 5, &id) == 1 && id == 5);
    CU_ASSERT_EQUAL(rv_map_find(&m, 42, same_str, &t, "gamma", 5, &id), 0);
    /* FNV-1a 64 reference values. */
    CU_ASSERT_EQUAL(rv_map_hash("", 0), 14695981039346656037ULL);
    CU_ASSERT_EQUAL(rv_map_hash("a", 1), 0xaf63dc4c8601ec8cULL);
    rv_map_free(&m);
}

/* A code returned without a message gets one; a filled record is kept. */
static void test_error_ensure(void)
{
    rv_error e;
    rv_error_clear(&e);
    CU_ASSERT_EQUAL(rv_error_ensure(&e, 0, "x"), 0);
    CU_ASSERT_EQUAL(e.code, RV_OK);
    CU_ASSERT_EQUAL(rv_error_ensure(&e, RV_ERR_NOMEM, "simulating the graph"), RV_ERR_NOMEM);
    CU_ASSERT_EQUAL(e.code, RV_ERR_NOMEM);
    CU_ASSERT_STRING_EQUAL(e.message, "simulating the graph failed: out_of_memory");
    rv_error_set(&e, RV_ERR_INVALID, -1, -1, "first");
    CU_ASSERT_EQUAL(rv_error_ensure(&e, RV_ERR_NOMEM, "later"), RV_ERR_NOMEM);
    CU_ASSERT_STRING_EQUAL(e.message, "first");
    CU_ASSERT_EQUAL(rv_error_ensure(NULL, RV_ERR_NOMEM, "x"), RV_ERR_NOMEM);
    /* Reason and place are reset by every new error. */
    CU_ASSERT_EQUAL(rv_error_tag(&e, RV_REASON_EVENTS, RV_ERR_LIMIT), RV_ERR_LIMIT);
    rv_error_placed(&e, 0);
    CU_ASSERT_EQUAL(e.reason, RV_REASON_EVENTS);
    CU_ASSERT_TRUE(e.placed);
    rv_error_field(&e, RV_ERR_INVALID, "f", "again");
    CU_ASSERT_EQUAL(e.reason, RV_REASON_NONE);
    CU_ASSERT_FALSE(e.placed);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("util", NULL, NULL);
    CU_add_test(s, "rv_error_ensure, reason and place", test_error_ensure);
    CU_add_test(s, "rv_buf basics", test_buf_basic);
    CU_add_test(s, "rv_buf cap", test_buf_cap);
    CU_add_test(s, "rv_buf printf", test_buf_printf);
    CU_add_test(s, "rv_buf take and reserve", test_buf_take_reserve);
    CU_add_test(s, "rv_jsonw ascii and escapes", test_jsonw_ascii);
    CU_add_test(s, "rv_jsonw utf-8", test_jsonw_utf8);
    CU_add_test(s, "rv_jsonw file and repair", test_jsonw_file_and_fix);
    CU_add_test(s, "rv_sort", test_sort);
    CU_add_test(s, "rv_names", test_names);
    CU_add_test(s, "rv_bg", test_bg);
    CU_add_test(s, "rv_map u64 keys", test_map_u64);
    CU_add_test(s, "rv_map string keys", test_map_strings);
    return rv_test_run() ? 1 : 0;
}
