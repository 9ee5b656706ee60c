/* Synthetic CUPTI activity buffers for the collector tests: records built
 * with the real CUDA 13 structs, laid out the way CUPTI hands them to the
 * collector, so its parser walks them with cuptiActivityGetNextRecord. No
 * GPU needed. Names passed in must outlive the buffer (CUPTI records point
 * at them). */
#ifndef RV_TEST_CUPTI_BUF_H
#define RV_TEST_CUPTI_BUF_H

#include <cupti.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rv_cbuf {
    uint8_t *p; /* 8-byte aligned records */
    size_t len, cap;
    uint32_t pid, tid; /* the process and thread of API and marker records */
} rv_cbuf;

/* A zeroed buffer of cap bytes for records of process pid, thread tid.
 * Fails the test (fatally) when memory is short. Free b.p with free(). */
rv_cbuf rv_cbuf_new(size_t cap, uint32_t pid, uint32_t tid);

/* Appends one record of `size` bytes (copied), growing the buffer. */
void rv_cbuf_put(rv_cbuf *b, const void *rec, size_t size);

/* A runtime API call (cbid, e.g. CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000). */
void rv_cbuf_api(rv_cbuf *b, uint32_t cbid, uint64_t start, uint64_t end, uint32_t corr);

/* The start (with its name) or the end of NVTX-like marker range `id`. */
void rv_cbuf_marker(rv_cbuf *b, int start, uint32_t id, uint64_t ts, const char *name);

/* A kernel: the launch configuration (grid, block, registers, shared
 * memory, device, context, stream) comes from `shape` (borrowed); kind,
 * name, times and correlation are set here. */
void rv_cbuf_kernel(rv_cbuf *b, const CUpti_ActivityKernel10 *shape, const char *name,
                    uint64_t start, uint64_t end, uint32_t corr);

/* Device 0: an SM 9.0 part with 132 SMs and `mem` bytes of memory. */
void rv_cbuf_device(rv_cbuf *b, const char *name, uint64_t mem);

/* A host-to-device copy from pinned memory on device 0, context 1. */
void rv_cbuf_memcpy_htod(rv_cbuf *b, uint64_t bytes, uint64_t start, uint64_t end, uint32_t stream,
                         uint32_t corr);

#endif
