/* Semantic checks: names, types, constant values, columns.  Fills the checker fields of
 * ast.h and reports every mistake with its own message (docs/model-language.md lists them).
 *
 * Order: expand `fractions` sets (check_fractions.c), declare every name (one namespace), then
 * check parameters (constant clauses and priors) and their sets' sums, inputs, lets in order,
 * the signal, derivatives, constraints and outputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtins.h"
#include "check.h"
#include "fit/model_api.h"

static dm_type type_of_width(int width)
{
    return width == 1 ? DM_T_SCALAR : width == 3 ? DM_T_VEC3 : DM_T_ARRAY;
}

static int is_comparison(int op)
{
    return op == '<' || op == '>' || op == DM_OP_LE || op == DM_OP_GE || op == DM_OP_EQ ||
           op == DM_OP_NE;
}

/* --- Declarations ---------------------------------------------------------------------- */

typedef struct decl {
    const char *name;
    dm_loc loc;
    dm_symbol_kind kind; /* outputs: -1 */
    int index;
    int width;
} decl;

static int decl_by_position(const void *pa, const void *pb)
{
    const decl *a = pa, *b = pb;
    if (a->loc.line != b->loc.line) return a->loc.line < b->loc.line ? -1 : 1;
    return a->loc.col < b->loc.col ? -1 : a->loc.col > b->loc.col;
}

static void add_symbol(checker *c, const char *name, dm_symbol_kind kind, int index, int width,
                       double value)
{
    dm_symbol *s = dm_arena_alloc(c->m, sizeof *s);
    s->name = name;
    s->kind = kind;
    s->index = index;
    s->width = width;
    s->type = kind == DM_SYM_LET ? DM_T_UNKNOWN : type_of_width(width);
    s->value = value;
    dm_vec_push(c->m, c->m->symbols, s);
}

/* One namespace for parameters, inputs, lets and outputs; built-in names are reserved. */
static void declare_names(checker *c)
{
    dm_model *m = c->m;
    add_symbol(c, "pi", DM_SYM_CONST, 0, 1, 3.14159265358979323846);
    add_symbol(c, "inf", DM_SYM_CONST, 1, 1, INFINITY);

    int n = m->params.n + m->measures.n + m->voxels.n + m->lets.n + m->outputs.n, k = 0;
    decl *all = calloc((size_t)n + 1, sizeof *all);
    if (!all) abort();
    for (int i = 0; i < m->params.n; i++)
        all[k++] = (decl){m->params.items[i]->name, m->params.items[i]->loc, DM_SYM_PARAM, i, 1};
    for (int i = 0; i < m->measures.n; i++)
        all[k++] = (decl){m->measures.items[i]->name, m->measures.items[i]->loc, DM_SYM_MEASURE, i,
                          m->measures.items[i]->width};
    for (int i = 0; i < m->voxels.n; i++)
        all[k++] = (decl){m->voxels.items[i]->name, m->voxels.items[i]->loc, DM_SYM_VOXEL, i,
                          m->voxels.items[i]->width};
    for (int i = 0; i < m->lets.n; i++)
        all[k++] = (decl){m->lets.items[i]->name, m->lets.items[i]->loc, DM_SYM_LET, i, 1};
    for (int i = 0; i < m->outputs.n; i++)
        if (!m->outputs.items[i]->implied) /* its let declares the name */
            all[k++] = (decl){m->outputs.items[i]->name, m->outputs.items[i]->loc,
                              (dm_symbol_kind)-1, i, 1};
    n = k;
    qsort(all, (size_t)n, sizeof *all, decl_by_position);

    for (int i = 0; i < n; i++) {
        decl *d = &all[i];
        if (dm_builtin_find(d->name)) {
            dm_error(c->d, d->loc, "'%s' is a built-in function and cannot be used as a name",
                     d->name);
            continue;
        }
        dm_symbol *s = dm_model_lookup(m, d->name);
        if (s && s->kind == DM_SYM_CONST) {
            dm_error(c->d, d->loc, "'%s' is a built-in constant and cannot be used as a name",
                     d->name);
            continue;
        }
        const decl *first = NULL;
        for (int j = 0; j < i && !first; j++)
            if (strcmp(all[j].name, d->name) == 0) first = &all[j];
        if (first) {
            dm_error(c->d, d->loc, "duplicate name '%s' (first declared at line %d)", d->name,
                     first->loc.line);
            continue;
        }
        if ((int)d->kind >= 0) add_symbol(c, d->name, d->kind, d->index, d->width, 0);
    }
    free(all);
}

/* --- Parameters ------------------------------------------------------------------------ */

/* Returns 1 when the bounds (or their absence) are valid. */
static int check_bounds(checker *c, dm_param *p)
{
    p->lo = -INFINITY;
    p->hi = INFINITY;
    if (!p->has_bounds) return 1;
    char what[96];
    double lo, hi;
    snprintf(what, sizeof what, "the lower bound of '%s'", p->name);
    int ok = dm_const_value(c, p->lo_expr, what, &lo);
    snprintf(what, sizeof what, "the upper bound of '%s'", p->name);
    ok &= dm_const_value(c, p->hi_expr, what, &hi);
    if (!ok) return 0;
    if (!(lo < hi)) {
        dm_error(c->d, dm_expr_start(p->lo_expr),
                 "the lower bound %g of '%s' is not below its upper "
                 "bound %g",
                 lo, p->name, hi);
        return 0;
    }
    if ((isinf(lo) && p->lo_closed) || (isinf(hi) && p->hi_closed)) {
        dm_error(c->d,
                 isinf(lo) && p->lo_closed ? dm_expr_start(p->lo_expr) : dm_expr_start(p->hi_expr),
                 "an infinite bound of '%s' must be open: use '(' or ')' next to it", p->name);
        return 0;
    }
    p->lo = lo;
    p->hi = hi;
    return 1;
}

static int within_bounds(const dm_param *p, double v)
{
    int above = p->lo_closed ? v >= p->lo : v > p->lo;
    int below = p->hi_closed ? v <= p->hi : v < p->hi;
    return above && below;
}

static void check_init(checker *c, dm_param *p)
{
    /* The default: the middle of finite bounds, else one unit inside the one finite bound,
     * else 0.  `init b0` keeps it as the value to use when a voxel has no b=0 data. */
    int flo = isfinite(p->lo), fhi = isfinite(p->hi);
    p->init = flo && fhi ? (p->lo + p->hi) / 2 : flo ? p->lo + 1 : fhi ? p->hi - 1 : 0;
    if (!p->init_expr) return;
    char what[96];
    double v;
    snprintf(what, sizeof what, "the initial value of '%s'", p->name);
    if (!dm_const_value(c, p->init_expr, what, &v)) return;
    if (!isfinite(v)) {
        dm_error(c->d, dm_expr_start(p->init_expr), "the initial value of '%s' must be finite",
                 p->name);
        return;
    }
    if (!within_bounds(p, v)) {
        dm_error(c->d, dm_expr_start(p->init_expr),
                 "the initial value %g of '%s' is outside its bounds "
                 "%c%g, %g%c",
                 v, p->name, p->lo_closed ? '[' : '(', p->lo, p->hi, p->hi_closed ? ']' : ')');
        return;
    }
    p->init = v;
}

static void check_step(checker *c, dm_param *p)
{
    p->step = 0;
    if (!p->step_expr) return;
    char what[96];
    double v;
    snprintf(what, sizeof what, "the step of '%s'", p->name);
    if (!dm_const_value(c, p->step_expr, what, &v)) return;
    if (!(v > 0 && isfinite(v))) {
        dm_error(c->d, dm_expr_start(p->step_expr),
                 "the step of '%s' must be a positive finite number, "
                 "not %g",
                 p->name, v);
        return;
    }
    p->step = v;
}

typedef struct prior_rule {
    const char *name;
    dm_prior_kind kind;
    int nargs;
    const char *args; /* for messages */
} prior_rule;

static const prior_rule prior_rules[] = {
    {"uniform", DM_PRIOR_UNIFORM, 0, ""},
    {"gaussian", DM_PRIOR_GAUSSIAN, 2, "(mean, sd)"},
    {"gamma", DM_PRIOR_GAMMA, 2, "(shape, scale)"},
    {"ard", DM_PRIOR_ARD, 1, "(weight)"},
    {"sphere", DM_PRIOR_SPHERE, 0, ""},
    {"custom", DM_PRIOR_CUSTOM, 1, "(log-density expression)"},
};
#define NPRIOR_RULES (int)(sizeof prior_rules / sizeof prior_rules[0])

static void check_prior(checker *c, dm_param *p)
{
    dm_prior *pr = &p->prior;
    pr->kind = DM_PRIOR_NONE;
    if (!pr->name) return;
    const prior_rule *rule = NULL;
    const char *names[NPRIOR_RULES + 1];
    for (int i = 0; i < NPRIOR_RULES; i++) {
        names[i] = prior_rules[i].name;
        if (strcmp(pr->name, prior_rules[i].name) == 0) rule = &prior_rules[i];
    }
    names[NPRIOR_RULES] = NULL;
    if (!rule) {
        const char *near = dm_nearest_name(pr->name, names);
        if (near)
            dm_error(c->d, pr->loc, "unknown prior '%s'; did you mean '%s'?", pr->name, near);
        else
            dm_error(c->d, pr->loc,
                     "unknown prior '%s'; the priors are uniform, gaussian, "
                     "gamma, ard, sphere and custom",
                     pr->name);
        return;
    }
    if (pr->nargs != rule->nargs) {
        if (rule->nargs == 0)
            dm_error(c->d, pr->loc, "prior '%s' takes no arguments", rule->name);
        else
            dm_error(c->d, pr->loc, "prior '%s' takes %d argument%s %s, but %d %s given",
                     rule->name, rule->nargs, rule->nargs == 1 ? "" : "s", rule->args, pr->nargs,
                     pr->nargs == 1 ? "is" : "are");
        return;
    }
    if (rule->kind == DM_PRIOR_CUSTOM)
        return; /* checked after the lets, which it may use: check_custom_prior */
    static const char *const arg_names[][2] = {
        [DM_PRIOR_GAUSSIAN] = {"mean", "sd"},
        [DM_PRIOR_GAMMA] = {"shape", "scale"},
        [DM_PRIOR_ARD] = {"weight", ""},
    };
    int ok = 1;
    for (int i = 0; i < pr->nargs; i++) {
        char what[96];
        snprintf(what, sizeof what, "the %s of the %s prior of '%s'", arg_names[rule->kind][i],
                 rule->name, p->name);
        if (!dm_const_value(c, pr->args[i], what, &pr->value[i])) {
            ok = 0;
        } else if (!isfinite(pr->value[i])) {
            dm_error(c->d, dm_expr_start(pr->args[i]), "%s must be finite", what);
            ok = 0;
        }
    }
    if (!ok) return;
    switch (rule->kind) {
    case DM_PRIOR_GAUSSIAN:
        if (pr->value[1] <= 0) {
            dm_error(c->d, dm_expr_start(pr->args[1]),
                     "the sd of a gaussian prior must be positive, not %g", pr->value[1]);
            return;
        }
        break;
    case DM_PRIOR_GAMMA:
        for (int i = 0; i < 2; i++)
            if (pr->value[i] <= 0) {
                dm_error(c->d, dm_expr_start(pr->args[i]),
                         "the %s of a gamma prior must be positive, "
                         "not %g",
                         arg_names[DM_PRIOR_GAMMA][i], pr->value[i]);
                return;
            }
        break;
    case DM_PRIOR_ARD:
        if (pr->value[0] < 0) {
            dm_error(c->d, dm_expr_start(pr->args[0]),
                     "the weight of an ard prior must not be negative, "
                     "not %g",
                     pr->value[0]);
            return;
        }
        break;
    default: break;
    }
    /* Both gamma and ard take log x: they need x > 0 wherever the parameter may go. */
    if ((rule->kind == DM_PRIOR_GAMMA || rule->kind == DM_PRIOR_ARD) && !(p->lo >= 0)) {
        dm_error(c->d, pr->loc,
                 "a %s prior needs a parameter bounded below by 0 or more; "
                 "'%s' has lower bound %g",
                 rule->name, p->name, p->lo);
        return;
    }
    pr->kind = rule->kind;
}

static void check_custom_prior(checker *c, dm_param *p)
{
    dm_prior *pr = &p->prior;
    if (!pr->name || strcmp(pr->name, "custom") != 0 || pr->nargs != 1) return;
    char what[96];
    snprintf(what, sizeof what, "the custom prior of '%s'", p->name);
    expr_ctx x = {
        .what = what, .allow = ALLOW_PER_VOXEL, .let_limit = c->m->lets.n, .self_let = -1};
    dm_type t = dm_check_expr(c, &x, pr->args[0]);
    if (t != DM_T_UNKNOWN && t != DM_T_SCALAR) {
        dm_error(c->d, dm_expr_start(pr->args[0]), "%s must be a scalar log-density, not %s", what,
                 dm_type_words(t, pr->args[0]->width));
        return;
    }
    if (t == DM_T_SCALAR) pr->kind = DM_PRIOR_CUSTOM;
}

static void check_param(checker *c, dm_param *p)
{
    if (check_bounds(c, p) && p->periodic && !(isfinite(p->lo) && isfinite(p->hi)))
        dm_error(c->d, p->loc,
                 "periodic parameter '%s' needs two finite bounds, as in "
                 "'in [0, 2*pi]'",
                 p->name);
    check_init(c, p);
    check_step(c, p);
    check_prior(c, p);
}

/* --- Inputs ---------------------------------------------------------------------------- */

static void check_measures(checker *c)
{
    dm_model *m = c->m;
    const dm_input *bvals = NULL, *bvecs = NULL;
    int column = 0;
    for (int i = 0; i < m->measures.n; i++) {
        dm_input *in = m->measures.items[i];
        in->column = column;
        column += in->width;
        if (!in->source) continue;
        static const char *const sources[] = {"bvals", "bvecs", "scheme", NULL};
        if (strcmp(in->source, "scheme") == 0) { /* a column of --scheme FILE */
            if (!in->scheme_column) in->scheme_column = in->name;
            if (in->width != 1)
                dm_error(c->d, in->loc,
                         "a measure read from a scheme column must have width 1, but '%s' has "
                         "width %d (read each component from its own column)",
                         in->name, in->width);
            continue;
        }
        const dm_input **seen = NULL;
        int need = 0;
        if (strcmp(in->source, "bvals") == 0) {
            seen = &bvals;
            need = 1;
        } else if (strcmp(in->source, "bvecs") == 0) {
            seen = &bvecs;
            need = 3;
        } else {
            const char *near = dm_nearest_name(in->source, sources);
            if (near)
                dm_error(c->d, in->loc, "unknown measure source '%s'; did you mean '%s'?",
                         in->source, near);
            else
                dm_error(c->d, in->loc,
                         "unknown measure source '%s'; expected bvals, bvecs or scheme",
                         in->source);
            continue;
        }
        if (in->width != need)
            dm_error(c->d, in->loc,
                     "a measure read from %s must have width %d, but '%s' has "
                     "width %d",
                     in->source, need, in->name, in->width);
        else if (*seen)
            dm_error(c->d, in->loc,
                     "only one measure may read %s ('%s' at line %d already "
                     "does)",
                     in->source, (*seen)->name, (*seen)->loc.line);
        else
            *seen = in;
    }
    m->measure_width = column;
}

static void check_voxels(checker *c)
{
    dm_model *m = c->m;
    int column = 0;
    for (int i = 0; i < m->voxels.n; i++) {
        dm_input *in = m->voxels.items[i];
        in->column = column;
        column += in->width;
        in->default_value = NAN;
        if (in->has_default) {
            char what[96];
            snprintf(what, sizeof what, "the default of '%s'", in->name);
            dm_const_value(c, in->default_expr, what, &in->default_value);
        }
    }
    m->voxel_width = column;
}

/* --- Lets, signal, derivatives, constraints, outputs ----------------------------------- */

static void check_lets(checker *c)
{
    dm_model *m = c->m;
    for (int i = 0; i < m->lets.n; i++) {
        dm_let *let = m->lets.items[i];
        let_info *li = &c->lets[i];
        li->params = dm_arena_alloc(m, (size_t)c->nparams + 1);
        char what[96];
        snprintf(what, sizeof what, "let '%s'", let->name);
        expr_ctx x = {
            .what = what, .allow = ALLOW_ALL, .let_limit = i, .self_let = i, .params = li->params};
        dm_type t = dm_check_expr(c, &x, let->value);
        li->measure = x.measure;
        li->any_param = x.any_param;
        if (t == DM_T_ARRAY) {
            dm_reject_array(c, let->value);
            t = DM_T_UNKNOWN;
        }
        dm_symbol *s = dm_model_lookup(m, let->name);
        if (s && s->kind == DM_SYM_LET && s->index == i) {
            s->type = t;
            s->width = t == DM_T_VEC3 ? 3 : t == DM_T_MAT3 ? 9 : 1;
        }
    }
}

static void check_signal(checker *c)
{
    dm_model *m = c->m;
    if (m->nsignals == 0) {
        dm_loc at = m->name ? m->name_loc : (dm_loc){1, 1, 0};
        dm_error(c->d, at, "missing 'signal' statement: the model must define its signal");
        return;
    }
    if (m->nsignals > 1)
        dm_error(c->d, m->extra_signal_loc,
                 "repeated 'signal' statement (the first is at line "
                 "%d)",
                 m->signal_loc.line);
    unsigned char *used = dm_arena_alloc(m, (size_t)c->nparams + 1);
    expr_ctx x = {.what = "the signal",
                  .allow = ALLOW_ALL,
                  .let_limit = m->lets.n,
                  .self_let = -1,
                  .params = used};
    dm_type t = dm_check_expr(c, &x, m->signal);
    if (t != DM_T_UNKNOWN && t != DM_T_SCALAR) {
        dm_error(c->d, dm_expr_start(m->signal), "the signal must be a scalar, not %s",
                 dm_type_words(t, m->signal->width));
        return;
    }
    if (t == DM_T_UNKNOWN) return;
    for (int k = 0; k < m->params.n; k++) {
        dm_param *p = m->params.items[k];
        p->used = used[k];
        if (!p->used) dm_warning(c->d, p->loc, "parameter '%s' is not used by the signal", p->name);
    }
}

static void check_derivatives(checker *c)
{
    dm_model *m = c->m;
    for (int i = 0; i < m->derivatives.n; i++) {
        dm_let *d = m->derivatives.items[i];
        char what[96];
        snprintf(what, sizeof what, "the derivative with respect to '%s'", d->name);
        expr_ctx x = {.what = what, .allow = ALLOW_ALL, .let_limit = m->lets.n, .self_let = -1};
        dm_type t = dm_check_expr(c, &x, d->value);
        if (t != DM_T_UNKNOWN && t != DM_T_SCALAR)
            dm_error(c->d, dm_expr_start(d->value), "%s must be a scalar, not %s", what,
                     dm_type_words(t, d->value->width));
        dm_symbol *s = dm_model_lookup(m, d->name);
        if (!s) {
            dm_undefined_name(c, d->loc, d->name);
            continue;
        }
        if (s->kind != DM_SYM_PARAM) {
            dm_error(c->d, d->loc,
                     "a derivative is taken with respect to a parameter, but '%s' "
                     "is %s",
                     d->name, dm_kind_words(s->kind));
            continue;
        }
        dm_param *p = m->params.items[s->index];
        if (p->derivative) {
            dm_error(c->d, d->loc,
                     "repeated derivative with respect to '%s' (the first is at "
                     "line %d)",
                     d->name, p->derivative_loc.line);
            continue;
        }
        p->derivative = d->value;
        p->derivative_loc = d->loc;
    }
}

/* A comparison, or comparisons joined by &&, || and !. */
static int is_condition(const dm_expr *e)
{
    if (e->kind == DM_E_UNARY && e->op == '!') return is_condition(e->a);
    if (e->kind != DM_E_BINARY) return 0;
    if (e->op == DM_OP_AND || e->op == DM_OP_OR) return is_condition(e->a) && is_condition(e->b);
    return is_comparison(e->op);
}

static void check_constraints(checker *c)
{
    dm_model *m = c->m;
    for (int i = 0; i < m->constraints.n; i++) {
        dm_constraint *k = m->constraints.items[i];
        expr_ctx x = {.what = "a constraint",
                      .allow = ALLOW_PER_VOXEL,
                      .let_limit = m->lets.n,
                      .self_let = -1};
        dm_type t = dm_check_expr(c, &x, k->cond);
        if (t == DM_T_UNKNOWN) continue;
        if (!is_condition(k->cond))
            dm_error(c->d, k->loc,
                     "a constraint must be a comparison, such as 'f1 + f2 <= 1', "
                     "or comparisons joined by && and ||");
        else if (!x.any_param)
            dm_error(c->d, k->loc,
                     "this constraint names no parameter, so it constrains "
                     "nothing");
    }
}

static void check_outputs(checker *c)
{
    dm_model *m = c->m;
    int column = 0;
    for (int i = 0; i < m->outputs.n; i++) {
        dm_output *o = m->outputs.items[i];
        char what[96];
        snprintf(what, sizeof what, "output '%s'", o->name);
        expr_ctx x = {
            .what = what, .allow = ALLOW_PER_VOXEL, .let_limit = m->lets.n, .self_let = -1};
        dm_type t = dm_check_expr(c, &x, o->value);
        o->width = 1;
        if (t == DM_T_ARRAY) {
            dm_reject_array(c, o->value);
        } else if (t == DM_T_MAT3) {
            dm_error(c->d, dm_expr_start(o->value),
                     "output '%s' is a 3x3 matrix; an output is a scalar or a 3-vector, so "
                     "write the entries you need, as in %s[0][0]",
                     o->name, o->value->kind == DM_E_NAME ? o->value->name : "M");
        } else if (t == DM_T_SCALAR && o->kind != DM_OUT_SCALAR) {
            dm_error(c->d, dm_expr_start(o->value),
                     "output '%s' is declared %s, but its value is a "
                     "scalar",
                     o->name, o->kind == DM_OUT_AXIS ? "an axis" : "a vector");
        } else if (t == DM_T_VEC3) {
            if (o->kind == DM_OUT_SCALAR) o->kind = DM_OUT_VECTOR;
            o->width = 3;
        }
        o->column = column;
        column += o->width;
    }
    m->output_width = column;
}

/* The files a fit writes are named after the parameters and outputs (runtime/fit/
 * fit_outputs.c): NAME, NAME_sd and NAME_samples for a parameter (the last two after MCMC),
 * NAME and, for an axis, NAME_dispersion for an output, and status, predicted, BIC and AIC.
 * Two of them with one name would overwrite each other: a parameter `d_sd` beside a `d`. */
typedef struct file_name {
    char name[192];
    const char *what;  /* "the posterior sd of", ... */
    const char *owner; /* the declared name, or NULL for a file of every fit */
    dm_loc loc;
} file_name;

static void add_file(file_name *f, const char *what, const char *owner, dm_loc loc,
                     const char *suffix)
{
    *f = (file_name){.what = what, .owner = owner, .loc = loc};
    snprintf(f->name, sizeof f->name, "%s%s", owner, suffix);
}

static void check_file_names(checker *c)
{
    const dm_model *m = c->m;
    static const char *const fixed[] = {"status", "predicted", "BIC", "AIC"};
    static const char *const suffix[] = {"", "_sd", "_samples"};
    static const char *const what[] = {"the parameter", "the posterior sd of", "the samples of"};
    file_name *f = calloc(4 + 3 * (size_t)m->params.n + 2 * (size_t)m->outputs.n, sizeof *f);
    if (!f) abort();
    int k = 0;
    for (int i = 0; i < 4; i++) {
        add_file(&f[k], "a file of every fit", fixed[i], (dm_loc){0}, "");
        f[k++].owner = NULL;
    }
    for (int i = 0; i < m->params.n; i++)
        for (int s = 0; s < 3; s++)
            add_file(&f[k++], what[s], m->params.items[i]->name, m->params.items[i]->loc, suffix[s]);
    for (int i = 0; i < m->outputs.n; i++) {
        const dm_output *o = m->outputs.items[i];
        add_file(&f[k++], "the output", o->name, o->loc, "");
        if (o->kind == DM_OUT_AXIS) add_file(&f[k++], "the dispersion of", o->name, o->loc, "_dispersion");
    }
    for (int i = 4; i < k; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(f[i].name, f[j].name)) {
                dm_error(c->d, f[i].loc,
                         "a fit of this model would write %s.nii.gz twice: for %s '%s' and for %s%s%s%s",
                         f[i].name, f[i].what, f[i].owner, f[j].what, f[j].owner ? " '" : "",
                         f[j].owner ? f[j].owner : "", f[j].owner ? "'" : "");
                break;
            }
    free(f);
}

int dm_check(dm_model *m, dm_diag *diag)
{
    int before = diag->nerrors;
    checker c = {.m = m, .d = diag};
    if (!m->name)
        dm_error(diag, (dm_loc){1, 1, 0},
                 "missing 'model NAME \"description\"' statement at the "
                 "start of the file");
    dm_expand_fractions(&c);
    c.nparams = m->params.n;
    c.lets = dm_arena_alloc(m, (size_t)(m->lets.n + 1) * sizeof *c.lets);

    declare_names(&c);
    dm_check_definitions(&c);
    if (m->params.n == 0)
        dm_error(diag, m->name ? m->name_loc : (dm_loc){1, 1, 0},
                 "the model has no parameters (declare them with 'param NAME ...')");
    if (m->params.n > DM_MAX_PARAMS)
        dm_error(diag, m->params.items[DM_MAX_PARAMS]->loc,
                 "too many parameters (%d): at most %d are supported", m->params.n, DM_MAX_PARAMS);
    for (int i = 0; i < m->params.n; i++) check_param(&c, m->params.items[i]);
    dm_check_fractions(&c);
    check_measures(&c);
    dm_check_starts(&c);
    check_voxels(&c);
    check_lets(&c);
    for (int i = 0; i < m->params.n; i++) check_custom_prior(&c, m->params.items[i]);
    check_signal(&c);
    check_derivatives(&c);
    check_constraints(&c);
    check_outputs(&c);
    if (diag->nerrors == before) check_file_names(&c);
    return diag->nerrors - before;
}
