/* A bounded in-memory cache of loaded traces: the parsed trace, its graph
 * and its baseline simulation, shared read-only between requests (what-ifs
 * clone the graph before they change it). Loading a stored trace costs a
 * database read, a snapshot decode and a graph build (tens of ms for 100k
 * tasks); a repeated what-if on the same trace skips all three.
 *
 * Eviction is least recently used, but a new entry only takes the room of
 * entries asked for less often than itself (frequency-based admission), so
 * that repeated fleet scans over more traces than fit do not evict every
 * trace just before it is needed again (rv_gcache.c).
 *
 * Entries are reference-counted: an entry evicted or forgotten while a
 * request holds it is freed when that request releases it. Thread-safe. */
#ifndef RV_GCACHE_H
#define RV_GCACHE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/rv_graph.h"
#include "simulate/rv_sim.h"
#include "trace/rv_trace.h"

typedef struct rv_gcache rv_gcache;

typedef struct rv_gentry {
    int64_t id;
    rv_trace *trace; /* owned by the entry */
    rv_graph *graph;
    rv_sim *base;
    size_t bytes; /* estimated memory */
    /* Private to rv_gcache.c. */
    pthread_mutex_t prep_mu; /* guards the two below until prep_tried is set */
    struct rv_run_prep *prep;
    int prep_tried;
    int refs;
    int dead; /* evicted or forgotten: freed at the last release */
    struct rv_gentry *prev, *next;
} rv_gentry;

/* A cache holding at most max_bytes of entries (0: a cache that keeps
 * nothing). NULL on OOM. */
rv_gcache *rv_gcache_new(size_t max_bytes);
/* Frees every entry; no entry may be held. NULL-safe. */
void rv_gcache_free(rv_gcache *c);

/* The entry for id with a reference taken, or NULL. */
rv_gentry *rv_gcache_get(rv_gcache *c, int64_t id);

/* Takes trace, graph and base (all owned from now on) and returns an entry
 * holding them with a reference taken, or NULL on OOM (the three are freed).
 * When another request inserted id meanwhile, the given three are freed and
 * that entry is returned. An entry bigger than the cache is returned but
 * not kept. */
rv_gentry *rv_gcache_put(rv_gcache *c, int64_t id, rv_trace *trace, rv_graph *graph, rv_sim *base);

/* What what-ifs of the median step on e (held) read from its baseline
 * alone (rv_run_prep_new): made by the first caller, under e's lock, and
 * read only afterwards, by any thread holding e. Borrowed from e; NULL when
 * it cannot be made (runs then compute their own). */
const struct rv_run_prep *rv_gcache_prep(rv_gentry *e);

/* Drops a reference taken by get or put. NULL-safe. */
void rv_gcache_release(rv_gcache *c, rv_gentry *e);

/* Removes id (a deleted or changed trace) and every entry derived from it
 * (rv_gcache_derived_key); a held entry lives until its release. */
void rv_gcache_forget(rv_gcache *c, int64_t id);

/* The key of a graph derived from stored trace owner (> 0): variant
 * (< RV_GCACHE_VARIANTS) tells one derivation from another, e.g. an
 * execution trace alone modelled on the hardware table's row variant.
 * Negative, so it never meets a trace id. */
#define RV_GCACHE_VARIANTS 256
int64_t rv_gcache_derived_key(int64_t owner, unsigned variant);

/* Counters for /metrics. */
typedef struct rv_gcache_counts {
    uint64_t hits, misses;
    uint64_t evictions; /* entries dropped to make room */
    uint64_t rejected;  /* loads not kept: too big, or asked for less often than the victims */
    size_t bytes, entries;
} rv_gcache_counts;
/* Fills *out (zeros for a NULL cache). */
void rv_gcache_stats(rv_gcache *c, rv_gcache_counts *out);

#endif
