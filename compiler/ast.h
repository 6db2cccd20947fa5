/* Syntax tree of a .model file, as built by the parser (parser.y) and annotated by the
 * checker (check.c).  Every node keeps its source location so that any later stage can
 * report an error with a caret.  Nodes are allocated from an arena owned by dm_model and
 * freed with it in one go. */
#ifndef DIMOC_AST_H
#define DIMOC_AST_H

#include <stddef.h>

typedef struct dm_loc {
    int line, col; /* 1-based */
    int file;      /* index into dm_model.sources: 0 the model file, >0 an imported file */
} dm_loc;

/* Value types of expressions.  ARRAY is a per-measurement or per-voxel input whose width
 * is neither 1 nor 3: it can only be indexed with a constant.  MAT3 is a 3x3 matrix, 9
 * values in row-major order (only expressions and lets have it: no input or output). */
typedef enum dm_type {
    DM_T_UNKNOWN = 0,
    DM_T_SCALAR,
    DM_T_VEC3,
    DM_T_ARRAY,
    DM_T_MAT3,
} dm_type;

/* The most values one expression holds (a 3x3 matrix). */
#define DM_MAX_WIDTH 9

typedef enum dm_expr_kind {
    DM_E_NUM,     /* num */
    DM_E_NAME,    /* name; resolved to sym by the checker */
    DM_E_UNARY,   /* op a: '-', '!' */
    DM_E_BINARY,  /* a op b: + - * / ^ < > DM_OP_LE DM_OP_GE DM_OP_EQ DM_OP_NE DM_OP_AND DM_OP_OR */
    DM_E_TERNARY, /* a ? b : c */
    DM_E_CALL,    /* name(args...); resolved to fn by the checker */
    DM_E_INDEX,   /* a[b], b a constant expression */
    DM_E_SUM,     /* sum(name in a..b) c: name the variable (at var_loc), a and b constant
                   * integers, c the body as written; the checker expands it into args[0..nargs),
                   * one copy of c per value with the variable replaced by the number */
} dm_expr_kind;

enum { DM_OP_LE = 256, DM_OP_GE, DM_OP_EQ, DM_OP_NE, DM_OP_AND, DM_OP_OR };

struct dm_builtin;
struct dm_symbol;

typedef struct dm_expr {
    dm_expr_kind kind;
    dm_loc loc;
    double num;
    const char *name;
    int op;
    struct dm_expr *a, *b, *c;
    struct dm_expr **args;
    int nargs;
    int depth;      /* parser: height of this subtree (nesting is capped) */
    dm_loc var_loc; /* DM_E_SUM: where its variable is named */
    /* Filled by the checker. */
    dm_type type;
    int width;                   /* 1 scalar, 3 vec3, 9 mat3, n array */
    struct dm_symbol *sym;       /* DM_E_NAME */
    const struct dm_builtin *fn; /* DM_E_CALL */
    /* The root of an inlined function or compartment call: the call as written (its
     * arguments checked), for messages and `dimoc check`; the node itself holds the body. */
    const struct dm_expr *call;
    int as_argument; /* the root of an argument put in place of its name in an inlined body:
                      * loc is where the body names it, for messages about its use there */
} dm_expr;

typedef enum dm_prior_kind {
    DM_PRIOR_NONE = 0, /* flat within the bounds (also what `uniform` means) */
    DM_PRIOR_UNIFORM,
    DM_PRIOR_GAUSSIAN, /* gaussian(mean, sd):    energy (x-mean)^2 / (2 sd^2)  */
    DM_PRIOR_GAMMA,    /* gamma(shape, scale):   energy (1-shape) log x + x/scale */
    DM_PRIOR_ARD,      /* ard(weight):           energy weight * log x          */
    DM_PRIOR_SPHERE,   /* sphere:                energy -log|sin x / 2|          */
    DM_PRIOR_CUSTOM,   /* custom(expr):          energy -expr (expr a log density) */
} dm_prior_kind;

/* The prior's name as the metadata writes it ("none", "uniform", ... "custom"), and how many
 * constant arguments it has (value[0..n): gaussian and gamma 2, ard 1, the others 0). */
const char *dm_prior_kind_name(dm_prior_kind k);
int dm_prior_constant_args(dm_prior_kind k);

typedef struct dm_prior {
    const char *name; /* as written (parser); the checker sets kind from it */
    dm_prior_kind kind;
    dm_loc loc;
    dm_expr *args[2]; /* constant arguments (gaussian, gamma, ard); custom: args[0] */
    int nargs;
    double value[2]; /* args evaluated by the checker */
} dm_prior;

/* Where a parameter's start comes from (`init` clauses, docs/model-language.md). */
typedef enum dm_init_source {
    DM_INIT_CONST = 0, /* `init EXPR`, or the default rule */
    DM_INIT_B0,        /* `init b0` / `init from b0`: mean of the b=0 measurements (else largest) */
    DM_INIT_MD,        /* `init from md`: the mean diffusivity of the voxel's tensor fit */
    DM_INIT_THETA,     /* `init from theta(K)`: polar angle of the tensor's K-th eigenvector */
    DM_INIT_PHI,       /* `init from phi(K)`: its azimuth */
} dm_init_source;

/* The source's name as the metadata and `dimoc check` write it ("const", "b0", "md",
 * "theta", "phi"). */
const char *dm_init_source_name(dm_init_source s);

typedef struct dm_param {
    const char *name;
    dm_loc loc;
    int has_bounds;
    dm_expr *lo_expr, *hi_expr; /* constant expressions; may evaluate to +-inf */
    int lo_closed, hi_closed;   /* '[' / ']' */
    dm_expr *init_expr;         /* NULL: default init */
    dm_expr *init_from;         /* `init from X`: the data-driven rule as written */
    dm_loc init_from_loc;
    dm_init_source init_source; /* DM_INIT_B0 also for `init b0` (parser); others: checker */
    int init_axis;              /* theta/phi: the eigenvector K (1 = largest eigenvalue) */
    dm_expr *step_expr;         /* `step e`: initial MCMC proposal sd; NULL: default rule */
    dm_prior prior;
    int periodic;
    dm_expr *derivative; /* `derivative NAME = expr`: replaces the automatic one */
    dm_loc derivative_loc;
    /* Filled by the checker. */
    double lo, hi, init, step; /* step 0: default rule (see docs/model-language.md) */
    int used;                  /* the signal depends on it */
} dm_param;

typedef struct dm_input {
    const char *name;
    dm_loc loc;
    int width;          /* 1, 3, or n */
    const char *source; /* measure: bvals | bvecs | scheme | NULL (a --measure NAME=file) */
    dm_loc source_loc;  /* where the source is named */
    /* `= scheme COLUMN`: the column of the --scheme file (parser: NULL when not written;
     * checker: the measure's own name then). */
    const char *scheme_column;
    int has_default; /* voxel: `= value` */
    dm_expr *default_expr;
    double default_value;
    int column; /* first column of this input in the packed row (checker) */
} dm_input;

typedef struct dm_let {
    const char *name;
    dm_loc loc;
    dm_expr *value;
} dm_let;

typedef struct dm_constraint {
    dm_loc loc;
    dm_expr *cond; /* a comparison (or && / || of comparisons): true when allowed */
} dm_constraint;

typedef enum dm_output_kind {
    DM_OUT_SCALAR,
    DM_OUT_VECTOR, /* averaged component-wise over MCMC samples */
    DM_OUT_AXIS,   /* a direction up to sign: averaged through the dyadic tensor */
} dm_output_kind;

typedef struct dm_output {
    const char *name;
    dm_loc loc;
    dm_output_kind kind;
    dm_expr *value;
    int width;   /* checker: 1 or 3 */
    int column;  /* checker: first slot in the packed output row */
    int implied; /* the implied member of a `fractions` set: named by its let, not declared */
} dm_output;

/* `fractions A, B, ..., Z [init a, b, ...]`: volume fractions that sum to one, Z = 1 - the
 * others.  The checker expands it (check_fractions.c) into a parameter in [0, 1] for each free
 * member that no `param` line declares, a let Z, the constraint A + B + ... <= 1 and an output
 * Z. */
typedef struct dm_fractions {
    dm_loc loc;               /* the keyword */
    struct dm_expr **members; /* DM_E_NAME nodes, in order; the last is the implied one */
    int nmembers;
    struct dm_expr **inits; /* `init` values of the free members, or NULL */
    int ninits;
    dm_loc init_loc;
    int params_before; /* parameters declared above the statement: where its own go */
    int expanded;      /* checker: the set was valid and expanded */
} dm_fractions;

typedef enum dm_symbol_kind {
    DM_SYM_PARAM,
    DM_SYM_MEASURE,
    DM_SYM_VOXEL,
    DM_SYM_LET,
    DM_SYM_CONST, /* pi, inf, e */
} dm_symbol_kind;

typedef struct dm_symbol {
    const char *name;
    dm_symbol_kind kind;
    int index; /* into params / measures / voxels / lets */
    dm_type type;
    int width;
    double value; /* DM_SYM_CONST */
} dm_symbol;

/* One source file: the model file (index 0) or a file it imports, for diagnostics and the
 * source hash. */
typedef struct dm_source {
    const char *path; /* as opened (relative to the working folder, or absolute) */
    const char *text; /* NUL-terminated */
    size_t len;
    const char *real; /* canonical path, to import each file once (NULL: unknown) */
} dm_source;

/* `import "PATH"` as parsed: PATH relative to the folder of the file that holds it. */
typedef struct dm_import {
    const char *path;
    dm_loc loc;
} dm_import;

/* `function NAME(a, b) = EXPR` or `compartment NAME(a, b) { let t = ...  = EXPR }`: a
 * definition that the checker checks once (check_defs.c) and inlines at every call
 * (check_expr.c). */
typedef struct dm_definition {
    const char *name;
    dm_loc loc;
    int is_compartment;       /* a compartment may also name the model's measures */
    struct dm_expr **formals; /* DM_E_NAME nodes: the argument names and where they stand */
    int nformals;
    struct dm_let **locals; /* block form: local lets, in order */
    int nlocals;
    struct dm_expr *body;
    /* Filled by the checker. */
    int used;   /* called (directly or through another definition) by the model */
    int broken; /* part of a circular definition: calls fail silently */
} dm_definition;

/* A dynamic array of pointers to T, grown by the parser. */
#define DM_VEC(T)                                                                                  \
    struct {                                                                                       \
        T **items;                                                                                 \
        int n, cap;                                                                                \
    }

typedef struct dm_model {
    const char *file;   /* path as given, for diagnostics */
    const char *source; /* whole source text (NUL-terminated) */
    const char *name;
    const char *description;
    dm_loc name_loc;
    DM_VEC(dm_param) params;
    DM_VEC(dm_input) measures;
    DM_VEC(dm_input) voxels;
    DM_VEC(dm_let) lets;
    DM_VEC(dm_constraint) constraints;
    DM_VEC(dm_output) outputs;
    DM_VEC(dm_fractions) fractions;
    dm_expr *signal;
    dm_loc signal_loc;
    int nsignals;            /* >1 is an error reported by the checker */
    dm_loc extra_signal_loc; /* the second `signal`, when nsignals > 1 */
    /* `derivative NAME = expr` statements as parsed (name, its location, expr); the checker
     * attaches each to its parameter's `derivative`. */
    DM_VEC(dm_let) derivatives;
    DM_VEC(dm_source) sources; /* [0] is file/source; then the imported files, in order */
    DM_VEC(dm_import) imports; /* every `import`, of every file (front.c reads them) */
    DM_VEC(dm_definition) definitions;
    /* Filled by the checker. */
    DM_VEC(dm_symbol) symbols;
    int measure_width; /* columns of a packed per-measurement row */
    int voxel_width;   /* columns of a packed per-voxel row */
    int output_width;  /* slots of a packed derived-output row */
    int multistart;    /* `multistart N`: LM starts per voxel (1 without the statement) */
    dm_loc multistart_loc;
    struct dm_arena *arena;
} dm_model;

/* Arena allocation: everything hanging off a dm_model. */
void *dm_arena_alloc(dm_model *m, size_t size);
char *dm_arena_strdup(dm_model *m, const char *s);
void dm_vec_push_(dm_model *m, void *vec, void *item);
#define dm_vec_push(model, vec, item) dm_vec_push_((model), &(vec), (item))
void dm_model_free(dm_model *m);

dm_symbol *dm_model_lookup(dm_model *m, const char *name);

#endif
