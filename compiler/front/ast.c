/* Arena allocation, growable vectors, symbol lookup and prior names for the syntax tree
 * (ast.h). */
#include "ast.h"

#include <stdlib.h>
#include <string.h>

/* Blocks of at least ARENA_BLOCK bytes, chained; freed all at once with the model. */
#define ARENA_BLOCK 16384

typedef struct dm_arena_block {
    struct dm_arena_block *next;
    size_t used, size;
    max_align_t data[]; /* keeps every allocation maximally aligned */
} dm_arena_block;

struct dm_arena {
    dm_arena_block *head;
};

static void out_of_memory(void)
{
    /* The compiler cannot continue without memory; every caller would just exit. */
    abort();
}

void *dm_arena_alloc(dm_model *m, size_t size)
{
    if (!m->arena) {
        m->arena = calloc(1, sizeof *m->arena);
        if (!m->arena) out_of_memory();
    }
    const size_t align = sizeof(max_align_t);
    size = (size + align - 1) / align * align;
    dm_arena_block *b = m->arena->head;
    if (!b || b->size - b->used < size) {
        size_t cap = size > ARENA_BLOCK ? size : ARENA_BLOCK;
        b = malloc(sizeof *b + cap);
        if (!b) out_of_memory();
        b->next = m->arena->head;
        b->used = 0;
        b->size = cap;
        m->arena->head = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += size;
    memset(p, 0, size);
    return p;
}

char *dm_arena_strdup(dm_model *m, const char *s)
{
    size_t n = strlen(s);
    char *p = dm_arena_alloc(m, n + 1);
    memcpy(p, s, n + 1);
    return p;
}

/* Every DM_VEC(T) has this layout. */
typedef struct {
    void **items;
    int n, cap;
} dm_any_vec;

void dm_vec_push_(dm_model *m, void *vec, void *item)
{
    dm_any_vec *v = vec;
    if (v->n == v->cap) {
        int cap = v->cap ? 2 * v->cap : 8;
        void **items = dm_arena_alloc(m, (size_t)cap * sizeof *items);
        if (v->n) memcpy(items, v->items, (size_t)v->n * sizeof *items);
        v->items = items; /* the old array stays in the arena until the model is freed */
        v->cap = cap;
    }
    v->items[v->n++] = item;
}

void dm_model_free(dm_model *m)
{
    if (!m) return;
    if (m->arena) {
        dm_arena_block *b = m->arena->head;
        while (b) {
            dm_arena_block *next = b->next;
            free(b);
            b = next;
        }
        free(m->arena);
    }
    free(m);
}

dm_symbol *dm_model_lookup(dm_model *m, const char *name)
{
    for (int i = 0; i < m->symbols.n; i++)
        if (strcmp(m->symbols.items[i]->name, name) == 0) return m->symbols.items[i];
    return NULL;
}

const char *dm_prior_kind_name(dm_prior_kind k)
{
    static const char *const names[] = {"none", "uniform", "gaussian", "gamma",
                                        "ard",  "sphere",  "custom"};
    return k >= 0 && k <= DM_PRIOR_CUSTOM ? names[k] : "none";
}

const char *dm_init_source_name(dm_init_source s)
{
    static const char *const names[] = {"const", "b0", "md", "theta", "phi"};
    return s >= 0 && s <= DM_INIT_PHI ? names[s] : "const";
}

int dm_prior_constant_args(dm_prior_kind k)
{
    return k == DM_PRIOR_GAUSSIAN || k == DM_PRIOR_GAMMA ? 2 : k == DM_PRIOR_ARD ? 1 : 0;
}
