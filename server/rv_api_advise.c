/* POST /v1/traces/{id}/advise and /v1/training-jobs/{id}/advise: the
 * engine's plan search (rv_advise.h) on a stored trace or on every stored
 * rank of a training job (rv_advise_job: each plan a job what-if). The body is {objective,
 * budget_s, max_memory, gpus, price_per_gpu_hour}, every member optional. The search runs within
 * the server's what-if budget (REVERIE_WHATIF_BUDGET_MS; a request may ask for less, never more)
 * and stops when the client goes away or the server drains; a search cut short answers what it
 * found with "complete": false. Not cached. */
#include <math.h>
#include <string.h>

#include "advise/rv_advise.h"
#include "job/rv_job.h"
#include "rv_api_internal.h"
#include "rv_metrics.h"

/* rv_advise_opts.cancel_fn for a request: its client went away. */
static int client_gone(void *r)
{
    return rv_req_client_gone(r);
}

/* Reads the body's options into *o; 0, or -1 with a 400 answered. */
static int read_opts(rv_req *r, const rv_app *a, const json_t *body, rv_advise_opts *o)
{
    static const char *const known[] = {"objective", "budget_s", "max_memory", "gpus",
                                        "price_per_gpu_hour"};
    const size_t nknown = sizeof(known) / sizeof(known[0]);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)body, key, v)
    {
        size_t k = 0;
        while (k < nknown && strcmp(key, known[k]) != 0)
            k++;
        if (k == nknown) {
            rv_req_error(r, 400, "invalid", key,
                         "unknown field %s; valid: objective, budget_s, max_memory, gpus, "
                         "price_per_gpu_hour",
                         key);
            return -1;
        }
    }
    double cap_s =
        a->cfg.whatif_budget_ms > 0 ? a->cfg.whatif_budget_ms / 1000.0 : RV_ADVISE_BUDGET_S;
    o->budget_s = cap_s;
    v = json_object_get(body, "objective");
    if (v && !json_is_null(v)) {
        o->objective = rv_advise_objective_parse(json_string_value(v));
        if (o->objective < 0) {
            rv_req_error(r, 400, "invalid", "objective", "objective is time, energy or cost");
            return -1;
        }
    }
    v = json_object_get(body, "budget_s");
    if (v && !json_is_null(v)) {
        double b = json_number_value(v);
        if (!json_is_number(v) || !(b > 0) || b > 3600) {
            rv_req_error(r, 400, "invalid", "budget_s", "budget_s is seconds in (0, 3600]");
            return -1;
        }
        /* The server's what-if budget bounds every request. */
        o->budget_s = fmin(b, cap_s);
    }
    v = json_object_get(body, "max_memory");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) <= 0) {
            rv_req_error(r, 400, "invalid", "max_memory", "max_memory is a positive byte count");
            return -1;
        }
        o->max_memory = (int64_t)json_integer_value(v);
    }
    v = json_object_get(body, "gpus");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 65536) {
            rv_req_error(r, 400, "invalid", "gpus", "gpus is an integer in [1, 65536]");
            return -1;
        }
        o->gpus = (int)json_integer_value(v);
    }
    v = json_object_get(body, "price_per_gpu_hour");
    if (v && !json_is_null(v)) {
        double p = json_number_value(v);
        if (!json_is_number(v) || !(p > 0) || p > 1e6) {
            rv_req_error(r, 400, "invalid", "price_per_gpu_hour",
                         "price_per_gpu_hour is US dollars in (0, 1e6]");
            return -1;
        }
        o->price_per_gpu_hour = p;
    }
    return 0;
}

/* The advise request of r: its body (new; NULL when answered already: no
 * body, or an option refused) and o filled with the server's budget and
 * cancellation. */
static json_t *advise_request(rv_req *r, rv_app *a, rv_advise_opts *o)
{
    json_t *body = rv_api_whatif_doc(r);
    if (!body)
        return NULL;
    if (read_opts(r, a, body, o) != 0) {
        json_decref(body);
        return NULL;
    }
    o->run_budget_ms = a->cfg.whatif_budget_ms;
    o->cancel = &a->draining;
    o->cancel_fn = client_gone;
    o->cancel_arg = r;
    return body;
}

/* Sends ans (taken) naming what it advises on (key: id). Every plan
 * searched was one simulator run. */
static void advise_answer(rv_req *r, rv_app *a, json_t *ans, const char *key, int64_t id)
{
    rv_metrics_add(a->metrics, RV_M_SIMULATIONS,
                   (uint64_t)json_integer_value(json_object_get(ans, "searched")));
    json_object_set_new(ans, key, json_integer((json_int_t)id));
    rv_req_respond_json(r, 200, ans);
}

void rv_api_trace_advise(rv_req *r, void *app)
{
    rv_app *a = app;
    int64_t id = rv_api_id_param(r, "id");
    json_t *body = NULL, *ans = NULL;
    rv_loaded l = {0};
    rv_advise_opts o = {0};
    rv_error e;

    rv_error_clear(&e);
    if (id < 0 || !(body = advise_request(r, a, &o)))
        return;
    if (rv_api_load(a, id, &l, &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    if (rv_trace_source(l.trace) == RV_SOURCE_ET) {
        rv_req_error(r, 409, "conflict", NULL,
                     "trace %lld is an execution trace alone: advise needs a measured trace",
                     (long long)id);
        goto out;
    }
    if (rv_advise(l.graph, l.base, &o, &ans, &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    advise_answer(r, a, ans, "trace_id", id);
    ans = NULL;
out:
    json_decref(ans);
    rv_api_loaded_free(&l);
    json_decref(body);
}

void rv_api_training_advise(rv_req *r, void *app)
{
    rv_app *a = app;
    int64_t id = rv_api_id_param(r, "id");
    json_t *body = NULL, *ans = NULL;
    rv_api_job jl = {0};
    rv_advise_opts o = {0};
    rv_error e;

    rv_error_clear(&e);
    if (id < 0 || !(body = advise_request(r, a, &o)))
        return;
    if (rv_api_job_load(r, a, id, &jl) != 0)
        goto out;
    /* The first rank decides the space and the memory (rv_advise.h). */
    if (rv_advise_job(jl.job, jl.l[0].graph, jl.l[0].base, &o, &ans, &e) != 0) {
        rv_req_error_rv(r, &e);
        goto out;
    }
    json_object_set_new(ans, "ranks", json_integer((json_int_t)jl.nl));
    advise_answer(r, a, ans, "training_job_id", id);
    ans = NULL;
out:
    json_decref(ans);
    rv_api_job_free(&jl);
    json_decref(body);
}
