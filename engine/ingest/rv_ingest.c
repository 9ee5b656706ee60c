/* Ingest: bytes to a trace, and a trace to what the store keeps beside it
 * (rv_ingest.h). */
#include "ingest/rv_ingest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/rv_flops.h"
#include "graph/rv_graph.h"
#include "hw/rv_hw.h"
#include "reader/rv_et.h"
#include "reader/rv_kineto.h"
#include "reader/rv_snapshot.h"
#include "simulate/rv_report.h"

/* zlib level of the stored snapshot: fast, the snapshot is rebuilt rarely. */
#define SNAPSHOT_LEVEL 1

/* An ET: read, then laid out on the GPU (docs/models/et.md). */
static int read_et(const void *data, size_t len, const rv_ingest_opts *o, rv_trace **out,
                   rv_error *err)
{
    rv_et_opts eo = {.max_input_bytes = o->max_input_bytes};
    rv_et *et = NULL;
    rv_error e;
    int named = o->gpu && *o->gpu;
    rv_error_clear(&e);
    int rc = rv_et_read_buffer(data, len, &eo, &et, &e);
    if (rc) {
        /* The reader's message says what and where; the field says it is
         * about the execution trace. */
        rv_error_field(err, rc, "et", "execution trace: %s", e.message);
        goto out;
    }
    rc = rv_et_to_trace(et, named ? o->gpu : RV_INGEST_STANDIN_GPU, out, NULL, &e);
    if (rc) {
        rv_error_field(err, rc, named ? "gpu" : "et", "%s", e.message);
        if (err)
            err->reason = RV_REASON_ET_LAYOUT;
        goto out;
    }
    if (!named) {
        /* No GPU named: the trace says none, and its what-ifs must. */
        (*out)->platform_gpu = 0;
        for (size_t i = 0; i < (*out)->ndevices; i++)
            (*out)->devices[i].name = 0;
    }
out:
    rv_et_free(et);
    return rc;
}

int rv_ingest_read(const void *data, size_t len, const rv_ingest_opts *o, rv_trace **out,
                   rv_error *err)
{
    static const rv_ingest_opts none = {.format = RV_INGEST_KINETO};
    *out = NULL;
    if (!o)
        o = &none;
    if (o->format == RV_INGEST_ET)
        return read_et(data, len, o, out, err);
    rv_kineto_opts ko = {.max_input_bytes = o->max_input_bytes, .max_events = o->max_events};
    return rv_kineto_read_buffer(data, len, &ko, out, err);
}

/* GPU tasks (kernel, memcpy, memset) with a timestamp: what a simulation
 * needs; none means nothing to simulate (rv_graph's own check). */
static size_t count_gpu_tasks(const rv_trace *t)
{
    size_t n = 0;
    for (size_t i = 0; i < t->nevents; i++)
        if (rv_cat_is_gpu_task(t->events[i].cat) && t->events[i].ts_ns > 0)
            n++;
    return n;
}

static int by_start(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Time at least one GPU stream is busy: the union of every GPU task's
 * interval (concurrent streams count once, as the trace page's GPU
 * utilization does), in ns; -1 when out of memory. */
static int64_t gpu_busy_union(const rv_trace *t)
{
    size_t n = 0;
    for (size_t i = 0; i < t->nevents; i++)
        n += rv_cat_is_gpu_task(t->events[i].cat) != 0;
    if (n == 0)
        return 0;
    int64_t *iv = malloc(n * 2 * sizeof(*iv)), busy = 0;
    if (!iv)
        return -1;
    n = 0;
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        if (!rv_cat_is_gpu_task(e->cat))
            continue;
        iv[2 * n] = e->ts_ns;
        iv[2 * n + 1] = e->ts_ns + (e->dur_ns > 0 ? e->dur_ns : 0);
        n++;
    }
    qsort(iv, n, 2 * sizeof(*iv), by_start);
    int64_t a = iv[0], b = iv[1];
    for (size_t i = 1; i < n; i++) {
        if (iv[2 * i] > b) {
            busy += b - a;
            a = iv[2 * i];
            b = iv[2 * i + 1];
        } else if (iv[2 * i + 1] > b) {
            b = iv[2 * i + 1];
        }
    }
    busy += b - a;
    free(iv);
    return busy;
}

/* New summary object; NULL when out of memory. */
static json_t *build_summary(const rv_trace *t, double measured_us, int iterations, size_t nsamples)
{
    size_t by_cat[RV_CAT_COUNT] = {0};
    int64_t lo = INT64_MAX, hi = INT64_MIN, gpu_busy = gpu_busy_union(t);
    if (gpu_busy < 0)
        return NULL;
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        by_cat[e->cat < RV_CAT_COUNT ? e->cat : 0]++;
        if (e->ts_ns < lo)
            lo = e->ts_ns;
        if (e->ts_ns + e->dur_ns > hi)
            hi = e->ts_ns + e->dur_ns;
    }
    json_t *cats = json_object();
    for (int c = 0; c < RV_CAT_COUNT; c++)
        if (by_cat[c])
            json_object_set_new(cats, rv_cat_name(c), json_integer((json_int_t)by_cat[c]));
    json_t *devs = json_array();
    for (size_t i = 0; i < t->ndevices; i++) {
        const rv_device *d = &t->devices[i];
        char cc[32];
        snprintf(cc, sizeof(cc), "%d.%d", d->compute_major, d->compute_minor);
        json_array_append_new(devs, json_pack("{s:i,s:s,s:i,s:s,s:I}", "id", d->id, "name",
                                              rv_trace_str(t, d->name), "num_sms", d->num_sms,
                                              "compute_capability", cc, "total_mem",
                                              (json_int_t)d->total_mem));
    }
    return json_pack("{s:I,s:o,s:o,s:f,s:f,s:i,s:o,s:I,s:I,s:I,s:s}", "events",
                     (json_int_t)t->nevents, "by_category", cats, "devices", devs, "span_us",
                     t->nevents ? (double)(hi - lo) / 1000.0 : 0.0, "gpu_busy_us",
                     (double)gpu_busy / 1000.0, "iterations", iterations, "measured_us",
                     measured_us > 0 ? json_real(measured_us) : json_null(), "overhead_samples",
                     (json_int_t)nsamples, "skipped_events", (json_int_t)t->skipped_events,
                     "input_bytes", (json_int_t)t->input_bytes, "backend",
                     rv_trace_str(t, t->backend));
}

/* The trace's kernel-model sums measured on gpu into *out (new; NULL when
 * the GPU is not in the hardware table or no kernel has a cost). */
static int kernel_models(const rv_trace *t, const char *gpu, rv_kmodel_acc **out, rv_error *err)
{
    const rv_hw *hw = gpu && *gpu ? rv_hw_lookup(gpu) : NULL;
    rv_flops_trace f;
    memset(&f, 0, sizeof(f));
    *out = NULL;
    if (!hw || t->nop_shapes == 0)
        return 0;
    if (rv_flops_of_trace(t, &f) != 0)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "ingest: out of memory costing the ops");
    rv_kmodel_acc *a = calloc(1, sizeof(*a));
    if (a && rv_kmodel_acc_add_trace(a, t, &f, hw) > 0) {
        *out = a;
        a = NULL;
    }
    int oom = !a && !*out;
    free(a);
    rv_flops_trace_free(&f);
    return oom ? rv_error_set(err, RV_ERR_NOMEM, -1, -1, "ingest: out of memory") : 0;
}

void rv_ingest_facts_free(rv_ingest_facts *f)
{
    if (!f)
        return;
    json_decref(f->summary);
    free(f->snap);
    rv_overhead_samples_free(&f->samples);
    rv_overhead_sketch_groups_free(f->sketches, f->nsketches);
    free(f->kmodels);
    memset(f, 0, sizeof(*f));
}

int rv_ingest_facts_of(const rv_trace *t, const char *gpu, int modelled, rv_ingest_facts *f,
                       rv_error *err)
{
    int rc = 0;
    memset(f, 0, sizeof(*f));
    f->modelled = modelled;
    /* Refused before anything is stored: a trace the engine cannot
     * simulate would only fail every later what-if. */
    if (count_gpu_tasks(t) == 0)
        return rv_error_set(err, RV_ERR_UNSUPPORTED, -1, -1,
                            "nothing to simulate: the trace has no GPU kernels, memcpy or "
                            "memset events (a CPU-only trace, a counters-only capture or a "
                            "non-GPU accelerator)");
    /* The same for what the graph builder or the simulator would refuse
     * (a million streams, times past what the simulator holds). */
    if ((rc = rv_graph_check_trace(t, err)) != 0)
        return rc;
    if ((rc = rv_snapshot_encode(t, SNAPSHOT_LEVEL, &f->snap, &f->snap_len, err)) != 0)
        goto out;
    /* An execution trace alone was modelled, not measured (docs/models/et.md):
     * its host overheads and kernel efficiencies are no platform's. */
    if (!modelled &&
        ((rc = rv_overhead_extract(t, &f->samples, err)) != 0 ||
         (rc = rv_overhead_sketch(&f->samples, &f->sketches, &f->nsketches, err)) != 0))
        goto out;
    rv_trace_figures fig;
    rv_report_trace_figures(t, &fig);
    f->measured_us = modelled ? 0 : fig.measured_us; /* modelled: stored null */
    f->iterations = fig.iterations;
    if (!(f->summary = build_summary(t, f->measured_us, f->iterations, f->samples.n))) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "ingest: out of memory");
        goto out;
    }
    if (!modelled)
        rc = kernel_models(t, gpu, &f->kmodels, err);
out:
    if (rc)
        rv_ingest_facts_free(f);
    return rc;
}
