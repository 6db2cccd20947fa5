/* `dimoc check` output: what the compiler understood of a model, on one screen. */
#include "compiler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Precedence levels, loosest first (as in parser.y). */
enum {
    P_TERNARY = 1,
    P_OR,
    P_AND,
    P_EQUALITY,
    P_RELATION,
    P_SUM,
    P_PRODUCT,
    P_UNARY,
    P_POWER,
    P_POSTFIX,
    P_PRIMARY
};

static int precedence(const dm_expr *e)
{
    switch (e->kind) {
    case DM_E_TERNARY: return P_TERNARY;
    case DM_E_UNARY:
    case DM_E_SUM: return P_UNARY;
    case DM_E_INDEX: return P_POSTFIX;
    case DM_E_BINARY:
        switch (e->op) {
        case DM_OP_OR: return P_OR;
        case DM_OP_AND: return P_AND;
        case DM_OP_EQ:
        case DM_OP_NE: return P_EQUALITY;
        case '<':
        case '>':
        case DM_OP_LE:
        case DM_OP_GE: return P_RELATION;
        case '+':
        case '-': return P_SUM;
        case '*':
        case '/': return P_PRODUCT;
        default: return P_POWER;
        }
    default: return P_PRIMARY;
    }
}

/* Shortest of %.15g / %.17g that reads back exactly. */
static void print_number(double x, FILE *out)
{
    char buf[40];
    if (isinf(x)) {
        fputs(x > 0 ? "inf" : "-inf", out);
        return;
    }
    snprintf(buf, sizeof buf, "%.15g", x);
    if (strtod(buf, NULL) != x) snprintf(buf, sizeof buf, "%.17g", x);
    fputs(buf, out);
}

static const char *binary_op(int op)
{
    switch (op) {
    case DM_OP_LE: return " <= ";
    case DM_OP_GE: return " >= ";
    case DM_OP_EQ: return " == ";
    case DM_OP_NE: return " != ";
    case DM_OP_AND: return " && ";
    case DM_OP_OR: return " || ";
    case '+': return " + ";
    case '-': return " - ";
    case '*': return " * ";
    case '/': return " / ";
    case '<': return " < ";
    case '>': return " > ";
    default: return "^";
    }
}

/* Whether E, printed, ends in a sum's body: a '*' or '/' written after it would continue
 * that body, so E needs parentheses as the left operand of one. */
static int ends_in_sum(const dm_expr *e)
{
    switch (e->kind) {
    case DM_E_SUM: return 1;
    case DM_E_UNARY: return ends_in_sum(e->a);
    case DM_E_BINARY: return ends_in_sum(e->b);
    default: return 0;
    }
}

static void print_at(const dm_expr *e, int min_prec, FILE *out)
{
    if (e->call) { /* an inlined function or compartment: shown as written */
        print_at(e->call, min_prec, out);
        return;
    }
    int prec = precedence(e);
    int parens = prec < min_prec;
    if (parens) fputc('(', out);
    switch (e->kind) {
    case DM_E_NUM: print_number(e->num, out); break;
    case DM_E_NAME: fputs(e->name, out); break;
    case DM_E_UNARY:
        fputc(e->op, out);
        print_at(e->a, P_UNARY, out);
        break;
    case DM_E_BINARY: {
        int left = prec, right = prec + 1;
        if (prec == P_EQUALITY || prec == P_RELATION)
            left = prec + 1; /* comparisons do not chain */
        if (prec == P_POWER) {
            left = P_POSTFIX;
            right = P_UNARY;
        }
        if ((e->op == '*' || e->op == '/') && ends_in_sum(e->a)) left = P_PRIMARY;
        print_at(e->a, left, out);
        fputs(binary_op(e->op), out);
        print_at(e->b, right, out);
        break;
    }
    case DM_E_TERNARY:
        print_at(e->a, P_OR, out);
        fputs(" ? ", out);
        print_at(e->b, P_TERNARY, out);
        fputs(" : ", out);
        print_at(e->c, P_TERNARY, out);
        break;
    case DM_E_CALL:
        fprintf(out, "%s(", e->name);
        for (int i = 0; i < e->nargs; i++) {
            if (i) fputs(", ", out);
            print_at(e->args[i], P_TERNARY, out);
        }
        fputc(')', out);
        break;
    case DM_E_SUM:
        fprintf(out, "sum(%s in ", e->name);
        print_at(e->a, P_TERNARY, out);
        fputs("..", out);
        print_at(e->b, P_TERNARY, out);
        fputs(") ", out);
        print_at(e->c, P_PRODUCT, out);
        break;
    case DM_E_INDEX:
        print_at(e->a, P_POSTFIX, out);
        fputc('[', out);
        print_at(e->b, P_TERNARY, out);
        fputc(']', out);
        break;
    }
    if (parens) fputc(')', out);
}

/* The functions and compartments the model calls, and where each is defined. */
static void print_definitions_used(const dm_model *m, FILE *out)
{
    int n = 0;
    for (int i = 0; i < m->definitions.n; i++) n += m->definitions.items[i]->used;
    if (n == 0) return;
    fputs("functions and compartments used:\n", out);
    for (int i = 0; i < m->definitions.n; i++) {
        const dm_definition *d = m->definitions.items[i];
        if (!d->used) continue;
        const char *file = d->loc.file < m->sources.n ? m->sources.items[d->loc.file]->path : "";
        fprintf(out, "  %-16s %-11s %s:%d\n", d->name,
                d->is_compartment ? "compartment" : "function", file, d->loc.line);
    }
}

void dm_print_expr(const dm_expr *e, FILE *out)
{
    print_at(e, P_TERNARY, out);
}

static const char *type_name(dm_type t)
{
    return t == DM_T_SCALAR ? "scalar"
           : t == DM_T_VEC3 ? "3-vector"
           : t == DM_T_MAT3 ? "3x3 matrix"
                            : "?";
}

static void print_prior(const dm_prior *p, FILE *out)
{
    switch (p->kind) {
    case DM_PRIOR_NONE: fputs("none", out); break;
    case DM_PRIOR_UNIFORM: fputs("uniform", out); break;
    case DM_PRIOR_SPHERE: fputs("sphere", out); break;
    case DM_PRIOR_ARD: fprintf(out, "ard(%g)", p->value[0]); break;
    case DM_PRIOR_GAUSSIAN: fprintf(out, "gaussian(%g, %g)", p->value[0], p->value[1]); break;
    case DM_PRIOR_GAMMA: fprintf(out, "gamma(%g, %g)", p->value[0], p->value[1]); break;
    case DM_PRIOR_CUSTOM:
        fputs("custom(", out);
        dm_print_expr(p->args[0], out);
        fputs(")", out);
        break;
    }
}

static int name_width(const dm_model *m)
{
    int w = 4;
    for (int i = 0; i < m->params.n; i++)
        if ((int)strlen(m->params.items[i]->name) > w) w = (int)strlen(m->params.items[i]->name);
    return w;
}

static void print_inputs(const char *title, const char *unit, int total, const dm_input *const *v,
                         int n, int is_measure, FILE *out)
{
    if (n == 0) {
        fprintf(out, "%s: none\n", title);
        return;
    }
    fprintf(out, "%s (%d column%s per %s):\n", title, total, total == 1 ? "" : "s", unit);
    for (int i = 0; i < n; i++) {
        const dm_input *in = v[i];
        fprintf(out, "  %-12s width %-3d column %-3d", in->name, in->width, in->column);
        if (is_measure)
            fprintf(out, " from %s", in->source ? in->source : "--measure file");
        else if (in->has_default)
            fprintf(out, " default %g", in->default_value);
        else
            fputs(" map required", out);
        fputc('\n', out);
    }
}

static void print_params(const dm_model *m, FILE *out)
{
    int w = name_width(m);
    fprintf(out, "parameters (%d):\n", m->params.n);
    fprintf(out, "  %-*s  %-22s %-10s %-8s %s\n", w, "name", "bounds", "init", "step", "prior");
    for (int i = 0; i < m->params.n; i++) {
        const dm_param *p = m->params.items[i];
        char bounds[64], init[32], step[32];
        snprintf(bounds, sizeof bounds, "%c%g, %g%c", p->lo_closed ? '[' : '(', p->lo, p->hi,
                 p->hi_closed ? ']' : ')');
        if (p->init_source == DM_INIT_THETA || p->init_source == DM_INIT_PHI)
            snprintf(init, sizeof init, "%s(%d)", dm_init_source_name(p->init_source),
                     p->init_axis);
        else if (p->init_source != DM_INIT_CONST)
            snprintf(init, sizeof init, "%s", dm_init_source_name(p->init_source));
        else
            snprintf(init, sizeof init, "%g%s", p->init, p->init_expr ? "" : "*");
        if (p->step > 0)
            snprintf(step, sizeof step, "%g", p->step);
        else
            snprintf(step, sizeof step, "auto");
        fprintf(out, "  %-*s  %-22s %-10s %-8s ", w, p->name, bounds, init, step);
        print_prior(&p->prior, out);
        if (p->periodic) fputs("  periodic", out);
        if (p->derivative) fputs("  derivative given", out);
        if (!p->used) fputs("  UNUSED by the signal", out);
        fputc('\n', out);
    }
}

void dm_print_summary(const dm_model *m, FILE *out)
{
    fprintf(out, "model %s: %s\n", m->name, m->description ? m->description : "");
    print_inputs("measures", "measurement", m->measure_width,
                 (const dm_input *const *)m->measures.items, m->measures.n, 1, out);
    print_inputs("voxel inputs", "voxel", m->voxel_width, (const dm_input *const *)m->voxels.items,
                 m->voxels.n, 0, out);
    print_params(m, out);
    for (int i = 0; i < m->params.n; i++)
        if (!m->params.items[i]->init_expr && !m->params.items[i]->init_source) {
            fputs("  (* default initial value)\n", out);
            break;
        }
    if (m->multistart > 1) fprintf(out, "multistart: %d LM starts per voxel\n", m->multistart);
    if (m->lets.n) {
        fputs("lets:\n", out);
        for (int i = 0; i < m->lets.n; i++) {
            const dm_let *l = m->lets.items[i];
            fprintf(out, "  %-10s %-9s = ", l->name, type_name(l->value->type));
            dm_print_expr(l->value, out);
            fputc('\n', out);
        }
    }
    if (m->constraints.n) {
        fputs("constraints:\n", out);
        for (int i = 0; i < m->constraints.n; i++) {
            fputs("  ", out);
            dm_print_expr(m->constraints.items[i]->cond, out);
            fputc('\n', out);
        }
    }
    if (m->outputs.n) {
        fprintf(out, "outputs (%d slot%s):\n", m->output_width, m->output_width == 1 ? "" : "s");
        static const char *const kinds[] = {"scalar", "vector", "axis"};
        for (int i = 0; i < m->outputs.n; i++) {
            const dm_output *o = m->outputs.items[i];
            fprintf(out, "  %-12s %-6s column %-3d = ", o->name, kinds[o->kind], o->column);
            dm_print_expr(o->value, out);
            fputc('\n', out);
        }
    } else {
        fputs("outputs: none\n", out);
    }
    fputs("signal = ", out);
    dm_print_expr(m->signal, out);
    fputc('\n', out);
    print_definitions_used(m, out);
}
