/* Hoisting of voxel-invariant work (lower.h, dm_split).
 *
 * A value is varying when it reads a measurement column or any varying value; everything else
 * (parameters, voxel columns, constants and what is built from them only) is the same for all
 * measurements of a voxel.  Walking back from the roots, a varying value is computed per
 * measurement and its operands are needed there in turn; an invariant value needed there is
 * where the walk stops: it becomes a slot of pre[], computed once by the prepare part.  So
 * pre[] holds exactly the invariant values the per-measurement code reads, not every
 * invariant temporary. */
#include "lower.h"

#include <stdlib.h>
#include <string.h>

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) abort();
    return p;
}

void dm_split_program(const dm_prog *P, const int *roots, int nroots, dm_split *S)
{
    int n = P->n;
    memset(S, 0, sizeof *S);
    S->n = n;
    S->varying = xcalloc((size_t)n, 1);
    S->at_code = xcalloc((size_t)n, 1);
    S->prep_code = xcalloc((size_t)n, 1);
    S->slot = xcalloc((size_t)n, sizeof(int));
    S->slot_ins = xcalloc((size_t)n, sizeof(int));
    for (int i = 0; i < n; i++) {
        const dm_ins *x = &P->ins[i];
        int v = x->op == DM_IR_MEASURE;
        for (int j = 0; j < x->nargs; j++) v |= S->varying[x->arg[j]];
        S->varying[i] = (char)v;
        S->slot[i] = -1;
    }

    char *need = xcalloc((size_t)n, 1);
    for (int r = 0; r < nroots; r++)
        if (roots[r] >= 0) need[roots[r]] = 1;
    for (int i = n - 1; i >= 0; i--) {
        const dm_ins *x = &P->ins[i];
        if (!need[i] || x->op == DM_IR_CONST) continue;
        if (S->varying[i]) {
            S->at_code[i] = 1;
            for (int j = 0; j < x->nargs; j++) need[x->arg[j]] = 1;
        } else if (x->op == DM_IR_VOXEL) {
            S->at_code[i] = 1;
        } else {
            S->slot[i] = 1; /* numbered below, in ascending order */
        }
    }
    for (int i = 0; i < n; i++)
        if (S->slot[i] >= 0) {
            S->slot[i] = S->nslots;
            S->slot_ins[S->nslots++] = i;
        }
    dm_ir_live(P, S->slot_ins, S->nslots, S->prep_code);
    free(need);
}

void dm_split_free(dm_split *S)
{
    free(S->varying);
    free(S->at_code);
    free(S->prep_code);
    free(S->slot);
    free(S->slot_ins);
    memset(S, 0, sizeof *S);
}
