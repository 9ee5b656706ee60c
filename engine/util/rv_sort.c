/* The LSD radix sort and its in-place fallback. See rv_sort.h. */
#include "util/rv_sort.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Digits of 11 bits below BIG_N records, 16 above: a 16-bit pass clears
 * and sums 65,536 counters, more than a small sort's records, and spreads
 * its writes over as many places; 11-bit passes stay in the cache (three
 * of them cost what two 16-bit ones do at 200k records). */
#define BIG_N    ((size_t)1 << 20)
#define MAX_BITS 16
#define SMALL    32 /* below this an insertion sort beats the passes */

#define SIGN_FLIP 0x8000000000000000ULL

/* The key as an unsigned number in sort order: flip is SIGN_FLIP for signed
 * keys, which maps INT64_MIN..INT64_MAX onto 0..UINT64_MAX. */
static inline uint64_t key_at(const char *rec, size_t key_off, uint64_t flip)
{
    uint64_t k;
    memcpy(&k, rec + key_off, sizeof(k));
    return k ^ flip;
}

static void swap_recs(char *a, char *b, size_t size)
{
    char tmp[64];
    while (size) {
        size_t k = size < sizeof(tmp) ? size : sizeof(tmp);
        memcpy(tmp, a, k);
        memcpy(a, b, k);
        memcpy(b, tmp, k);
        a += k;
        b += k;
        size -= k;
    }
}

static void insertion(char *v, size_t n, size_t size, size_t key_off, uint64_t flip)
{
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0; j--) {
            char *a = v + (j - 1) * size, *b = v + j * size;
            if (key_at(a, key_off, flip) <= key_at(b, key_off, flip))
                break;
            swap_recs(a, b, size);
        }
}

/* ---- the fallback: stable, in place, O(n log^2 n) ----------------------- */

static void reverse(char *v, size_t n, size_t size)
{
    for (size_t i = 0, j = n; i + 1 < j; i++, j--)
        swap_recs(v + i * size, v + (j - 1) * size, size);
}

/* [l records][r records] -> [r records][l records]. */
static void rotate(char *v, size_t l, size_t r, size_t size)
{
    reverse(v, l, size);
    reverse(v + l * size, r, size);
    reverse(v, l + r, size);
}

/* First record in v[0..n) whose key is > k (upper) or >= k (lower). */
static size_t bound(const char *v, size_t n, size_t size, size_t key_off, uint64_t flip, uint64_t k,
                    int upper)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t x = key_at(v + mid * size, key_off, flip);
        if (upper ? x <= k : x < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Merges the sorted runs v[0..n1) and v[n1..n1+n2) without a buffer: split
 * the longer run in half, find where its middle goes in the other, rotate,
 * and merge the two smaller pairs (libstdc++'s __merge_without_buffer). */
static void merge(char *v, size_t n1, size_t n2, size_t size, size_t key_off, uint64_t flip)
{
    if (n1 == 0 || n2 == 0)
        return;
    if (n1 + n2 == 2) {
        if (key_at(v + size, key_off, flip) < key_at(v, key_off, flip))
            swap_recs(v, v + size, size);
        return;
    }
    size_t cut1, cut2;
    if (n1 > n2) {
        cut1 = n1 / 2;
        cut2 = bound(v + n1 * size, n2, size, key_off, flip, key_at(v + cut1 * size, key_off, flip),
                     0);
    } else {
        cut2 = n2 / 2;
        cut1 = bound(v, n1, size, key_off, flip, key_at(v + (n1 + cut2) * size, key_off, flip), 1);
    }
    rotate(v + cut1 * size, n1 - cut1, cut2, size);
    merge(v, cut1, cut2, size, key_off, flip);
    merge(v + (cut1 + cut2) * size, n1 - cut1, n2 - cut2, size, key_off, flip);
}

static void sort_inplace(char *v, size_t n, size_t size, size_t key_off, uint64_t flip)
{
    if (n <= SMALL) {
        insertion(v, n, size, key_off, flip);
        return;
    }
    size_t mid = n / 2;
    sort_inplace(v, mid, size, key_off, flip);
    sort_inplace(v + mid * size, n - mid, size, key_off, flip);
    merge(v, mid, n - mid, size, key_off, flip);
}

void rv_sort__inplace(void *base, size_t n, size_t size, size_t key_off, int is_signed)
{
    sort_inplace(base, n, size, key_off, is_signed ? SIGN_FLIP : 0);
}

/* ---- the radix sort ----------------------------------------------------- */

/* One counting pass moving src to dst by digit; the record size is a
 * constant in the common cases so that the copy compiles to moves. */
#define SCATTER(SZ)                                                                                \
    for (size_t i = 0; i < n; i++) {                                                               \
        const char *r_ = src + i * (SZ);                                                           \
        size_t d_ = (size_t)(((key_at(r_, key_off, flip) - lo) >> shift) & mask);                  \
        memcpy(dst + count[d_]++ * (SZ), r_, (SZ));                                                \
    }

/* ---- presorted runs ----------------------------------------------------- */

/* Records often arrive as a few sorted runs (a stream's tasks, one after
 * another, are in time order): merging the runs reads and writes in
 * sequence, where a radix pass scatters. */
#define MAX_RUNS 8

/* Merges src's runs [at[k], at[k+1]) pairwise into dst; the run count
 * halves (rounded up) and at[] follows. Stable: equal keys take the left. */
static size_t merge_pass(const char *src, char *dst, size_t *at, size_t nruns, size_t size,
                         size_t key_off, uint64_t flip)
{
    size_t out = 0;
    for (size_t r = 0; r < nruns; r += 2) {
        /* at[nruns] is the end: a last odd run is copied as it is. */
        size_t i = at[r], mid = at[r + 1 < nruns ? r + 1 : nruns];
        size_t end = at[r + 2 < nruns ? r + 2 : nruns], o = i, j = mid;
        while (i < mid && j < end) {
            if (key_at(src + j * size, key_off, flip) < key_at(src + i * size, key_off, flip))
                memcpy(dst + o++ * size, src + j++ * size, size);
            else
                memcpy(dst + o++ * size, src + i++ * size, size);
        }
        memcpy(dst + o * size, src + i * size, (mid - i) * size);
        o += mid - i;
        memcpy(dst + o * size, src + j * size, (end - j) * size);
        at[out++] = at[r];
    }
    at[out] = at[nruns];
    return out;
}

/* Sorts v[0..n), made of nruns sorted runs starting at at[0..nruns) (at[nruns]
 * is n), by merging them. 0, or -1 when scratch cannot be had. */
static int merge_runs(char *v, size_t n, size_t size, size_t key_off, uint64_t flip, size_t *at,
                      size_t nruns)
{
    char *tmp = n <= SIZE_MAX / size ? malloc(n * size) : NULL;
    if (!tmp)
        return -1;
    char *src = v, *dst = tmp;
    while (nruns > 1) {
        nruns = merge_pass(src, dst, at, nruns, size, key_off, flip);
        char *t = src;
        src = dst;
        dst = t;
    }
    if (src != v)
        memcpy(v, src, n * size);
    free(tmp);
    return 0;
}

static void sort_keyed(void *base, size_t n, size_t size, size_t key_off, uint64_t flip)
{
    char *v = base;
    if (n < 2)
        return;
    if (n <= SMALL) {
        insertion(v, n, size, key_off, flip);
        return;
    }
    /* One read: the key range, and where the sorted runs start. */
    size_t run_at[MAX_RUNS + 1], nruns = 1;
    run_at[0] = 0;
    uint64_t lo = key_at(v, key_off, flip), hi = lo, prev = lo;
    for (size_t i = 1; i < n; i++) {
        uint64_t k = key_at(v + i * size, key_off, flip);
        if (k < prev) {
            if (nruns < MAX_RUNS)
                run_at[nruns] = i;
            nruns++;
        }
        prev = k;
        if (k < lo)
            lo = k;
        if (k > hi)
            hi = k;
    }
    uint64_t range = hi - lo;
    if (range == 0 || nruns == 1)
        return;
    if (nruns <= MAX_RUNS) {
        run_at[nruns] = n;
        if (merge_runs(v, n, size, key_off, flip, run_at, nruns) == 0)
            return;
    }
    int bits = n < BIG_N ? 11 : MAX_BITS, npass = 0;
    size_t digits = (size_t)1 << bits, mask = digits - 1;
    while (npass * bits < 64 && (range >> (npass * bits)) != 0)
        npass++;
    char *tmp = n <= SIZE_MAX / size ? malloc(n * size) : NULL;
    /* Every pass's counts from one read (off the stack: worker threads). */
    size_t *counts = calloc((size_t)npass * digits, sizeof(*counts));
    if (!tmp || !counts) {
        free(tmp);
        free(counts);
        sort_inplace(v, n, size, key_off, flip);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t k = key_at(v + i * size, key_off, flip) - lo;
        for (int p = 0; p < npass; p++)
            counts[(size_t)p * digits + ((k >> (p * bits)) & mask)]++;
    }
    char *src = v, *dst = tmp;
    for (int p = 0; p < npass; p++) {
        size_t *count = counts + (size_t)p * digits;
        int shift = p * bits;
        size_t first = (size_t)((key_at(src, key_off, flip) - lo) >> shift & mask);
        if (count[first] == n)
            continue; /* one digit everywhere: the pass would copy in order */
        /* Counts to starts. */
        for (size_t d = 0, at = 0; d < digits; d++) {
            size_t c = count[d];
            count[d] = at;
            at += c;
        }
        switch (size) {
        case 8: SCATTER(8); break;
        case 16: SCATTER(16); break;
        case 24: SCATTER(24); break;
        case 32: SCATTER(32); break;
        default: SCATTER(size); break;
        }
        char *t = src;
        src = dst;
        dst = t;
    }
    if (src != v)
        memcpy(v, src, n * size);
    free(tmp);
    free(counts);
}

void rv_sort_u64(void *base, size_t n, size_t size, size_t key_off)
{
    sort_keyed(base, n, size, key_off, 0);
}

void rv_sort_i64(void *base, size_t n, size_t size, size_t key_off)
{
    sort_keyed(base, n, size, key_off, SIGN_FLIP);
}

static int cmp_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

static int cmp_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

void rv_sort_i64s(int64_t *v, size_t n)
{
    if (n > 1)
        qsort(v, n, sizeof(*v), cmp_i64);
}

void rv_sort_doubles(double *v, size_t n)
{
    if (n > 1)
        qsort(v, n, sizeof(*v), cmp_double);
}

double rv_sort_median(double *v, size_t n)
{
    if (n == 0)
        return 0;
    rv_sort_doubles(v, n);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The element of rank n/2 (upper median), by quickselect: O(n) on average
 * instead of a full sort. Reorders v. */
int64_t rv_sort_median_i64(int64_t *v, size_t n, int64_t dflt)
{
    if (n == 0)
        return dflt;
    size_t lo = 0, hi = n - 1, k = n / 2;
    while (lo < hi) {
        int64_t pivot = v[lo + (hi - lo) / 2];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                int64_t t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            break;
    }
    return v[k];
}
