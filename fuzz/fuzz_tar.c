/* libFuzzer target for the tar reader (engine/rv_tar.c), which reads the
 * archive a client uploads to POST /v1/training-jobs: any bytes must yield
 * members within the cap or fail with a message, never crash, loop or
 * over-allocate. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/rv_tar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct mem {
    const uint8_t *p;
    size_t n, at;
} mem;

/* Short reads on purpose: the reader must not depend on full blocks. */
static long mem_read(void *ctx, void *buf, size_t n)
{
    mem *m = ctx;
    size_t k = m->n - m->at;
    if (k > n)
        k = n;
    if (k > 777)
        k = 777;
    memcpy(buf, m->p + m->at, k);
    m->at += k;
    return (long)k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mem m = {data, size, 0};
    rv_tar *t = NULL;
    rv_error err;
    char name[RV_TAR_NAME_MAX];

    rv_error_clear(&err);
    if (rv_tar_open_fn(mem_read, &m, &t, &err) != 0)
        abort();
    for (int i = 0; i < 100000; i++) {
        uint8_t *bytes = NULL;
        size_t len = 0;
        int rc = rv_tar_next(t, 1 << 20, name, &bytes, &len, &err);
        if (rc < 0 && (bytes || err.message[0] == '\0'))
            abort();
        if (rc <= 0)
            break;
        /* A member is no larger than the cap or the input, and named. */
        if (len > (1u << 20) || len > size || memchr(name, '\0', RV_TAR_NAME_MAX) == NULL)
            abort();
        free(bytes);
    }
    rv_tar_close(t);
    return 0;
}
