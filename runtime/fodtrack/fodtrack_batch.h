/* The streamlines of one batch of ids [first, first + n): each id's verdict, and the accepted
 * ones' points in id order.  The CPU and GPU tracers fill one; the run keeps what --select
 * asks for and writes it. */
#ifndef DIMOC_FODTRACK_BATCH_H
#define DIMOC_FODTRACK_BATCH_H

#include "fodtrack/ft_types.h"

#include <stddef.h>

typedef struct dm_ft_batch {
    unsigned long long first;
    long n;
    unsigned char *verdict; /* n: DM_FT_ACCEPTED or DM_FT_REJECT_* */
    unsigned char *ends;    /* 2n: the terminations of each id's halves (DM_FT_END_*; 0: none) */
    long count;             /* accepted */
    unsigned long long *id; /* count, ascending */
    size_t *start;          /* first point of each in xyz */
    int *npts, *seed_index;
    float *xyz; /* world mm, 3 per point */
    size_t npoints;
    /* points xyz has room for: it only grows, so that a batch buffer reused is not paged in
     * again (on the GPU's host that cost more than the copy) */
    size_t xyz_cap;
    size_t device_points; /* GPU batches: points [0, device_points) are also on the GPU, at
                             the same places (the first launch's; not those traced again) */
    unsigned long long truncations; /* proposals above the envelope */
    unsigned long long evals;       /* FOD amplitudes evaluated */
} dm_ft_batch;

/* Sizes the per-id arrays for n ids (the accepted arrays for up to n, xyz for cap_points). */
void dm_ft_batch_reset(dm_ft_batch *b, unsigned long long first, long n, size_t cap_points);
/* Room in xyz for `points` points in all (grown by half again at least; never shrunk).  0, or
 * -1 with an error when out of memory. */
int dm_ft_batch_room(dm_ft_batch *b, size_t points);
/* Puts the accepted streamlines' records in id order (the points stay where they are). */
void dm_ft_batch_sort(dm_ft_batch *b);
void dm_ft_batch_free(dm_ft_batch *b);

#endif
