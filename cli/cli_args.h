/* Command-line pieces shared by the `reverie` subcommands that take one
 * trace (simulate, sweep). */
#ifndef RV_CLI_ARGS_H
#define RV_CLI_ARGS_H

#include <stdio.h>

/* The last branch of an option loop: `a` is an unknown or incomplete option
 * (printed, then usage(stderr)), the trace (kept in *path, borrowed from
 * argv) or a second trace (printed). 0 when taken, else the exit code 2. */
int rv_cli_trace_arg(const char *a, const char **path, void (*usage)(FILE *f));

#endif
