/* Hoisting of voxel-invariant work (lower.h, dm_split).
 *
 * A value is varying when it reads a measurement column or any varying value; everything else
 * (parameters, voxel columns, constants and what is built from them only) is the same for all
 * measurements of a voxel.  Walking back from the roots, a varying value is computed per
 * measurement and its operands are needed there in turn; an invariant value needed there is
 * where the walk stops: it becomes a slot of pre[], computed once by the prepare part.  So
 * pre[] holds exactly the invariant values the per-measurement code reads, not every
 * invariant temporary.  A varying value that reads no parameter and has a per-measurement call
 * in its cone, or in a stage program reads a stage's value, stops the walk the same way, as a
 * fixed column of the extended row. */
#include "lower.h"

#include <stdlib.h>
#include <string.h>

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) abort();
    return p;
}

/* Two instructions that compute the same value from the same operand ids. */
static int same_instruction(const dm_ins *a, const dm_ins *b)
{
    if (a->op != b->op || a->fn != b->fn || a->index != b->index || a->nargs != b->nargs ||
        memcmp(&a->num, &b->num, sizeof a->num) != 0)
        return 0;
    for (int j = 0; j < a->nargs; j++)
        if (a->arg[j] != b->arg[j]) return 0;
    return 1;
}

/* The fixed column of each instruction of P that fixed_prog's split fixed_from hoisted, when
 * P begins with fixed_prog's instructions (else none). */
static void inherit_fixed(const dm_prog *P, const dm_prog *fixed_prog, const dm_split *fixed_from,
                          int *fix_slot)
{
    if (fixed_prog->n > P->n) return;
    for (int i = 0; i < fixed_prog->n; i++)
        if (!same_instruction(&P->ins[i], &fixed_prog->ins[i])) return;
    for (int i = 0; i < fixed_prog->n; i++) fix_slot[i] = fixed_from->fix_slot[i];
}

void dm_split_program(const dm_prog *P, const int *roots, int nroots, const dm_prog *fixed_prog,
                      const dm_split *fixed_from, dm_split *S)
{
    int n = P->n;
    memset(S, 0, sizeof *S);
    S->n = n;
    S->varying = xcalloc((size_t)n, 1);
    S->at_code = xcalloc((size_t)n, 1);
    S->prep_code = xcalloc((size_t)n, 1);
    S->fix_code = xcalloc((size_t)n, 1);
    S->stage_code = xcalloc((size_t)n, 1);
    S->slot = xcalloc((size_t)n, sizeof(int));
    S->slot_ins = xcalloc((size_t)n, sizeof(int));
    S->fix_slot = xcalloc((size_t)n, sizeof(int));
    S->fix_ins = xcalloc((size_t)n, sizeof(int));
    /* param_dep: reads a parameter; costly: a per-measurement call in its operands' cone;
     * staged: reads a stage's value (stage.c), which makes the measurement's work on it the
     * same at every point the stage tries, however cheap. */
    char *param_dep = xcalloc((size_t)n, 1), *costly = xcalloc((size_t)n, 1);
    char *staged = xcalloc((size_t)n, 1);
    for (int i = 0; i < n; i++) {
        const dm_ins *x = &P->ins[i];
        int v = x->op == DM_IR_MEASURE, pd = x->op == DM_IR_PARAM, c = 0;
        int st = x->op == DM_IR_VOXEL && P->stage_first >= 0 && x->index >= P->stage_first;
        for (int j = 0; j < x->nargs; j++) {
            v |= S->varying[x->arg[j]];
            pd |= param_dep[x->arg[j]];
            c |= costly[x->arg[j]];
            st |= staged[x->arg[j]];
        }
        S->varying[i] = (char)v;
        param_dep[i] = (char)pd;
        staged[i] = (char)st;
        costly[i] = (char)(c || (v && x->op == DM_IR_CALL));
        S->slot[i] = -1;
        S->fix_slot[i] = -1;
    }
    if (fixed_from) inherit_fixed(P, fixed_prog, fixed_from, S->fix_slot);

    char *need = xcalloc((size_t)n, 1);
    for (int r = 0; r < nroots; r++)
        if (roots[r] >= 0) need[roots[r]] = 1;
    for (int i = n - 1; i >= 0; i--) {
        const dm_ins *x = &P->ins[i];
        if (!need[i] || x->op == DM_IR_CONST) continue;
        if (S->varying[i] && !fixed_from && (costly[i] || staged[i]) && !param_dep[i]) {
            S->fix_slot[i] = 1; /* numbered below, in ascending order */
        } else if (S->varying[i] && S->fix_slot[i] >= 0) {
            /* read from the extended row */
        } else if (S->varying[i]) {
            S->at_code[i] = 1;
            for (int j = 0; j < x->nargs; j++) need[x->arg[j]] = 1;
        } else if (x->op == DM_IR_VOXEL) {
            S->at_code[i] = 1;
        } else {
            S->slot[i] = 1; /* numbered below, in ascending order */
        }
    }
    /* A stage's fixed values (those that read its values) are made per voxel from the
     * measurement's row (stage_code): the costly parameter-free values they read that read no
     * stage value (a stick's integrals) are fixed values of their own, the base, made once for
     * every voxel of the same inputs. */
    char *sneed = xcalloc((size_t)n, 1);
    for (int i = 0; i < n; i++) sneed[i] = !fixed_from && S->fix_slot[i] >= 0 && staged[i];
    for (int i = n - 1; i >= 0; i--) {
        const dm_ins *x = &P->ins[i];
        if (!sneed[i] || x->op == DM_IR_CONST) continue;
        if (!staged[i] && costly[i] && !param_dep[i]) {
            S->fix_slot[i] = 1; /* a base value */
            continue;
        }
        S->stage_code[i] = 1;
        for (int j = 0; j < x->nargs; j++) sneed[x->arg[j]] = 1;
    }
    free(sneed);
    for (int i = 0; i < n; i++) {
        if (S->slot[i] >= 0) {
            S->slot[i] = S->nslots;
            S->slot_ins[S->nslots++] = i;
        }
    }
    for (int pass = 0; pass < 2 && !fixed_from; pass++) /* the base, then the stage's */
        for (int i = 0; i < n; i++)
            if (S->fix_slot[i] >= 0 && staged[i] == pass) {
                S->fix_slot[i] = S->nfix;
                S->fix_ins[S->nfix++] = i;
                S->nfix_base += !pass;
            }
    if (fixed_from) { /* only the inherited columns this program reads */
        for (int i = 0; i < n; i++)
            if (S->fix_slot[i] >= 0 && !need[i]) S->fix_slot[i] = -1;
        S->nfix = fixed_from->nfix;
        S->nfix_base = fixed_from->nfix_base;
    }
    dm_ir_live(P, S->slot_ins, S->nslots, S->prep_code);
    if (!fixed_from) dm_ir_live(P, S->fix_ins, S->nfix_base, S->fix_code);
    free(need);
    free(param_dep);
    free(costly);
    free(staged);
}

void dm_split_free(dm_split *S)
{
    free(S->varying);
    free(S->at_code);
    free(S->prep_code);
    free(S->slot);
    free(S->slot_ins);
    free(S->fix_code);
    free(S->stage_code);
    free(S->fix_slot);
    free(S->fix_ins);
    memset(S, 0, sizeof *S);
}
