/* zero/common.h — status codes, the error convention, logging, process options, dtypes and
 * conversions, CPU features, and the accounted allocator every byte of the library goes through.
 *
 * Conventions for the whole API:
 *  - every call that can fail returns a zero_status (ZERO_OK == 0, errors negative), or NULL / a
 *    negative id where it returns a pointer or an index; zero_status_string() names the status;
 *  - the error text (one line: what failed, the offending value and what was expected) is kept
 *    in one of two places, never in a process-wide string:
 *      * a call on a handle keeps it in the handle: zero_engine_last_error(e),
 *        zero_comm_last_error(c), zero_ckpt_last_error(c), zero_st_last_error(f), ... (valid
 *        until the next call on that handle);
 *      * a call that has no handle yet — a constructor (zero_engine_create_with,
 *        zero_comm_init_*_with, zero_ckpt_open, zero_io_create_*, zero_st_open), a loader
 *        (zero_config_load_json_*), a free function (zero_options_set, zero_manifest_validate)
 *        — takes a `zero_error *err` as its last argument (may be NULL) and writes the text there;
 *    the older constructors without one (zero_engine_create, zero_comm_init_self/_mpi) return
 *    the status and send the text to the log callback only;
 *  - the library never prints, never exits, never aborts on bad input (one exit, not on input:
 *    the collective watchdog ends a rank that has waited ZERO_COMM_TIMEOUT seconds for stopped
 *    peers, comm.h; 0 turns it off);
 *  - handles are opaque, created by a create or init call and released by a free call, which accepts NULL;
 *  - what an environment variable sets (ZERO_LOG, ZERO_HUGEPAGES, ZERO_IMPL here; ZERO_COMM_* in
 *    comm.h, ZERO_IO and ZERO_FAULT in io.h, ZERO_JOB_ID in engine.h) an embedding program sets
 *    through an options struct too; the variable stays the default.
 */
#ifndef ZERO_COMMON_H
#define ZERO_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- status */
typedef enum zero_status {
    ZERO_OK = 0,
    ZERO_ERR_INVALID_ARG = -1,  /* a caller-supplied value is out of range or inconsistent */
    ZERO_ERR_NOMEM = -2,        /* an allocation failed */
    ZERO_ERR_IO = -3,           /* a read/write/open/fsync failed */
    ZERO_ERR_COMM = -4,         /* the communication backend reported an error */
    ZERO_ERR_UNSUPPORTED = -5,  /* a known feature that is not supported yet */
    ZERO_ERR_STATE = -6,        /* a call made out of order (e.g. gather before finalize) */
    ZERO_ERR_CONFIG = -7,       /* a configuration value or key is wrong */
    ZERO_ERR_FORMAT = -8,       /* a file is corrupt, truncated or of another format/model */
    ZERO_ERR_DIVERGED = -9,     /* ranks disagree on what they are doing */
    ZERO_ERR_NOSPACE = -10,     /* a disk is full */
    ZERO_ERR_INTERNAL = -11,    /* a bug in zero: please report */
} zero_status;

/* A static string for a status ("invalid argument", ...). Never NULL. */
const char *zero_status_string(zero_status s);

/* Error text for calls that have no handle (constructors, loaders): see the convention above. */
typedef struct zero_error {
    char msg[512];
} zero_error;

/* ---------------------------------------------------------------- logging */
typedef enum zero_log_level {
    ZERO_LOG_ERROR = 0,
    ZERO_LOG_WARN = 1,
    ZERO_LOG_INFO = 2,
    ZERO_LOG_DEBUG = 3,
} zero_log_level;

typedef void (*zero_log_fn)(void *ctx, zero_log_level level, const char *msg);

/* Installs the sink for the library's log lines (NULL: discard them, the default). The level is
 * read from the environment variable ZERO_LOG (error|warn|info|debug; default warn) unless set
 * with zero_log_set_level. Not thread-safe against concurrent logging: set it at start-up. */
void zero_log_set_callback(zero_log_fn fn, void *ctx);
void zero_log_set_level(zero_log_level level);
zero_log_level zero_log_get_level(void);

/* ---------------------------------------------------------------- process options
 * Process-wide settings that environment variables give by default. zero_options_default fills
 * o with the variables' values (the built-in defaults where a variable is unset or invalid);
 * zero_options_set applies o. Set them at start-up: hugepages cannot change once the library has
 * allocated a large block (ZERO_ERR_STATE). */
typedef struct zero_options {
    int log_level;  /* ZERO_LOG: a zero_log_level (default ZERO_LOG_WARN) */
    int hugepages;  /* ZERO_HUGEPAGES: 1 large blocks on transparent huge pages (default), 0 malloc */
    int impl;       /* ZERO_IMPL: a zero_impl, ZERO_IMPL_AUTO (default) the best the CPU has */
} zero_options;

void zero_options_default(zero_options *o);
/* ZERO_ERR_INVALID_ARG naming the field for a value out of range (nothing changes). */
zero_status zero_options_set(const zero_options *o, zero_error *err);

/* ---------------------------------------------------------------- dtypes */
typedef enum zero_dtype {
    ZERO_DTYPE_FP32 = 0,
    ZERO_DTYPE_BF16 = 1,
    ZERO_DTYPE_FP16 = 2,
    ZERO_DTYPE_INT32 = 3,
    ZERO_DTYPE_INT64 = 4,
    ZERO_DTYPE_UINT8 = 5,
    ZERO_DTYPE_COUNT
} zero_dtype;

size_t zero_dtype_size(zero_dtype dt);         /* bytes per element; 0 for an invalid dtype */
const char *zero_dtype_name(zero_dtype dt);    /* "fp32", "bf16", ...; "invalid" otherwise */
/* Parses "fp32"/"float32", "bf16"/"bfloat16", "fp16"/"float16"/"half", "int32", "int64", "uint8". */
zero_status zero_dtype_parse(const char *name, zero_dtype *out);

/* Scalar conversions, round-to-nearest-even; NaN stays NaN (quiet), Inf stays Inf, fp16
 * denormals are produced and read exactly, overflow rounds to Inf as IEEE 754 says. */
uint16_t zero_fp32_to_bf16(float f);
float zero_bf16_to_fp32(uint16_t h);
uint16_t zero_fp32_to_fp16(float f);
float zero_fp16_to_fp32(uint16_t h);

/* Kernel implementation selector: AUTO picks the best the CPU supports at run time. */
typedef enum zero_impl {
    ZERO_IMPL_AUTO = 0,
    ZERO_IMPL_SCALAR = 1,
    ZERO_IMPL_AVX2 = 2,   /* AVX2 + FMA + F16C */
    ZERO_IMPL_AVX512 = 3, /* AVX-512 F/BW/VL/DQ */
} zero_impl;

/* Whether this CPU can run impl (SCALAR and AUTO: always). */
int zero_impl_available(zero_impl impl);
/* What AUTO resolves to on this CPU (honours zero_options.impl, else ZERO_IMPL=scalar|avx2|avx512). */
zero_impl zero_impl_best(void);
const char *zero_impl_name(zero_impl impl);

/* Array conversion between fp32 and bf16/fp16 (either direction; same dtype is a copy).
 * src and dst must not overlap. Returns ZERO_ERR_INVALID_ARG for other dtype pairs. */
zero_status zero_convert(const void *src, zero_dtype src_dt, void *dst, zero_dtype dst_dt, size_t n,
                         zero_impl impl);

/* ---------------------------------------------------------------- memory */
/* Categories of accounted memory; DESIGN.md's per-stage table is written in these terms. */
typedef enum zero_mem_category {
    ZERO_MEM_PARAMS = 0,  /* working parameters (fp32/bf16/fp16), full or shard */
    ZERO_MEM_GRADS = 1,   /* persistent gradients, full or shard */
    ZERO_MEM_MASTER = 2,  /* fp32 master weights (absent in fp32 training: params are the master) */
    ZERO_MEM_OPTIM = 3,   /* optimizer states (Adam m and v, momentum) */
    ZERO_MEM_BUFFERS = 4, /* transient: gathered units, in-flight gradients, staging, I/O pool */
    ZERO_MEM_COMM = 5,    /* communication-library scratch */
    ZERO_MEM_COUNT
} zero_mem_category;

const char *zero_mem_category_name(zero_mem_category c); /* "params", "grads", ... */

typedef struct zero_mem_stats {
    size_t current[ZERO_MEM_COUNT];
    size_t peak[ZERO_MEM_COUNT];
    size_t total_current;
    size_t total_peak; /* peak of the sum, not the sum of peaks */
} zero_mem_stats;

/* An account: a zero_mem_stats that allocations through it update. Not thread-safe: one
 * account per engine, allocations from the thread that drives it. */
typedef struct zero_memacct {
    zero_mem_stats stats;
} zero_memacct;

/* Where memory lives. HOST is all a CPU build has; the GPU build adds the others. */
typedef enum zero_mem_space {
    ZERO_SPACE_HOST = 0,
    ZERO_SPACE_HOST_PINNED = 1,
    ZERO_SPACE_DEVICE = 2,
} zero_mem_space;

/* The allocator hook. alloc returns memory aligned to `align` (a power of two, >= 64) or NULL. */
typedef struct zero_allocator {
    void *(*alloc)(void *ctx, zero_mem_space space, size_t bytes, size_t align);
    void (*free)(void *ctx, zero_mem_space space, void *p, size_t bytes);
    void *ctx;
} zero_allocator;

/* Installs a process-wide allocator (NULL restores the default: aligned host malloc). */
void zero_set_allocator(const zero_allocator *a);

/* Allocates `bytes` (64-byte aligned) of host memory and charges them to `cat` in acct (acct may
 * be NULL: not accounted). Returns NULL on failure or bytes == 0. */
void *zero_mem_alloc(zero_memacct *acct, zero_mem_category cat, size_t bytes);
/* As zero_mem_alloc, zero-filled. */
void *zero_mem_calloc(zero_memacct *acct, zero_mem_category cat, size_t bytes);
/* Frees p (NULL is a no-op) and credits its bytes back to the category it was charged to.
 * acct must be the account p was allocated with. */
void zero_mem_free(zero_memacct *acct, void *p);
/* Bytes charged for p (0 for NULL). */
size_t zero_mem_size(const void *p);
/* Resets the peaks to the current values. */
void zero_memacct_reset_peak(zero_memacct *acct);

/* Peak resident set size of this process in bytes (from the OS), 0 if unknown. */
size_t zero_rss_peak_bytes(void);

/* Monotonic wall clock in seconds. */
double zero_now(void);

/* ---------------------------------------------------------------- untrusted files
 * Every file zero reads that it did not write in this run — a downloaded model directory
 * (config.json, safetensors and their index, tokenizer files), a data set, a checkpoint — is
 * hostile until parsed (docs/SECURITY.md). The checks every reader shares:
 *  - zero_path_in_dir: the one place that turns a name a directory's file gives (a shard of an
 *    index, tokenizer.json of a model directory) into a path;
 *  - zero_read_file: a whole regular file, refused before anything is allocated when it is
 *    larger than the caller's limit;
 *  - zero_json_check: the number of values and the nesting of a JSON text, refused before a
 *    parser allocates a node for it, then its grammar, so that every reader refuses what
 *    another tool would refuse or read otherwise. */

/* The deepest nesting of arrays and objects any JSON file zero reads may have: serde_json's, so
 * that every tokenizer.json `tokenizers` reads is read here (it refuses 128 levels; a real
 * tokenizer.json nests 6, a config.json 3). */
#define ZERO_JSON_MAX_DEPTH 127

/* out = dir/name when name is a plain file name inside dir: not empty, no '/', not "." or "..",
 * no control character, at most 255 bytes. When dir/name exists it must be a regular file, or a
 * symbolic link whose target (resolved all the way) is a regular file inside dir — or, for a
 * snapshot of the Hugging Face hub cache (dir = .../snapshots/REV), inside that repository's
 * .../blobs. A missing file is ZERO_OK (the caller's open reports it). Otherwise
 * ZERO_ERR_FORMAT with err naming the file and the rule, ZERO_ERR_IO when it cannot be
 * examined, ZERO_ERR_INVALID_ARG when the path does not fit in cap bytes. */
zero_status zero_path_in_dir(const char *dir, const char *name, char *out, size_t cap, zero_error *err);

/* Reads the regular file path whole into *text (malloc'd, NUL-terminated, *len bytes; free it
 * with free()). A file larger than max_bytes, or not a regular file (a FIFO, a device, a
 * directory), is ZERO_ERR_FORMAT before anything is allocated; ZERO_ERR_IO when it cannot be
 * opened or read (err says which, with the OS's reason), ZERO_ERR_NOMEM. len may be NULL. */
zero_status zero_read_file(const char *path, uint64_t max_bytes, char **text, size_t *len, zero_error *err);

/* ZERO_OK when the JSON text (len bytes) holds at most max_values values (objects, arrays and
 * scalars, an object member counting once) nested at most max_depth deep — checked first, without
 * allocating — and is one JSON value (RFC 8259: no NaN, no leading zeros, no trailing commas)
 * with nothing but whitespace after it, whose strings are UTF-8 without raw control characters
 * and whose objects name no key twice ("\u0041" and "A" are the same key). ZERO_ERR_FORMAT with
 * err saying what and where (line — for a text of more than one —, column and byte, and the text
 * around it) otherwise; ZERO_ERR_NOMEM. Its memory is the
 * keys' (bounded by max_values); a parser given the text afterwards allocates within it too. */
zero_status zero_json_check(const char *text, size_t len, uint64_t max_values, int max_depth, zero_error *err);

/* zero_json_check for a file that Python's json and serde_json read (Hugging Face's: config.json,
 * tokenizer.json, tokenizer_config.json, generation_config.json): a key repeated in an object is
 * not refused, since they accept it and keep the last value. When the text has one, *last receives
 * a copy of it (len bytes and a NUL; free() it) in which each member that a later one of the same
 * key replaces is blanked to spaces, so that a parser keeping the first (cJSON) reads what they
 * read; otherwise, and on an error, *last = NULL and the caller parses text itself. */
zero_status zero_json_check_last(const char *text, size_t len, uint64_t max_values, int max_depth, char **last,
                                 zero_error *err);

/* ZERO_OK when a file written to PATH.tmp may be renamed over PATH: PATH does not exist, or is a
 * regular file or a symbolic link (the link is replaced, its target untouched); a directory, a
 * device, a FIFO or a socket is ZERO_ERR_INVALID_ARG naming it (as root, `-o /dev/null` would
 * otherwise replace the device with a file), and so is an empty name. */
zero_status zero_check_replaceable(const char *path, zero_error *err);

/* Opens PATH.tmp (its name in tmp) for writing a file that a rename will publish as PATH: a
 * leftover PATH.tmp — a file, or a symbolic link planted there, never what it points to — is
 * removed first, then the file is created exclusively (O_EXCL | O_NOFOLLOW: nothing that appears
 * meanwhile is followed or truncated) with mode 0666 less the umask, as other tools create
 * their outputs; a PATH that zero_check_replaceable refuses is refused. Returns the descriptor
 * (close-on-exec), or -1 with err set. */
int zero_create_tmp(const char *path, char *tmp, size_t cap, zero_error *err);

/* ---------------------------------------------------------------- scratch on an abrupt end
 * The files a handle creates for its own life and removes when it is freed (the NVMe swap files
 * of zero/offload.h) are also listed process-wide, so that a process that ends without freeing
 * its handles can still remove them (docs/OFFLOAD.md, "Removal"). */

/* Removes every listed scratch file of this process (each handle's own, nothing else) and returns
 * how many it removed. Async-signal-safe: meant for a handler of SIGTERM, SIGINT or SIGHUP that
 * ends the process next (the zero command installs one), and called by the comm watchdog before
 * it ends a rank. The handles stay valid but their files are gone: after it, only free them. */
int zero_scratch_remove_all(void);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_COMMON_H */
