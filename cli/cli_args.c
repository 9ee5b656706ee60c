#include "cli_args.h"

int rv_cli_trace_arg(const char *a, const char **path, void (*usage)(FILE *f))
{
    if (a[0] == '-') {
        fprintf(stderr, "reverie: unknown or incomplete option '%s'\n", a);
        usage(stderr);
        return 2;
    }
    if (*path) {
        fprintf(stderr, "reverie: one trace at a time ('%s' is extra)\n", a);
        return 2;
    }
    *path = a;
    return 0;
}
