/* Functions and compartments (docs/model-language.md, "Functions and compartments"): the
 * definitions themselves.
 *
 * The definitions are checked once for what does not depend on a call: their names, their
 * argument and local names, that a function names only its arguments and constants, that
 * every call in them names something, and that no definition calls itself through others.
 * Every call is then inlined where it stands, by the expression checker (check_expr.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtins.h"
#include "check.h"

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
                     dm_definition_word(def), where(c, def->loc, at, buf, sizeof buf));
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
                     dm_definition_word(callee), callee->name);
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
            if (!w->def->is_compartment && !dm_free_name_allowed(w->def, s))
                dm_report_free_name(c, w->def, e, s);
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
        dm_error(w->c->d, loc, "'%s' is already a name in %s '%s'", name,
                 dm_definition_word(w->def), w->def->name);
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
