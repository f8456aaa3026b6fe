/* Private parts of the config layer: the key schema (one table drives loading, checking and
 * writing JSON) and the helpers that its custom entries share. Never installed. */
#ifndef ZERO_CONFIG_INTERNAL_H
#define ZERO_CONFIG_INTERNAL_H

#include "common/internal.h"
#include "zero/config.h"

#include <cjson/cJSON.h>
#include <stddef.h>

/* How a key's value is stored in zero_config. */
typedef enum zc_kind {
    ZC_OBJECT = 0, /* a JSON object described by `children` */
    ZC_BOOL,       /* int field holding 0/1 */
    ZC_INT,        /* int field, integral JSON number */
    ZC_I64,        /* int64_t field, integral JSON number */
    ZC_F32,        /* float field */
    ZC_F64,        /* double field */
    ZC_CUSTOM,     /* load/check/save functions do everything */
} zc_kind;

enum zc_flags {
    ZC_AUTO = 1u << 0,      /* "auto" accepted: sets auto_bit | auto_group in cfg->auto_fields */
    ZC_OFF_ONLY = 1u << 1,  /* known, not implemented: only off_value (false for booleans) is accepted */
    ZC_NO_EFFECT = 1u << 2, /* type- and range-checked, then ignored (documented as "no effect") */
    ZC_NULL_OK = 1u << 3,   /* null accepted and means "absent" */
    ZC_LO_OPEN = 1u << 4,   /* range excludes lo */
    ZC_HI_OPEN = 1u << 5,   /* range excludes hi */
    ZC_NOSAVE = 1u << 6,    /* an alias or deprecated spelling: never written by to_json */
    ZC_UNSET0 = 1u << 7,    /* the field's 0 means "not given": skipped by checks and by to_json */
    ZC_UNSET_NEG = 1u << 8, /* the field's -1 means "decided by resolve": skipped likewise */
    ZC_POW2 = 1u << 9,      /* the value must be a power of two */
    /* a section DeepSpeed reads through pydantic (lax mode): inside it a number may be written as a
     * string ("5e8", "16") and a boolean as one of pydantic's words ("true", "off", "1"), as there */
    ZC_PYDANTIC = 1u << 10,
};

typedef struct zc_ctx zc_ctx;
typedef struct zc_key zc_key;

struct zc_key {
    const char *name;       /* NULL ends a table */
    zc_kind kind;
    unsigned flags;         /* enum zc_flags */
    size_t off;             /* offsetof the field in zero_config (stored kinds and some customs) */
    double lo, hi;          /* accepted range of numbers (inclusive unless ZC_*_OPEN) */
    double off_value;       /* ZC_OFF_ONLY numbers: the one value accepted */
    int64_t multiple_of;    /* integers: the value must be a multiple of this (0: any) */
    unsigned auto_bit;      /* ZC_AUTO: the ZERO_AUTO_* bit of this very key (to_json writes "auto" when set) */
    unsigned auto_group;    /* ZC_AUTO: the coarse ZERO_AUTO_* bit also set (0: none) */
    unsigned set_bit;       /* a ZERO_SET_* bit set in cfg->set_fields when the key is given; to_json
                             * writes the key only when the bit is set */
    unsigned types;         /* inside optimizer/scheduler params: bit (1u << type) of each type that takes
                             * the key; 0: every type */
    const zc_key *children; /* ZC_OBJECT, and custom sections (so suggestions can search them) */
    zero_status (*load)(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg);
    zero_status (*check)(zc_ctx *c, const zc_key *k, const zero_config *cfg);
    int (*save)(const zc_key *k, const zero_config *cfg, cJSON *parent); /* 0, or -1 out of memory */
    const char *hint;       /* appended to "not supported yet" errors: what to do instead */
};

/* Loading/checking state: the error sink and the key path of the value at hand. */
struct zc_ctx {
    zero_error *err;
    const cJSON *root; /* the document (a key whose meaning depends on another's: bfloat16 beside bf16) */
    char path[384];
    size_t len;
    /* params tables: which type is being read (bit), and the names for messages */
    unsigned type_bit;
    const char *const *type_names;
    int type_count;
    /* the document's fp16.enabled / bf16.enabled (-1: absent or "auto"), applied at the end */
    int fp16_on, bf16_on;
    /* optimizer.params.adam_w_mode (-1: absent, DeepSpeed's default true) */
    int adam_w_mode;
    /* inside a ZC_PYDANTIC section: strings coerce to numbers and booleans as pydantic does */
    int lax;
    /* Loading reports every problem of a document at once (a config with five unsupported keys is
     * one run, not six): zero__zc_walk notes each key's message here and goes on with the next key.
     * `problems`: the messages in document order, one a line (malloc'd; NULL until the first). */
    int nproblems;
    zero_status first_problem; /* the status of the first (ZERO_ERR_CONFIG or ZERO_ERR_UNSUPPORTED) */
    char *problems;
    size_t problems_len, problems_cap;
};

/* The root table of the schema (keys.c). */
const zc_key *zero__config_schema(void);
/* zero_hpz_partition_size against the stage, the world size and parameter offload (resolve, and
 * zero_engine_create for a config that skipped it): ZERO_OK, or a status with the reason in msg
 * (cap bytes; msg may be NULL), naming the key. */
zero_status zero__config_check_hpz(const zero_config *t, int world, char *msg, size_t cap);
/* zero_extensions.optimizer_states against the optimizer and NVMe offload (config resolution and the
 * engine both: a program may set the fields directly). */
zero_status zero__config_check_states(const zero_config *t, char *msg, size_t cap);

/* Finishes a document after all its keys were read: the fp16/bf16 pair (keys.c). */
zero_status zero__config_finish(zc_ctx *c, zero_config *cfg);

/* ---- path and errors (load.c) ---- */
void zero__zc_init(zc_ctx *c, zero_error *err);
size_t zero__zc_push(zc_ctx *c, const char *name); /* returns the length to pop back to */
size_t zero__zc_push_index(zc_ctx *c, int index);
void zero__zc_pop(zc_ctx *c, size_t len);
/* Writes "<path>: <message>" into the error and returns st. */
zero_status zero__zc_fail(zc_ctx *c, zero_status st, const char *fmt, ...) ZERO__PRINTF(3, 4);
/* "<path>: expected <expected>, found <what v is>" (ZERO_ERR_CONFIG). */
zero_status zero__zc_type_error(zc_ctx *c, const char *expected, const cJSON *v);
/* Formats a number the shortest way that reads back exactly. */
const char *zero__zc_num(char buf[40], double v);
/* Whether v is the string "auto". */
int zero__zc_is_auto(const cJSON *v);
/* A boolean as DeepSpeed takes it: true/false, or the number 0 or 1 (its pydantic sections coerce
 * them, its plain ones test their truth). 1 with *on set, 0 when v is neither. */
int zero__zc_bool(const cJSON *v, int *on);
/* zero__zc_bool, and inside a ZC_PYDANTIC section pydantic's words too (c->lax). */
int zero__zc_lax_bool(const zc_ctx *c, const cJSON *v, int *on);
/* A number: a JSON number, or inside a ZC_PYDANTIC section a string pydantic coerces (an integer
 * for an integer key: digits with an optional sign; a decimal or exponent number otherwise,
 * surrounding white space allowed). 1 with *out set, else 0. */
int zero__zc_lax_number(const zc_ctx *c, const cJSON *v, int integer, double *out);
/* Checks a number against k's range, integrality, multiple and power-of-two rules. */
zero_status zero__zc_check_number(zc_ctx *c, const zc_key *k, double v);
/* Reads the keys of JSON object `obj` through table `keys` into cfg. A key whose value is wrong or
 * not supported (ZERO_ERR_CONFIG, ZERO_ERR_UNSUPPORTED) is noted in c->problems (unless a walk
 * inside it noted its own) and the walk goes on; it returns the status of the first such key, or
 * at once any other status (out of memory). c->err must not be NULL. */
zero_status zero__zc_walk(zc_ctx *c, const zc_key *keys, const cJSON *obj, zero_config *cfg);

/* ---- checks of a whole config (resolve.c) ---- */
zero_status zero__zc_check_table(zc_ctx *c, const zc_key *keys, const zero_config *cfg);

/* ---- writing (to_json.c) ---- */
int zero__zc_save_table(const zc_key *keys, const zero_config *cfg, unsigned type_bit, cJSON *obj);

/* ---- suggestions (suggest.c) ---- */
/* Optimal-string-alignment distance between a and b, case-insensitive. */
int zero__zc_edit_distance(const char *a, const char *b);
/* The key of `keys` (taken by type_bit) nearest to name, or NULL when none is close enough. */
const zc_key *zero__zc_nearest(const char *name, const zc_key *keys, unsigned type_bit);
/* Writes into out the full path of a key named `name` (case-insensitive) anywhere in the schema
 * other than `skip`; returns 1 when found. */
int zero__zc_find_elsewhere(const char *name, const zc_key *skip, char *out, size_t cap);

#endif
