#include "fodtrack/fodtrack_batch.h"
#include "io/bigalloc.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

void dm_ft_batch_reset(dm_ft_batch *b, unsigned long long first, long n, size_t cap_points)
{
    b->first = first;
    b->n = n;
    b->count = 0;
    b->npoints = 0;
    b->device_points = 0;
    b->truncations = 0;
    b->evals = 0;
    size_t m = n > 0 ? (size_t)n : 1;
    b->verdict = realloc(b->verdict, m);
    b->ends = realloc(b->ends, 2 * m);
    b->id = realloc(b->id, m * sizeof *b->id);
    b->start = realloc(b->start, m * sizeof *b->start);
    b->npts = realloc(b->npts, m * sizeof *b->npts);
    b->seed_index = realloc(b->seed_index, m * sizeof *b->seed_index);
    dm_ft_batch_room(b, cap_points ? cap_points : 1);
}

int dm_ft_batch_room(dm_ft_batch *b, size_t points)
{
    if (points <= b->xyz_cap) return 0;
    size_t cap = b->xyz_cap + b->xyz_cap / 2;
    if (cap < points) cap = points;
    /* on huge pages: a GPU batch's points are moved in on all threads, and the faults of fresh
     * 4 KiB pages, not the copying, bound that move */
    float *xyz = dm_big_alloc(3 * cap * sizeof *xyz);
    if (!xyz) return dm_set_error("track: out of memory for a batch of %zu points", points);
    if (b->npoints) memcpy(xyz, b->xyz, 3 * b->npoints * sizeof *xyz);
    free(b->xyz);
    b->xyz = xyz;
    b->xyz_cap = cap;
    return 0;
}

typedef struct {
    unsigned long long id;
    long k;
} keyed;

static int by_id(const void *a, const void *b)
{
    unsigned long long x = ((const keyed *)a)->id, y = ((const keyed *)b)->id;
    return x < y ? -1 : x > y;
}

void dm_ft_batch_sort(dm_ft_batch *b)
{
    int sorted = 1;
    for (long i = 1; i < b->count && sorted; i++) sorted = b->id[i - 1] < b->id[i];
    if (sorted) return;
    keyed *order = malloc(b->count * sizeof *order);
    for (long i = 0; i < b->count; i++) order[i] = (keyed){b->id[i], i};
    qsort(order, b->count, sizeof *order, by_id);
    size_t *start = malloc(b->count * sizeof *start);
    int *npts = malloc(b->count * sizeof *npts), *seed = malloc(b->count * sizeof *seed);
    for (long i = 0; i < b->count; i++) {
        long k = order[i].k;
        b->id[i] = order[i].id;
        start[i] = b->start[k];
        npts[i] = b->npts[k];
        seed[i] = b->seed_index[k];
    }
    free(order);
    free(b->start);
    free(b->npts);
    free(b->seed_index);
    b->start = start;
    b->npts = npts;
    b->seed_index = seed;
}

void dm_ft_batch_free(dm_ft_batch *b)
{
    free(b->verdict);
    free(b->ends);
    free(b->id);
    free(b->start);
    free(b->npts);
    free(b->seed_index);
    free(b->xyz);
    memset(b, 0, sizeof *b);
}
