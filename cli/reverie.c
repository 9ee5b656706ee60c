/* `reverie`: the command-line face of the engine and the service.
 *
 * The engine's commands run here. The commands that talk to the service
 * (its server over HTTP, or its database) live in the sibling program
 * reverie-service, which this one executes with the same arguments: only
 * they need libcurl and libpq, whose loading (38 libraries, their
 * constructors) cost every `reverie simulate` 12 ms before its first byte.
 * The user types `reverie upload ...` either way (docs/internals/cli.md). */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rv_cli.h"
#include "util/rv_mem.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv); /* NULL: a reverie-service command */
    const char *summary;
} command;

static const command commands[] = {
    {"simulate", rv_cmd_simulate, "simulate a trace (and a what-if), print a JSON report"},
    {"diff", rv_cmd_diff, "compare two traces, or a trace and its what-if, per op and kernel"},
    {"kernels", rv_cmd_kernels, "kernel-model error per class and kernel time on other GPUs"},
    {"snapshot", rv_cmd_snapshot, "write a trace's binary snapshot (fast to load)"},
    {"sweep", rv_cmd_sweep, "one row per value of a what-if field (--vary F=a:b:step)"},
    {"advise", rv_cmd_advise, "search the what-ifs for the best plans (--objective time|energy)"},
    {"whatif", NULL, "ask reveried for a what-if on a stored trace"},
    {"fleet", NULL, "fleet-wide what-if on reveried"},
    {"token", NULL, "create|list|revoke API tokens"},
    {"migrate", NULL, "apply or revert database migrations"},
    {"overheads", NULL, "per-platform host-overhead statistics (rebuild|show|predict)"},
    {"upload", NULL, "upload traces to reveried (or resend a spool folder)"},
};

/* Runs reverie-service from this program's folder with argv (argv[0] is
 * replaced); returns only when that fails. */
static int run_service(char **argv)
{
    char self[PATH_MAX], path[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        fprintf(stderr, "reverie: cannot find this program's folder: %s\n", strerror(errno));
        return 1;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    snprintf(path, sizeof(path), "%s/reverie-service", slash ? self : ".");
    argv[0] = path;
    execv(path, argv);
    fprintf(stderr,
            "reverie: '%s' is a command of reverie-service, which should be next to reverie: "
            "%s: %s\n",
            argv[1], path, strerror(errno));
    return 1;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: reverie COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nRun `reverie COMMAND --help` for a command's options.\n");
}

int main(int argc, char **argv)
{
    /* A run allocates and frees a few large arrays per phase (graph,
     * simulations, reports); keeping them on the heap instead of fresh
     * mmaps saves the page faults of touching new memory each time. */
    mallopt(M_MMAP_THRESHOLD, 512 << 20);
    mallopt(M_TRIM_THRESHOLD, 1024 << 20);
    /* One heap for the run's threads (the baseline's reports run on a
     * second one), backed by huge pages: page faults were a sixth of
     * reading and simulating a trace (docs/internals/kineto-reader.md). */
    mallopt(M_ARENA_MAX, 1);
    rv_mem_heap_huge((size_t)256 << 20);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    /* `overheads predict` needs no database: it stays here. */
    if (strcmp(argv[1], "overheads") == 0 && argc > 2 && strcmp(argv[2], "predict") == 0)
        return rv_cmd_overheads_predict(argc - 2, argv + 2);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(argv[1], commands[i].name) != 0)
            continue;
        return commands[i].run ? commands[i].run(argc - 1, argv + 1) : run_service(argv);
    }
    fprintf(stderr, "reverie: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
