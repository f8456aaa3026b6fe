/* The partition layout shared by every stage: pure shard math (see include/zero/partition.h).
 * Padding sits at the end of the unit, so ranks' slices are contiguous and equal in size. */
#include "zero/partition.h"

uint64_t zero_partition_padded(uint64_t numel, int world, uint64_t align) {
    if (world < 1 || align < 1) return 0;
    uint64_t grain = (uint64_t)world * align;
    if (numel == 0) return 0;
    if (numel > UINT64_MAX - (grain - 1)) return 0;
    return (numel + grain - 1) / grain * grain;
}

int zero_partition_shard(uint64_t numel, int world, int rank, uint64_t align, zero_shard *out) {
    if (world < 1 || rank < 0 || rank >= world || align < 1 || !out) return -1;
    if (align > UINT64_MAX / (uint64_t)world) return -1;
    uint64_t padded = zero_partition_padded(numel, world, align);
    if (numel && !padded) return -1;
    out->padded = padded;
    out->size = padded / (uint64_t)world;
    out->offset = (uint64_t)rank * out->size;
    if (numel <= out->offset) out->valid = 0;
    else if (numel - out->offset >= out->size) out->valid = out->size;
    else out->valid = numel - out->offset;
    return 0;
}

uint64_t zero_partition_overlap(uint64_t numel, int world, int rank, uint64_t align, uint64_t lo,
                                uint64_t hi, uint64_t *start) {
    zero_shard sh;
    if (start) *start = lo;
    if (zero_partition_shard(numel, world, rank, align, &sh) != 0 || hi <= lo) return 0;
    uint64_t a = sh.offset > lo ? sh.offset : lo;
    uint64_t end = sh.offset + sh.valid;
    uint64_t b = end < hi ? end : hi;
    if (b <= a) return 0;
    if (start) *start = a;
    return b - a;
}

int zero_partition_owner(uint64_t numel, int world, uint64_t align, uint64_t i) {
    uint64_t padded = zero_partition_padded(numel, world, align);
    if (!padded || i >= padded) return -1;
    return (int)(i / (padded / (uint64_t)world));
}

uint64_t zero_partition_default_align(size_t elem_bytes) {
    if (elem_bytes == 0 || elem_bytes >= 64) return 1;
    return 64 / elem_bytes;
}
