/* `reverie`: the command-line face of the engine and the service. */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "rv_cli.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"simulate", rv_cmd_simulate, "simulate a trace (and a what-if), print a JSON report"},
    {"diff", rv_cmd_diff, "compare two traces, or a trace and its what-if, per op and kernel"},
    {"kernels", rv_cmd_kernels, "kernel-model error per class and kernel time on other GPUs"},
    {"snapshot", rv_cmd_snapshot, "write a trace's binary snapshot (fast to load)"},
    {"sweep", rv_cmd_sweep, "one row per value of a what-if field (--vary F=a:b:step)"},
    {"advise", rv_cmd_advise, "search the what-ifs for the best plans (--objective time|energy)"},
    {"whatif", rv_cmd_whatif, "ask reveried for a what-if on a stored trace"},
    {"fleet", rv_cmd_fleet, "fleet-wide what-if on reveried"},
    {"token", rv_cmd_token, "create|list|revoke API tokens"},
    {"migrate", rv_cmd_migrate, "apply or revert database migrations"},
    {"overheads", rv_cmd_overheads, "per-platform host-overhead statistics (rebuild|show)"},
    {"upload", rv_cmd_upload, "upload traces to reveried (or resend a spool folder)"},
};

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
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "reverie: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
