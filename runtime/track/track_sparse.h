/* Sparse count matrices of tractography (fdt_matrix1/2/3): (row, col) increments are appended
 * to a pending list, which is sorted and merged into a sorted (key, count) list whenever it
 * grows large; memory follows the non-zeros, never rows x cols (a 91k x 91k dense connectome
 * would need tens of GB).  One accumulator per thread; merged at the end, so the result does
 * not depend on the order of the increments. */
#ifndef DIMOC_TRACK_SPARSE_H
#define DIMOC_TRACK_SPARSE_H

#include <stddef.h>

typedef struct dm_sparse {
    unsigned long long *pending; /* key = row << 32 | col */
    size_t npending, cap_pending;
    unsigned long long *keys; /* sorted, unique */
    unsigned long long *counts;
    size_t n, cap;
    int failed; /* out of memory happened */
} dm_sparse;

void dm_sparse_init(dm_sparse *m);
void dm_sparse_add(dm_sparse *m, unsigned int row, unsigned int col);
/* Adds n increments given as keys (row << 32 | col) at once: the same result as n calls of
 * dm_sparse_add, much faster for large n (radix-sorted, repeats counted, merged once).  Keys
 * equal to ~0 (unused slots of a GPU buffer) are skipped; keys[] is reordered. */
void dm_sparse_add_keys(dm_sparse *m, unsigned long long *keys, size_t n);
/* The same with the caller's scratch of n keys (no allocation besides the list's growth). */
void dm_sparse_add_keys_scratch(dm_sparse *m, unsigned long long *keys, size_t n,
                                unsigned long long *scratch);
/* Moves the pending increments into the sorted list. */
void dm_sparse_compact(dm_sparse *m);
/* Adds `from` (compacted) into `into` (compacted); from is left as it was. */
void dm_sparse_merge(dm_sparse *into, const dm_sparse *from);
void dm_sparse_free(dm_sparse *m);
/* Total of all counts (after compaction). */
unsigned long long dm_sparse_total(const dm_sparse *m);

/* Writes FSL's .dot text: "row col count" lines, 1-based, sorted by row then column, and a
 * last line "nrows ncols 0" (what MATLAB's spconvert reads as the size) unless that entry is
 * already there.  symmetrise: the matrix holds row < col only; both (i, j) and (j, i) are
 * written.  Written to a temporary name and renamed when whole. */
int dm_sparse_write_dot(const dm_sparse *m, const char *path, unsigned int nrows,
                        unsigned int ncols, int symmetrise);

#endif
