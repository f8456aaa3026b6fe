/* src/template/internal.h — the template layer's private structures: the arena, values, the
 * syntax tree the parser builds and the renderer walks (one tree per template, read-only once built). */
#ifndef ZERO_TEMPLATE_INTERNAL_H
#define ZERO_TEMPLATE_INTERNAL_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "zero/template.h"

/* ---------------------------------------------------------------- arena */
/* Every allocation of a parse or a render comes from one arena, freed at once; errors leave by
 * longjmp to the entry point, which frees the arena (nothing else is held). */
typedef struct tp_arena {
    struct tp_blk *head;
    uint64_t used, limit;
    jmp_buf *jb;     /* where an allocation that fails or passes limit jumps */
    zero_error *err; /* and the message it leaves */
    zero_status *st;
} tp_arena;
void *zero__tp_alloc(tp_arena *a, size_t n); /* zeroed */
void zero__tp_arena_free(tp_arena *a);

/* ---------------------------------------------------------------- values */
typedef struct tp_str {
    const char *p;
    size_t n;
} tp_str;

enum {
    TV_UNDEF = 0, /* s: the name that was looked up (for the message) */
    TV_NONE,
    TV_BOOL,
    TV_INT,
    TV_FLOAT,
    TV_STR,
    TV_LIST,
    TV_DICT, /* also namespace() (ns = 1), mutable through set ns.x */
    TV_LOOP,
    TV_FUNC,  /* a global function: i = which */
    TV_MACRO, /* m: the macro's node */
};

typedef struct tp_val {
    uint8_t t;
    uint8_t ns;
    union {
        int64_t i;
        double f;
        tp_str s;
        struct tp_list *l;
        struct tp_dict *d;
        struct tp_loop *lp;
        const struct tp_node *m;
    } u;
} tp_val;

typedef struct tp_list {
    size_t n;
    tp_val *v;
} tp_list;

typedef struct tp_dict {
    size_t n, cap;
    tp_str *k;
    tp_val *v;
} tp_dict;

typedef struct tp_loop {
    const tp_list *items;
    size_t i;
} tp_loop;

/* ---------------------------------------------------------------- syntax tree */
enum {
    /* statements */
    TN_BODY,
    TN_TEXT,  /* s */
    TN_OUT,   /* {{ a }} */
    TN_IF,    /* a: condition, b: body, c: else (TN_IF for elif, TN_BODY for else) or NULL */
    TN_FOR,   /* names: targets, a: iterable, c: filter or NULL, b: body, d: else body or NULL */
    TN_SET,   /* names[0] (and attribute s when op = 1: set ns.s = a), a: value; op = 2: block, b: body */
    TN_MACRO, /* s: name, names: parameters, kids: defaults (NULL for none), b: body */
    TN_BREAK,
    TN_CONTINUE,
    TN_GEN, /* b: body */
    /* expressions */
    TN_LIT,    /* lit */
    TN_NAME,   /* s */
    TN_ATTR,   /* a.s */
    TN_INDEX,  /* a[b] */
    TN_SLICE,  /* a[b:c:d], each of b, c, d may be NULL */
    TN_CALL,   /* a(kids, kwn = kv) */
    TN_FILTER, /* a | s(kids, kwn = kv) */
    TN_TEST,   /* a is [not (op)] s(kids) */
    TN_BIN,    /* a op b */
    TN_CMP,    /* a op b */
    TN_AND,
    TN_OR,
    TN_NOT,
    TN_NEG,
    TN_POS,
    TN_COND, /* b if a else c (c may be NULL) */
    TN_LISTLIT,
    TN_DICTLIT, /* kids: keys, kv: values */
};

enum { OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT };
enum { CMP_EQ = 1, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_IN, CMP_NOTIN };

typedef struct tp_node {
    uint8_t k, op;
    int line;
    tp_str s;
    tp_val lit;
    struct tp_node *a, *b, *c, *d;
    struct tp_node **kids;
    int nk;
    struct tp_node **kv;
    tp_str *kwn;
    int nkw;
    tp_str *names;
    int nnames;
} tp_node;

struct zero_template {
    tp_arena arena;
    tp_node *root;
    int has_generation;
};

/* Python's str.isspace() for the code point at s (n bytes left); *len its length. */
int zero__tp_space_at(const char *s, size_t n, size_t *len);

#endif
