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
} rv_sim_opts;

/* rv_sim_run with options (NULL: earliest start, never stops). Also returns
 * RV_ERR_BUDGET (and nothing in *out) when o->stop says stop. */
int rv_sim_run_opts(const rv_graph *g, const rv_sim_opts *o, rv_sim **out, rv_error *err);

void rv_sim_free(rv_sim *s);

/* Maps a measured CPU time on thread t (graph time) to simulated time, by
 * its position among that thread's tasks: inside a task it moves with the
 * task, inside a gap with the end of the task before it. */
int64_t rv_sim_map_time(const rv_graph *g, const rv_sim *s, int32_t thread, int64_t meas_ns);

/* Simulated duration of iteration i (start and end markers mapped). */
int64_t rv_sim_iter_ns(const rv_graph *g, const rv_sim *s, size_t i);

/* Parses "earliest_start" | "fifo" | "priority"; -1 if unknown. */
int rv_schedule_parse(const char *s);
const char *rv_schedule_name(int policy);

#endif
