/* The open-addressing hash map. See rv_map.h. */
#include "util/rv_map.h"

#include <stdlib.h>
#include <string.h>

#include "util/rv_error.h"

#define FIRST_CAP 64

/* Murmur3's finalizer: keys that differ only in high bits (packed pid/tid,
 * sequential correlation ids) still spread over the low bits. */
static inline size_t slot_of(const rv_map *m, uint64_t key)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)key & (m->cap - 1);
}

void rv_map_init(rv_map *m, size_t max)
{
    m->keys = NULL;
    m->vals = NULL;
    m->cap = 0;
    m->n = 0;
    m->max = max;
}

void rv_map_clear(rv_map *m)
{
    if (!m)
        return;
    if (m->vals)
        memset(m->vals, 0, m->cap * sizeof(*m->vals));
    m->n = 0;
}

void rv_map_free(rv_map *m)
{
    if (!m)
        return;
    free(m->keys);
    free(m->vals);
    rv_map_init(m, m->max);
}

/* Moves every entry into a table of cap slots. */
static int rehash(rv_map *m, size_t cap)
{
    uint64_t *keys = malloc(cap * sizeof(*keys));
    uint32_t *vals = calloc(cap, sizeof(*vals));
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return RV_ERR_NOMEM;
    }
    rv_map old = *m;
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    for (size_t i = 0; i < old.cap; i++) {
        if (!old.vals[i])
            continue;
        size_t j = slot_of(m, old.keys[i]);
        while (vals[j])
            j = (j + 1) & (cap - 1);
        keys[j] = old.keys[i];
        vals[j] = old.vals[i];
    }
    free(old.keys);
    free(old.vals);
    return 0;
}

int rv_map_reserve(rv_map *m, size_t n)
{
    if (n > m->max)
        return RV_ERR_LIMIT;
    size_t cap = m->cap ? m->cap : FIRST_CAP;
    while (cap / 2 < n) {
        if (cap > SIZE_MAX / 4)
            return RV_ERR_LIMIT;
        cap *= 2;
    }
    return cap > m->cap ? rehash(m, cap) : 0;
}

/* Room for one more entry: the table stays at most half full. */
static int make_room(rv_map *m, uint32_t val)
{
    if (val > RV_MAP_MAX_VALUE)
        return RV_ERR_INVALID;
    if (m->n >= m->max)
        return RV_ERR_LIMIT;
    if (m->cap && (m->n + 1) * 2 <= m->cap)
        return 0;
    if (m->cap > SIZE_MAX / 4)
        return RV_ERR_LIMIT;
    return rehash(m, m->cap ? m->cap * 2 : FIRST_CAP);
}

static void store(rv_map *m, size_t i, uint64_t key, uint32_t val)
{
    m->keys[i] = key;
    m->vals[i] = val + 1;
    m->n++;
}

int rv_map_put(rv_map *m, uint64_t key, uint32_t val)
{
    if (rv_map_get(m, key, NULL))
        return 0;
    int rc = make_room(m, val);
    if (rc)
        return rc;
    size_t i = slot_of(m, key);
    while (m->vals[i])
        i = (i + 1) & (m->cap - 1);
    store(m, i, key, val);
    return 1;
}

int rv_map_get(const rv_map *m, uint64_t key, uint32_t *val)
{
    if (!m->cap)
        return 0;
    size_t i = slot_of(m, key);
    while (m->vals[i]) {
        if (m->keys[i] == key) {
            if (val)
                *val = m->vals[i] - 1;
            return 1;
        }
        i = (i + 1) & (m->cap - 1);
    }
    return 0;
}

uint64_t rv_map_hash(const void *p, size_t n)
{
    /* FNV-1a: short kernel and op names dominate, so simplicity wins. */
    const unsigned char *s = p;
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

int rv_map_find(const rv_map *m, uint64_t h, rv_map_same_fn same, const void *ctx, const void *key,
                size_t n, uint32_t *val)
{
    if (!m->cap)
        return 0;
    size_t i = slot_of(m, h);
    while (m->vals[i]) {
        if (m->keys[i] == h && same(ctx, m->vals[i] - 1, key, n)) {
            if (val)
                *val = m->vals[i] - 1;
            return 1;
        }
        i = (i + 1) & (m->cap - 1);
    }
    return 0;
}

int rv_map_add(rv_map *m, uint64_t h, uint32_t val)
{
    int rc = make_room(m, val);
    if (rc)
        return rc;
    size_t i = slot_of(m, h);
    while (m->vals[i])
        i = (i + 1) & (m->cap - 1);
    store(m, i, h, val);
    return 0;
}
