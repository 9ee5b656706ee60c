#include "cupti_buf.h"

#include <CUnit/Basic.h>
#include <stdlib.h>
#include <string.h>

/* aligned_alloc wants a multiple of the alignment. */
static size_t round8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

rv_cbuf rv_cbuf_new(size_t cap, uint32_t pid, uint32_t tid)
{
    rv_cbuf b = {aligned_alloc(8, round8(cap)), 0, round8(cap), pid, tid};
    CU_ASSERT_FATAL(b.p != NULL);
    memset(b.p, 0, b.cap);
    return b;
}

void rv_cbuf_put(rv_cbuf *b, const void *rec, size_t size)
{
    if (b->len + size > b->cap) {
        size_t cap = round8((b->len + size) * 2 + 4096);
        uint8_t *p = aligned_alloc(8, cap);
        CU_ASSERT_FATAL(p != NULL);
        memcpy(p, b->p, b->len);
        free(b->p);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, rec, size);
    b->len += size;
}

void rv_cbuf_api(rv_cbuf *b, uint32_t cbid, uint64_t start, uint64_t end, uint32_t corr)
{
    CUpti_ActivityAPI a;
    memset(&a, 0, sizeof(a));
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.cbid = cbid;
    a.start = start;
    a.end = end;
    a.processId = b->pid;
    a.threadId = b->tid;
    a.correlationId = corr;
    rv_cbuf_put(b, &a, sizeof(a));
}

void rv_cbuf_marker(rv_cbuf *b, int start, uint32_t id, uint64_t ts, const char *name)
{
    CUpti_ActivityMarker2 m;
    memset(&m, 0, sizeof(m));
    m.kind = CUPTI_ACTIVITY_KIND_MARKER;
    m.flags = start ? CUPTI_ACTIVITY_FLAG_MARKER_START : CUPTI_ACTIVITY_FLAG_MARKER_END;
    m.timestamp = ts;
    m.id = id;
    m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    m.objectId.pt.processId = b->pid;
    m.objectId.pt.threadId = b->tid;
    m.name = start ? name : NULL;
    m.domain = NULL;
    rv_cbuf_put(b, &m, sizeof(m));
}

void rv_cbuf_kernel(rv_cbuf *b, const CUpti_ActivityKernel10 *shape, const char *name,
                    uint64_t start, uint64_t end, uint32_t corr)
{
    CUpti_ActivityKernel10 k = *shape;
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = start;
    k.end = end;
    k.correlationId = corr;
    k.name = name;
    rv_cbuf_put(b, &k, sizeof(k));
}

void rv_cbuf_device(rv_cbuf *b, const char *name, uint64_t mem)
{
    CUpti_ActivityDevice5 d;
    memset(&d, 0, sizeof(d));
    d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
    d.id = 0;
    d.name = name;
    d.numMultiprocessors = 132;
    d.globalMemorySize = mem;
    d.computeCapabilityMajor = 9;
    d.computeCapabilityMinor = 0;
    d.numThreadsPerWarp = 32;
    d.maxWarpsPerMultiprocessor = 64;
    d.maxThreadsPerBlock = 1024;
    rv_cbuf_put(b, &d, sizeof(d));
}

void rv_cbuf_memcpy_htod(rv_cbuf *b, uint64_t bytes, uint64_t start, uint64_t end, uint32_t stream,
                         uint32_t corr)
{
    CUpti_ActivityMemcpy6 m;
    memset(&m, 0, sizeof(m));
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.bytes = bytes;
    m.start = start;
    m.end = end;
    m.deviceId = 0;
    m.contextId = 1;
    m.streamId = stream;
    m.correlationId = corr;
    rv_cbuf_put(b, &m, sizeof(m));
}
