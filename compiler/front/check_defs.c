/* Functions and compartments (docs/model-language.md, "Functions and compartments").
 *
 * The definitions are checked once for what does not depend on a call: their names, their
 * argument and local names, that a function names only its arguments and constants, that
 * every call in them names something, and that no definition calls itself through others.
 * Every call is then inlined where it stands: the call's node becomes a copy of the body
 * with copies of the (checked) arguments in place of their names, the local lets likewise
 * substituted, and the copy is checked in the call's context.  So the back end sees only
 * built-ins, and a model written with compartments lowers to the same code as one written
 * out by hand.  A mistake found inside a copy points into the definition's file, with a
 * note at the call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtins.h"
#include "check.h"

/* Inlining is bounded like sum expansion: nodes copied in all, and the nesting of the
 * resulting expression (each part is at most DM_MAX_EXPR_DEPTH deep). */
#define DM_MAX_INLINED_NODES 400000
#define DM_MAX_INLINED_DEPTH (4 * DM_MAX_EXPR_DEPTH)

static const char *kind_word(const dm_definition *def)
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
        dm_error(c->d, loc, "unknown %s '%s'; did you mean '%s'?", kind_word(def), name, near_def);
    } else if (near_fn) {
        dm_error(c->d, loc, "unknown function '%s'; did you mean '%s'?", name, near_fn);
    } else {
        dm_error(c->d, loc, "unknown function '%s'", name);
    }
}

/* The file and line of LOC, as "line N" in the same file or "FILE:N" in another. */
static const char *where(const checker *c, dm_loc loc, dm_loc from, char *buf, size_t size)
{
    if (loc.file == from.file || loc.file >= c->m->sources.n)
        snprintf(buf, size, "line %d", loc.line);
    else
        snprintf(buf, size, "%s:%d", c->m->sources.items[loc.file]->path, loc.line);
    return buf;
}

/* --- The definitions themselves -------------------------------------------------------- */

/* A name a definition introduces (its own, an argument's, a local's): not a built-in. */
static int valid_name(checker *c, const char *name, dm_loc loc)
{
    if (dm_builtin_find(name)) {
        dm_error(c->d, loc, "'%s' is a built-in function and cannot be used as a name", name);
        return 0;
    }
    if (strcmp(name, "pi") == 0 || strcmp(name, "inf") == 0) {
        dm_error(c->d, loc, "'%s' is a built-in constant and cannot be used as a name", name);
        return 0;
    }
    return 1;
}

static int is_output(const dm_model *m, const char *name, dm_loc *loc)
{
    for (int i = 0; i < m->outputs.n; i++)
        if (strcmp(m->outputs.items[i]->name, name) == 0) {
            *loc = m->outputs.items[i]->loc;
            return 1;
        }
    return 0;
}

/* Where the model declares NAME (parameter, input, let or output); 0 when it does not. */
static int model_declares(const dm_model *m, const char *name, dm_loc *loc)
{
    for (int i = 0; i < m->params.n; i++)
        if (strcmp(m->params.items[i]->name, name) == 0) return *loc = m->params.items[i]->loc, 1;
    for (int i = 0; i < m->measures.n; i++)
        if (strcmp(m->measures.items[i]->name, name) == 0)
            return *loc = m->measures.items[i]->loc, 1;
    for (int i = 0; i < m->voxels.n; i++)
        if (strcmp(m->voxels.items[i]->name, name) == 0) return *loc = m->voxels.items[i]->loc, 1;
    for (int i = 0; i < m->lets.n; i++)
        if (strcmp(m->lets.items[i]->name, name) == 0) return *loc = m->lets.items[i]->loc, 1;
    return is_output(m, name, loc);
}

static void check_name_of(checker *c, int index)
{
    dm_definition *def = c->m->definitions.items[index];
    char buf[300];
    if (!valid_name(c, def->name, def->loc)) return;
    for (int j = 0; j < index; j++) {
        const dm_definition *first = c->m->definitions.items[j];
        if (strcmp(first->name, def->name) == 0) {
            dm_error(c->d, def->loc, "duplicate definition of '%s' (first defined at %s)",
                     def->name, where(c, first->loc, def->loc, buf, sizeof buf));
            return;
        }
    }
    dm_loc at;
    if (model_declares(c->m, def->name, &at)) {
        /* Said where the model names it: the library is shared, the model's name is chosen. */
        if (def->loc.file == 0)
            dm_error(c->d, def->loc, "'%s' is already a name of the model (line %d)", def->name,
                     at.line);
        else
            dm_error(c->d, at, "'%s' is the name of a %s (%s); choose another name", def->name,
                     kind_word(def), where(c, def->loc, at, buf, sizeof buf));
    }
}

/* Names in scope while a definition is walked: its arguments, the locals before the one
 * being walked, and the variables of the sums around. */
typedef struct scope {
    const char **names;
    int n, cap;
} scope;

static int in_scope(const scope *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0) return 1;
    return 0;
}

/* A name of a definition that is none of its own: constants for a function; constants or the
 * model's measures for a compartment (known only at a call, so not judged here). */
static int free_name_allowed(const dm_definition *def, const dm_symbol *s)
{
    if (s && s->kind == DM_SYM_CONST) return 1;
    return def->is_compartment && s && s->kind == DM_SYM_MEASURE;
}

static void report_free_name(checker *c, const dm_definition *def, const dm_expr *e,
                             const dm_symbol *s)
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

/* Visit state of the search for circular definitions. */
enum { UNVISITED, VISITING, DONE };

typedef struct walk {
    checker *c;
    dm_definition *def;
    scope scope;
    unsigned char *state; /* per definition */
    dm_definition **path; /* the definitions being walked, outermost first */
    int npath;
} walk;

static void walk_definition(walk *w, int index);

/* A call inside a definition: a built-in, a known definition (followed, for circles), or an
 * error. */
static void walk_call(walk *w, const dm_expr *e)
{
    checker *c = w->c;
    if (dm_builtin_find(e->name)) return;
    dm_definition *callee = dm_definition_find(c->m, e->name);
    if (!callee) {
        dm_unknown_call(c, e->loc, e->name);
        return;
    }
    if (!w->def->is_compartment && callee->is_compartment)
        dm_error(c->d, e->loc,
                 "function '%s' calls compartment '%s', which may use measures; make '%s' a "
                 "compartment",
                 w->def->name, callee->name, w->def->name);
    int index = 0;
    while (c->m->definitions.items[index] != callee) index++;
    if (w->state[index] == VISITING) {
        /* "'f' calls 'g', which calls 'h', which calls 'f'" */
        char chain[512] = "";
        int from = 0;
        while (w->path[from] != callee) from++;
        snprintf(chain, sizeof chain, "'%s' calls", callee->name);
        for (int i = from + 1; i <= w->npath; i++) {
            size_t len = strlen(chain);
            snprintf(chain + len, sizeof chain - len, "%s '%s'",
                     i > from + 1 ? ", which calls" : "",
                     i < w->npath ? w->path[i]->name : callee->name);
        }
        if (callee == w->def)
            dm_error(c->d, e->loc, "%s '%s' calls itself; definitions cannot be recursive",
                     kind_word(callee), callee->name);
        else
            dm_error(c->d, e->loc, "circular definition: %s", chain);
        for (int i = from; i < w->npath; i++) w->path[i]->broken = 1;
        return;
    }
    if (w->state[index] == UNVISITED) walk_definition(w, index);
}

static void walk_expr(walk *w, const dm_expr *e)
{
    if (!e) return;
    checker *c = w->c;
    switch (e->kind) {
    case DM_E_NAME:
        if (!in_scope(&w->scope, e->name)) {
            dm_symbol *s = dm_model_lookup(c->m, e->name);
            /* A compartment's other names are judged at each call, against that model. */
            if (!w->def->is_compartment && !free_name_allowed(w->def, s))
                report_free_name(c, w->def, e, s);
        }
        return;
    case DM_E_CALL: walk_call(w, e); break;
    case DM_E_SUM:
        walk_expr(w, e->a);
        walk_expr(w, e->b);
        if (w->scope.n < w->scope.cap) {
            w->scope.names[w->scope.n++] = e->name;
            walk_expr(w, e->c);
            w->scope.n--;
        }
        return;
    default: break;
    }
    walk_expr(w, e->a);
    walk_expr(w, e->b);
    walk_expr(w, e->c);
    for (int i = 0; i < e->nargs; i++) walk_expr(w, e->args[i]);
}

/* An argument or local of the definition being walked: a new name in it. */
static void add_to_scope(walk *w, const char *name, dm_loc loc)
{
    valid_name(w->c, name, loc);
    if (in_scope(&w->scope, name))
        dm_error(w->c->d, loc, "'%s' is already a name in %s '%s'", name, kind_word(w->def),
                 w->def->name);
    else
        w->scope.names[w->scope.n++] = name;
}

/* Names, then the body (locals first, each seeing the ones before). */
static void walk_definition(walk *w, int index)
{
    checker *c = w->c;
    dm_definition *def = c->m->definitions.items[index];
    w->state[index] = VISITING;
    w->path[w->npath++] = def;
    dm_definition *outer_def = w->def;
    scope outer_scope = w->scope;
    w->def = def;
    w->scope.n = 0;
    w->scope.cap = def->nformals + def->nlocals + DM_MAX_EXPR_DEPTH + 1;
    w->scope.names = dm_arena_alloc(c->m, (size_t)w->scope.cap * sizeof *w->scope.names);
    for (int i = 0; i < def->nformals; i++)
        add_to_scope(w, def->formals[i]->name, def->formals[i]->loc);
    for (int i = 0; i < def->nlocals; i++) {
        walk_expr(w, def->locals[i]->value);
        add_to_scope(w, def->locals[i]->name, def->locals[i]->loc);
    }
    walk_expr(w, def->body);
    w->def = outer_def;
    w->scope = outer_scope;
    w->npath--;
    w->state[index] = DONE;
}

void dm_check_definitions(checker *c)
{
    dm_model *m = c->m;
    int n = m->definitions.n;
    if (n == 0) return;
    for (int i = 0; i < n; i++) check_name_of(c, i);
    walk *w = calloc(1, sizeof *w);
    if (!w) abort();
    w->c = c;
    w->state = dm_arena_alloc(m, (size_t)n);
    w->path = dm_arena_alloc(m, (size_t)n * sizeof *w->path);
    for (int i = 0; i < n; i++)
        if (w->state[i] == UNVISITED) walk_definition(w, i);
    free(w);
}

/* --- Inlining -------------------------------------------------------------------------- */

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
        if (!free_name_allowed(in->def, s)) {
            report_free_name(c, in->def, e, s);
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

dm_type dm_inline_call(checker *c, expr_ctx *x, dm_expr *e, dm_definition *def)
{
    if (e->nargs != def->nformals) {
        char list[256] = "";
        for (int i = 0; i < def->nformals; i++) {
            size_t len = strlen(list);
            snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", def->formals[i]->name);
        }
        dm_error(c->d, e->loc, "%s '%s' takes %d argument%s (%s), but %d %s given", kind_word(def),
                 def->name, def->nformals, def->nformals == 1 ? "" : "s", list, e->nargs,
                 e->nargs == 1 ? "is" : "are");
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
        dm_note_since(c->d, mark, e->loc, "in this call of %s '%s'", kind_word(def), def->name);
    if (t == DM_T_UNKNOWN) return DM_T_UNKNOWN;
    def->used = 1;
    dm_expr *call = dm_arena_alloc(c->m, sizeof *call);
    *call = *e;
    *e = *body;
    e->call = call;
    return t;
}
