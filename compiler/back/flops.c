/* Work counts of lowered functions, for the metadata (dm_flops): the runtime multiplies them
 * by the number of evaluations to report achieved GFLOP/s.  A call of a math-library function
 * (exp, dm_dawson, ...) counts as one operation, however many it costs inside, and is also
 * counted apart when transcendental so that the two kinds of throughput can be told apart; the
 * orders of a family computed by one call (dm_ir_families) count as that one call. */
#include "backend.h"

#include <stdlib.h>
#include <string.h>

long dm_count_flops_marked(const dm_prog *P, const char *mark, long *transcendental)
{
    long total = 0, transc = 0;
    int *leader = malloc(sizeof(int) * 3 * ((size_t)P->n + 1));
    if (!leader) abort();
    dm_ir_families(P, mark, leader, leader + P->n + 1, leader + 2 * (P->n + 1));
    for (int i = 0; i < P->n; i++) {
        if (!mark[i] || leader[i] != i) continue; /* a family's members: one call, its first */
        const dm_ins *x = &P->ins[i];
        switch (x->op) {
        case DM_IR_NEG:
        case DM_IR_ADD:
        case DM_IR_SUB:
        case DM_IR_MUL:
        case DM_IR_DIV: total++; break;
        case DM_IR_CALL:
            total++;
            transc += dm_mathfn_get(x->fn)->transcendental;
            break;
        default: /* inputs, constants, comparisons, logic, selects */ break;
        }
    }
    free(leader);
    if (transcendental) *transcendental = transc;
    return total;
}

long dm_count_flops(const dm_prog *P, const int *roots, int nroots, long *transcendental)
{
    char *live = malloc((size_t)P->n + 1);
    if (!live) abort();
    dm_ir_live(P, roots, nroots, live);
    long total = dm_count_flops_marked(P, live, transcendental);
    free(live);
    return total;
}

void dm_programs_flops(const dm_programs *G, dm_flops *f)
{
    memset(f, 0, sizeof *f);
    f->signal = dm_count_flops_marked(&G->signal, G->signal_split.at_code, &f->signal_transc);
    f->gradient = dm_count_flops_marked(&G->grad, G->grad_split.at_code, &f->gradient_transc);
    f->prepare = dm_count_flops_marked(&G->signal, G->signal_split.prep_code, &f->prepare_transc);
    f->gradient_prepare =
        dm_count_flops_marked(&G->grad, G->grad_split.prep_code, &f->gradient_prepare_transc);
    f->fix = dm_count_flops_marked(&G->signal, G->signal_split.fix_code, &f->fix_transc);
    f->stage_rows = dm_count_flops_marked(&G->signal, G->signal_split.stage_code, NULL);
    /* calls beyond the elementary functions (DM_MF_ERF on: mathlib.h's series and iterations) */
    for (int i = 0; i < G->signal.n; i++)
        f->signal_special += G->signal_split.at_code[i] && G->signal.ins[i].op == DM_IR_CALL &&
                             G->signal.ins[i].fn >= DM_MF_ERF;
    f->fix_width = G->signal_split.nfix;
    f->pre_width = G->signal_split.nslots > 0 ? G->signal_split.nslots : 1;
    f->fix_base_width = G->signal_split.nfix_base;
    f->stage_width = G->nstage;
    f->rows_per_voxel = G->signal_split.nfix > G->signal_split.nfix_base;
    const dm_prog *S = &G->signal;
    for (int i = 0; i < S->n && S->stage_first >= 0; i++)
        if (G->signal_split.prep_code[i] && S->ins[i].op == DM_IR_VOXEL &&
            S->ins[i].index >= S->stage_first)
            f->prepare_reads_stage = 1;
}
