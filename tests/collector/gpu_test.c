/* On a machine with an NVIDIA GPU: a child process runs memsets, copies and a
 * synchronize with the collector injected (CUDA_INJECTION64_PATH) and
 * REVERIE_OUTPUT set; the trace must load in the engine's reader with every
 * operation present and paired with its launch. Exits 77 without a GPU. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "reader/rv_kineto.h"
#include "common/rv_test_util.h"

#define N 5

static char out_path[256];

static int have_gpu(void)
{
    if (access("/dev/nvidia0", F_OK) != 0 && access("/dev/nvidiactl", F_OK) != 0)
        return 0;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return 0;
    int (*cu_init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
    int (*cu_count)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
    int n = 0;
    int ok = cu_init && cu_count && cu_init(0) == 0 && cu_count(&n) == 0 && n > 0;
    return ok;
}

typedef int (*malloc_fn)(void **, size_t);
typedef int (*memset_fn)(void *, int, size_t);
typedef int (*memcpy_fn)(void *, const void *, size_t, int);
typedef int (*sync_fn)(void);

static int child(void)
{
    setenv("CUDA_INJECTION64_PATH", RV_COLLECTOR_SO, 1);
    setenv("REVERIE_OUTPUT", out_path, 1);
    setenv("REVERIE_JOB", "gpu_test", 1);
    void *rt = dlopen("libcudart.so.13", RTLD_NOW | RTLD_GLOBAL);
    if (!rt)
        rt = dlopen(RV_CUDART_DIR "/libcudart.so.13", RTLD_NOW | RTLD_GLOBAL);
    if (!rt)
        return 10;
    malloc_fn cm = (malloc_fn)dlsym(rt, "cudaMalloc");
    memset_fn cs = (memset_fn)dlsym(rt, "cudaMemset");
    memcpy_fn cc = (memcpy_fn)dlsym(rt, "cudaMemcpy");
    sync_fn sy = (sync_fn)dlsym(rt, "cudaDeviceSynchronize");
    if (!cm || !cs || !cc || !sy)
        return 11;
    void *d = NULL;
    static char host[1 << 20];
    if (cm(&d, sizeof(host)) != 0)
        return 12;
    for (int i = 0; i < N; i++) {
        if (cs(d, i, sizeof(host)) != 0)
            return 13;
        if (cc(host, d, sizeof(host), 2 /* DtoH */) != 0)
            return 14;
    }
    if (sy() != 0 || host[0] != N - 1)
        return 15;
    return 0;
}

static void test_injected_run(void)
{
    pid_t pid = fork();
    if (pid == 0)
        exit(child());
    int st = 0;
    waitpid(pid, &st, 0);
    CU_ASSERT_FATAL(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    rv_trace *t = NULL;
    rv_error err;
    int rc = rv_kineto_read_file(out_path, NULL, &t, &err);
    if (rc)
        fprintf(stderr, "reader: %s\n", err.message);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    size_t memsets = 0, memcpys = 0, paired = 0;
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        if (e->cat != RV_CAT_MEMSET && e->cat != RV_CAT_MEMCPY)
            continue;
        memsets += e->cat == RV_CAT_MEMSET;
        memcpys += e->cat == RV_CAT_MEMCPY && e->bytes == (1 << 20);
        for (size_t j = 0; j < t->nevents; j++)
            if (t->events[j].cat == RV_CAT_RUNTIME && t->events[j].correlation == e->correlation) {
                paired++;
                break;
            }
        CU_ASSERT(e->ts_ns > 0 && e->dur_ns > 0);
    }
    printf("memsets %zu memcpys %zu paired %zu gpu '%s'\n", memsets, memcpys, paired,
           rv_trace_str(t, t->platform_gpu));
    CU_ASSERT_EQUAL(memsets, N);
    CU_ASSERT_EQUAL(memcpys, N);
    CU_ASSERT_EQUAL(paired, 2 * N);
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, t->job), "gpu_test");
    CU_ASSERT(t->ndevices >= 1);
    rv_trace_free(t);
    unlink(out_path);
}

int main(void)
{
    if (!have_gpu()) {
        printf("SKIP: no NVIDIA GPU or driver (no /dev/nvidia0 or cuInit failed)\n");
        return 77;
    }
    snprintf(out_path, sizeof(out_path), "%s/rv_gpu_test_%d.json.gz", P_tmpdir, (int)getpid());
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("collector_gpu", NULL, NULL);
    CU_add_test(s, "injected memset/memcpy run loads in the reader", test_injected_run);
    return rv_test_run() ? 1 : 0;
}
