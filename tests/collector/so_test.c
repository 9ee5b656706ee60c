/* The built libreverie-collector.so: loads with dlopen, exports
 * InitializeInjection (and nothing else of ours), and on a machine without a
 * GPU or driver returns 1, logs, and lets the process exit cleanly. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include "common/rv_test_util.h"

#ifndef RV_COLLECTOR_SO
#error "RV_COLLECTOR_SO must name the built library"
#endif

static void test_exports(void)
{
    void *h = dlopen(RV_COLLECTOR_SO, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        fprintf(stderr, "dlopen: %s\n", dlerror());
    CU_ASSERT_FATAL(h != NULL);
    CU_ASSERT(dlsym(h, "InitializeInjection") != NULL);
    /* Internals stay hidden, so they cannot clash with the job's symbols. */
    CU_ASSERT(dlsym(h, "rv_records_add") == NULL);
    CU_ASSERT(dlsym(h, "rv_upload_post") == NULL);
    /* No dlclose: libcupti's allocations hang off its globals, and unloading
     * it would show them to LeakSanitizer as leaks (the CUDA driver never
     * unloads an injection library either). */
}

/* Runs InitializeInjection in a child; returns its exit status and leaves
 * its stderr in errfile. */
static int run_child(const char *errfile, const char *dir)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(errfile, "w", stderr))
            _exit(3);
        setenv("REVERIE_SPOOL_DIR", dir, 1);
        setenv("REVERIE_SERVER", "http://127.0.0.1:9", 1); /* discard port: refused */
        setenv("REVERIE_EXIT_WAIT_S", "5", 1);
        void *h = dlopen(RV_COLLECTOR_SO, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            _exit(4);
        int (*init)(void) = (int (*)(void))dlsym(h, "InitializeInjection");
        if (!init || init() != 1)
            _exit(5);
        if (init() != 1) /* a second call is harmless */
            _exit(6);
        exit(0); /* runs the collector's atexit handler */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void test_no_gpu_carries_on(void)
{
    char errfile[300], dir[256], line[512];
    snprintf(dir, sizeof(dir), "%s/rv_so_test_XXXXXX", P_tmpdir);
    CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
    snprintf(errfile, sizeof(errfile), "%s/stderr.txt", dir);
    CU_ASSERT_EQUAL(run_child(errfile, dir), 0);
    FILE *f = fopen(errfile, "r");
    CU_ASSERT_FATAL(f != NULL);
    int ours = 0, other = 0;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "reverie-collector: ", 19) == 0)
            ours++;
        else
            other++;
        fputs(line, stdout);
    }
    fclose(f);
    CU_ASSERT(ours >= 1); /* says what happened, in its own voice */
    CU_ASSERT_EQUAL(other, 0);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("collector_so", NULL, NULL);
    CU_add_test(s, "dlopen and exports", test_exports);
    CU_add_test(s, "no GPU: returns 1, logs, exits cleanly", test_no_gpu_carries_on);
    return rv_test_run() ? 1 : 0;
}
