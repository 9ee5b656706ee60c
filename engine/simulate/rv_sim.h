/* The simulator: Daydream Algorithm 1 with a pluggable schedule policy.
 *
 * A frontier of ready tasks, one progress clock per execution thread,
 * start = max(thread progress, parents' constraints). Deterministic: ties
 * break by task index. O((V + E) log V). */
#ifndef RV_SIM_H
#define RV_SIM_H

#include <stdint.h>

#include "util/rv_error.h"
#include "graph/rv_graph.h"
#include "util/rv_stop.h"

/* The simulated clock stays within +-2^61 ns (73 years), so that a span
 * (last - first) cannot overflow; a run that would pass it is refused. */
#define RV_SIM_MAX_NS ((int64_t)1 << 61)

typedef enum rv_schedule {
    RV_SCHED_EARLIEST_START = 0, /* the ready task that can start first */
    RV_SCHED_FIFO,               /* in the order tasks became ready */
    RV_SCHED_PRIORITY,           /* lowest rv_task.priority, then earliest start */
} rv_schedule;

typedef struct rv_sim {
    int64_t *start_ns; /* per task, simulated */
    int64_t *end_ns;   /* start + dur */
    int32_t *binder;   /* parent that set the start (-1: thread progress or none) */
    size_t ntasks;
    int64_t makespan_ns; /* last end - first start */
    int64_t first_start_ns, last_end_ns;
    /* With gangs (rv_sim_opts.gang): per task, when it could have started
     * on its own; a gang member waits from there to its gang's start.
     * NULL without gangs. */
    int64_t *arrive_ns;
} rv_sim;

/* Simulates g. Returns 0 and *out (new; rv_sim_free), or RV_ERR_INVALID with
 * a message when the graph has a cycle (some tasks never become ready). */
int rv_sim_run(const rv_graph *g, rv_schedule policy, rv_sim **out, rv_error *err);

/* One out-edge as the simulator walks it. */
typedef struct rv_sim_out {
    int64_t delay_ns;
    int32_t dst;
    uint8_t kind; /* rv_edge_kind */
    uint8_t from_start;
} rv_sim_out;

/* A graph's out-edges packed by source task (each task's in edge order),
 * so that the simulator walks them in sequence, and each task's in-degree.
 * Built once for a graph whose edges no what-if changes (a copy-on-write
 * clone borrows them), it spares every simulation of it the building. */
typedef struct rv_sim_adj {
    const rv_edge *edges;  /* the edges it was built from (borrowed, compared only) */
    size_t nedges, ntasks; /* and their counts */
    int32_t *off;          /* task u's out-edges are out[off[u] .. off[u + 1]) */
    rv_sim_out *out;
    int32_t *indeg;
} rv_sim_adj;

/* The adjacency of g. 0 and *out (new; rv_sim_adj_free), RV_ERR_NOMEM, or
 * RV_ERR_INVALID when an edge points outside the graph. */
int rv_sim_adj_new(const rv_graph *g, rv_sim_adj **out, rv_error *err);

void rv_sim_adj_free(rv_sim_adj *a);

/* How rv_sim_run_opts simulates. */
typedef struct rv_sim_opts {
    int policy;          /* rv_schedule */
    const rv_stop *stop; /* borrowed, may be NULL: checked every RV_STOP_EVERY tasks */
    /* Gangs (dPRO's collectives across ranks): tasks of one gang start
     * together, when the last of them could start. gang[i] is task i's
     * gang in [0, ngangs) or -1; gang_size[k] counts its members. Both
     * borrowed, may be NULL. A gang that never fills is reported as a
     * cycle. */
    const int32_t *gang;
    const int32_t *gang_size;
    size_t ngangs;
    /* Borrowed, may be NULL: used when it was built from the simulated
     * graph's own edges (same array and counts), else built anew. */
    const rv_sim_adj *adj;
} rv_sim_opts;

/* rv_sim_run with options (NULL: earliest start, never stops). Also returns
 * RV_ERR_BUDGET (and nothing in *out) when o->stop says stop. */
int rv_sim_run_opts(const rv_graph *g, const rv_sim_opts *o, rv_sim **out, rv_error *err);

void rv_sim_free(rv_sim *s);

/* The one mapping of a measured time (graph time) on a thread onto a
 * simulation, by its position among that thread's original tasks: inside
 * a task it moves with the task, inside the gap after it with the task's
 * end, never past the next task's start. It is monotone, so nested events
 * stay nested. The reports measure instants (a step's markers): the
 * default keeps a time's offset inside a call, its wait before the call's
 * simulated start. The Kineto export places whole events: it passes where
 * each call's interval starts (rv_sim_call_starts), stretches a call's
 * inside linearly onto it and scales a gap as the model scaled it. */
typedef struct rv_sim_map {
    const rv_graph *g; /* the simulated graph (borrowed) */
    const rv_sim *s;   /* its simulation (borrowed) */
    /* Per original task: where its interval starts (borrowed); NULL: the
     * simulated start, a first call that waits anchored at its measured
     * start. */
    const int64_t *starts;
    const rv_graph *base; /* the measured graph, for gap scaling; NULL: gaps kept */
    int stretch;          /* inside a call: linear onto [start, end] */
} rv_sim_map;

int64_t rv_sim_map_at(const rv_sim_map *m, int32_t thread, int64_t meas_ns);

/* a + (m - m0) * (b - a) / (m1 - m0), exact for any span in int64: the
 * interpolation every time map uses; a for an empty span. */
int64_t rv_sim_lerp(int64_t m, int64_t m0, int64_t m1, int64_t a, int64_t b);

/* rv_sim_map_at with the reports' defaults. */
int64_t rv_sim_map_time(const rv_graph *g, const rv_sim *s, int32_t thread, int64_t meas_ns);

/* Fills xs[0..n) (n original tasks, caller-owned) with where each call's
 * interval starts: its simulated start, except a call that blocked on
 * the GPU (RV_TF_SYNC), which starts when it would have without the wait
 * (its thread's previous task and gap done, every other dependency met),
 * so that the wait is inside the call, as it was measured. */
void rv_sim_call_starts(const rv_graph *g, const rv_sim *s, size_t n, int64_t *xs);

/* Simulated duration of iteration i (start and end markers mapped). */
int64_t rv_sim_iter_ns(const rv_graph *g, const rv_sim *s, size_t i);

/* Parses "earliest_start" | "fifo" | "priority"; -1 if unknown. */
int rv_schedule_parse(const char *s);
const char *rv_schedule_name(int policy);

#endif
