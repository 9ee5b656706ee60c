/* libreverie-collector.so: the CUPTI injection entry point and its threads.
 *
 * Threads and what they may do:
 * - the application's threads: run CUDA; we only touch an atomic flag from
 *   the SIGUSR2 handler;
 * - CUPTI's buffer threads: hand out buffers (request) and parse completed
 *   ones into record sets (complete) without holding our lock, then take
 *   the lock briefly to append the set and feed step ranges to the window;
 * - "housekeeping": polls triggers, flushes CUPTI periodically so step
 *   ranges arrive, and when a window completes disables the activity kinds,
 *   force-flushes, writes the trace and spools or saves it;
 * - "uploader": sends spooled traces with libcurl.
 * No lock is held across a CUPTI call, network I/O or file I/O. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#include "rv_ktrace.h"
#include "rv_meta.h"
#include "rv_records.h"
#include "rv_spool.h"
#include "rv_upload.h"
#include "rv_window.h"

#define MAX_OPEN_STEPS 64

typedef struct open_step {
    uint32_t id;
    uint64_t start;
} open_step;

static struct collector {
    pthread_mutex_t mu;
    pthread_cond_t cv;   /* housekeeping wake-up */
    pthread_cond_t upcv; /* uploader wake-up */
    int pid;
    int running; /* threads started */
    int stopping;
    int finish;    /* the window is done (or the cap hit): write now */
    int capturing; /* activity kinds enabled, sets are kept */
    int upload_work, upload_busy;
    int hk_done; /* housekeeping has shipped its last capture */
    rv_window win;
    rv_recset *head, *tail;
    uint64_t nrecs, max_recs;
    open_step open[MAX_OPEN_STEPS];
    int nopen;
    uint64_t cap_dropped;
    int captures;
    rv_meta meta;
    rv_clock_triple arm_clock;
    pthread_t hk, up;
    int up_started;
    /* configuration */
    size_t buf_size, buf_max;
    unsigned flush_ms;
    const char *output; /* REVERIE_OUTPUT */
    const char *spool;
    const char *trigger_file;
    rv_upload_opts upload;
    CUpti_SubscriberHandle sub;
} G = {.mu = PTHREAD_MUTEX_INITIALIZER,
       .cv = PTHREAD_COND_INITIALIZER,
       .upcv = PTHREAD_COND_INITIALIZER};

static atomic_size_t g_outstanding; /* buffers CUPTI holds */
static atomic_ullong g_dropped;     /* CUPTI's dropped-record count */
static atomic_ullong g_rejected;    /* buffers we refused (cap) */
static atomic_int g_collecting;     /* parse completed buffers? */
static volatile sig_atomic_t g_sigusr2;

__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "reverie-collector: %s\n", line);
}

static const char *cupti_err(CUptiResult r)
{
    const char *s = NULL;
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
        return "unknown CUPTI error";
    return s;
}

static uint64_t cupti_now(void)
{
    uint64_t ts = 0;
    if (cuptiGetTimestamp(&ts) != CUPTI_SUCCESS) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        ts = (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
    }
    return ts;
}

/* --- CUPTI buffers ---------------------------------------------------------- */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *max_records = 0;
    size_t n = atomic_fetch_add(&g_outstanding, 1) + 1;
    /* Refusing with NULL is safe from CUPTI API v27 on (CUDA 12.9), and this
     * file requires CUDA 13. CUPTI counts what it then drops. */
    if (n * G.buf_size > G.buf_max) {
        atomic_fetch_sub(&g_outstanding, 1);
        atomic_fetch_add(&g_rejected, 1);
        *buffer = NULL;
        *size = 0;
        return;
    }
    *buffer = aligned_alloc(8, G.buf_size);
    *size = *buffer ? G.buf_size : 0;
    if (!*buffer)
        atomic_fetch_sub(&g_outstanding, 1);
}

static void set_span(const rv_recset *s, uint64_t *lo, uint64_t *hi)
{
    const rv_rec *r = rv_recset_recs(s);
    *lo = UINT64_MAX;
    *hi = 0;
    for (size_t i = 0; i < s->recs.n; i++) {
        if (r[i].start && r[i].start < *lo)
            *lo = r[i].start;
        if (r[i].end > *hi)
            *hi = r[i].end;
    }
}

/* Under G.mu: feed the set's NVTX step ranges to the window. */
static void feed_steps(const rv_recset *s, uint64_t *warmup_end)
{
    const rv_rec *r = rv_recset_recs(s);
    for (size_t i = 0; i < s->recs.n; i++) {
        if (r[i].kind == RV_REC_MARKER_START) {
            if (G.nopen < MAX_OPEN_STEPS &&
                rv_window_is_step(&G.win, rv_recset_str(s, r[i].name))) {
                G.open[G.nopen].id = r[i].aux;
                G.open[G.nopen].start = r[i].start;
                G.nopen++;
            }
        } else if (r[i].kind == RV_REC_MARKER_END) {
            for (int k = 0; k < G.nopen; k++) {
                if (G.open[k].id != r[i].aux)
                    continue;
                uint64_t start = G.open[k].start;
                G.open[k] = G.open[--G.nopen];
                int was_warmup = G.win.state == RV_WIN_WARMUP;
                if (rv_window_on_step(&G.win, start, r[i].start))
                    G.finish = 1;
                if (was_warmup && G.win.state == RV_WIN_WARMUP)
                    *warmup_end = r[i].start;
                break;
            }
        }
    }
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                                      size_t valid)
{
    rv_recset *s = NULL, *freed = NULL;
    size_t dropped = 0;
    if (buf && valid && atomic_load(&g_collecting)) {
        s = rv_recset_new();
        if (s && rv_records_parse_buffer(s, buf, valid) < 0 && s->recs.n == 0) {
            rv_recset_free(s);
            s = NULL;
        }
    }
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
        atomic_fetch_add(&g_dropped, dropped);
    if (buf) {
        free(buf);
        atomic_fetch_sub(&g_outstanding, 1);
    }
    if (!s)
        return;

    uint64_t lo, hi, warmup_end = 0;
    set_span(s, &lo, &hi);
    pthread_mutex_lock(&G.mu);
    if (!G.capturing) {
        freed = s;
    } else {
        feed_steps(s, &warmup_end);
        if (G.nrecs + s->recs.n > G.max_recs) {
            /* Full: keep what we have and write it rather than drop silently. */
            G.cap_dropped += s->recs.n;
            freed = s;
            G.finish = 1;
        } else {
            G.nrecs += s->recs.n;
            if (G.tail)
                G.tail->next = s;
            else
                G.head = s;
            G.tail = s;
        }
        /* During warm-up, sets that ended before the last warm-up step ended
         * cannot hold anything of the window: release them now. */
        if (warmup_end) {
            rv_recset **pp = &G.head, *keep_tail = NULL;
            while (*pp) {
                rv_recset *x = *pp;
                uint64_t xl, xh;
                set_span(x, &xl, &xh);
                if (xh && xh < warmup_end) {
                    *pp = x->next;
                    G.nrecs -= x->recs.n;
                    x->next = freed;
                    freed = x;
                } else {
                    keep_tail = x;
                    pp = &x->next;
                }
            }
            G.tail = keep_tail;
        }
        if (G.finish)
            pthread_cond_signal(&G.cv);
    }
    pthread_mutex_unlock(&G.mu);
    rv_recset_free_list(freed);
}

/* --- activity kinds ---------------------------------------------------------- */

static const CUpti_ActivityKind KINDS[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, /* first: see ENGINEERING.md §5 */
    CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_CUDA_EVENT,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    CUPTI_ACTIVITY_KIND_OVERHEAD,
    CUPTI_ACTIVITY_KIND_MARKER,
    CUPTI_ACTIVITY_KIND_DEVICE,
};
#define NKINDS (sizeof(KINDS) / sizeof(KINDS[0]))

static int enable_kinds(void)
{
    int ok = 0;
    for (size_t i = 0; i < NKINDS; i++) {
        CUptiResult r = cuptiActivityEnable(KINDS[i]);
        if (r == CUPTI_SUCCESS)
            ok++;
        else if (G.captures == 0)
            say("cannot enable activity kind %d: %s", (int)KINDS[i], cupti_err(r));
    }
    /* Calls that run thousands of times per step and carry no timing value. */
    static const CUpti_CallbackId noisy[] = {
        CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000,
        CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetAttribute_v5000,
    };
    for (size_t i = 0; i < sizeof(noisy) / sizeof(noisy[0]); i++)
        cuptiActivityEnableRuntimeApi(noisy[i], 0);
    return ok;
}

static void disable_kinds(void)
{
    for (size_t i = 0; i < NKINDS; i++)
        cuptiActivityDisable(KINDS[i]);
}

/* --- writing a finished capture --------------------------------------------- */

static void expand_output(const char *pattern, char *out, size_t cap)
{
    size_t j = 0;
    for (const char *p = pattern; *p && j + 24 < cap; p++) {
        if (p[0] == '%' && p[1]) {
            p++;
            if (*p == 'p')
                j += (size_t)snprintf(out + j, cap - j, "%d", G.pid);
            else if (*p == 'r')
                j += (size_t)snprintf(out + j, cap - j, "%d", G.meta.rank < 0 ? 0 : G.meta.rank);
            else if (*p == 'n')
                j += (size_t)snprintf(out + j, cap - j, "%d", G.captures);
            else
                out[j++] = *p;
        } else {
            out[j++] = *p;
        }
    }
    out[j] = '\0';
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Housekeeping thread, no lock held: ship one finished capture. */
static void ship(rv_recset *sets, uint64_t t0, uint64_t t1, int steps)
{
    uint8_t *data = NULL;
    size_t len = 0;
    rv_error err;
    rv_ktrace_stats st;
    char desc[320], path[4096];
    rv_ktrace_opts o = {.t0 = t0, .t1 = t1};
    rv_meta_clock_now(&G.meta.end);
    G.meta.end.cupti_ns = cupti_now();
    G.meta.start = G.arm_clock;
    G.meta.dropped_records = atomic_load(&g_dropped) + G.cap_dropped;
    snprintf(desc, sizeof(desc), "%d steps matching '%s' after %d skipped%s", steps,
             G.win.cfg.step_glob, G.win.cfg.skip, G.win.cfg.duration_s > 0 ? " (time window)" : "");
    o.window_desc = desc;
    if (G.output)
        expand_output(G.output, path, sizeof(path));
    o.plain = G.output && ends_with(path, ".json");
    if (rv_ktrace_write(sets, &G.meta, &o, &data, &len, &st, &err) < 0) {
        say("cannot write the trace: %s", err.message);
        return;
    }
    if (st.events == st.overheads + 1) { /* only the process_name record */
        say("the capture holds no CUDA activity; nothing written");
        free(data);
        return;
    }
    if (G.output) {
        if (rv_spool_write_file(path, data, len, &err) < 0)
            say("cannot save the trace: %s", err.message);
        else
            say("wrote %s (%zu kernels, %zu events, %zu bytes)", path, st.kernels, st.events, len);
        free(data);
        return;
    }
    if (rv_spool_write(G.spool, G.meta.job, G.meta.rank, data, len, path, sizeof(path), &err) < 0) {
        say("cannot spool the trace (%s); it is lost", err.message);
        free(data);
        return;
    }
    free(data);
    if (!G.upload.server || !*G.upload.server) {
        say("REVERIE_SERVER is not set; trace kept in %s (%zu kernels); send it with "
            "`reverie upload --spool %s`",
            path, st.kernels, G.spool);
        return;
    }
    pthread_mutex_lock(&G.mu);
    G.upload_work = 1;
    pthread_cond_signal(&G.upcv);
    pthread_mutex_unlock(&G.mu);
}

/* Housekeeping thread: end the capture and ship it. */
static void finish_capture(int at_exit)
{
    rv_recset *sets;
    uint64_t t0, t1;
    int steps;
    disable_kinds();
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    uint64_t now = cupti_now();
    pthread_mutex_lock(&G.mu);
    if (rv_window_active(&G.win))
        rv_window_close(&G.win, now);
    sets = G.head;
    G.head = G.tail = NULL;
    G.nrecs = 0;
    G.nopen = 0;
    G.capturing = 0;
    G.finish = 0;
    atomic_store(&g_collecting, 0);
    t0 = G.win.t0;
    t1 = G.win.t1;
    steps = G.win.steps_kept;
    G.captures++;
    pthread_mutex_unlock(&G.mu);
    if (at_exit && !sets)
        return;
    ship(sets, t1 ? t0 : 0, t1, steps);
    rv_recset_free_list(sets);
}

static void start_capture(void)
{
    rv_meta_clock_now(&G.arm_clock);
    G.arm_clock.cupti_ns = cupti_now();
    pthread_mutex_lock(&G.mu);
    G.capturing = 1;
    atomic_store(&g_collecting, 1);
    pthread_mutex_unlock(&G.mu);
    enable_kinds();
}

static void *housekeeping(void *arg)
{
    (void)arg;
    unsigned since_flush = 0;
    int gpu_meta = 0;
    pthread_mutex_lock(&G.mu);
    while (!G.stopping) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += 100 * 1000000L;
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
        if (!G.finish)
            pthread_cond_timedwait(&G.cv, &G.mu, &dl);
        if (G.stopping)
            break;
        int finish = G.finish, triggered = 0, active = G.capturing;
        if (!gpu_meta) {
            pthread_mutex_unlock(&G.mu);
            rv_meta_collect_gpu(&G.meta); /* NVML, once, outside cuInit */
            gpu_meta = 1;
            pthread_mutex_lock(&G.mu);
        }
        if (g_sigusr2) {
            g_sigusr2 = 0;
            triggered = 1;
        }
        pthread_mutex_unlock(&G.mu);

        if (G.trigger_file && access(G.trigger_file, F_OK) == 0) {
            unlink(G.trigger_file);
            triggered = 1;
        }
        uint64_t now = cupti_now(); /* never call CUPTI with G.mu held */
        if (triggered && !active && !finish) {
            pthread_mutex_lock(&G.mu);
            int armed = rv_window_trigger(&G.win, now);
            pthread_mutex_unlock(&G.mu);
            if (armed) {
                say("capture triggered");
                start_capture();
            }
        }
        if (active && !finish) {
            pthread_mutex_lock(&G.mu);
            if (rv_window_on_tick(&G.win, now))
                G.finish = finish = 1;
            pthread_mutex_unlock(&G.mu);
        }
        if (finish) {
            finish_capture(0);
            since_flush = 0;
        } else if (active && (since_flush += 100) >= G.flush_ms) {
            /* Deliver completed buffers so step ranges reach the window. */
            cuptiActivityFlushAll(0);
            since_flush = 0;
        }
        pthread_mutex_lock(&G.mu);
    }
    int active = G.capturing;
    pthread_mutex_unlock(&G.mu);
    if (active)
        finish_capture(1);
    pthread_mutex_lock(&G.mu);
    G.hk_done = 1;
    pthread_cond_broadcast(&G.upcv);
    pthread_mutex_unlock(&G.mu);
    return NULL;
}

static void *uploader(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&G.mu);
    for (;;) {
        while (!G.upload_work && !(G.stopping && G.hk_done))
            pthread_cond_wait(&G.upcv, &G.mu);
        if (!G.upload_work)
            break;
        G.upload_work = 0;
        G.upload_busy = 1;
        pthread_mutex_unlock(&G.mu);
        rv_spool_result res;
        rv_error err;
        rv_error_clear(&err);
        if (rv_spool_send_all(G.spool, &G.upload, &res, &err) < 0)
            say("%d trace(s) stay in %s for later: %s", res.failed, G.spool, err.message);
        else if (res.sent)
            say("uploaded %d trace(s) to %s", res.sent, G.upload.server);
        pthread_mutex_lock(&G.mu);
        G.upload_busy = 0;
        pthread_cond_broadcast(&G.upcv);
    }
    pthread_mutex_unlock(&G.mu);
    return NULL;
}

/* --- lifecycle -------------------------------------------------------------- */

static void on_sigusr2(int sig)
{
    (void)sig;
    g_sigusr2 = 1;
}

static void after_fork_child(void)
{
    /* Our threads do not exist in a forked child; never touch them there. */
    G.running = 0;
}

static void at_exit(void)
{
    if (!G.running || getpid() != G.pid)
        return;
    pthread_mutex_lock(&G.mu);
    G.stopping = 1;
    pthread_cond_broadcast(&G.cv);
    pthread_mutex_unlock(&G.mu);
    pthread_join(G.hk, NULL);
    if (!G.up_started)
        return;
    /* Give the uploader a bounded time; what it does not send stays spooled. */
    const char *w = getenv("REVERIE_EXIT_WAIT_S");
    int wait_s = w && atoi(w) >= 0 ? atoi(w) : 30;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += wait_s;
    pthread_mutex_lock(&G.mu);
    pthread_cond_broadcast(&G.upcv);
    int rc = 0;
    while ((G.upload_work || G.upload_busy) && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&G.upcv, &G.mu, &dl);
    pthread_mutex_unlock(&G.mu);
    if (rc == ETIMEDOUT)
        say("upload still running at exit; the trace stays in %s", G.spool);
    else
        pthread_join(G.up, NULL);
}

static int start_thread(pthread_t *t, void *(*fn)(void *))
{
    sigset_t all, old;
    /* Our threads take no signals: SIGUSR2 and friends go to the job's threads,
     * and a SIGPIPE raised on an upload socket stays pending here. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(t, NULL, fn, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

static size_t env_size(const char *name, size_t dflt, size_t lo, size_t hi)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end || x < lo || x > hi) {
        say("ignoring %s=%s (expected %zu..%zu)", name, v, lo, hi);
        return dflt;
    }
    return (size_t)x;
}

static void CUPTIAPI no_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                                 const void *data)
{
    (void)ud;
    (void)dom;
    (void)cbid;
    (void)data;
}

static int init(void)
{
    char msg[256];
    rv_window_cfg wcfg;
    CUptiResult r;
    const char *off = getenv("REVERIE_DISABLE");
    if (off && strcmp(off, "1") == 0)
        return 0;

    G.pid = (int)getpid();
    if (rv_window_cfg_from_env(&wcfg, msg, sizeof(msg)) < 0)
        say("%s", msg);
    G.buf_size = env_size("REVERIE_BUFFER_MB", 8, 1, 64) << 20;
    G.buf_max = env_size("REVERIE_MAX_BUFFER_MB", 256, 8, 65536) << 20;
    G.max_recs = env_size("REVERIE_MAX_RECORDS", 2u << 20, 1000, (size_t)1 << 30);
    G.flush_ms = (unsigned)env_size("REVERIE_FLUSH_MS", 1000, 100, 600000);
    G.output = getenv("REVERIE_OUTPUT");
    if (G.output && !*G.output)
        G.output = NULL;
    G.spool = rv_spool_dir_from_env();
    G.trigger_file = getenv("REVERIE_TRIGGER_FILE");
    if (G.trigger_file && !*G.trigger_file)
        G.trigger_file = NULL;
    rv_upload_opts_from_env(&G.upload);
    G.upload.quiet = 1;
    rv_meta_collect_host(&G.meta);

    /* One subscriber per process: back off when Nsight or torch.profiler
     * already has CUPTI, and keep them from silently taking our buffers. */
    r = cuptiSubscribe(&G.sub, no_callback, NULL);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        say("CUPTI is busy with another subscriber (Nsight, torch.profiler?); not collecting");
        return 0;
    }
    if (r != CUPTI_SUCCESS) {
        say("CUPTI is unavailable (%s); not collecting", cupti_err(r));
        return 0;
    }
    cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) {
        say("cuptiActivityRegisterCallbacks failed (%s); not collecting", cupti_err(r));
        cuptiUnsubscribe(G.sub);
        return 0;
    }
    cuptiActivityEnableAllSyncRecords(1);
    cuptiActivityEnableCudaEventDeviceTimestamps(1);
    if (!getenv("NVTX_INJECTION64_PATH"))
        say("NVTX_INJECTION64_PATH is not set, so NVTX ranges (steps, layers) are not "
            "recorded; set it to the path of libcupti.so");

    rv_window_init(&G.win, &wcfg, cupti_now());
    if (rv_window_active(&G.win))
        start_capture();

    struct sigaction old;
    if (sigaction(SIGUSR2, NULL, &old) == 0 && old.sa_handler == SIG_DFL &&
        !(old.sa_flags & SA_SIGINFO)) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_sigusr2;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGUSR2, &sa, NULL);
    }
    if (start_thread(&G.hk, housekeeping) != 0) {
        say("cannot start a thread; not collecting");
        disable_kinds();
        return 0;
    }
    G.running = 1;
    if (!G.output && G.upload.server && *G.upload.server) {
        /* Traces an earlier run left behind go out first. */
        G.upload_work = 1;
        if (!rv_upload_available())
            say("built without libcurl: traces stay in %s", G.spool);
        else if (start_thread(&G.up, uploader) == 0)
            G.up_started = 1;
    }
    pthread_atfork(NULL, NULL, after_fork_child);
    atexit(at_exit);
    say("collecting (%s), output: %s", wcfg.wait_trigger ? "waiting for a trigger" : "armed",
        G.output ? G.output : (G.upload.server ? G.upload.server : G.spool));
    return 0;
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_once(void)
{
    init();
}

/* Called by the CUDA driver when CUDA_INJECTION64_PATH names this library.
 * Returns 1 in every case: a collector problem must never stop the job. */
__attribute__((visibility("default"))) int InitializeInjection(void)
{
    pthread_once(&g_once, init_once);
    return 1;
}
