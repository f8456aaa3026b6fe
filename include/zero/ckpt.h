/* zero/ckpt.h — tensor files and checkpoints: a streaming safetensors writer and a validating
 * reader, CRC32C checksums, and sharded checkpoints that load on any world size.
 *
 * safetensors (the Hugging Face format, byte layout in docs/CHECKPOINT.md):
 *   u64 little-endian N | N bytes of JSON header, space-padded so 8+N is a multiple of 8 | data.
 *   Header: {"__metadata__": {str: str}, NAME: {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}}
 *   with offsets relative to the data, tensors back to back. Our writer adds the metadata entry
 *   "crc32c.NAME": 8 lowercase hex digits (CRC32C of the tensor's bytes) for every tensor.
 *
 *   zero_st_writer *w;  zero_st_writer_create(&w, NULL, "model.safetensors", &err);
 *   zero_st_writer_add(w, "wte", ZERO_DTYPE_FP32, shape, 2);  ...      // declare everything first
 *   zero_st_writer_write(w, bytes, n); ...                              // then the data, in order
 *   zero_st_writer_finish(w);  zero_st_writer_free(w);
 *
 * The writer never holds more than a 1 MiB staging buffer; it writes PATH.tmp and renames it to
 * PATH after an fsync, so PATH is either the old file or the complete new one.
 *
 * Sharded checkpoints (one directory per save; layout and commit protocol in docs/CHECKPOINT.md):
 *   DIR/latest                                  "step_00000100\n", replaced by atomic rename
 *   DIR/step_00000100/rank_00000.safetensors    rank 0's slices of every tensor
 *   DIR/step_00000100/manifest.json             format_version, step, world, files, tensors + the engine's state
 *   DIR/step_00000100/COMMIT                    present only when every file above is complete
 * Saving, on every rank:  zero_ckpt_writer_begin → _add (every tensor, same order on every rank)
 *   → _write (this rank's slices, in order) → _finish;  then, after the caller has checked that
 *   every rank finished (a barrier plus an agreement on the status), rank 0 alone calls
 *   zero_ckpt_commit with the engine's manifest JSON. A save that fails anywhere, or a rank that
 *   never finishes, leaves the previous checkpoint and `latest` untouched.
 * Loading: zero_ckpt_open(DIR or DIR/step_...) then zero_ckpt_read_range over *logical* tensors:
 *   any element range, from whichever old ranks' files hold it, so a new world size reshards
 *   while reading, with memory bounded by what the caller asks for.
 */
#ifndef ZERO_CKPT_H
#define ZERO_CKPT_H

#include "zero/common.h"
#include "zero/io.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CRC32C (Castagnoli) of n bytes, continuing from crc (0 to start): crc32c(crc32c(0,a),b) is the
 * checksum of a followed by b. crc32c(0, "123456789", 9) == 0xE3069283. */
uint32_t zero_crc32c(uint32_t crc, const void *data, size_t n);

/* ================================================================ safetensors */
#define ZERO_ST_MAX_DIMS 8
/* Largest header accepted (the reference implementation's limit). */
#define ZERO_ST_MAX_HEADER 100000000u

/* "F32", "BF16", "F16", "I32", "I64", "U8" for the zero dtypes; NULL otherwise. */
const char *zero_st_dtype_name(zero_dtype dt);

typedef struct zero_st_writer zero_st_writer;

/* Starts PATH (written as PATH.tmp until finish). io: the backend to use (not owned); NULL uses
 * zero_io_create_default (so $ZERO_FAULT applies). */
zero_status zero_st_writer_create(zero_st_writer **out, zero_io *io, const char *path, zero_error *err);
/* The same for NAME (one component) inside the open directory dir (not owned: keep it open until
 * the writer is freed), with dir's io: NAME.tmp and NAME are never reached through a link. The
 * path form opens PATH's directory (as the caller names it) and does this. */
zero_status zero_st_writer_create_at(zero_st_writer **out, zero_io_dir *dir, const char *name, zero_error *err);
/* Declares the next tensor (before any write). ndim 0..ZERO_ST_MAX_DIMS (0: a scalar), dims >= 0;
 * names unique, not empty, not "__metadata__". Data follows in declaration order. */
zero_status zero_st_writer_add(zero_st_writer *w, const char *name, zero_dtype dt, const int64_t *shape,
                               int ndim);
/* A metadata entry (before any write). Keys starting with "crc32c." are the writer's own. */
zero_status zero_st_writer_set_metadata(zero_st_writer *w, const char *key, const char *value);
/* Appends the next n bytes of data: the declared tensors' bytes back to back, in any chunking
 * (a chunk may span tensors). The first write ends the declarations and writes the header. */
zero_status zero_st_writer_write(zero_st_writer *w, const void *data, size_t n);
/* Requires every declared byte written; stores the checksums, fsyncs, renames PATH.tmp to PATH and
 * fsyncs the directory. After a failure the writer can only be freed. */
zero_status zero_st_writer_finish(zero_st_writer *w);
/* Frees the writer (NULL is a no-op); an unfinished PATH.tmp is removed, PATH is left alone. */
void zero_st_writer_free(zero_st_writer *w);
const char *zero_st_writer_last_error(const zero_st_writer *w);
/* Size of the whole file (known once the declarations are closed by the first write or finish). */
uint64_t zero_st_writer_file_size(const zero_st_writer *w);

typedef struct zero_st_file zero_st_file;

typedef struct zero_st_tensor {
    const char *name;
    const char *dtype;    /* as in the file: "F32", "BF16", "I64", "BOOL", ... */
    zero_dtype zdtype;    /* the matching zero dtype, ZERO_DTYPE_COUNT when there is none */
    size_t elem_size;     /* bytes per element */
    int ndim;
    int64_t shape[ZERO_ST_MAX_DIMS];
    uint64_t numel;
    uint64_t offset;      /* absolute byte offset of the data in the file */
    uint64_t nbytes;
    int has_crc;          /* a "crc32c.NAME" metadata entry was present */
    uint32_t crc;
} zero_st_tensor;

/* Opens and validates: the header length fits the file, the JSON parses, every dtype is known
 * and matches its shape's byte count, the data ranges are back to back from 0 to the end of the
 * file with no gap or overlap, names are unique, checksum entries are well formed. Anything
 * else is ZERO_ERR_FORMAT with a message naming the file and what is wrong. io: as above. */
zero_status zero_st_open(zero_st_file **out, zero_io *io, const char *path, zero_error *err);
/* The same for NAME inside dir (dir's io), refusing a symbolic link at NAME. */
zero_status zero_st_open_at(zero_st_file **out, zero_io_dir *dir, const char *name, zero_error *err);
void zero_st_close(zero_st_file *f); /* NULL is a no-op */
const char *zero_st_last_error(const zero_st_file *f);
const char *zero_st_path(const zero_st_file *f);
uint64_t zero_st_file_size(const zero_st_file *f);
/* Tensors in file order (by offset); i in [0, zero_st_count). */
int zero_st_count(const zero_st_file *f);
const zero_st_tensor *zero_st_tensor_at(const zero_st_file *f, int i);
int zero_st_find(const zero_st_file *f, const char *name); /* index, or -1 */
/* Reads nbytes of tensor i starting byte_lo bytes into it. */
zero_status zero_st_read(zero_st_file *f, int i, uint64_t byte_lo, void *dst, size_t nbytes);
/* Recomputes tensor i's CRC32C (1 MiB at a time) and compares it with the stored one:
 * ZERO_ERR_FORMAT naming the file and the tensor on a mismatch; ZERO_OK when there is none stored. */
zero_status zero_st_verify(zero_st_file *f, int i);
/* Metadata: value for key (NULL when absent), or the i-th pair in file order. */
const char *zero_st_metadata(const zero_st_file *f, const char *key);
int zero_st_metadata_count(const zero_st_file *f);
void zero_st_metadata_at(const zero_st_file *f, int i, const char **key, const char **value);

/* Elements per block of an 8-bit optimizer state (ZERO_QUANT_Q8_BLOCK): a checkpoint's
 * "<unit>/<state>" is then U8 beside "<unit>/<state>.absmax" (F32, one per block; docs/CHECKPOINT.md). */
#define ZERO_CKPT_Q8_BLOCK 256

/* ================================================================ sharded checkpoints */
/* 2: the manifest and every rank file carry the save's id ("save_id", "zero.save_id"); version 1
 * checkpoints (without it) are still read. */
#define ZERO_CKPT_FORMAT_VERSION 2
/* A save's id: this many lowercase hex digits (128 random bits). */
#define ZERO_CKPT_ID_CHARS 32
/* Elements per grid block of deterministic mode: a checkpoint saved in that mode has, per unit
 * with a trainable part, "<unit>/det_grid" (F32, ceil(trainable / 32) elements: each block's grid
 * exponent, an integer in [-126, 96], or -128 for none yet; docs/CHECKPOINT.md). */
#define ZERO_CKPT_DET_GRID_BLOCK 32

typedef struct zero_ckpt_writer zero_ckpt_writer;

/* A new save id (ZERO_CKPT_ID_CHARS hex digits and a NUL into out, cap > ZERO_CKPT_ID_CHARS) from
 * the system's random source. One rank makes it and sends it to the others. */
zero_status zero_ckpt_new_id(char *out, size_t cap);

/* Every rank: starts DIR/step_%08lld.tmp/rank_%05d.safetensors (creating DIR and the staging
 * directory as needed). step >= 0, 0 <= rank < world. save_id: the save's id, the same on every
 * rank (zero_ckpt_new_id on one rank, broadcast); NULL makes one, for a world of 1 only. The rank
 * file records it, and the commit and every later open check that each rank file is of this
 * save. io: not owned; NULL: the default.
 * The save directory DIR is the caller's path, followed as given; inside it zero works relative
 * to the directory opened once, creates with O_EXCL | O_NOFOLLOW, renames and removes without
 * following a link, and touches only names it gives (latest, lock, step_*): rank 0 first checks
 * that each of them is what zero made (latest and lock regular files, step_* directories of this
 * user, holding only zero's files where this save writes or may remove) and refuses otherwise
 * (ZERO_ERR_STATE naming the entry) before anything is written. */
zero_status zero_ckpt_writer_begin(zero_ckpt_writer **out, zero_io *io, const char *dir, int64_t step,
                                   int rank, int world, const char *save_id, zero_error *err);
/* The check zero_ckpt_writer_begin makes of a save directory, for a program to run before it
 * trains (for a save of any step): ZERO_OK, also when dir does not exist yet. */
zero_status zero_ckpt_save_dir_check(const char *dir, zero_error *err);
/* The save's id (save_id, or the one begin made). */
const char *zero_ckpt_writer_save_id(const zero_ckpt_writer *w);
/* Declares a logical tensor of numel elements, sharded as partition.h says with `align`: this
 * rank's file holds its valid slice [rank*S, rank*S + valid) as a 1-D tensor of that name.
 * Every rank declares the same tensors in the same order (e.g. "h.0/master", "h.0/exp_avg"). */
zero_status zero_ckpt_writer_add(zero_ckpt_writer *w, const char *name, zero_dtype dt, uint64_t numel,
                                 uint64_t align);
/* Elements this rank must write for the i-th declared tensor (its `valid`). */
uint64_t zero_ckpt_writer_slice(const zero_ckpt_writer *w, int i);
/* Appends this rank's slices' bytes, tensor after tensor in declaration order, any chunking. */
zero_status zero_ckpt_writer_write(zero_ckpt_writer *w, const void *data, size_t n);
/* The rank file is complete and durable under its final name in the staging directory. */
zero_status zero_ckpt_writer_finish(zero_ckpt_writer *w);
/* Rank 0, after every rank's finish succeeded: checks every rank file, writes manifest.json (the
 * engine's JSON object `manifest_json` plus format_version, step, world, files, tensors — keys
 * the engine must not use), COMMIT, renames the staging directory to DIR/step_%08lld (or
 * step_%08lld.N when that name is taken by an earlier save of the same step), replaces
 * DIR/latest, fsyncing files and directories at each stage; then removes uncommitted step
 * directories and older saves of the same step. On error `latest` still names the previous
 * checkpoint (or, if only the last directory fsync failed, the new and complete one). */
zero_status zero_ckpt_commit(zero_ckpt_writer *w, const char *manifest_json);
/* (zero_ckpt_commit_engine, below: the same with the engine's typed manifest.) */
/* Frees the writer (NULL is a no-op); an unfinished rank file is removed. */
void zero_ckpt_writer_free(zero_ckpt_writer *w);
const char *zero_ckpt_writer_last_error(const zero_ckpt_writer *w);
/* After a successful commit: the step directory's name ("step_00000100"), else "". */
const char *zero_ckpt_writer_committed_name(const zero_ckpt_writer *w);

/* Retention (`--save-total-limit N`, HF Trainer's save_total_limit): removes the committed step
 * directories of DIR but the `keep` (>= 1) most recently saved (by their COMMIT's time) and the
 * one `latest` names, which is always kept (it counts as one of the `keep`). Staging directories
 * (a save in progress) are not touched; a directory holding anything but zero's files, or not of
 * this user, is left in place with a warning through the log (docs/SECURITY.md, rule 7); nothing
 * is followed through a link. *removed (may be NULL): directories removed. */
zero_status zero_ckpt_prune(const char *dir, int keep, int *removed, zero_error *err);

/* One save directory belongs to one run: the run (its rank 0) holds DIR/lock (created when
 * missing, never through a link), an advisory lock held until released or the process ends,
 * however it ends. A lock another process holds is ZERO_ERR_STATE naming that run's pid and host. */
typedef struct zero_ckpt_lock zero_ckpt_lock;
zero_status zero_ckpt_lock_acquire(zero_ckpt_lock **out, const char *dir, zero_error *err);
void zero_ckpt_lock_release(zero_ckpt_lock *l); /* NULL is a no-op */

typedef struct zero_ckpt zero_ckpt;

typedef struct zero_ckpt_tensor {
    const char *name;
    zero_dtype dtype;
    uint64_t numel;
    uint64_t align;
} zero_ckpt_tensor;

enum {
    ZERO_CKPT_VERIFY = 1u << 0, /* open verifies every checksum of every file (reads it all) */
};

/* Opens a step directory, or a save directory (follows its `latest`; see zero_ckpt_note). The
 * directory given is followed as given; what it names (latest, the step directory, manifest.json,
 * COMMIT, the rank files) must be what it claims or a symbolic link resolving inside the
 * directory that names it (docs/SECURITY.md, rule 1). Each rank file must carry the manifest's
 * save id (format_version 2). Refuses, with
 * ZERO_ERR_FORMAT and a message naming the file: no COMMIT, another format_version, a manifest
 * that is not one JSON object with nothing after it, whose checksum ("manifest_crc32c", its last
 * key) does not match its bytes, or whose engine part is invalid (above), a missing,
 * truncated or foreign rank file, a rank file whose slices disagree with the manifest, and with
 * ZERO_CKPT_VERIFY a checksum mismatch (naming the file and the tensor). io: not owned; NULL: default. */
zero_status zero_ckpt_open(zero_ckpt **out, zero_io *io, const char *path, unsigned flags, zero_error *err);
void zero_ckpt_close(zero_ckpt *c); /* NULL is a no-op */
const char *zero_ckpt_last_error(const zero_ckpt *c);
const char *zero_ckpt_dir(const zero_ckpt *c);      /* the step directory opened */
/* What open chose that a program should tell its user, or "": a save directory whose `latest`
 * is missing, or older than a step committed after it (a run stopped between publishing a step
 * and replacing `latest`), opens that newest committed step, and says so here. */
const char *zero_ckpt_note(const zero_ckpt *c);
const char *zero_ckpt_save_id(const zero_ckpt *c);  /* the save's id ("" for format_version 1) */
int64_t zero_ckpt_step(const zero_ckpt *c);
int zero_ckpt_world(const zero_ckpt *c);            /* world size it was saved with */
const char *zero_ckpt_manifest(const zero_ckpt *c); /* manifest.json's text (for display: read fields with zero_ckpt_engine_manifest) */
int zero_ckpt_num_files(const zero_ckpt *c);        /* = world */
void zero_ckpt_file_info(const zero_ckpt *c, int i, const char **name, uint64_t *bytes);
int zero_ckpt_num_tensors(const zero_ckpt *c);
zero_status zero_ckpt_tensor_info(const zero_ckpt *c, int i, zero_ckpt_tensor *out);
int zero_ckpt_find(const zero_ckpt *c, const char *name); /* index, or -1 */
/* Elements [lo, hi) of logical tensor `name` (hi <= numel) into dst as fp32 (converted from a
 * bf16/fp16 file; other dtypes: use _raw). Reads only those byte ranges of the files that hold
 * them; a piece that covers a rank's whole slice is checked against its checksum on the way. */
zero_status zero_ckpt_read_range(zero_ckpt *c, const char *name, uint64_t lo, uint64_t hi, float *dst);
/* As above in the stored dtype: (hi - lo) * dtype size bytes. */
zero_status zero_ckpt_read_range_raw(zero_ckpt *c, const char *name, uint64_t lo, uint64_t hi, void *dst);
/* Verifies every checksum of every file; ZERO_ERR_FORMAT naming the file and the tensor. */
zero_status zero_ckpt_verify(zero_ckpt *c);

/* ================================================================ the engine's manifest
 * The engine's part of manifest.json (docs/CHECKPOINT.md, "manifest.json"), typed. zero_engine_save
 * writes it with zero_ckpt_commit_engine; zero_engine_load, `zero inspect`, `zero export` and
 * --init-from read it with zero_ckpt_engine_manifest: nobody else parses the JSON. One function,
 * zero_manifest_validate, says what a valid one is, and both sides apply it:
 *   - stage 0..3; precision fp32, bf16 or fp16; align >= 1; engine_step = the checkpoint's step;
 *     an optimizer name and 0..2 state arrays; a finite loss scale > 0, delayed_shift >= 0,
 *     iter >= 0, last_overflow_iter >= -1;
 *   - units: at least one, names unique and not empty, numel >= 1; each unit's parameters
 *     (names unique over the manifest, 1..8 dimensions >= 1) lie back to back from offset 0 to
 *     the unit's numel: no gap, no overlap, nothing past the end;
 *   - user_json: NULL or a JSON object with nothing after it.
 * Reading also checks the manifest's own checksum and the tensors (every unit's "<unit>/master"
 * and optimizer states, F32, the unit's numel, the manifest's align). A unit with frozen
 * parameters (ZERO_PARAM_FROZEN) stores only its trainable part there: its trainable parameters
 * back to back in order (none at all when every parameter is frozen), and optionally its frozen
 * ones back to back in "<unit>/frozen" (F32, BF16 or F16); a parameter's place in its tensor is
 * the sum of the sizes of the unit's earlier parameters of the same kind. */
typedef struct zero_manifest_param {
    const char *name;
    int ndim;                        /* 1..ZERO_ST_MAX_DIMS */
    int64_t shape[ZERO_ST_MAX_DIMS];
    uint64_t offset;                 /* first element inside its unit */
    uint64_t numel;                  /* the product of the shape (set by the reader; the writer computes it) */
    int no_decay;                    /* registered with ZERO_PARAM_NO_DECAY */
    int frozen;                      /* registered with ZERO_PARAM_FROZEN ("frozen": true; absent: false) */
} zero_manifest_param;

typedef struct zero_manifest_unit {
    const char *name;
    uint64_t numel;                  /* the sum of its parameters' */
    int first_param, nparams;        /* its parameters: params[first_param, first_param + nparams) */
} zero_manifest_unit;

typedef struct zero_manifest_scaler {
    double scale;                    /* 1 unless fp16 */
    int delayed_shift;
    int64_t iter, last_overflow_iter;
} zero_manifest_scaler;

typedef struct zero_manifest {
    int stage;                       /* the stage that saved it (any stage loads it) */
    zero_dtype precision;            /* ZERO_DTYPE_FP32, _BF16 or _FP16 */
    uint64_t align;                  /* partition alignment of every tensor, in elements */
    int64_t engine_step;             /* optimizer steps taken: the checkpoint's step */
    const char *optimizer;           /* "AdamW", "Adam", "SGD", "Lion" (zero_optim_name) */
    int states;                      /* optimizer state arrays per element: 0..2 */
    zero_manifest_scaler scaler;
    int nunits;
    const zero_manifest_unit *units;
    int nparams;
    const zero_manifest_param *params; /* every unit's, in unit order */
    const char *user_json;           /* the caller's object ("user") as JSON text, or NULL */
} zero_manifest;

/* The checks above (those that need no tensor list): ZERO_ERR_INVALID_ARG naming the field and
 * the value. For a writer, before it commits. */
zero_status zero_manifest_validate(const zero_manifest *m, zero_error *err);
/* Rank 0, as zero_ckpt_commit, with the engine's typed manifest: validated (the tensors declared
 * must be the units' master and states), written with the layer's keys and a checksum. */
zero_status zero_ckpt_commit_engine(zero_ckpt_writer *w, const zero_manifest *m);
/* The validated engine manifest of an open checkpoint (owned by c), or NULL when its manifest
 * has no engine part (a checkpoint committed with other JSON through zero_ckpt_commit). */
const zero_manifest *zero_ckpt_engine_manifest(const zero_ckpt *c);
/* What a manifest records of the engine that wrote it, for display (`zero inspect`): from the
 * engine's part when there is one, else from keys of the same form another writer used ("stage",
 * "precision", "optimizer"."type", "units"[]."numel", "units"[]."params"[]."shape"): -1 / NULL
 * where not recorded. */
typedef struct zero_ckpt_summary {
    int stage;
    const char *precision;
    const char *optimizer;
    int units, params;
    double unit_elements, param_elements;
} zero_ckpt_summary;
void zero_ckpt_summary_get(const zero_ckpt *c, zero_ckpt_summary *out);
/* A number or a string of the manifest's "user" object (the caller's, e.g. what `zero train`
 * records of the run), by a dotted path ("model.n_layer"): ZERO_OK, or ZERO_ERR_FORMAT when the
 * path is absent or holds another type. The string stays valid while c is open. */
zero_status zero_ckpt_user_number(const zero_ckpt *c, const char *path, double *out);
zero_status zero_ckpt_user_string(const zero_ckpt *c, const char *path, const char **out);
/* An object or array of the "user" object by a dotted path, as compact JSON text in *out (malloc'd:
 * the caller frees it with free()); ZERO_ERR_FORMAT when the path is absent or holds a scalar. */
zero_status zero_ckpt_user_json(const zero_ckpt *c, const char *path, char **out);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_CKPT_H */
