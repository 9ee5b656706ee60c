/* Writes collected records as Chrome-trace JSON in the Kineto dialect (the
 * format torch.profiler writes), plus a "reverie" metadata object, so the
 * file loads in Reverie's reader, Perfetto, TensorBoard and HTA.
 *
 * Categories: cuda_runtime, cuda_driver, kernel, gpu_memcpy, gpu_memset,
 * cuda_sync, user_annotation (NVTX ranges on the CPU thread),
 * gpu_user_annotation (the GPU span of the work launched inside a range),
 * overhead, and ac2g flows (ph s/f) from each launch to its GPU task. */
#ifndef RV_KTRACE_H
#define RV_KTRACE_H

#include <stddef.h>
#include <stdint.h>

#include "util/rv_error.h"
#include "rv_meta.h"
#include "rv_records.h"

typedef struct rv_ktrace_opts {
    uint64_t t0, t1;         /* keep CPU-side records starting in [t0, t1] and the GPU
                              * work they launched; t1 == 0 keeps everything */
    int plain;               /* 1: plain JSON instead of gzip */
    size_t max_bytes;        /* cap on the output; 0 = 2 GiB */
    const char *window_desc; /* free text stored in reverie.window, may be NULL */
} rv_ktrace_opts;

typedef struct rv_ktrace_stats {
    size_t kernels, memcpys, memsets, runtime, driver, syncs, ranges, gpu_ranges, flows, overheads,
        events; /* events = all traceEvents written */
} rv_ktrace_stats;

/* Writes the records of the list `sets` (borrowed, linked by next) and the
 * metadata m (borrowed). On success returns 0 and *out (new, caller frees
 * with free) of *out_len bytes; stats may be NULL. On failure returns a
 * negative rv_err, fills err, and *out is NULL. */
int rv_ktrace_write(const rv_recset *sets, const rv_meta *m, const rv_ktrace_opts *opts,
                    uint8_t **out, size_t *out_len, rv_ktrace_stats *stats, rv_error *err);

#endif
