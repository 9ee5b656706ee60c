/* Numbers in answers rounded to what they mean, in one place: every
 * renderer of a JSON answer (engine/run/rv_run.c, the server's fleet, diff
 * and training answers, every JSON reply) walks its answer through
 * rv_round_json before it is dumped and dumps with RV_ROUND_DUMP_FLAGS.
 * The rules (docs/whatif.md "Numbers"):
 *  - times (a key ending in "_us"): to 0.1 us, 3 significant digits below
 *    10 us;
 *  - ratios (speedup, errors, shares, utilizations, MFU, ratios and
 *    factors named so, and everything under such a key): 4 decimals;
 *  - everything else: at most 10 decimals, printed with 15 significant
 *    digits at most, which is never longer than the shortest text that
 *    reads back to the same double (0.8 prints 0.8, not
 *    0.80000000000000004).
 * Inputs echoed as given (a fleet's "scenario", a "request") are left as
 * they are. Integers are untouched. */
#ifndef RV_ROUND_H
#define RV_ROUND_H

#include <jansson.h>

/* json_dumps / json_dumpf flags that print rounded reals shortest. */
#define RV_ROUND_DUMP_FLAGS JSON_REAL_PRECISION(15)

/* What a number means, by the key it sits under. */
typedef enum rv_round_class {
    RV_ROUND_OTHER = 0,
    RV_ROUND_TIME_US,
    RV_ROUND_RATIO,
    RV_ROUND_ECHO /* an input echoed as given: not rounded */
} rv_round_class;

/* The class of a key (NULL: none): RV_ROUND_OTHER when the key says
 * nothing (a number under it then takes its parent's class). */
rv_round_class rv_round_key_class(const char *key);

/* v rounded as a number of class c. */
double rv_round_value(double v, rv_round_class c);

/* Rounds every real in v (borrowed; changed in place) by the rules above.
 * Idempotent. NULL-safe. */
void rv_round_json(json_t *v);

/* rv_round_json then json_dumps(v, flags | RV_ROUND_DUMP_FLAGS): new text
 * (free()), or NULL on OOM. */
char *rv_round_dumps(json_t *v, size_t flags);

#endif
