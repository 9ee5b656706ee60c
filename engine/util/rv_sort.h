/* The one radix sort: a stable sort of fixed-size records by a 64-bit key
 * inside each record, linear in the record count.
 *
 * LSD radix on 16-bit digits of key - min: only the digits the key range
 * spans get a pass (a 100 ms window of ns timestamps takes two), and a pass
 * whose digit is the same everywhere is skipped. Stability makes multi-key
 * orders easy: sort by the least significant key first, then by each more
 * significant one. Scratch is one copy of the records plus 512 KiB; when
 * that cannot be had the sort still finishes, stable, in place, in
 * O(n log^2 n) (rotation-based merges). See docs/internals/engine.md. */
#ifndef RV_SORT_H
#define RV_SORT_H

#include <stddef.h>

/* Sorts n records of size bytes at base by the uint64_t key at byte offset
 * key_off of each record (it need not be aligned). Equal keys keep their
 * order. */
void rv_sort_u64(void *base, size_t n, size_t size, size_t key_off);

/* Same for an int64_t key (negative keys sort first). */
void rv_sort_i64(void *base, size_t n, size_t size, size_t key_off);

/* Internal, for tests: the in-place fallback on its own. */
void rv_sort__inplace(void *base, size_t n, size_t size, size_t key_off, int is_signed);

#endif
