/* Host merge of GPU matrix keys (runtime/track/track_gpu.c drain): one key at a time
 * (dm_sparse_add), a whole buffer at once on one core (dm_sparse_add_keys), and a whole
 * buffer by row shards on all cores (dm_sparse_shards_add_keys), on keys shaped like a dense
 * connectome's: 20,000 rows (seeds) x 20,000 columns (seed voxels), each streamline
 * KEYS_PER_LINE sorted columns near its seed, rows rising through the run as GPU chunks do
 * (random when the second argument is 1), buffers of 2^24 keys as the GPU returns them.
 * Not a test.  Build and run:
 *   make && cc -O2 -fopenmp -Iruntime -o /tmp/bench_sparse_merge bench/bench_sparse_merge.c \
 *       -Lbuild -ldimoc-runtime -lm && /tmp/bench_sparse_merge [million keys, default 50] [0|1] */
#include "track/track_sparse.h"
#include "track/track_sparse_shards.h"

#include <omp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ROWS = 20000, COLS = 20000, KEYS_PER_LINE = 250, SPREAD = 1000 };
#define BUFFER_KEYS ((size_t)1 << 24)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static unsigned long long rng = 88172645463325252ULL;
static unsigned long long next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int cmp_uint(const void *a, const void *b)
{
    unsigned int x = *(const unsigned int *)a, y = *(const unsigned int *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    size_t total = (size_t)(argc > 1 ? atof(argv[1]) : 50) * 1000000;
    int random_rows = argc > 2 && atoi(argv[2]) == 1;
    unsigned long long *keys = malloc(total * 8), *copy = malloc(BUFFER_KEYS * 8);
    if (!keys || !copy) return fprintf(stderr, "out of memory\n"), 1;
    unsigned int cols[KEYS_PER_LINE];
    for (size_t n = 0; n < total;) { /* one streamline: a seed's row, distinct sorted columns */
        unsigned int row = random_rows
                               ? (unsigned)(next_random() % ROWS)
                               : (unsigned)((double)n / total * ROWS + next_random() % 50) % ROWS;
        unsigned int m = 0;
        for (int i = 0; i < KEYS_PER_LINE; i++) {
            unsigned int c = (unsigned)((row * 37ull + next_random() % SPREAD) % COLS);
            cols[m++] = c;
        }
        qsort(cols, m, sizeof *cols, cmp_uint);
        for (unsigned int i = 0; i < m && n < total; i++)
            if (i == 0 || cols[i] != cols[i - 1])
                keys[n++] = (unsigned long long)row << 32 | cols[i];
    }
    dm_sparse one, bulk;
    dm_sparse_init(&one);
    dm_sparse_init(&bulk);
    double t0 = now();
    for (size_t i = 0; i < total; i++)
        dm_sparse_add(&one, (unsigned)(keys[i] >> 32), (unsigned)keys[i]);
    dm_sparse_compact(&one);
    double t1 = now();
    for (size_t at = 0; at < total; at += BUFFER_KEYS) { /* copy: the pinned buffer's part */
        size_t n = total - at < BUFFER_KEYS ? total - at : BUFFER_KEYS;
        memcpy(copy, keys + at, n * 8);
        dm_sparse_add_keys(&bulk, copy, n);
    }
    dm_sparse_compact(&bulk);
    double t2 = now();
    dm_sparse_shards sh;
    dm_sparse_shards_init(&sh, 0);
    for (size_t at = 0; at < total; at += BUFFER_KEYS) {
        size_t n = total - at < BUFFER_KEYS ? total - at : BUFFER_KEYS;
        memcpy(copy, keys + at, n * 8);
        dm_sparse_shards_add_keys(&sh, copy, n);
    }
    dm_sparse gathered;
    dm_sparse_init(&gathered);
    dm_sparse_shards_gather(&sh, &gathered);
    double t3 = now();
    int same = one.n == bulk.n && !memcmp(one.keys, bulk.keys, one.n * 8) &&
               !memcmp(one.counts, bulk.counts, one.n * 8) && gathered.n == one.n &&
               !memcmp(one.keys, gathered.keys, one.n * 8) &&
               !memcmp(one.counts, gathered.counts, one.n * 8);
    printf("%zu keys (%s rows), %zu entries, %d threads\n", total,
           random_rows ? "random" : "rising", one.n, omp_get_max_threads());
    printf("| merge | s | M keys/s | x one by one |\n|---|---|---|---|\n");
    printf("| one by one | %.2f | %.0f | 1 |\n", t1 - t0, total / (t1 - t0) / 1e6);
    printf("| bulk, 1 core | %.2f | %.0f | %.1f |\n", t2 - t1, total / (t2 - t1) / 1e6,
           (t1 - t0) / (t2 - t1));
    printf("| bulk, %d shards | %.2f | %.0f | %.1f |\n", sh.n, t3 - t2, total / (t3 - t2) / 1e6,
           (t1 - t0) / (t3 - t2));
    printf("results %s\n", same ? "identical" : "DIFFERENT");
    dm_sparse_shards_free(&sh);
    dm_sparse_free(&gathered);
    dm_sparse_free(&one);
    dm_sparse_free(&bulk);
    free(keys);
    free(copy);
    return !same;
}
