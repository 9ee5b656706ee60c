/* The one hash map: 64-bit keys to 32-bit values (ids, indices), open
 * addressing with linear probing over a power-of-two table kept at most half
 * full, doubling as it fills, up to a cap on entries.
 *
 * Two uses. Integer keys (correlation ids, packed thread keys): rv_map_put
 * and rv_map_get, one value per key, the first one put wins. String keys
 * whose text lives elsewhere (the trace's string table): the map holds
 * rv_map_hash(text) -> id, rv_map_add adds an entry without looking, and
 * rv_map_find walks the entries with that hash and asks the caller's same()
 * which one holds the text; the full 64-bit hash is compared first, so
 * same() runs about once per hit. */
#ifndef RV_MAP_H
#define RV_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct rv_map {
    uint64_t *keys; /* key, or hash of a string key */
    uint32_t *vals; /* value + 1; 0 marks an empty slot */
    size_t cap;     /* slots: 0 before the first insert, else a power of two */
    size_t n;       /* entries */
    size_t max;     /* cap on entries */
} rv_map;

/* Largest value a map can hold (values are stored plus one). */
#define RV_MAP_MAX_VALUE (UINT32_MAX - 1)

/* Sets m up empty, holding at most max entries. Allocates nothing. */
void rv_map_init(rv_map *m, size_t max);

/* Frees the table; m stays usable, empty, with the same cap. NULL-safe. */
void rv_map_free(rv_map *m);

/* Forgets every entry, keeping the table's memory for reuse. NULL-safe. */
void rv_map_clear(rv_map *m);

/* Sizes the table for n entries up front, so inserts up to n never
 * rehash. 0, RV_ERR_LIMIT past the cap, RV_ERR_NOMEM. */
int rv_map_reserve(rv_map *m, size_t n);

/* Integer keys: stores key -> val unless key is present (then the first
 * value stays). 1 when stored, 0 when present, RV_ERR_LIMIT past the cap
 * on entries, RV_ERR_NOMEM, RV_ERR_INVALID for val > RV_MAP_MAX_VALUE. */
int rv_map_put(rv_map *m, uint64_t key, uint32_t val);

/* 1 and *val (may be NULL) when key is present, else 0. */
int rv_map_get(const rv_map *m, uint64_t key, uint32_t *val);

/* String keys: the 64-bit hash of n bytes at p (FNV-1a). */
uint64_t rv_map_hash(const void *p, size_t n);

/* Whether the entry holding val is the key (key, n) being looked up. */
typedef int (*rv_map_same_fn)(const void *ctx, uint32_t val, const void *key, size_t n);

/* Finds the entry with hash h for which same(ctx, value, key, n) holds:
 * 1 and *val, or 0. */
int rv_map_find(const rv_map *m, uint64_t h, rv_map_same_fn same, const void *ctx, const void *key,
                size_t n, uint32_t *val);

/* Adds h -> val without looking for h (call after rv_map_find said 0).
 * 0, RV_ERR_LIMIT, RV_ERR_NOMEM or RV_ERR_INVALID as rv_map_put. */
int rv_map_add(rv_map *m, uint64_t h, uint32_t val);

/* Bytes the table holds, for memory accounting. */
static inline size_t rv_map_bytes(const rv_map *m)
{
    return m->cap * (sizeof(uint64_t) + sizeof(uint32_t));
}

#endif
