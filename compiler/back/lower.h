/* The back end's intermediate form: straight-line code of scalar operations in SSA form
 * (every value is an instruction, operands always come earlier), built through a value
 * numbering table so that a subexpression computed twice is one instruction, with constants
 * folded as they are built.  lower.c turns checked syntax trees into it (3-vectors become
 * three scalars, lets are lowered once and shared); deriv.c adds forward-mode partial
 * derivatives to the same program; split.c separates its per-voxel from its per-measurement
 * work; flops.c counts it; emit.c prints it as C. */
#ifndef DIMOC_LOWER_H
#define DIMOC_LOWER_H

#include <stdio.h>
#include "ast.h"
#include "front/diag.h"

typedef enum dm_irop {
    DM_IR_CONST,   /* num */
    DM_IR_PARAM,   /* p[index] */
    DM_IR_MEASURE, /* m[index] (a column of the packed per-measurement row) */
    DM_IR_VOXEL,   /* v[index] */
    DM_IR_NEG,
    DM_IR_ADD,
    DM_IR_SUB,
    DM_IR_MUL,
    DM_IR_DIV,
    DM_IR_LT, /* comparisons and logic give 0 or 1 (an int in generated code) */
    DM_IR_LE,
    DM_IR_GT,
    DM_IR_GE,
    DM_IR_EQ,
    DM_IR_NE,
    DM_IR_NOT,
    DM_IR_AND,
    DM_IR_OR,
    DM_IR_SELECT, /* arg0 ? arg1 : arg2 */
    DM_IR_CALL,   /* fn(arg0, ...); functions with an order (dm_mathfn_info.ordered): index */
} dm_irop;

/* Functions of the generated code (templates/maths/mathlib.h or the C/CUDA math library). */
typedef enum dm_mathfn {
    DM_MF_NONE = -1,
    DM_MF_EXP,
    DM_MF_LOG,
    DM_MF_LOG1P,
    DM_MF_SQRT,
    DM_MF_SIN,
    DM_MF_COS,
    DM_MF_TAN,
    DM_MF_ASIN,
    DM_MF_ACOS,
    DM_MF_ATAN,
    DM_MF_ATAN2,
    DM_MF_SINH,
    DM_MF_COSH,
    DM_MF_TANH,
    DM_MF_FABS,
    DM_MF_POW,
    DM_MF_FLOOR,
    DM_MF_ERF,
    DM_MF_DAWSON,
    DM_MF_LGAMMA,
    DM_MF_LOG_I0,
    DM_MF_LEGENDRE,
    DM_MF_STICK_SH,       /* dm_stick_sh(l, x): Legendre coefficient l of a stick */
    DM_MF_WATSON_SH,      /* dm_watson_sh(l, kappa): Watson coefficient l */
    DM_MF_LOG_HYP1F1_DEP, /* dm_log_hyp1f1_dep(which, c1, c0): Bingham 1F1 and partials */
    DM_MF_BINGHAM_MOMENT, /* dm_bingham_moment(i, a0, a1, a2): <n_i^2> of a Bingham */
    DM_MF_BESSEL_J0,
    DM_MF_BESSEL_J1,
    DM_MF_BESSEL_J1P_ROOT,  /* no arguments, the order n: always folded to a constant */
    DM_MF_BESSEL_SJ1P_ROOT, /* likewise */
    /* helpers that only derivative code calls */
    DM_MF_BESSEL_I1_I0,
    DM_MF_LEGENDRE_DERIV,
    DM_MF_BESSEL_J1_DERIV,
    DM_MF_FD_STEP,
    DM_MF_COUNT
} dm_mathfn;

typedef struct dm_mathfn_info {
    const char *c_name; /* name in generated code */
    int nargs;          /* real arguments (the Legendre order is not one of them) */
    int transcendental; /* counted apart by the flop counter */
    double (*fold)(const double *args, int order); /* value on constants */
    int ordered; /* 1: a constant integer (dm_ins.index) precedes the arguments */
    /* The family version of an ordered function, or NULL: family(args..., out) fills out[i]
     * with the value of order i for every i < family_len, bit for bit, in one pass; with
     * family_len 0 the orders run from 0 to the largest one asked for, passed first
     * (family(max, args..., out)).  Several orders of one argument list in one function are
     * computed by one family call (dm_ir_families). */
    const char *family;
    int family_len;
} dm_mathfn_info;

const dm_mathfn_info *dm_mathfn_get(dm_mathfn f);

#define DM_IR_MAX_ARGS 3

typedef struct dm_ins {
    dm_irop op;
    dm_mathfn fn;
    int index;
    double num;
    int nargs;
    int arg[DM_IR_MAX_ARGS];
    /* The let this value is, for a comment in the generated code (NULL: none); note_comp is
     * the vector component (0..2), 3 + the row-major index of a matrix entry, or -1. */
    const char *note;
    int note_comp;
} dm_ins;

/* One function's program.  Lowering state (the lets already lowered) is per program since
 * value ids are. */
typedef struct dm_prog {
    const dm_model *model;
    dm_ins *ins;
    int n, cap;
    int *table; /* open-addressing hash of instruction ids, for value numbering */
    int table_cap;
    int *let_val;        /* DM_MAX_WIDTH value ids per let, -1 until lowered */
    int *let_width;      /* 0 until lowered, -1 while being lowered */
    int allow_measures;  /* 0 in functions without a measurement row */
    const char *context; /* "output OD", ... for error messages */
    dm_diag *diag;
    int failed;
    /* A stage program's (stage.c): voxel columns from this index on are the stage's values of
     * its held parameters (dm_voxel_extend), not voxel inputs; -1 in any other program. */
    int stage_first;
} dm_prog;

void dm_prog_init(dm_prog *P, const dm_model *m, dm_diag *diag);
void dm_prog_free(dm_prog *P);
/* dst (initialised) becomes a copy of src's instructions, the same ids for the same values. */
void dm_prog_copy(dm_prog *dst, const dm_prog *src);

/* Builders: each returns the id of the value, reusing an equal instruction when one exists
 * and folding constants. */
int dm_ir_const(dm_prog *P, double value);
int dm_ir_leaf(dm_prog *P, dm_irop op, int index);
int dm_ir_unary(dm_prog *P, dm_irop op, int a);
int dm_ir_binary(dm_prog *P, dm_irop op, int a, int b);
int dm_ir_select(dm_prog *P, int cond, int a, int b);
int dm_ir_call(dm_prog *P, dm_mathfn fn, int order, const int *args);
/* 1 and *value set when value id is a constant. */
int dm_ir_const_value(const dm_prog *P, int id, double *value);
/* 1 when the value is an int (a comparison or logic result) in generated code. */
int dm_ir_is_bool(const dm_prog *P, int id);

/* Lowers a checked expression into out[0..width-1]; returns its width (1, 3 or 9), or -1 after
 * reporting an error through P->diag. */
int dm_lower_expr(dm_prog *P, const dm_expr *e, int out[DM_MAX_WIDTH]);

/* Forward mode (deriv.c): partial[k] receives the id of d(root)/d(p[k]) for k < nparams, or
 * -1 where it is identically zero.  Derivative instructions are added to P. */
void dm_differentiate(dm_prog *P, int root, int nparams, int *partial);

/* The family calls among the instructions with mark[i] != 0: the calls of one function that
 * has a family version (dm_mathfn_info.family) with the same arguments form a group, computed
 * by one call of the family.  leader[i] is the first marked member of i's group (i itself for
 * any other instruction); for a leader, members[i] is the group's size and top[i] the largest
 * order in it.  A group of one is an ordinary call. */
void dm_ir_families(const dm_prog *P, const char *mark, int *leader, int *members, int *top);

/* live[i] = 1 for every instruction some root depends on (roots < 0 are ignored). */
void dm_ir_live(const dm_prog *P, const int *roots, int nroots, char *live);

/* Hoisting (split.c): a function of (p, m, v) evaluated for every measurement of a voxel is
 * split into a part that depends on no measurement input, run once per voxel ("prepare"),
 * and the per-measurement rest ("at"), which reads the invariant values it needs from a
 * small array pre[].  A third class is the costly per-measurement work that depends on no
 * parameter (a special function of b d_par with d_par a voxel input, the ball's exp(-b d_iso)):
 * it is the same at every point a fit tries, so it is computed once per voxel and measurement
 * before the fit ("fix") and read from the measurement row, extended by DM_FIX_WIDTH columns
 * (templates/fit/model_api.h).  Arrays of P->n entries (as of the split) indexed by instruction id:
 *   varying[i]    1: depends on a measurement column;
 *   at_code[i]    1: computed per measurement (a varying value the roots need), or a
 *                 measurement or voxel column read there (voxel columns are read from v
 *                 directly rather than copied into pre);
 *   slot[i]       index in pre[] of an invariant value the per-measurement part reads
 *                 (a parameter or a computed value; a root too when it is invariant), or -1;
 *   prep_code[i]  1: needed to fill pre[] (live for the slot values);
 *   fix_slot[i]   index among the fixed columns of a value the per-measurement part reads
 *                 from the extended row, or -1;
 *   fix_code[i]   1: needed to compute the fixed values from (m, v);
 *   stage_code[i] 1: needed to compute a stage program's fixed values that read its stage
 *                 values (stage.c) from the row of the others and v.
 * slot_ins[j] is the instruction of slot j, fix_ins[k] that of fixed column k, each in
 * ascending order.  Constants are literals and never take a slot.  The first nfix_base fixed
 * columns read no stage value (the base, made once for all voxels of the same inputs); the
 * others are a stage program's, made per voxel from the base (all are base elsewhere). */
typedef struct dm_split {
    int n;
    char *varying, *at_code, *prep_code, *fix_code, *stage_code;
    int *slot, *fix_slot;
    int *slot_ins, *fix_ins;
    int nslots, nfix, nfix_base;
} dm_split;

/* fixed_from: NULL to choose the fixed values (the signal's split); else the split of the
 * program fixed_prog whose fixed columns this split must read (the gradient reads the
 * signal's columns: its program lowered the signal first, so the same instruction ids are the
 * same values; a fixed value of fixed_prog that this program lacks is not read). */
void dm_split_program(const dm_prog *P, const int *roots, int nroots, const dm_prog *fixed_prog,
                      const dm_split *fixed_from, dm_split *S);
void dm_split_free(dm_split *S);

/* Operation counts (flops.c) of the live instructions for the given roots: + - * / and
 * negation count 1, as does every call; calls of transcendental functions are also counted
 * in *transcendental; comparisons, logic and selects count 0. */
long dm_count_flops(const dm_prog *P, const int *roots, int nroots, long *transcendental);
/* The same count over the instructions with mark[i] != 0 (a split's at_code or prep_code). */
long dm_count_flops_marked(const dm_prog *P, const char *mark, long *transcendental);

#endif
