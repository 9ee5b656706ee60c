/* Daydream's generic primitives (section 4.4): scale, remove, insert, and
 * CPU speed. */
#include <math.h>
#include <stdlib.h>

#include "models/rv_apply.h"
#include "models/rv_models.h"

static json_t *report(const char *model, const rv_opt *o)
{
    return json_pack("{s:s, s:i}", "model", model, "index", o->index);
}

static int scale(const rv_opt *o, rv_graph *g, json_t *applied)
{
    size_t n = 0;
    int64_t before = 0, after = 0;
    for (size_t i = 0; i < g->ntasks; i++) {
        rv_task *t = &g->tasks[i];
        if (i % RV_STOP_EVERY == 0 && rv_stop_check(g->stop, NULL) != 0)
            return RV_ERR_BUDGET;
        if ((t->flags & RV_TF_REMOVED) || !rv_select_match(&o->sel, g, i))
            continue;
        before += t->dur_ns;
        t->dur_ns = (int64_t)llround((double)t->dur_ns * o->factor);
        after += t->dur_ns;
        n++;
    }
    json_t *r = report("scale", o);
    json_object_set_new(r, "factor", json_real(o->factor));
    json_object_set_new(r, "tasks_scaled", json_integer((json_int_t)n));
    json_object_set_new(r, "busy_us_before", json_real((double)before / 1e3));
    json_object_set_new(r, "busy_us_after", json_real((double)after / 1e3));
    return json_array_append_new(applied, r) ? RV_ERR_NOMEM : 0;
}

static int remove_tasks(const rv_opt *o, rv_graph *g, json_t *applied)
{
    size_t n = 0, nl = 0;
    uint8_t *hit = calloc(g->ntasks + 1, 1);
    if (!hit)
        return RV_ERR_NOMEM;
    for (size_t i = 0; i < g->ntasks; i++) {
        if (i % RV_STOP_EVERY == 0 && rv_stop_check(g->stop, NULL) != 0) {
            free(hit);
            return RV_ERR_BUDGET;
        }
        if (!(g->tasks[i].flags & RV_TF_REMOVED) && rv_select_match(&o->sel, g, i))
            hit[i] = 1;
    }
    for (size_t i = 0; i < g->ntasks; i++) {
        if (!hit[i])
            continue;
        rv_task *t = &g->tasks[i];
        int32_t l = t->launch;
        /* A selected task goes with its gap; a kernel's launching call goes
         * too but keeps its gap, the CPU work that is not the launch. */
        rv_models__remove(g, (int32_t)i, 0);
        n++;
        if (o->remove_launches && l >= 0 && !(g->tasks[l].flags & RV_TF_REMOVED)) {
            rv_models__remove(g, l, 1);
            nl++;
        }
    }
    free(hit);
    json_t *r = report("remove", o);
    json_object_set_new(r, "tasks_removed", json_integer((json_int_t)n));
    json_object_set_new(r, "launches_removed", json_integer((json_int_t)nl));
    return json_array_append_new(applied, r) ? RV_ERR_NOMEM : 0;
}

static int cpu_speed(const rv_opt *o, rv_graph *g, json_t *applied)
{
    size_t n = 0;
    for (size_t i = 0; i < g->ntasks; i++) {
        rv_task *t = &g->tasks[i];
        if (t->kind != RV_TASK_CPU || (t->flags & RV_TF_REMOVED))
            continue;
        /* The blocking part of a synchronizing call is GPU time, not CPU
         * work; only its own overhead would scale, and the simulator
         * re-times the wait anyway. */
        t->dur_ns = rv_models__scaled_ns(t->dur_ns, 1.0 / o->factor);
        t->gap_ns = rv_models__scaled_ns(t->gap_ns, 1.0 / o->factor);
        t->gap_dl_ns = rv_models__scaled_ns(t->gap_dl_ns, 1.0 / o->factor);
        if (t->gap_dl_ns > t->gap_ns)
            t->gap_dl_ns = t->gap_ns;
        n++;
    }
    json_t *r = report("cpu_speed", o);
    json_object_set_new(r, "factor", json_real(o->factor));
    json_object_set_new(r, "tasks_scaled", json_integer((json_int_t)n));
    return json_array_append_new(applied, r) ? RV_ERR_NOMEM : 0;
}

/* Inserted work runs right after its anchor and before the anchor's
 * successor on the anchor's thread. CPU work extends the anchor's gap (the
 * thread is busy longer); GPU work goes on a side thread that mirrors the
 * anchor's stream, with edges anchor -> new -> successor. */
int rv_models__insert_after(rv_graph *g, int32_t anchor, const int32_t *next, int64_t dur_ns,
                            int sel_kind, int32_t *side_of_thread)
{
    rv_task *a = &g->tasks[anchor];
    if (sel_kind == RV_SEL_CPU) {
        a->gap_ns += dur_ns;
        return 0;
    }
    int32_t th = a->thread;
    int32_t side = side_of_thread ? side_of_thread[th] : -1;
    if (side < 0) {
        rv_thread nt = g->threads[th];
        nt.first = nt.last = -1;
        nt.norig = 0;
        if (nt.kind == RV_THREAD_CPU)
            nt.kind = RV_THREAD_GPU;
        side = rv_graph_add_thread(g, &nt);
        if (side < 0)
            return side;
        if (side_of_thread)
            side_of_thread[th] = side;
    }
    rv_task t = {0};
    t.dur_ns = dur_ns;
    t.meas_start_ns = -1;
    t.bytes = -1;
    t.event = -1;
    t.launch = -1;
    t.iteration = g->tasks[anchor].iteration;
    t.layer = g->tasks[anchor].layer;
    t.op = g->tasks[anchor].op;
    t.phase = g->tasks[anchor].phase;
    t.kind = RV_TASK_GPU;
    t.cat = sel_kind == RV_SEL_MEMCPY ? RV_CAT_MEMCPY : RV_CAT_KERNEL;
    t.flags = RV_TF_INSERTED;
    int32_t succ = next ? next[anchor] : -1;
    int64_t id = rv_graph_append_task(g, side, &t);
    if (id < 0)
        return (int)id;
    int rc = rv_graph_add_edge(g, anchor, (int32_t)id, 0, RV_EDGE_OTHER, 0);
    if (!rc && succ >= 0)
        rc = rv_graph_add_edge(g, (int32_t)id, succ, 0, RV_EDGE_OTHER, 0);
    return rc ? rc : (int)0;
}

/* The tasks o selects, marked in hit (n0 bytes); their count, or a
 * negative rv_err (the stop said stop: err filled). */
static int64_t insert_anchors(const rv_opt *o, rv_graph *g, size_t n0, uint8_t *hit, rv_error *err)
{
    int64_t n = 0;
    for (size_t i = 0; i < n0; i++) {
        int rc;
        if (i % RV_STOP_EVERY == 0 && (rc = rv_stop_check(g->stop, err)) != 0)
            return rc;
        hit[i] = !(g->tasks[i].flags & RV_TF_REMOVED) && rv_select_match(&o->sel, g, i);
        n += hit[i];
    }
    return n;
}

/* One insert runs after every task its selector matches, and matches
 * count the tasks earlier inserts added: 256 inserts after {} doubled the
 * graph 256 times. The matches are counted first and a count past
 * RV_MODELS_MAX_INSERT, or past what the what-if may still add, is
 * refused before anything is allocated. */
static int insert(const rv_opt *o, rv_graph *g, json_t *applied, rv_error *err)
{
    int rc = 0;
    size_t n0 = g->ntasks, n = 0;
    uint8_t *hit = calloc(n0 + 1, 1);
    int32_t *next = NULL, *side = NULL;
    int64_t launch = 0;
    if (!hit)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    int64_t want = insert_anchors(o, g, n0, hit, err);
    if (want < 0) {
        rc = (int)want;
        goto out;
    }
    size_t room = g->max_tasks > n0 ? g->max_tasks - n0 : RV_MODELS_MAX_INSERT;
    if (o->insert_kind != RV_SEL_CPU &&
        ((size_t)want > RV_MODELS_MAX_INSERT || (size_t)want > room)) {
        char field[48];
        snprintf(field, sizeof(field), "optimizations[%d].after", o->index);
        rc = rv_error_field(err, RV_ERR_LIMIT, field,
                            "%s matches %lld tasks: over the limit of %zu inserted tasks per "
                            "optimization, or of the %zu the what-if may still add (of %zu); "
                            "narrow the selector",
                            field, (long long)want, (size_t)RV_MODELS_MAX_INSERT, room,
                            (size_t)RV_APPLY_MAX_NEW_TASKS);
        goto out;
    }
    next = rv_models__thread_next(g);
    side = malloc((g->nthreads + 1) * sizeof(int32_t));
    launch = rv_models__launch_ns(g);
    if (!next || !side) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    for (size_t t = 0; t < g->nthreads; t++)
        side[t] = -1;
    int64_t dur = (int64_t)llround(o->dur_us * 1e3);
    for (size_t i = 0; i < n0; i++) {
        if (!hit[i])
            continue;
        if (n % RV_STOP_EVERY == 0 && (rc = rv_stop_check(g->stop, err)) != 0)
            goto out;
        if ((rc = rv_models__insert_after(g, (int32_t)i, next, dur, o->insert_kind, side)) != 0) {
            rv_error_set(err, rc, -1, -1, "optimizations[%d]: %s", o->index, rv_err_name(rc));
            goto out;
        }
        /* A new kernel needs a launch: the anchor's launching call (or the
         * anchor itself when it is a CPU call) stays busy one launch longer. */
        if (o->insert_kind != RV_SEL_CPU) {
            int32_t l = g->tasks[i].kind == RV_TASK_CPU ? (int32_t)i : g->tasks[i].launch;
            if (l >= 0)
                g->tasks[l].gap_ns += launch;
        }
        n++;
    }
    json_t *r = report("insert", o);
    json_object_set_new(r, "tasks_inserted", json_integer((json_int_t)n));
    json_object_set_new(r, "duration_us", json_real(o->dur_us));
    json_object_set_new(r, "launch_us", json_real((double)launch / 1e3));
    if (json_array_append_new(applied, r))
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
out:
    free(hit);
    free(next);
    free(side);
    return rc;
}

int rv_models__generic(const struct rv_whatif *w, const rv_opt *o, rv_graph *g, json_t *applied,
                       rv_error *err)
{
    int rc;
    switch (o->kind) {
    case RV_OPT_SCALE: rc = scale(o, g, applied); break;
    case RV_OPT_REMOVE: rc = remove_tasks(o, g, applied); break;
    case RV_OPT_INSERT: return insert(o, g, applied, err);
    case RV_OPT_CPU_SPEED: rc = cpu_speed(o, g, applied); break;
    default: rc = RV_ERR_INTERNAL; break;
    }
    /* The stop's own message says why. */
    if (rc == RV_ERR_BUDGET && rv_stop_check(g->stop, err) != 0)
        return rc;
    if (rc)
        return rv_error_set(err, rc, -1, -1, "optimizations[%d]: %s", o->index, rv_err_name(rc));
    return 0;
}
