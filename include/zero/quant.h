/* zero/quant.h — blockwise quantized formats (docs/QUANT.md): NF4 and int8 for frozen base weights,
 * the 8-bit dynamic format for optimizer states, as bitsandbytes defines them, bit for bit.
 *
 * A tensor of n values is cut into blocks of `block` consecutive values (the last one may be
 * partial); each block keeps its absmax (the largest |x|) in fp32 and each value the index of
 * the nearest entry of a sorted code table to x / absmax (a tie to the lower entry). Decoding is
 * code[index] * absmax, one fp32 product.
 *
 *   - NF4: the 16-value table of zero__nf4 (QLoRA's 4-bit NormalFloat), blocks of 64, two indices a
 *     byte (the first in the high nibble). Double quantization (on by default for a base): the
 *     blocks' absmax less their mean (the offset), in the signed dynamic format in blocks of 256;
 *     a block's scale is then code[q] * absmax2 + offset.
 *   - int8: the linear map (k / 127, k = -127..127), blocks of 64.
 *   - the 8-bit dynamic maps (signed for a first moment, unsigned for a second), blocks of 256:
 *     8-bit AdamW's states (zero_optim_step_q8, zero/optim.h).
 * Every function here is the scalar reference, on the calling thread. */
#ifndef ZERO_QUANT_H
#define ZERO_QUANT_H

#include "zero/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZERO_QUANT_NF4_BLOCK  64  /* NF4's values per absmax */
#define ZERO_QUANT_INT8_BLOCK 64  /* int8's */
#define ZERO_QUANT_DQ_BLOCK   256 /* double quantization's absmax per second-level scale */
#define ZERO_QUANT_Q8_BLOCK   256 /* 8-bit optimizer states' values per absmax */
/* bitsandbytes keeps a tensor of fewer elements than this in fp32 under its 8-bit optimizers; zero does the same. */
#define ZERO_QUANT_Q8_MIN 4096

/* Blocks of a tensor of n values. */
uint64_t zero_quant_blocks(uint64_t n, uint64_t block);

/* The 16 NF4 values, ascending. */
void zero_quant_nf4_table(float out[16]);
/* The 256-entry 8-bit dynamic map (signed: first moments, the absmax of double quantization;
 * unsigned: second moments), ascending. */
void zero_quant_dynamic_map(int is_signed, float out[256]);
/* int8's map: 255 values k / 127 and a second zero, ascending (index 127 is that zero). */
void zero_quant_linear_map(float out[256]);

/* x[0..n) into idx[n] (indices into code, 256 entries ascending) and absmax[zero_quant_blocks(n, block)]. */
void zero_quant_blockwise(const float *x, uint64_t n, uint64_t block, const float *code, uint8_t *idx, float *absmax);
/* Values [first, first + n) of such a tensor into out (fp32). */
void zero_dequant_blockwise(const uint8_t *idx, const float *absmax, const float *code, uint64_t block, uint64_t first,
                            uint64_t n, float *out);

/* x[0..n) into packed[(n + 1) / 2] (a pad nibble of 0 when n is odd) and absmax[zero_quant_blocks(n, 64)]. */
void zero_quant_nf4(const float *x, uint64_t n, uint8_t *packed, float *absmax);
/* Values [first, first + n) of an NF4 tensor into out (fp32); absmax: one fp32 per block (decode a
 * double-quantized absmax first with zero_dequant_absmax). */
void zero_dequant_nf4(const uint8_t *packed, const float *absmax, uint64_t first, uint64_t n, float *out);

/* Double quantization of nblocks fp32 absmax: q[nblocks], absmax2[zero_quant_blocks(nblocks, 256)]
 * and the offset (their mean). */
void zero_quant_absmax(const float *absmax, uint64_t nblocks, uint8_t *q, float *absmax2, float *offset);
/* The fp32 absmax back: out[nblocks]. */
void zero_dequant_absmax(const uint8_t *q, const float *absmax2, float offset, uint64_t nblocks, float *out);

/* ---------------------------------------------------------------- int8 messages
 * ZeRO++'s quantized weight gathers (zero_config.quant_weights, docs/QUANT.md): n values sent as
 * int8's linear map in blocks of `block` (the last may be partial), zero_quant_blockwise's coding:
 *   absmax f32[zero_quant_blocks(n, block)] | codes u8[n] | zeros to ZERO_QUANT_RECORD_ALIGN bytes
 * Its bytes (a multiple of ZERO_QUANT_RECORD_ALIGN, so that messages laid end to end keep their
 * absmax aligned); 0 for n 0. */
uint64_t zero_quant_msg_bytes(uint64_t n, uint64_t block);
/* Values a coder of such messages converts at a time (whole blocks, about 2^16): the engine's fp32
 * buffer for a working dtype other than fp32 holds this many. */
uint64_t zero_quant_msg_chunk(uint64_t block);
/* x[0..n), of dtype dt (fp32, bf16 or fp16: each value widened to fp32 exactly), into such a
 * message at msg (4-byte aligned; its padding zeroed): zero_quant_blockwise's absmax and codes of
 * the widened values, bit for bit. ZERO_ERR_INVALID_ARG for another dtype or block 0. */
zero_status zero_quant_msg_encode(const void *x, zero_dtype dt, uint64_t n, uint64_t block, void *msg);
/* Values [first, first + count) of a message of n values into out (fp32: code x absmax), or added
 * to out (add 1: out[i] += value, one fp32 addition each). */
void zero_quant_msg_decode(const void *msg, uint64_t n, uint64_t block, uint64_t first, uint64_t count, float *out,
                           int add);

/* ---------------------------------------------------------------- a frozen base's storage
 * A frozen parameter quantized for a base (zero_config.quant_base, docs/QUANT.md) is one record:
 * its scales first (4-byte aligned), then its codes, the whole padded to ZERO_QUANT_RECORD_ALIGN
 * bytes. The tensor is quantized as one: blocks over its row-major elements (the last may be
 * partial, as bitsandbytes does; nothing is padded with values), double quantization over all its
 * blocks' absmax.
 *   NF4:      absmax f32[nb] | codes u8[(n + 1) / 2]                          nb = blocks of 64
 *   NF4 + DQ: offset f32 | absmax2 f32[blocks of 256 of nb] | qabsmax u8[nb] | codes u8[(n + 1) / 2]
 *   int8:     absmax f32[nb] | codes u8[n] */
typedef enum zero_qformat {
    ZERO_QFMT_NONE = 0,   /* an element dtype, not quantized */
    ZERO_QFMT_NF4 = 1,    /* NF4, the absmax in fp32 */
    ZERO_QFMT_NF4_DQ = 2, /* NF4 with double quantization (the default for a base) */
    ZERO_QFMT_INT8 = 3,   /* int8 (the linear map), the absmax in fp32 */
} zero_qformat;
#define ZERO_QUANT_RECORD_ALIGN 16

/* "none", "nf4", "nf4-dq" or "int8" ("?" for another value). */
const char *zero_qformat_name(zero_qformat f);
/* Bytes of the record of a tensor of n values (a multiple of ZERO_QUANT_RECORD_ALIGN; 0 for NONE). */
uint64_t zero_quant_record_bytes(zero_qformat f, uint64_t n);
/* Where a record's parts are: pointers into rec (which must be 4-byte aligned). */
typedef struct zero_quant_view {
    zero_qformat fmt;
    uint64_t n;
    const uint8_t *codes;
    const float *absmax;    /* NULL under double quantization */
    const uint8_t *qabsmax; /* double quantization: the absmax's codes, */
    const float *absmax2;   /* their scales */
    float offset;           /* and their mean */
} zero_quant_view;
zero_status zero_quant_record_view(zero_qformat f, const void *rec, uint64_t n, zero_quant_view *out);
/* x[0..n) into a record of zero_quant_record_bytes(f, n) bytes at rec (4-byte aligned; its padding
 * zeroed). ZERO_ERR_NOMEM when double quantization's scratch (4 bytes a block) cannot be had. */
zero_status zero_quant_record_encode(zero_qformat f, const float *x, uint64_t n, void *rec);
/* Values [first, first + count) of a record's tensor into out (fp32). */
zero_status zero_quant_record_decode(const zero_quant_view *v, uint64_t first, uint64_t count, float *out);
/* The place of a frozen parameter of n values in a part of `slot`-byte elements (the frozen dtype's
 * size) whose first free element is `at`: its first element is returned in *start and the part's
 * new end is returned. An element parameter (f NONE) takes n elements at `at`; a record starts on
 * ZERO_QUANT_RECORD_ALIGN bytes and takes its bytes / slot elements. The engine lays out a unit's
 * frozen part by it and the planner counts it the same way. */
uint64_t zero_quant_place(zero_qformat f, uint64_t n, size_t slot, uint64_t at, uint64_t *start);

#ifdef __cplusplus
}
#endif
#endif
