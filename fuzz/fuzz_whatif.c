/* libFuzzer target for the what-if request document (the JSON an API client
 * sends): any bytes must parse into a document or fail with an error that
 * names a field, never crash, leak or hit undefined behaviour. A document
 * that parses also runs through the whole pipeline on a small graph
 * (rv_run: apply, simulate, report, render), so the models see hostile
 * values that passed validation and the renderer must write valid JSON. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/rv_graph.h"
#include "simulate/rv_sim.h"
#include "run/rv_run.h"
#include "whatif/rv_whatif.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One CPU thread launching three kernels on one stream, then a sync. */
static rv_trace *small_trace(void)
{
    static const struct {
        int cat;
        const char *name;
        int64_t ts, dur, corr;
    } evs[] = {
        {RV_CAT_USER_ANNOTATION, "ProfilerStep#1", 0, 400, -1},
        {RV_CAT_CPU_OP, "aten::mm", 0, 30, -1},
        {RV_CAT_RUNTIME, "cudaLaunchKernel", 5, 5, 1},
        {RV_CAT_RUNTIME, "cudaLaunchKernel", 15, 5, 2},
        {RV_CAT_RUNTIME, "cudaLaunchKernel", 25, 5, 3},
        {RV_CAT_RUNTIME, "cudaDeviceSynchronize", 40, 300, 4},
        {RV_CAT_KERNEL, "volta_sgemm_128x64_nn", 12, 100, 1},
        {RV_CAT_KERNEL, "vectorized_elementwise_kernel", 112, 50, 2},
        {RV_CAT_KERNEL, "ncclKernel_AllReduce_RING_LL_Sum_float", 162, 80, 3},
    };
    rv_trace *t = rv_trace_new();
    if (!t)
        return NULL;
    for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++) {
        rv_event e;
        rv_event_init(&e);
        int gpu = rv_cat_is_gpu_task(evs[i].cat);
        e.cat = (uint8_t)evs[i].cat;
        e.name = rv_strtab_intern(&t->strings, evs[i].name, strlen(evs[i].name));
        e.pid = rv_strtab_intern(&t->strings, gpu ? "0" : "1", 1);
        e.tid = rv_strtab_intern(&t->strings, gpu ? "7" : "1", 1);
        e.ts_ns = 1000000 + evs[i].ts * 1000;
        e.dur_ns = evs[i].dur * 1000;
        e.correlation = evs[i].corr;
        if (gpu) {
            e.device = 0;
            e.stream = 7;
        }
        if (rv_trace_push(t, &e) < 0) {
            rv_trace_free(t);
            return NULL;
        }
    }
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static rv_trace *trace;
    static rv_graph *graph;
    static rv_sim *base;
    rv_error err;
    if (!trace) {
        trace = small_trace();
        if (!trace || rv_graph_build(trace, NULL, &graph, &err) != 0 ||
            rv_sim_run(graph, RV_SCHED_EARLIEST_START, &base, &err) != 0)
            abort();
    }
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    rv_whatif *w = NULL;
    rv_error_clear(&err);
    int rc = rv_whatif_parse_text(text, &w, &err);
    free(text);
    if (rc != 0) {
        if (w || err.message[0] == '\0')
            abort(); /* a failure always says why, and returns nothing */
        return 0;
    }
    /* The whole pipeline a request takes: apply, simulate, report, render. */
    rv_run_result *res = NULL;
    rv_run_opts opts = {.iteration = RV_ITER_MEDIAN};
    rv_error_clear(&err);
    rc = rv_run(graph, base, w, &opts, &res, &err);
    if (rc != 0 && err.message[0] == '\0')
        abort();
    if (rc == 0) {
        size_t len = 0;
        char *bytes = rv_run_render_bytes(res, 1, &len);
        json_t *back = bytes ? json_loadb(bytes, len, 0, NULL) : NULL;
        if (bytes && !back)
            abort(); /* the renderer always writes valid JSON */
        json_decref(back);
        free(bytes);
    }
    rv_run_result_free(res);
    rv_whatif_free(w);
    return 0;
}
