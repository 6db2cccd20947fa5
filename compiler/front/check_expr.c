/* Expression typing and constant evaluation for the checker (see check.h): names, calls
 * (built-ins checked; functions and compartments inlined), indexing, operators, bounded sums,
 * constants. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtins.h"
#include "check.h"

const char *dm_kind_words(dm_symbol_kind k)
{
    switch (k) {
    case DM_SYM_PARAM: return "a parameter";
    case DM_SYM_MEASURE: return "a measure";
    case DM_SYM_VOXEL: return "a voxel input";
    case DM_SYM_LET: return "a let";
    case DM_SYM_CONST: return "a constant";
    }
    return "a name";
}

const char *dm_type_words(dm_type t, int width)
{
    static char buf[48];
    switch (t) {
    case DM_T_SCALAR: return "a scalar";
    case DM_T_VEC3: return "a 3-vector";
    case DM_T_MAT3: return "a 3x3 matrix";
    case DM_T_ARRAY: snprintf(buf, sizeof buf, "an array of width %d", width); return buf;
    default: return "an unknown value";
    }
}

static const char *op_text(int op)
{
    static _Thread_local char buf[2]; /* models are checked on several threads at once */
    switch (op) {
    case DM_OP_LE: return "<=";
    case DM_OP_GE: return ">=";
    case DM_OP_EQ: return "==";
    case DM_OP_NE: return "!=";
    case DM_OP_AND: return "&&";
    case DM_OP_OR: return "||";
    default:
        buf[0] = (char)op;
        buf[1] = '\0';
        return buf;
    }
}

static dm_expr *new_num(checker *c, dm_loc loc, double value)
{
    dm_expr *e = dm_arena_alloc(c->m, sizeof *e);
    e->kind = DM_E_NUM;
    e->loc = loc;
    e->num = value;
    e->depth = 1;
    e->type = DM_T_SCALAR;
    e->width = 1;
    return e;
}

dm_loc dm_expr_start(const dm_expr *e)
{
    if (e->call) return e->call->loc; /* an inlined call starts where it is written */
    if (e->as_argument) return e->loc;
    while (e->kind == DM_E_BINARY || e->kind == DM_E_TERNARY || e->kind == DM_E_INDEX) e = e->a;
    return e->loc;
}

/* --- Names ----------------------------------------------------------------------------- */

static int is_output_name(const dm_model *m, const char *name)
{
    for (int i = 0; i < m->outputs.n; i++)
        if (strcmp(m->outputs.items[i]->name, name) == 0) return 1;
    return 0;
}

void dm_undefined_name(checker *c, dm_loc loc, const char *name)
{
    const char **names = dm_arena_alloc(c->m, (size_t)(c->m->symbols.n + 1) * sizeof *names);
    for (int i = 0; i < c->m->symbols.n; i++) names[i] = c->m->symbols.items[i]->name;
    names[c->m->symbols.n] = NULL;
    const char *near = dm_nearest_name(name, names);
    if (near)
        dm_error(c->d, loc, "undefined name '%s'; did you mean '%s'?", name, near);
    else
        dm_error(c->d, loc, "undefined name '%s'", name);
}

/* --- Functions and compartments by name ---------------------------------------------- */

const char *dm_definition_word(const dm_definition *def)
{
    return def->is_compartment ? "compartment" : "function";
}

dm_definition *dm_definition_find(const dm_model *m, const char *name)
{
    for (int i = 0; i < m->definitions.n; i++)
        if (strcmp(m->definitions.items[i]->name, name) == 0) return m->definitions.items[i];
    return NULL;
}

void dm_unknown_call(checker *c, dm_loc loc, const char *name)
{
    const dm_model *m = c->m;
    const char **names = dm_arena_alloc(c->m, (size_t)(m->definitions.n + 1) * sizeof *names);
    for (int i = 0; i < m->definitions.n; i++) names[i] = m->definitions.items[i]->name;
    const char *near_def = dm_nearest_name(name, names);
    const char *near_fn = dm_builtin_nearest(name);
    /* Prefer a definition when both are near: the library's names are the likelier aim. */
    if (near_def) {
        const dm_definition *def = dm_definition_find(m, near_def);
        dm_error(c->d, loc, "unknown %s '%s'; did you mean '%s'?", dm_definition_word(def), name,
                 near_def);
    } else if (near_fn) {
        dm_error(c->d, loc, "unknown function '%s'; did you mean '%s'?", name, near_fn);
    } else {
        dm_error(c->d, loc, "unknown function '%s'", name);
    }
}

/* A name of a definition that is none of its own: constants for a function; constants or the
 * model's measures for a compartment (known only at a call, so not judged here). */
int dm_free_name_allowed(const dm_definition *def, const dm_symbol *s)
{
    if (s && s->kind == DM_SYM_CONST) return 1;
    return def->is_compartment && s && s->kind == DM_SYM_MEASURE;
}

void dm_report_free_name(checker *c, const dm_definition *def, const dm_expr *e, const dm_symbol *s)
{
    if (!def->is_compartment)
        dm_error(c->d, e->loc,
                 "function '%s' uses '%s', which is not one of its arguments (a function sees "
                 "its arguments and constants; a compartment may also use the model's measures)",
                 def->name, e->name);
    else if (!s)
        dm_error(c->d, e->loc,
                 "compartment '%s' uses '%s', but the model declares no measure '%s' (a "
                 "compartment sees its arguments, constants and the model's measures)",
                 def->name, e->name, e->name);
    else
        dm_error(c->d, e->loc,
                 "compartment '%s' uses '%s', which is %s of the model, not a measure; pass it "
                 "as an argument",
                 def->name, e->name, dm_kind_words(s->kind));
}

/* --- Expressions ----------------------------------------------------------------------- */

static int const_int(checker *c, dm_expr **slot, int lo, int hi, const char *what);
static dm_type inline_call(checker *c, expr_ctx *x, dm_expr *e, dm_definition *def);

static dm_type set_type(dm_expr *e, dm_type t, int width)
{
    e->type = t;
    e->width = t == DM_T_SCALAR ? 1 : t == DM_T_VEC3 ? 3 : t == DM_T_MAT3 ? 9 : width;
    return t;
}

/* An array operand outside indexing: say how to use it. */
int dm_reject_array(checker *c, const dm_expr *e)
{
    if (e->type != DM_T_ARRAY) return 0;
    if (e->kind == DM_E_NAME)
        dm_error(c->d, e->loc,
                 "'%s' is an array of width %d; index it with a constant, as in "
                 "%s[0]",
                 e->name, e->width, e->name);
    else
        dm_error(c->d, e->loc, "an array of width %d must be indexed with a constant", e->width);
    return 1;
}

static dm_type check_name(checker *c, expr_ctx *x, dm_expr *e)
{
    dm_symbol *s = dm_model_lookup(c->m, e->name);
    if (!s) {
        const dm_definition *def = dm_definition_find(c->m, e->name);
        if (dm_builtin_find(e->name))
            dm_error(c->d, e->loc, "'%s' is a function; call it as %s(...)", e->name, e->name);
        else if (def)
            dm_error(c->d, e->loc, "'%s' is a %s; call it as %s(...)", e->name,
                     def->is_compartment ? "compartment" : "function", e->name);
        else if (is_output_name(c->m, e->name))
            dm_error(c->d, e->loc, "'%s' is an output; outputs cannot be used in expressions",
                     e->name);
        else
            dm_undefined_name(c, e->loc, e->name);
        return DM_T_UNKNOWN;
    }
    e->sym = s;
    if (!(x->allow & (1 << s->kind))) {
        if (x->allow == ALLOW_CONST)
            dm_error(c->d, e->loc, "%s must be a constant, but '%s' is %s", x->what, e->name,
                     dm_kind_words(s->kind));
        else if (s->kind == DM_SYM_MEASURE)
            dm_error(c->d, e->loc,
                     "%s cannot use measure '%s': measures vary per measurement, "
                     "and only the signal, lets and derivatives may use them",
                     x->what, e->name);
        else
            dm_error(c->d, e->loc, "%s cannot use '%s', which is %s", x->what, e->name,
                     dm_kind_words(s->kind));
        return DM_T_UNKNOWN;
    }
    switch (s->kind) {
    case DM_SYM_PARAM:
        x->any_param = 1;
        if (x->params) x->params[s->index] = 1;
        break;
    case DM_SYM_MEASURE:
        if (!x->measure) x->measure = s->name;
        break;
    case DM_SYM_LET: {
        if (s->index == x->self_let) {
            dm_error(c->d, e->loc, "let '%s' is used in its own definition", e->name);
            return DM_T_UNKNOWN;
        }
        if (s->index >= x->let_limit) {
            dm_error(c->d, e->loc, "let '%s' is used before its definition at line %d", e->name,
                     c->m->lets.items[s->index]->loc.line);
            return DM_T_UNKNOWN;
        }
        let_info *li = &c->lets[s->index];
        if (li->measure && !(x->allow & ALLOW_MEASURE)) {
            dm_error(c->d, e->loc,
                     "%s cannot use let '%s': it depends on measure '%s', which "
                     "varies per measurement",
                     x->what, e->name, li->measure);
            return DM_T_UNKNOWN;
        }
        if (li->measure && !x->measure) x->measure = li->measure;
        x->any_param |= li->any_param;
        if (x->params)
            for (int k = 0; k < c->nparams; k++) x->params[k] |= li->params[k];
        break;
    }
    default: break;
    }
    if (s->type == DM_T_UNKNOWN) /* a let whose definition had an error */
        return DM_T_UNKNOWN;
    return set_type(e, s->type, s->width);
}

static dm_type check_call(checker *c, expr_ctx *x, dm_expr *e)
{
    const dm_builtin *fn = dm_builtin_find(e->name);
    if (!fn) {
        dm_definition *def = dm_definition_find(c->m, e->name);
        if (def) return inline_call(c, x, e, def);
        dm_symbol *s = dm_model_lookup(c->m, e->name);
        if (s)
            dm_error(c->d, e->loc, "'%s' is %s, not a function", e->name, dm_kind_words(s->kind));
        else
            dm_unknown_call(c, e->loc, e->name);
        for (int i = 0; i < e->nargs; i++) /* still report mistakes inside */
            dm_check_expr(c, x, e->args[i]);
        return DM_T_UNKNOWN;
    }
    e->fn = fn;
    if (e->nargs != fn->nargs) {
        dm_error(c->d, e->loc, "'%s' takes %d argument%s, but %d %s given", fn->name, fn->nargs,
                 fn->nargs == 1 ? "" : "s", e->nargs, e->nargs == 1 ? "is" : "are");
        return DM_T_UNKNOWN;
    }
    if (x->allow == ALLOW_CONST && !fn->eval1 && !fn->eval2) {
        dm_error(c->d, e->loc, "'%s' cannot be used in a constant expression (%s)", fn->name,
                 x->what);
        return DM_T_UNKNOWN;
    }
    int ok = 1;
    for (int i = 0; i < e->nargs; i++) {
        if (fn->const_int_args & (1u << i)) {
            char what[96];
            snprintf(what, sizeof what, "argument %d of '%s'", i + 1, fn->name);
            ok &= const_int(c, &e->args[i], fn->int_min, fn->int_max, what);
            continue;
        }
        dm_type t = dm_check_expr(c, x, e->args[i]);
        if (t == DM_T_UNKNOWN) {
            ok = 0;
        } else if (t != fn->arg_types[i]) {
            dm_error(c->d, dm_expr_start(e->args[i]), "argument %d of '%s' must be %s, not %s",
                     i + 1, fn->name, dm_type_words(fn->arg_types[i], 1),
                     dm_type_words(t, e->args[i]->width));
            ok = 0;
        }
    }
    return ok ? set_type(e, fn->result, 1) : DM_T_UNKNOWN;
}

static dm_type check_index(checker *c, expr_ctx *x, dm_expr *e)
{
    dm_type t = dm_check_expr(c, x, e->a);
    if (t == DM_T_UNKNOWN) return DM_T_UNKNOWN;
    if (t == DM_T_SCALAR) {
        dm_error(c->d, e->loc, "cannot index a scalar");
        return DM_T_UNKNOWN;
    }
    char what[96];
    if (t == DM_T_MAT3) { /* M[i] is row i, so M[i][j] is an entry */
        if (!const_int(c, &e->b, 0, 2, "the row index of a 3x3 matrix")) return DM_T_UNKNOWN;
        return set_type(e, DM_T_VEC3, 3);
    }
    if (e->a->kind == DM_E_NAME)
        snprintf(what, sizeof what, "the index of '%s' (width %d)", e->a->name, e->a->width);
    else
        snprintf(what, sizeof what, "the index of a value of width %d", e->a->width);
    if (!const_int(c, &e->b, 0, e->a->width - 1, what)) return DM_T_UNKNOWN;
    return set_type(e, DM_T_SCALAR, 1);
}

static dm_type check_binary(checker *c, expr_ctx *x, dm_expr *e)
{
    dm_type ta = dm_check_expr(c, x, e->a);
    dm_type tb = dm_check_expr(c, x, e->b);
    if (ta == DM_T_UNKNOWN || tb == DM_T_UNKNOWN) return DM_T_UNKNOWN;
    if (dm_reject_array(c, e->a) || dm_reject_array(c, e->b)) return DM_T_UNKNOWN;
    int sa = ta == DM_T_SCALAR, sb = tb == DM_T_SCALAR;
    const char *op = op_text(e->op);
    switch (e->op) {
    case '+':
    case '-':
        if (ta == tb) return set_type(e, ta, 1);
        dm_error(c->d, e->loc,
                 "operator '%s' needs two values of one type (scalars, 3-vectors or 3x3 "
                 "matrices), not %s and %s",
                 op, dm_type_words(ta, 1), dm_type_words(tb, 1));
        return DM_T_UNKNOWN;
    case '*':
        if (sa || sb) return set_type(e, sa ? tb : ta, 1);
        if (ta == DM_T_MAT3 || tb == DM_T_MAT3)
            dm_error(c->d, e->loc,
                     "cannot multiply %s and %s with '*'; use mul(A, B) for a matrix "
                     "product, mv(A, v) for a matrix times a vector",
                     dm_type_words(ta, 1), dm_type_words(tb, 1));
        else
            dm_error(c->d, e->loc,
                     "cannot multiply two 3-vectors with '*'; use dot(u, v) or "
                     "cross(u, v)");
        return DM_T_UNKNOWN;
    case '/':
        if (sb) return set_type(e, ta, 1);
        dm_error(c->d, e->loc, "cannot divide by %s", dm_type_words(tb, 1));
        return DM_T_UNKNOWN;
    case '^':
        if (sa && sb) return set_type(e, DM_T_SCALAR, 1);
        dm_error(c->d, e->loc,
                 "operator '^' needs scalars, not %s and %s (for the squared "
                 "length of a vector v, write dot(v, v))",
                 dm_type_words(ta, 1), dm_type_words(tb, 1));
        return DM_T_UNKNOWN;
    default: /* comparisons and logic */
        if (sa && sb) return set_type(e, DM_T_SCALAR, 1);
        dm_error(c->d, e->loc, "operator '%s' needs scalars, not %s and %s", op,
                 dm_type_words(ta, 1), dm_type_words(tb, 1));
        return DM_T_UNKNOWN;
    }
}

/* --- Bounded sums ---------------------------------------------------------------------- */

long dm_count_nodes(const dm_expr *e)
{
    if (!e) return 0;
    long n = 1 + dm_count_nodes(e->a) + dm_count_nodes(e->b) + dm_count_nodes(e->c);
    for (int i = 0; i < e->nargs; i++) n += dm_count_nodes(e->args[i]);
    return n;
}

dm_expr *dm_copy_expr(checker *c, const dm_expr *e, dm_copy_hook hook, void *env)
{
    if (!e) return NULL;
    if (hook) {
        dm_expr *r = hook(c, e, env);
        if (r) return r;
    }
    dm_expr *n = dm_arena_alloc(c->m, sizeof *n);
    *n = *e;
    n->a = dm_copy_expr(c, e->a, hook, env);
    n->b = dm_copy_expr(c, e->b, hook, env);
    n->c = dm_copy_expr(c, e->c, hook, env);
    int depth = 0;
    if (n->a && n->a->depth > depth) depth = n->a->depth;
    if (n->b && n->b->depth > depth) depth = n->b->depth;
    if (n->c && n->c->depth > depth) depth = n->c->depth;
    if (e->nargs > 0) {
        n->args = dm_arena_alloc(c->m, sizeof *n->args * (size_t)e->nargs);
        for (int i = 0; i < e->nargs; i++) {
            n->args[i] = dm_copy_expr(c, e->args[i], hook, env);
            if (n->args[i]->depth > depth) depth = n->args[i]->depth;
        }
    }
    n->depth = depth + 1;
    return n;
}

typedef struct sum_value {
    const char *var;
    double value;
} sum_value;

static dm_expr *replace_sum_variable(checker *c, const dm_expr *e, void *env)
{
    const sum_value *sv = env;
    if (e->kind != DM_E_NAME || strcmp(e->name, sv->var) != 0) return NULL;
    return new_num(c, e->loc, sv->value);
}

/* A copy of E with every name VAR replaced by the number VALUE (a sum's body is only ever
 * checked through such copies, so its inner sums are still unexpanded here). */
static dm_expr *copy_with(checker *c, const dm_expr *e, const char *var, double value)
{
    sum_value sv = {var, value};
    return dm_copy_expr(c, e, replace_sum_variable, &sv);
}

/* One bound of a sum: a constant integer. */
static int sum_bound(checker *c, dm_expr *e, const char *which, double *out)
{
    char what[64];
    snprintf(what, sizeof what, "the %s bound of 'sum'", which);
    if (!dm_const_value(c, e, what, out)) return 0;
    if (!(*out == floor(*out) && fabs(*out) <= 1e9)) {
        dm_error(c->d, dm_expr_start(e), "%s must be an integer, not %g", what, *out);
        return 0;
    }
    return 1;
}

/* sum(k in A..B) body: the variable must be a new name, A and B constant integers with
 * A <= B and B - A <= 200; the body is checked once per value of k, as a copy with k
 * replaced by the number (so that k may stand where a constant is needed: legendre(k, x),
 * bessel_j1p_root(k), q[k], the bounds of an inner sum), and the copies are the terms. */
static dm_type check_sum(checker *c, expr_ctx *x, dm_expr *e)
{
    const char *var = e->name;
    dm_symbol *s = dm_model_lookup(c->m, var);
    int ok = 1;
    if (s) {
        dm_error(c->d, e->var_loc,
                 "the sum's variable '%s' would hide %s of that name; choose "
                 "another name",
                 var, dm_kind_words(s->kind));
        ok = 0;
    } else if (dm_builtin_find(var)) {
        dm_error(c->d, e->var_loc, "the sum's variable '%s' is the name of a built-in function",
                 var);
        ok = 0;
    } else {
        for (int i = 0; i < c->nsum_vars; i++)
            if (strcmp(c->sum_vars[i], var) == 0) {
                dm_error(c->d, e->var_loc, "'%s' is already the variable of an enclosing sum", var);
                ok = 0;
                break;
            }
    }
    if (c->nsum_vars >= DM_MAX_EXPR_DEPTH) {
        dm_error(c->d, e->loc, "sums nested too deeply (more than %d levels)", DM_MAX_EXPR_DEPTH);
        return DM_T_UNKNOWN;
    }
    double lo = 0, hi = 0;
    int bounds = sum_bound(c, e->a, "lower", &lo);
    bounds &= sum_bound(c, e->b, "upper", &hi);
    if (!ok || !bounds) return DM_T_UNKNOWN;
    if (hi < lo) {
        dm_error(c->d, dm_expr_start(e->b),
                 "the sum's range %g..%g is empty (the upper bound is "
                 "below the lower)",
                 lo, hi);
        return DM_T_UNKNOWN;
    }
    if (hi - lo + 1 > DM_MAX_SUM_TERMS) {
        dm_error(c->d, dm_expr_start(e->b), "the sum %g..%g has %g terms; at most %d (B - A <= %d)",
                 lo, hi, hi - lo + 1, DM_MAX_SUM_TERMS, DM_MAX_SUM_TERMS - 1);
        return DM_T_UNKNOWN;
    }
    int n = (int)(hi - lo) + 1;
    long size = dm_count_nodes(e->c);
    if (c->sum_nodes + size * n > DM_MAX_SUM_NODES) {
        dm_error(c->d, e->loc, "the sums expand to more than %d terms and operations in all",
                 DM_MAX_SUM_NODES);
        return DM_T_UNKNOWN;
    }
    c->sum_nodes += size * n;
    e->args = dm_arena_alloc(c->m, sizeof *e->args * (size_t)n);
    e->nargs = 0;
    c->sum_vars[c->nsum_vars++] = var;
    dm_type t = DM_T_UNKNOWN;
    for (int i = 0; i < n; i++) {
        dm_expr *term = copy_with(c, e->c, var, lo + i);
        t = dm_check_expr(c, x, term); /* one report of a mistake, for the first term */
        if (t == DM_T_UNKNOWN || dm_reject_array(c, term)) {
            t = DM_T_UNKNOWN;
            break;
        }
        e->args[e->nargs++] = term;
    }
    c->nsum_vars--;
    if (t == DM_T_UNKNOWN) e->nargs = 0;
    return t == DM_T_UNKNOWN ? DM_T_UNKNOWN : set_type(e, t, 1);
}

/* --- Calls of functions and compartments: inlined -------------------------------------- */

/* Every call is inlined where it stands: the call's node becomes a copy of the body with
 * copies of the (checked) arguments in place of their names, the local lets likewise
 * substituted, and the copy is checked in the call's context.  So the back end sees only
 * built-ins, and a model written with compartments lowers to the same code as one written
 * out by hand.  A mistake found inside a copy points into the definition's file, with a
 * note at the call. */

/* Inlining is bounded like sum expansion: nodes copied in all, and the nesting of the
 * resulting expression (each part is at most DM_MAX_EXPR_DEPTH deep). */
#define DM_MAX_INLINED_NODES 400000
#define DM_MAX_INLINED_DEPTH (4 * DM_MAX_EXPR_DEPTH)

/* The copy of one body: what its names stand for. */
typedef struct inliner {
    const dm_definition *def;
    const char **names; /* arguments, then locals */
    dm_expr **values;   /* what each stands for: checked arguments, substituted locals */
    int nnames;
    const char *vars[DM_MAX_EXPR_DEPTH + 1];    /* sum variables around, as written ... */
    const char *renamed[DM_MAX_EXPR_DEPTH + 1]; /* ... and as renamed in the copy */
    int nvars;
    int ok;
} inliner;

/* A copy of a whole tree that needs no substitution (an argument, a local's value). */
static dm_expr *copy_plain(checker *c, const dm_expr *e)
{
    return dm_copy_expr(c, e, NULL, NULL);
}

static dm_expr *substitute(checker *c, const dm_expr *e, void *env)
{
    inliner *in = env;
    if (e->kind == DM_E_NAME) {
        for (int i = in->nvars - 1; i >= 0; i--)
            if (strcmp(in->vars[i], e->name) == 0) {
                dm_expr *n = copy_plain(c, e);
                n->name = in->renamed[i];
                return n;
            }
        for (int i = in->nnames - 1; i >= 0; i--)
            if (strcmp(in->names[i], e->name) == 0) {
                /* A mistake in the use of an argument is the body's: point there. */
                dm_expr *arg = copy_plain(c, in->values[i]);
                arg->loc = e->loc;
                arg->as_argument = 1;
                return arg;
            }
        dm_symbol *s = dm_model_lookup(c->m, e->name);
        if (!dm_free_name_allowed(in->def, s)) {
            dm_report_free_name(c, in->def, e, s);
            in->ok = 0;
        }
        return NULL; /* the model's measure or constant, as written */
    }
    if (e->kind == DM_E_SUM && in->nvars < DM_MAX_EXPR_DEPTH) {
        /* The variable gets a name no model can hold, so that neither the model's names nor
         * an enclosing sum of the caller can clash with it. */
        dm_expr *n = dm_arena_alloc(c->m, sizeof *n);
        *n = *e;
        char name[DM_MAX_NAME_LEN + 24];
        snprintf(name, sizeof name, "%s'%d", e->name, ++c->renamed_vars);
        n->name = dm_arena_strdup(c->m, name);
        n->a = dm_copy_expr(c, e->a, substitute, in);
        n->b = dm_copy_expr(c, e->b, substitute, in);
        in->vars[in->nvars] = e->name;
        in->renamed[in->nvars++] = n->name;
        n->c = dm_copy_expr(c, e->c, substitute, in);
        in->nvars--;
        int depth = n->a->depth > n->b->depth ? n->a->depth : n->b->depth;
        n->depth = (n->c->depth > depth ? n->c->depth : depth) + 1;
        return n;
    }
    return NULL;
}

/* The body of DEF with the call's arguments in place, or NULL after reporting. */
static dm_expr *copy_body(checker *c, const dm_definition *def, dm_expr **args)
{
    int total = def->nformals + def->nlocals;
    inliner *in = calloc(1, sizeof *in);
    if (!in) abort();
    in->def = def;
    in->ok = 1;
    in->names = dm_arena_alloc(c->m, (size_t)(total + 1) * sizeof *in->names);
    in->values = dm_arena_alloc(c->m, (size_t)(total + 1) * sizeof *in->values);
    for (int i = 0; i < def->nformals; i++) {
        in->names[in->nnames] = def->formals[i]->name;
        in->values[in->nnames++] = args[i];
    }
    for (int i = 0; i < def->nlocals && in->ok; i++) {
        dm_expr *value = dm_copy_expr(c, def->locals[i]->value, substitute, in);
        in->names[in->nnames] = def->locals[i]->name;
        in->values[in->nnames++] = value;
    }
    dm_expr *body = in->ok ? dm_copy_expr(c, def->body, substitute, in) : NULL;
    if (!in->ok) body = NULL;
    free(in);
    return body;
}

static dm_type inline_call(checker *c, expr_ctx *x, dm_expr *e, dm_definition *def)
{
    if (e->nargs != def->nformals) {
        char list[256] = "";
        for (int i = 0; i < def->nformals; i++) {
            size_t len = strlen(list);
            snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", def->formals[i]->name);
        }
        dm_error(c->d, e->loc, "%s '%s' takes %d argument%s (%s), but %d %s given",
                 dm_definition_word(def), def->name, def->nformals, def->nformals == 1 ? "" : "s",
                 list, e->nargs, e->nargs == 1 ? "is" : "are");
        return DM_T_UNKNOWN;
    }
    int ok = 1;
    for (int i = 0; i < e->nargs; i++) ok &= dm_check_expr(c, x, e->args[i]) != DM_T_UNKNOWN;
    if (!ok || def->broken) return DM_T_UNKNOWN;
    if (c->ninlined >= DM_MAX_EXPR_DEPTH) {
        dm_error(c->d, e->loc, "calls nested too deeply (more than %d levels)", DM_MAX_EXPR_DEPTH);
        return DM_T_UNKNOWN;
    }

    int mark = dm_diag_mark(c->d);
    dm_type t = DM_T_UNKNOWN;
    dm_expr *body = copy_body(c, def, e->args);
    if (body) {
        c->inlined_nodes += dm_count_nodes(body);
        if (c->inlined_nodes > DM_MAX_INLINED_NODES) {
            dm_error(c->d, e->loc,
                     "the calls of functions and compartments expand to more than %d terms "
                     "and operations in all",
                     DM_MAX_INLINED_NODES);
        } else if (body->depth > DM_MAX_INLINED_DEPTH) {
            dm_error(c->d, e->loc,
                     "this call expands to an expression nested too deeply "
                     "(more than %d levels)",
                     DM_MAX_INLINED_DEPTH);
        } else {
            c->ninlined++;
            t = dm_check_expr(c, x, body);
            c->ninlined--;
        }
    }
    if (dm_diag_mark(c->d) > mark)
        dm_note_since(c->d, mark, e->loc, "in this call of %s '%s'", dm_definition_word(def),
                      def->name);
    if (t == DM_T_UNKNOWN) return DM_T_UNKNOWN;
    def->used = 1;
    dm_expr *call = dm_arena_alloc(c->m, sizeof *call);
    *call = *e;
    *e = *body;
    e->call = call;
    return t;
}

dm_type dm_check_expr(checker *c, expr_ctx *x, dm_expr *e)
{
    e->type = DM_T_UNKNOWN;
    switch (e->kind) {
    case DM_E_NUM: return set_type(e, DM_T_SCALAR, 1);
    case DM_E_NAME: return check_name(c, x, e);
    case DM_E_CALL: return check_call(c, x, e);
    case DM_E_INDEX: return check_index(c, x, e);
    case DM_E_BINARY: return check_binary(c, x, e);
    case DM_E_SUM: return check_sum(c, x, e);
    case DM_E_UNARY: {
        dm_type t = dm_check_expr(c, x, e->a);
        if (t == DM_T_UNKNOWN || dm_reject_array(c, e->a)) return DM_T_UNKNOWN;
        if (e->op == '!' && t != DM_T_SCALAR) {
            dm_error(c->d, e->loc, "operator '!' needs a scalar, not %s", dm_type_words(t, 1));
            return DM_T_UNKNOWN;
        }
        return set_type(e, t, 1);
    }
    case DM_E_TERNARY: {
        dm_type tc = dm_check_expr(c, x, e->a);
        dm_type tb = dm_check_expr(c, x, e->b);
        dm_type td = dm_check_expr(c, x, e->c);
        if (tc == DM_T_UNKNOWN || tb == DM_T_UNKNOWN || td == DM_T_UNKNOWN) return DM_T_UNKNOWN;
        if (dm_reject_array(c, e->a) || dm_reject_array(c, e->b) || dm_reject_array(c, e->c))
            return DM_T_UNKNOWN;
        if (tc != DM_T_SCALAR) {
            dm_error(c->d, dm_expr_start(e->a), "the condition of '?:' must be a scalar, not %s",
                     dm_type_words(tc, 1));
            return DM_T_UNKNOWN;
        }
        if (tb != td) {
            dm_error(c->d, e->loc,
                     "the two branches of '?:' must have the same type, not %s "
                     "and %s",
                     dm_type_words(tb, 1), dm_type_words(td, 1));
            return DM_T_UNKNOWN;
        }
        return set_type(e, tb, 1);
    }
    }
    return DM_T_UNKNOWN;
}

/* --- Constants ------------------------------------------------------------------------- */

/* Value of a checked constant expression (every call has eval1 or eval2). */
static double eval_const(const dm_expr *e)
{
    switch (e->kind) {
    case DM_E_NUM: return e->num;
    case DM_E_NAME: return e->sym->value;
    case DM_E_UNARY: {
        double a = eval_const(e->a);
        return e->op == '-' ? -a : (double)(a == 0);
    }
    case DM_E_TERNARY: return eval_const(e->a) != 0 ? eval_const(e->b) : eval_const(e->c);
    case DM_E_CALL:
        if (e->fn->eval1) return e->fn->eval1(eval_const(e->args[0]));
        return e->fn->eval2(eval_const(e->args[0]), eval_const(e->args[1]));
    case DM_E_INDEX: return NAN; /* a constant expression holds no vectors */
    case DM_E_SUM: {
        double s = 0;
        for (int i = 0; i < e->nargs; i++) s += eval_const(e->args[i]);
        return s;
    }
    case DM_E_BINARY: break;
    }
    double a = eval_const(e->a), b = eval_const(e->b);
    switch (e->op) {
    case '+': return a + b;
    case '-': return a - b;
    case '*': return a * b;
    case '/': return a / b;
    case '^': return pow(a, b);
    case '<': return a < b;
    case '>': return a > b;
    case DM_OP_LE: return a <= b;
    case DM_OP_GE: return a >= b;
    case DM_OP_EQ: return a == b;
    case DM_OP_NE: return a != b;
    case DM_OP_AND: return a != 0 && b != 0;
    case DM_OP_OR: return a != 0 || b != 0;
    }
    return NAN;
}

/* Check E as a constant scalar expression and evaluate it.  Returns 1 when valid. */
int dm_const_value(checker *c, dm_expr *e, const char *what, double *out)
{
    expr_ctx x = {.what = what, .allow = ALLOW_CONST, .self_let = -1};
    dm_type t = dm_check_expr(c, &x, e);
    if (t == DM_T_UNKNOWN) return 0;
    if (t != DM_T_SCALAR) {
        dm_error(c->d, dm_expr_start(e), "%s must be a scalar, not %s", what,
                 dm_type_words(t, e->width));
        return 0;
    }
    double v = eval_const(e);
    if (isnan(v)) {
        dm_error(c->d, dm_expr_start(e), "%s is not a number (it evaluates to NaN)", what);
        return 0;
    }
    *out = v;
    return 1;
}

/* A constant integer in [lo, hi]; the expression is replaced by its value. */
static int const_int(checker *c, dm_expr **slot, int lo, int hi, const char *what)
{
    double v;
    if (!dm_const_value(c, *slot, what, &v)) return 0;
    if (!(v >= lo && v <= hi && v == floor(v))) {
        if (hi < lo)
            dm_error(c->d, dm_expr_start(*slot), "%s is out of range", what);
        else
            dm_error(c->d, dm_expr_start(*slot), "%s must be an integer from %d to %d, not %g",
                     what, lo, hi, v);
        return 0;
    }
    *slot = new_num(c, (*slot)->loc, v);
    return 1;
}
