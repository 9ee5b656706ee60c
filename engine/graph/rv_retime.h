/* Re-timing a graph's host work from overhead statistics (the DLRM
 * performance-model paper, section III-C): predict a trace's iteration from
 * its platform's shared overheads instead of its own, and measure the error.
 *
 * The overhead types are those of rv_overhead.h. On a graph:
 *   T4  the duration of every launch call (sync and blocked calls keep
 *       theirs: their time is the GPU's);
 *   T5  the host time between two launches of one top-level op;
 *   T3 + T1 + T2  the host time from the last launch of one top-level op to
 *       the first launch of the next op with launches; top-level ops without
 *       launches in between keep their measured duration (framework and data
 *       loading work, not overhead) and each T1 before them is re-timed.
 * Within a re-timed stretch, the calls and gaps that are not launches scale
 * together; data-loading time (task.gap_dl_ns) is kept as measured. */
#ifndef RV_RETIME_H
#define RV_RETIME_H

#include <jansson.h>

#include "util/rv_error.h"
#include "graph/rv_graph.h"
#include "graph/rv_overhead.h"

/* One statistic: the mean of a (type, name) group; name NULL for the
 * type's overall group, which is the fallback for names not in the table. */
typedef struct rv_oh_entry {
    uint8_t type;     /* rv_overhead_type */
    const char *name; /* borrowed; NULL = overall */
    double mean_us;
} rv_oh_entry;

/* A pooled table built from several traces (shared statistics). */
typedef struct rv_oh_table {
    rv_oh_entry *entries;
    size_t n;
    rv_strtab names; /* owns the name strings */
    /* The GPU of the machines measured, as their traces name it; "" when
     * unknown or mixed. It says whose host the statistics describe, so a
     * move to another GPU can tell the target machine's from its own. */
    char gpu[128];
} rv_oh_table;

/* Builds the statistics of traces[0..n) pooled together (outliers removed
 * per group as in rv_overhead_stats); the table's gpu is the traces' when
 * they all name the same. *out is new; free with rv_oh_table_free. */
int rv_oh_table_from_traces(const rv_trace *const *traces, size_t n, rv_oh_table **out,
                            rv_error *err);
void rv_oh_table_free(rv_oh_table *t);

/* Rewrites g's host work from the table. *applied (new, may be NULL on
 * error) counts what changed. */
int rv_retime_overheads(rv_graph *g, const rv_oh_table *tab, json_t **applied, rv_error *err);

#endif
