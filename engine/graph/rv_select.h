/* Task selection (Daydream section 4.4 "Select") and kernel classification.
 *
 * A selector is the JSON object {"kind", "name", "layer", "phase", "stream",
 * "layer_instance"}
 * that what-if optimizations take: every present field must match. name and
 * layer are PCRE2 regular expressions (POSIX-ERE-like) searched anywhere in
 * the task name and the task's layer (outermost framework op) name.
 *
 * Patterns come from the network, so time and memory are bounded:
 * back-references are refused at parse time; compiling may use at most
 * RV_SELECT_COMPILE_BYTES; one match at most RV_SELECT_MATCH_LIMIT
 * backtracking steps and RV_SELECT_HEAP_KIB of heap. A match past a limit
 * is an error of the what-if (RV_ERR_LIMIT naming the field, from
 * rv_select_finish), never a silent "no match". Each pattern is matched
 * once per distinct string (the result is cached per string id), so a
 * selector over 100k tasks costs one match per distinct name.
 *
 * A selector is used by one thread at a time (the cache is not locked). */
#ifndef RV_SELECT_H
#define RV_SELECT_H

#include <stdint.h>

#include <jansson.h>

#include "util/rv_error.h"
#include "graph/rv_graph.h"
#include "trace/rv_kname.h"
#include "util/rv_stop.h"

/* Limits of the name and layer patterns (docs/whatif.md "Selectors"). */
#define RV_SELECT_MAX_PATTERN   512               /* characters */
#define RV_SELECT_MAX_NEST      32                /* nested parentheses */
#define RV_SELECT_COMPILE_BYTES ((size_t)1 << 20) /* memory to compile one */
#define RV_SELECT_MATCH_LIMIT   100000u           /* backtracking steps per match */
#define RV_SELECT_DEPTH_LIMIT   100000u           /* nested backtracking depth */
#define RV_SELECT_HEAP_KIB      4096u             /* heap of one match */
/* Every how many distinct names matching checks the stop: a match may take
 * about 1 ms at its limit, so about every 64 ms at worst. */
#define RV_SELECT_STOP_EVERY 64

typedef enum rv_sel_kind {
    RV_SEL_ANY = -1,
    RV_SEL_KERNEL = 0, /* GPU kernel, collectives excluded */
    RV_SEL_CPU,        /* CPU task (runtime/driver call) */
    RV_SEL_MEMCPY,     /* memcpy or memset on a GPU stream */
    RV_SEL_COMM,       /* collective kernel or inserted communication */
    RV_SEL_DATA,       /* inserted data-loading task */
} rv_sel_kind;

typedef struct rv_select {
    int kind;               /* rv_sel_kind */
    int phase;              /* rv_phase, -1 = any */
    int64_t stream;         /* GPU stream id, -1 = any */
    int64_t layer_instance; /* layer index (rv_layers.h), -1 = any */
    int has_name, has_layer;
    struct rv_select_re *name_re, *layer_re; /* owned; compiled pattern + match cache */
} rv_select;

/* Parses a selector object (borrowed). field names the object in errors
 * ("optimizations[2].select"). NULL obj gives "everything". Returns 0 or
 * RV_ERR_INVALID with err->field set to the offending member. */
int rv_select_parse(const json_t *obj, const char *field, rv_select *out, rv_error *err);

/* Frees the compiled patterns. NULL-safe; idempotent. */
void rv_select_clear(rv_select *s);

/* True when task i of g matches. A pattern that hits a match limit, or a
 * stop (below) that says stop, gives "no match" here and an error from
 * rv_select_finish. */
int rv_select_match(const rv_select *s, const rv_graph *g, size_t i);

/* The deadline and cancellation (borrowed, may be NULL) matching checks
 * every RV_SELECT_STOP_EVERY distinct names; changes only the selector's
 * patterns, so it takes the selector as it is kept (const). */
void rv_select_set_stop(const rv_select *s, const rv_stop *stop);

/* Ends a pass of rv_select_match calls (one model): frees the match cache,
 * forgets the stop and returns 0, or the error that made matches fail: RV_ERR_LIMIT naming
 * the field ("optimizations[2].select.name") when a pattern hit a match
 * limit, RV_ERR_BUDGET when the stop said stop, RV_ERR_NOMEM. The error
 * is cleared, so the selector can be used again. */
int rv_select_finish(const rv_select *s, rv_error *err);

/* Class of task i (uses its category and flags too); CPU tasks -> RV_KC_OTHER. */
int rv_kclass_of_task(const rv_graph *g, size_t i);
/* Task name (borrowed from the trace's string table; "" when none). */
const char *rv_task_name(const rv_graph *g, size_t i);

#endif
