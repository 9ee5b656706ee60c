/* libFuzzer target for the binary trace snapshot (engine/rv_snapshot.c),
 * which the store reads back from the database: any bytes must decode into
 * a consistent trace or fail with a message, never crash or over-allocate.
 * A decoded trace is encoded again and must decode to the same events. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reader/rv_snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rv_trace *t = NULL;
    rv_error err;
    rv_error_clear(&err);
    if (rv_snapshot_decode(data, size, &t, &err) != 0) {
        if (t || err.message[0] == '\0')
            abort();
        return 0;
    }
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        if (e->cat >= RV_CAT_COUNT || e->dur_ns < 0 || e->name >= t->strings.count)
            abort();
    }
    uint8_t *again = NULL;
    size_t len = 0;
    rv_trace *u = NULL;
    if (rv_snapshot_encode(t, 1, &again, &len, &err) != 0 ||
        rv_snapshot_decode(again, len, &u, &err) != 0 || u->nevents != t->nevents ||
        (t->nevents && memcmp(u->events, t->events, t->nevents * sizeof(rv_event)) != 0))
        abort();
    free(again);
    rv_trace_free(u);
    rv_trace_free(t);
    return 0;
}
