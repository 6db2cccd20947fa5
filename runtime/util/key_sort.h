/* Ordering numbers: the k-th smallest of an array without sorting it (quickselect), the k first
 * of any array in order; the place of
 * a value in an ascending array (binary search); sorting of
 * 64-bit keys (matrix entries row << 32 | col) by LSD radix sort: a byte per pass,
 * passes whose byte is the same in every key skipped, so keys with 15-bit rows and columns
 * take 4 passes.  Used where millions of keys come back from a GPU at once. */
#ifndef DIMOC_KEY_SORT_H
#define DIMOC_KEY_SORT_H

#include <stddef.h>

/* Sorts keys[0..n) ascending; scratch holds n keys (its contents are overwritten). */
void dm_key_sort(unsigned long long *keys, unsigned long long *scratch, size_t n);

/* Sorts the n values x (no NaN) from the largest down, by the radix sort of keys that order as
 * the values do (-0 taken as 0).  0, or -1 when memory ran out (x as it was). */
int dm_sort_doubles_descending(double *x, size_t n);

/* The k-th smallest (0-based) of the n finite values x, by quickselect with Hoare's partition:
 * x is reordered so that x[k] holds it and every x[i] with i > k is >= x[k].  O(n) on average,
 * where a sort is O(n log n). */
double dm_select_kth(double *x, size_t n, size_t k);

/* The k first of n elements of `size` bytes in cmp's order: base[0..k) holds them sorted, the
 * rest follow in no order (what qsort's first k would be when cmp orders strictly, ties broken;
 * a quickselect, then a sort of the k: O(n + k log k) on average). */
void dm_sort_first(void *base, size_t n, size_t size, size_t k,
                   int (*cmp)(const void *, const void *));
/* The same without the sort: base[0..k) holds the k first in no order. */
void dm_partition_first(void *base, size_t n, size_t size, size_t k,
                        int (*cmp)(const void *, const void *));

/* The first i with a[i] >= key in the ascending a[0..n), or n (a mask's voxel indices: the
 * first mask voxel at or after a grid voxel). */
size_t dm_lower_bound(const size_t *a, size_t n, size_t key);

#endif
