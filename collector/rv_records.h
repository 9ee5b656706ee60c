/* Compact activity records: what the collector keeps of CUPTI's records.
 *
 * CUPTI's record structs change between CUDA releases (Kernel10 in 13.0,
 * Kernel11 in 13.2), so every access to them lives in rv_records.c, which
 * static-asserts the CUPTI API version it was written for. Everything else
 * in the collector sees only the types below.
 *
 * A record set (rv_recset) holds the records of one CUPTI buffer plus the
 * strings they name. It is built without locks on CUPTI's completion thread
 * and then handed to the collector whole. */
#ifndef RV_RECORDS_H
#define RV_RECORDS_H

#include <stddef.h>
#include <stdint.h>

typedef enum rv_rec_kind {
    RV_REC_KERNEL = 0,
    RV_REC_MEMCPY,
    RV_REC_MEMSET,
    RV_REC_RUNTIME,
    RV_REC_DRIVER,
    RV_REC_SYNC,
    RV_REC_MARKER_START, /* NVTX range push/start: name set */
    RV_REC_MARKER_END,   /* NVTX range pop/end: same id as its start */
    RV_REC_OVERHEAD,
    RV_REC_KIND_COUNT
} rv_rec_kind;

/* Synchronization kinds, in Kineto's vocabulary. */
typedef enum rv_rec_sync {
    RV_REC_SYNC_UNKNOWN = 0,
    RV_REC_SYNC_EVENT,      /* cudaEventSynchronize: "Event Sync" */
    RV_REC_SYNC_WAIT_EVENT, /* cudaStreamWaitEvent: "Wait Event" */
    RV_REC_SYNC_STREAM,     /* cudaStreamSynchronize: "Stream Sync" */
    RV_REC_SYNC_CONTEXT     /* cudaDeviceSynchronize: "Context Sync" */
} rv_rec_sync;

#define RV_REC_NO_ID UINT32_MAX

/* One activity. Times are CUPTI timestamps in ns (CLOCK_REALTIME domain). */
typedef struct rv_rec {
    uint64_t start, end;              /* markers: start == end == the marker time */
    uint64_t bytes;                   /* memcpy/memset bytes */
    uint64_t aux64;                   /* sync: cudaEventSyncId (0 when none) */
    uint32_t correlation;             /* 0 when none */
    uint32_t name;                    /* string id in the set: kernel or marker name; 0 = none */
    uint32_t device, context, stream; /* GPU side; RV_REC_NO_ID when unknown */
    uint32_t pid, tid;                /* CPU side (API calls, markers) */
    uint32_t aux; /* API: cbid; memcpy: kind|src<<8|dst<<16; memset: memory kind;
                   * sync: rv_rec_sync; marker: marker id; overhead: kind */
    int32_t grid[3], block[3];
    uint32_t registers, shared_mem; /* shared_mem = static + dynamic bytes */
    uint8_t kind;                   /* rv_rec_kind */
    uint8_t pad[7];
} rv_rec;

/* cudaEventRecord seen by CUPTI: joins a "Wait Event" sync to its record. */
typedef struct rv_rec_event {
    uint64_t sync_id;
    uint32_t correlation, stream, device, pad;
} rv_rec_event;

/* CUPTI correlation id -> framework (external) id. */
typedef struct rv_rec_extcorr {
    uint64_t external_id;
    uint32_t correlation, ext_kind;
} rv_rec_extcorr;

/* A GPU as CUPTI's DEVICE record describes it. */
typedef struct rv_rec_device {
    uint64_t global_mem;    /* bytes */
    uint64_t mem_bandwidth; /* KB/s as CUPTI reports it */
    uint32_t id, name;      /* name: string id */
    uint32_t num_sms, core_clock_khz;
    uint32_t cc_major, cc_minor;
    uint32_t max_threads_per_block, max_warps_per_sm, warp_size;
    uint32_t regs_per_block, regs_per_sm, shmem_per_block, shmem_per_sm, l2_bytes;
} rv_rec_device;

/* A growable array with a hard cap, shared by the tables of a set. */
typedef struct rv_recvec {
    void *items;
    size_t n, cap, max;
} rv_recvec;

/* Interned strings of one set. Id 0 is "". */
typedef struct rv_recstr {
    char *data;
    size_t len, cap;
    uint32_t *slots; /* open addressing: offset+1, 0 = empty */
    uint32_t nslots, count;
} rv_recstr;

typedef struct rv_recset {
    rv_recvec recs;    /* rv_rec */
    rv_recvec events;  /* rv_rec_event */
    rv_recvec ext;     /* rv_rec_extcorr */
    rv_recvec devices; /* rv_rec_device */
    rv_recstr strings;
    uint64_t ignored;       /* records of kinds the collector does not keep */
    uint64_t dropped;       /* records lost to a cap while parsing */
    struct rv_recset *next; /* list link, owned by whoever holds the list */
} rv_recset;

/* Caps: records per set and bytes of strings per set. */
#define RV_RECSET_MAX_RECS (4u * 1024u * 1024u)
#define RV_RECSET_MAX_STR  (64u * 1024u * 1024u)

/* Returns a new empty set, or NULL on OOM. */
rv_recset *rv_recset_new(void);
/* Frees the set (not its successors). NULL-safe. */
void rv_recset_free(rv_recset *s);
/* Frees a whole list linked by next. NULL-safe. */
void rv_recset_free_list(rv_recset *s);

static inline const rv_rec *rv_recset_recs(const rv_recset *s)
{
    return (const rv_rec *)s->recs.items;
}
const char *rv_recset_str(const rv_recset *s, uint32_t id);
/* Interns a string (borrowed) and returns its id; 0 for NULL or on a cap. */
uint32_t rv_recset_intern(rv_recset *s, const char *str);

/* Adds one CUPTI activity record (a CUpti_Activity *, borrowed). Returns 1
 * when kept, 0 when ignored (kind not kept), or a negative rv_err when a cap
 * or allocation failed (the record is counted in dropped). */
int rv_records_add(rv_recset *s, const void *cupti_record);

/* Parses a whole CUPTI buffer (borrowed) with cuptiActivityGetNextRecord.
 * Returns the number of records kept, or a negative rv_err. */
long rv_records_parse_buffer(rv_recset *s, uint8_t *buf, size_t valid_size);

/* Name of a runtime/driver API from its cbid, without CUPTI's "_v3020"
 * version suffix, written into buf (cap bytes). Returns buf. */
const char *rv_records_api_name(int kind, uint32_t cbid, char *buf, size_t cap);
/* Kineto-style memcpy name, e.g. "Memcpy HtoD (Pageable -> Device)". */
const char *rv_records_memcpy_name(uint32_t aux, char *buf, size_t cap);
/* Kineto-style memset name, e.g. "Memset (Device)". */
const char *rv_records_memset_name(uint32_t aux, char *buf, size_t cap);
/* "Stream Sync", "Event Sync", "Context Sync", "Wait Event" or "Unknown Sync". */
const char *rv_records_sync_name(uint32_t sync);
/* Overhead kind name, e.g. "CUPTI_BUFFER_FLUSH". */
const char *rv_records_overhead_name(uint32_t kind);

#endif
