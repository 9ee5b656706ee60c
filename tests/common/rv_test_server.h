/* A real reveried for end-to-end tests: a temporary REVERIE_HOME (so the
 * server starts its own embedded PostgreSQL there), server processes on
 * free loopback ports, readiness by HTTP, and a cleanup that leaves nothing
 * running or on disk (set RV_KEEP_TEST_HOME to keep the folder). */
#ifndef RV_TEST_SERVER_H
#define RV_TEST_SERVER_H

#include <stddef.h>
#include <sys/types.h>

typedef struct rv_testsrv {
    char home[256];      /* the temporary REVERIE_HOME; empty until made */
    char bin_dir[1024];  /* RV_BIN_DIR */
    char reveried[1100]; /* RV_BIN_DIR/reveried */
    int curl_up;         /* libcurl initialised by setup */
} rv_testsrv;

/* A free TCP port on 127.0.0.1, or 0 when none could be had. */
int rv_testsrv_free_port(void);

/* Finds RV_BIN_DIR/reveried, makes the home "/tmp/<prefix>_XXXXXX" and
 * initialises libcurl. 0 when ready; 77 (after printing why) when reveried
 * is not built; 1 on any other failure. Call rv_testsrv_teardown after it
 * whatever it returned. */
int rv_testsrv_setup(rv_testsrv *s, const char *prefix);

/* Starts "reveried --port PORT --home HOME ARGS..." with its output in
 * HOME/reveried-PORT.log. args (borrowed) is NULL-terminated, at most 24.
 * Returns the child's pid, or -1 when fork failed. */
pid_t rv_testsrv_spawn(const rv_testsrv *s, int port, const char *const *args);

/* Polls GET http://127.0.0.1:PORT/PATH (with a bearer token unless NULL)
 * every 100 ms until it answers `want`: 0, or -1 after `seconds`. When pid
 * is not NULL and that child exits meanwhile, it is reaped, *pid becomes
 * -1 and the wait ends with -1 at once. */
int rv_testsrv_wait(int port, const char *path, const char *token, long want, int seconds,
                    pid_t *pid);

/* Sends sig to *pid and reaps it; *pid becomes -1. Does nothing when
 * *pid <= 0. */
void rv_testsrv_stop(pid_t *pid, int sig);

/* The conninfo of the embedded cluster in s->home (a running server's, or
 * started here and left running for the servers) into out (cap bytes).
 * 0, or 1 with the reason printed. */
int rv_testsrv_conninfo(const rv_testsrv *s, char *out, size_t cap);

/* A token to make: its name and scopes (RV_SCOPE_*), and where the secret
 * goes (RV_TOKEN_LEN + 1 bytes). */
typedef struct rv_testsrv_token {
    const char *name;
    unsigned scopes;
    char *out;
} rv_testsrv_token;

/* Creates the n tokens in the database of the cluster in s->home (a server
 * reloads its token table every second). 0, or 1 with the reason printed. */
int rv_testsrv_tokens(const rv_testsrv *s, const rv_testsrv_token *t, size_t n);

/* After the servers are stopped: stops an embedded cluster still running in
 * the home (a killed server leaves it up), ends libcurl and removes the
 * home. 0, or 1 when the home could not be removed. Safe on a zeroed or
 * half set-up struct. */
int rv_testsrv_teardown(rv_testsrv *s);

#endif
