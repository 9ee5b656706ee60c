/* Reading "traceEvents" on two cores. The input is cut into parts of a
 * 256 KiB window each, each ending just before the '{' of what looks like
 * the next element of an array of objects ("},\n  {" or "},{"). A helper
 * thread and the caller's thread read whole parts ahead, each into a small
 * trace of its own, on the guess that a part starts at an event. The document reader (the
 * caller's, in rv_kineto.c) stays the one authority: when it stands at an
 * event's start exactly where a part begins, that part's reading is what
 * it would have read itself, so it takes the part in (strings interned in
 * the part's order, events, shapes, memory samples and flows appended) and
 * moves on past it. A part that stops early (bad JSON, a cut event, a cap,
 * a guess that was not an event) is read again by the document reader,
 * which then gives the same answer and the same error as a one-core read.
 * See docs/internals/kineto-reader.md, "Two cores". */
#include "reader/rv_kineto_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace/rv_shapes.h"

#define PAR_SLOTS     4                  /* parts in memory at once */
#define PAR_CHUNK     RV_JSCAN_WINDOW    /* a part's size: one window */
#define PAR_CARRY     ((size_t)64 << 10) /* at most this much of a part moves to the next */
#define PAR_MIN_INPUT ((size_t)2 << 20)  /* smaller inputs stay on one core */

enum { SLOT_FREE, SLOT_READY, SLOT_BUSY, SLOT_DONE };

/* How a part's reading ended. */
enum {
    END_CLEAN, /* past a ',' at the part's end: the next part starts an event */
    END_ARRAY, /* at the ']' closing "traceEvents" (end_pos) */
    END_STOP   /* anything else: the document reader reads the part itself */
};

typedef struct part {
    unsigned char *store;   /* owned copy of the bytes, unless sliced */
    const unsigned char *p; /* the bytes (in store or the caller's buffer) */
    size_t len;
    int64_t base;  /* offset of p[0] in the decompressed input */
    int startable; /* begins where an event may begin */
    int state;     /* SLOT_*, under the lock */

    /* The reading ahead: valid once SLOT_DONE. */
    rv_kineto__reader rd;
    rv_error err;
    int end;
    size_t end_pos;   /* END_ARRAY: the ']' */
    size_t comma_end; /* END_CLEAN: just past the last ',' */
    size_t elements;  /* array elements read, kept or not */
} part;

typedef struct rv_kineto__par {
    rv_kineto__reader *doc;
    rv_jscan src; /* the input; its errors wait in src_err */
    rv_error src_err;
    int src_rc, src_done;
    int sliced; /* the input is the caller's plain buffer: parts point into it */
    size_t target;
    int direct;           /* windows are inflated straight into the parts */
    size_t store_cap;     /* a part's copy: the carry and a window, or target */
    unsigned char *carry; /* the cut-off tail of the last part made */
    size_t carry_len, carry_cap;
    int next_startable;
    int64_t offset; /* where the next part begins */

    uint64_t produced, released, next_deliver, claim;
    size_t taken;
    part slots[PAR_SLOTS];
    uint32_t *map; /* a part's string ids -> the trace's */
    size_t map_cap;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t helper;
    int helper_on, stop;
} par;

typedef rv_kineto__reader reader;

#define SLOT(P, k) (&(P)->slots[(k) % PAR_SLOTS])

static int is_ws(unsigned char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* The last place in b[lo..n) where an event may start: a '{' after a
 * '}' and a ',' (blanks between them allowed), as between two elements of
 * an array of objects, pretty-printed or not. Such bytes may also lie
 * inside a string or an "args" array; that a part starts at an element of
 * "traceEvents" is only the guess the document reader checks. Each byte
 * is looked at once or twice. 0 when none. */
static size_t find_cut(const unsigned char *b, size_t lo, size_t n)
{
    size_t hi = n;
    while (hi > lo) {
        const unsigned char *brace = memrchr(b + lo, '{', hi - lo);
        if (!brace)
            return 0;
        size_t j = (size_t)(brace - b), i = j;
        while (i > lo && is_ws(b[i - 1]))
            i--;
        if (i > lo && b[i - 1] == ',') {
            size_t k = i - 1;
            while (k > lo && is_ws(b[k - 1]))
                k--;
            if (k > lo && b[k - 1] == '}')
                return j;
        }
        hi = i < j ? i : j;
    }
    return 0;
}

/* ---------------------------------------------------------------- parts */

/* Makes the next part in its slot when one is free. 1 when made, 0 when
 * no slot is free or the input is used up (an input error waits in
 * src_rc for the document reader to meet where a one-core read would). */
static int produce_one(par *P)
{
    if (P->produced >= P->released + PAR_SLOTS)
        return 0;
    part *c = SLOT(P, P->produced);
    size_t n = 0;
    int cut_ok = 0;
    if (P->sliced) {
        rv_jscan *s = &P->src;
        size_t avail = s->end - s->pos;
        if (avail == 0)
            return 0;
        const unsigned char *w = s->buf + s->pos;
        n = avail;
        if (avail > P->target) {
            size_t b = find_cut(w, P->target / 2, P->target);
            n = b ? b : P->target;
            cut_ok = b != 0;
        }
        c->p = w;
        s->pos += n;
    } else {
        if (P->src_done && !P->carry_len)
            return 0;
        if (!c->store) {
            c->store = malloc(P->store_cap);
            if (!c->store) {
                P->src_rc = rv_error_set(&P->src_err, RV_ERR_NOMEM, -1, -1, "out of memory");
                P->src_done = 1;
                return 0;
            }
        }
        memcpy(c->store, P->carry, P->carry_len);
        n = P->carry_len;
        P->carry_len = 0;
        rv_jscan *s = &P->src;
        if (P->direct && s->pos == s->end && !P->src_done) {
            /* A whole window, inflated (or read) straight into the part. */
            size_t got = 0;
            int rc = rv_jscan_refill_into(s, c->store + n, &got);
            if (rc <= 0) {
                P->src_rc = rc;
                P->src_done = 1;
            }
            n += got;
        }
        /* Then (a part under a window, or a window that came short) up to
         * the part's size from the source's own window. */
        size_t fill = P->direct ? RV_JSCAN_WINDOW : P->target;
        while (n < fill && !P->src_done) {
            if (s->pos == s->end) {
                int rc = rv_jscan_refill(s);
                if (rc <= 0) {
                    P->src_rc = rc;
                    P->src_done = 1;
                    break;
                }
            }
            size_t take = s->end - s->pos;
            if (take > fill - n)
                take = fill - n;
            memcpy(c->store + n, s->buf + s->pos, take);
            s->pos += take;
            n += take;
        }
        if (n == 0)
            return 0;
        if (!P->src_done) {
            size_t keep = n / 2 < P->carry_cap ? n / 2 : P->carry_cap - 1;
            size_t b = find_cut(c->store, n - keep, n);
            if (b) {
                P->carry_len = n - b;
                memcpy(P->carry, c->store + b, P->carry_len);
                n = b;
                cut_ok = 1;
            }
        }
        c->p = c->store;
    }
    c->len = n;
    c->base = P->offset;
    P->offset += (int64_t)n;
    c->startable = P->next_startable;
    P->next_startable = cut_ok;
    pthread_mutex_lock(&P->mu);
    c->state = SLOT_READY;
    P->produced++;
    pthread_cond_broadcast(&P->cv);
    pthread_mutex_unlock(&P->mu);
    return 1;
}

static void produce_ahead(par *P)
{
    while (produce_one(P) > 0) {
    }
}

/* Frees the slots of the parts before k, waiting for a reading still
 * running on one. */
static void release_below(par *P, uint64_t k)
{
    pthread_mutex_lock(&P->mu);
    while (P->released < k) {
        part *c = SLOT(P, P->released);
        while (c->state == SLOT_BUSY)
            pthread_cond_wait(&P->cv, &P->mu);
        c->state = SLOT_FREE;
        P->released++;
    }
    pthread_mutex_unlock(&P->mu);
}

/* ---------------------------------------------------------------- reading ahead */

/* Reads part c as a run of "traceEvents" elements starting at its first
 * byte, into its own trace. Runs on either thread, without the lock. */
static void read_part(part *c)
{
    reader *r = &c->rd;
    c->end = END_STOP;
    c->elements = 0;
    rv_error_clear(&c->err);
    rv_jscan_close(&r->js);
    if (rv_trace_reset(r->t) < 0)
        return;
    r->nflows = 0;
    r->missing_corr = 0;
    r->last_pid_id = r->last_tid_id = 0;
    rv_shapes_pending_reset(r->shp);
    if (rv_jscan_open(&r->js, c->p, c->len, NULL, SIZE_MAX, &c->err) < 0)
        return;
    r->js.base = c->base;
    r->js.item_name = "event";
    for (;;) {
        r->js.item = (int64_t)c->elements;
        /* Depth 2, as in {"traceEvents": [...]}; a bare array's events sit
         * at 1, so a part that passes here passes there. */
        if (rv_kineto__parse_event(r, 2) < 0)
            return;
        c->elements++;
        int ch = rv_jscan_ws(&r->js);
        if (ch == ']') {
            c->end = END_ARRAY;
            c->end_pos = r->js.pos;
            return;
        }
        if (ch != ',')
            return;
        rv_jscan_eat(&r->js);
        c->comma_end = r->js.pos;
        if (rv_jscan_ws(&r->js) < 0) {
            if (!r->js.rc)
                c->end = END_CLEAN;
            return;
        }
    }
}

static void *helper_main(void *arg)
{
    par *P = arg;
    pthread_mutex_lock(&P->mu);
    while (!P->stop) {
        if (P->claim < P->produced) {
            part *c = SLOT(P, P->claim);
            P->claim++;
            if (c->state == SLOT_READY && c->startable) {
                c->state = SLOT_BUSY;
                pthread_mutex_unlock(&P->mu);
                read_part(c);
                pthread_mutex_lock(&P->mu);
                c->state = SLOT_DONE;
                pthread_cond_broadcast(&P->cv);
            }
            continue;
        }
        pthread_cond_wait(&P->cv, &P->mu);
    }
    pthread_mutex_unlock(&P->mu);
    return NULL;
}

/* Until part k has been read ahead: reads it here when no one has taken
 * it, else reads later parts (or makes more) while the helper finishes. */
static void await_part(par *P, uint64_t k)
{
    part *c = SLOT(P, k);
    for (;;) {
        part *mine = NULL;
        pthread_mutex_lock(&P->mu);
        if (c->state == SLOT_DONE) {
            pthread_mutex_unlock(&P->mu);
            return;
        }
        if (c->state == SLOT_READY) {
            mine = c;
            if (P->claim <= k)
                P->claim = k + 1;
        } else {
            while (!mine && P->claim < P->produced) {
                part *o = SLOT(P, P->claim);
                P->claim++;
                if (o->state == SLOT_READY && o->startable)
                    mine = o;
            }
        }
        if (mine)
            mine->state = SLOT_BUSY;
        pthread_mutex_unlock(&P->mu);
        if (mine) {
            read_part(mine);
            pthread_mutex_lock(&P->mu);
            mine->state = SLOT_DONE;
            pthread_cond_broadcast(&P->cv);
            pthread_mutex_unlock(&P->mu);
            continue;
        }
        if (produce_one(P) > 0)
            continue;
        pthread_mutex_lock(&P->mu);
        while (c->state == SLOT_BUSY)
            pthread_cond_wait(&P->cv, &P->mu);
        pthread_mutex_unlock(&P->mu);
    }
}

/* ---------------------------------------------------------------- taking a part in */

/* Appends part c's reading to the document's trace. 0 when taken; 1 when
 * a cap would be reached inside it (nothing taken: the document reader
 * reads it and meets the cap where a one-core read does); negative on
 * failure. */
static int take_in(par *P, part *c)
{
    reader *d = P->doc, *l = &c->rd;
    rv_trace *g = d->t, *lt = l->t;
    int rc;
    if (g->nevents + lt->nevents > d->max_events || d->nflows + l->nflows > d->max_events ||
        g->nmem + lt->nmem > RV_TRACE_MAX_MEM || lt->mem_truncated)
        return 1;
    if ((rc = rv_shapes_append(g, lt, (int32_t)g->nevents)) != 0)
        return rc > 0 ? 1 : FAIL(d, RV_ERR_NOMEM, "out of memory for the ops' shapes");

    uint32_t count = lt->strings.count;
    if (count > P->map_cap) {
        uint32_t *m = realloc(P->map, (size_t)count * 2 * sizeof(*m));
        if (!m)
            return FAIL(d, RV_ERR_NOMEM, "out of memory joining the trace's parts");
        P->map = m;
        P->map_cap = (size_t)count * 2;
    }
    /* In the part's order: new strings get the ids a one-core read gives. */
    P->map[0] = 0;
    for (uint32_t i = 1; i < count; i++) {
        P->map[i] = rv_strtab_intern(&g->strings, rv_strtab_get(&lt->strings, i),
                                     rv_strtab_len(&lt->strings, i));
        if (P->map[i] == UINT32_MAX)
            return FAIL(d, RV_ERR_NOMEM, "string table full or out of memory");
    }

    size_t need = g->nevents + lt->nevents;
    if (lt->nevents) {
        if (need > g->cap_events &&
            rv_trace_reserve(g, need > 2 * g->cap_events ? need : 2 * g->cap_events) < 0)
            return FAIL(d, RV_ERR_NOMEM, "cannot keep event (out_of_memory)");
        rv_event *e = g->events + g->nevents;
        memcpy(e, lt->events, lt->nevents * sizeof(*e));
        for (size_t i = 0; i < lt->nevents; i++) {
            e[i].name = P->map[e[i].name];
            e[i].pid = P->map[e[i].pid];
            e[i].tid = P->map[e[i].tid];
            e[i].pg = P->map[e[i].pg];
            e[i].pg_ranks = P->map[e[i].pg_ranks];
        }
        g->nevents = need;
    }

    for (size_t i = 0; i < lt->nmem; i++)
        if (rv_trace_add_mem(g, &lt->mem[i]) < 0)
            return FAIL(d, RV_ERR_NOMEM, "cannot keep a memory event (out_of_memory)");

    if (l->nflows) {
        if ((rc = rv_kineto__flows_room(d, l->nflows)) < 0)
            return rc;
        for (size_t i = 0; i < l->nflows; i++) {
            rv_kineto__flow f = l->flows[i];
            f.pid = P->map[f.pid];
            f.tid = P->map[f.tid];
            d->flows[d->nflows++] = f;
        }
    }
    g->skipped_events += lt->skipped_events;
    d->missing_corr += l->missing_corr;
    d->total_events += c->elements;
    return 0;
}

int rv_kineto__par_join(reader *r)
{
    par *P = r->par;
    rv_jscan *s = &r->js;
    if (!P->helper_on)
        return 0; /* no second core after all: the parts are read once, in order */
    /* Only at the end of the document reader's part: its bytes are left
     * as they are, so that a part read again starts where a one-core read
     * stands (just past the ',', the blanks unread). */
    for (size_t i = s->pos; i < s->end; i++)
        if (!is_ws(s->buf[i]))
            return 0;
    /* The parts before the one being read are done with. */
    release_below(P, P->next_deliver ? P->next_deliver - 1 : 0);
    for (;;) {
        produce_ahead(P);
        uint64_t k = P->next_deliver;
        if (k >= P->produced)
            return 0;
        part *c = SLOT(P, k);
        if (!c->startable)
            return 0;
        await_part(P, k);
        if (c->end == END_STOP)
            return 0;
        int rc = take_in(P, c);
        if (rc < 0)
            return rc;
        if (rc > 0)
            return 0;
        P->taken++;
        P->next_deliver = k + 1;
        /* Read on in this part where its reading stopped: past its last
         * ',' (the next part starts an element) or at the ']'. */
        s->buf = (unsigned char *)c->p;
        s->base = c->base;
        s->end = c->len;
        s->pos = c->end == END_ARRAY ? c->end_pos : c->comma_end;
        release_below(P, k);
        if (c->end == END_ARRAY)
            return 1;
    }
}

/* ---------------------------------------------------------------- the feed */

/* The document reader's next window: the next part in order. */
static int feed(void *ctx, rv_jscan *s)
{
    par *P = ctx;
    release_below(P, P->next_deliver);
    produce_ahead(P);
    uint64_t k = P->next_deliver;
    if (k >= P->produced) {
        if (P->src_rc < 0) {
            /* The input's error, where a one-core read meets it: its
             * message less the "at byte N: " the source put first. */
            char head[48];
            const char *msg = P->src_err.message;
            int hn = snprintf(head, sizeof(head), "at byte %" PRId64 ": ", P->src_err.offset);
            if (hn > 0 && !strncmp(msg, head, (size_t)hn))
                msg += hn;
            int code = rv_jscan_fail_at(s, P->src_rc, P->src_err.offset, "%s", msg);
            if (P->src_err.reason)
                rv_error_tag(s->err, P->src_err.reason, code);
            return code;
        }
        return 0;
    }
    part *c = SLOT(P, k);
    pthread_mutex_lock(&P->mu);
    if (P->claim <= k) /* read here: no use reading it ahead */
        P->claim = k + 1;
    pthread_mutex_unlock(&P->mu);
    s->buf = (unsigned char *)c->p;
    s->base = c->base;
    s->pos = 0;
    s->end = c->len;
    P->next_deliver = k + 1;
    return 1;
}

/* ---------------------------------------------------------------- start, stop */

static int wanted(const reader *r)
{
    const rv_kineto_opts *o = r->opts;
    if (o->threads == 1)
        return 0;
    if (o->chunk_bytes)
        return 1;
    if (r->js.size_hint < PAR_MIN_INPUT)
        return 0;
    return sysconf(_SC_NPROCESSORS_ONLN) >= 2;
}

int rv_kineto__par_start(reader *r)
{
    if (r->opts->parts_taken)
        *r->opts->parts_taken = 0;
    if (!wanted(r))
        return 0;
    par *P = calloc(1, sizeof(*P));
    if (!P)
        return 0; /* one core then */
    P->doc = r;
    P->target = r->opts->chunk_bytes ? r->opts->chunk_bytes : PAR_CHUNK;
    if (P->target < 16)
        P->target = 16;
    /* Parts of a window or more take each window whole, with no copy. */
    P->direct = P->target >= RV_JSCAN_WINDOW;
    P->carry_cap = P->direct ? PAR_CARRY : P->target / 2 + 1;
    P->store_cap = P->direct ? PAR_CARRY + RV_JSCAN_WINDOW : P->target;
    P->carry = malloc(P->carry_cap);
    pthread_mutex_init(&P->mu, NULL);
    pthread_cond_init(&P->cv, NULL);
    int ok = P->carry != NULL;
    for (int i = 0; ok && i < PAR_SLOTS; i++)
        ok = rv_kineto__reader_init(&P->slots[i].rd, r->opts) == 0;
    if (!ok || rv_jscan_move(&P->src, &r->js) < 0) {
        r->par = P;
        rv_kineto__par_stop(r);
        return 0;
    }
    rv_error *err = P->src.err;
    P->src.err = &P->src_err;
    rv_error_clear(&P->src_err);
    P->sliced = !P->src.own_buf;
    P->next_startable = 0;
    rv_jscan_open_feed(&r->js, feed, P, err);
    r->js.item_name = "event";
    r->par = P;
    P->helper_on = pthread_create(&P->helper, NULL, helper_main, P) == 0;
    return 0;
}

void rv_kineto__par_stop(reader *r)
{
    par *P = r->par;
    if (!P)
        return;
    if (r->opts->parts_taken)
        *r->opts->parts_taken = P->taken;
    if (P->helper_on) {
        pthread_mutex_lock(&P->mu);
        P->stop = 1;
        pthread_cond_broadcast(&P->cv);
        pthread_mutex_unlock(&P->mu);
        pthread_join(P->helper, NULL);
    }
    for (int i = 0; i < PAR_SLOTS; i++) {
        rv_kineto__reader_free(&P->slots[i].rd);
        free(P->slots[i].store);
    }
    rv_jscan_close(&P->src);
    free(P->carry);
    free(P->map);
    pthread_cond_destroy(&P->cv);
    pthread_mutex_destroy(&P->mu);
    free(P);
    r->par = NULL;
}
