/* Subcommands of the `reverie` tool. Each takes the arguments after its own
 * name (argv[0] is the subcommand) and returns the process exit code. */
#ifndef RV_CLI_H
#define RV_CLI_H

int rv_cmd_simulate(int argc, char **argv);
/* `simulate` with several traces: one distributed job (cmd_simulate_job.c).
 * force: simulate them as one job even when their distributedInfo does not
 * say so. Returns the exit status. */
struct rv_whatif;
struct rv_run_opts;
int rv_cli_simulate_job(const char *const *paths, size_t n, const struct rv_whatif *w,
                        const struct rv_run_opts *opts, int force, int compact, int table);
/* `reverie diff A B | A --whatif DOC` (cmd_diff.c). */
int rv_cmd_diff(int argc, char **argv);
int rv_cmd_upload(int argc, char **argv);
int rv_cmd_sweep(int argc, char **argv);
/* `reverie advise TRACE` (cmd_advise.c). */
int rv_cmd_advise(int argc, char **argv);
int rv_cmd_migrate(int argc, char **argv);
int rv_cmd_overheads(int argc, char **argv);
/* `reverie overheads predict`: needs no database. */
int rv_cmd_overheads_predict(int argc, char **argv);

int rv_cmd_token(int argc, char **argv);
int rv_cmd_whatif(int argc, char **argv);
int rv_cmd_fleet(int argc, char **argv);
/* `reverie snapshot TRACE OUT`. */
int rv_cmd_snapshot(int argc, char **argv);

/* `reverie kernels TRACE [--et ET] [--to GPU]...` (cmd_kernels.c). */
int rv_cmd_kernels(int argc, char **argv);

#include "util/rv_error.h"
#include "reader/rv_et.h"
#include "trace/rv_trace.h"

/* Loads a Kineto trace (plain or gzip) or a binary snapshot, by its first
 * bytes. *out is new (rv_trace_free). */
int rv_cli_load_trace(const char *path, rv_trace **out, rv_error *err);

/* Reads the execution trace at path, joins it to tr and puts its shapes on
 * tr; *join (free with rv_et_join_free) says how it joined. 0, or -1 with
 * the reason printed (cmd_simulate.c). */
int rv_cli_attach_et(const char *path, rv_trace *tr, rv_et_join *join);

#endif
