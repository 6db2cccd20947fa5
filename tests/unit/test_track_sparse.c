/* runtime/track/track_sparse.c: sparse count matrices against a dense reference, across the pending
 * list's compactions, per-thread merges and the .dot writer (1-based, sorted, size line,
 * symmetrised for matrix 3). */
#include "check.h"
#include "track/track_sparse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    enum { R = 300, C = 200 };
    static unsigned long long dense[R][C];
    dm_sparse a, b;
    dm_sparse_init(&a);
    dm_sparse_init(&b);
    unsigned int state = 12345;
    unsigned long long added = 0;
    /* 2.5 million increments over two accumulators: more than one compaction each */
    for (long i = 0; i < 2500000; i++) {
        state = state * 1664525u + 1013904223u;
        unsigned int r = (state >> 8) % R, c = (state >> 20) % C;
        if (r % 7 == 0) continue; /* rows left empty */
        dense[r][c]++;
        added++;
        dm_sparse_add(i & 1 ? &a : &b, r, c);
    }
    dm_sparse_compact(&a);
    dm_sparse_compact(&b);
    dm_sparse_merge(&a, &b);
    int same = !a.failed, sorted = 1;
    size_t nonzero = 0;
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) nonzero += dense[r][c] != 0;
    same &= a.n == nonzero;
    for (size_t i = 0; i < a.n && same; i++) {
        unsigned int r = (unsigned int)(a.keys[i] >> 32), c = (unsigned int)a.keys[i];
        same &= r < R && c < C && dense[r][c] == a.counts[i];
        if (i) sorted &= a.keys[i] > a.keys[i - 1];
    }
    char why[200];
    snprintf(why, sizeof why, "%zu entries, %zu non-zeros in the dense reference", a.n, nonzero);
    check(same && sorted, "track_sparse_matches_dense", "%s", why);
    snprintf(why, sizeof why, "merged total %llu, %llu increments added", dm_sparse_total(&a),
             added);
    check(dm_sparse_total(&a) == added, "track_sparse_total", "%s", why);

    /* writer: a small symmetric (upper-triangle) matrix */
    dm_sparse s;
    dm_sparse_init(&s);
    dm_sparse_add(&s, 0, 2);
    dm_sparse_add(&s, 0, 2);
    dm_sparse_add(&s, 1, 2);
    dm_sparse_compact(&s);
    const char *path = "tests/tmp/track_sparse.dot";
    int rc = dm_sparse_write_dot(&s, path, 4, 4, 1);
    char text[256] = {0};
    FILE *fp = fopen(path, "r");
    if (fp) {
        size_t n = fread(text, 1, sizeof text - 1, fp);
        text[n] = 0;
        fclose(fp);
    }
    const char *want = "1 3 2\n2 3 1\n3 1 2\n3 2 1\n4 4 0\n";
    snprintf(why, sizeof why, "got \"%.190s\"", text);
    check(rc == 0 && !strcmp(text, want), "track_sparse_dot_symmetrised", "%s", why);
    rc = dm_sparse_write_dot(&s, path, 2, 3, 0);
    fp = fopen(path, "r");
    memset(text, 0, sizeof text);
    if (fp) {
        size_t n = fread(text, 1, sizeof text - 1, fp);
        text[n] = 0;
        fclose(fp);
    }
    snprintf(why, sizeof why, "got \"%.190s\"", text);
    check(rc == 0 && !strcmp(text, "1 3 2\n2 3 1\n"), "track_sparse_dot_size_entry_present", "%s",
          why);
    dm_sparse_free(&a);
    dm_sparse_free(&b);
    dm_sparse_free(&s);
    return failures != 0;
}
