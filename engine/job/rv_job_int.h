/* Internal: the job's state shared by rv_job.c (build, run) and
 * rv_job_render.c (the answer). Not a public API. */
#ifndef RV_JOB_INT_H
#define RV_JOB_INT_H

#include "job/rv_job.h"

#define RV_JOB_MAX_RANKS    65536
#define RV_JOB_MAX_WARNINGS 16

typedef struct rv_job_member {
    const rv_graph *g;
    const rv_sim *base;
    int rank;
    const char *label;
} rv_job_member;

struct rv_job {
    size_t n; /* ranks present, sorted by rank */
    rv_job_member *r;
    int world;            /* world size (ranks present plus missing) */
    double *offset_ns;    /* per rank present: added to its times to reach the reference clock */
    double offset_mad_us; /* worst spread of a rank's collective end differences */
    size_t ncoll;         /* matched collectives */
    int32_t *coll_task;   /* ncoll x n task indices; -1 where the rank lacks it */
    uint8_t *coll_op;     /* rv_coll_op per collective */
    int64_t *transfer_ns; /* ncoll x n: measured time after the last rank entered */
    double *coll_bytes;   /* per collective: its message as the traces name it; 0 unknown */
    rv_warning warn[RV_JOB_MAX_WARNINGS];
    size_t nwarn;
};

/* One rank of a simulated run (a slot: a traced rank, or a copy of one
 * when a what-if scales the job up). */
typedef struct rv_job_slot {
    int pos;           /* index into rv_job.r */
    int rank;          /* the rank it stands for */
    rv_graph *owned;   /* its own graph (a straggler made faster); NULL: shared */
    const rv_graph *g; /* the graph simulated (predicted, or the trace's) */
    size_t toff, hoff; /* first task and thread in the merged graph */
    int64_t shift_ns;  /* aligned clock shift of its measured times */
    /* Figures. */
    double measured_us, baseline_us, predicted_us, replay_error;
    double wait_us, transfer_us;     /* predicted run, per step */
    double bwait_us, btransfer_us;   /* baseline run, per step */
    double delay_us;                 /* how long its late arrivals held the others */
    size_t last_in;                  /* collectives it entered last */
    double win_start_us, win_end_us; /* its reported step (or window) on the aligned axis */
} rv_job_slot;

typedef struct rv_job_coll_report {
    int32_t index;
    int op;
    int last_rank;
    double max_wait_us, total_wait_us, transfer_us;
    double last_enter_us, first_leave_us; /* simulated, from the run's first start */
    double bytes;                         /* message size (traced or inferred); 0 unknown */
} rv_job_coll_report;

typedef struct rv_job_path_seg {
    int rank;
    size_t tasks;
    double start_us, end_us;
    size_t inferred; /* links into its tasks that no recorded dependency made */
} rv_job_path_seg;

#define RV_JOB_MAX_PATH 64

struct rv_job_result {
    rv_run_summary sum;
    const rv_job *job;
    size_t nslots;
    rv_job_slot *slots;
    size_t tasks, edges;
    int world_simulated;
    rv_job_coll_report *colls; /* predicted run, most waiting first */
    size_t ncolls;
    rv_job_path_seg path[RV_JOB_MAX_PATH];
    size_t npath;
    int straggler_removed; /* rank made as fast as the median; -1 none */
    double straggler_factor;
    double bandwidth_gbps, latency_us;
    double *sizes;         /* per collective: the size the network what-if used; NULL none */
    size_t inferred_sizes; /* of those, inferred from the measured transfer */
    double largest_bytes;  /* the largest of those */
    /* The whole job per step: energy of every rank's GPUs, and samples per
     * second (each rank's batch over the job's step); < 0 unknown. */
    double energy_j, baseline_energy_j;
    /* The GPUs the job runs on: one per traced rank before, every GPU of
     * each rank's replica after (rv_parallel_replica_gpus), as energy_j
     * counts them. */
    long gpus, baseline_gpus;
    double samples_per_s, baseline_samples_per_s;
    int64_t batch_per_rank; /* 0: unknown (the ranks disagree, or no shapes) */
    size_t nallreduce;      /* collectives that are all-reduces */
    rv_graph **pred;        /* per traced rank: its predicted graph (owned), NULL: as traced */
    size_t npred;
    json_t *applied; /* the per-rank models' applied entries (first rank that ran any) */
    /* The first traced rank's parallelism dimensions in the predicted run
     * (rv_pardims_json on its slice of the job's simulation; owned, may be
     * NULL) and that rank. */
    json_t *parallelism;
    int parallelism_rank;
    rv_warning warnings[RV_RUN_MAX_WARNINGS];
    size_t nwarnings;
};

/* Adds a build warning to a job (dropped past the cap). */
void rv_job__warn_build(rv_job *j, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Matches collectives by the process group the traces name on them
 * (rv_job_group.c): fills j->ncoll, coll_task (-1 for a rank outside the
 * group) and coll_op. *grouped: 1 when it did; 0 when no collective names
 * a group, -1 when only some do (the caller then matches by order). */
int rv_job__match_groups(rv_job *j, int *grouped, rv_error *err);

/* Adds a warning to a result (dropped past the cap, but counted). */
void rv_job__warn(rv_job_result *r, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
