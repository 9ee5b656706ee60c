#include "graph/rv_select.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "graph/rv_layers.h"
#include "hw/rv_hw.h"

static const char *const sel_kind_names[] = {"kernel", "cpu", "memcpy", "comm", "data"};

/* Match cache states, one byte per string id. */
enum { RE_UNKNOWN = 0, RE_YES, RE_NO };

/* One compiled pattern, its allocator's account and its match cache. */
struct rv_select_re {
    /* PCRE2 allocates through alloc_cb/free_cb below, counted against cap:
     * RV_SELECT_COMPILE_BYTES while compiling, then the compiled pattern
     * plus one match's heap. */
    size_t live, cap;
    pcre2_general_context *gctx;
    pcre2_code *code;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    char field[64]; /* "optimizations[2].select.name" */
    /* The cache: state[id] for string ids of the table it was filled on. */
    const rv_strtab *tab;
    const char *tab_data;
    const uint32_t *tab_offsets;
    uint8_t *state;
    size_t nstate;
    size_t matched; /* pcre2_match calls since the last rv_select_finish */
    const rv_stop *stop;
    int failed;           /* 0, or the rv_err that makes every match fail */
    char failed_name[48]; /* the start of the name that hit a limit */
};

/* Size header before each block, so that frees can be counted. */
#define HDR 16

static void *alloc_cb(size_t n, void *ud)
{
    struct rv_select_re *re = ud;
    if (n > re->cap || re->live > re->cap - n)
        return NULL;
    unsigned char *p = malloc(n + HDR);
    if (!p)
        return NULL;
    memcpy(p, &n, sizeof(n));
    re->live += n;
    return p + HDR;
}

static void free_cb(void *ptr, void *ud)
{
    struct rv_select_re *re = ud;
    size_t n;
    if (!ptr)
        return;
    unsigned char *p = (unsigned char *)ptr - HDR;
    memcpy(&n, p, sizeof(n));
    re->live -= n;
    free(p);
}

static void re_free(struct rv_select_re *re)
{
    if (!re)
        return;
    pcre2_match_data_free(re->md);
    pcre2_match_context_free(re->mctx);
    pcre2_code_free(re->code);
    pcre2_general_context_free(re->gctx);
    free(re->state);
    free(re);
}

static int compile(const json_t *v, const char *field, const char *member,
                   struct rv_select_re **out, rv_error *err)
{
    char f[64];
    int rc = 0, ec = 0;
    PCRE2_SIZE eoff = 0;
    pcre2_compile_context *cctx = NULL;
    struct rv_select_re *re = NULL;

    *out = NULL;
    snprintf(f, sizeof(f), "%s.%s", field, member);
    if (!json_is_string(v))
        return rv_error_field(err, RV_ERR_INVALID, f, "%s must be a string (a regex)", f);
    const char *pat = json_string_value(v);
    size_t len = json_string_length(v);
    if (len > RV_SELECT_MAX_PATTERN)
        return rv_error_field(err, RV_ERR_INVALID, f, "%s is longer than %d characters", f,
                              RV_SELECT_MAX_PATTERN);
    if (memchr(pat, '\0', len))
        return rv_error_field(err, RV_ERR_INVALID, f, "%s contains a NUL character", f);
    re = calloc(1, sizeof(*re));
    if (!re)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory compiling %s", f);
    snprintf(re->field, sizeof(re->field), "%s", f);
    re->cap = RV_SELECT_COMPILE_BYTES;
    re->gctx = pcre2_general_context_create(alloc_cb, free_cb, re);
    cctx = re->gctx ? pcre2_compile_context_create(re->gctx) : NULL;
    if (!cctx) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory compiling %s", f);
        goto out;
    }
    pcre2_set_max_pattern_length(cctx, RV_SELECT_MAX_PATTERN);
    pcre2_set_parens_nest_limit(cctx, RV_SELECT_MAX_NEST);
    /* Bytes, not UTF-8: names may hold any byte, and (*UTF) in a pattern
     * would make every name that is not UTF-8 an error. */
    re->code =
        pcre2_compile((PCRE2_SPTR)pat, len, PCRE2_NEVER_UTF | PCRE2_NEVER_UCP, &ec, &eoff, cctx);
    if (!re->code) {
        PCRE2_UCHAR msg[128];
        if (pcre2_get_error_message(ec, msg, sizeof(msg)) < 0)
            snprintf((char *)msg, sizeof(msg), "error %d", ec);
        if (ec == PCRE2_ERROR_HEAP_FAILED)
            rc = rv_error_field(err, RV_ERR_INVALID, f,
                                "%s: the regular expression needs more than %zu bytes to compile",
                                f, RV_SELECT_COMPILE_BYTES);
        else
            rc = rv_error_field(err, RV_ERR_INVALID, f,
                                "%s: bad regular expression at character %zu: %s", f, (size_t)eoff,
                                (const char *)msg);
        goto out;
    }
    uint32_t backrefs = 0;
    if (pcre2_pattern_info(re->code, PCRE2_INFO_BACKREFMAX, &backrefs) != 0 || backrefs > 0) {
        rc = rv_error_field(err, RV_ERR_INVALID, f,
                            "%s: back-references (\\1, \\k<name>) are not allowed in "
                            "selector patterns",
                            f);
        goto out;
    }
    /* From here on: the pattern, plus what one match may use. */
    re->cap = re->live + (size_t)RV_SELECT_HEAP_KIB * 1024 + ((size_t)64 << 10);
    re->mctx = pcre2_match_context_create(re->gctx);
    re->md = pcre2_match_data_create(1, re->gctx);
    if (!re->mctx || !re->md) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory compiling %s", f);
        goto out;
    }
    pcre2_set_match_limit(re->mctx, RV_SELECT_MATCH_LIMIT);
    pcre2_set_depth_limit(re->mctx, RV_SELECT_DEPTH_LIMIT);
    pcre2_set_heap_limit(re->mctx, RV_SELECT_HEAP_KIB);
    *out = re;
    re = NULL;
out:
    pcre2_compile_context_free(cctx);
    re_free(re);
    return rc;
}

/* One match of text (its string id in tab, for the cache). */
static int re_match(struct rv_select_re *re, const rv_strtab *tab, uint32_t id)
{
    const char *text = rv_strtab_get(tab, id);

    if (re->failed)
        return 0;
    if (re->tab != tab || re->tab_data != tab->data || re->tab_offsets != tab->offsets ||
        re->nstate < tab->count) {
        /* Another table, or this one grew or moved: start the cache over. */
        free(re->state);
        re->state = calloc(tab->count ? tab->count : 1, 1);
        re->nstate = re->state ? tab->count : 0;
        re->tab = tab;
        re->tab_data = tab->data;
        re->tab_offsets = tab->offsets;
    }
    if (id < re->nstate && re->state[id] != RE_UNKNOWN)
        return re->state[id] == RE_YES;
    if (re->stop && ++re->matched % RV_SELECT_STOP_EVERY == 0 &&
        rv_stop_check(re->stop, NULL) != 0) {
        re->failed = RV_ERR_BUDGET;
        return 0;
    }
    int rc = pcre2_match(re->code, (PCRE2_SPTR)text, strlen(text), 0, 0, re->md, re->mctx);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
        /* Match, depth or heap limit, or no memory: the what-if fails. */
        re->failed = rc == PCRE2_ERROR_NOMEMORY ? RV_ERR_NOMEM : RV_ERR_LIMIT;
        snprintf(re->failed_name, sizeof(re->failed_name), "%s", text);
        return 0;
    }
    if (id < re->nstate)
        re->state[id] = rc >= 0 ? RE_YES : RE_NO;
    return rc >= 0;
}

static int re_finish(struct rv_select_re *re, rv_error *err)
{
    int rc = 0;

    if (!re)
        return 0;
    if (re->failed == RV_ERR_LIMIT)
        rc = rv_error_field(err, RV_ERR_LIMIT, re->field,
                            "%s needs more than the match limit (%u steps, %u KiB) on the name "
                            "'%s%s': simplify the pattern (nested repeats like (a+)+ backtrack "
                            "exponentially)",
                            re->field, RV_SELECT_MATCH_LIMIT, RV_SELECT_HEAP_KIB, re->failed_name,
                            strlen(re->failed_name) + 1 >= sizeof(re->failed_name) ? "..." : "");
    else if (re->failed == RV_ERR_BUDGET)
        rc = rv_stop_check(re->stop, err) != 0
                 ? RV_ERR_BUDGET
                 : rv_error_set(err, RV_ERR_BUDGET, -1, -1, "the what-if was stopped");
    else if (re->failed)
        rc = rv_error_set(err, re->failed, -1, -1, "out of memory matching %s", re->field);
    re->failed = 0;
    re->matched = 0;
    re->stop = NULL;
    free(re->state);
    re->state = NULL;
    re->nstate = 0;
    re->tab = NULL;
    return rc;
}

void rv_select_set_stop(const rv_select *s, const rv_stop *stop)
{
    if (s->name_re)
        s->name_re->stop = stop;
    if (s->layer_re)
        s->layer_re->stop = stop;
}

int rv_select_finish(const rv_select *s, rv_error *err)
{
    int a = re_finish(s->name_re, err);
    int b = re_finish(s->layer_re, a ? NULL : err);
    return a ? a : b;
}

int rv_select_parse(const json_t *obj, const char *field, rv_select *out, rv_error *err)
{
    char f[64];
    int rc;
    memset(out, 0, sizeof(*out));
    out->kind = RV_SEL_ANY;
    out->phase = -1;
    out->stream = -1;
    out->layer_instance = -1;
    if (!obj || json_is_null(obj))
        return 0;
    if (!json_is_object(obj))
        return rv_error_field(err, RV_ERR_INVALID, field, "%s must be an object", field);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        snprintf(f, sizeof(f), "%s.%s", field, key);
        if (strcmp(key, "kind") == 0) {
            const char *s = json_string_value(v);
            out->kind = -2;
            for (int k = 0; s && k < (int)(sizeof(sel_kind_names) / sizeof(*sel_kind_names)); k++)
                if (strcmp(s, sel_kind_names[k]) == 0)
                    out->kind = k;
            if (out->kind == -2) {
                rc = rv_error_field(err, RV_ERR_INVALID, f,
                                    "%s must be kernel, cpu, memcpy, comm or data", f);
                goto fail;
            }
        } else if (strcmp(key, "name") == 0) {
            if ((rc = compile(v, field, key, &out->name_re, err)) != 0)
                goto fail;
            out->has_name = 1;
        } else if (strcmp(key, "layer") == 0) {
            if ((rc = compile(v, field, key, &out->layer_re, err)) != 0)
                goto fail;
            out->has_layer = 1;
        } else if (strcmp(key, "phase") == 0) {
            const char *s = json_string_value(v);
            out->phase = -2;
            for (int p = 0; s && p < RV_PHASE_COUNT; p++)
                if (strcmp(s, rv_phase_name(p)) == 0)
                    out->phase = p;
            if (out->phase < 0) {
                rc = rv_error_field(err, RV_ERR_INVALID, f,
                                    "%s must be forward, backward, optimizer, dataloader or "
                                    "unknown",
                                    f);
                goto fail;
            }
        } else if (strcmp(key, "stream") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) > INT32_MAX) {
                rc = rv_error_field(err, RV_ERR_INVALID, f, "%s must be a stream id >= 0", f);
                goto fail;
            }
            out->stream = json_integer_value(v);
        } else if (strcmp(key, "layer_instance") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) > INT32_MAX) {
                rc = rv_error_field(err, RV_ERR_INVALID, f,
                                    "%s must be a layer index >= 0 (decoder layer 17: 17)", f);
                goto fail;
            }
            out->layer_instance = json_integer_value(v);
        } else {
            rc = rv_error_field(err, RV_ERR_INVALID, f, "unknown selector field %s", f);
            goto fail;
        }
    }
    return 0;
fail:
    rv_select_clear(out);
    return rc;
}

void rv_select_clear(rv_select *s)
{
    if (!s)
        return;
    re_free(s->name_re);
    re_free(s->layer_re);
    s->name_re = s->layer_re = NULL;
    s->has_name = s->has_layer = 0;
}

const char *rv_task_name(const rv_graph *g, size_t i)
{
    return g->trace ? rv_trace_str(g->trace, g->tasks[i].name) : "";
}

static int task_sel_kind(const rv_graph *g, const rv_task *t)
{
    if (t->kind == RV_TASK_COMM || (t->flags & RV_TF_NCCL))
        return RV_SEL_COMM;
    if (t->kind == RV_TASK_CPU)
        return RV_SEL_CPU;
    if (t->kind == RV_TASK_DATA)
        return RV_SEL_DATA;
    if (t->cat == RV_CAT_MEMCPY || t->cat == RV_CAT_MEMSET)
        return RV_SEL_MEMCPY;
    return RV_SEL_KERNEL;
}

int rv_select_match(const rv_select *s, const rv_graph *g, size_t i)
{
    const rv_task *t = &g->tasks[i];
    if (s->kind != RV_SEL_ANY && task_sel_kind(g, t) != s->kind)
        return 0;
    if (s->phase >= 0 && t->phase != s->phase)
        return 0;
    if (s->stream >= 0) {
        const rv_thread *th = &g->threads[t->thread];
        if (th->kind != RV_THREAD_GPU || th->stream != s->stream)
            return 0;
    }
    if (s->layer_instance >= 0 && rv_layers_of_task(g->layers, i) != s->layer_instance)
        return 0;
    if (s->has_name || s->has_layer) {
        static const rv_strtab empty = {0};
        const rv_strtab *tab = g->trace ? &g->trace->strings : &empty;
        if (s->has_name && !re_match(s->name_re, tab, g->trace ? t->name : 0))
            return 0;
        if (s->has_layer && !re_match(s->layer_re, tab, g->trace ? t->layer : 0))
            return 0;
    }
    return 1;
}

int rv_kclass_of_task(const rv_graph *g, size_t i)
{
    const rv_task *t = &g->tasks[i];
    if (t->kind == RV_TASK_COMM || (t->flags & RV_TF_NCCL))
        return RV_KC_COMM;
    if (t->kind != RV_TASK_GPU)
        return RV_KC_OTHER;
    if (t->cat == RV_CAT_MEMCPY || t->cat == RV_CAT_MEMSET)
        return RV_KC_MEMCPY;
    /* Classified once with the graph (rv_graph_classify). */
    if (t->name < g->nname_info && g->name_info[t->name])
        return (int)(g->name_info[t->name] & 0xff) - 1;
    return rv_kname_class(rv_task_name(g, i));
}
