/* Internal: the what-if request spec. One table per kind (field, type,
 * range, default, one-line doc) drives the parser (rv_whatif.c), the
 * catalogue GET /v1/whatif/kinds (rv_whatif_kinds) and the tests that
 * check documented defaults take effect. Not a public API. */
#ifndef RV_WHATIF_SPEC_H
#define RV_WHATIF_SPEC_H

#include <stddef.h>

#include <jansson.h>

#include "util/rv_error.h"

typedef enum rv_ftype {
    RV_F_NUM,    /* double */
    RV_F_INT,    /* int */
    RV_F_BOOL,   /* int 0/1 */
    RV_F_ENUM,   /* int: codes[i] (or i) of the i-th of values */
    RV_F_SELECT, /* rv_select; flag_off gets 1 when given or defaulted */
    RV_F_STRING, /* checked by the caller (no offset) */
    RV_F_TABLE,  /* checked by the caller (no offset) */
} rv_ftype;

#define RV_SPEC_NONE ((size_t)-1)

typedef struct rv_field_spec {
    const char *name;
    const char *doc;
    const char *dflt;   /* JSON text of the default; NULL: none or derived by the model */
    const char *values; /* enums: comma-separated */
    const int *codes;   /* enums: the stored code of each value; NULL: its index */
    double min, max;    /* numbers: inclusive bounds */
    size_t off;         /* where the value goes in the destination; RV_SPEC_NONE: caller */
    size_t flag_off;    /* int set to 1 when given or defaulted; RV_SPEC_NONE: none */
    rv_ftype type;
    int min_exclusive; /* numbers: min itself is rejected */
    int required;
} rv_field_spec;

#define RV_SPEC_MAX_FIELDS 8

typedef struct rv_kind_spec {
    const char *kind;
    const char *label; /* for forms */
    int id;            /* rv_opt_kind */
    int stage;         /* application stage (rv_whatif.c) */
    int order;         /* position in the documented application order */
    const char *doc;
    const char *example; /* a minimal valid optimization object */
    rv_field_spec fields[RV_SPEC_MAX_FIELDS];
} rv_kind_spec;

extern const rv_kind_spec rv_spec_kinds[];
extern const size_t rv_spec_nkinds;
extern const rv_field_spec rv_spec_dist[], rv_spec_top[], rv_spec_select[];
extern const size_t rv_spec_ndist, rv_spec_ntop, rv_spec_nselect;
/* "parallel": other parallelism degrees (rv_par). */
extern const rv_field_spec rv_spec_parallel[];
extern const size_t rv_spec_nparallel;
/* "job": the job-level what-ifs (rv_job_whatif). */
extern const rv_field_spec rv_spec_job[];
extern const size_t rv_spec_njob;

/* The kind spec named kind, or NULL. */
const rv_kind_spec *rv_spec_kind(const char *kind);

/* Reads every field of spec[0..n) from obj (borrowed) into dst: given
 * values are checked against type and range, absent ones take their
 * default. Members of obj not in spec (other than those in extra, a
 * NULL-terminated list) are refused. prefix names obj in errors
 * ("optimizations[1]."). Returns 0 or RV_ERR_INVALID with err->field. */
int rv_spec_read(const json_t *obj, const char *prefix, const rv_field_spec *spec, size_t n,
                 const char *const *extra, void *dst, rv_error *err);

/* Writes the hint for a misspelt name got into out (cap bytes, always
 * NUL-terminated): "; did you mean 'x'? valid: a, b, ..." with the nearest of
 * names[0..n) by edit distance (left out when none is close), the list cut
 * with "..." where cap runs out. For messages that fit an rv_error. */
void rv_spec_suggest(const char *got, const char *const *names, size_t n, char *out, size_t cap);

/* 1 when obj has key with a non-null value. */
int rv_spec_given(const json_t *obj, const char *key);

#endif
