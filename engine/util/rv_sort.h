/* The one radix sort: a stable sort of fixed-size records by a 64-bit key
 * inside each record, linear in the record count.
 *
 * LSD radix on 11-bit digits of key - min (16-bit from a million records
 * on): only the digits the key range spans get a pass (a 1 s window of ns
 * timestamps takes three), one read counts them all, and a pass whose
 * digit is the same everywhere is skipped. Stability makes multi-key
 * orders easy: sort by the least significant key first, then by each more
 * significant one. Input that is already up to 8 sorted runs (found in
 * the pass that reads the key range) is merged instead, stably: a stream's
 * tasks come in time order. Scratch is one copy of the records plus the
 * counts (at most 2 MiB); when that cannot be had the sort still finishes,
 * stable, in place, in O(n log^2 n) (rotation-based merges). See
 * docs/internals/engine.md. */
#ifndef RV_SORT_H
#define RV_SORT_H

#include <stddef.h>
#include <stdint.h>

/* Sorts n records of size bytes at base by the uint64_t key at byte offset
 * key_off of each record (it need not be aligned). Equal keys keep their
 * order. */
void rv_sort_u64(void *base, size_t n, size_t size, size_t key_off);

/* Same for an int64_t key (negative keys sort first). */
void rv_sort_i64(void *base, size_t n, size_t size, size_t key_off);

/* The comparison sorts and medians every module uses, so that no module
 * keeps its own comparator or median (qsort with a three-way compare). */
void rv_sort_i64s(int64_t *v, size_t n);
void rv_sort_doubles(double *v, size_t n);

/* The median of v, the mean of the middle pair for an even n; 0 for n 0.
 * Sorts v. */
double rv_sort_median(double *v, size_t n);

/* The element of rank n/2 (upper median) by quickselect, O(n) on average;
 * dflt for n 0. Reorders v. */
int64_t rv_sort_median_i64(int64_t *v, size_t n, int64_t dflt);

/* Internal, for tests: the in-place fallback on its own. */
void rv_sort__inplace(void *base, size_t n, size_t size, size_t key_off, int is_signed);

#endif
