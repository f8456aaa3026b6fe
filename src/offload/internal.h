/* Private to the offload layer: what swap.c (swap files, the io backend, block checksums) and
 * pool.c (the pipelined buffer pool) share. Both build on the io layer's public calls (and its
 * settings helper, for the io options). */
#ifndef ZERO_OFFLOAD_INTERNAL_H
#define ZERO_OFFLOAD_INTERNAL_H

#include "common/internal.h"
#include "io/internal.h" /* zero__io_settings: the offload I/O shares the io options */
#include "zero/io.h"
#include "zero/offload.h"

/* out[i] = CRC32C of the i-th ZERO_IO_ALIGN-byte block of data (checksum.c): the SSE4.2 kernel
 * where it can run (ZERO_IMPL=scalar forces the reference), else the scalar reference. */
void zero__swap_block_crcs(const void *data, size_t blocks, uint32_t *out);
void zero__swap_block_crcs_scalar(const void *data, size_t blocks, uint32_t *out);

/* The pool's side of the checksums (swap.c). Both do nothing when s has checksums off; offset and
 * bytes are whole blocks of the data area (the pool checks that first). */
/* Records crcs (one per block, from zero__swap_block_crcs of the buffer written) as the checksums
 * of `bytes` at `offset`, once their write succeeded. */
void zero__swap_record(zero_swap *s, uint64_t offset, const uint32_t *crcs, size_t bytes);
/* Checks what a read of `bytes` at `offset` brought into buf: ZERO_OK, or ZERO_ERR_FORMAT with
 * msg naming the file, the block's offset in it and the checksums. */
zero_status zero__swap_verify(const zero_swap *s, uint64_t offset, const void *buf, size_t bytes, char *msg,
                              size_t cap);

#endif
