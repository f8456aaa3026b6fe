/* zero/partition.h — the one partition layout of every stage: pure shard math.
 *
 * A unit of `numel` elements is padded to a multiple of world*align elements; rank r owns the
 * contiguous slice [r*S, (r+1)*S) of the padded buffer, S = padded/world. The padding lies at
 * the end, so a rank's slice holds `valid` real elements followed by zeros. No size restriction:
 * any numel, any world size >= 1, any align >= 1.
 */
#ifndef ZERO_PARTITION_H
#define ZERO_PARTITION_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zero_shard {
    uint64_t padded;  /* padded unit size, a multiple of world*align (0 when numel == 0) */
    uint64_t size;    /* S: elements each rank owns (padded / world) */
    uint64_t offset;  /* r*S: where rank r's slice starts in the padded unit */
    uint64_t valid;   /* elements of the slice that are real (< size only on the last ranks) */
} zero_shard;

/* Smallest multiple of world*align that is >= numel. */
uint64_t zero_partition_padded(uint64_t numel, int world, uint64_t align);
/* Fills *out for rank `rank` of `world`. Returns 0, or -1 for world < 1, rank outside
 * [0, world), align < 1, or a padded size that overflows. */
int zero_partition_shard(uint64_t numel, int world, int rank, uint64_t align, zero_shard *out);
/* The intersection of [lo, hi) with rank's valid slice, as offsets into the unit: returns the
 * overlap length and sets *start (0 and *start = lo when they do not meet). */
uint64_t zero_partition_overlap(uint64_t numel, int world, int rank, uint64_t align, uint64_t lo,
                                uint64_t hi, uint64_t *start);
/* Which rank owns element i of the unit (i < padded). */
int zero_partition_owner(uint64_t numel, int world, uint64_t align, uint64_t i);
/* Elements per 64 bytes of a dtype of `elem_bytes` bytes: the default alignment. */
uint64_t zero_partition_default_align(size_t elem_bytes);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_PARTITION_H */
