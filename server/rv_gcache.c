/* The loaded-trace cache. See rv_gcache.h. An LRU list (most recent at
 * the head) under one mutex, with frequency-based admission (TinyLFU, in
 * the simplest form): a small table of saturating counters, indexed by a
 * hash of the trace id and halved every AGE_EVERY accesses, estimates how
 * often each trace was asked for. When a new entry needs room, it is kept
 * only if it was asked for more often than every entry it would evict.
 * A fleet scan over more traces than the cache holds then keeps one stable
 * subset (hit every later scan) instead of evicting each trace just before
 * it is needed again, which is what plain LRU does with a repeated scan.
 * Entries are few (hundreds at most), so lookups walk the list. */
#include "rv_gcache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cost/rv_flops.h"
#include "run/rv_run.h"

#define FREQ_SLOTS 4096 /* power of two */
#define AGE_EVERY  8192 /* accesses between halvings */

struct rv_gcache {
    pthread_mutex_t mu;
    rv_gentry *head, *tail;
    size_t bytes, max_bytes, entries;
    uint64_t hits, misses, evictions, rejected;
    unsigned accesses;
    unsigned char freq[FREQ_SLOTS];
};

static unsigned slot(int64_t id)
{
    uint64_t x = (uint64_t)id;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (unsigned)(x & (FREQ_SLOTS - 1));
}

/* Counts one access to id; ages the table now and then so that old
 * popularity fades. Caller holds mu. */
static void touch(rv_gcache *c, int64_t id)
{
    unsigned char *f = &c->freq[slot(id)];
    if (*f < 255)
        (*f)++;
    if (++c->accesses >= AGE_EVERY) {
        c->accesses = 0;
        for (size_t i = 0; i < FREQ_SLOTS; i++)
            c->freq[i] >>= 1;
    }
}

static size_t entry_bytes(const rv_trace *t, const rv_graph *g)
{
    return sizeof(rv_gentry) + t->cap_events * sizeof(rv_event) + rv_strtab_bytes(&t->strings) +
           g->cap_tasks * sizeof(rv_task) + g->cap_edges * sizeof(rv_edge) +
           g->cap_threads * sizeof(rv_thread) + g->ntasks * (2 * sizeof(int64_t) + 4) +
           (g->flops ? (t->nevents + 1) * (2 * sizeof(double) + 2) +
                           g->flops->nembed * sizeof(rv_flops_embed)
                     : 0);
}

static void entry_free(rv_gentry *e)
{
    rv_run_prep_free(e->prep); /* before the graph and baseline it points into */
    pthread_mutex_destroy(&e->prep_mu);
    rv_sim_free(e->base);
    rv_graph_free(e->graph);
    rv_trace_free(e->trace);
    free(e);
}

static void unlink_entry(rv_gcache *c, rv_gentry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    if (e->next)
        e->next->prev = e->prev;
    /* By identity, not by a missing neighbour: the same for a consistent
     * list, and what lets the analyzer see the ends move. */
    if (c->head == e)
        c->head = e->next;
    if (c->tail == e)
        c->tail = e->prev;
    e->prev = e->next = NULL;
    c->bytes -= e->bytes;
    c->entries--;
}

static void push_front(rv_gcache *c, rv_gentry *e)
{
    e->prev = NULL;
    e->next = c->head;
    if (c->head)
        c->head->prev = e;
    c->head = e;
    if (!c->tail)
        c->tail = e;
    c->bytes += e->bytes;
    c->entries++;
}

/* Drops an entry from the list; frees it now unless a request holds it. */
static void drop(rv_gcache *c, rv_gentry *e)
{
    unlink_entry(c, e);
    e->dead = 1;
    if (e->refs == 0)
        entry_free(e);
}

/* Whether e may take the room of the least recent entries it needs: only
 * when it was asked for more often than each of them. Caller holds mu. */
static int admit(const rv_gcache *c, const rv_gentry *e)
{
    size_t room = c->max_bytes - c->bytes, need = e->bytes;
    unsigned f = c->freq[slot(e->id)];

    for (const rv_gentry *v = c->tail; v && room < need; v = v->prev) {
        if (c->freq[slot(v->id)] >= f)
            return 0;
        room += v->bytes;
    }
    return 1;
}

rv_gcache *rv_gcache_new(size_t max_bytes)
{
    rv_gcache *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    pthread_mutex_init(&c->mu, NULL);
    c->max_bytes = max_bytes;
    return c;
}

void rv_gcache_free(rv_gcache *c)
{
    if (!c)
        return;
    while (c->head) {
        rv_gentry *e = c->head;
        unlink_entry(c, e);
        entry_free(e);
    }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

rv_gentry *rv_gcache_get(rv_gcache *c, int64_t id)
{
    if (!c)
        return NULL;
    pthread_mutex_lock(&c->mu);
    touch(c, id);
    rv_gentry *e = c->head;
    while (e && e->id != id)
        e = e->next;
    if (e) {
        e->refs++;
        unlink_entry(c, e);
        push_front(c, e);
        c->hits++;
    } else {
        c->misses++;
    }
    pthread_mutex_unlock(&c->mu);
    return e;
}

rv_gentry *rv_gcache_put(rv_gcache *c, int64_t id, rv_trace *trace, rv_graph *graph, rv_sim *base)
{
    rv_gentry *e = calloc(1, sizeof(*e));
    if (!e) {
        rv_sim_free(base);
        rv_graph_free(graph);
        rv_trace_free(trace);
        return NULL;
    }
    pthread_mutex_init(&e->prep_mu, NULL);
    e->id = id;
    e->trace = trace;
    e->graph = graph;
    e->base = base;
    e->bytes = entry_bytes(trace, graph);
    e->refs = 1;
    if (!c) {
        e->dead = 1; /* no cache: freed at release */
        return e;
    }
    pthread_mutex_lock(&c->mu);
    rv_gentry *have = c->head;
    while (have && have->id != id)
        have = have->next;
    if (have) {
        /* Another request loaded it first: use theirs. */
        have->refs++;
        pthread_mutex_unlock(&c->mu);
        entry_free(e);
        return have;
    }
    if (e->bytes > c->max_bytes || !admit(c, e)) {
        e->dead = 1;
        c->rejected++;
    } else {
        while (c->tail && c->bytes + e->bytes > c->max_bytes) {
            drop(c, c->tail);
            c->evictions++;
        }
        push_front(c, e);
    }
    pthread_mutex_unlock(&c->mu);
    return e;
}

const struct rv_run_prep *rv_gcache_prep(rv_gentry *e)
{
    pthread_mutex_lock(&e->prep_mu);
    if (!e->prep_tried) {
        rv_error err;
        rv_error_clear(&err);
        /* A failure (out of memory, say) is left to the runs to report. */
        if (rv_run_prep_new(e->graph, e->base, RV_ITER_MEDIAN, &e->prep, &err) != 0)
            e->prep = NULL;
        e->prep_tried = 1;
    }
    const struct rv_run_prep *p = e->prep;
    pthread_mutex_unlock(&e->prep_mu);
    return p;
}

void rv_gcache_release(rv_gcache *c, rv_gentry *e)
{
    if (!e)
        return;
    if (c)
        pthread_mutex_lock(&c->mu);
    int last = --e->refs == 0 && e->dead;
    if (c)
        pthread_mutex_unlock(&c->mu);
    if (last)
        entry_free(e);
}

int64_t rv_gcache_derived_key(int64_t owner, unsigned variant)
{
    return -(owner * RV_GCACHE_VARIANTS + (int64_t)(variant % RV_GCACHE_VARIANTS)) - 1;
}

/* The stored trace an entry's key belongs to. */
static int64_t owner_of(int64_t key)
{
    return key >= 0 ? key : (-(key + 1)) / RV_GCACHE_VARIANTS;
}

void rv_gcache_forget(rv_gcache *c, int64_t id)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    for (rv_gentry *e = c->head, *next; e; e = next) {
        next = e->next;
        if (owner_of(e->id) == id)
            drop(c, e);
    }
    pthread_mutex_unlock(&c->mu);
}

void rv_gcache_stats(rv_gcache *c, rv_gcache_counts *out)
{
    memset(out, 0, sizeof(*out));
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    out->hits = c->hits;
    out->misses = c->misses;
    out->evictions = c->evictions;
    out->rejected = c->rejected;
    out->bytes = c->bytes;
    out->entries = c->entries;
    pthread_mutex_unlock(&c->mu);
}
