/* Rounding of the numbers in answers. See rv_round.h. */
#include "util/rv_round.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

rv_round_class rv_round_key_class(const char *key)
{
    /* Inputs a caller echoes back as given. */
    static const char *const echo[] = {"scenario", "request", "whatif", "document"};
    /* Ratios: dimensionless figures that read as a share or a factor. */
    static const char *const ratio[] = {"speedup", "replay_error", "error", "share",       "shares",
                                        "mfu",     "utilization",  "ratio", "time_factor", "frac"};
    static const char *const ratio_suffix[] = {"_error",       "_share", "_ratio",
                                               "_utilization", "_frac",  "_speedup"};
    if (!key)
        return RV_ROUND_OTHER;
    for (size_t i = 0; i < sizeof(echo) / sizeof(echo[0]); i++)
        if (strcmp(key, echo[i]) == 0)
            return RV_ROUND_ECHO;
    if (ends_with(key, "_us"))
        return RV_ROUND_TIME_US;
    for (size_t i = 0; i < sizeof(ratio) / sizeof(ratio[0]); i++)
        if (strcmp(key, ratio[i]) == 0)
            return RV_ROUND_RATIO;
    for (size_t i = 0; i < sizeof(ratio_suffix) / sizeof(ratio_suffix[0]); i++)
        if (ends_with(key, ratio_suffix[i]))
            return RV_ROUND_RATIO;
    return RV_ROUND_OTHER;
}

/* v to d decimals; values too large for that to matter are returned as
 * they are (their 15 printed digits hold fewer decimals already). */
static double to_decimals(double v, int d)
{
    double scale = pow(10, d);
    if (!isfinite(v) || fabs(v) * scale >= 1e15)
        return v;
    double r = round(v * scale) / scale;
    return r == 0 ? 0 : r; /* no -0 */
}

double rv_round_value(double v, rv_round_class c)
{
    switch (c) {
    case RV_ROUND_ECHO: return v;
    case RV_ROUND_RATIO: return to_decimals(v, 4);
    case RV_ROUND_TIME_US:
        if (v == 0 || !isfinite(v))
            return v;
        if (fabs(v) >= 10)
            return to_decimals(v, 1);
        /* 3 significant digits: 1.23 us, 0.0123 us. */
        return to_decimals(v, 2 - (int)floor(log10(fabs(v))));
    case RV_ROUND_OTHER:
    default: return to_decimals(v, 10);
    }
}

/* Bounded depth: answers nest a few levels; deeper values are left as
 * they are rather than recursing without end. */
#define ROUND_MAX_DEPTH 64

static void walk(json_t *v, rv_round_class c, int depth)
{
    if (!v || depth > ROUND_MAX_DEPTH || c == RV_ROUND_ECHO)
        return;
    if (json_is_real(v)) {
        json_real_set(v, rv_round_value(json_real_value(v), c));
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) walk(x, c, depth + 1);
    } else if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x)
        {
            rv_round_class kc = rv_round_key_class(k);
            /* A key that says nothing keeps its parent's meaning (the
             * "baseline" under "mfu" is a ratio), unless it names a time. */
            walk(x, kc != RV_ROUND_OTHER ? kc : c, depth + 1);
        }
    }
}

void rv_round_json(json_t *v)
{
    walk(v, RV_ROUND_OTHER, 0);
}

char *rv_round_dumps(json_t *v, size_t flags)
{
    rv_round_json(v);
    return json_dumps(v, flags | RV_ROUND_DUMP_FLAGS);
}
