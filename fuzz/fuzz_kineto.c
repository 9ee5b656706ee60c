/* libFuzzer target for the Kineto reader: any bytes (plain or gzip) must
 * give either a trace or an error with a message, never a crash, a leak or
 * undefined behaviour, and the same trace or the same error when read on
 * two cores in small parts as on one. Built with -fsanitize=fuzzer when RV_FUZZ is ON; the
 * replay driver (replay_main.c) runs the corpus through it in `make test`. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reader/rv_kineto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The same input read on two cores, in parts of 16 to 271 bytes: it must
 * agree with the one-core read (rc, e, t) in every respect. */
static void check_two_cores(const uint8_t *data, size_t size, rv_kineto_opts o, int rc,
                            const rv_error *e, const rv_trace *t)
{
    rv_trace *t2 = NULL;
    rv_error e2;
    o.threads = 0;
    o.chunk_bytes = 16 + (size_t)(size ? data[size / 2] : 0);
    int rc2 = rv_kineto_read_buffer(data, size, &o, &t2, &e2);
    if (rc2 != rc)
        abort();
    if (rc == 0 && !rv_trace_same(t, t2, NULL))
        abort();
    if (rc != 0 &&
        (e2.code != e->code || e2.offset != e->offset || e2.event_index != e->event_index ||
         e2.reason != e->reason || strcmp(e2.message, e->message) != 0))
        abort();
    rv_trace_free(t2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rv_trace *t = NULL;
    rv_error e;
    /* Small caps keep each run fast and exercise the limit paths. */
    rv_kineto_opts o = {.keep_python = (int)(size & 1),
                        .max_input_bytes = 64u << 20,
                        .max_events = 1u << 20,
                        .threads = 1};
    int rc = rv_kineto_read_buffer(data, size, &o, &t, &e);
    check_two_cores(data, size, o, rc, &e, t);
    if (rc == 0) {
        if (!t || t->nevents == 0)
            abort(); /* success always means something the engine can use */
        for (size_t i = 0; i < t->nevents; i++) {
            const rv_event *ev = &t->events[i];
            if (ev->dur_ns < 0 || ev->cat >= RV_CAT_COUNT)
                abort();
            (void)strlen(rv_trace_str(t, ev->name));
        }
        rv_trace_free(t);
    } else if (t != NULL || e.message[0] == '\0' || e.code != rc) {
        abort(); /* a failure always says why and returns no trace */
    }
    return 0;
}
