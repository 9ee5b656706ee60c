/* libFuzzer target for the Kineto exporter (engine/rv_kexport.c), which
 * walks a stored original again: any input the reader takes and the graph
 * can simulate must export, and the export must read back with every event
 * the input had kept, no negative time and, for steps on one thread, the
 * same steps; anything else is ignored. The
 * replay driver runs the seed corpus and tests/data/kineto through it. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "graph/rv_graph.h"
#include "export/rv_kexport.h"
#include "reader/rv_kineto.h"
#include "simulate/rv_sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rv_trace *t = NULL, *back = NULL;
    rv_graph *g = NULL, *bg = NULL;
    rv_sim *s = NULL;
    rv_error e;
    rv_buf out = RV_BUF_INIT((size_t)256 << 20);
    rv_kineto_opts o = {.max_input_bytes = 16u << 20, .max_events = 1u << 18};
    if (rv_kineto_read_buffer(data, size, &o, &t, &e) != 0 ||
        rv_graph_build(t, NULL, &g, &e) != 0 || rv_sim_run(g, RV_SCHED_EARLIEST_START, &s, &e) != 0)
        goto out;
    if (rv_kexport_write(data, size, g, g, s, NULL, NULL, &out, NULL, &e) != 0)
        abort(); /* what the reader took, the exporter writes */
    if (rv_kineto_read_buffer(out.p, out.len, NULL, &back, &e) != 0)
        abort(); /* and the export reads back */
    if (back->nevents < t->nevents)
        abort();
    for (size_t i = 0; i < t->nevents; i++)
        if (back->events[i].cat != t->events[i].cat || back->events[i].ts_ns < 0)
            abort();
    /* Steps on one thread keep their count; steps spread over threads
     * (never seen in a real trace) may overlap once each thread is moved
     * by its own simulation. */
    int one_thread = 1;
    uint32_t pid = UINT32_MAX, tid = UINT32_MAX;
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *ev = &t->events[i];
        if (strncmp(rv_trace_str(t, ev->name), "ProfilerStep#", 13) != 0)
            continue;
        if (pid == UINT32_MAX) {
            pid = ev->pid;
            tid = ev->tid;
        }
        one_thread &= ev->pid == pid && ev->tid == tid;
    }
    if (rv_graph_build(back, NULL, &bg, &e) != 0 || (one_thread && bg->niters != g->niters))
        abort();
out:
    rv_graph_free(bg);
    rv_trace_free(back);
    rv_buf_free(&out);
    rv_sim_free(s);
    rv_graph_free(g);
    rv_trace_free(t);
    return 0;
}
