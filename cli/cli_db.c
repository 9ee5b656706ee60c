#ifdef RV_HAVE_STORE
#include "cli_db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rv_cli_db_arg(rv_cli_db *c, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;

    if (!v)
        return 0;
    if (!strcmp(a, "--database"))
        c->url = v;
    else if (!strcmp(a, "--home"))
        c->home = v;
    else
        return 0;
    (*i)++;
    return 1;
}

int rv_cli_db_open(rv_cli_db *c, int migrate, rv_error *e)
{
    int rc = rv_pgembed_resolve(c->url, c->home, &c->conninfo, &c->pg, e);
    if (rc == 0)
        rc = rv_db_open(c->conninfo, 1, &c->db, e);
    if (rc == 0 && migrate)
        rc = rv_db_migrate(c->db, NULL, e);
    return rc;
}

void rv_cli_db_close(rv_cli_db *c, const char *prog)
{
    rv_error e;

    if (!c)
        return;
    rv_db_close(c->db);
    c->db = NULL;
    rv_error_clear(&e);
    if (c->pg && rv_pgembed_stop(c->pg, &e) != 0)
        fprintf(stderr, "%s: %s\n", prog, e.message);
    c->pg = NULL;
    free(c->conninfo);
    c->conninfo = NULL;
}
#endif
