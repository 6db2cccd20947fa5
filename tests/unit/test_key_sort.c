/* runtime/util/key_sort.c and dm_sparse_add_keys: the radix sort against qsort on random keys
 * (full 64-bit, matrix-like, all equal, tiny), and bulk adds against one-by-one adds, unused
 * (~0) slots included. */
#include "util/key_sort.h"
#include "track/track_sparse.h"
#include "track/track_sparse_shards.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long rng = 88172645463325252ULL;
static unsigned long long next_random(void) /* xorshift64 */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int cmp_u64(const void *a, const void *b)
{
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

/* Sorts a copy both ways; 1 when they agree. */
static int sorts_like_qsort(const unsigned long long *keys, size_t n)
{
    size_t bytes = (n ? n : 1) * 8;
    unsigned long long *a = malloc(bytes), *b = malloc(bytes), *s = malloc(bytes);
    memcpy(a, keys, n * 8);
    memcpy(b, keys, n * 8);
    dm_key_sort(a, s, n);
    qsort(b, n, 8, cmp_u64);
    int same = memcmp(a, b, n * 8) == 0;
    free(a);
    free(b);
    free(s);
    return same;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* dm_select_kth against qsort: every rank of short arrays with many ties (values 0..span-1),
 * and the order it leaves (nothing after rank k below it). */
static int selects_like_qsort(void)
{
    double a[64], sorted[64];
    for (int trial = 0; trial < 20000; trial++) {
        size_t n = 1 + next_random() % 64, k = next_random() % n, span = 1 + next_random() % 12;
        for (size_t i = 0; i < n; i++) a[i] = sorted[i] = (double)(next_random() % span);
        qsort(sorted, n, sizeof *sorted, cmp_double);
        double v = dm_select_kth(a, n, k);
        if (v != sorted[k]) return 0;
        for (size_t i = k + 1; i < n; i++)
            if (a[i] < v) return 0;
    }
    return 1;
}

typedef struct scored_item {
    double score;
    size_t i;
} scored_item;

static int by_score(const void *a, const void *b) /* ascending, ties by index: strict */
{
    const scored_item *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* dm_sort_first and dm_partition_first against qsort's first k: arrays of records with many tied scores (ordered by
 * index then), every k from none to all, sorted and reversed inputs among them. */
static int sorts_first_like_qsort(void)
{
    scored_item a[200], sorted[200];
    for (int trial = 0; trial < 4000; trial++) {
        size_t n = (size_t)(trial % 200) + 1, k = next_random() % (n + 2),
               span = 1 + next_random() % 40;
        for (size_t j = 0; j < n; j++) {
            double v = (double)(next_random() % span);
            if (trial % 7 == 1) v = (double)j;       /* sorted already */
            if (trial % 7 == 2) v = (double)(n - j); /* reversed */
            a[j] = sorted[j] = (scored_item){v, j};
        }
        qsort(sorted, n, sizeof *sorted, by_score);
        scored_item part[200];
        memcpy(part, a, n * sizeof *a);
        dm_partition_first(part, n, sizeof *part, k, by_score);
        dm_sort_first(a, n, sizeof *a, k, by_score);
        size_t kk = k < n ? k : n;
        if (memcmp(a, sorted, kk * sizeof *a) != 0) return 0;
        for (size_t j = kk; j < n; j++) /* the rest: the others, each after the k first */
            if (kk > 0 && by_score(&a[j], &a[kk - 1]) < 0) return 0;
        qsort(part, kk, sizeof *part, by_score); /* the partition's first k: the same set */
        if (memcmp(part, sorted, kk * sizeof *part) != 0) return 0;
    }
    return 1;
}

static int cmp_double_desc(const void *a, const void *b)
{
    return cmp_double(b, a);
}

/* dm_sort_doubles_descending against qsort: values of both signs, zeros of both signs, ties,
 * tiny and huge magnitudes, infinities. */
static int sorts_doubles_like_qsort(void)
{
    double a[300], b[300];
    for (int trial = 0; trial < 2000; trial++) {
        size_t n = (size_t)(trial % 300);
        for (size_t j = 0; j < n; j++) {
            unsigned long long r = next_random();
            double v = (double)(long long)(r % 2001) - 1000.0; /* ties */
            switch (r >> 60) {
            case 0: v = 0.0; break;
            case 1: v = -0.0; break;
            case 2: v *= 1e-300; break;
            case 3: v *= 1e300; break;
            case 4: v = (r & 1) ? INFINITY : -INFINITY; break;
            default: v += (double)(r >> 11 & 1023) / 1024.0; break;
            }
            a[j] = b[j] = v;
        }
        qsort(b, n, sizeof *b, cmp_double_desc);
        if (dm_sort_doubles_descending(a, n) != 0) return 0;
        for (size_t j = 0; j < n; j++) /* equal as values (a -0 comes back as 0) */
            if (a[j] != b[j]) return 0;
    }
    return 1;
}

/* dm_lower_bound against a linear scan: ascending arrays with repeats and gaps, keys below,
 * between, on and above their values. */
static int lower_bound_like_scan(void)
{
    unsigned long long state = 7;
    int ok = 1;
    for (int trial = 0; trial < 2000 && ok; trial++) {
        size_t n = (size_t)(trial % 40), a[40];
        for (size_t i = 0, v = 0; i < n; i++) {
            state = state * 6364136223846793005ULL + 1442695040888963407ULL;
            v += (size_t)(state >> 61); /* steps of 0 to 7: repeats and gaps */
            a[i] = v;
        }
        for (size_t key = 0; key < (n ? a[n - 1] + 3 : 3) && ok; key++) {
            size_t want = 0;
            while (want < n && a[want] < key) want++;
            ok = dm_lower_bound(a, n, key) == want;
        }
    }
    return ok;
}

int main(void)
{
    enum { N = 300000 };
    unsigned long long *k = malloc(N * 8);
    int failed = 0;
    struct {
        const char *name;
        int kind;
        size_t n;
    } cases[] = {{"key_sort_full_64bit", 0, N}, {"key_sort_matrix_keys", 1, N},
                 {"key_sort_all_equal", 2, N},  {"key_sort_one_key", 0, 1},
                 {"key_sort_no_keys", 0, 0},    {"key_sort_odd_passes", 3, N}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        for (size_t i = 0; i < cases[c].n; i++) {
            unsigned long long r = next_random();
            switch (cases[c].kind) {
            case 0: k[i] = r; break;
            case 1: k[i] = (r >> 40) % 20000 << 32 | (r & 0xffff) % 20000; break;
            case 2: k[i] = 0x123456789ULL; break;
            default: k[i] = r & 0xff0000ff; break; /* 2 passes, then 3 with the next bit */
            }
        }
        if (cases[c].kind == 3) k[7] |= 1ULL << 40;
        int ok = sorts_like_qsort(k, cases[c].n);
        failed |= !ok;
        if (ok)
            printf("PASS %s\n", cases[c].name);
        else
            printf("FAIL %s: radix order differs from qsort's\n", cases[c].name);
    }

    /* bulk adds in uneven batches, with unused slots, against one key at a time */
    dm_sparse one, bulk;
    dm_sparse_init(&one);
    dm_sparse_init(&bulk);
    enum { NSH = 3 };
    const int shard_counts[NSH] = {1, 3, 16};
    dm_sparse_shards sh[NSH];
    for (int q = 0; q < NSH; q++) dm_sparse_shards_init(&sh[q], shard_counts[q]);
    size_t done = 0, batch = 1;
    for (int round = 0; done < N; round++) {
        size_t n = batch < N - done ? batch : N - done;
        for (size_t i = 0; i < n; i++) {
            unsigned long long r = next_random();
            /* rows drift upwards from batch to batch (as GPU chunks do), with stragglers */
            unsigned int row = (unsigned)((r >> 40) % 60 + (i % 11 == 3 ? 0 : 20 * round)) % 500,
                         col = (unsigned)(r % 300);
            if (i % 97 == 5) {
                k[done + i] = ~0ULL;
                continue;
            }
            k[done + i] = (unsigned long long)row << 32 | col;
            dm_sparse_add(&one, row, col);
        }
        for (int q = 0; q < NSH; q++) dm_sparse_shards_add_keys(&sh[q], k + done, n);
        dm_sparse_add_keys(&bulk, k + done, n);
        done += n;
        batch = batch * 3 + round;
    }
    dm_sparse_compact(&one);
    dm_sparse_compact(&bulk);
    int same = one.n == bulk.n && one.n > 0 && !memcmp(one.keys, bulk.keys, one.n * 8) &&
               !memcmp(one.counts, bulk.counts, one.n * 8) && !one.failed && !bulk.failed;
    if (same)
        printf("PASS sparse_add_keys_matches_add (%zu entries, %llu increments)\n", one.n,
               dm_sparse_total(&one));
    else
        printf("FAIL sparse_add_keys_matches_add: %zu vs %zu entries\n", one.n, bulk.n);
    for (int q = 0; q < NSH; q++) {
        dm_sparse g;
        dm_sparse_init(&g);
        dm_sparse_shards_gather(&sh[q], &g);
        int ok = g.n == one.n && !memcmp(g.keys, one.keys, one.n * 8) &&
                 !memcmp(g.counts, one.counts, one.n * 8) && !g.failed;
        if (ok)
            printf("PASS sparse_shards_%d_match_add\n", shard_counts[q]);
        else
            printf("FAIL sparse_shards_%d_match_add: %zu vs %zu entries\n", shard_counts[q], g.n,
                   one.n);
        same &= ok;
        dm_sparse_free(&g);
        dm_sparse_shards_free(&sh[q]);
    }
    dm_sparse_free(&one);
    dm_sparse_free(&bulk);
    free(k);
    int selects = selects_like_qsort();
    printf("%s select_kth_matches_qsort (20000 arrays of 1-64 values with ties)\n",
           selects ? "PASS" : "FAIL");
    int bounds = lower_bound_like_scan();
    printf("%s lower_bound_matches_scan (2000 ascending arrays of 0-39 values, every key)\n",
           bounds ? "PASS" : "FAIL");
    int firsts = sorts_first_like_qsort();
    printf("%s sort_first_matches_qsort (4000 arrays of 1-200 records with ties, every k)\n",
           firsts ? "PASS" : "FAIL");
    int doubles = sorts_doubles_like_qsort();
    printf("%s sort_doubles_descending_matches_qsort (2000 arrays of 0-299 values: signs, zeros, "
           "ties, extremes)\n",
           doubles ? "PASS" : "FAIL");
    return failed || !same || !selects || !bounds || !firsts || !doubles;
}
