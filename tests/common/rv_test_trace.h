/* A public trace loaded the way the product loads one: read, graph built,
 * baseline simulated. Shared by the engine suites on real traces. Test
 * support only. */
#ifndef RV_TEST_TRACE_H
#define RV_TEST_TRACE_H

#include "graph/rv_graph.h"
#include "simulate/rv_sim.h"
#include "trace/rv_trace.h"

typedef struct rv_test_loaded {
    rv_trace *tr;
    rv_graph *g;
    rv_sim *s; /* the baseline simulation */
} rv_test_loaded;

/* Loads dir/rel (dir NULL: rel is the path) into *l; 0, or -1 with the
 * reason printed. Free with rv_test_unload, also after a failure. */
int rv_test_load(const char *dir, const char *rel, rv_test_loaded *l);
void rv_test_unload(rv_test_loaded *l);

#endif
