/* The build passes that link syncs and waits: CPU calls that block on GPU
 * work (explicit syncs, blocking copies, long calls), cross-stream waits
 * the trace did not record, and GPU work whose launch was lost. They run
 * after the structural edges (rv_graph.c) and share its builder state
 * (rv_graph_build.h). See docs/internals/graph.md. */
#include <stdlib.h>
#include <string.h>

#include "graph/rv_graph.h"
#include "graph/rv_graph_build.h"

/* An API call this long that returns just after a GPU task ends was
 * waiting for it; the slack absorbs timestamp jitter between CPU and GPU. */
#define BLOCKED_CALL_MIN_NS   RV_GRAPH_BLOCKED_CALL_NS
#define BLOCKED_CALL_SLACK_NS 5000
/* A sync returns a little after the GPU work it waited for ends (the
 * driver polls): work that ended later than this after the return was not
 * waited for. */
#define SYNC_SLACK_NS 5000
/* A kernel that starts this much later than its launch and its stream
 * allowed (at least; twice the launch latency when that is more) waited
 * for something; a task on another stream that ended at most
 * STREAM_WAIT_NEAR_NS (or four queue gaps) before it is what it waited for. */
#define STREAM_WAIT_MIN_NS  10000
#define STREAM_WAIT_NEAR_NS 5000

typedef rv_graph__builder builder;

/* Last task on GPU thread ti launched strictly before time t, or -1
 * (launch_ts is non-decreasing along a stream, see link_launches). */
static int32_t last_launched_before(const builder *b, const rv_thread *th, int64_t t)
{
    int32_t lo = th->first, hi = th->first + th->norig;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (b->launch_ts[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > th->first ? lo - 1 : -1;
}

static int32_t gpu_thread_of_stream(const rv_graph *g, int32_t device, int32_t stream)
{
    for (size_t i = 0; i < g->nthreads; i++) {
        const rv_thread *th = &g->threads[i];
        if (th->kind == RV_THREAD_GPU && th->stream == stream &&
            (device < 0 || th->device == device))
            return (int32_t)i;
    }
    return -1;
}

/* Last task on GPU thread th, among those launched before `before`, that
 * ended by `by`; -1 if none. Ends grow along a stream. */
static int32_t last_ended_by(const builder *b, const rv_thread *th, int64_t before, int64_t by)
{
    int32_t k = last_launched_before(b, th, before);
    int32_t lo = th->first, hi = k + 1;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        const rv_task *t = &b->g->tasks[mid];
        if (t->meas_start_ns + t->meas_dur_ns <= by)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > th->first ? lo - 1 : -1;
}

/* The GPU task a call waits for: the latest-ending one, on any stream,
 * among those launched before `before` and ended by `by` (INT64_MAX: no
 * bound); -1 if none. */
static int32_t latest_gpu_task(const builder *b, int64_t before, int64_t by)
{
    const rv_graph *g = b->g;
    int32_t best = -1;
    int64_t best_end = INT64_MIN;
    for (size_t ti = 0; ti < g->nthreads; ti++) {
        const rv_thread *th = &g->threads[ti];
        if (th->kind != RV_THREAD_GPU || th->norig == 0)
            continue;
        int32_t k = last_ended_by(b, th, before, by);
        if (k < 0)
            continue;
        int64_t e = g->tasks[k].meas_start_ns + g->tasks[k].meas_dur_ns;
        if (e > best_end) {
            best_end = e;
            best = k;
        }
    }
    return best;
}

static int add_sync_edge(rv_graph *g, int32_t gpu_task, int32_t cpu_task)
{
    rv_task *c = &g->tasks[cpu_task];
    const rv_task *s = &g->tasks[gpu_task];
    int64_t gend = s->meas_start_ns + s->meas_dur_ns;
    int64_t cend = c->meas_start_ns + c->meas_dur_ns;
    c->flags |= RV_TF_SYNC;
    if (s->launch == cpu_task) {
        /* A call that waits for the copy it launched: an edge into the call
         * would be a cycle, so the call keeps the part before the copy
         * began and the wait holds back the next call on its thread. */
        const rv_thread *th = &g->threads[c->thread];
        int32_t next = cpu_task + 1;
        if (next >= th->first + th->norig)
            return 0;
        int64_t before = s->meas_start_ns - c->meas_start_ns;
        c->dur_ns = before < 0 ? 0 : (before < c->meas_dur_ns ? before : c->meas_dur_ns);
        int64_t tail = cend > gend ? cend - gend : 0;
        return rv_graph_add_edge(g, gpu_task, next, tail + c->gap_ns, RV_EDGE_SYNC, 0);
    }
    /* The call's own cost is what remains after the wait ends. */
    if (gend > c->meas_start_ns)
        c->dur_ns = cend > gend ? cend - gend : 0;
    return rv_graph_add_edge(g, gpu_task, cpu_task, 0, RV_EDGE_SYNC, 0);
}

int rv_graph__link_syncs(builder *b)
{
    rv_graph *g = b->g;
    const rv_trace *tr = b->tr;
    rv_map sync_info; /* correlation -> cuda_sync event index */
    size_t nsync = 0;
    for (size_t i = 0; i < tr->nevents; i++)
        if (tr->events[i].cat == RV_CAT_CUDA_SYNC)
            nsync++;
    rv_map_init(&sync_info, RV_TRACE_MAX_EVENTS);
    int rc = rv_map_reserve(&sync_info, nsync);
    for (size_t i = 0; i < tr->nevents && rc >= 0; i++) {
        const rv_event *ev = &tr->events[i];
        if (ev->cat == RV_CAT_CUDA_SYNC && ev->correlation != RV_NONE)
            rc = rv_map_put(&sync_info, (uint64_t)ev->correlation, (uint32_t)i);
    }

    /* Whether a call name is a sync, per distinct name: 0 unknown, 1 yes, 2 no. */
    uint8_t *sync_name = rc < 0 ? NULL : calloc(tr->strings.count + 1, 1);
    if (!sync_name) {
        rv_map_free(&sync_info);
        return rc < 0 ? rc : RV_ERR_NOMEM;
    }
    rc = 0;
    for (size_t i = 0; i < g->ntasks && rc == 0; i++) {
        rv_task *c = &g->tasks[i];
        if (c->kind != RV_TASK_CPU)
            continue;
        const rv_event *ev = &tr->events[c->event];
        if (c->name < tr->strings.count && !sync_name[c->name])
            sync_name[c->name] = rv_graph_is_sync_call(rv_trace_str(tr, c->name)) ? 1 : 2;
        int named_sync = c->name < tr->strings.count
                             ? sync_name[c->name] == 1
                             : rv_graph_is_sync_call(rv_trace_str(tr, c->name));
        int32_t si =
            ev->correlation != RV_NONE ? rv_graph__map_get(&sync_info, ev->correlation) : -1;
        const rv_event *se = si >= 0 ? &tr->events[si] : NULL;

        if (se && se->sync_kind == RV_SYNC_WAIT_EVENT) {
            /* A stream waits for an event: GPU-side edge from the event's
             * last task to the next task on the waiting stream. */
            int32_t rec = se->wait_event_corr != RV_NONE
                              ? rv_graph__map_get(&b->corr, se->wait_event_corr)
                              : -1;
            int32_t src_th = gpu_thread_of_stream(g, se->device, se->wait_stream);
            int32_t dst_th = gpu_thread_of_stream(g, se->device, se->stream);
            if (rec < 0 || src_th < 0 || dst_th < 0 || src_th == dst_th)
                continue;
            int32_t src = last_launched_before(b, &g->threads[src_th], g->tasks[rec].meas_start_ns);
            int32_t after = last_launched_before(b, &g->threads[dst_th], c->meas_start_ns);
            int32_t dst = after + 1;
            if (after < 0)
                dst = g->threads[dst_th].first;
            if (src < 0 || dst >= g->threads[dst_th].first + g->threads[dst_th].norig)
                continue;
            rc = rv_graph_add_edge(g, src, dst, g->gpu_gap_ns, RV_EDGE_EVENT, 0);
            continue;
        }

        int32_t target = -1;
        if (se && se->sync_kind == RV_SYNC_EVENT && se->wait_event_corr != RV_NONE) {
            int32_t rec = rv_graph__map_get(&b->corr, se->wait_event_corr);
            int32_t th = gpu_thread_of_stream(g, se->device, se->wait_stream);
            if (rec >= 0 && th >= 0)
                target = last_launched_before(b, &g->threads[th], g->tasks[rec].meas_start_ns);
        } else if (se && se->sync_kind == RV_SYNC_STREAM && se->stream >= 0) {
            int32_t th = gpu_thread_of_stream(g, se->device, se->stream);
            if (th >= 0)
                target = last_launched_before(b, &g->threads[th], c->meas_start_ns);
        } else if (se || named_sync) {
            /* Without a record that names the stream, the call waited for
             * GPU work that had ended by the time it returned: work still
             * running then (queued compute on another stream) it did not
             * wait for. A synchronous copy's own copy is linked by
             * link_blocking_copies; this covers the work queued before it. */
            int64_t cend = c->meas_start_ns + c->meas_dur_ns;
            target = latest_gpu_task(b, c->meas_start_ns, cend + SYNC_SLACK_NS);
        }
        if (target >= 0)
            rc = add_sync_edge(g, target, (int32_t)i);
    }
    rv_map_free(&sync_info);
    free(sync_name);
    return rc;
}

/* Last task on GPU thread th that ended by `by`, or -1 (ends grow along a
 * stream). */
static int32_t last_ended_before(const rv_graph *g, const rv_thread *th, int64_t by)
{
    int32_t lo = th->first, hi = th->first + th->norig;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        const rv_task *t = &g->tasks[mid];
        if (t->meas_start_ns + t->meas_dur_ns <= by)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > th->first ? lo - 1 : -1;
}

/* A GPU task whose launch call the trace lost (launched from a thread the
 * profiler missed, a driver-API launcher, a graph replay) was still held
 * by its launch: without an edge it would run as early as its stream
 * allows, far ahead of the CPU that fed it. Its launcher is taken to be
 * the CPU thread that launched the stream's previous launched task; the
 * last task of that thread that ended a launch latency before it started
 * holds it, at its measured distance. */
static int hold_for_lost_launch(rv_graph *g, const rv_thread *cpu, int32_t k)
{
    const rv_task *t = &g->tasks[k];
    int64_t by = t->meas_start_ns - g->launch_lat_ns;
    int32_t j = last_ended_before(g, cpu, by);
    if (j < 0)
        return 0;
    int64_t je = g->tasks[j].meas_start_ns + g->tasks[j].meas_dur_ns;
    g->inferred_holds++;
    return rv_graph_add_edge(g, j, k, t->meas_start_ns - je, RV_EDGE_OTHER, 0);
}

/* Cross-stream waits the trace did not record. Most traces carry no
 * cudaEventRecord / cudaStreamWaitEvent pairs, yet a side stream's kernel
 * often waits for compute or NCCL work on another stream. Evidence: the
 * kernel starts well after it could have (its launch plus the launch
 * latency, and its stream's previous task), and a task on another stream
 * of the same device ended just before it started. Then that task is its
 * parent. Without such a task (a GPU busy for another reason, or work
 * launched before the window) nothing is inferred and the kernel keeps its
 * launch and stream order only. */
int rv_graph__infer_stream_waits(builder *b)
{
    rv_graph *g = b->g;
    int64_t late =
        2 * g->launch_lat_ns > STREAM_WAIT_MIN_NS ? 2 * g->launch_lat_ns : STREAM_WAIT_MIN_NS;
    int64_t near =
        4 * g->gpu_gap_ns > STREAM_WAIT_NEAR_NS ? 4 * g->gpu_gap_ns : STREAM_WAIT_NEAR_NS;
    uint8_t *has_wait = calloc(g->ntasks + 1, 1);
    int rc = 0;

    if (!has_wait)
        return RV_ERR_NOMEM;
    for (size_t e = 0; e < g->nedges; e++)
        if (g->edges[e].kind == RV_EDGE_EVENT)
            has_wait[g->edges[e].dst] = 1;
    for (size_t ti = 0; ti < g->nthreads && rc == 0; ti++) {
        const rv_thread *th = &g->threads[ti];
        if (th->kind != RV_THREAD_GPU)
            continue;
        /* Until the stream's first launched task, its work was queued
         * before profiling began: no CPU call holds it (rule 3 keeps its
         * idle gaps). After it, a task without a launch lost its record. */
        int32_t launcher = -1;
        for (int32_t k = th->first; k < th->first + th->norig && rc == 0; k++) {
            const rv_task *t = &g->tasks[k];
            if (t->launch >= 0)
                launcher = g->tasks[t->launch].thread;
            else if (launcher >= 0)
                rc = hold_for_lost_launch(g, &g->threads[launcher], k);
            if (rc != 0 || has_wait[k] || (t->launch < 0 && k == th->first))
                continue;
            /* Ready: its launch call has returned (a pageable copy starts
             * inside its call) and the launch latency has passed. */
            int64_t ready = INT64_MIN;
            if (t->launch >= 0) {
                const rv_task *l = &g->tasks[t->launch];
                int64_t le = l->meas_start_ns + l->meas_dur_ns;
                ready = l->meas_start_ns + g->launch_lat_ns;
                ready = le > ready ? le : ready;
            }
            int64_t prev_end = INT64_MIN;
            if (k > th->first) {
                const rv_task *p = &g->tasks[k - 1];
                prev_end = p->meas_start_ns + p->meas_dur_ns;
                ready = prev_end + g->gpu_gap_ns > ready ? prev_end + g->gpu_gap_ns : ready;
            }
            if (t->meas_start_ns - ready <= late)
                continue;
            int32_t best = -1;
            int64_t best_end = INT64_MIN;
            for (size_t oi = 0; oi < g->nthreads; oi++) {
                const rv_thread *o = &g->threads[oi];
                if (oi == ti || o->kind != RV_THREAD_GPU || o->device != th->device ||
                    o->norig == 0)
                    continue;
                int32_t j = last_ended_before(g, o, t->meas_start_ns);
                if (j < 0)
                    continue;
                int64_t je = g->tasks[j].meas_start_ns + g->tasks[j].meas_dur_ns;
                if (je > best_end) {
                    best_end = je;
                    best = j;
                }
            }
            /* It must have ended during the wait, just before the start. */
            if (best >= 0 && best_end >= ready && t->meas_start_ns - best_end <= near) {
                rc = rv_graph_add_edge(g, best, k, t->meas_start_ns - best_end, RV_EDGE_EVENT, 0);
                g->inferred_waits++;
            } else if (k > th->first) {
                /* Nothing in the trace explains the wait (work of another
                 * process or rank, an event recorded before the window,
                 * lost activity records): the stream keeps its measured
                 * idle time after its previous task. */
                rc = rv_graph_add_edge(g, k - 1, k, t->meas_start_ns - prev_end, RV_EDGE_OTHER, 0);
                g->inferred_idle++;
            }
        }
    }
    free(has_wait);
    return rc;
}

/* A launch call that ends after the GPU task it launched has finished, and
 * lasted much longer than a launch, blocked on that task (synchronous or
 * pageable copies). */
int rv_graph__link_blocking_copies(builder *b)
{
    rv_graph *g = b->g;
    int rc = 0;
    for (size_t i = 0; i < g->ntasks && rc == 0; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->kind == RV_TASK_CPU || t->launch < 0 || t->cat != RV_CAT_MEMCPY)
            continue;
        rv_task *c = &g->tasks[t->launch];
        if (c->flags & RV_TF_SYNC)
            continue;
        int64_t gend = t->meas_start_ns + t->meas_dur_ns;
        int64_t cend = c->meas_start_ns + c->meas_dur_ns;
        if (gend <= cend && c->meas_dur_ns > 4 * g->launch_lat_ns + t->meas_dur_ns / 2)
            rc = add_sync_edge(g, (int32_t)i, t->launch);
    }
    return rc;
}

/* Any other API call that ran long and returned right after a GPU task it
 * did not launch finished was blocked by the GPU: a full launch queue,
 * an implicit synchronization in cudaFree or cudaMalloc, a pageable copy.
 * Modeling it as a wait keeps the CPU in step with a faster or slower GPU. */
int rv_graph__link_blocking_calls(builder *b)
{
    rv_graph *g = b->g;
    int rc = 0;
    for (size_t i = 0; i < g->ntasks && rc == 0; i++) {
        const rv_task *c = &g->tasks[i];
        if (c->kind != RV_TASK_CPU || (c->flags & RV_TF_SYNC) ||
            c->meas_dur_ns < BLOCKED_CALL_MIN_NS)
            continue;
        int64_t cend = c->meas_start_ns + c->meas_dur_ns;
        int32_t best = latest_gpu_task(b, c->meas_start_ns, cend + BLOCKED_CALL_SLACK_NS);
        int64_t best_end =
            best >= 0 ? g->tasks[best].meas_start_ns + g->tasks[best].meas_dur_ns : INT64_MIN;
        /* It must have ended late in the call, or the call was slow for
         * reasons of its own. */
        if (best >= 0 && best_end >= c->meas_start_ns + c->meas_dur_ns / 2)
            rc = add_sync_edge(g, best, (int32_t)i);
    }
    return rc;
}
