/* The only file that reads CUPTI activity structs. See rv_records.h. */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include <cupti.h>

#include "util/rv_error.h"
#include "rv_records.h"

/* Written against CUDA 13.0 (CUPTI 13.0.1): Kernel10, Memcpy6, Memset4,
 * Synchronization2, Marker2, Device5, CudaEvent2, Overhead3. A newer CUPTI
 * renames or extends these records; re-check every struct below before
 * raising the bound. */
_Static_assert(CUPTI_API_VERSION >= 130000 && CUPTI_API_VERSION < 130200,
               "rv_records.c reads CUDA 13.0/13.1 CUPTI records; re-check the structs");
_Static_assert(sizeof(CUpti_ActivityKernel10) % 8 == 0, "CUPTI records are 8-byte aligned");

/* --- growable arrays and strings ----------------------------------------- */

static void *vec_push(rv_recvec *v, size_t elem)
{
    if (v->n == v->cap) {
        size_t ncap = v->cap ? v->cap * 2 : 256;
        if (ncap > v->max)
            ncap = v->max;
        if (ncap <= v->n)
            return NULL;
        void *p = realloc(v->items, ncap * elem);
        if (!p)
            return NULL;
        v->items = p;
        v->cap = ncap;
    }
    char *slot = (char *)v->items + v->n * elem;
    memset(slot, 0, elem);
    v->n++;
    return slot;
}

static uint32_t str_hash(const char *s, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static int str_rehash(rv_recstr *st, uint32_t nslots)
{
    uint32_t *slots = calloc(nslots, sizeof(*slots));
    if (!slots)
        return RV_ERR_NOMEM;
    for (uint32_t i = 0; i < st->nslots; i++) {
        if (!st->slots[i])
            continue;
        const char *s = st->data + st->slots[i] - 1;
        uint32_t j = str_hash(s, strlen(s)) & (nslots - 1);
        while (slots[j])
            j = (j + 1) & (nslots - 1);
        slots[j] = st->slots[i];
    }
    free(st->slots);
    st->slots = slots;
    st->nslots = nslots;
    return 0;
}

uint32_t rv_recset_intern(rv_recset *set, const char *s)
{
    rv_recstr *st = &set->strings;
    if (!s || !*s)
        return 0;
    size_t len = strnlen(s, 4096); /* names longer than this are cut */
    if ((st->count + 1) * 2 >= st->nslots && str_rehash(st, st->nslots ? st->nslots * 2 : 256) != 0)
        return 0;
    uint32_t j = str_hash(s, len) & (st->nslots - 1);
    while (st->slots[j]) {
        const char *t = st->data + st->slots[j] - 1;
        if (strncmp(t, s, len) == 0 && t[len] == '\0')
            return st->slots[j] - 1;
        j = (j + 1) & (st->nslots - 1);
    }
    if (st->len + len + 1 > st->cap) {
        size_t ncap = st->cap ? st->cap * 2 : 4096;
        while (ncap < st->len + len + 1)
            ncap *= 2;
        if (ncap > RV_RECSET_MAX_STR)
            return 0;
        char *d = realloc(st->data, ncap);
        if (!d)
            return 0;
        st->data = d;
        st->cap = ncap;
    }
    uint32_t off = (uint32_t)st->len;
    memcpy(st->data + off, s, len);
    st->data[off + len] = '\0';
    st->len += len + 1;
    st->slots[j] = off + 1;
    st->count++;
    return off;
}

const char *rv_recset_str(const rv_recset *s, uint32_t id)
{
    if (id == 0 || id >= s->strings.len)
        return "";
    return s->strings.data + id;
}

rv_recset *rv_recset_new(void)
{
    rv_recset *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->recs.max = RV_RECSET_MAX_RECS;
    s->events.max = RV_RECSET_MAX_RECS;
    s->ext.max = RV_RECSET_MAX_RECS;
    s->devices.max = 1024;
    /* Offset 0 is the empty string, so id 0 means "no name". */
    s->strings.data = malloc(4096);
    if (!s->strings.data) {
        free(s);
        return NULL;
    }
    s->strings.data[0] = '\0';
    s->strings.len = 1;
    s->strings.cap = 4096;
    return s;
}

void rv_recset_free(rv_recset *s)
{
    if (!s)
        return;
    free(s->recs.items);
    free(s->events.items);
    free(s->ext.items);
    free(s->devices.items);
    free(s->strings.data);
    free(s->strings.slots);
    free(s);
}

void rv_recset_free_list(rv_recset *s)
{
    while (s) {
        rv_recset *next = s->next;
        rv_recset_free(s);
        s = next;
    }
}

/* --- record conversion ---------------------------------------------------- */

static rv_rec *new_rec(rv_recset *s, int kind)
{
    rv_rec *r = vec_push(&s->recs, sizeof(rv_rec));
    if (!r)
        return NULL;
    r->kind = (uint8_t)kind;
    r->device = r->context = r->stream = RV_REC_NO_ID;
    return r;
}

static int add_kernel(rv_recset *s, const CUpti_ActivityKernel10 *k)
{
    rv_rec *r = new_rec(s, RV_REC_KERNEL);
    if (!r)
        return RV_ERR_NOMEM;
    r->start = k->start;
    r->end = k->end;
    r->correlation = k->correlationId;
    r->name = rv_recset_intern(s, k->name);
    r->device = k->deviceId;
    r->context = k->contextId;
    r->stream = k->streamId;
    r->grid[0] = k->gridX;
    r->grid[1] = k->gridY;
    r->grid[2] = k->gridZ;
    r->block[0] = k->blockX;
    r->block[1] = k->blockY;
    r->block[2] = k->blockZ;
    r->registers = k->registersPerThread;
    r->shared_mem = (uint32_t)k->staticSharedMemory + (uint32_t)k->dynamicSharedMemory;
    return 1;
}

static int add_memcpy(rv_recset *s, const CUpti_ActivityMemcpy6 *m)
{
    rv_rec *r = new_rec(s, RV_REC_MEMCPY);
    if (!r)
        return RV_ERR_NOMEM;
    r->start = m->start;
    r->end = m->end;
    r->bytes = m->bytes;
    r->correlation = m->correlationId;
    r->device = m->deviceId;
    r->context = m->contextId;
    r->stream = m->streamId;
    r->aux = (uint32_t)m->copyKind | (uint32_t)m->srcKind << 8 | (uint32_t)m->dstKind << 16;
    return 1;
}

static int add_memset(rv_recset *s, const CUpti_ActivityMemset4 *m)
{
    rv_rec *r = new_rec(s, RV_REC_MEMSET);
    if (!r)
        return RV_ERR_NOMEM;
    r->start = m->start;
    r->end = m->end;
    r->bytes = m->bytes;
    r->correlation = m->correlationId;
    r->device = m->deviceId;
    r->context = m->contextId;
    r->stream = m->streamId;
    r->aux = m->memoryKind;
    return 1;
}

static int add_api(rv_recset *s, const CUpti_ActivityAPI *a, int kind)
{
    rv_rec *r = new_rec(s, kind);
    if (!r)
        return RV_ERR_NOMEM;
    r->start = a->start;
    r->end = a->end;
    r->correlation = a->correlationId;
    r->pid = a->processId;
    r->tid = a->threadId;
    r->aux = a->cbid;
    return 1;
}

static int add_sync(rv_recset *s, const CUpti_ActivitySynchronization2 *y)
{
    rv_rec *r = new_rec(s, RV_REC_SYNC);
    if (!r)
        return RV_ERR_NOMEM;
    r->start = y->start;
    r->end = y->end;
    r->correlation = y->correlationId;
    r->context = y->contextId;
    r->stream = y->streamId; /* CUPTI_SYNCHRONIZATION_INVALID_VALUE == RV_REC_NO_ID */
    switch (y->type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: r->aux = RV_REC_SYNC_EVENT; break;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
        r->aux = RV_REC_SYNC_WAIT_EVENT;
        break;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: r->aux = RV_REC_SYNC_STREAM; break;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
        r->aux = RV_REC_SYNC_CONTEXT;
        break;
    default: r->aux = RV_REC_SYNC_UNKNOWN; break;
    }
    r->aux64 = y->cudaEventSyncId;
    return 1;
}

static int add_marker(rv_recset *s, const CUpti_ActivityMarker2 *m)
{
    int kind;
    if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START)
        kind = RV_REC_MARKER_START;
    else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END)
        kind = RV_REC_MARKER_END;
    else
        return 0; /* instantaneous markers and sync markers carry no range */
    rv_rec *r = new_rec(s, kind);
    if (!r)
        return RV_ERR_NOMEM;
    r->start = r->end = m->timestamp;
    r->aux = m->id;
    if (m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ||
        m->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS) {
        r->pid = m->objectId.pt.processId;
        r->tid = m->objectId.pt.threadId;
    }
    if (kind == RV_REC_MARKER_START)
        r->name = rv_recset_intern(s, m->name);
    return 1;
}

static int add_overhead(rv_recset *s, const CUpti_ActivityOverhead3 *o)
{
    rv_rec *r = new_rec(s, RV_REC_OVERHEAD);
    if (!r)
        return RV_ERR_NOMEM;
    r->start = o->start;
    r->end = o->end;
    r->correlation = o->correlationId;
    r->aux = (uint32_t)o->overheadKind;
    if (o->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ||
        o->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS) {
        r->pid = o->objectId.pt.processId;
        r->tid = o->objectId.pt.threadId;
    } else {
        r->device = o->objectId.dcs.deviceId;
    }
    return 1;
}

static int add_cuda_event(rv_recset *s, const CUpti_ActivityCudaEvent2 *e)
{
    rv_rec_event *r = vec_push(&s->events, sizeof(*r));
    if (!r)
        return RV_ERR_NOMEM;
    r->sync_id = e->cudaEventSyncId;
    r->correlation = e->correlationId;
    r->stream = e->streamId;
    r->device = e->deviceId;
    return 1;
}

static int add_extcorr(rv_recset *s, const CUpti_ActivityExternalCorrelation *x)
{
    rv_rec_extcorr *r = vec_push(&s->ext, sizeof(*r));
    if (!r)
        return RV_ERR_NOMEM;
    r->external_id = x->externalId;
    r->correlation = x->correlationId;
    r->ext_kind = (uint32_t)x->externalKind;
    return 1;
}

static int add_device(rv_recset *s, const CUpti_ActivityDevice5 *d)
{
    rv_rec_device *r = vec_push(&s->devices, sizeof(*r));
    if (!r)
        return RV_ERR_NOMEM;
    r->global_mem = d->globalMemorySize;
    r->mem_bandwidth = d->globalMemoryBandwidth;
    r->id = d->id;
    r->name = rv_recset_intern(s, d->name);
    r->num_sms = d->numMultiprocessors;
    r->core_clock_khz = d->coreClockRate;
    r->cc_major = d->computeCapabilityMajor;
    r->cc_minor = d->computeCapabilityMinor;
    r->max_threads_per_block = d->maxThreadsPerBlock;
    r->max_warps_per_sm = d->maxWarpsPerMultiprocessor;
    r->warp_size = d->numThreadsPerWarp;
    r->regs_per_block = d->maxRegistersPerBlock;
    r->regs_per_sm = d->maxRegistersPerMultiprocessor;
    r->shmem_per_block = d->maxSharedMemoryPerBlock;
    r->shmem_per_sm = d->maxSharedMemoryPerMultiprocessor;
    r->l2_bytes = d->l2CacheSize;
    return 1;
}

int rv_records_add(rv_recset *s, const void *cupti_record)
{
    const CUpti_Activity *a = cupti_record;
    int rc;
    switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: rc = add_kernel(s, cupti_record); break;
    case CUPTI_ACTIVITY_KIND_MEMCPY: rc = add_memcpy(s, cupti_record); break;
    case CUPTI_ACTIVITY_KIND_MEMSET: rc = add_memset(s, cupti_record); break;
    case CUPTI_ACTIVITY_KIND_RUNTIME: rc = add_api(s, cupti_record, RV_REC_RUNTIME); break;
    case CUPTI_ACTIVITY_KIND_DRIVER: rc = add_api(s, cupti_record, RV_REC_DRIVER); break;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: rc = add_sync(s, cupti_record); break;
    case CUPTI_ACTIVITY_KIND_MARKER: rc = add_marker(s, cupti_record); break;
    case CUPTI_ACTIVITY_KIND_OVERHEAD: rc = add_overhead(s, cupti_record); break;
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT: rc = add_cuda_event(s, cupti_record); break;
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: rc = add_extcorr(s, cupti_record); break;
    case CUPTI_ACTIVITY_KIND_DEVICE: rc = add_device(s, cupti_record); break;
    default: s->ignored++; return 0;
    }
    if (rc < 0)
        s->dropped++;
    else if (rc == 0)
        s->ignored++;
    return rc;
}

long rv_records_parse_buffer(rv_recset *s, uint8_t *buf, size_t valid_size)
{
    CUpti_Activity *rec = NULL;
    long kept = 0;
    if (!buf || valid_size == 0)
        return 0;
    for (;;) {
        CUptiResult r = cuptiActivityGetNextRecord(buf, valid_size, &rec);
        if (r == CUPTI_ERROR_MAX_LIMIT_REACHED)
            break;
        if (r != CUPTI_SUCCESS)
            return kept ? kept : RV_ERR_PARSE;
        if (rv_records_add(s, rec) > 0)
            kept++;
    }
    return kept;
}

/* --- names ------------------------------------------------------------------ */

const char *rv_records_api_name(int kind, uint32_t cbid, char *buf, size_t cap)
{
    const char *name = NULL;
    CUpti_CallbackDomain dom =
        kind == RV_REC_DRIVER ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API;
    if (cuptiGetCallbackName(dom, cbid, &name) != CUPTI_SUCCESS || !name) {
        snprintf(buf, cap, "%s#%u", kind == RV_REC_DRIVER ? "cuApi" : "cudaApi", cbid);
        return buf;
    }
    snprintf(buf, cap, "%s", name);
    /* Kineto shows "cudaLaunchKernel", CUPTI says "cudaLaunchKernel_v7000". */
    char *v = strrchr(buf, '_');
    if (v && v[1] == 'v' && v[2] >= '0' && v[2] <= '9' &&
        strspn(v + 2, "0123456789") == strlen(v + 2))
        *v = '\0';
    return buf;
}

static const char *mem_kind_name(uint32_t k)
{
    switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return "Pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return "Pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE: return "Device";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return "Array";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED: return "Managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC: return "Device Static";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return "Managed Static";
    default: return "Unknown";
    }
}

const char *rv_records_memcpy_name(uint32_t aux, char *buf, size_t cap)
{
    static const char *const kinds[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                        "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
    uint32_t k = aux & 0xff;
    snprintf(buf, cap, "Memcpy %s (%s -> %s)", k < 11 ? kinds[k] : "Unknown",
             mem_kind_name((aux >> 8) & 0xff), mem_kind_name((aux >> 16) & 0xff));
    return buf;
}

const char *rv_records_memset_name(uint32_t aux, char *buf, size_t cap)
{
    snprintf(buf, cap, "Memset (%s)", mem_kind_name(aux));
    return buf;
}

const char *rv_records_sync_name(uint32_t sync)
{
    switch (sync) {
    case RV_REC_SYNC_EVENT: return "Event Sync";
    case RV_REC_SYNC_WAIT_EVENT: return "Wait Event";
    case RV_REC_SYNC_STREAM: return "Stream Sync";
    case RV_REC_SYNC_CONTEXT: return "Context Sync";
    default: return "Unknown Sync";
    }
}

const char *rv_records_overhead_name(uint32_t kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: return "DRIVER_COMPILER";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: return "CUPTI_BUFFER_FLUSH";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: return "CUPTI_INSTRUMENTATION";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: return "CUPTI_RESOURCE";
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING:
        return "RUNTIME_TRIGGERED_MODULE_LOADING";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING: return "LAZY_FUNCTION_LOADING";
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL: return "COMMAND_BUFFER_FULL";
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST: return "ACTIVITY_BUFFER_REQUEST";
    case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT: return "UVM_ACTIVITY_INIT";
    default: return "UNKNOWN";
    }
}
