/* Collectives matched by process group (docs/models/job.md): newer Kineto
 * names on each NCCL kernel its process group and the group's member
 * ranks. A collective is the k-th of its group on each member (or the
 * one with the same sequence number); a point-to-point kernel is the k-th
 * between its two ranks. Only the group's members are ganged. */
#include "job/rv_job_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/rv_coll.h"
#include "trace/rv_kname.h"

#define MAX_GROUP_RANKS 65536

/* One collective kernel of one rank. */
typedef struct coll_rec {
    const char *key;  /* group name (borrowed from the rank's trace) */
    const char *list; /* member ranks as text; "" unknown */
    int32_t task;
    int32_t pos;
    int32_t peer;  /* point-to-point: the other rank; -1 a collective */
    int32_t seq;   /* RV_NONE when not recorded */
    int64_t start; /* measured */
    int64_t bytes;
    int op;
} coll_rec;

/* A record's pair: -1 for a collective, else its two ranks, lower first. */
static int64_t pair_key(const rv_job *j, const coll_rec *r)
{
    if (r->peer < 0)
        return -1;
    int64_t me = j->r[r->pos].rank, lo = me < r->peer ? me : r->peer,
            hi = me < r->peer ? r->peer : me;
    return lo * MAX_GROUP_RANKS + hi;
}

static int cmp_rec(const void *a, const void *b, void *ctx)
{
    const rv_job *sort_job = ctx;
    const coll_rec *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c)
        return c;
    int64_t px = pair_key(sort_job, x), py = pair_key(sort_job, y);
    if (px != py)
        return (px > py) - (px < py);
    if (x->pos != y->pos)
        return (x->pos > y->pos) - (x->pos < y->pos);
    return (x->start > y->start) - (x->start < y->start);
}

/* The member ranks written as "[0, 1]": stores the first cap of them and
 * returns how many the list holds, or -1 when it is not such a list. */
static int parse_ranks(const char *s, int *out, int cap)
{
    int n = 0;
    while (*s == ' ' || *s == '[')
        s++;
    while (*s && *s != ']') {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v >= MAX_GROUP_RANKS)
            return -1;
        if (n < cap)
            out[n] = (int)v;
        n++;
        s = end;
        while (*s == ' ' || *s == ',')
            s++;
    }
    return n;
}

static int pos_of(const rv_job *j, int rank)
{
    size_t lo = 0, hi = j->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (j->r[mid].rank < rank)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < j->n && j->r[lo].rank == rank ? (int)lo : -1;
}

/* Collects every collective kernel; *any / *all: how many name a group. */
static int collect_recs(rv_job *j, coll_rec **out, size_t *nout, int *any, int *all)
{
    size_t cap = 0, n = 0;
    for (size_t p = 0; p < j->n; p++) {
        const rv_graph *g = j->r[p].g;
        for (size_t i = 0; i < g->ntasks; i++)
            cap += (g->tasks[i].flags & RV_TF_NCCL) && !(g->tasks[i].flags & RV_TF_REMOVED);
    }
    coll_rec *v = malloc((cap + 1) * sizeof(*v));
    if (!v)
        return RV_ERR_NOMEM;
    *any = 0;
    *all = 1;
    int pair[2];
    for (size_t p = 0; p < j->n; p++) {
        const rv_graph *g = j->r[p].g;
        const rv_trace *t = g->trace;
        for (size_t i = 0; i < g->ntasks; i++) {
            const rv_task *k = &g->tasks[i];
            if (!(k->flags & RV_TF_NCCL) || (k->flags & RV_TF_REMOVED))
                continue;
            const rv_event *e =
                t && k->event >= 0 && (size_t)k->event < t->nevents ? &t->events[k->event] : NULL;
            if (!e || !e->pg) {
                *all = 0;
                continue;
            }
            *any = 1;
            const char *name = rv_task_name(g, i);
            int named;
            coll_rec *r = &v[n++];
            r->key = rv_trace_str(t, e->pg);
            r->list = e->pg_ranks ? rv_trace_str(t, e->pg_ranks) : "";
            r->task = (int32_t)i;
            r->pos = (int32_t)p;
            r->peer = -1;
            r->seq = e->seq;
            r->start = k->meas_start_ns;
            r->bytes = e->bytes;
            r->op = rv_kname_coll_op(name, &named);
            if (rv_kname_is_p2p(name)) {
                /* The peer the trace names, else the other of a group of two. */
                if (e->peer >= 0 && e->peer < MAX_GROUP_RANKS)
                    r->peer = e->peer;
                else if (parse_ranks(r->list, pair, 2) == 2)
                    r->peer = pair[0] == j->r[p].rank ? pair[1] : pair[0];
            }
        }
    }
    *out = v;
    *nout = n;
    return 0;
}

static int warned(const rv_job *j, const char *code)
{
    for (size_t i = 0; i < j->nwarn; i++)
        if (!strcmp(j->warn[i].code, code))
            return 1;
    return 0;
}

/* Matches one group's records v[0..n) (sorted by position, then time)
 * among its members pos_in[0..nin) (positions; -1: a rank not in the job). */
static int match_group(rv_job *j, coll_rec *v, size_t n, const int *pos_in, int nin,
                       const char *label, size_t *cap)
{
    size_t np = j->n;
    int rc = 0, nm = 0;
    size_t *first = malloc(((size_t)nin + 1) * sizeof(size_t));
    size_t *count = malloc(((size_t)nin + 1) * sizeof(size_t));
    int *mem = malloc(((size_t)nin + 1) * sizeof(int));
    int32_t *seen = calloc(np + 1, sizeof(int32_t)); /* member index + 1 */
    if (!first || !count || !mem || !seen) {
        rc = RV_ERR_NOMEM;
        goto out;
    }
    /* Members present in the job, each once. */
    for (int i = 0; i < nin; i++)
        if (pos_in[i] >= 0 && !seen[pos_in[i]]) {
            mem[nm++] = pos_in[i];
            seen[pos_in[i]] = nm;
        }
    if (nm < 2)
        goto out;
    /* Where each member's records start (they are sorted by position). */
    for (int q = 0; q < nm; q++) {
        first[q] = SIZE_MAX;
        count[q] = 0;
    }
    int outsider = -1;
    for (size_t i = 0; i < n; i++) {
        int q = seen[v[i].pos] - 1;
        if (q < 0) {
            outsider = j->r[v[i].pos].rank;
            continue;
        }
        if (first[q] == SIZE_MAX)
            first[q] = i;
        count[q]++;
    }
    if (outsider >= 0 && !warned(j, "group_mismatch"))
        rv_job__warn_build(j, "group_mismatch",
                           "rank %d holds collectives of %s, whose member list leaves it out: "
                           "they run unmatched",
                           outsider, label);
    size_t m = SIZE_MAX, mx = 0, total = 0, matched = 0;
    int all_seq = 1;
    for (int q = 0; q < nm; q++) {
        m = count[q] < m ? count[q] : m;
        mx = count[q] > mx ? count[q] : mx;
        total += count[q];
        for (size_t i = 0; i < count[q]; i++)
            all_seq &= v[first[q] + i].seq >= 0;
    }
    /* With sequence numbers on every record, the same number is the same
     * collective (ranks' trace windows may start at different ones);
     * without, the k-th of the group on each member. */
    for (int q = 0; q < nm && all_seq; q++)
        for (size_t a = 1; a < count[q]; a++) /* insertion sort: nearly ordered */
            for (size_t b = a; b > 0 && v[first[q] + b].seq < v[first[q] + b - 1].seq; b--) {
                coll_rec tmp = v[first[q] + b];
                v[first[q] + b] = v[first[q] + b - 1];
                v[first[q] + b - 1] = tmp;
            }
    for (int q = 0; q < nm; q++)
        count[q] = first[q] == SIZE_MAX ? 0 : count[q];
    size_t *at = calloc((size_t)nm + 1, sizeof(size_t)); /* each member's next record */
    if (!at) {
        rc = RV_ERR_NOMEM;
        goto out;
    }
    for (;;) {
        int end = 0, moved = 0;
        for (int q = 0; q < nm; q++)
            end |= at[q] >= count[q];
        if (end)
            break;
        if (all_seq) {
            int32_t hi = -1;
            for (int q = 0; q < nm; q++)
                if (v[first[q] + at[q]].seq > hi)
                    hi = v[first[q] + at[q]].seq;
            for (int q = 0; q < nm; q++)
                while (at[q] < count[q] && v[first[q] + at[q]].seq < hi) {
                    at[q]++;
                    moved = 1;
                }
            if (moved)
                continue;
        }
        if (j->ncoll >= *cap) {
            size_t nc = *cap ? *cap * 2 : 256;
            int32_t *ct = realloc(j->coll_task, (nc * np + 1) * sizeof(int32_t));
            uint8_t *co = ct ? realloc(j->coll_op, nc + 1) : NULL;
            if (ct)
                j->coll_task = ct;
            if (!ct || !co) {
                free(at);
                rc = RV_ERR_NOMEM;
                goto out;
            }
            j->coll_op = co;
            *cap = nc;
        }
        const coll_rec *r0 = &v[first[0] + at[0]];
        int bad_op = 0, bad_size = 0, bad_seq = 0;
        for (int q = 1; q < nm; q++) {
            const coll_rec *r = &v[first[q] + at[q]];
            bad_op |= r->op != r0->op;
            bad_size |= r->bytes > 0 && r0->bytes > 0 && r->bytes != r0->bytes;
            bad_seq |= r->seq >= 0 && r0->seq >= 0 && r->seq != r0->seq;
        }
        if (bad_op || bad_seq) {
            rv_job__warn_build(j, "collective_mismatch",
                               "%s: collective %zu is not the same %s on every member; it and "
                               "the later ones run unmatched",
                               label, matched, bad_op ? "kind" : "sequence number");
            break;
        }
        if (bad_size && !warned(j, "collective_size_mismatch"))
            rv_job__warn_build(j, "collective_size_mismatch",
                               "%s: collective %zu moves different sizes on its members; the "
                               "largest is used",
                               label, matched);
        int32_t *row = j->coll_task + j->ncoll * np;
        for (size_t p = 0; p < np; p++)
            row[p] = -1;
        for (int q = 0; q < nm; q++)
            row[mem[q]] = v[first[q] + at[q]++].task;
        j->coll_op[j->ncoll++] = (uint8_t)r0->op;
        matched++;
    }
    free(at);
    if (matched * (size_t)nm < total && !warned(j, "collective_count_mismatch"))
        rv_job__warn_build(j, "collective_count_mismatch",
                           "%s holds %zu to %zu collectives across its ranks; %zu are matched "
                           "(%s), the rest run unmatched",
                           label, m, mx, matched,
                           all_seq ? "by sequence number" : "in order, the first ones");
out:
    free(first);
    free(count);
    free(mem);
    free(seen);
    return rc;
}

int rv_job__match_groups(rv_job *j, int *grouped, rv_error *err)
{
    coll_rec *v = NULL;
    size_t n = 0, cap = 0;
    int any, all, rc;
    int *ranks = malloc(MAX_GROUP_RANKS * sizeof(int));
    int *pos = malloc(MAX_GROUP_RANKS * sizeof(int));
    *grouped = 0;
    if (!ranks || !pos || collect_recs(j, &v, &n, &any, &all) != 0) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory matching collectives");
        goto out;
    }
    if (!any || !all) {
        *grouped = any ? -1 : 0;
        rc = 0;
        goto out;
    }
    *grouped = 1;
    qsort_r(v, n, sizeof(*v), cmp_rec, j);
    for (size_t i = 0, e; i < n; i = e) {
        int64_t pk = pair_key(j, &v[i]);
        e = i;
        while (e < n && !strcmp(v[e].key, v[i].key) && pair_key(j, &v[e]) == pk)
            e++;
        char label[160];
        int nin = 0;
        if (pk >= 0) {
            int lo = (int)(pk / MAX_GROUP_RANKS), hi = (int)(pk % MAX_GROUP_RANKS);
            snprintf(label, sizeof(label), "point-to-point %d-%d in process group '%.60s'", lo, hi,
                     v[i].key);
            pos[nin++] = pos_of(j, lo);
            pos[nin++] = pos_of(j, hi);
        } else {
            snprintf(label, sizeof(label), "process group '%.60s'", v[i].key);
            int got = *v[i].list ? parse_ranks(v[i].list, ranks, MAX_GROUP_RANKS) : -1;
            got = got > MAX_GROUP_RANKS ? MAX_GROUP_RANKS : got;
            for (size_t a = i + 1; a < e && got >= 0; a++)
                if (strcmp(v[a].list, v[i].list) != 0 && !warned(j, "group_mismatch"))
                    rv_job__warn_build(j, "group_mismatch",
                                       "%s names members %.40s on one rank and %.40s on another: "
                                       "the first rank's list is used",
                                       label, v[i].list, v[a].list);
            if (got < 0) {
                /* No member list: the ranks that hold the group's collectives. */
                if (!warned(j, "group_ranks_unknown"))
                    rv_job__warn_build(j, "group_ranks_unknown",
                                       "%s names no member ranks: its members are taken to be "
                                       "the ranks whose traces hold it",
                                       label);
                for (size_t a = i; a < e && nin < MAX_GROUP_RANKS; a++)
                    if (a == i || v[a].pos != v[a - 1].pos)
                        pos[nin++] = v[a].pos;
            } else {
                for (int q = 0; q < got; q++)
                    pos[nin++] = pos_of(j, ranks[q]);
            }
        }
        if (match_group(j, v + i, e - i, pos, nin, label, &cap) != 0) {
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory matching collectives");
            goto out;
        }
    }
    rc = 0;
out:
    free(ranks);
    free(pos);
    free(v);
    return rc;
}
