/* Stage programs (backend.h): the parameters a stage of a fit holds constant (--fixed, and in
 * a grid search the parameters it does not grid) as constants of that stage's program.
 *
 * The values of the signal that depend on held parameters and voxel inputs only are the same
 * at every point the stage tries: they are computed once per voxel, before its fit
 * (dm_voxel_extend), and appended to the voxel row, where the stage's program reads them as
 * voxel columns.  The signal is rebuilt over them: what depends on them and on the measurement
 * alone is then parameter-free per-measurement work, which the split (split.c) makes fixed
 * values of the voxel's rows, and what is left per measurement and point is the work of the
 * parameters the stage moves.  The gradient is taken of the rebuilt signal, so it has no
 * partials of the held parameters.  Values are the same instructions of the same operands as
 * in the model's program; only where they are computed changes. */
#include "backend.h"

#include <stdlib.h>
#include <string.h>

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) abort();
    return p;
}

/* x of src rebuilt in P over the mapped operands. */
static int rebuild(dm_prog *P, const dm_ins *x, const int *map)
{
    int a[DM_IR_MAX_ARGS];
    for (int j = 0; j < x->nargs; j++) a[j] = map[x->arg[j]];
    switch (x->op) {
    case DM_IR_CONST: return dm_ir_const(P, x->num);
    case DM_IR_PARAM:
    case DM_IR_MEASURE:
    case DM_IR_VOXEL: return dm_ir_leaf(P, x->op, x->index);
    case DM_IR_NEG:
    case DM_IR_NOT: return dm_ir_unary(P, x->op, a[0]);
    case DM_IR_SELECT: return dm_ir_select(P, a[0], a[1], a[2]);
    case DM_IR_CALL: return dm_ir_call(P, x->fn, x->index, a);
    default: return dm_ir_binary(P, x->op, a[0], a[1]);
    }
}

void dm_stage_program(dm_programs *G, const dm_model *m, unsigned held)
{
    G->held = held;
    G->stage = G->signal; /* the signal as lowered computes the stage's values */
    const dm_prog *src = &G->stage;
    dm_prog *P = &G->signal;
    dm_prog_init(P, m, src->diag);
    P->context = src->context;
    P->stage_first = m->voxel_width;
    int n = src->n, root = G->signal_root;
    char *varying = xcalloc((size_t)n, 1), *free_dep = xcalloc((size_t)n, 1);
    char *held_only = xcalloc((size_t)n, 1), *live = xcalloc((size_t)n, 1);
    char *frontier = xcalloc((size_t)n, 1);
    int *map = xcalloc((size_t)n, sizeof(int));
    for (int i = 0; i < n; i++) {
        const dm_ins *x = &src->ins[i];
        int v = x->op == DM_IR_MEASURE;
        int f = x->op == DM_IR_PARAM && !((held >> x->index) & 1u);
        for (int j = 0; j < x->nargs; j++) {
            v |= varying[x->arg[j]];
            f |= free_dep[x->arg[j]];
        }
        varying[i] = (char)v;
        free_dep[i] = (char)f;
        /* voxel inputs and constants are in the voxel row or literals already */
        held_only[i] = !v && !f && x->op != DM_IR_CONST && x->op != DM_IR_VOXEL;
    }
    dm_ir_live(src, &root, 1, live);
    for (int i = 0; i < n; i++) {
        if (!live[i] || held_only[i]) continue;
        for (int j = 0; j < src->ins[i].nargs; j++)
            if (held_only[src->ins[i].arg[j]]) frontier[src->ins[i].arg[j]] = 1;
    }
    if (held_only[root]) frontier[root] = 1;
    G->stage_roots = xcalloc((size_t)n, sizeof(int));
    for (int i = 0; i < n; i++) {
        if (!live[i] || (held_only[i] && !frontier[i])) continue;
        if (frontier[i]) {
            G->stage_roots[G->nstage] = i;
            map[i] = dm_ir_leaf(P, DM_IR_VOXEL, m->voxel_width + G->nstage++);
            continue;
        }
        map[i] = rebuild(P, &src->ins[i], map);
        dm_ins *y = &P->ins[map[i]];
        if (!y->note && y->op > DM_IR_VOXEL) {
            y->note = src->ins[i].note;
            y->note_comp = src->ins[i].note_comp;
        }
    }
    G->signal_root = map[root];
    free(varying);
    free(free_dep);
    free(held_only);
    free(live);
    free(frontier);
    free(map);
}
