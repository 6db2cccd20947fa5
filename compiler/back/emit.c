/* The emitter: prints the programs of a model (programs.c) as the generated source, the one
 * file that both the host compiler and NVRTC compile (the functions of templates/fit/model_api.h).
 *
 * Each function is straight-line code: the inputs it reads as named locals (p_NAME, m_NAME,
 * v_NAME), then one SSA temporary per line in dependency order, only those the results need.
 * Literals are written suffix-free so that one text serves float and double builds: small
 * integers bare (they convert without promoting), everything else cast with (real). */
#include "backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DM_PI_D 3.14159265358979323846

/* A literal of generated code.  in_call: an argument of a math function, where a bare int
 * could make a CUDA overload ambiguous, so it is always cast. */
static void emit_literal(dm_buf *b, double v, int in_call)
{
    if (isnan(v)) {
        dm_buf_puts(b, "((real)0 / 0)");
    } else if (isinf(v)) {
        dm_buf_puts(b, v > 0 ? "((real)1 / 0)" : "((real)-1 / 0)");
    } else if (!in_call && v == floor(v) && fabs(v) <= 16777216) {
        dm_buf_printf(b, "%d", (int)v); /* exact in float too */
    } else {
        dm_buf_puts(b, "(real)");
        dm_buf_number(b, v);
    }
}

/* ---- printing a program ---- */

typedef struct emitter {
    dm_buf *b;
    const dm_model *m;
    const dm_prog *P;
    char *live;
    int *temp; /* temporary number of each instruction, -1 when it has none */
} emitter;

/* The input whose packed columns contain `column`, and the offset in it. */
static const dm_input *input_at(const dm_model *m, int measure, int column, int *offset)
{
    int n = measure ? m->measures.n : m->voxels.n;
    for (int i = 0; i < n; i++) {
        const dm_input *in = measure ? m->measures.items[i] : m->voxels.items[i];
        if (column >= in->column && column < in->column + in->width) {
            *offset = column - in->column;
            return in;
        }
    }
    return NULL;
}

static void emit_leaf_name(dm_buf *b, const dm_model *m, const dm_ins *x)
{
    if (x->op == DM_IR_PARAM) {
        dm_buf_printf(b, "p_%s", m->params.items[x->index]->name);
        return;
    }
    if (x->op == DM_IR_VOXEL && x->index >= m->voxel_width) { /* a stage's value (stage.c) */
        dm_buf_printf(b, "s_%d", x->index - m->voxel_width);
        return;
    }
    int measure = x->op == DM_IR_MEASURE, offset = 0;
    const dm_input *in = input_at(m, measure, x->index, &offset);
    const char *prefix = measure ? "m_" : "v_";
    if (!in)
        dm_buf_printf(b, "%scol%d", prefix, x->index);
    else if (in->width == 1)
        dm_buf_printf(b, "%s%s", prefix, in->name);
    else if (in->width == 3)
        dm_buf_printf(b, "%s%s_%c", prefix, in->name, "xyz"[offset]);
    else
        dm_buf_printf(b, "%s%s_%d", prefix, in->name, offset);
}

static void emit_operand(emitter *E, int id, int in_call)
{
    const dm_ins *x = &E->P->ins[id];
    if (x->op == DM_IR_CONST)
        emit_literal(E->b, x->num, in_call);
    else if (x->op <= DM_IR_VOXEL)
        emit_leaf_name(E->b, E->m, x);
    else
        dm_buf_printf(E->b, "t%d", E->temp[id]);
}

static const char *binary_op_text(dm_irop op)
{
    switch (op) {
    case DM_IR_ADD: return "+";
    case DM_IR_SUB: return "-";
    case DM_IR_MUL: return "*";
    case DM_IR_DIV: return "/";
    case DM_IR_LT: return "<";
    case DM_IR_LE: return "<=";
    case DM_IR_GT: return ">";
    case DM_IR_GE: return ">=";
    case DM_IR_EQ: return "==";
    case DM_IR_NE: return "!=";
    case DM_IR_AND: return "&&";
    case DM_IR_OR: return "||";
    default: return "?";
    }
}

static void emit_rhs(emitter *E, const dm_ins *x)
{
    dm_buf *b = E->b;
    switch (x->op) {
    case DM_IR_NEG:
    case DM_IR_NOT:
        dm_buf_puts(b, x->op == DM_IR_NEG ? "-" : "!");
        emit_operand(E, x->arg[0], 0);
        break;
    case DM_IR_SELECT:
        emit_operand(E, x->arg[0], 0);
        dm_buf_puts(b, " ? ");
        emit_operand(E, x->arg[1], 0);
        dm_buf_puts(b, " : ");
        emit_operand(E, x->arg[2], 0);
        break;
    case DM_IR_CALL: {
        const dm_mathfn_info *info = dm_mathfn_get(x->fn);
        dm_buf_printf(b, "%s(", info->c_name);
        if (info->ordered) dm_buf_printf(b, "%d, ", x->index);
        for (int i = 0; i < x->nargs; i++) {
            if (i) dm_buf_puts(b, ", ");
            emit_operand(E, x->arg[i], 1);
        }
        dm_buf_puts(b, ")");
        break;
    }
    default:
        emit_operand(E, x->arg[0], 0);
        dm_buf_printf(b, " %s ", binary_op_text(x->op));
        emit_operand(E, x->arg[1], 0);
        break;
    }
}

/* The let a value is, as a comment, and the end of its line. */
static void emit_note(dm_buf *b, const dm_ins *x)
{
    if (x->note && x->note_comp >= 3) /* a matrix entry */
        dm_buf_printf(b, " /* let %s[%d][%d] */", x->note, (x->note_comp - 3) / 3,
                      (x->note_comp - 3) % 3);
    else if (x->note && x->note_comp >= 0)
        dm_buf_printf(b, " /* let %s, %c */", x->note, "xyz"[x->note_comp]);
    else if (x->note)
        dm_buf_printf(b, " /* let %s */", x->note);
    dm_buf_puts(b, "\n");
}

/* Declares the inputs and temporaries of the instructions marked in code[], in dependency
 * order: inputs first, grouped (parameters, measurement columns, voxel columns, each in index
 * order), then one temporary per line.  With slot != NULL (a per-measurement function), the
 * invariant values with slot[i] >= 0 come before everything else, loaded from pre[slot[i]],
 * and then the fixed values with fix_slot[i] >= 0, loaded from the extended row.
 * *uses receives which of p (or pre), m, v the code reads (bits 1, 2, 4). */
static void emit_marked(emitter *E, const char *code, const int *slot, const int *fix_slot,
                        int *uses)
{
    const dm_prog *P = E->P;
    dm_buf *b = E->b;
    E->temp = malloc(sizeof(int) * ((size_t)P->n + 1));
    if (!E->temp) abort();
    *uses = 0;
    int next = 0;
    for (int i = 0; i < P->n; i++) /* loaded values are numbered first, in slot order */
        E->temp[i] = slot && slot[i] >= 0 && P->ins[i].op > DM_IR_VOXEL ? next++ : -1;
    for (int i = 0; fix_slot && i < P->n; i++)
        if (fix_slot[i] >= 0) E->temp[i] = next++;
    for (int i = 0; slot && i < P->n; i++) {
        const dm_ins *x = &P->ins[i];
        if (slot[i] < 0) continue;
        *uses |= 1;
        if (x->op <= DM_IR_VOXEL) {
            dm_buf_puts(b, "    const real ");
            emit_leaf_name(b, E->m, x);
            dm_buf_printf(b, " = pre[%d];\n", slot[i]);
        } else if (dm_ir_is_bool(P, i)) {
            dm_buf_printf(b, "    const int t%d = pre[%d] != 0;", E->temp[i], slot[i]);
        } else {
            dm_buf_printf(b, "    const real t%d = pre[%d];", E->temp[i], slot[i]);
        }
        if (x->op > DM_IR_VOXEL) emit_note(b, x);
    }
    for (int i = 0; fix_slot && i < P->n; i++) {
        if (fix_slot[i] < 0) continue;
        *uses |= 2;
        if (dm_ir_is_bool(P, i))
            dm_buf_printf(b, "    const int t%d = m[DM_MEASURE_WIDTH + %d] != 0;", E->temp[i],
                          fix_slot[i]);
        else
            dm_buf_printf(b, "    const real t%d = m[DM_MEASURE_WIDTH + %d];", E->temp[i],
                          fix_slot[i]);
        emit_note(b, &P->ins[i]);
    }
    for (int kind = DM_IR_PARAM; kind <= DM_IR_VOXEL; kind++) {
        int prev_index = -1; /* emitted in index order: repeatedly the next larger one */
        for (;;) {
            const dm_ins *x = NULL;
            for (int i = 0; i < P->n; i++)
                if (code[i] && (int)P->ins[i].op == kind && P->ins[i].index > prev_index &&
                    (!x || P->ins[i].index < x->index))
                    x = &P->ins[i];
            if (!x) break;
            prev_index = x->index;
            *uses |= kind == DM_IR_PARAM ? 1 : kind == DM_IR_MEASURE ? 2 : 4;
            dm_buf_puts(b, "    const real ");
            emit_leaf_name(b, E->m, x);
            dm_buf_printf(b, " = %c[%d];\n", "pmv"[kind - DM_IR_PARAM], x -> index);
        }
    }
    int *leader = malloc(sizeof(int) * 3 * ((size_t)P->n + 1));
    if (!leader) abort();
    int *members = leader + P->n + 1, *top = members + P->n + 1;
    dm_ir_families(P, code, leader, members, top);
    for (int i = 0; i < P->n; i++) {
        const dm_ins *x = &P->ins[i];
        if (!code[i] || x->op <= DM_IR_VOXEL) continue;
        E->temp[i] = next++;
        int head = leader[i];
        if (members[head] > 1) { /* one family call for the group, at its first member */
            const dm_mathfn_info *info = dm_mathfn_get(x->fn);
            if (head == i) {
                int len = info->family_len > 0 ? info->family_len : top[i] + 1;
                dm_buf_printf(b, "    real f%d[%d];\n    %s(", E->temp[i], len, info->family);
                if (info->family_len == 0) dm_buf_printf(b, "%d, ", top[i]);
                for (int a = 0; a < x->nargs; a++) {
                    emit_operand(E, x->arg[a], 1);
                    dm_buf_puts(b, ", ");
                }
                dm_buf_printf(b, "f%d);\n", E->temp[i]);
            }
            dm_buf_printf(b, "    const real t%d = f%d[%d];", E->temp[i], E->temp[head], x->index);
            emit_note(b, x);
            continue;
        }
        dm_buf_printf(b, "    const %s t%d = ", dm_ir_is_bool(P, i) ? "int" : "real", E->temp[i]);
        emit_rhs(E, x);
        dm_buf_puts(b, ";");
        emit_note(b, x);
    }
    free(leader);
}

/* The live inputs and temporaries for the given roots. */
static void emit_body(emitter *E, const int *roots, int nroots, int *uses)
{
    E->live = malloc((size_t)E->P->n + 1);
    if (!E->live) abort();
    dm_ir_live(E->P, roots, nroots, E->live);
    emit_marked(E, E->live, NULL, NULL, uses);
}

static void emitter_done(emitter *E)
{
    free(E->live);
    free(E->temp);
    E->live = NULL;
    E->temp = NULL;
}

static void emit_unused(dm_buf *b, int uses, int mask, const char *const *names)
{
    for (int i = 0; i < 3; i++)
        if ((mask & (1 << i)) && !(uses & (1 << i))) dm_buf_printf(b, "    (void)%s;\n", names[i]);
}

static const char *const pmv_names[3] = {"p", "m", "v"};

/* ---- the functions of model_api.h ---- */

/* Prints the (void) casts of unused arguments and the body for the given roots; the caller
 * then prints the results with emit_operand and calls emitter_done. */
static void emit_function_body(emitter *E, dm_buf *b, const int *roots, int nroots, int mask,
                               const char *const *arg_names)
{
    dm_buf body = {0};
    int uses;
    E->b = &body;
    emit_body(E, roots, nroots, &uses);
    E->b = b;
    emit_unused(b, uses, mask, arg_names);
    if (body.s) dm_buf_puts(b, body.s);
    free(body.s);
}

static const char *const pre_m_v_names[3] = {"pre", "m", "v"};

/* The body of a function that fills array[0 .. n) with the values of the instructions ins[],
 * computing the instructions code[] marks; mask: which of p, m, v it takes (bits 1, 2, 4). */
static void emit_fill(emitter *E, dm_buf *b, const char *code, int mask, const char *array,
                      const int *ins, int n)
{
    dm_buf body = {0};
    int uses;
    E->b = &body;
    emit_marked(E, code, NULL, NULL, &uses);
    E->b = b;
    emit_unused(b, uses, mask, pmv_names);
    if (body.s) dm_buf_puts(b, body.s);
    free(body.s);
    for (int j = 0; j < n; j++) {
        dm_buf_printf(b, "    %s[%d] = ", array, j);
        emit_operand(E, ins[j], 0);
        dm_buf_puts(b, ";\n");
    }
}

/* The once-per-voxel half of a split function: fills pre[] with its slot values. */
static void emit_prepare(dm_buf *b, const dm_model *m, const dm_prog *P, const dm_split *S,
                         const char *name)
{
    emitter E = {b, m, P, NULL, NULL};
    dm_buf_printf(b, "DM_FN void %s(const real *p, const real *v, real *pre)\n{\n", name);
    emit_fill(&E, b, S->prep_code, 5, "pre", S->slot_ins, S->nslots);
    if (S->nslots == 0) dm_buf_puts(b, "    pre[0] = 0; /* nothing to prepare */\n");
    dm_buf_puts(b, "}\n\n");
    emitter_done(&E);
}

/* The per-measurement body of a split function for the given roots: the values it reads from
 * pre[] and from the row's fixed values (those its code or its roots read: a stage program's
 * row also holds values only its stage's rows are made from), its inputs and its temporaries;
 * the caller prints the results with emit_operand. */
static void emit_at_body(emitter *E, dm_buf *b, const dm_split *S, const int *roots, int nroots)
{
    const dm_prog *P = E->P;
    int *fix = malloc(sizeof(int) * ((size_t)P->n + 1));
    if (!fix) abort();
    for (int i = 0; i < P->n; i++) fix[i] = -1;
    for (int i = 0; i < P->n; i++)
        for (int j = 0; S->at_code[i] && j < P->ins[i].nargs; j++)
            fix[P->ins[i].arg[j]] = S->fix_slot[P->ins[i].arg[j]];
    for (int r = 0; r < nroots; r++)
        if (roots[r] >= 0) fix[roots[r]] = S->fix_slot[roots[r]];
    dm_buf body = {0};
    int uses;
    E->b = &body;
    emit_marked(E, S->at_code, S->slot, fix, &uses);
    E->b = b;
    emit_unused(b, uses, 7, pre_m_v_names);
    if (body.s) dm_buf_puts(b, body.s);
    free(body.s);
    free(fix);
}

/* A stage program's dm_signal (grad 0) or dm_signal_grad (grad 1): the voxel's inputs extended
 * by the stage's values, the prepare, the row, the _at function. */
static void emit_stage_composite(dm_buf *b, const dm_programs *G, int grad)
{
    const dm_split *S = &G->signal_split;
    const char *ds = grad ? ", ds" : "";
    if (grad)
        dm_buf_puts(b, "/* The signal and ds[k] = d signal / d p[k], in one pass (forward mode); "
                       "0 for a\n * held parameter. */\n"
                       "DM_FN real dm_signal_grad(const real *p, const real *m, const real *v, "
                       "real *ds)\n{\n");
    else
        dm_buf_puts(b, "/* Predicted signal of one measurement (m: its DM_MEASURE_WIDTH columns; "
                       "v: the voxel's\n * inputs). */\n"
                       "DM_FN real dm_signal(const real *p, const real *m, const real *v)\n{\n");
    dm_buf_printf(b,
                  "    real vx[DM_VOXEL_WIDTH + DM_STAGE_WIDTH + 1], pre[DM_PRE%s_WIDTH];\n"
                  "    dm_voxel_extend(p, v, vx);\n"
                  "    dm_signal%s_prepare(p, vx, pre);\n",
                  grad ? "G" : "", grad ? "_grad" : "");
    if (S->nfix > 0) {
        dm_buf_puts(b, "    real row[DM_ROW_WIDTH];\n"
                       "    dm_row_extend(m, vx, row);\n");
        if (S->nfix > S->nfix_base) dm_buf_puts(b, "    dm_row_stage(row, vx);\n");
    }
    dm_buf_printf(b, "    return dm_signal%s_at(pre, %s, vx%s);\n}\n\n", grad ? "_grad" : "",
                  S->nfix > 0 ? "row" : "m", ds);
}

static void emit_signal(dm_buf *b, const dm_model *m, const dm_programs *G)
{
    dm_buf_puts(b, "/* The part of the signal that depends on no measurement input: pre[0 .. "
                   "DM_PRE_WIDTH). */\n");
    emit_prepare(b, m, &G->signal, &G->signal_split, "dm_signal_prepare");

    emitter E = {b, m, &G->signal, NULL, NULL};
    dm_buf_puts(b, "/* Predicted signal of one measurement, from dm_signal_prepare's pre. */\n"
                   "DM_FN real dm_signal_at(const real *pre, const real *m, const real *v)\n{\n");
    emit_at_body(&E, b, &G->signal_split, &G->signal_root, 1);
    dm_buf_puts(b, "    return ");
    emit_operand(&E, G->signal_root, 0);
    dm_buf_puts(b, ";\n}\n\n");
    emitter_done(&E);

    if (G->held) {
        emit_stage_composite(b, G, 0);
        return;
    }
    if (G->signal_split.nfix == 0) {
        dm_buf_puts(b, "/* Predicted signal of one measurement. */\n"
                       "DM_FN real dm_signal(const real *p, const real *m, const real *v)\n{\n"
                       "    real pre[DM_PRE_WIDTH];\n"
                       "    dm_signal_prepare(p, v, pre);\n"
                       "    return dm_signal_at(pre, m, v);\n}\n\n");
        return;
    }
    dm_buf_puts(b, "/* Predicted signal of one measurement (m: its DM_MEASURE_WIDTH columns). */\n"
                   "DM_FN real dm_signal(const real *p, const real *m, const real *v)\n{\n"
                   "    real pre[DM_PRE_WIDTH], row[DM_ROW_WIDTH];\n"
                   "    dm_signal_prepare(p, v, pre);\n"
                   "    dm_row_extend(m, v, row);\n"
                   "    return dm_signal_at(pre, row, v);\n}\n\n");
}

/* A stage program's values of its held parameters, appended to the voxel row (stage.c). */
static void emit_stage(dm_buf *b, const dm_model *m, const dm_programs *G)
{
    if (!G->held) return;
    emitter E = {b, m, &G->stage, NULL, NULL};
    char *code = malloc((size_t)G->stage.n + 1);
    if (!code) abort();
    dm_ir_live(&G->stage, G->stage_roots, G->nstage, code);
    dm_buf_puts(b, "/* The voxel row of this stage: vx[0 .. DM_VOXEL_WIDTH) the voxel's inputs v, "
                   "then the\n * DM_STAGE_WIDTH values of the held parameters p that the other "
                   "functions read. */\n"
                   "DM_FN void dm_voxel_extend(const real *p, const real *v, real *vx)\n{\n"
                   "    for (int c = 0; c < DM_VOXEL_WIDTH; c++) vx[c] = v[c];\n"
                   "    real *s = vx + DM_VOXEL_WIDTH;\n");
    emit_fill(&E, b, code, 1, "s", G->stage_roots, G->nstage);
    if (G->nstage == 0) dm_buf_puts(b, "    (void)s;\n");
    dm_buf_puts(b, "}\n\n");
    emitter_done(&E);
    free(code);
}

/* The fixed values of one measurement and the extended row (model_api.h), when there are
 * any: the per-measurement work that reads no parameter. */
/* A stage program's fixed values that read its stage values, made per voxel in the row from
 * its base values (split.c). */
static void emit_row_stage(dm_buf *b, const dm_model *m, const dm_programs *G)
{
    const dm_split *S = &G->signal_split;
    if (S->nfix == S->nfix_base) return;
    const dm_prog *P = &G->signal;
    int *base = malloc(sizeof(int) * ((size_t)P->n + 1));
    if (!base) abort();
    for (int i = 0; i < P->n; i++) base[i] = -1;
    for (int i = 0; i < P->n; i++) /* the base values the stage's code reads from the row */
        for (int j = 0; S->stage_code[i] && j < P->ins[i].nargs; j++) {
            int a = P->ins[i].arg[j];
            if (S->fix_slot[a] >= 0 && S->fix_slot[a] < S->nfix_base) base[a] = S->fix_slot[a];
        }
    emitter E = {b, m, P, NULL, NULL};
    dm_buf_puts(b,
                "/* The fixed values that read the stage's values, made per voxel: row[DM_MEASURE_"
                "WIDTH +\n * DM_FIX_BASE_WIDTH .. DM_ROW_WIDTH) from the row's measurement "
                "columns and base values\n * (dm_row_extend) and the voxel row v. */\n"
                "DM_FN void dm_row_stage(real *m, const real *v)\n{\n");
    dm_buf body = {0};
    int uses;
    E.b = &body;
    emit_marked(&E, S->stage_code, NULL, base, &uses);
    E.b = b;
    if (!(uses & 4)) dm_buf_puts(b, "    (void)v;\n");
    if (body.s) dm_buf_puts(b, body.s);
    free(body.s);
    for (int k = S->nfix_base; k < S->nfix; k++) {
        dm_buf_printf(b, "    m[DM_MEASURE_WIDTH + %d] = ", k);
        emit_operand(&E, S->fix_ins[k], 0);
        dm_buf_puts(b, ";\n");
    }
    dm_buf_puts(b, "}\n\n");
    emitter_done(&E);
    free(base);
}

static void emit_fixed(dm_buf *b, const dm_model *m, const dm_programs *G)
{
    const dm_split *S = &G->signal_split;
    if (S->nfix == 0) return;
    emitter E = {b, m, &G->signal, NULL, NULL};
    if (G->held)
        dm_buf_puts(b, "/* The per-measurement values that read no parameter and no stage value: "
                       "fix[0 ..\n * DM_FIX_BASE_WIDTH) of measurement m (its DM_MEASURE_WIDTH "
                       "columns) in voxel v. */\n");
    else
        dm_buf_puts(b, "/* The per-measurement values that read no parameter: fix[0 .. "
                       "DM_FIX_WIDTH) of measurement\n * m (its DM_MEASURE_WIDTH columns) in voxel "
                       "v. */\n");
    dm_buf_puts(b, "DM_FN void dm_signal_fix(const real *m, const real *v, real *fix)\n{\n");
    emit_fill(&E, b, S->fix_code, 6, "fix", S->fix_ins, S->nfix_base);
    if (S->nfix_base == 0) dm_buf_puts(b, "    (void)fix;\n");
    dm_buf_puts(b, "}\n\n");
    emitter_done(&E);
    dm_buf_puts(b, "/* The row the _at functions read: measurement m's columns, then its fixed "
                   "values. */\n"
                   "DM_FN void dm_row_extend(const real *m, const real *v, real *row)\n{\n"
                   "    for (int c = 0; c < DM_MEASURE_WIDTH; c++) row[c] = m[c];\n"
                   "    dm_signal_fix(m, v, row + DM_MEASURE_WIDTH);\n}\n\n");
    emit_row_stage(b, m, G);
}

static void emit_signal_grad(dm_buf *b, const dm_model *m, const dm_programs *G)
{
    int np = m->params.n;
    dm_buf_puts(b, "/* The invariant values and partials the gradient needs per measurement: "
                   "pre[0 ..\n * DM_PREG_WIDTH). */\n");
    emit_prepare(b, m, &G->grad, &G->grad_split, "dm_signal_grad_prepare");

    emitter E = {b, m, &G->grad, NULL, NULL};
    dm_buf_puts(b, "/* The signal and ds[k] = d signal / d p[k] of one measurement (forward mode),"
                   "\n * from dm_signal_grad_prepare's pre. */\n"
                   "DM_FN real dm_signal_grad_at(const real *pre, const real *m, const real *v, "
                   "real *ds)\n{\n");
    emit_at_body(&E, b, &G->grad_split, G->grad_roots, 1 + np);
    for (int k = 0; k < np; k++) {
        int r = G->grad_roots[1 + k];
        dm_buf_printf(b, "    ds[%d] = ", k);
        if (r < 0)
            dm_buf_puts(b, "0");
        else
            emit_operand(&E, r, 0);
        dm_buf_printf(b, ";%s /* %s */\n", m->params.items[k]->derivative ? " /* user */" : "",
                      m->params.items[k]->name);
    }
    if (np == 0) dm_buf_puts(b, "    (void)ds;\n");
    dm_buf_puts(b, "    return ");
    emit_operand(&E, G->grad_roots[0], 0);
    dm_buf_puts(b, ";\n}\n\n");
    emitter_done(&E);

    if (G->held) {
        emit_stage_composite(b, G, 1);
        return;
    }
    dm_buf_puts(b, "/* The signal and ds[k] = d signal / d p[k], in one pass (forward mode). */\n"
                   "DM_FN real dm_signal_grad(const real *p, const real *m, const real *v, "
                   "real *ds)\n{\n"
                   "    real pre[DM_PREG_WIDTH];\n"
                   "    dm_signal_grad_prepare(p, v, pre);\n");
    if (G->signal_split.nfix == 0) {
        dm_buf_puts(b, "    return dm_signal_grad_at(pre, m, v, ds);\n}\n\n");
        return;
    }
    dm_buf_puts(b, "    real row[DM_ROW_WIDTH];\n"
                   "    dm_row_extend(m, v, row);\n"
                   "    return dm_signal_grad_at(pre, row, v, ds);\n}\n\n");
}

static double param_lo(const dm_param *par)
{
    return par->has_bounds ? par->lo : -INFINITY;
}
static double param_hi(const dm_param *par)
{
    return par->has_bounds ? par->hi : INFINITY;
}

static void emit_in_bounds(dm_buf *b, const dm_model *m)
{
    dm_buf_puts(b, "/* 1 when every non-periodic parameter is within its bounds (and none is "
                   "nan). */\nDM_FN int dm_in_bounds(const real *p)\n{\n");
    for (int k = 0; k < m->params.n; k++) {
        const dm_param *par = m->params.items[k];
        double lo = param_lo(par), hi = param_hi(par);
        int check_lo = !par->periodic && isfinite(lo), check_hi = !par->periodic && isfinite(hi);
        /* Written as !(inside) so that nan fails every test. */
        dm_buf_printf(b, "    if (!(");
        if (!check_lo && !check_hi) dm_buf_printf(b, "p[%d] == p[%d]", k, k);
        if (check_lo) {
            dm_buf_printf(b, "p[%d] %s ", k, par->lo_closed ? ">=" : ">");
            emit_literal(b, lo, 0);
        }
        if (check_lo && check_hi) dm_buf_puts(b, " && ");
        if (check_hi) {
            dm_buf_printf(b, "p[%d] %s ", k, par->hi_closed ? "<=" : "<");
            emit_literal(b, hi, 0);
        }
        dm_buf_printf(b, "))\n        return 0; /* %s%s */\n", par->name,
                      par->periodic ? ", periodic" : "");
    }
    dm_buf_puts(b, "    return 1;\n}\n\n");
}

static void emit_constraints(dm_buf *b, const dm_model *m, const dm_programs *G)
{
    emitter E = {b, m, &G->constraints, NULL, NULL};
    static const char *const pv_names[3] = {"p", "m", "v"};
    int n = m->constraints.n;
    dm_buf_puts(b, "/* 1 when every constraint holds. */\n"
                   "DM_FN int dm_constraints_ok(const real *p, const real *v)\n{\n");
    emit_function_body(&E, b, G->constraint_roots, n, 5, pv_names);
    dm_buf_puts(b, "    return ");
    if (n == 0) dm_buf_puts(b, "1");
    for (int i = 0; i < n; i++) {
        if (i) dm_buf_puts(b, " && ");
        emit_operand(&E, G->constraint_roots[i], 0);
    }
    dm_buf_puts(b, ";\n}\n\n");
    emitter_done(&E);
}

static void emit_prior(dm_buf *b, const dm_model *m, const dm_programs *G)
{
    emitter E = {b, m, &G->prior, NULL, NULL};
    static const char *const pv_names[3] = {"p", "m", "v"};
    dm_buf_puts(b, "/* Sum of the prior energies (negative log densities, constants dropped). */\n"
                   "DM_FN real dm_prior_energy(const real *p, const real *v)\n{\n");
    emit_function_body(&E, b, &G->prior_root, 1, 5, pv_names);
    dm_buf_puts(b, "    return ");
    emit_operand(&E, G->prior_root, 0);
    dm_buf_puts(b, ";\n}\n\n");
    emitter_done(&E);
}

static void emit_wrap(dm_buf *b, const dm_model *m)
{
    int any = 0;
    dm_buf_puts(b, "/* Maps every periodic parameter into [lo, hi). */\n"
                   "DM_FN void dm_wrap_periodic(real *p)\n{\n");
    for (int k = 0; k < m->params.n; k++) {
        const dm_param *par = m->params.items[k];
        if (!par->periodic || !isfinite(param_lo(par)) || !isfinite(param_hi(par))) continue;
        any = 1;
        dm_buf_printf(b, "    p[%d] = dm_wrap(p[%d], ", k, k);
        emit_literal(b, par->lo, 1);
        dm_buf_puts(b, ", ");
        emit_literal(b, par->hi, 1);
        dm_buf_printf(b, "); /* %s */\n", par->name);
    }
    if (!any) dm_buf_puts(b, "    (void)p;\n");
    dm_buf_puts(b, "}\n\n");
}

typedef enum { FREE_IDENTITY, FREE_LOWER, FREE_UPPER, FREE_BOTH } free_kind;

static free_kind free_kind_of(const dm_param *par)
{
    int lo = isfinite(param_lo(par)), hi = isfinite(param_hi(par));
    if (par->periodic || (!lo && !hi)) return FREE_IDENTITY;
    return lo && hi ? FREE_BOTH : lo ? FREE_LOWER : FREE_UPPER;
}

/* Thesis eq. 5.8-5.10: lower only p = lo + exp(x); upper only p = hi - exp(x); both
 * p = (hi-lo)/pi * atan(x) + (hi+lo)/2.
 *
 * dm_to_free keeps x where LM can move it: |x| <= DM_FREE_ATAN_MAX (20) for the atan map, and
 * x >= DM_FREE_EXP_MIN (-25) for the exp maps (templates/fit/model_api.h).  Why: near a bound
 * the atan map has dp/dx = (hi-lo)/(pi x^2), so a start at fiso = 1e-16 (x = -3e15) gets
 * dp/dx ~ 3e-32.
 * LM's linear model of the signal then holds only for steps in p no larger than p's distance
 * from the bound, the damping needed for such a step is ~1e15, and the first step accepted
 * (~1e3 in x, ~1e-28 in p) is below the step tolerance relative to |x|: LM stops there as
 * converged, having moved nothing.  A start closer to a bound is therefore moved to the edge
 * (for the atan map (hi-lo)/pi * atan(1/20), 1.6% of the range, the pull that starts on a
 * closed bound always had; for the exp maps e^-25 = 1.4e-11 from the bound), where dp/dx is
 * large enough for LM to leave the bound in a few steps, or to go back to it.  dm_near_bound
 * flags an estimate within a narrower hair of a bound (|x| beyond DM_NEAR_BOUND_ATAN = 1000,
 * 3.2e-4 of the range; or beyond DM_FREE_EXP_MIN) for the at-a-bound status. */
static void emit_free_transforms(dm_buf *b, const dm_model *m)
{
    dm_buf_puts(b, "/* Levenberg-Marquardt reparametrisation: free x from bounded p. */\n"
                   "DM_FN void dm_to_free(const real *p, real *x)\n{\n");
    for (int k = 0; k < m->params.n; k++) {
        const dm_param *par = m->params.items[k];
        double lo = param_lo(par), hi = param_hi(par);
        switch (free_kind_of(par)) {
        case FREE_IDENTITY: dm_buf_printf(b, "    x[%d] = p[%d];", k, k); break;
        case FREE_LOWER:
            dm_buf_printf(b, "    x[%d] = log(p[%d]", k, k);
            if (lo != 0) {
                dm_buf_puts(b, " - ");
                emit_literal(b, lo, 0);
            }
            dm_buf_printf(b, ");\n    if (!(x[%d] >= %d)) x[%d] = %d;", k, (int)DM_FREE_EXP_MIN, k,
                          (int)DM_FREE_EXP_MIN);
            break;
        case FREE_UPPER:
            dm_buf_printf(b, "    x[%d] = log(", k);
            if (hi != 0) {
                emit_literal(b, hi, 0);
                dm_buf_puts(b, " ");
            }
            dm_buf_printf(b, "-%sp[%d]);", hi != 0 ? " " : "", k);
            dm_buf_printf(b, "\n    if (!(x[%d] >= %d)) x[%d] = %d;", k, (int)DM_FREE_EXP_MIN, k,
                          (int)DM_FREE_EXP_MIN);
            break;
        case FREE_BOTH:
            dm_buf_printf(b, "    x[%d] = tan((p[%d] - ", k, k);
            emit_literal(b, (hi + lo) / 2, 0);
            dm_buf_puts(b, ") * ");
            emit_literal(b, DM_PI_D / (hi - lo), 0);
            dm_buf_puts(b, ");");
            dm_buf_printf(b,
                          "\n    if (!(fabs(x[%d]) <= %d))\n"
                          "        x[%d] = x[%d] > 0 ? %d : -%d;",
                          k, (int)DM_FREE_ATAN_MAX, k, k, (int)DM_FREE_ATAN_MAX,
                          (int)DM_FREE_ATAN_MAX);
            break;
        }
        dm_buf_printf(b, " /* %s */\n", par->name);
    }
    if (m->params.n == 0) dm_buf_puts(b, "    (void)p;\n    (void)x;\n");
    dm_buf_puts(b, "}\n\n");

    dm_buf_puts(b, "/* Bounded p from free x, and dpdx[k] = dp[k] / dx[k]. */\n"
                   "DM_FN void dm_from_free(const real *x, real *p, real *dpdx)\n{\n");
    for (int k = 0; k < m->params.n; k++) {
        const dm_param *par = m->params.items[k];
        double lo = param_lo(par), hi = param_hi(par);
        switch (free_kind_of(par)) {
        case FREE_IDENTITY:
            dm_buf_printf(b, "    p[%d] = x[%d];\n    dpdx[%d] = 1;\n", k, k, k);
            break;
        case FREE_LOWER:
        case FREE_UPPER: {
            int lower = free_kind_of(par) == FREE_LOWER;
            dm_buf_printf(b, "    {\n        const real e = exp(x[%d]);\n", k);
            dm_buf_printf(b, "        p[%d] = ", k);
            if (lower && lo == 0) {
                dm_buf_puts(b, "e");
            } else if (!lower && hi == 0) {
                dm_buf_puts(b, "-e");
            } else {
                emit_literal(b, lower ? lo : hi, 0);
                dm_buf_puts(b, lower ? " + e" : " - e");
            }
            dm_buf_printf(b, ";\n        dpdx[%d] = %se;\n    }\n", k, lower ? "" : "-");
            break;
        }
        case FREE_BOTH:
            dm_buf_printf(b, "    p[%d] = ", k);
            emit_literal(b, (hi - lo) / DM_PI_D, 0);
            dm_buf_printf(b, " * atan(x[%d]) + ", k);
            emit_literal(b, (hi + lo) / 2, 0);
            dm_buf_printf(b, ";\n    dpdx[%d] = ", k);
            emit_literal(b, (hi - lo) / DM_PI_D, 0);
            dm_buf_printf(b, " / (1 + x[%d] * x[%d]);\n", k, k);
            break;
        }
    }
    if (m->params.n == 0) dm_buf_puts(b, "    (void)x;\n    (void)p;\n    (void)dpdx;\n");
    dm_buf_puts(b, "}\n\n");

    /* The hair of each bound (see above). */
    dm_buf_puts(b,
                "/* Bit k: parameter k lies within a hair of a bound (3.2e-4 of a finite range,\n"
                " * 1.4e-11 from a single bound). */\n"
                "DM_FN unsigned dm_near_bound(const real *p)\n{\n    unsigned near = 0;\n");
    int any = 0;
    for (int k = 0; k < m->params.n; k++) {
        const dm_param *par = m->params.items[k];
        double lo = param_lo(par), hi = param_hi(par);
        free_kind kind = free_kind_of(par);
        if (kind == FREE_IDENTITY) continue;
        double hair = kind == FREE_BOTH ? (hi - lo) / DM_PI_D * atan(1 / DM_NEAR_BOUND_ATAN)
                                        : exp(DM_FREE_EXP_MIN);
        any = 1;
        dm_buf_puts(b, "    if (");
        if (kind != FREE_UPPER) {
            dm_buf_printf(b, "p[%d] - ", k);
            emit_literal(b, lo, 0);
            dm_buf_puts(b, " <= ");
            emit_literal(b, hair, 0);
        }
        if (kind == FREE_BOTH) dm_buf_puts(b, " || ");
        if (kind != FREE_LOWER) {
            emit_literal(b, hi, 0);
            dm_buf_printf(b, " - p[%d] <= ", k);
            emit_literal(b, hair, 0);
        }
        dm_buf_printf(b, ") near |= 1u << %d; /* %s */\n", k, par->name);
    }
    if (!any) dm_buf_puts(b, "    (void)p;\n");
    dm_buf_puts(b, "    return near;\n}\n\n");
}

static void emit_proposal_sd(dm_buf *b, const dm_model *m)
{
    dm_buf_puts(b, "/* Initial MCMC proposal sd of parameter k at p: its `step`, else 0.2 for\n"
                   " * angles and fractions, else |p[k]| / 10 (a tenth of the bound width at 0;"
                   " 0.1\n * when that is infinite). */\n"
                   "DM_FN real dm_proposal_sd(int k, const real *p)\n{\n");
    int reads_p = 0;
    for (int k = 0; k < m->params.n; k++) {
        const dm_param *par = m->params.items[k];
        int fixed = par->step > 0 || par->periodic || par->prior.kind == DM_PRIOR_SPHERE ||
                    par->prior.kind == DM_PRIOR_ARD ||
                    (par->has_bounds && par->lo == 0 && par->hi == 1);
        reads_p |= !fixed;
    }
    if (!reads_p) dm_buf_puts(b, "    (void)p;\n");
    dm_buf_puts(b, "    switch (k) {\n");
    for (int k = 0; k < m->params.n; k++) {
        const dm_param *par = m->params.items[k];
        dm_buf_printf(b, "    case %d: /* %s */\n        return ", k, par->name);
        if (par->step > 0) {
            emit_literal(b, par->step, 1);
        } else if (par->periodic || par->prior.kind == DM_PRIOR_SPHERE ||
                   par->prior.kind == DM_PRIOR_ARD ||
                   (par->has_bounds && par->lo == 0 && par->hi == 1)) {
            emit_literal(b, 0.2, 1);
        } else {
            double width = param_hi(par) - param_lo(par);
            dm_buf_printf(b, "p[%d] != 0 ? fabs(p[%d]) / 10 : ", k, k);
            emit_literal(b, isfinite(width) ? width / 10 : 0.1, 1);
        }
        dm_buf_puts(b, ";\n");
    }
    dm_buf_puts(b, "    default:\n        return 0;\n    }\n}\n\n");
}

static void emit_outputs(dm_buf *b, const dm_model *m, const dm_programs *G)
{
    emitter E = {b, m, &G->outputs, NULL, NULL};
    static const char *const pv_names[3] = {"p", "m", "v"};
    int n = m->output_width;
    dm_buf_puts(b, "/* The derived outputs, DM_OUTPUT_WIDTH slots. */\n"
                   "DM_FN void dm_outputs(const real *p, const real *v, real *out)\n{\n");
    emit_function_body(&E, b, G->output_roots, n, 5, pv_names);
    if (n == 0) dm_buf_puts(b, "    (void)out;\n");
    for (int i = 0; i < m->outputs.n; i++) {
        const dm_output *o = m->outputs.items[i];
        int w = o->width == 3 ? 3 : 1;
        for (int c = 0; c < w; c++) {
            int r = G->output_roots[o->column + c];
            dm_buf_printf(b, "    out[%d] = ", o->column + c);
            if (r < 0)
                dm_buf_puts(b, "0");
            else
                emit_operand(&E, r, 0);
            if (w == 3)
                dm_buf_printf(b, "; /* %s, %c */\n", o->name, "xyz"[c]);
            else
                dm_buf_printf(b, "; /* %s */\n", o->name);
        }
    }
    dm_buf_puts(b, "}\n");
    emitter_done(&E);
}

/* pre[] never has size 0. */
static int pre_width(const dm_split *S)
{
    return S->nslots > 0 ? S->nslots : 1; /* as dm_programs_flops' pre_width */
}

/* The header comment: what the file is and how the two builds include it. */
static void emit_prologue(dm_buf *b, const dm_model *m)
{
    unsigned long long h = dm_model_source_hash(m);
    dm_buf_printf(b, "/* Model %s: \"", m->name);
    for (const char *d = m->description ? m->description : ""; *d; d++) /* no early "*\/" */
        dm_buf_printf(b, "%c%s", *d, d[0] == '*' && d[1] == '/' ? " " : "");
    dm_buf_puts(b, "\".\n");
    dm_buf_printf(b, " * Generated by dimoc from a model source of hash %016llx; do not edit.\n",
                  h);
    /* The files are named as they stood before the templates had a folder per engine (now
     * templates/maths/mathlib.h, templates/fit/cpu_fitter.c, gpu_fitter.cu, model_api.h): the
     * text is left as it was so that every generated file, and its code_hash that a fit's
     * provenance.json records, stays byte for byte what it was. */
    dm_buf_puts(b, " * One source for both builds.  The includer defines `real` (float or double)"
                   " and DM_FN,\n"
                   " * then includes templates/mathlib.h and this file:\n"
                   " *   host (templates/cpu_fitter.c): DM_FN is static inline, <math.h> is"
                   " included first;\n"
                   " *   NVRTC (templates/gpu_fitter.cu): DM_FN is static __device__ and inline;"
                   " the CUDA math\n"
                   " *   functions are built in.\n"
                   " * The functions are documented in templates/model_api.h. */\n\n");
}

char *dm_emit_source(const dm_model *m, const dm_programs *G)
{
    dm_buf b = {0};
    emit_prologue(&b, m);
    dm_buf_printf(&b, "#define DM_NPARAMS %d\n", m->params.n);
    dm_buf_printf(&b, "#define DM_MEASURE_WIDTH %d\n", m->measure_width);
    dm_buf_printf(&b, "#define DM_VOXEL_WIDTH %d\n", m->voxel_width);
    dm_buf_printf(&b, "#define DM_OUTPUT_WIDTH %d\n", m->output_width);
    dm_buf_printf(&b, "#define DM_PRE_WIDTH %d\n", pre_width(&G->signal_split));
    dm_buf_printf(&b, "#define DM_PREG_WIDTH %d\n", pre_width(&G->grad_split));
    dm_buf_printf(&b, "#define DM_FIX_WIDTH %d\n", G->signal_split.nfix);
    dm_buf_puts(&b, "#define DM_ROW_WIDTH (DM_MEASURE_WIDTH + DM_FIX_WIDTH)\n");
    if (G->held) {
        dm_flops f;
        dm_programs_flops(G, &f);
        dm_buf_printf(&b, "#define DM_STAGE_HELD 0x%xu\n", G->held);
        dm_buf_printf(&b, "#define DM_STAGE_WIDTH %d\n", G->nstage);
        dm_buf_printf(&b, "#define DM_ROWS_PER_VOXEL %d\n", f.rows_per_voxel);
        dm_buf_printf(&b, "#define DM_PREPARE_READS_STAGE %d\n", f.prepare_reads_stage);
        dm_buf_printf(&b, "#define DM_FIX_BASE_WIDTH %d\n", G->signal_split.nfix_base);
    }
    dm_buf_puts(&b, "\n");
    emit_stage(&b, m, G);
    emit_fixed(&b, m, G);
    emit_signal(&b, m, G);
    emit_signal_grad(&b, m, G);
    emit_in_bounds(&b, m);
    emit_constraints(&b, m, G);
    emit_prior(&b, m, G);
    emit_wrap(&b, m);
    emit_free_transforms(&b, m);
    emit_proposal_sd(&b, m);
    emit_outputs(&b, m, G);
    return b.s;
}
