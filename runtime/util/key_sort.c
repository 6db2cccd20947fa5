#include "util/key_sort.h"

#include <stdlib.h>
#include <string.h>

void dm_key_sort(unsigned long long *keys, unsigned long long *scratch, size_t n)
{
    if (n < 2) return;
    /* one read of the keys counts the bytes of all 8 passes */
    size_t count[8][256] = {{0}};
    for (size_t i = 0; i < n; i++) {
        unsigned long long k = keys[i];
        for (int b = 0; b < 8; b++) count[b][(k >> (8 * b)) & 0xff]++;
    }
    unsigned long long *from = keys, *to = scratch;
    for (int b = 0; b < 8; b++) {
        size_t *c = count[b];
        if (c[(from[0] >> (8 * b)) & 0xff] == n) continue; /* every key has this byte */
        size_t at = 0;
        for (int d = 0; d < 256; d++) { /* counts become start offsets */
            size_t here = c[d];
            c[d] = at;
            at += here;
        }
        int shift = 8 * b;
        for (size_t i = 0; i < n; i++) to[c[(from[i] >> shift) & 0xff]++] = from[i];
        unsigned long long *t = from;
        from = to;
        to = t;
    }
    if (from != keys) memcpy(keys, from, n * sizeof *keys);
}

double dm_select_kth(double *x, size_t n, size_t k)
{
    ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, kk = (ptrdiff_t)k;
    while (lo < hi) {
        /* the median of the first, middle and last values as the pivot */
        double a = x[lo], b = x[lo + (hi - lo) / 2], c = x[hi];
        double pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        ptrdiff_t i = lo, j = hi;
        while (i <= j) {
            while (x[i] < pivot) i++;
            while (x[j] > pivot) j--;
            if (i <= j) {
                double t = x[i];
                x[i++] = x[j];
                x[j--] = t;
            }
        }
        /* x[lo..j] <= pivot <= x[i..hi], and what lies between equals the pivot */
        if (kk <= j)
            hi = j;
        else if (kk >= i)
            lo = i;
        else
            return x[kk];
    }
    return x[kk];
}

size_t dm_lower_bound(const size_t *a, size_t n, size_t key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void swap_bytes(unsigned char *a, unsigned char *b, size_t size)
{
    for (size_t i = 0; i < size; i++) {
        unsigned char t = a[i];
        a[i] = b[i];
        b[i] = t;
    }
}

void dm_partition_first(void *base, size_t n, size_t size, size_t k,
                        int (*cmp)(const void *, const void *))
{
    unsigned char *x = base;
    if (k >= n || k == 0) return;
    /* Quickselect until the k first are base[0..k) (Lomuto's partition around the median of
     * three, moved to the end): every element before position k is below every one after. */
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        unsigned char *a = x + lo * size, *m = x + mid * size, *h = x + hi * size;
        if (cmp(m, a) < 0) swap_bytes(m, a, size);
        if (cmp(h, a) < 0) swap_bytes(h, a, size);
        if (cmp(h, m) < 0) swap_bytes(h, m, size);
        swap_bytes(m, h, size); /* the median, the pivot, at hi */
        size_t store = lo;
        for (size_t i = lo; i < hi; i++)
            if (cmp(x + i * size, h) < 0) swap_bytes(x + i * size, x + store++ * size, size);
        swap_bytes(x + store * size, h, size);   /* the pivot in its final place */
        if (store == k || store + 1 == k) break; /* the split falls at k */
        if (store > k)
            hi = store - 1;
        else
            lo = store + 1;
    }
}

void dm_sort_first(void *base, size_t n, size_t size, size_t k,
                   int (*cmp)(const void *, const void *))
{
    if (k > n) k = n;
    dm_partition_first(base, n, size, k, cmp);
    qsort(base, k, size, cmp);
}

int dm_sort_doubles_descending(double *x, size_t n)
{
    const unsigned long long top = 1ULL << 63;
    unsigned long long *key = malloc((n ? n : 1) * sizeof *key);
    unsigned long long *scratch = malloc((n ? n : 1) * sizeof *scratch);
    if (!key || !scratch) {
        free(key);
        free(scratch);
        return -1;
    }
    for (size_t j = 0; j < n; j++) {
        double v = x[j] + 0.0; /* -0 as 0 */
        unsigned long long u;
        memcpy(&u, &v, sizeof u);
        /* negatives' bits reversed, the others' sign bit set: ascending as the values; then
         * the whole key reversed, for descending */
        key[j] = ~(u & top ? ~u : u | top);
    }
    dm_key_sort(key, scratch, n);
    for (size_t j = 0; j < n; j++) {
        unsigned long long a = ~key[j], u = a & top ? a & ~top : ~a;
        memcpy(&x[j], &u, sizeof u);
    }
    free(key);
    free(scratch);
    return 0;
}
