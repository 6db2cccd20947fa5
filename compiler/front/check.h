/* Internal to the checker (check.c, check_expr.c, check_defs.c, check_starts.c,
 * check_fractions.c): the state of one check run and the expression typing shared by every
 * statement. */
#ifndef DIMOC_CHECK_H
#define DIMOC_CHECK_H

#include "front.h"

/* Where an expression stands decides which names it may use. */
enum {
    ALLOW_PARAM = 1 << DM_SYM_PARAM,
    ALLOW_MEASURE = 1 << DM_SYM_MEASURE,
    ALLOW_VOXEL = 1 << DM_SYM_VOXEL,
    ALLOW_LET = 1 << DM_SYM_LET,
    ALLOW_CONST = 1 << DM_SYM_CONST,
    ALLOW_ALL = ALLOW_PARAM | ALLOW_MEASURE | ALLOW_VOXEL | ALLOW_LET | ALLOW_CONST,
    ALLOW_PER_VOXEL = ALLOW_PARAM | ALLOW_VOXEL | ALLOW_LET | ALLOW_CONST,
};

/* What a let depends on, known once its definition is checked. */
typedef struct let_info {
    const char *measure;   /* a measure it uses (directly or through lets), or NULL */
    unsigned char *params; /* params[k]: it uses parameter k */
    int any_param;
} let_info;

/* Bounded sums (check_expr.c): at most DM_MAX_SUM_TERMS terms each (B - A <= 200), and at
 * most DM_MAX_SUM_NODES syntax nodes copied in all, which bounds nested sums. */
#define DM_MAX_SUM_TERMS 201
#define DM_MAX_SUM_NODES 200000

typedef struct checker {
    dm_model *m;
    dm_diag *d;
    let_info *lets;
    int nparams;
    const char *sum_vars[DM_MAX_EXPR_DEPTH + 1]; /* variables of the sums being expanded */
    int nsum_vars;
    long sum_nodes; /* nodes copied by sum expansion so far */
    int ninlined;   /* definitions being inlined, one inside another (check_expr.c) */
    long inlined_nodes;
    int renamed_vars; /* sum variables of inlined bodies renamed so far */
} checker;

/* One expression's context and what it was found to use. */
typedef struct expr_ctx {
    const char *what;      /* "the signal", "output 'x'", ... for messages */
    int allow;             /* ALLOW_* mask */
    int let_limit;         /* lets from this index on are not defined yet */
    int self_let;          /* the let being defined, or -1 */
    unsigned char *params; /* marks parameters used (may be NULL) */
    int any_param;
    const char *measure; /* a measure used, or NULL */
} expr_ctx;

/* Type E in context X (sets type, width, sym, fn); reports errors, returns DM_T_UNKNOWN on
 * any, silently when a sub-expression already failed. */
dm_type dm_check_expr(checker *c, expr_ctx *x, dm_expr *e);

/* Check E as a constant scalar expression (numbers, pi, inf, operators, and built-ins that
 * can be evaluated on constants) and evaluate it.  Returns 1 when valid. */
int dm_const_value(checker *c, dm_expr *e, const char *what, double *out);

/* Where E begins in the source (a binary node's own location is its operator). */
dm_loc dm_expr_start(const dm_expr *e);

/* A deep copy of E.  HOOK (may be NULL) sees every node first: a non-NULL result stands for
 * that node's copy. */
typedef dm_expr *(*dm_copy_hook)(checker *c, const dm_expr *e, void *env);
dm_expr *dm_copy_expr(checker *c, const dm_expr *e, dm_copy_hook hook, void *env);
/* The number of nodes of E (sum terms and call arguments included). */
long dm_count_nodes(const dm_expr *e);

/* Functions and compartments by name (check_expr.c, which inlines every call of one: the call
 * replaced by a checked copy of the body, its arguments in place). */
dm_definition *dm_definition_find(const dm_model *m, const char *name);
/* "function" or "compartment". */
const char *dm_definition_word(const dm_definition *def);
/* "unknown function 'x'" (or compartment), with the nearest built-in or definition. */
void dm_unknown_call(checker *c, dm_loc loc, const char *name);
/* A name S that a definition uses and that is none of its own (S NULL: the model has none of
 * that name): allowed, or reported at E. */
int dm_free_name_allowed(const dm_definition *def, const dm_symbol *s);
void dm_report_free_name(checker *c, const dm_definition *def, const dm_expr *e,
                         const dm_symbol *s);
/* The definitions themselves (check_defs.c), after the model's names are declared. */
void dm_check_definitions(checker *c);

/* The data-driven starts and `multistart` (check_starts.c); after the measures' checks. */
void dm_check_starts(checker *c);

/* `fractions` sets (check_fractions.c): expanded into parameters, a let, a constraint and an
 * output before names are declared; checked to be able to sum to one after the parameters. */
void dm_expand_fractions(checker *c);
void dm_check_fractions(checker *c);

void dm_undefined_name(checker *c, dm_loc loc, const char *name);
const char *dm_kind_words(dm_symbol_kind k);
const char *dm_type_words(dm_type t, int width);
int dm_reject_array(checker *c, const dm_expr *e);

#endif
