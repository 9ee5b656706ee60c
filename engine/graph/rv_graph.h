/* The kernel-level dependency graph (Daydream section 4, generalized).
 *
 * Tasks run on execution threads (CPU threads, GPU streams, communication
 * channels). Every task has a duration and a gap: the time its thread stays
 * busy after it before the next task on that thread may start (Daydream's
 * non-CUDA CPU time; on GPU streams the launch-queue turnaround). Edges say
 * "child may start no earlier than parent's end (or start) plus delay".
 *
 * The graph is mutable so that what-if transforms can scale, remove and
 * insert tasks. A removed task keeps its place with zero duration and gap so
 * that the dependencies through it still hold. */
#ifndef RV_GRAPH_H
#define RV_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "util/rv_error.h"
#include "util/rv_stop.h"
#include "trace/rv_trace.h"

typedef enum rv_task_kind {
    RV_TASK_CPU = 0, /* runtime / driver API call on a CPU thread */
    RV_TASK_GPU,     /* kernel, memcpy or memset on a GPU stream */
    RV_TASK_COMM,    /* collective or send/recv (NCCL kernels, inserted comm) */
    RV_TASK_DATA,    /* data loading (inserted by models; loads are gaps otherwise) */
} rv_task_kind;

typedef enum rv_thread_kind {
    RV_THREAD_CPU = 0,
    RV_THREAD_GPU,  /* a GPU stream */
    RV_THREAD_COMM, /* a communication channel */
} rv_thread_kind;

typedef enum rv_phase {
    RV_PHASE_UNKNOWN = 0,
    RV_PHASE_FORWARD,
    RV_PHASE_BACKWARD,
    RV_PHASE_OPTIMIZER,
    RV_PHASE_DATALOADER,
    RV_PHASE_COUNT
} rv_phase;

typedef enum rv_edge_kind {
    RV_EDGE_THREAD = 0, /* consecutive tasks on one thread (Daydream 1, 2) */
    RV_EDGE_LAUNCH,     /* API call -> its GPU task, by correlation id (3) */
    RV_EDGE_SYNC,       /* GPU task -> the CPU call that waits for it (4) */
    RV_EDGE_COMM,       /* gradient ready -> communication and back (5) */
    RV_EDGE_EVENT,      /* cudaEventRecord + cudaStreamWaitEvent across streams */
    RV_EDGE_HANDOFF,    /* one CPU thread resumes after another's work */
    RV_EDGE_OTHER,      /* inserted by a transform */
    RV_EDGE_KIND_COUNT
} rv_edge_kind;

/* Task flags. */
#define RV_TF_REMOVED  0x01 /* removed by a transform: zero time, deps kept */
#define RV_TF_SYNC     0x02 /* CPU call that blocks until a GPU task ends */
#define RV_TF_INSERTED 0x04 /* created by a transform (no measured times) */
#define RV_TF_LAUNCH   0x08 /* CPU call that launches GPU work */
#define RV_TF_NCCL     0x10 /* GPU kernel that is a collective (NCCL/RCCL) */

typedef struct rv_task {
    int64_t dur_ns;        /* simulated duration (transforms change it) */
    int64_t gap_ns;        /* thread stays busy this long after the task */
    int64_t gap_dl_ns;     /* part of gap_ns spent inside data-loading ops */
    int64_t meas_start_ns; /* measured start relative to the graph origin; -1 if inserted */
    int64_t meas_dur_ns;   /* measured duration (before any sync re-timing) */
    int64_t bytes;         /* memcpy/memset/comm bytes; -1 unknown */
    int32_t thread;        /* index into rv_graph.threads */
    int32_t event;         /* index into trace events; -1 if inserted */
    int32_t launch;        /* GPU task: index of the CPU task that launched it; else -1 */
    int32_t iteration;     /* index into rv_graph.iters; -1 outside every step */
    uint32_t name;         /* string id in the trace's string table */
    uint32_t op;           /* innermost CPU op enclosing the launch; 0 if none */
    uint32_t layer;        /* outermost op below the step annotation; 0 if none */
    int32_t priority;      /* for the priority schedule; lower runs first */
    uint8_t kind;          /* rv_task_kind */
    uint8_t cat;           /* rv_cat of the source event */
    uint8_t phase;         /* rv_phase */
    uint8_t flags;         /* RV_TF_* */
    uint8_t pardim;        /* inserted collective: its parallelism dimension and kind
                              (RV_PARDIM_TAG, rv_pardims.h); 0 otherwise. Fits the padding */
} rv_task;

typedef struct rv_edge {
    int32_t src, dst;
    int64_t delay_ns;   /* added to the parent's end (or start, see from_start) */
    uint8_t kind;       /* rv_edge_kind */
    uint8_t from_start; /* 1: child.start >= parent.start + delay */
    uint8_t pad[6];
} rv_edge;

typedef struct rv_thread {
    uint8_t kind;        /* rv_thread_kind */
    int32_t device;      /* GPU threads: device; CPU threads: -1 */
    int32_t stream;      /* GPU threads: stream id; -1 otherwise */
    uint32_t pid, tid;   /* string ids as in the trace */
    uint32_t label;      /* string id, e.g. "CPU 25738" or "GPU 0 stream 7" */
    int32_t first, last; /* first and last task on the thread, -1 if empty */
    int32_t norig;       /* tasks [first, first + norig) came from the trace, in time order */
} rv_thread;

/* One training step (ProfilerStep#N or a collector step marker). */
typedef struct rv_iter {
    int64_t step;     /* N of ProfilerStep#N, or the ordinal */
    int64_t start_ns; /* measured, relative to the graph origin */
    int64_t end_ns;
    int32_t thread;                /* CPU thread of the annotation */
    int32_t first_task, last_task; /* task index range (inclusive) of that thread */
} rv_iter;

typedef struct rv_graph {
    const rv_trace *trace; /* borrowed: names, devices; must outlive the graph */
    rv_task *tasks;
    size_t ntasks, cap_tasks;
    rv_edge *edges;
    size_t nedges, cap_edges;
    int edges_borrowed; /* edges are the source's (rv_graph_clone_cow) until one is added */
    rv_thread *threads;
    size_t nthreads, cap_threads;
    rv_iter *iters;
    size_t niters;
    int64_t origin_ns;         /* absolute time of graph time 0 */
    int64_t span_ns;           /* measured first start to last end */
    int64_t launch_lat_ns;     /* typical launch -> kernel start on an idle stream */
    int64_t gpu_gap_ns;        /* typical gap between queued tasks on a stream */
    size_t launch_lat_samples; /* idle-stream launches launch_lat_ns was measured on */
    int launch_lat_assumed;    /* too few: launch_lat_ns is the documented default */
    int gpu_constant_capped;   /* launch latency or queue gap measured above 1 s, capped */
    size_t inferred_waits;     /* cross-stream waits inferred without event records */
    size_t inferred_holds;     /* GPU tasks without a launch held by their likely launcher */
    size_t inferred_idle;      /* unexplained stream idle gaps kept as measured */
    size_t prewindow_gpu; /* GPU tasks queued before profiling began (no launch, stream start) */
    int64_t prewindow_gpu_ns; /* their measured GPU time */
    size_t ngpu_tasks;
    size_t uncorrelated_gpu; /* GPU tasks without a launching call */
    uint32_t *extra_names;   /* reserved */
    /* Per string id of the trace: the kernel class and precision rules of
     * the GPU tasks' names, worked out once when the graph is built
     * (rv_graph_classify) so that what-ifs and reports read them instead of
     * matching every name again; 0 = not classified. The graph that built
     * it owns it; clones share it (a clone never outlives its source). */
    uint32_t *name_info;
    size_t nname_info;
    int owns_name_info;
    /* The ops' FLOPs and bytes per event (rv_flops_of_trace), costed once
     * when the graph is built from a trace with op shapes, so that the
     * metrics of every answer read them; NULL without shapes. Owned and
     * shared with clones like name_info. */
    struct rv_flops_trace *flops;
    int owns_flops;
    /* Layer instances (rv_layers.h) found when the graph is built; NULL
     * when the trace names no repeated module. Owned and shared with
     * clones like name_info. */
    struct rv_layers *layers;
    int owns_layers;
    /* While a what-if changes the graph (rv_apply_stop): the most
     * tasks and edges it may reach (RV_ERR_LIMIT past them, before any
     * allocation; 0 = the RV_GRAPH_MAX_* caps only), and the stop that
     * the models' long loops check (borrowed; NULL = none). */
    size_t max_tasks, max_edges;
    const rv_stop *stop;
} rv_graph;

/* Caps on a graph's arrays (RV_ERR_LIMIT past them). */
#define RV_GRAPH_MAX_TASKS   ((size_t)64 * 1024 * 1024)
#define RV_GRAPH_MAX_EDGES   ((size_t)256 * 1024 * 1024)
#define RV_GRAPH_MAX_THREADS (1 << 16)
/* Times a trace may hold for the simulator (which keeps every time within
 * +-2^61 ns and lets what-ifs stretch a run): an event's end, and the span
 * from the first task's start to the last task's end. */
#define RV_GRAPH_MAX_TIME_NS ((int64_t)1 << 62)
#define RV_GRAPH_MAX_SPAN_NS ((int64_t)1 << 58)

typedef struct rv_graph_opts {
    int keep_cpu_ops; /* reserved: ops stay as gaps and layer labels */
} rv_graph_opts;

/* What rv_graph_build and the simulator would refuse in a trace (borrowed),
 * checked in one pass without building anything, so that an upload can be
 * refused before it is stored: more than RV_GRAPH_MAX_THREADS threads and
 * streams, more than RV_GRAPH_MAX_TASKS tasks, an event ending past
 * RV_GRAPH_MAX_TIME_NS (or a negative duration), a span past
 * RV_GRAPH_MAX_SPAN_NS. 0, or RV_ERR_UNSUPPORTED with the reason (the event
 * index when one event is at fault), RV_ERR_NOMEM. */
int rv_graph_check_trace(const rv_trace *trace, rv_error *err);

/* Builds the graph from a parsed trace (borrowed; must outlive the graph);
 * rv_graph.c holds the build passes, rv_graph_query.c the container and
 * the lookups.
 * Fails with RV_ERR_UNSUPPORTED and a clear message when the trace has
 * nothing to simulate (no GPU tasks: CPU-only or counters-only traces).
 * Returns 0 and *out (new; free with rv_graph_free). */
int rv_graph_build(const rv_trace *trace, const rv_graph_opts *opts, rv_graph **out, rv_error *err);

/* Deep copy for what-ifs (the trace stays borrowed). NULL on OOM. */
rv_graph *rv_graph_clone(const rv_graph *g);

/* rv_graph_clone whose edges stay g's (borrowed) until the copy first adds
 * or reserves edges (rv_graph_add_edge, rv_graph_reserve_edges, which
 * copy them then): most what-ifs change durations only, and copying the
 * edges was a third of the clone. g must outlive the copy and keep its
 * edges unchanged meanwhile; nothing may write rv_graph.edges but those
 * two. Free with rv_graph_free. NULL on OOM. */
rv_graph *rv_graph_clone_cow(const rv_graph *g);

void rv_graph_free(rv_graph *g);

/* Appends a task to thread t after its current last task, with a thread
 * edge; returns the new index or a negative rv_err. The caller fills the
 * rest of *task (thread is set from t). */
int64_t rv_graph_append_task(rv_graph *g, int32_t t, const rv_task *task);

/* Adds an edge; 0 or RV_ERR_NOMEM / RV_ERR_LIMIT. */
int rv_graph_add_edge(rv_graph *g, int32_t src, int32_t dst, int64_t delay_ns, int kind,
                      int from_start);

/* Makes room for n edges in all, so a pass that adds many does not grow
 * the array edge by edge; 0 or RV_ERR_NOMEM / RV_ERR_LIMIT. */
int rv_graph_reserve_edges(rv_graph *g, size_t n);

/* Adds a thread (copied); returns its index or a negative rv_err. */
int32_t rv_graph_add_thread(rv_graph *g, const rv_thread *th);

/* Marks a task removed (zero duration and gap, dependencies kept). */
void rv_graph_remove_task(rv_graph *g, int32_t task);

/* True for API calls that block until GPU work is done (cudaDeviceSynchronize,
 * cudaStreamSynchronize, cudaMemcpy, cudaFree, their HIP and driver forms). */
int rv_graph_is_sync_call(const char *name);
/* An API call at least this long that returns right after a GPU task ends
 * is taken to have waited for it (a full launch queue, implicit syncs). */
#define RV_GRAPH_BLOCKED_CALL_NS 50000

const char *rv_phase_name(int phase);
const char *rv_task_kind_name(int kind);

#endif
