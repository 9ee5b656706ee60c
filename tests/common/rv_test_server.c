#include "rv_test_server.h"

#include <curl/curl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/http_client.h"
#include "rv_auth.h"
#include "rv_db.h"
#include "rv_pgembed.h"
#include "util/rv_sha256.h"

int rv_testsrv_free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int port = 0;

    if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(s, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (s >= 0)
        close(s);
    return port;
}

int rv_testsrv_setup(rv_testsrv *s, const char *prefix)
{
    const char *b = getenv("RV_BIN_DIR");

    memset(s, 0, sizeof(*s));
    if (!b) {
        fprintf(stderr, "skip: RV_BIN_DIR unset\n");
        return 77;
    }
    snprintf(s->bin_dir, sizeof(s->bin_dir), "%s", b);
    snprintf(s->reveried, sizeof(s->reveried), "%s/reveried", b);
    if (access(s->reveried, X_OK) != 0) {
        fprintf(stderr, "skip: %s is not built\n", s->reveried);
        return 77;
    }
    snprintf(s->home, sizeof(s->home), "/tmp/%s_XXXXXX", prefix);
    if (!mkdtemp(s->home)) {
        s->home[0] = '\0';
        return 1;
    }
    chmod(s->home, 0755); /* the embedded cluster runs as an unprivileged user */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    s->curl_up = 1;
    return 0;
}

pid_t rv_testsrv_spawn(const rv_testsrv *s, int port, const char *const *args)
{
    char p[16], log[1200];
    pid_t pid = fork();

    if (pid != 0)
        return pid;
    snprintf(p, sizeof(p), "%d", port);
    snprintf(log, sizeof(log), "%s/reveried-%d.log", s->home, port);
    if (!freopen(log, "a", stdout) || !freopen(log, "a", stderr))
        _exit(127);
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)s->reveried;
    argv[n++] = "--port";
    argv[n++] = p;
    argv[n++] = "--home";
    argv[n++] = (char *)s->home;
    for (int i = 0; args && args[i] && n < 31; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    execv(s->reveried, argv);
    _exit(127);
}

int rv_testsrv_wait(int port, const char *path, const char *token, long want, int seconds,
                    pid_t *pid)
{
    char u[256];

    snprintf(u, sizeof(u), "http://127.0.0.1:%d%s", port, path);
    for (int i = 0; i < seconds * 10; i++) {
        tc_resp r;
        long st = tc_get(u, token, &r);
        if (st >= 0)
            tc_resp_free(&r);
        if (st == want)
            return 0;
        if (pid && *pid > 0 && waitpid(*pid, NULL, WNOHANG) == *pid) {
            *pid = -1;
            return -1;
        }
        usleep(100 * 1000);
    }
    return -1;
}

void rv_testsrv_stop(pid_t *pid, int sig)
{
    int st;

    if (*pid <= 0)
        return;
    kill(*pid, sig);
    waitpid(*pid, &st, 0);
    *pid = -1;
}

int rv_testsrv_teardown(rv_testsrv *s)
{
    char cmd[1400], bindir[512];

    if (!s->home[0]) {
        if (s->curl_up)
            curl_global_cleanup();
        s->curl_up = 0;
        return 0;
    }
    /* reveried stops the cluster it started; this only acts when one was
     * left running (a killed server, or one that found it running). */
    rv_pgembed *pg = NULL;
    rv_error e;
    rv_error_clear(&e);
    snprintf(cmd, sizeof(cmd), "%s/pg/data/postmaster.pid", s->home);
    if (access(cmd, F_OK) == 0 && rv_pgembed_start(s->home, &pg, &e) == 0 &&
        rv_pgembed_find_bindir(NULL, bindir, sizeof(bindir), &e) == 0) {
        snprintf(cmd, sizeof(cmd), "%s %s/pg_ctl -D '%s' stop -m fast -w >/dev/null 2>&1",
                 geteuid() == 0 ? "runuser -u postgres --" : "", bindir, rv_pgembed_datadir(pg));
        if (system(cmd) != 0)
            fprintf(stderr, "note: could not stop the test cluster\n");
    }
    rv_pgembed_detach(pg);
    if (s->curl_up)
        curl_global_cleanup();
    s->curl_up = 0;
    if (getenv("RV_KEEP_TEST_HOME"))
        return 0;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s->home);
    if (system(cmd) != 0) {
        fprintf(stderr, "note: could not remove %s\n", s->home);
        return 1;
    }
    s->home[0] = '\0';
    return 0;
}

int rv_testsrv_conninfo(const rv_testsrv *s, char *out, size_t cap)
{
    rv_pgembed *pg = NULL;
    rv_error e;

    rv_error_clear(&e);
    if (rv_pgembed_start(s->home, &pg, &e) != 0) {
        fprintf(stderr, "pgembed: %s\n", e.message);
        return 1;
    }
    snprintf(out, cap, "%s", rv_pgembed_conninfo(pg));
    rv_pgembed_detach(pg);
    return 0;
}

int rv_testsrv_tokens(const rv_testsrv *s, const rv_testsrv_token *t, size_t n)
{
    char conninfo[1024], id[RV_TOKEN_ID_LEN + 1], hash[RV_SHA256_HEX_LEN + 1];
    rv_db *db = NULL;
    rv_error e;
    int rc = 0;

    rv_error_clear(&e);
    if (rv_testsrv_conninfo(s, conninfo, sizeof(conninfo)) != 0)
        return 1;
    if (rv_db_open(conninfo, 1, &db, &e) != 0) {
        fprintf(stderr, "db: %s\n", e.message);
        return 1;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        int64_t row;
        rv_auth_token_generate(t[i].out, id);
        rv_sha256_hex(t[i].out, strlen(t[i].out), hash);
        if (rv_db_token_create(db, t[i].name, t[i].scopes, hash, &row, &e) != 0) {
            fprintf(stderr, "token %s: %s\n", t[i].name, e.message);
            rc = 1;
        }
    }
    rv_db_close(db);
    return rc;
}
