/* Compact binary snapshot of a parsed rv_trace, for the trace store.
 *
 * The store keeps one snapshot per trace so that a what-if loads a trace
 * without re-parsing its JSON. Layout (all integers little-endian):
 *
 *   header, 40 bytes, never compressed:
 *     "RVSN"  u32 version  u32 flags (bit 0: zlib)  u32 crc32(payload)
 *     u64 raw_len (payload after inflating)  u64 payload_len  u64 reserved
 *   payload: zlib stream of the raw body.
 *   raw body: LEB128 varints (signed values zigzag-coded): counts, metadata,
 *     strings 1..n-1 (length + bytes; id 0 is always ""), devices, then the
 *     events column by column. A column is either "constant" (one value for
 *     every event) or one varint per event; timestamps are delta-coded.
 *
 * Decoding checks every length, count, string id and enum against the
 * header and the caps before it allocates or indexes anything, so a corrupt
 * or hostile snapshot gives a clear rv_error, never a crash. */
#ifndef RV_SNAPSHOT_H
#define RV_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "util/rv_error.h"
#include "trace/rv_trace.h"

/* Version 2 adds the memory model of a joined execution trace (mem_model,
 * mem_weights, ...) after the memory events; version 1 is still read. */
#define RV_SNAPSHOT_VERSION    2
#define RV_SNAPSHOT_HEADER_LEN 40
/* Hard cap on the inflated body, so a hostile header cannot ask for more. */
#define RV_SNAPSHOT_MAX_RAW ((uint64_t)4 << 30)

/* Serializes t (borrowed). On success *out is a new malloc'ed buffer of
 * *out_len bytes (caller frees). level is the zlib level (1..9; 0 stores
 * the body uncompressed). Returns 0 or a negative rv_err. */
int rv_snapshot_encode(const rv_trace *t, int level, uint8_t **out, size_t *out_len, rv_error *err);

/* Parses a snapshot (data borrowed). On success *out is a new trace (caller
 * frees with rv_trace_free); on failure *out is NULL and *err says what is
 * wrong and at which byte of the header or body. */
int rv_snapshot_decode(const void *data, size_t len, rv_trace **out, rv_error *err);

/* Reads only the header: version and inflated size. 0 or RV_ERR_PARSE. */
int rv_snapshot_peek(const void *data, size_t len, uint32_t *version, uint64_t *raw_len,
                     rv_error *err);

#endif
