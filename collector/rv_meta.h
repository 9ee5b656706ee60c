/* Trace metadata: platform identity, job, rank, clocks.
 *
 * Everything here is optional and gathered without CUPTI: the host side from
 * /proc, the environment and uname; the GPU side from NVML, loaded with
 * dlopen so that a machine without libnvidia-ml still works. */
#ifndef RV_META_H
#define RV_META_H

#include <stdint.h>

typedef struct rv_clock_triple {
    uint64_t cupti_ns;     /* cuptiGetTimestamp (0 when unavailable) */
    uint64_t realtime_ns;  /* CLOCK_REALTIME */
    uint64_t monotonic_ns; /* CLOCK_MONOTONIC */
} rv_clock_triple;

typedef struct rv_meta_gpu {
    char name[96];
    int index;
    int num_sms;        /* 0 when unknown */
    uint64_t total_mem; /* bytes, 0 when unknown */
    int sm_clock_max_mhz, mem_clock_max_mhz;
    double power_limit_w;            /* enforced limit, 0 when unknown */
    double power_min_w, power_max_w; /* allowed range of the limit */
    double power_default_w;
} rv_meta_gpu;

#define RV_META_MAX_GPUS 16

typedef struct rv_meta {
    char gpu[96];       /* name of the first GPU */
    char cpu[128];      /* /proc/cpuinfo "model name" */
    char driver[80];    /* NVIDIA driver version, e.g. "580.65.06" */
    char cuda[24];      /* CUDA runtime (or driver API) version, "13.0" */
    char framework[64]; /* REVERIE_FRAMEWORK, else "pytorch" when libtorch is loaded */
    char job[128];      /* REVERIE_JOB, else "" */
    char hostname[128];
    char backend[16]; /* "nccl" */
    int pid;
    int rank, local_rank, world_size; /* -1 when unknown */
    rv_meta_gpu gpus[RV_META_MAX_GPUS];
    int ngpus;
    rv_clock_triple start, end;
    uint64_t dropped_records;
} rv_meta;

/* Fills the host side: hostname, pid, CPU model, rank/world size from RANK,
 * WORLD_SIZE, LOCAL_RANK, OMPI_COMM_WORLD_*, PMI_*, SLURM_*; job; framework. */
void rv_meta_collect_host(rv_meta *m);

/* Fills the GPU side from NVML when it can be loaded, and the driver/CUDA
 * versions from the already loaded libcuda/libcudart. Returns 1 when NVML
 * answered, 0 when it was not available (fields stay as they were). */
int rv_meta_collect_gpu(rv_meta *m);

/* Reads CLOCK_REALTIME and CLOCK_MONOTONIC; cupti_ns is left to the caller. */
void rv_meta_clock_now(rv_clock_triple *t);

/* Helper shared with tests: first integer among the named environment
 * variables (NULL-terminated list), or dflt. */
int rv_meta_env_int(const char *const *names, int dflt);

#endif
