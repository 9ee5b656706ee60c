/* A distributed job as one global graph. See rv_job.h. */
#include "rv_job.h"

#include <stdlib.h>

struct rv_job {
    size_t n;
};
struct rv_job_result {
    rv_run_summary sum;
};

int rv_job_build(const rv_job_rank *ranks, size_t n, rv_job **out, rv_error *err)
{
    (void)ranks;
    (void)n;
    *out = NULL;
    return rv_error_set(err, RV_ERR_UNSUPPORTED, -1, -1, "jobs are not implemented yet");
}

int rv_job_run(const rv_job *job, const rv_whatif *w, const rv_run_opts *opts, rv_job_result **out,
               rv_error *err)
{
    (void)job;
    (void)w;
    (void)opts;
    *out = NULL;
    return rv_error_set(err, RV_ERR_UNSUPPORTED, -1, -1, "jobs are not implemented yet");
}

json_t *rv_job_render(const rv_job_result *r, const char *label)
{
    (void)r;
    (void)label;
    return json_object();
}

size_t rv_job_nranks(const rv_job *job)
{
    return job ? job->n : 0;
}
int rv_job_world_size(const rv_job *job)
{
    return job ? (int)job->n : 0;
}
double rv_job_clock_offset_us(const rv_job *job, size_t i)
{
    (void)job;
    (void)i;
    return 0;
}
const rv_run_summary *rv_job_result_summary(const rv_job_result *r)
{
    return r ? &r->sum : NULL;
}
int rv_job_graphs_form_job(const rv_graph *const *graphs, size_t n)
{
    (void)graphs;
    (void)n;
    return 0;
}
void rv_job_free(rv_job *job)
{
    free(job);
}
void rv_job_result_free(rv_job_result *r)
{
    free(r);
}
