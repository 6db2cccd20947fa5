#include "track/track_sparse_shards.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define EMPTY_KEY (~0ULL)

int dm_sparse_shards_init(dm_sparse_shards *s, int nshards)
{
    memset(s, 0, sizeof *s);
    s->n = nshards > 0 ? nshards : omp_get_max_threads();
    if (s->n < 1) s->n = 1;
    s->shard = calloc((size_t)s->n, sizeof *s->shard);
    if (!s->shard) {
        s->failed = 1;
        return -1;
    }
    return 0;
}

static int shard_of(const dm_sparse_shards *s, unsigned long long key)
{
    return (int)((key >> 32) % (unsigned long long)s->n);
}

void dm_sparse_shards_add_keys(dm_sparse_shards *s, const unsigned long long *keys, size_t n)
{
    if (n == 0 || s->failed) return;
    if (n > s->cap_scratch) { /* kept between calls: fresh pages cost more than the sort */
        free(s->scratch);
        s->scratch = malloc(2 * n * sizeof *s->scratch);
        s->cap_scratch = s->scratch ? n : 0;
        if (!s->scratch) {
            s->failed = 1;
            return;
        }
    }
    unsigned long long *sort_scratch = s->scratch + s->cap_scratch;
    int nt = omp_get_max_threads(), ns = s->n;
    if ((size_t)nt > n / 4096 + 1) nt = (int)(n / 4096 + 1); /* small buffers: fewer threads */
    /* at[t * ns + k]: where thread t writes its keys of shard k (counts first) */
    size_t *at = calloc((size_t)nt * ns + 1, sizeof *at),
           *start = calloc((size_t)ns + 1, sizeof *start);
    if (!at || !start) {
        free(at);
        free(start);
        s->failed = 1;
        return;
    }
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), team = omp_get_num_threads();
        size_t lo = n * t / team, hi = n * (t + 1) / team;
        size_t *mine = at + (size_t)t * ns;
        for (size_t i = lo; i < hi; i++)
            if (keys[i] != EMPTY_KEY) mine[shard_of(s, keys[i])]++;
#pragma omp barrier
#pragma omp single
        {
            size_t total = 0;
            for (int k = 0; k < ns; k++) {
                start[k] = total;
                for (int u = 0; u < team; u++) {
                    size_t c = at[(size_t)u * ns + k];
                    at[(size_t)u * ns + k] = total;
                    total += c;
                }
            }
            start[ns] = total;
        }
        for (size_t i = lo; i < hi; i++)
            if (keys[i] != EMPTY_KEY) s->scratch[mine[shard_of(s, keys[i])]++] = keys[i];
#pragma omp barrier
#pragma omp for schedule(dynamic, 1)
        for (int k = 0; k < ns; k++)
            dm_sparse_add_keys_scratch(&s->shard[k], s->scratch + start[k], start[k + 1] - start[k],
                                       sort_scratch + start[k]);
    }
    for (int k = 0; k < ns; k++) s->failed |= s->shard[k].failed;
    free(at);
    free(start);
}

void dm_sparse_shards_gather(const dm_sparse_shards *s, dm_sparse *into)
{
    size_t total = 0;
    unsigned long long rows = 0;
    for (int k = 0; k < s->n; k++) {
        const dm_sparse *sh = &s->shard[k];
        total += sh->n;
        if (sh->n && (sh->keys[sh->n - 1] >> 32) + 1 > rows) rows = (sh->keys[sh->n - 1] >> 32) + 1;
    }
    dm_sparse all; /* built in place when `into` is empty (the usual case) */
    dm_sparse_init(&all);
    all.keys = malloc((total ? total : 1) * sizeof *all.keys);
    all.counts = malloc((total ? total : 1) * sizeof *all.counts);
    if (!all.keys || !all.counts || s->failed) {
        dm_sparse_free(&all);
        into->failed = 1;
        return;
    }
    all.cap = total ? total : 1;
    size_t *cur = calloc((size_t)s->n, sizeof *cur);
    if (!cur) {
        dm_sparse_free(&all);
        into->failed = 1;
        return;
    }
    for (unsigned long long r = 0; r < rows; r++) { /* row r is all in shard r % n */
        int k = (int)(r % (unsigned long long)s->n);
        const dm_sparse *sh = &s->shard[k];
        while (cur[k] < sh->n && (sh->keys[cur[k]] >> 32) == r) {
            all.keys[all.n] = sh->keys[cur[k]];
            all.counts[all.n++] = sh->counts[cur[k]++];
        }
    }
    free(cur);
    if (into->n == 0 && !into->failed) {
        dm_sparse_free(into);
        *into = all;
        return;
    }
    dm_sparse_merge(into, &all);
    dm_sparse_free(&all);
}

void dm_sparse_shards_free(dm_sparse_shards *s)
{
    for (int k = 0; s->shard && k < s->n; k++) dm_sparse_free(&s->shard[k]);
    free(s->shard);
    free(s->scratch);
    memset(s, 0, sizeof *s);
}
