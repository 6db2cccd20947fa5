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
