/* Exhaustive tests of the shard math: for every numel up to a bound, world sizes 1-8, several
 * alignments, the slices of all ranks tile the padded unit exactly, valid parts tile [0, numel),
 * and overlap/owner agree with a brute-force walk over elements. */
#include "harness.h"
#include "zero/partition.h"

static void test_tiling(void) {
    const uint64_t aligns[] = {1, 3, 16, 32, 64};
    for (size_t ai = 0; ai < sizeof aligns / sizeof aligns[0]; ai++) {
        uint64_t align = aligns[ai];
        for (int world = 1; world <= 8; world++) {
            for (uint64_t numel = 0; numel <= 700; numel++) {
                uint64_t padded = zero_partition_padded(numel, world, align);
                uint64_t grain = (uint64_t)world * align;
                /* padded: the smallest multiple of world*align >= numel */
                ZT_CHECKF(padded % grain == 0 && padded >= numel && (numel == 0 || padded - numel < grain),
                          "padded(%llu, %d, %llu) = %llu", (unsigned long long)numel, world,
                          (unsigned long long)align, (unsigned long long)padded);
                uint64_t next = 0, valid_total = 0;
                for (int r = 0; r < world; r++) {
                    zero_shard sh;
                    ZT_OK(zero_partition_shard(numel, world, r, align, &sh));
                    ZT_CHECK(sh.padded == padded);
                    ZT_CHECK(sh.offset == next);
                    ZT_CHECK(sh.size * (uint64_t)world == padded);
                    ZT_CHECK(sh.valid <= sh.size);
                    /* valid elements are exactly those of the slice below numel */
                    uint64_t brute = 0;
                    for (uint64_t i = sh.offset; i < sh.offset + sh.size; i++) brute += i < numel;
                    ZT_CHECK(brute == sh.valid);
                    next += sh.size;
                    valid_total += sh.valid;
                }
                ZT_CHECK(next == padded);
                ZT_CHECK(valid_total == numel);
            }
        }
    }
}

static void test_overlap_owner(void) {
    for (int world = 1; world <= 5; world++) {
        for (uint64_t numel = 1; numel <= 90; numel += 7) {
            uint64_t padded = zero_partition_padded(numel, world, 4);
            for (uint64_t i = 0; i < padded; i++) {
                int o = zero_partition_owner(numel, world, 4, i);
                zero_shard sh;
                zero_partition_shard(numel, world, o, 4, &sh);
                ZT_CHECK(i >= sh.offset && i < sh.offset + sh.size);
            }
            ZT_CHECK(zero_partition_owner(numel, world, 4, padded) == -1);
            for (uint64_t lo = 0; lo <= numel; lo += 5) {
                for (uint64_t hi = lo; hi <= numel + 3; hi += 6) {
                    uint64_t sum = 0;
                    for (int r = 0; r < world; r++) {
                        uint64_t start;
                        uint64_t n = zero_partition_overlap(numel, world, r, 4, lo, hi, &start);
                        uint64_t brute = 0, first = UINT64_MAX;
                        zero_shard sh;
                        zero_partition_shard(numel, world, r, 4, &sh);
                        for (uint64_t i = sh.offset; i < sh.offset + sh.valid; i++)
                            if (i >= lo && i < hi) {
                                brute++;
                                if (first == UINT64_MAX) first = i;
                            }
                        ZT_CHECK(n == brute);
                        if (n) ZT_CHECK(start == first);
                        sum += n;
                    }
                    uint64_t want = (hi < numel ? hi : numel) > lo ? (hi < numel ? hi : numel) - lo : 0;
                    ZT_CHECK(sum == want);
                }
            }
        }
    }
}

static void test_bad_args(void) {
    zero_shard sh;
    ZT_CHECK(zero_partition_shard(10, 0, 0, 1, &sh) == -1);
    ZT_CHECK(zero_partition_shard(10, 2, 2, 1, &sh) == -1);
    ZT_CHECK(zero_partition_shard(10, 2, -1, 1, &sh) == -1);
    ZT_CHECK(zero_partition_shard(10, 2, 0, 0, &sh) == -1);
    ZT_CHECK(zero_partition_shard(UINT64_MAX - 3, 8, 0, 64, &sh) == -1); /* padding overflows */
    ZT_CHECK(zero_partition_padded(5, 0, 1) == 0);
    ZT_CHECK(zero_partition_default_align(4) == 16);
    ZT_CHECK(zero_partition_default_align(2) == 32);
    /* large sizes: 1.5e12 elements on 7 ranks */
    ZT_OK(zero_partition_shard(1500000000000ull, 7, 6, 16, &sh));
    ZT_CHECK(sh.offset + sh.valid == 1500000000000ull);
}

int main(void) {
    test_tiling();
    test_overlap_owner();
    test_bad_args();
    return zt_finish("test_partition");
}
