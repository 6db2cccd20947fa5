/* Sorting of 64-bit keys (matrix entries row << 32 | col) by LSD radix sort: a byte per pass,
 * passes whose byte is the same in every key skipped, so keys with 15-bit rows and columns
 * take 4 passes.  Used where millions of keys come back from a GPU at once. */
#ifndef DIMOC_KEY_SORT_H
#define DIMOC_KEY_SORT_H

#include <stddef.h>

/* Sorts keys[0..n) ascending; scratch holds n keys (its contents are overwritten). */
void dm_key_sort(unsigned long long *keys, unsigned long long *scratch, size_t n);

#endif
