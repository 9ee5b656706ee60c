/* SHA-256 (FIPS 180-4), small and self-contained, for content hashes of
 * uploads, API token digests and canonical request hashes. Not constant-time
 * with respect to message length; never used for secrets comparison by
 * itself (callers compare digests, not tokens). */
#ifndef RV_SHA256_H
#define RV_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define RV_SHA256_LEN     32
#define RV_SHA256_HEX_LEN 64

typedef struct rv_sha256 {
    uint32_t h[8];
    uint64_t total; /* bytes hashed so far */
    uint8_t buf[64];
    size_t used; /* bytes in buf */
} rv_sha256;

void rv_sha256_init(rv_sha256 *c);
/* Borrows data for the duration of the call. */
void rv_sha256_update(rv_sha256 *c, const void *data, size_t len);
void rv_sha256_final(rv_sha256 *c, uint8_t out[RV_SHA256_LEN]);

/* One-shot digest of data[0..len) as 64 lowercase hex digits + NUL. */
void rv_sha256_hex(const void *data, size_t len, char out[RV_SHA256_HEX_LEN + 1]);
/* Lowercase hex of a binary digest. */
void rv_sha256_to_hex(const uint8_t digest[RV_SHA256_LEN], char out[RV_SHA256_HEX_LEN + 1]);

#endif
