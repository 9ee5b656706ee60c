/* A throwaway PostgreSQL for the db tests: a fresh cluster (initdb) in a
 * mkdtemp directory, started with store/rv_pgembed on a Unix socket in
 * that directory (so parallel tests never share a port), stopped and
 * removed at the end, also at exit() after a failed assertion. */
#ifndef RV_TEST_PG_HELPER_H
#define RV_TEST_PG_HELPER_H

typedef struct rv_testpg {
    char dir[256];  /* the temporary directory */
    char home[300]; /* REVERIE_HOME-like directory inside it */
    char conninfo[1024];
    void *pg; /* rv_pgembed */
} rv_testpg;

/* 0 when started; 77 (after printing why) when no PostgreSQL binaries are
 * installed; 1 on any other failure (printed). */
int rv_testpg_start(rv_testpg *t);
/* Stops the server and removes the directory. Safe to call twice. */
void rv_testpg_stop(rv_testpg *t);
/* rm -rf of a directory tree (test helper). */
int rv_testpg_rmtree(const char *dir);

#endif
