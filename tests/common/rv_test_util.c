#include "rv_test_util.h"

#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

void *rv_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!buf) {
        fclose(f);
        return NULL;
    }
    *len = fread(buf, 1, (size_t)n, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

void *rv_test_read_gz(const char *path, size_t *len)
{
    gzFile g = gzopen(path, "rb");
    if (!g)
        return NULL;
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    int got;
    /* One byte always spare for the NUL. */
    while (buf && (got = gzread(g, buf + n, (unsigned)(cap - n - 1))) > 0) {
        n += (size_t)got;
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    gzclose(g);
    if (!buf)
        return NULL;
    buf[n] = '\0';
    *len = n;
    return buf;
}

const char *rv_test_shared_traces(const char *probe)
{
    const char *dir = getenv("RV_SHARED_TRACES");
    char path[4096];

    if (!dir)
        return NULL;
    snprintf(path, sizeof(path), "%s/%s", dir, probe);
    return access(path, R_OK) == 0 ? dir : NULL;
}

const char *rv_test_require_shared_traces(const char *probe)
{
    const char *dir = rv_test_shared_traces(probe);
    const char *env = getenv("RV_SHARED_TRACES");

    if (dir)
        return dir;
    printf("skip: the public traces are not there: RV_SHARED_TRACES=%s, %s/%s cannot be read\n",
           env ? env : "(unset)", env ? env : "$RV_SHARED_TRACES", probe);
    fflush(stdout);
    exit(RV_TEST_SKIP);
}

int rv_test_have_trace(const char *dir, const char *rel)
{
    char path[4096];

    if (dir) {
        snprintf(path, sizeof(path), "%s/%s", dir, rel);
        if (access(path, R_OK) == 0)
            return 1;
    }
    printf("\n  not checked: %s (a large trace the repository does not ship; it is read "
           "from RV_SHARED_TRACES, see tests/data/public/README.md)\n",
           rel);
    fflush(stdout);
    return 0;
}

unsigned rv_test_run(void)
{
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failures = CU_get_number_of_failures();
    CU_cleanup_registry();
    return failures;
}
