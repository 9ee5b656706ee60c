/* `reverie sweep TRACE [--whatif JSON|@FILE] --vary FIELD=VALUES
 *                [--format csv|json|table] [--json]`
 *
 * Applies the what-if document once per value of one field and prints one
 * row per point: the predicted median iteration, the speedup over the
 * simulated baseline, energy per iteration and average power. FIELD is a
 * dotted path into the document ("power_limit_w", "distributed.workers",
 * "optimizations[0].factor"); VALUES is "start:stop:step" or a comma list
 * (numbers or words, e.g. "ring,tree"). Several --vary make a grid: one
 * row per combination, the last field varying fastest (at most
 * SWEEP_MAX_FIELDS fields and SWEEP_MAX_POINTS rows); a field given twice
 * is refused. Rows are CSV (default), one JSON document, or a table for
 * people with rounded figures. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli_args.h"
#include "rv_cli.h"
#include "graph/rv_graph.h"
#include "reader/rv_kineto.h"
#include "simulate/rv_report.h"
#include "simulate/rv_sim.h"
#include "run/rv_run.h"
#include "whatif/rv_whatif.h"

int rv_cmd_sweep(int argc, char **argv);

#define SWEEP_MAX_POINTS 10000
#define SWEEP_MAX_FIELDS 4

static void usage(FILE *f)
{
    fprintf(f, "usage: reverie sweep TRACE [--whatif JSON|@FILE] --vary FIELD=VALUES\n"
               "                     [--format csv|json|table] [--json]\n"
               "  FIELD     dotted path in the what-if document: power_limit_w,\n"
               "            distributed.workers, distributed.inter_node_gbps,\n"
               "            optimizations[0].factor, ...; several --vary make a grid\n"
               "            (one row per combination, at most 4 fields and 10000 rows)\n"
               "  VALUES    start:stop:step (inclusive) or a comma list: 1,2,4,8 or ring,tree\n"
               "  --format  csv rows (default), one JSON document, or a table for people\n"
               "  --json    the same as --format json\n"
               "See docs/whatif.md for the document.\n");
}

/* Sets path (e.g. "distributed.workers", "optimizations[1].factor") in doc
 * to v (stolen), creating objects on the way. 0 or -1. */
static int set_path(json_t *doc, const char *path, json_t *v)
{
    char buf[256];
    if (strlen(path) >= sizeof(buf)) {
        json_decref(v);
        return -1;
    }
    memcpy(buf, path, strlen(path) + 1);
    json_t *cur = doc;
    char *save = NULL;
    char *tok = strtok_r(buf, ".", &save);
    while (tok) {
        char *next = strtok_r(NULL, ".", &save);
        char *br = strchr(tok, '[');
        long idx = -1;
        if (br) {
            *br = '\0';
            idx = strtol(br + 1, NULL, 10);
        }
        json_t *child = json_object_get(cur, tok);
        if (idx >= 0) {
            if (!json_is_array(child) || (size_t)idx >= json_array_size(child))
                goto fail;
            child = json_array_get(child, (size_t)idx);
        }
        if (!next) {
            if (idx >= 0 || !json_is_object(cur))
                goto fail;
            return json_object_set_new(cur, tok, v);
        }
        if (!child) {
            child = json_object();
            if (!child || json_object_set_new(cur, tok, child))
                goto fail;
        }
        if (!json_is_object(child))
            goto fail;
        cur = child;
        tok = next;
    }
fail:
    json_decref(v);
    return -1;
}

static json_t *value_of(const char *s)
{
    char *end;
    errno = 0;
    long long i = strtoll(s, &end, 10);
    if (*s && !*end && !errno)
        return json_integer(i);
    double d = strtod(s, &end);
    if (*s && !*end)
        return json_real(d);
    if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0)
        return json_boolean(strcmp(s, "true") == 0);
    if (strcmp(s, "null") == 0)
        return json_null();
    return json_string(s);
}

/* Expands VALUES into an array of JSON values (new). NULL on bad input. */
static json_t *expand(const char *spec)
{
    json_t *out = json_array();
    double a, b, st;
    char tail;
    if (!out)
        return NULL;
    if (sscanf(spec, "%lf:%lf:%lf%c", &a, &b, &st, &tail) == 3) {
        if (st <= 0 || b < a || (b - a) / st > SWEEP_MAX_POINTS) {
            json_decref(out);
            return NULL;
        }
        int ints = a == (long long)a && st == (long long)st;
        /* Points by index, so rounding cannot add or drop one. */
        long npts = (long)floor((b - a) / st + 1e-9) + 1;
        for (long k = 0; k < npts; k++) {
            double x = a + (double)k * st;
            json_array_append_new(out, ints ? json_integer((long long)x) : json_real(x));
        }
        return out;
    }
    char *copy = strdup(spec), *save = NULL;
    if (!copy) {
        json_decref(out);
        return NULL;
    }
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (json_array_size(out) >= SWEEP_MAX_POINTS)
            break;
        json_array_append_new(out, value_of(t));
    }
    free(copy);
    if (json_array_size(out) == 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

static json_t *load_doc(const char *text, json_error_t *je)
{
    if (!text)
        return json_object();
    if (text[0] == '@')
        return json_load_file(text + 1, JSON_REJECT_DUPLICATES, je);
    return json_loads(text, JSON_REJECT_DUPLICATES, je);
}

enum { FMT_CSV = 0, FMT_JSON, FMT_TABLE };

/* One table row: rounded for reading (ms, J, W); the CSV keeps the
 * precision. */
static void table_row(int width, const char *value, const rv_run_result *res, const char *error)
{
    if (error) {
        printf("%-*s  error: %s\n", width, value, error);
        return;
    }
    printf("%-*s  %12.2f  %8.3fx  %10.2f  %8.0f  %8d\n", width, value, res->sum.predicted_us / 1e3,
           res->sum.speedup, res->sum.energy_j, res->pred_energy.avg_power_w, res->sum.warnings);
}

/* A value as it reads in a row. */
static void value_text(const json_t *v, char *out, size_t cap)
{
    if (json_is_string(v))
        snprintf(out, cap, "%s", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(out, cap, "%lld", (long long)json_integer_value(v));
    else
        snprintf(out, cap, "%g", json_number_value(v));
}

/* Each --vary FIELD=VALUES into field[f] and its values vals[f] (new
 * references the caller frees), and the grid's point count. 0, or -1
 * after saying why (exit 2). */
static int parse_grid(const char *const *vary, size_t nvary, char field[][256], json_t **vals,
                      size_t *npoints)
{
    *npoints = 1;
    for (size_t f = 0; f < nvary; f++) {
        const char *eq = strchr(vary[f], '=');
        if (!eq || eq == vary[f] || (size_t)(eq - vary[f]) >= sizeof(field[f])) {
            usage(stderr);
            return -1;
        }
        memcpy(field[f], vary[f], (size_t)(eq - vary[f]));
        field[f][eq - vary[f]] = '\0';
        for (size_t e = 0; e < f; e++)
            if (strcmp(field[e], field[f]) == 0) {
                fprintf(stderr, "reverie sweep: --vary %s given twice (%s, then %s)\n", field[f],
                        vary[e], vary[f]);
                return -1;
            }
        vals[f] = expand(eq + 1);
        if (!vals[f]) {
            fprintf(stderr,
                    "reverie: bad values '%s' (start:stop:step or a comma list, at most %d)\n",
                    eq + 1, SWEEP_MAX_POINTS);
            return -1;
        }
        *npoints *= json_array_size(vals[f]);
        if (*npoints > SWEEP_MAX_POINTS) {
            fprintf(stderr, "reverie sweep: the grid has more than %d points\n", SWEEP_MAX_POINTS);
            return -1;
        }
    }
    return 0;
}

/* The CSV or table header line; width[f] (out) is each value column's. */
static void print_header(int format, size_t nvary, char field[][256], int *width)
{
    for (size_t f = 0; f < nvary; f++) {
        width[f] = (int)strlen(field[f]) > 12 ? (int)strlen(field[f]) : 12;
        if (format == FMT_CSV)
            printf("%s,", field[f]);
        else if (format == FMT_TABLE)
            printf("%-*s  ", width[f], field[f]);
    }
    if (format == FMT_CSV)
        printf("predicted_us,speedup,energy_j,avg_power_w,warnings,error\n");
    else if (format == FMT_TABLE)
        printf("%12s  %9s  %10s  %8s  %8s\n", "predicted_ms", "speedup", "energy_j", "power_w",
               "warnings");
}

/* One point's JSON row (new reference; NULL on OOM): its value(s), then
 * the run's figures, or err's message when res is NULL (the point failed). */
static json_t *json_row(size_t nvary, char field[][256], const json_t *const *v,
                        const rv_run_result *res, const rv_error *err)
{
    json_t *row = !res ? json_object() : rv_run_summary_render(&res->sum);
    if (!row)
        return NULL;
    if (nvary == 1) {
        json_object_set(row, "value", (json_t *)v[0]);
    } else {
        json_t *vo = json_object();
        for (size_t f = 0; vo && f < nvary; f++)
            json_object_set(vo, field[f], (json_t *)v[f]);
        json_object_set_new(row, "values", vo);
    }
    if (!res) {
        json_object_set_new(row, "error", json_string(err->message));
    } else {
        json_object_set_new(row, "avg_power_w",
                            json_pack("{s:f,s:f}", "baseline", res->base_energy.avg_power_w,
                                      "predicted", res->pred_energy.avg_power_w));
        json_object_set_new(row, "warnings", rv_run_warnings_json(res));
    }
    return row;
}

/* The JSON answer: the trace, what varied, the baseline and the rows
 * (borrowed). */
static void print_json(const char *path, size_t nvary, char field[][256], double baseline_us,
                       json_t *rows)
{
    json_t *fields = json_array();
    for (size_t f = 0; fields && f < nvary; f++)
        json_array_append_new(fields, json_string(field[f]));
    /* One field keeps the one-field shape ("vary": name, "value"). */
    json_t *out = json_pack("{s:s, s:o, s:f, s:O}", "trace", path, "vary",
                            nvary == 1 ? json_string(field[0]) : json_incref(fields), "baseline_us",
                            baseline_us, "points", rows);
    json_decref(fields);
    if (out)
        rv_run_dump(out, stdout, 1);
    json_decref(out);
}

int rv_cmd_sweep(int argc, char **argv)
{
    const char *path = NULL, *doc_text = NULL, *vary[SWEEP_MAX_FIELDS];
    int format = FMT_CSV, rc = 1, failures = 0;
    size_t nvary = 0;
    rv_error err;
    rv_trace *tr = NULL;
    rv_graph *g = NULL;
    rv_sim *bs = NULL;
    json_t *doc = NULL, *vals[SWEEP_MAX_FIELDS] = {0}, *rows = NULL;
    char field[SWEEP_MAX_FIELDS][256];
    rv_error_clear(&err);

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (i + 1 < argc && strcmp(a, "--whatif") == 0) {
            doc_text = argv[++i];
        } else if (i + 1 < argc && strcmp(a, "--vary") == 0) {
            if (nvary == SWEEP_MAX_FIELDS) {
                fprintf(stderr, "reverie sweep: at most %d --vary (a grid of %d fields)\n",
                        SWEEP_MAX_FIELDS, SWEEP_MAX_FIELDS);
                return 2;
            }
            vary[nvary++] = argv[++i];
        } else if (strcmp(a, "--json") == 0) {
            format = FMT_JSON;
        } else if (i + 1 < argc && strcmp(a, "--format") == 0) {
            const char *v = argv[++i];
            if (strcmp(v, "csv") == 0) {
                format = FMT_CSV;
            } else if (strcmp(v, "json") == 0) {
                format = FMT_JSON;
            } else if (strcmp(v, "table") == 0) {
                format = FMT_TABLE;
            } else {
                fprintf(stderr, "reverie sweep: --format wants csv, json or table, not '%s'\n", v);
                return 2;
            }
        } else if (rv_cli_trace_arg(a, &path, usage) != 0) {
            return 2;
        }
    }
    if (!path || nvary == 0) {
        usage(stderr);
        return 2;
    }
    size_t npoints = 1;
    if (parse_grid(vary, nvary, field, vals, &npoints) != 0)
        goto usage_out;
    json_error_t je;
    doc = load_doc(doc_text, &je);
    if (!json_is_object(doc)) {
        fprintf(stderr, "reverie: bad what-if document: %s\n", doc ? "not an object" : je.text);
        rc = 2;
        goto out;
    }
    if (rv_cli_load_trace(path, &tr, &err) != 0 || rv_graph_build(tr, NULL, &g, &err) != 0 ||
        rv_sim_run(g, RV_SCHED_EARLIEST_START, &bs, &err) != 0) {
        fprintf(stderr, "reverie: %s: %s\n", path, err.message);
        goto out;
    }
    rows = json_array();
    int width[SWEEP_MAX_FIELDS];
    print_header(format, nvary, field, width);
    double baseline_us = 0;
    for (size_t k = 0; k < npoints; k++) {
        rv_whatif *w = NULL;
        rv_run_result *res = NULL;
        rv_run_opts opts = {.iteration = RV_ITER_MEDIAN};
        const json_t *v[SWEEP_MAX_FIELDS];
        char vs[SWEEP_MAX_FIELDS][64];
        json_t *d = json_deep_copy(doc);
        int prc = d ? 0 : -1;
        rv_error_clear(&err);
        /* Point k in mixed radix, the last field fastest. */
        for (size_t f = nvary, rest = k; f-- > 0;) {
            size_t n = json_array_size(vals[f]);
            v[f] = json_array_get(vals[f], rest % n);
            rest /= n;
            value_text(v[f], vs[f], sizeof(vs[f]));
        }
        for (size_t f = 0; f < nvary && prc == 0; f++)
            if (set_path(d, field[f], json_incref((json_t *)v[f])) != 0) {
                prc = -1;
                rv_error_field(&err, RV_ERR_INVALID, field[f], "cannot set %s in the document",
                               field[f]);
            }
        if (prc == 0 && (prc = rv_whatif_parse(d, &w, &err)) == 0)
            prc = rv_run(g, bs, w, &opts, &res, &err);
        if (prc)
            failures++;
        else
            baseline_us = res->sum.baseline_us;
        if (format == FMT_JSON) {
            json_t *row = json_row(nvary, field, v, prc ? NULL : res, &err);
            if (row)
                json_array_append_new(rows, row);
        } else if (format == FMT_TABLE) {
            for (size_t f = 0; f + 1 < nvary; f++)
                printf("%-*s  ", width[f], vs[f]);
            table_row(width[nvary - 1], vs[nvary - 1], res, prc ? err.message : NULL);
        } else {
            for (size_t f = 0; f < nvary; f++)
                printf("%s,", vs[f]);
            if (prc)
                printf(",,,,,\"%s\"\n", err.message);
            else
                printf("%.1f,%.4f,%.4f,%.1f,%d,\n", res->sum.predicted_us, res->sum.speedup,
                       res->sum.energy_j, res->pred_energy.avg_power_w, res->sum.warnings);
        }
        rv_run_result_free(res);
        rv_whatif_free(w);
        json_decref(d);
    }
    if (format == FMT_JSON)
        print_json(path, nvary, field, baseline_us, rows);
    rc = failures ? 1 : 0;
    goto out;
usage_out:
    rc = 2;
out:
    json_decref(rows);
    for (size_t f = 0; f < SWEEP_MAX_FIELDS; f++)
        json_decref(vals[f]);
    json_decref(doc);
    rv_sim_free(bs);
    rv_graph_free(g);
    rv_trace_free(tr);
    return rc;
}
