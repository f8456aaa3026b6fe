/* Private helpers of the common layer shared by every other layer (never installed).
 * Names are prefixed zero__ (double underscore): not part of the public API. */
#ifndef ZERO_COMMON_INTERNAL_H
#define ZERO_COMMON_INTERNAL_H

#include "zero/common.h"

#include <stdio.h>

#if defined(__GNUC__)
#define ZERO__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define ZERO__PRINTF(a, b)
#endif

/* Sends a line to the installed log callback when level is enabled. */
void zero__log(zero_log_level level, const char *fmt, ...) ZERO__PRINTF(2, 3);
/* snprintf into an error buffer (the per-handle last-error text). */
void zero__errorf(char *dst, size_t cap, const char *fmt, ...) ZERO__PRINTF(3, 4);

#define ZERO__ERR(e, ...) zero__errorf((e)->msg, sizeof (e)->msg, __VA_ARGS__)

/* zero_path_in_dir (zero/common.h) for a directory (want_dir) or a regular file: a directory a
 * directory names (a checkpoint's step directory) follows the same rule as its files. */
zero_status zero__path_in_dir_kind(const char *dir, const char *name, int want_dir, char *out, size_t cap,
                                   zero_error *err);

/* A zero_mem_alloc'd copy of s, charged to ZERO_MEM_BUFFERS (NULL on failure; free with zero_mem_free). */
char *zero__strdup(const char *s);

/* ---- scratch.c: the files zero_scratch_remove_all removes (zero/common.h) ----
 * zero__scratch_add lists path (copied) and returns its slot, or -1 when the path is longer than
 * 4095 bytes or 32 files are listed already (the file is then left to the next run's sweep);
 * zero__scratch_drop(slot) unlists it (-1: nothing), before its owner removes the file. */
int zero__scratch_add(const char *path);
void zero__scratch_drop(int slot);

/* ---- reduce.c: the host reductions every layer shares (one kernel, scalar + AVX2) ----
 * dst[i] = src[0][i] op ... op src[nsrc-1][i] for i < n, combined left to right; op is a sum, or
 * MAX when `max`. Float types accumulate in fp32 (bf16/fp16 widened, rounded back once, to
 * nearest even); integers combine in their own width (sums wrap); MAX propagates NaN (a NaN in
 * the accumulator wins, then one in the source). dst may be exactly one of the sources, never a
 * partial overlap; `stream` writes dst with non-temporal stores (fenced). _scalar is the
 * reference, _avx2 runs only on CPUs with AVX2 + F16C and gives the same bits; zero__reduce picks
 * one (AUTO: the best). The shared-memory collectives' kernel. */
void zero__reduce(zero_dtype dt, int max, const void *const *src, int nsrc, void *dst, size_t n, int stream,
                  zero_impl impl);
void zero__reduce_scalar(zero_dtype dt, int max, const void *const *src, int nsrc, void *dst, size_t n, int stream);
void zero__reduce_avx2(zero_dtype dt, int max, const void *const *src, int nsrc, void *dst, size_t n, int stream);
/* dst[i] += src[i]: dst in dt (fp32, bf16, fp16), src fp32, accumulated in fp32 and rounded once.
 * The engine's gradient accumulation. Same bits from every body. */
void zero__accumulate(zero_dtype dt, void *dst, const float *src, size_t n, zero_impl impl);
void zero__accumulate_scalar(zero_dtype dt, void *dst, const float *src, size_t n);
void zero__accumulate_avx2(zero_dtype dt, void *dst, const float *src, size_t n);
/* Σ x[i]² in double over n values of dt (fp32, bf16, fp16), in a fixed order (16 lanes, then a
 * pairwise tree): the same bits from every body; a NaN or infinity in x gives a sum that is not
 * finite (a finite float's square cannot overflow a double). The gradient norm's kernel. */
double zero__sumsq(zero_dtype dt, const void *x, size_t n, zero_impl impl);
double zero__sumsq_scalar(zero_dtype dt, const void *x, size_t n);
double zero__sumsq_avx2(zero_dtype dt, const void *x, size_t n);
/* memcpy with non-temporal stores (x86-64; plain memcpy elsewhere), fenced before it returns.
 * For what another core reads next (a shared window) it avoids pulling dirty lines out of this
 * core's cache; for results too large to stay in cache, reading dst's lines before writing. */
void zero__copy_stream(void *dst, const void *src, size_t n);
/* The same without the fence, for a series of copies fenced once with zero__stream_fence: a
 * fence waits for every streaming store to reach memory, so one per small piece stalls. */
void zero__copy_stream_unfenced(void *dst, const void *src, size_t n);
/* Streaming stores are weakly ordered: this orders them before every later store. */
static inline void zero__stream_fence(void) {
#if defined(__x86_64__)
    __builtin_ia32_sfence();
#endif
}

/* Process options (status.c applies them): huge pages (mem.c; -1 when a large block was
 * already allocated with another setting) and the forced implementation (cpu.c; AUTO: none). */
int zero__mem_hugepages(void);
int zero__mem_set_hugepages(int on);
void zero__impl_force(zero_impl impl);

/* CPU feature bits (cpuid + xgetbv), cached. */
int zero__cpu_has_avx2_fma_f16c(void);
int zero__cpu_has_avx512(void);

#endif
