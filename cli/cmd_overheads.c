/* `reverie overheads rebuild|show [--platform ID] [--database URL]
 *                                  [--home DIR] [--json]`
 *
 * Per-platform host-overhead statistics (T1..T5, docs/internals/store.md):
 * `rebuild` recomputes them from the stored traces' sketches, `show` prints them;
 * `reverie overheads predict TRACE...` (cmd_ohpredict.c) needs no database. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_cli.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: reverie overheads rebuild|show [--platform ID] [--database URL]\n"
               "                                   [--home DIR] [--json]\n"
               "       reverie overheads predict TRACE...\n"
               "\n"
               "rebuild     recompute the statistics of one platform (default: all) from the\n"
               "            stored traces' overhead sketches (raw samples are not kept)\n"
               "show        print them (one table per platform; --json for the raw rows)\n"
               "predict     re-time each trace's host work from its own and from the pooled\n"
               "            statistics of all the given traces, and compare each with its\n"
               "            measured iteration (no database)\n"
               "--database  libpq URL or conninfo (default: $REVERIE_DATABASE_URL, else the\n"
               "            embedded cluster under --home / $REVERIE_HOME / ./var)\n");
}

#ifdef RV_HAVE_STORE
#include "cli_db.h"

static int show_platform(rv_db *db, int64_t id, const char *label, int json, rv_error *e)
{
    if (json) {
        json_t *j = NULL;
        if (rv_db_overheads_get(db, id, &j, e) != 0)
            return -1;
        json_t *doc = json_pack("{s:I,s:s,s:o}", "platform_id", (json_int_t)id, "platform", label,
                                "overheads", j);
        json_dumpf(doc, stdout, JSON_INDENT(2));
        printf("\n");
        json_decref(doc);
        return 0;
    }
    rv_db_overhead_row *rows = NULL;
    size_t n = 0;
    if (rv_db_overheads_load(db, id, &rows, &n, e) != 0)
        return -1;
    printf("platform %lld: %s\n", (long long)id, label);
    printf("  %-4s %-48s %8s %8s %10s %10s %10s %10s\n", "type", "op", "samples", "kept", "mean_us",
           "std_us", "median_us", "p90_us");
    for (size_t i = 0; i < n; i++)
        printf("  T%-3d %-48.48s %8zu %8zu %10.3f %10.3f %10.3f %10.3f\n", rows[i].type,
               rows[i].op_name, rows[i].stat.samples, rows[i].stat.count, rows[i].stat.mean,
               rows[i].stat.std, rows[i].stat.median, rows[i].stat.p90);
    if (!n)
        printf("  (no samples)\n");
    rv_db_overhead_rows_free(rows, n);
    return 0;
}

int rv_cmd_overheads(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "predict"))
        return rv_cmd_overheads_predict(argc - 1, argv + 1);
    rv_cli_db c = {0};
    const char *action = NULL;
    long long platform = 0;
    int json = 0, rc = 1;
    for (int i = 1; i < argc; i++) {
        if (rv_cli_db_arg(&c, argc, argv, &i))
            continue;
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (v && !strcmp(a, "--platform")) {
            char *end;
            platform = strtoll(v, &end, 10);
            if (*end || platform <= 0) {
                fprintf(stderr, "reverie overheads: --platform wants a positive id\n");
                return 2;
            }
            i++;
        } else if (!action && (!strcmp(a, "rebuild") || !strcmp(a, "show"))) {
            action = a;
        } else {
            fprintf(stderr, "reverie overheads: unknown or incomplete argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!action) {
        usage(stderr);
        return 2;
    }

    rv_db *db = NULL;
    json_t *plats = NULL;
    rv_error e;
    rv_error_clear(&e);
    if (rv_cli_db_open(&c, 1, &e) != 0)
        goto fail;
    db = c.db;
    if (!strcmp(action, "rebuild")) {
        size_t groups = 0;
        if (rv_db_overheads_rebuild(db, platform, &groups, &e) != 0)
            goto fail;
        printf("rebuilt %zu statistic groups\n", groups);
        rc = 0;
        goto out;
    }
    if (rv_db_platform_list(db, &plats, &e) != 0)
        goto fail;
    size_t i;
    json_t *p;
    int shown = 0;
    json_array_foreach(plats, i, p)
    {
        long long id = json_integer_value(json_object_get(p, "id"));
        if (platform && id != platform)
            continue;
        char label[512];
        snprintf(label, sizeof(label), "%s x%lld, %s, %s, %s, %s",
                 json_string_value(json_object_get(p, "gpu_model")),
                 json_integer_value(json_object_get(p, "gpus_per_node")),
                 json_string_value(json_object_get(p, "cpu_model")),
                 json_string_value(json_object_get(p, "driver")),
                 json_string_value(json_object_get(p, "runtime_version")),
                 json_string_value(json_object_get(p, "framework")));
        if (show_platform(db, id, label, json, &e) != 0)
            goto fail;
        shown++;
    }
    if (platform && !shown) {
        fprintf(stderr, "reverie overheads: no platform with id %lld\n", platform);
        goto out;
    }
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "reverie overheads: %s\n", e.message);
out:
    json_decref(plats);
    rv_cli_db_close(&c, "reverie overheads");
    return rc;
}

#else

int rv_cmd_overheads(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "predict"))
        return rv_cmd_overheads_predict(argc - 1, argv + 1);
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "reverie overheads: this build has no database support\n");
    return 1;
}

#endif
