/* The loaded-trace cache. See rv_gcache.h. An LRU list (most recent at
 * the head) under one mutex; entries are few (hundreds at most), so lookups
 * walk the list. */
#include "rv_gcache.h"

#include <pthread.h>
#include <stdlib.h>

struct rv_gcache {
    pthread_mutex_t mu;
    rv_gentry *head, *tail;
    size_t bytes, max_bytes, entries;
    uint64_t hits, misses;
};

static size_t entry_bytes(const rv_trace *t, const rv_graph *g)
{
    return sizeof(rv_gentry) + t->cap_events * sizeof(rv_event) + rv_strtab_bytes(&t->strings) +
           g->cap_tasks * sizeof(rv_task) + g->cap_edges * sizeof(rv_edge) +
           g->cap_threads * sizeof(rv_thread) + g->ntasks * (2 * sizeof(int64_t) + 4);
}

static void entry_free(rv_gentry *e)
{
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
    if (e->bytes > c->max_bytes) {
        e->dead = 1;
    } else {
        while (c->tail && c->bytes + e->bytes > c->max_bytes)
            drop(c, c->tail);
        push_front(c, e);
    }
    pthread_mutex_unlock(&c->mu);
    return e;
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

void rv_gcache_forget(rv_gcache *c, int64_t id)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    rv_gentry *e = c->head;
    while (e && e->id != id)
        e = e->next;
    if (e)
        drop(c, e);
    pthread_mutex_unlock(&c->mu);
}

void rv_gcache_stats(rv_gcache *c, uint64_t *hits, uint64_t *misses, size_t *bytes, size_t *entries)
{
    if (!c) {
        *hits = *misses = 0;
        *bytes = *entries = 0;
        return;
    }
    pthread_mutex_lock(&c->mu);
    *hits = c->hits;
    *misses = c->misses;
    *bytes = c->bytes;
    *entries = c->entries;
    pthread_mutex_unlock(&c->mu);
}
