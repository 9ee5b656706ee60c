/* Selector patterns from the network cannot take a worker's time or the
 * server's memory (engine/rv_select.c, docs/whatif.md "Selectors").
 *
 * The cases that could run away on a matcher without limits (a
 * back-reference, a nested counted repeat) run in a child process with a
 * time alarm and, outside sanitizer builds, an address-space limit, so a
 * regression fails the test instead of hanging it or the machine. Only the
 * long-standing API is used (parse, match, apply), so the same file builds
 * against older engines to show what they did. */
#include <CUnit/Basic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/rv_test_util.h"
#include "graph/rv_graph.h"
#include "graph/rv_select.h"
#include "models/rv_apply.h"
#include "whatif/rv_whatif.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RV_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RV_SANITIZED 1
#endif
#endif
#ifndef RV_SANITIZED
#define RV_SANITIZED 0
#endif
/* Time limits are for an optimized build; sanitizers run slower. */
#define SLOW (RV_SANITIZED ? 20 : 1)

#define BACKREF "^(.*)(.*)(.*)(.*)(.*)\\\\5\\\\4\\\\3\\\\2\\\\1$"
#define NESTED  "((a{1,255}){1,255}){1,255}"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static long maxrss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* A trace of n kernels named name, one after the other on stream 7, in one
 * profiler step, and its graph. 0 or -1. */
static int build(const char *name, size_t n, rv_trace **tr, rv_graph **g)
{
    rv_error err;
    rv_event ev;
    rv_trace *t = rv_trace_new();

    *tr = NULL;
    *g = NULL;
    if (!t)
        return -1;
    rv_event_init(&ev);
    ev.cat = RV_CAT_USER_ANNOTATION;
    ev.name = rv_strtab_intern(&t->strings, "ProfilerStep#1", 14);
    ev.pid = ev.tid = rv_strtab_intern(&t->strings, "1", 1);
    ev.ts_ns = 1000000;
    ev.dur_ns = (int64_t)(n + 1) * 2000;
    int bad = rv_trace_push(t, &ev) < 0;
    for (size_t i = 0; i < n && !bad; i++) {
        rv_event_init(&ev);
        ev.cat = RV_CAT_KERNEL;
        ev.name = rv_strtab_intern(&t->strings, name, strlen(name));
        ev.pid = rv_strtab_intern(&t->strings, "0", 1);
        ev.tid = rv_strtab_intern(&t->strings, "7", 1);
        ev.ts_ns = 1000000 + (int64_t)i * 2000;
        ev.dur_ns = 1000;
        ev.device = 0;
        ev.stream = 7;
        bad = rv_trace_push(t, &ev) < 0;
    }
    if (bad || rv_graph_build(t, NULL, g, &err) != 0) {
        rv_trace_free(t);
        return -1;
    }
    *tr = t;
    return 0;
}

/* What a child process measured about one selector parse. */
typedef struct probe {
    int rc;
    char field[64];
    double ms;
    long rss_kb; /* growth of the high-water mark */
} probe;

/* Parses {"name": pattern} as optimizations[0].select in a child with
 * `seconds` to live and (outside sanitizer builds) 1 GiB of address space.
 * 0 and *out, or -1 when the child died (crash, alarm, memory). */
static int parse_in_child(const char *pattern_json, unsigned seconds, probe *out)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        probe p;
        memset(&p, 0, sizeof(p));
        close(fds[0]);
        alarm(seconds);
        if (!RV_SANITIZED) {
            struct rlimit rl = {(rlim_t)1 << 30, (rlim_t)1 << 30};
            setrlimit(RLIMIT_AS, &rl);
        }
        char doc[1024];
        snprintf(doc, sizeof(doc), "{\"name\":\"%s\"}", pattern_json);
        json_t *obj = json_loads(doc, 0, NULL);
        if (!obj)
            _exit(3);
        rv_select s;
        rv_error err;
        rv_error_clear(&err);
        long rss0 = maxrss_kb();
        double t0 = now_ms();
        p.rc = rv_select_parse(obj, "optimizations[0].select", &s, &err);
        p.ms = now_ms() - t0;
        p.rss_kb = maxrss_kb() - rss0;
        snprintf(p.field, sizeof(p.field), "%s", err.field);
        if (p.rc == 0)
            rv_select_clear(&s);
        json_decref(obj);
        _exit(write(fds[1], &p, sizeof(p)) == (ssize_t)sizeof(p) ? 0 : 4);
    }
    close(fds[1]);
    int st = 0;
    ssize_t got = read(fds[0], out, sizeof(*out));
    close(fds[0]);
    waitpid(pid, &st, 0);
    if (got != (ssize_t)sizeof(*out) || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "\n  child for %s died (status %d%s)\n", pattern_json, st,
                WIFSIGNALED(st) ? ", by a signal" : "");
        return -1;
    }
    return 0;
}

/* A back-reference is refused at parse time, at once, naming the field
 * (glibc took minutes per name matching this one). */
static void test_backref_refused(void)
{
    probe p;
    CU_ASSERT_EQUAL_FATAL(parse_in_child(BACKREF, 10, &p), 0);
    printf("\n    back-reference: rc %d field %s in %.3f ms", p.rc, p.field, p.ms);
    CU_ASSERT_EQUAL(p.rc, RV_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(p.field, "optimizations[0].select.name");
    CU_ASSERT(p.ms < 50 * SLOW);
    /* Named ones too. */
    CU_ASSERT_EQUAL_FATAL(parse_in_child("(?<x>a)\\\\k<x>", 10, &p), 0);
    CU_ASSERT_EQUAL(p.rc, RV_ERR_INVALID);
}

/* A nested counted repeat compiles within the memory cap or is refused,
 * in bounded time and memory (glibc regcomp took gigabytes). */
static void test_nested_repeat_bounded(void)
{
    probe p;
    CU_ASSERT_EQUAL_FATAL(parse_in_child(NESTED, 20, &p), 0);
    printf("\n    nested repeat: rc %d field %s in %.3f ms, max RSS +%ld KiB", p.rc, p.field, p.ms,
           p.rss_kb);
    CU_ASSERT(p.rc == 0 ||
              (p.rc == RV_ERR_INVALID && strcmp(p.field, "optimizations[0].select.name") == 0));
    CU_ASSERT(p.ms < 200 * SLOW);
    CU_ASSERT(p.rss_kb < 64 * 1024);
    /* Parenthesis nesting has a limit of its own. */
    char deep[256] = "";
    for (int i = 0; i < 60; i++)
        strcat(deep, "(");
    strcat(deep, "a");
    for (int i = 0; i < 60; i++)
        strcat(deep, ")");
    CU_ASSERT_EQUAL_FATAL(parse_in_child(deep, 10, &p), 0);
    CU_ASSERT_EQUAL(p.rc, RV_ERR_INVALID);
}

/* Runs doc on a clone of g; returns rv_apply's code, *ms its time. */
static int apply(const rv_graph *g, const char *doc, double *ms, rv_error *err)
{
    rv_whatif *w = NULL;
    rv_error_clear(err);
    int rc = rv_whatif_parse_text(doc, &w, err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    rv_graph *c = rv_graph_clone(g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    json_t *applied = NULL;
    double t0 = now_ms();
    rc = rv_apply(w, c, &applied, err);
    *ms = now_ms() - t0;
    json_decref(applied);
    rv_graph_free(c);
    rv_whatif_free(w);
    return rc;
}

/* (a+)+$ against aaaa...ab backtracks exponentially: the match limit
 * stops it within milliseconds, and the what-if says which field. */
static void test_pathological_match_bounded(void)
{
    char name[64];
    rv_trace *t = NULL;
    rv_graph *g = NULL;
    rv_error err;
    double ms = 0;

    memset(name, 'a', 40);
    strcpy(name + 40, "b");
    CU_ASSERT_EQUAL_FATAL(build(name, 3, &t, &g), 0);
    int rc = apply(g,
                   "{\"optimizations\":[{\"kind\":\"scale\",\"select\":{\"name\":\"(a+)+$\"},"
                   "\"factor\":0.5}]}",
                   &ms, &err);
    printf("\n    (a+)+$ on a^40 b: rc %d in %.3f ms: %s", rc, ms, err.message);
    CU_ASSERT(ms < 100 * SLOW);
    CU_ASSERT_EQUAL(rc, RV_ERR_LIMIT);
    CU_ASSERT_STRING_EQUAL(err.field, "optimizations[0].select.name");
    /* The same selector on a name it can decide matches as before. */
    rc = apply(g,
               "{\"optimizations\":[{\"kind\":\"scale\",\"select\":{\"name\":\"^a+b$\"},"
               "\"factor\":0.5}]}",
               &ms, &err);
    CU_ASSERT_EQUAL(rc, 0);
    rv_graph_free(g);
    rv_trace_free(t);
}

/* A selector over 100k tasks that share one long name costs one match,
 * not 100k: the what-if takes about as long as the scan of the tasks. */
static void test_one_match_per_name(void)
{
    char name[2048];
    rv_trace *t = NULL;
    rv_graph *g = NULL;
    rv_error err;
    double ms = 0;

    for (size_t i = 0; i + 1 < sizeof(name); i++)
        name[i] = "volta_sgemm_128x64_nn_"[i % 22];
    name[sizeof(name) - 1] = '\0';
    CU_ASSERT_EQUAL_FATAL(build(name, 100000, &t, &g), 0);
    int rc = apply(g,
                   "{\"optimizations\":[{\"kind\":\"scale\",\"select\":{\"name\":"
                   "\"(sgemm|hgemm)_[0-9]+x[0-9]+_(tn|nt)_\"},\"factor\":0.5}]}",
                   &ms, &err);
    printf("\n    100k tasks, one 2 KiB name: rc %d in %.1f ms", rc, ms);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT(ms < 50 * SLOW);
    rv_graph_free(g);
    rv_trace_free(t);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("select_limits", NULL, NULL);
    CU_add_test(s, "back-references are refused at once", test_backref_refused);
    CU_add_test(s, "nested counted repeats are bounded", test_nested_repeat_bounded);
    CU_add_test(s, "a pathological match stops at the limit", test_pathological_match_bounded);
    CU_add_test(s, "one match per distinct name", test_one_match_per_name);
    return rv_test_run() ? 1 : 0;
}
