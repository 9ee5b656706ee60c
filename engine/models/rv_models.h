/* Internal: the parsed what-if document and the model entry points shared
 * by rv_whatif.c and rv_models_*.c. Not a public API. */
#ifndef RV_MODELS_H
#define RV_MODELS_H

#include <jansson.h>

#include "trace/rv_coll.h"
#include "graph/rv_graph.h"
#include "hw/rv_hw.h"
#include "simulate/rv_power.h"
#include "graph/rv_select.h"
#include "whatif/rv_whatif.h"

typedef enum rv_opt_kind {
    RV_OPT_AMP = 0,
    RV_OPT_FUSED_OPTIMIZER,
    RV_OPT_KERNEL_FUSION,
    RV_OPT_RESTRUCTURE_BN,
    RV_OPT_VDNN,
    RV_OPT_GIST,
    RV_OPT_RECOMPUTE,
    RV_OPT_GRAD_ACCUM,
    RV_OPT_SCALE,
    RV_OPT_REMOVE,
    RV_OPT_INSERT,
    RV_OPT_CPU_SPEED,
    RV_OPT_DATALOADER,
    RV_OPT_BATCH_SIZE,
    RV_OPT_COUNT
} rv_opt_kind;

/* Application stages, in order (docs/whatif.md "Order of application"). */
enum {
    RV_STAGE_PRECISION = 0,
    RV_STAGE_FUSION,
    RV_STAGE_MEMORY,
    RV_STAGE_GENERIC,
    RV_STAGE_DISTRIBUTED,
    RV_STAGE_ACCUMULATION,
    RV_STAGE_POWER,
    RV_STAGE_DATALOADER,
};

/* The most ranks one optimization's "ranks" may list. */
#define RV_OPT_MAX_RANKS 64

typedef struct rv_opt {
    int kind;  /* rv_opt_kind */
    int index; /* position in "optimizations" */
    int stage; /* application stage (see docs/whatif.md) */
    int has_sel;
    rv_select sel; /* select / after */
    double factor; /* scale (duration multiplier), cpu_speed (speed ratio) */
    /* amp */
    int dtype;
    int amp_daydream; /* 1: Daydream's /3 and /2 rule */
    double cast_us;   /* inserted cast kernel duration, us */
    /* dataloader */
    int workers;       /* -1: not given */
    double speedup;    /* 0: not given */
    double contention; /* main-thread CPU slowdown per busy loader core */
    double ipc_us;     /* per-batch hand-over cost with workers */
    /* fused optimizer / fusion */
    double traffic_ratio;
    int remove_launches; /* remove: also remove the launching CPU calls */
    /* insert */
    double dur_us;
    int insert_kind; /* rv_sel_kind of the inserted task (kernel, cpu, memcpy) */
    /* memory savers */
    double pcie_gbps; /* vdnn */
    double ratio;     /* gist: encode+decode cost relative to the producing kernel */
    double share;     /* recompute: share of forward recomputed */
    int steps;        /* gradient_accumulation: micro-steps per optimizer step */
    int batch_to;     /* batch_size: the new batch (0: factor given) */
    /* job: the ranks it applies to (0: all) */
    int nranks;
    int32_t ranks[RV_OPT_MAX_RANKS];
} rv_opt;

typedef struct rv_dist {
    int workers;
    int gpus_per_node;      /* 0: min(workers, 8) */
    double intra_gbps;      /* Gb/s per GPU per direction; 0: from the hw table */
    double inter_gbps;      /* Gb/s per node per direction */
    double latency_us;      /* alpha per step */
    int algorithm;          /* rv_coll_algo */
    double bucket_mb;       /* DDP bucket cap, MiB */
    double first_bucket_mb; /* DDP first bucket, MiB */
    int p3;
    double p3_slice_kb; /* P3 slice size, KiB */
    int blueconnect;
    double dgc_density;         /* 0: off */
    double tensor_fusion_mb;    /* 0: off */
    double tensor_partition_mb; /* 0: off */
    double efficiency;          /* share of link bandwidth achieved */
    double interference;        /* compute slowdown while a collective overlaps */
    double gradient_mb;         /* total gradient bytes override; 0: estimate */
    int ps_servers;             /* parameter servers; 0: colocated */
    rv_coll_table allreduce;    /* measured all-reduce times; n == 0: alpha-beta */
} rv_dist;

/* "parallel": other degrees of the parallelism dimensions (0 / -1: as traced). */
typedef struct rv_par {
    int data;         /* data-parallel ranks */
    int zero;         /* ZeRO / FSDP stage 0-3; -1 not given */
    int tensor;       /* tensor-parallel degree */
    int pipeline;     /* pipeline stages */
    int microbatches; /* micro-batches per step (pipeline) */
    int expert;       /* expert-parallel degree */
} rv_par;

struct rv_whatif {
    rv_opt *opts;
    size_t nopts;
    int has_dist;
    rv_dist dist;
    double power_limit_w;    /* 0: unchanged */
    double power_limit_frac; /* 0: not given; else a share of the GPU's default limit,
                                resolved to power_limit_w at apply time */
    int schedule;
    int has_schedule;
    char gpu[64];                            /* hardware override; "" = from the trace */
    int batch_size;                          /* samples per iteration; 0 unknown */
    int platform_overheads;                  /* "host_overheads": "platform" */
    const struct rv_oh_table *overheads;     /* borrowed; set by the caller */
    int platform_kmodels;                    /* "kernel_models": "platform" */
    const struct rv_kmodel *kmodel_platform; /* borrowed; set by the caller */
    const struct rv_kmodel *kmodel_target;   /* the `gpu` target's; borrowed, may be NULL */
    int has_par;                             /* "parallel" given */
    rv_par par;
    int has_job; /* "job" given */
    rv_job_whatif job;
    int shallow; /* rv_whatif_for_rank's copy: the selectors are the parent's */
};

/* The hardware row for g (the override when given). May be NULL. */
const rv_hw *rv_models__hw(const struct rv_whatif *w, const rv_graph *g);

/* Shared graph helpers. next[] maps each task to its successor on its
 * thread (-1 at the end); returns new array or NULL on OOM. */
int32_t *rv_models__thread_next(const rv_graph *g);
/* Median duration of the CPU calls that launch GPU work (ns). */
int64_t rv_models__launch_ns(const rv_graph *g);
/* Removes a task; when keep_gap, its gap (CPU work not owned by it) stays. */
void rv_models__remove(rv_graph *g, int32_t i, int keep_gap);

/* Inserts a task of dur_ns after anchor (see rv_models_generic.c); sel_kind
 * is RV_SEL_KERNEL, RV_SEL_MEMCPY or RV_SEL_CPU. side_of_thread (nthreads
 * entries, -1 = none yet) caches the side thread per original thread. */
int rv_models__insert_after(rv_graph *g, int32_t anchor, const int32_t *next, int64_t dur_ns,
                            int sel_kind, int32_t *side_of_thread);

/* ns * mult rounded, saturated at RV_MODELS_MAX_TASK_NS (a task of more
 * than a day is no what-if; past it sums would overflow the clock). */
#define RV_MODELS_MAX_TASK_NS ((int64_t)86400 * 1000000000)
int64_t rv_models__scaled_ns(int64_t ns, double mult);

/* Adds {code, message} to the "warnings" array of a model's applied entry
 * (obj, borrowed); rv_run lifts them into the answer's warnings. */
void rv_models__warn(json_t *obj, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Models. Each returns 0 or a negative rv_err and adds one object to
 * applied (borrowed array). */
int rv_models__amp(const struct rv_whatif *w, const rv_opt *o, rv_graph *g, json_t *applied,
                   rv_error *err);
int rv_models__fused_optimizer(const struct rv_whatif *w, const rv_opt *o, rv_graph *g,
                               json_t *applied, rv_error *err);
int rv_models__kernel_fusion(const struct rv_whatif *w, const rv_opt *o, rv_graph *g,
                             json_t *applied, rv_error *err);
int rv_models__restructure_bn(const struct rv_whatif *w, const rv_opt *o, rv_graph *g,
                              json_t *applied, rv_error *err);
int rv_models__memory_saver(const struct rv_whatif *w, const rv_opt *o, rv_graph *g,
                            json_t *applied, rv_error *err);
int rv_models__generic(const struct rv_whatif *w, const rv_opt *o, rv_graph *g, json_t *applied,
                       rv_error *err);
int rv_models__dataloader(const struct rv_whatif *w, const rv_opt *o, rv_graph *g, json_t *applied,
                          rv_error *err);
int rv_models__distributed(const struct rv_whatif *w, rv_graph *g, json_t *applied, rv_error *err);
/* The `parallel` what-if (rv_models_parallel.c). */
int rv_models__parallel(const struct rv_whatif *w, rv_graph *g, json_t *applied, rv_error *err);
int rv_models__power(const struct rv_whatif *w, rv_graph *g, json_t *applied, rv_error *err);
int rv_models__batch_size(const struct rv_whatif *w, const rv_opt *o, rv_graph *g, json_t *applied,
                          rv_error *err);
/* Kernel times rescaled to w->gpu (rv_models_gpu.c). */
int rv_models__gpu(const struct rv_whatif *w, rv_graph *g, json_t *applied, rv_error *err);

#endif
