/* The trace model: what a trace reader produces and the graph builder reads.
 *
 * A trace is a flat array of events plus an interned string table and the
 * metadata a platform identity needs. It is format-neutral: the Kineto reader
 * and (later) the collector's records fill the same structure. Times are
 * absolute integer nanoseconds so that fractional-microsecond input keeps
 * its precision. */
#ifndef RV_TRACE_H
#define RV_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "util/rv_error.h"
#include "util/rv_map.h"

#define RV_NONE (-1)

/* What an event is, after category normalization (modern and legacy names). */
typedef enum rv_cat {
    RV_CAT_CPU_OP = 0,      /* cpu_op, Operator */
    RV_CAT_USER_ANNOTATION, /* user_annotation (ProfilerStep#N, record_function) */
    RV_CAT_PYTHON,          /* python_function (kept out by default) */
    RV_CAT_RUNTIME,         /* cuda_runtime, Runtime, hip runtime */
    RV_CAT_DRIVER,          /* cuda_driver */
    RV_CAT_KERNEL,          /* kernel, Kernel */
    RV_CAT_MEMCPY,          /* gpu_memcpy, Memcpy */
    RV_CAT_MEMSET,          /* gpu_memset, Memset */
    RV_CAT_GPU_ANNOTATION,  /* gpu_user_annotation */
    RV_CAT_CUDA_SYNC,       /* cuda_sync (GPU-side view of a sync call) */
    RV_CAT_COUNT
} rv_cat;

typedef enum rv_sync_kind {
    RV_SYNC_NONE = 0,
    RV_SYNC_STREAM,    /* "Stream Sync" */
    RV_SYNC_EVENT,     /* "Event Sync" */
    RV_SYNC_CONTEXT,   /* "Context Sync" */
    RV_SYNC_WAIT_EVENT /* "Wait Event": a stream waits for an event (GPU side) */
} rv_sync_kind;

/* One complete ("ph":"X") event. Numeric fields not present are RV_NONE. */
typedef struct rv_event {
    int64_t ts_ns;           /* absolute start, ns */
    int64_t dur_ns;          /* >= 0 */
    int64_t correlation;     /* args.correlation or the ac2g flow id; RV_NONE */
    int64_t external_id;     /* args."External id" / "external id"; RV_NONE */
    int64_t bytes;           /* memcpy/memset bytes when given; RV_NONE */
    int64_t wait_event_corr; /* cuda_sync: wait_on_cuda_event_record_corr_id */
    uint32_t name;           /* string id */
    uint32_t pid;            /* string id of the pid as written ("25738", "0") */
    uint32_t tid;            /* string id of the tid as written ("25738", "stream 7") */
    int32_t device;          /* args.device, RV_NONE */
    int32_t stream;          /* args.stream, RV_NONE */
    int32_t wait_stream;     /* cuda_sync: wait_on_stream, RV_NONE */
    int32_t grid[3];         /* kernel launch geometry; 0 when unknown */
    int32_t block[3];
    int32_t registers;  /* registers per thread, 0 when unknown */
    int32_t shared_mem; /* bytes, 0 when unknown */
    uint8_t cat;        /* rv_cat */
    uint8_t sync_kind;  /* rv_sync_kind for cuda_sync events */
    uint8_t in_type;    /* ops: first tensor type of "Input type", rv_prec_type; 0 none */
    uint8_t pad[1];
    /* Collectives (newer Kineto, on NCCL kernels): the process group. */
    uint32_t pg;       /* "Process Group Name", string id; 0 none */
    uint32_t pg_ranks; /* member ranks as text ("[0, 1]"), string id; 0 none */
    int32_t seq;       /* "Seq" (collective sequence number), RV_NONE */
    int32_t peer;      /* point-to-point: "Dst Rank" / "Src Rank", RV_NONE */
} rv_event;

/* GPU properties from "deviceProperties" (or the collector's metadata). */
typedef struct rv_device {
    int32_t id;
    uint32_t name; /* string id, e.g. "Tesla V100-DGXS-32GB" */
    int32_t num_sms;
    int32_t compute_major, compute_minor;
    int64_t total_mem; /* bytes */
} rv_device;

/* Interned, immutable strings. Id 0 is always "". */
typedef struct rv_strtab {
    char *data; /* NUL-terminated strings back to back */
    size_t len, cap;
    uint32_t *offsets; /* id -> offset in data */
    uint32_t count, offsets_cap;
    rv_map index; /* hash of the text -> id */
} rv_strtab;

/* One argument of an op whose shapes are known (Kineto's record_shapes
 * "Input Dims"/"Input type"/"Concrete Inputs", or a joined execution
 * trace). Dims and values are runs in rv_trace.shape_ints. */
typedef struct rv_shape_arg {
    int32_t ndims;    /* rank of a flat tensor shape; -1 none (scalar, list, nested) */
    int32_t nvals;    /* ints of a scalar or int-list value; -1 none */
    uint32_t dims;    /* first dim in shape_ints */
    uint32_t vals;    /* first value in shape_ints */
    uint8_t ptype;    /* rv_prec_type of a tensor (trace/rv_kname.h); 0 unknown */
    uint8_t is_out;   /* an output (ETs only; Kineto records inputs) */
    uint8_t itemsize; /* bytes per element of a tensor; 0 unknown */
    uint8_t pad;
} rv_shape_arg;

/* The arguments of one op event. */
typedef struct rv_op_shape {
    int32_t event;  /* index of the op in rv_trace.events */
    uint32_t first; /* first argument in rv_trace.shape_args */
    uint32_t nargs;
} rv_op_shape;

/* One "[memory]" event of the PyTorch profiler on a GPU: an allocation
 * (bytes > 0) or a free (bytes < 0) and, in newer traces, the allocator's
 * totals after it. */
typedef struct rv_mem_sample {
    int64_t ts_ns;
    int64_t bytes;
    int64_t allocated; /* "Total Allocated"; RV_NONE when the trace lacks it */
    int64_t reserved;  /* "Total Reserved"; RV_NONE */
    int32_t device;
    int32_t pad;
} rv_mem_sample;

/* Where shapes came from (rv_trace.shapes_source). */
enum { RV_SHAPES_NONE = 0, RV_SHAPES_KINETO, RV_SHAPES_ET };

typedef struct rv_trace {
    rv_event *events; /* in input order */
    size_t nevents, cap_events;
    rv_device *devices;
    size_t ndevices;
    rv_strtab strings;

    /* Metadata; string ids, 0 when absent. */
    int32_t rank, world_size; /* distributedInfo; RV_NONE when absent */
    uint32_t backend;         /* distributedInfo.backend, e.g. "nccl" */
    uint32_t source_format;   /* "kineto", "collector" or "et": rv_trace_source */
    uint32_t platform_gpu;    /* device 0 name or the collector's GPU name */
    uint32_t platform_cpu, platform_driver, platform_cuda, platform_framework;
    uint32_t job;         /* collector: job name */
    double power_limit_w; /* collector/NVML: cap the trace ran at; 0 = unknown */
    int64_t base_time_ns; /* "baseTimeNanoseconds" when present, else 0 */

    /* Op shapes, sorted by event (rv_shapes.h); empty when the trace has none. */
    rv_op_shape *op_shapes;
    size_t nop_shapes, cap_op_shapes;
    rv_shape_arg *shape_args;
    size_t nshape_args, cap_shape_args;
    int64_t *shape_ints;
    size_t nshape_ints, cap_shape_ints;
    int shapes_source;    /* RV_SHAPES_* */
    int shapes_truncated; /* the caps on shapes were hit: later ops have none */

    /* What an execution trace says of the persistent memory (bytes), when
     * one was joined (mem_model 1): rv_et_shapes_to_trace. */
    int mem_model;
    int64_t mem_weights, mem_gradients, mem_optimizer_state; /* RV_NONE: unknown */
    uint32_t mem_optimizer;                                  /* string id, e.g. "Adam" */

    /* An execution trace alone (source_format "et"): kernels timed at
     * efficiencies fitted on measured traces (rv_et_to_trace_fitted), 0
     * when all took the default. Not kept in snapshots. */
    size_t et_kernels_fitted;

    /* GPU memory events in input order; capped at RV_TRACE_MAX_MEM. */
    rv_mem_sample *mem;
    size_t nmem, cap_mem;
    int mem_truncated;

    /* What the reader saw but did not keep, for reports and diagnostics. */
    size_t skipped_events; /* async, counters, flows, metadata, python */
    size_t input_bytes;    /* decompressed JSON bytes read */
} rv_trace;

/* Returns a new empty trace (string id 0 = ""), or NULL on OOM. */
rv_trace *rv_trace_new(void);
/* Frees the trace and everything it owns. NULL-safe. */
void rv_trace_free(rv_trace *t);
/* Whether a and b hold the same trace: events, strings by id, devices,
 * metadata, shapes, memory samples and the reader's counts. 1, or 0 with
 * *what (may be NULL) naming the first part that differs. */
int rv_trace_same(const rv_trace *a, const rv_trace *b, const char **what);
/* Makes t as rv_trace_new does, keeping the arrays' memory (events,
 * shapes, memory samples, strings) for reuse. 0 or RV_ERR_NOMEM. */
int rv_trace_reset(rv_trace *t);

/* Interns s[0..len) and returns its id; UINT32_MAX on OOM or when the table
 * would pass its cap (64M strings / 2 GiB of text). */
uint32_t rv_strtab_intern(rv_strtab *st, const char *s, size_t len);
/* Returns the string with that id (borrowed; valid until the table is freed).
 * An out-of-range id gives "". */
const char *rv_strtab_get(const rv_strtab *st, uint32_t id);
/* Id of s when already interned, else UINT32_MAX. s[0..len) must hold no
 * NUL (rv_strtab_intern cuts at the first one). */
uint32_t rv_strtab_find(const rv_strtab *st, const char *s, size_t len);
/* Frees what the table holds and leaves it empty (no "" either). NULL-safe. */
void rv_strtab_free(rv_strtab *st);
/* The length of string id (0 for an id not in the table). */
size_t rv_strtab_len(const rv_strtab *st, uint32_t id);
/* Empties the table, keeping its memory for reuse. */
void rv_strtab_clear(rv_strtab *st);
/* Bytes the table holds (text, offsets, index), for memory accounting. */
size_t rv_strtab_bytes(const rv_strtab *st);

static inline const char *rv_trace_str(const rv_trace *t, uint32_t id)
{
    return rv_strtab_get(&t->strings, id);
}

/* What produced a trace. The code decides on this value; source_format
 * keeps its name, which snapshots and the store hold. */
typedef enum rv_source {
    RV_SOURCE_OTHER = 0, /* a name this build does not know, or none */
    RV_SOURCE_KINETO,    /* the PyTorch profiler */
    RV_SOURCE_COLLECTOR, /* Reverie's CUPTI collector */
    RV_SOURCE_ET,        /* an execution trace alone, modelled (rv_et_to_trace) */
} rv_source;

/* The rv_source a source_format name stands for (NULL: RV_SOURCE_OTHER). */
int rv_trace_source_of_name(const char *name);
/* The name of an rv_source ("kineto", "collector", "et"; "" for OTHER). */
const char *rv_trace_source_name(int src);
/* t's rv_source (NULL: RV_SOURCE_OTHER). */
int rv_trace_source(const rv_trace *t);

/* Appends a copy of *ev; returns its index or a negative rv_err. Capped at
 * RV_TRACE_MAX_EVENTS. */
#define RV_TRACE_MAX_EVENTS ((size_t)64 * 1024 * 1024)
int64_t rv_trace_push(rv_trace *t, const rv_event *ev);

/* Makes room for n events at once (at most RV_TRACE_MAX_EVENTS), so that a
 * reader that can estimate the count does not copy the array as it grows.
 * Memory not yet written costs address space only. 0 or RV_ERR_NOMEM (the
 * array is as it was: growing by push still works). */
int rv_trace_reserve(rv_trace *t, size_t n);

/* Appends a device record (copied); 0, RV_ERR_NOMEM, or RV_ERR_LIMIT past
 * RV_TRACE_MAX_DEVICES. */
#define RV_TRACE_MAX_DEVICES 65536
int rv_trace_add_device(rv_trace *t, const rv_device *d);

/* Appends a memory sample (copied): 0, RV_ERR_NOMEM, or 1 past
 * RV_TRACE_MAX_MEM (dropped, mem_truncated set). */
#define RV_TRACE_MAX_MEM ((size_t)16 * 1024 * 1024)
int rv_trace_add_mem(rv_trace *t, const rv_mem_sample *m);

/* Initializes an event with every optional field set to "absent". */
void rv_event_init(rv_event *ev);

/* True for events that run on a GPU engine (kernel, memcpy, memset). */
static inline int rv_cat_is_gpu_task(int cat)
{
    return cat == RV_CAT_KERNEL || cat == RV_CAT_MEMCPY || cat == RV_CAT_MEMSET;
}

/* Stable lowercase name of a category ("kernel", "cuda_runtime", ...). */
const char *rv_cat_name(int cat);

#endif
