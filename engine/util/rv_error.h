/* Error convention shared by every Reverie module.
 *
 * Fallible functions return 0 on success or a negative rv_err code. When a
 * function also takes an rv_error pointer, it fills a human-readable message
 * that says what went wrong and where (byte offset, event index, field). */
#ifndef RV_ERROR_H
#define RV_ERROR_H

#include <stdint.h>

typedef enum rv_err {
    RV_OK = 0,
    RV_ERR_NOMEM = -1,       /* an allocation failed or a cap was hit */
    RV_ERR_IO = -2,          /* open/read/write failed */
    RV_ERR_PARSE = -3,       /* the input is not what the format says */
    RV_ERR_INVALID = -4,     /* well-formed input with a bad value */
    RV_ERR_UNSUPPORTED = -5, /* valid input this code cannot use */
    RV_ERR_LIMIT = -6,       /* the input exceeds a size or count limit the client can fix */
    RV_ERR_NOTFOUND = -7,
    RV_ERR_INTERNAL = -8,
    RV_ERR_BUDGET = -9,     /* this request's time or memory budget ran out: retry later */
    RV_ERR_FORBIDDEN = -10, /* the caller may not write there (another's object) */
} rv_err;

/* What an error is about beyond its code, for callers that decide on it
 * (never on the message text). */
typedef enum rv_err_reason {
    RV_REASON_NONE = 0,
    RV_REASON_INPUT_BYTES, /* the input's (decompressed) byte cap was hit */
    RV_REASON_EVENTS,      /* the cap on events kept was hit */
    RV_REASON_IS_ET,       /* the input is a PyTorch execution trace, not Kineto */
    RV_REASON_ET_LAYOUT,   /* an execution trace read, but not laid out on the GPU */
} rv_err_reason;

typedef struct rv_error {
    int code;            /* an rv_err value */
    int64_t offset;      /* byte offset in the (decompressed) input, or -1 */
    int64_t event_index; /* index of the trace event, or -1 */
    char field[64];      /* the request field at fault, or "" */
    char message[256];
    int reason; /* rv_err_reason; RV_REASON_NONE unless a caller may act on it */
    int placed; /* 1 when the message itself says where (byte, event) */
} rv_error;

/* Resets *e to "no error" (offset and event index -1). NULL-safe. */
void rv_error_clear(rv_error *e);

/* Fills *e (when non-NULL) and returns code, so callers can write
 * `return rv_error_set(e, RV_ERR_PARSE, off, idx, "...")`. */
int rv_error_set(rv_error *e, int code, int64_t offset, int64_t event_index, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Like rv_error_set for request documents: names the offending field. */
int rv_error_field(rv_error *e, int code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Sets e's reason (when e is non-NULL) and returns code, so readers can
 * write `return rv_error_tag(e, RV_REASON_EVENTS, FAIL(...))`. */
int rv_error_tag(rv_error *e, int reason, int code);

/* Marks e's message (when e is non-NULL) as saying where the error is,
 * so that no caller appends the place again; returns code. */
int rv_error_placed(rv_error *e, int code);

/* At a function's exits: when code is an error and e (may be NULL) holds
 * none, fills e with code and a message naming what failed, so that an
 * error code never travels with an "ok" record. Returns code. */
int rv_error_ensure(rv_error *e, int code, const char *what);

/* Short stable name of a code, e.g. "parse_error". */
const char *rv_err_name(int code);

#endif
