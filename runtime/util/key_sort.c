#include "util/key_sort.h"

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
