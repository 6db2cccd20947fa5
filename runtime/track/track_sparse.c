#include "track/track_sparse.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/key_sort.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PENDING_LIMIT ((size_t)1 << 20)

void dm_sparse_init(dm_sparse *m)
{
    memset(m, 0, sizeof *m);
}

static int cmp_u64(const void *a, const void *b)
{
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

static int reserve(dm_sparse *m, size_t n)
{
    if (n <= m->cap) return 0;
    size_t cap = m->cap ? m->cap : 1024;
    while (cap < n) cap *= 2;
    unsigned long long *k = realloc(m->keys, cap * sizeof *k);
    if (k) m->keys = k;
    unsigned long long *c = realloc(m->counts, cap * sizeof *c);
    if (c) m->counts = c;
    if (!k || !c) {
        m->failed = 1;
        return -1;
    }
    m->cap = cap;
    return 0;
}

/* Merges sorted (ak, ac, an) and (bk, bc, bn) into m's list (which may be one of them: the
 * result is built in new arrays). */
static void merge_lists(dm_sparse *m, const unsigned long long *ak, const unsigned long long *ac,
                        size_t an, const unsigned long long *bk, const unsigned long long *bc,
                        size_t bn)
{
    size_t cap = an + bn ? an + bn : 1;
    unsigned long long *k = malloc(cap * sizeof *k), *c = malloc(cap * sizeof *c);
    if (!k || !c) {
        free(k);
        free(c);
        m->failed = 1;
        return;
    }
    size_t i = 0, j = 0, n = 0;
    while (i < an || j < bn) {
        if (j >= bn || (i < an && ak[i] < bk[j])) {
            k[n] = ak[i];
            c[n++] = ac[i++];
        } else if (i >= an || bk[j] < ak[i]) {
            k[n] = bk[j];
            c[n++] = bc[j++];
        } else {
            k[n] = ak[i];
            c[n++] = ac[i++] + bc[j++];
        }
    }
    free(m->keys);
    free(m->counts);
    m->keys = k;
    m->counts = c;
    m->n = n;
    m->cap = cap;
}

void dm_sparse_compact(dm_sparse *m)
{
    if (m->npending == 0) return;
    qsort(m->pending, m->npending, sizeof *m->pending, cmp_u64);
    /* run-length encode the pending keys in place of a small list */
    dm_sparse runs;
    dm_sparse_init(&runs);
    size_t nruns = 0;
    for (size_t i = 0; i < m->npending; i++)
        if (i == 0 || m->pending[i] != m->pending[i - 1]) nruns++;
    if (reserve(&runs, nruns) != 0) {
        m->failed = 1;
        dm_sparse_free(&runs);
        return;
    }
    for (size_t i = 0; i < m->npending; i++) {
        if (i == 0 || m->pending[i] != m->pending[i - 1]) {
            runs.keys[runs.n] = m->pending[i];
            runs.counts[runs.n++] = 1;
        } else {
            runs.counts[runs.n - 1]++;
        }
    }
    m->npending = 0;
    merge_lists(m, m->keys, m->counts, m->n, runs.keys, runs.counts, runs.n);
    dm_sparse_free(&runs);
}

void dm_sparse_add(dm_sparse *m, unsigned int row, unsigned int col)
{
    if (m->npending == m->cap_pending) {
        if (m->npending >= PENDING_LIMIT) dm_sparse_compact(m);
        if (m->npending == m->cap_pending) {
            size_t cap = m->cap_pending ? m->cap_pending * 2 : 4096;
            unsigned long long *p = realloc(m->pending, cap * sizeof *p);
            if (!p) {
                m->failed = 1;
                return;
            }
            m->pending = p;
            m->cap_pending = cap;
        }
    }
    m->pending[m->npending++] = (unsigned long long)row << 32 | col;
}

/* Merges sorted unique (bk, bc, bn) into m's list in place, from the back (the write position
 * never passes the read position of m's entries): no new arrays, so no fresh pages to fault
 * in for every buffer of keys. */
static void merge_in_place(dm_sparse *m, const unsigned long long *bk, const unsigned long long *bc,
                           size_t bn)
{
    /* Entries below bk[0] stay where they are: GPU chunks come in roughly increasing rows, so
     * most merges only touch the tail of the list. */
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->keys[mid] < bk[0])
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t same = 0; /* keys in both lists */
    for (size_t i = lo, j = 0; i < m->n && j < bn;) {
        if (m->keys[i] < bk[j])
            i++;
        else if (bk[j] < m->keys[i])
            j++;
        else
            same++, i++, j++;
    }
    size_t total = m->n + bn - same;
    if (reserve(m, total) != 0) return;
    unsigned long long *k = m->keys, *c = m->counts;
    size_t i = m->n, j = bn, w = total;
    while (j > 0) {
        if (i > 0 && k[i - 1] > bk[j - 1]) {
            w--, i--;
            k[w] = k[i];
            c[w] = c[i];
        } else if (i > 0 && k[i - 1] == bk[j - 1]) {
            w--, i--, j--;
            k[w] = k[i];
            c[w] = c[i] + bc[j];
        } else {
            w--, j--;
            k[w] = bk[j];
            c[w] = bc[j];
        }
    }
    m->n = total;
}

void dm_sparse_add_keys(dm_sparse *m, unsigned long long *keys, size_t n)
{
    if (n == 0) return;
    unsigned long long *scratch = malloc(n * sizeof *scratch);
    if (!scratch) {
        m->failed = 1;
        return;
    }
    dm_sparse_add_keys_scratch(m, keys, n, scratch);
    free(scratch);
}

void dm_sparse_add_keys_scratch(dm_sparse *m, unsigned long long *keys, size_t n,
                                unsigned long long *scratch)
{
    if (n == 0) return;
    dm_key_sort(keys, scratch, n);
    while (n > 0 && keys[n - 1] == ~0ULL) n--; /* unused slots sort last */
    /* run-length encode in place: distinct keys stay in keys, their counts go to scratch */
    size_t nruns = 0;
    for (size_t i = 0; i < n; i++) {
        if (nruns > 0 && keys[i] == keys[nruns - 1]) {
            scratch[nruns - 1]++;
        } else {
            keys[nruns] = keys[i];
            scratch[nruns++] = 1;
        }
    }
    if (nruns > 0) merge_in_place(m, keys, scratch, nruns);
}

void dm_sparse_merge(dm_sparse *into, const dm_sparse *from)
{
    merge_lists(into, into->keys, into->counts, into->n, from->keys, from->counts, from->n);
    into->failed |= from->failed;
}

unsigned long long dm_sparse_total(const dm_sparse *m)
{
    unsigned long long t = 0;
    for (size_t i = 0; i < m->n; i++) t += m->counts[i];
    return t;
}

void dm_sparse_free(dm_sparse *m)
{
    free(m->pending);
    free(m->keys);
    free(m->counts);
    memset(m, 0, sizeof *m);
}

static unsigned long long swap_key(unsigned long long k)
{
    return (k & 0xffffffffULL) << 32 | k >> 32;
}

int dm_sparse_write_dot(const dm_sparse *m, const char *path, unsigned int nrows,
                        unsigned int ncols, int symmetrise)
{
    if (m->failed) return dm_set_error("%s: out of memory while accumulating the matrix", path);
    dm_sparse both;
    dm_sparse_init(&both);
    const dm_sparse *out = m;
    if (symmetrise) { /* the transposed entries, sorted, merged with the originals */
        dm_sparse t;
        dm_sparse_init(&t);
        if (reserve(&t, m->n) != 0) return dm_set_error("%s: out of memory", path);
        for (size_t i = 0; i < m->n; i++) t.keys[i] = swap_key(m->keys[i]);
        if (m->n) qsort(t.keys, m->n, sizeof *t.keys, cmp_u64); /* none: no array */
        /* counts follow their keys: look each one up in m (sorted) */
        for (size_t i = 0; i < m->n; i++) {
            unsigned long long k = swap_key(t.keys[i]);
            unsigned long long *hit = bsearch(&k, m->keys, m->n, sizeof k, cmp_u64);
            t.counts[i] = hit ? m->counts[hit - m->keys] : 0;
        }
        t.n = m->n;
        merge_lists(&both, m->keys, m->counts, m->n, t.keys, t.counts, t.n);
        dm_sparse_free(&t);
        if (both.failed) return dm_set_error("%s: out of memory", path);
        out = &both;
    }
    char *tmp = dm_temp_sibling(path);
    FILE *fp = fopen(tmp, "w");
    if (!fp) {
        dm_sparse_free(&both);
        free(tmp);
        return dm_set_error("%s: cannot write: %s", path, strerror(errno));
    }
    int has_last = 0;
    for (size_t i = 0; i < out->n; i++) {
        unsigned int r = (unsigned int)(out->keys[i] >> 32), c = (unsigned int)out->keys[i];
        fprintf(fp, "%u %u %llu\n", r + 1, c + 1, out->counts[i]);
        if (r + 1 == nrows && c + 1 == ncols) has_last = 1;
    }
    if (!has_last) fprintf(fp, "%u %u 0\n", nrows, ncols);
    dm_sparse_free(&both);
    int rc = dm_commit_written(fp, 0, tmp, path);
    free(tmp);
    return rc;
}
