/* Parse benchmark for the Kineto reader: parses one file N times and prints
 * one JSON line: decompressed MB/s (best run), events kept, and the peak RSS
 * of the process against the input size. Usage: bench_parse FILE [N]. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "reader/rv_kineto.h"

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE [RUNS]\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    int runs = argc > 2 ? atoi(argv[2]) : 3;
    if (runs < 1)
        runs = 1;
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "cannot stat %s\n", path);
        return 1;
    }
    /* Wall time and process CPU time: on a shared 2-core machine the CPU
     * figure is the single-core rate even when other jobs compete. */
    double best = 1e30, total = 0, best_cpu = 1e30;
    size_t input = 0, events = 0, skipped = 0;
    for (int i = 0; i < runs; i++) {
        rv_trace *t = NULL;
        rv_error e;
        double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        int rc = rv_kineto_read_file(path, NULL, &t, &e);
        double dt = clock_s(CLOCK_MONOTONIC) - t0;
        double dc = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (dc < best_cpu)
            best_cpu = dc;
        if (rc != 0) {
            fprintf(stderr, "%s: %s: %s\n", path, rv_err_name(rc), e.message);
            return 1;
        }
        input = t->input_bytes;
        events = t->nevents;
        skipped = t->skipped_events;
        rv_trace_free(t);
        total += dt;
        if (dt < best)
            best = dt;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss_mb = (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is KiB on Linux */
    printf("{\"file\": \"%s\", \"file_bytes\": %lld, \"input_bytes\": %zu, \"events_kept\": %zu, "
           "\"events_skipped\": %zu, \"runs\": %d, \"best_s\": %.4f, \"mean_s\": %.4f, "
           "\"mb_per_s\": %.1f, \"mb_per_cpu_s\": %.1f, \"peak_rss_mb\": %.1f, "
           "\"rss_per_input\": %.3f}\n",
           path, (long long)st.st_size, input, events, skipped, runs, best, total / runs,
           (double)input / best / 1e6, (double)input / best_cpu / 1e6, rss_mb,
           rss_mb * 1048576.0 / (double)(input ? input : 1));
    return 0;
}
