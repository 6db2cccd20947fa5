/* The programs of one model's functions (backend.h): the checked syntax trees lowered into
 * straight-line code (lower.c), the gradient differentiated (deriv.c), and the signal and its
 * gradient split into per-voxel and per-measurement parts (split.c). */
#include "backend.h"

#include <stdlib.h>
#include <string.h>

static int build_signal(dm_programs *G, const dm_model *m, unsigned held, dm_diag *diag)
{
    int v[DM_MAX_WIDTH];
    dm_prog_init(&G->signal, m, diag);
    G->signal.context = "the signal";
    if (!m->signal || dm_lower_expr(&G->signal, m->signal, v) != 1) {
        if (!G->signal.failed)
            dm_error(diag, m->signal ? m->signal->loc : m->name_loc,
                     "the signal must be one scalar expression");
        return -1;
    }
    G->signal_root = v[0];
    if (held) dm_stage_program(G, m, held);

    /* The gradient program starts with the signal's instructions so its partials share its
     * values: the model's lowers the signal again, a stage's copies its rebuilt signal. */
    dm_prog *P = &G->grad;
    dm_prog_init(P, m, diag);
    P->context = "the signal";
    if (held) {
        dm_prog_copy(P, &G->signal);
        v[0] = G->signal_root;
    } else {
        dm_lower_expr(P, m->signal, v);
    }
    G->grad_roots[0] = v[0];
    int np = m->params.n;
    dm_differentiate(P, v[0], np, G->grad_roots + 1);
    for (int k = 0; k < np; k++) {
        const dm_param *par = m->params.items[k];
        if (!par->derivative || ((held >> k) & 1u)) continue; /* a held one has no partial */
        P->context = "a derivative";
        if (dm_lower_expr(P, par->derivative, v) != 1) {
            if (!P->failed)
                dm_error(diag, par->derivative_loc, "a derivative must be a scalar expression");
            return -1;
        }
        G->grad_roots[1 + k] = v[0];
    }
    dm_split_program(&G->signal, &G->signal_root, 1, NULL, NULL, &G->signal_split);
    dm_split_program(P, G->grad_roots, 1 + np, &G->signal, &G->signal_split, &G->grad_split);
    return 0;
}

static int build_constraints(dm_programs *G, const dm_model *m, dm_diag *diag)
{
    dm_prog *P = &G->constraints;
    dm_prog_init(P, m, diag);
    P->allow_measures = 0;
    P->context = "a constraint";
    G->constraint_roots = calloc((size_t)m->constraints.n + 1, sizeof(int));
    for (int i = 0; i < m->constraints.n; i++) {
        int v[DM_MAX_WIDTH];
        if (dm_lower_expr(P, m->constraints.items[i]->cond, v) != 1) {
            if (!P->failed)
                dm_error(diag, m->constraints.items[i]->loc, "a constraint must be a condition");
            return -1;
        }
        G->constraint_roots[i] = v[0];
    }
    return 0;
}

/* Sum of the parameters' prior energies (model_api.h, ast.h). */
static int build_prior(dm_programs *G, const dm_model *m, dm_diag *diag)
{
    dm_prog *P = &G->prior;
    dm_prog_init(P, m, diag);
    P->allow_measures = 0;
    P->context = "a prior";
    int total = dm_ir_const(P, 0);
    for (int k = 0; k < m->params.n; k++) {
        const dm_param *par = m->params.items[k];
        const dm_prior *pr = &par->prior;
        int x = dm_ir_leaf(P, DM_IR_PARAM, k), e = -1, v[DM_MAX_WIDTH];
        double a = pr->value[0], bb = pr->value[1];
        switch (pr->kind) {
        case DM_PRIOR_GAUSSIAN: { /* (x - mean)^2 / (2 sd^2) */
            int d = dm_ir_binary(P, DM_IR_SUB, x, dm_ir_const(P, a));
            e = dm_ir_binary(P, DM_IR_MUL, dm_ir_binary(P, DM_IR_MUL, d, d),
                             dm_ir_const(P, 1 / (2 * bb * bb)));
            break;
        }
        case DM_PRIOR_GAMMA: { /* (1 - shape) log x + x / scale */
            int lx = dm_ir_call(P, DM_MF_LOG, 0, &x);
            e = dm_ir_binary(P, DM_IR_ADD, dm_ir_binary(P, DM_IR_MUL, dm_ir_const(P, 1 - a), lx),
                             dm_ir_binary(P, DM_IR_DIV, x, dm_ir_const(P, bb)));
            break;
        }
        case DM_PRIOR_ARD: /* weight log x */
            e = dm_ir_binary(P, DM_IR_MUL, dm_ir_const(P, a), dm_ir_call(P, DM_MF_LOG, 0, &x));
            break;
        case DM_PRIOR_SPHERE: { /* -log|sin x / 2| */
            int s = dm_ir_call(P, DM_MF_SIN, 0, &x);
            int half = dm_ir_binary(P, DM_IR_MUL, s, dm_ir_const(P, 0.5));
            int mag = dm_ir_call(P, DM_MF_FABS, 0, &half);
            e = dm_ir_unary(P, DM_IR_NEG, dm_ir_call(P, DM_MF_LOG, 0, &mag));
            break;
        }
        case DM_PRIOR_CUSTOM: /* -(log density) */
            if (!pr->args[0] || dm_lower_expr(P, pr->args[0], v) != 1) {
                if (!P->failed)
                    dm_error(diag, pr->loc, "a custom prior must be a scalar expression");
                return -1;
            }
            e = dm_ir_unary(P, DM_IR_NEG, v[0]);
            break;
        default: break;
        }
        if (e >= 0) total = dm_ir_binary(P, DM_IR_ADD, total, e);
    }
    G->prior_root = total;
    return 0;
}

static int build_outputs(dm_programs *G, const dm_model *m, dm_diag *diag)
{
    dm_prog *P = &G->outputs;
    dm_prog_init(P, m, diag);
    P->allow_measures = 0;
    P->context = "a derived output";
    G->output_roots = malloc(sizeof(int) * ((size_t)m->output_width + 1));
    for (int c = 0; c < m->output_width; c++) G->output_roots[c] = -1;
    for (int i = 0; i < m->outputs.n; i++) {
        const dm_output *o = m->outputs.items[i];
        int v[DM_MAX_WIDTH];
        int w = dm_lower_expr(P, o->value, v);
        if (w < 0) return -1;
        if (o->column + w > m->output_width) {
            dm_error(diag, o->loc, "output '%s' does not fit the output row", o->name);
            return -1;
        }
        for (int c = 0; c < w; c++) G->output_roots[o->column + c] = v[c];
    }
    return 0;
}

void dm_programs_free(dm_programs *G)
{
    if (G->held) dm_prog_free(&G->stage);
    free(G->stage_roots);
    dm_prog_free(&G->signal);
    dm_prog_free(&G->grad);
    dm_prog_free(&G->constraints);
    dm_prog_free(&G->prior);
    dm_prog_free(&G->outputs);
    free(G->constraint_roots);
    free(G->output_roots);
    dm_split_free(&G->signal_split);
    dm_split_free(&G->grad_split);
}

int dm_programs_build(dm_programs *G, const dm_model *m, unsigned held, dm_diag *diag)
{
    memset(G, 0, sizeof *G);
    if (m->params.n > DM_MAX_PARAMS) {
        dm_error(diag, m->name_loc, "a model has at most %d parameters", DM_MAX_PARAMS);
        return -1;
    }
    if (m->params.n < 32) held &= (1u << m->params.n) - 1;
    if (build_signal(G, m, held, diag) != 0 || build_constraints(G, m, diag) != 0 ||
        build_prior(G, m, diag) != 0 || build_outputs(G, m, diag) != 0)
        return -1;
    return 0;
}
