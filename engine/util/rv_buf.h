/* A growable byte buffer with a hard cap, after curl's dynbuf
 * (docs/internals/DYNBUF.md in curl): every buffer is given the most bytes
 * it may ever hold when it is set up, so input that grows without bound
 * (a request body, a JSON answer, a decoded string) fails cleanly instead
 * of eating the machine.
 *
 * The bytes are always followed by a NUL (not counted in len, not charged
 * against the cap), so text can be used as a C string. Errors are sticky:
 * once an append fails, because the cap was hit (RV_ERR_LIMIT) or memory ran
 * out (RV_ERR_NOMEM), every later append fails with the same code and leaves
 * the contents alone, so a writer may make many calls and check once.
 * rv_buf_reset clears the error. See docs/internals/engine.md. */
#ifndef RV_BUF_H
#define RV_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <string.h>

typedef struct rv_buf {
    char *p;      /* NULL until the first byte is added */
    size_t len;   /* bytes held, not counting the NUL */
    size_t alloc; /* bytes allocated, the NUL's byte included */
    size_t max;   /* cap on len */
    int err;      /* first failure (an rv_err), 0 while none */
} rv_buf;

/* Static initializer: rv_buf b = RV_BUF_INIT(1 << 20); */
#define RV_BUF_INIT(cap)                                                                           \
    {                                                                                              \
        NULL, 0, 0, (cap), 0                                                                       \
    }

/* Sets b up empty with a cap of max bytes. Allocates nothing. */
void rv_buf_init(rv_buf *b, size_t max);

/* Frees the bytes; b stays usable, empty, with the same cap. NULL-safe. */
void rv_buf_free(rv_buf *b);

/* Empties b and clears a sticky error; keeps the memory for reuse. */
static inline void rv_buf_reset(rv_buf *b)
{
    b->len = 0;
    b->err = 0;
    if (b->p)
        b->p[0] = '\0';
}

/* Appends n bytes of s (borrowed). 0, or RV_ERR_LIMIT when len would pass
 * the cap, RV_ERR_NOMEM when memory ran out; nothing is added then. */
static inline int rv_buf_add(rv_buf *b, const void *s, size_t n);

/* Appends a C string / one byte. Same returns as rv_buf_add. */
int rv_buf_adds(rv_buf *b, const char *s);
int rv_buf_addc(rv_buf *b, int c);

/* Appends formatted text. Same returns, plus RV_ERR_INTERNAL when the
 * format cannot be rendered (vsnprintf failed). */
int rv_buf_printf(rv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int rv_buf_vprintf(rv_buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* For writers that fill the tail themselves (varints, zlib output): makes
 * room for n more bytes and returns where they go, b->p + b->len, or NULL
 * on failure (the sticky error says which). Up to rv_buf_room(b) bytes
 * may be written there; rv_buf_commit(b, k) then adds the k written. */
char *rv_buf_reserve(rv_buf *b, size_t n);
static inline size_t rv_buf_room(const rv_buf *b)
{
    return b->alloc ? b->alloc - b->len - 1 : 0;
}
static inline void rv_buf_commit(rv_buf *b, size_t n)
{
    b->len += n;
    b->p[b->len] = '\0';
}

/* Hands the bytes over: returns them (new, NUL-terminated, caller frees;
 * an empty buffer gives a fresh "") and leaves b empty. *len (may be NULL)
 * receives the length. Returns NULL, and frees the bytes, when b carries a
 * sticky error or the "" cannot be allocated. */
char *rv_buf_take(rv_buf *b, size_t *len);

/* The contents as a C string (borrowed; "" while nothing was added). */
static inline const char *rv_buf_str(const rv_buf *b)
{
    return b->p ? b->p : "";
}

/* Internal: the slow path of rv_buf_add (grow, cap, sticky error). */
int rv_buf__add_slow(rv_buf *b, const void *s, size_t n);

/* Inline: the engine appends a few bytes at a time in its hottest loops
 * (string decoding, snapshot varints); only growth leaves the header. */
static inline int rv_buf_add(rv_buf *b, const void *s, size_t n)
{
    if (b->err == 0 && n < b->alloc - b->len) {
        if (n)
            memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = '\0';
        return 0;
    }
    return rv_buf__add_slow(b, s, n);
}

#endif
