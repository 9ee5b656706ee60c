/* Internal to the graph builder: the state its passes share and the
 * passes that live outside rv_graph.c (rv_graph_sync.c). Not a public API;
 * rv_graph.h is. */
#ifndef RV_GRAPH_BUILD_H
#define RV_GRAPH_BUILD_H

#include <stdint.h>

#include "graph/rv_graph.h"
#include "util/rv_map.h"

typedef struct rv_graph__builder {
    const rv_trace *tr;
    rv_graph *g;
    rv_error *err;
    rv_map thread_keys; /* packed key -> thread index */
    rv_map corr;        /* correlation -> CPU task */
    int64_t *launch_ts; /* per task: launch time (GPU: its launch's start, else own start) */
} rv_graph__builder;

/* Lookups through rv_map that read -1 for "absent", as the passes expect. */
static inline int32_t rv_graph__map_get(const rv_map *m, int64_t key)
{
    uint32_t v;
    return rv_map_get(m, (uint64_t)key, &v) ? (int32_t)v : -1;
}

/* The sync and wait passes (rv_graph_sync.c), in the order they run, after
 * the structural edges: 0 or a negative rv_err. */
int rv_graph__link_syncs(rv_graph__builder *b);
int rv_graph__infer_stream_waits(rv_graph__builder *b);
int rv_graph__link_blocking_copies(rv_graph__builder *b);
int rv_graph__link_blocking_calls(rv_graph__builder *b);

#endif
