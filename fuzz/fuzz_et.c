/* libFuzzer target for the execution-trace reader and its join: any bytes
 * (plain, gzip or a tar archive) must give either an ET or an error with a
 * message, never a crash, a leak or undefined behaviour; an ET that reads
 * must join a small Kineto trace (or be refused) cleanly, and build the
 * ET-alone trace and its graph (or be refused with a reason). The replay driver
 * (replay_main.c) runs the corpus through it in `make test`. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reader/rv_et.h"
#include "graph/rv_graph.h"
#include "reader/rv_kineto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Ops on two threads with a launch and its kernel, named like ET nodes. */
static const char k_trace[] =
    "{\"traceEvents\":["
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,\"tid\":1,\"ts\":0,"
    "\"dur\":10,\"args\":{\"External id\":2}},"
    "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,"
    "\"ts\":1,\"dur\":2,\"args\":{\"correlation\":5}},"
    "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::add\",\"pid\":1,\"tid\":2,\"ts\":3,"
    "\"dur\":4,\"args\":{\"External id\":3}},"
    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"pid\":0,\"tid\":7,\"ts\":4,\"dur\":5,"
    "\"args\":{\"correlation\":5,\"device\":0,\"stream\":7}}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static rv_trace *t;
    rv_et *et = NULL;
    rv_error e;
    rv_et_opts o = {.max_input_bytes = 64u << 20, .max_nodes = 1u << 16};
    if (!t && rv_kineto_read_buffer(k_trace, sizeof(k_trace) - 1, NULL, &t, &e) != 0)
        abort();
    int rc = rv_et_read_buffer(data, size, &o, &et, &e);
    if (rc != 0) {
        if (et != NULL || e.message[0] == '\0' || e.code != rc)
            abort(); /* a failure always says why and returns nothing */
        return 0;
    }
    if (!et || et->nnodes == 0)
        abort();
    for (size_t i = 0; i < et->nnodes; i++) {
        const rv_et_node *n = &et->nodes[i];
        if ((size_t)n->args_off + n->n_in + n->n_out > et->nargs)
            abort();
        for (uint32_t a = 0; a < n->n_in + n->n_out; a++) {
            const rv_et_arg *g = &et->args[n->args_off + a];
            if (g->ndims > RV_ET_MAX_DIMS ||
                (g->ndims > 0 && g->dims_off + (size_t)g->ndims > et->ndims))
                abort();
            (void)strlen(rv_et_str(et, g->type));
        }
        (void)strlen(rv_et_str(et, n->name));
    }
    rv_et_join j;
    if (rv_et_join_trace(et, t, &j, &e) == 0) {
        if (j.kernels_joined > j.kernels_launched || j.kernels_launched > j.kernels)
            abort();
        for (size_t i = 0; i < j.nevents; i++)
            if (j.node_of_event[i] >= (int32_t)et->nnodes)
                abort();
        rv_et_join_free(&j);
    }
    /* The ET alone as a trace: a graph, or a refusal that says why. */
    rv_trace *alone = NULL;
    rv_et_alone info;
    rc = rv_et_to_trace(et, "A100", &alone, &info, &e);
    if (rc != 0 && (alone || e.message[0] == '\0'))
        abort();
    if (rc == 0) {
        size_t gpu = 0;
        for (size_t i = 0; i < alone->nevents; i++) {
            const rv_event *ev = &alone->events[i];
            if (ev->dur_ns < 0 || ev->ts_ns < 0)
                abort();
            gpu += rv_cat_is_gpu_task(ev->cat);
        }
        if (gpu != info.kernels + info.collectives + info.copies || gpu == 0)
            abort();
        rv_graph *g = NULL;
        if (rv_graph_build(alone, NULL, &g, &e) == 0)
            rv_graph_free(g);
        rv_trace_free(alone);
    }
    rv_et_free(et);
    return 0;
}
