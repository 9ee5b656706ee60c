/* Trace metadata. See rv_meta.h. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rv_meta.h"

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void rv_meta_clock_now(rv_clock_triple *t)
{
    t->realtime_ns = clock_ns(CLOCK_REALTIME);
    t->monotonic_ns = clock_ns(CLOCK_MONOTONIC);
}

int rv_meta_env_int(const char *const *names, int dflt)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (!v || !*v)
            continue;
        char *end;
        long x = strtol(v, &end, 10);
        if (*end == '\0' && x >= 0 && x < (1L << 30))
            return (int)x;
    }
    return dflt;
}

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    size_t i = strspn(s, " \t");
    memmove(s, s + i, strlen(s + i) + 1);
}

static void cpu_model(char *out, size_t cap)
{
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        /* x86 says "model name", arm64 kernels often only "CPU part". */
        if (strncmp(line, "model name", 10) == 0 || strncmp(line, "Model", 5) == 0) {
            char *colon = strchr(line, ':');
            if (colon) {
                snprintf(out, cap, "%s", colon + 1);
                trim(out);
                break;
            }
        }
    }
    fclose(f);
}

static int lib_mapped(const char *needle)
{
    char line[1024];
    int found = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return 0;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

void rv_meta_collect_host(rv_meta *m)
{
    static const char *const rank_vars[] = {"RANK",      "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                            "PMIX_RANK", "SLURM_PROCID",         NULL};
    static const char *const local_vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                             "MPI_LOCALRANKID", "SLURM_LOCALID", NULL};
    static const char *const world_vars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                             "SLURM_NTASKS", NULL};
    m->pid = (int)getpid();
    if (gethostname(m->hostname, sizeof(m->hostname)) != 0)
        m->hostname[0] = '\0';
    m->hostname[sizeof(m->hostname) - 1] = '\0';
    cpu_model(m->cpu, sizeof(m->cpu));
    m->rank = rv_meta_env_int(rank_vars, -1);
    m->local_rank = rv_meta_env_int(local_vars, -1);
    m->world_size = rv_meta_env_int(world_vars, -1);
    snprintf(m->backend, sizeof(m->backend), "nccl");
    const char *job = getenv("REVERIE_JOB");
    snprintf(m->job, sizeof(m->job), "%s", job ? job : "");
    const char *fw = getenv("REVERIE_FRAMEWORK");
    if (fw && *fw)
        snprintf(m->framework, sizeof(m->framework), "%s", fw);
    else if (lib_mapped("libtorch_cuda"))
        snprintf(m->framework, sizeof(m->framework), "pytorch");
    else if (lib_mapped("libtensorflow"))
        snprintf(m->framework, sizeof(m->framework), "tensorflow");
    else if (lib_mapped("libjax") || lib_mapped("xla_extension"))
        snprintf(m->framework, sizeof(m->framework), "jax");
}

/* NVML through dlopen: only the handful of calls we need, declared here with
 * NVML's documented signatures (nvml.h is not part of the toolkit install). */
typedef int (*nvml_init_fn)(void);
typedef int (*nvml_count_fn)(unsigned int *);
typedef int (*nvml_handle_fn)(unsigned int, void **);
typedef int (*nvml_name_fn)(void *, char *, unsigned int);
typedef int (*nvml_uint_fn)(void *, unsigned int *);
typedef int (*nvml_range_fn)(void *, unsigned int *, unsigned int *);
typedef int (*nvml_clock_fn)(void *, int, unsigned int *);
typedef int (*nvml_str_fn)(char *, unsigned int);

typedef struct nvml_memory {
    unsigned long long total, free, used;
} nvml_memory;
typedef int (*nvml_mem_fn)(void *, nvml_memory *);

#define NVML_CLOCK_SM  1
#define NVML_CLOCK_MEM 2

static void version_str(int v, char *out, size_t cap)
{
    /* 13000 -> "13.0", 12080 -> "12.8" */
    snprintf(out, cap, "%d.%d", v / 1000, (v % 1000) / 10);
}

int rv_meta_collect_gpu(rv_meta *m)
{
    /* The CUDA driver has loaded us, so libcuda is in the process already:
     * RTLD_NOLOAD never pulls in a library that is not there. */
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    int v = 0;
    typedef int (*ver_fn)(int *);
    ver_fn rt = (ver_fn)dlsym(RTLD_DEFAULT, "cudaRuntimeGetVersion");
    if (rt && rt(&v) == 0 && v > 0) {
        version_str(v, m->cuda, sizeof(m->cuda));
    } else if (cuda) {
        ver_fn drv = (ver_fn)dlsym(cuda, "cuDriverGetVersion");
        if (drv && drv(&v) == 0 && v > 0)
            version_str(v, m->cuda, sizeof(m->cuda));
    }
    if (cuda)
        dlclose(cuda);

    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return 0;
    nvml_init_fn init = (nvml_init_fn)dlsym(h, "nvmlInit_v2");
    nvml_init_fn shutdown = (nvml_init_fn)dlsym(h, "nvmlShutdown");
    nvml_count_fn count = (nvml_count_fn)dlsym(h, "nvmlDeviceGetCount_v2");
    nvml_handle_fn handle = (nvml_handle_fn)dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    nvml_name_fn name = (nvml_name_fn)dlsym(h, "nvmlDeviceGetName");
    nvml_str_fn drvver = (nvml_str_fn)dlsym(h, "nvmlSystemGetDriverVersion");
    nvml_uint_fn plimit = (nvml_uint_fn)dlsym(h, "nvmlDeviceGetEnforcedPowerLimit");
    nvml_uint_fn pdefault = (nvml_uint_fn)dlsym(h, "nvmlDeviceGetPowerManagementDefaultLimit");
    nvml_range_fn prange = (nvml_range_fn)dlsym(h, "nvmlDeviceGetPowerManagementLimitConstraints");
    nvml_clock_fn maxclk = (nvml_clock_fn)dlsym(h, "nvmlDeviceGetMaxClockInfo");
    nvml_mem_fn mem = (nvml_mem_fn)dlsym(h, "nvmlDeviceGetMemoryInfo");
    nvml_uint_fn cores = (nvml_uint_fn)dlsym(h, "nvmlDeviceGetNumGpuCores");
    (void)cores;
    if (!init || !count || !handle || init() != 0) {
        dlclose(h);
        return 0;
    }
    if (drvver) {
        char buf[80];
        if (drvver(buf, sizeof(buf)) == 0)
            snprintf(m->driver, sizeof(m->driver), "%s", buf);
    }
    unsigned int n = 0;
    if (count(&n) != 0)
        n = 0;
    if (n > RV_META_MAX_GPUS)
        n = RV_META_MAX_GPUS;
    for (unsigned int i = 0; i < n; i++) {
        void *dev = NULL;
        rv_meta_gpu *g = &m->gpus[i];
        memset(g, 0, sizeof(*g));
        g->index = (int)i;
        if (handle(i, &dev) != 0)
            continue;
        char nm[96];
        if (name && name(dev, nm, sizeof(nm)) == 0)
            snprintf(g->name, sizeof(g->name), "%s", nm);
        unsigned int mw = 0, lo = 0, hi = 0, c = 0;
        if (plimit && plimit(dev, &mw) == 0)
            g->power_limit_w = mw / 1000.0;
        if (pdefault && pdefault(dev, &mw) == 0)
            g->power_default_w = mw / 1000.0;
        if (prange && prange(dev, &lo, &hi) == 0) {
            g->power_min_w = lo / 1000.0;
            g->power_max_w = hi / 1000.0;
        }
        if (maxclk && maxclk(dev, NVML_CLOCK_SM, &c) == 0)
            g->sm_clock_max_mhz = (int)c;
        if (maxclk && maxclk(dev, NVML_CLOCK_MEM, &c) == 0)
            g->mem_clock_max_mhz = (int)c;
        nvml_memory mi;
        if (mem && mem(dev, &mi) == 0)
            g->total_mem = mi.total;
    }
    m->ngpus = (int)n;
    if (n > 0 && !m->gpu[0])
        snprintf(m->gpu, sizeof(m->gpu), "%s", m->gpus[0].name);
    if (shutdown)
        shutdown();
    dlclose(h);
    return 1;
}
