/* The job answer as JSON (the contract in rv_job.h and
 * docs/internals/job.md). */
#include "job/rv_job_int.h"

#include <stdio.h>
#include <stdlib.h>

static const char *op_name(int op)
{
    static const char *const names[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                        "all_to_all"};
    return op >= 0 && op < (int)(sizeof(names) / sizeof(names[0])) ? names[op] : "collective";
}

/* Sets key to v (a new reference, may be NULL after OOM); 1 on failure. */
static int put(json_t *o, const char *key, json_t *v)
{
    return !v || json_object_set_new(o, key, v) != 0;
}

typedef struct strag {
    int rank;
    double delay_us;
    size_t last_in;
} strag;

static int cmp_strag(const void *a, const void *b)
{
    const strag *x = a, *y = b;
    if (x->delay_us != y->delay_us)
        return x->delay_us < y->delay_us ? 1 : -1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* The most collectives the answer lists (most waiting first). */
#define RV_JOB_MAX_COLL_ROWS 64

json_t *rv_job_render(const rv_job_result *r, const char *label)
{
    const rv_job *j = r->job;
    const rv_run_summary *s = &r->sum;
    json_t *o = json_object();
    int bad = !o;
    if (bad)
        return NULL;
    if (label)
        bad |= put(o, "job", json_string(label));
    bad |= put(o, "world_size", json_integer(j->world));
    bad |= put(o, "ranks_present", json_integer((json_int_t)j->n));
    bad |= put(o, "world_simulated", json_integer(r->world_simulated));
    bad |= put(o, "tasks", json_integer((json_int_t)r->tasks));
    bad |= put(o, "edges", json_integer((json_int_t)r->edges));
    bad |= put(o, "collectives", json_integer((json_int_t)j->ncoll));
    bad |= put(o, "measured_us", json_real(s->measured_us));
    bad |= put(o, "baseline_us", json_real(s->baseline_us));
    bad |= put(o, "predicted_us", json_real(s->predicted_us));
    bad |= put(o, "speedup", json_real(s->speedup));
    bad |= put(o, "replay_error", json_real(s->replay_error));
    json_t *wa = json_array();
    for (size_t i = 0; wa && i < r->nwarnings; i++)
        json_array_append_new(wa, json_pack("{s:s,s:s}", "code", r->warnings[i].code, "message",
                                            r->warnings[i].message));
    bad |= put(o, "warnings", wa);
    json_t *missing = json_array();
    for (int k = 0, p = 0; missing && k < j->world; k++) {
        while ((size_t)p < j->n && j->r[p].rank < k)
            p++;
        if ((size_t)p >= j->n || j->r[p].rank != k)
            json_array_append_new(missing, json_integer(k));
    }
    bad |= put(o, "missing_ranks", missing);
    json_t *ranks = json_array();
    for (size_t i = 0; ranks && i < r->nslots; i++) {
        const rv_job_slot *sl = &r->slots[i];
        json_t *x = json_pack("{s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:{s:f,s:f}}", "rank", sl->rank,
                              "measured_us", sl->measured_us, "baseline_us", sl->baseline_us,
                              "predicted_us", sl->predicted_us, "replay_error", sl->replay_error,
                              "wait_us", sl->wait_us, "transfer_us", sl->transfer_us, "baseline",
                              "wait_us", sl->bwait_us, "transfer_us", sl->btransfer_us);
        if (x)
            json_object_set_new(x, "window_us",
                                json_pack("[f,f]", sl->win_start_us, sl->win_end_us));
        if (x && (size_t)sl->pos < j->n && j->r[sl->pos].label && (size_t)i < j->n)
            json_object_set_new(x, "trace", json_string(j->r[sl->pos].label));
        if (x && i >= j->n)
            json_object_set_new(x, "copy_of", json_integer(j->r[sl->pos].rank));
        json_array_append_new(ranks, x);
    }
    bad |= put(o, "ranks", ranks);
    json_t *off = json_object();
    for (size_t p = 0; off && p < j->n; p++) {
        char k[16];
        snprintf(k, sizeof(k), "%d", j->r[p].rank);
        json_object_set_new(off, k, json_real(j->offset_ns[p] / 1e3));
    }
    bad |= put(o, "clock_offsets_us", off);
    strag *st = calloc(r->nslots + 1, sizeof(*st));
    json_t *sa = json_array();
    size_t nst = 0;
    for (size_t i = 0; st && i < r->nslots; i++)
        if (r->slots[i].delay_us > 0)
            st[nst++] = (strag){r->slots[i].rank, r->slots[i].delay_us, r->slots[i].last_in};
    if (st)
        qsort(st, nst, sizeof(*st), cmp_strag);
    for (size_t i = 0; sa && st && i < nst; i++)
        json_array_append_new(sa, json_pack("{s:i,s:f,s:I}", "rank", st[i].rank, "delay_us",
                                            st[i].delay_us, "last_in", (json_int_t)st[i].last_in));
    bad |= !st;
    /* The slowest rank has the longest step; the one whose late arrivals
     * held the others most is the last to arrive (often the fastest: it
     * waits least). */
    int slowest = -1;
    double longest = -1;
    for (size_t i = 0; i < r->nslots; i++)
        if (r->slots[i].predicted_us > longest) {
            longest = r->slots[i].predicted_us;
            slowest = r->slots[i].rank;
        }
    bad |= put(o, "slowest_rank", json_integer(slowest));
    bad |= put(o, "last_arriving_rank", json_integer(st && nst ? st[0].rank : -1));
    free(st);
    bad |= put(o, "stragglers", sa);
    json_t *ca = json_array();
    for (size_t i = 0; ca && i < r->ncolls && i < RV_JOB_MAX_COLL_ROWS; i++) {
        const rv_job_coll_report *c = &r->colls[i];
        json_array_append_new(
            ca, json_pack("{s:i,s:s,s:i,s:f,s:f,s:f,s:f}", "index", c->index, "op", op_name(c->op),
                          "last_rank", c->last_rank, "max_wait_us", c->max_wait_us, "total_wait_us",
                          c->total_wait_us, "transfer_us", c->transfer_us, "bytes", c->bytes));
    }
    bad |= put(o, "collective_waits", ca);
    json_t *cp = json_array();
    for (size_t i = r->npath; cp && i-- > 0;)
        json_array_append_new(cp, json_pack("{s:i,s:I,s:f,s:f,s:I}", "rank", r->path[i].rank,
                                            "tasks", (json_int_t)r->path[i].tasks, "start_us",
                                            r->path[i].start_us, "end_us", r->path[i].end_us,
                                            "inferred_links", (json_int_t)r->path[i].inferred));
    bad |= put(o, "critical_path", cp);
    json_t *jo =
        json_pack("{s:f,s:f}", "bandwidth_gbps", r->bandwidth_gbps, "latency_us", r->latency_us);
    if (jo && r->straggler_removed >= 0) {
        json_object_set_new(jo, "straggler_removed", json_integer(r->straggler_removed));
        json_object_set_new(jo, "straggler_gpu_factor", json_real(r->straggler_factor));
    }
    bad |= put(o, "job_whatif", jo);
    bad |= put(o, "gpus",
               json_pack("{s:I,s:I}", "baseline", (json_int_t)r->baseline_gpus, "predicted",
                         (json_int_t)r->gpus));
    bad |=
        put(o, "energy_j",
            r->energy_j >= 0 && r->baseline_energy_j >= 0
                ? json_pack("{s:f,s:f}", "baseline", r->baseline_energy_j, "predicted", r->energy_j)
                : json_null());
    bad |=
        put(o, "throughput",
            r->samples_per_s >= 0
                ? json_pack("{s:I,s:i,s:{s:f,s:f}}", "batch_per_rank",
                            (json_int_t)r->batch_per_rank, "ranks", (int)r->nslots, "samples_per_s",
                            "baseline", r->baseline_samples_per_s, "predicted", r->samples_per_s)
                : json_null());
    bad |= put(o, "applied", r->applied ? json_incref(r->applied) : json_array());
    bad |= put(o, "parallelism", r->parallelism ? json_incref(r->parallelism) : json_array());
    bad |= put(o, "parallelism_rank", json_integer(r->parallelism ? r->parallelism_rank : -1));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}
