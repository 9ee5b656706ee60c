#include "common/rv_test_trace.h"

#include <stdio.h>
#include <string.h>

#include "reader/rv_kineto.h"

int rv_test_load(const char *dir, const char *rel, rv_test_loaded *l)
{
    char path[1024];
    rv_error err;

    memset(l, 0, sizeof(*l));
    rv_error_clear(&err);
    if (dir)
        snprintf(path, sizeof(path), "%s/%s", dir, rel);
    else
        snprintf(path, sizeof(path), "%s", rel);
    if (rv_kineto_read_file(path, NULL, &l->tr, &err) != 0 ||
        rv_graph_build(l->tr, NULL, &l->g, &err) != 0 ||
        rv_sim_run(l->g, RV_SCHED_EARLIEST_START, &l->s, &err) != 0) {
        fprintf(stderr, "%s: %s\n", path, err.message);
        return -1;
    }
    return 0;
}

void rv_test_unload(rv_test_loaded *l)
{
    rv_sim_free(l->s);
    rv_graph_free(l->g);
    rv_trace_free(l->tr);
    memset(l, 0, sizeof(*l));
}
