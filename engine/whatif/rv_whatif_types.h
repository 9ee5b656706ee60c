/* Internal: the parsed what-if request (struct rv_whatif and its parts),
 * shared by the parser (rv_whatif.c, rv_whatif_spec.c) and the models that
 * read it (models/). Types only: the code that applies a request to a
 * graph lives after the models (models/rv_apply.h). Not a public API. */
#ifndef RV_WHATIF_TYPES_H
#define RV_WHATIF_TYPES_H

#include <stdint.h>

#include "graph/rv_select.h"
#include "trace/rv_coll.h"
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
    int has_par; /* "parallel" given */
    rv_par par;
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
    int has_job;                             /* "job" given */
    rv_job_whatif job;
    int shallow; /* rv_whatif_for_rank's copy: the selectors are the parent's */
};

#endif
