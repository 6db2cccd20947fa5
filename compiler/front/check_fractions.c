/* `fractions A, B, ..., Z [init a, b, ...]`: volume fractions that sum to one.
 *
 * Expanded before names are declared into what a model would say by hand: a parameter in
 * [0, 1] for each free member that no `param` line declares (inserted where the statement
 * stands, so the parameters keep the file's order), the let Z = 1 - A - B - ... (ahead of
 * every other let, so that all of them may use it), the constraint A + B + ... <= 1 and the
 * output map Z.  The result is the same model as the hand-written one, so LM and MCMC treat it
 * the same way: a step or proposal that leaves the simplex is rejected.  After the parameters'
 * own checks, dm_check_fractions checks that each set can sum to one. */
#include <string.h>

#include "check.h"

/* Inserts item at index `at` of a DM_VEC of pointers. */
#define VEC_INSERT(m, vec, at, item)                                                               \
    do {                                                                                           \
        dm_vec_push((m), (vec), (item));                                                           \
        memmove(&(vec).items[(at) + 1], &(vec).items[(at)],                                        \
                (size_t)((vec).n - 1 - (at)) * sizeof *(vec).items);                               \
        (vec).items[(at)] = (item);                                                                \
    } while (0)

static dm_expr *node(dm_model *m, dm_expr_kind kind, dm_loc loc, int depth)
{
    dm_expr *e = dm_arena_alloc(m, sizeof *e);
    e->kind = kind;
    e->loc = loc;
    e->depth = depth;
    return e;
}

static dm_expr *number(dm_model *m, dm_loc loc, double v)
{
    dm_expr *e = node(m, DM_E_NUM, loc, 1);
    e->num = v;
    return e;
}

static dm_expr *binary(dm_model *m, dm_loc loc, int op, dm_expr *a, dm_expr *b)
{
    dm_expr *e = node(m, DM_E_BINARY, loc, (a->depth > b->depth ? a->depth : b->depth) + 1);
    e->op = op;
    e->a = a;
    e->b = b;
    return e;
}

/* The free members joined by OP from the left, FIRST op A op B op ... (FIRST may be NULL),
 * as names at their places in the statement. */
static dm_expr *fold_free(dm_model *m, const dm_fractions *f, int op, dm_expr *first)
{
    dm_expr *acc = first;
    for (int i = 0; i < f->nmembers - 1; i++) {
        const dm_expr *member = f->members[i];
        dm_expr *name = node(m, DM_E_NAME, member->loc, 1);
        name->name = member->name;
        acc = acc ? binary(m, member->loc, op, acc, name) : name;
    }
    return acc;
}

static dm_param *param_named(dm_model *m, const char *name)
{
    for (int i = 0; i < m->params.n; i++)
        if (strcmp(m->params.items[i]->name, name) == 0) return m->params.items[i];
    return NULL;
}

static const dm_let *let_named(dm_model *m, const char *name)
{
    for (int i = 0; i < m->lets.n; i++)
        if (strcmp(m->lets.items[i]->name, name) == 0) return m->lets.items[i];
    return NULL;
}

/* The set (index `which`) whose member is NAME among the sets before it, or NULL. */
static const dm_fractions *earlier_set_of(const dm_model *m, int which, const char *name)
{
    for (int s = 0; s < which; s++)
        for (int i = 0; i < m->fractions.items[s]->nmembers; i++)
            if (strcmp(m->fractions.items[s]->members[i]->name, name) == 0)
                return m->fractions.items[s];
    return NULL;
}

/* Drops member i of the set (reported already), so that the rest is still declared. */
static void drop_member(dm_fractions *f, int i)
{
    memmove(&f->members[i], &f->members[i + 1], (size_t)(f->nmembers - 1 - i) * sizeof *f->members);
    f->nmembers--;
}

/* Reports what keeps set `which` from summing to one by construction, and repairs it so that
 * its names are still declared (one mistake, one message).  Returns 0 when the implied member
 * must not be declared (another declaration has its name). */
static int repair(checker *c, int which)
{
    dm_model *m = c->m;
    dm_fractions *f = m->fractions.items[which];
    for (int i = 0; i < f->nmembers; i++) {
        const dm_expr *member = f->members[i];
        const dm_fractions *other = earlier_set_of(m, which, member->name);
        int twice = 0;
        for (int j = 0; j < i && !twice; j++)
            twice = strcmp(f->members[j]->name, member->name) == 0;
        if (twice)
            dm_error(c->d, member->loc, "'%s' is named twice in this fractions set", member->name);
        else if (other)
            dm_error(c->d, member->loc, "'%s' is already a member of the fractions at line %d",
                     member->name, other->loc.line);
        if (twice || other) drop_member(f, i--);
    }
    int k = f->nmembers;
    if (k < 2)
        dm_error(c->d, f->loc,
                 "a fractions set needs at least two members (the last is 1 minus the others)");
    if (f->inits && f->ninits != k - 1) {
        dm_error(c->d, f->init_loc,
                 "'init' gives %d value%s, but the set has %d free member%s (all but the last)",
                 f->ninits, f->ninits == 1 ? "" : "s", k - 1, k - 1 == 1 ? "" : "s");
        f->inits = NULL;
    }
    if (k == 0) return 0;
    const dm_expr *last = f->members[k - 1];
    const dm_param *p = param_named(m, last->name);
    const dm_let *let = let_named(m, last->name);
    if (p || let) {
        dm_error(c->d, last->loc,
                 "'%s' is the implied member of this set (1 minus the others), so it cannot also "
                 "be declared as a %s (line %d)",
                 last->name, p ? "parameter" : "let", p ? p->loc.line : let->loc.line);
        return 0;
    }
    return 1;
}

/* The free members: a new parameter each, or the `param` line's, given the set's start.  The
 * new ones go where the statement stands: after the f->params_before parameters declared above
 * it and the *inserted ones that earlier sets added there or above. */
static void add_free_members(checker *c, dm_fractions *f, int *inserted)
{
    int at = f->params_before + *inserted;
    dm_model *m = c->m;
    int k = f->nmembers;
    for (int i = 0; i < k - 1; i++) {
        const dm_expr *member = f->members[i];
        dm_expr *init = f->inits ? f->inits[i] : NULL;
        dm_param *p = param_named(m, member->name);
        if (p) {
            if (init && (p->init_expr || p->init_from || p->init_source))
                dm_error(c->d, dm_expr_start(init),
                         "'%s' has its own 'init' clause at line %d; give its start once",
                         member->name, p->loc.line);
            else if (init)
                p->init_expr = init;
            continue;
        }
        p = dm_arena_alloc(m, sizeof *p);
        p->name = member->name;
        p->loc = member->loc;
        p->has_bounds = 1;
        p->lo_closed = p->hi_closed = 1;
        p->lo_expr = number(m, member->loc, 0);
        p->hi_expr = number(m, member->loc, 1);
        p->init_expr = init ? init : number(m, member->loc, 1.0 / k);
        VEC_INSERT(m, m->params, at, p);
        at++;
        (*inserted)++;
    }
}

/* Z = 1 - A - B - ..., the constraint A + B + ... <= 1 and the output Z (only the let when
 * the set, after a reported mistake, has no free member). */
static void add_implied_member(checker *c, const dm_fractions *f, int nlets_before)
{
    dm_model *m = c->m;
    const dm_expr *last = f->members[f->nmembers - 1];
    dm_let *let = dm_arena_alloc(m, sizeof *let);
    let->name = last->name;
    let->loc = last->loc;
    let->value = fold_free(m, f, '-', number(m, last->loc, 1)); /* as written by hand */
    VEC_INSERT(m, m->lets, nlets_before, let);
    if (f->nmembers < 2) return;

    dm_constraint *k = dm_arena_alloc(m, sizeof *k);
    k->loc = f->loc;
    k->cond = binary(m, f->loc, DM_OP_LE, fold_free(m, f, '+', NULL), number(m, f->loc, 1));
    dm_vec_push(m, m->constraints, k);

    dm_output *out = dm_arena_alloc(m, sizeof *out);
    out->name = last->name;
    out->loc = last->loc;
    out->kind = DM_OUT_SCALAR;
    out->value = node(m, DM_E_NAME, last->loc, 1);
    out->value->name = last->name;
    out->implied = 1;
    dm_vec_push(m, m->outputs, out);
}

void dm_expand_fractions(checker *c)
{
    dm_model *m = c->m;
    int inserted = 0, lets = 0;
    for (int s = 0; s < m->fractions.n; s++) {
        dm_fractions *f = m->fractions.items[s];
        int implied = repair(c, s);
        add_free_members(c, f, &inserted);
        if (implied) add_implied_member(c, f, lets++);
        f->expanded = f->nmembers >= 2;
    }
}

void dm_check_fractions(checker *c)
{
    dm_model *m = c->m;
    for (int s = 0; s < m->fractions.n; s++) {
        const dm_fractions *f = m->fractions.items[s];
        if (!f->expanded) continue;
        double lower = 0, start = 0;
        int starts_known = 1, bounds_ok = 1;
        for (int i = 0; i < f->nmembers - 1; i++) {
            const dm_param *p = param_named(m, f->members[i]->name);
            if (!(p->lo >= 0 && p->hi <= 1)) {
                dm_error(c->d, f->members[i]->loc,
                         "'%s' is a volume fraction, so its bounds must lie within [0, 1], not "
                         "%c%g, %g%c (line %d)",
                         p->name, p->lo_closed ? '[' : '(', p->lo, p->hi, p->hi_closed ? ']' : ')',
                         p->loc.line);
                bounds_ok = 0;
                continue;
            }
            lower += p->lo;
            start += p->init;
            starts_known &= p->init_source == DM_INIT_CONST && !p->init_from;
        }
        if (!bounds_ok) continue;
        if (lower > 1)
            dm_error(c->d, f->loc,
                     "these fractions cannot sum to one: the lower bounds of the free members "
                     "add up to %g",
                     lower);
        else if (starts_known && start > 1)
            dm_error(c->d, f->inits ? f->init_loc : f->loc,
                     "the starts of the free members add up to %g, more than 1 (so '%s' would "
                     "start below 0)",
                     start, f->members[f->nmembers - 1]->name);
    }
}
