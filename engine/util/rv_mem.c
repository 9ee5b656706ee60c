#include "util/rv_mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE ((uintptr_t)2 << 20)

void rv_mem_huge(void *p, size_t len)
{
#ifdef MADV_HUGEPAGE
    if (!p || len < 2 * HUGE_PAGE)
        return;
    uintptr_t a = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    uintptr_t b = ((uintptr_t)p + len) & ~(HUGE_PAGE - 1);
    if (b > a)
        (void)madvise((void *)a, b - a, MADV_HUGEPAGE);
#else
    (void)p;
    (void)len;
#endif
}

void rv_mem_heap_huge(size_t len)
{
    void *p = malloc(len);
    if (!p)
        return;
    rv_mem_huge(p, len);
    free(p); /* back to the heap's top, kept there: the hint stays */
}
