/* Large buffers (hundreds of megabytes: a DWI as doubles, a tractogram's points) backed by huge
 * pages where the kernel offers them on request (transparent huge pages in "madvise" mode): the
 * first touch of each 4 KiB page is otherwise a page fault, and faults, not the copying, bound
 * how fast such a buffer is filled. */
#ifndef DIMOC_IO_BIGALLOC_H
#define DIMOC_IO_BIGALLOC_H

#include <stddef.h>

/* As malloc (freed with free(), may be realloc'd); NULL when out of memory. */
void *dm_big_alloc(size_t bytes);

/* Buffers used in turn by the runs of one process (a study's subjects: each DWI's compressed
 * file, its bytes, its values and each fit's gathered signal; each fit stage's results), whose
 * pages would otherwise be faulted in and zeroed by the kernel again for each (in a profile of
 * `dimoc fit`'s reading of a UK Biobank subject, the kernel's zeroing of fresh pages took 8x the
 * CPU time of the inflating).  dm_big_reuse is dm_big_alloc that may return a buffer given back
 * by dm_big_release while dm_big_keep is on (one of at least `bytes` and at most 4/3 of it);
 * dm_big_release frees a buffer of at least `bytes` (a malloc'd one too), or keeps it while
 * dm_big_keep is on (the last eight given back, as that many bytes).  dm_big_keep(0) frees the
 * kept ones. */
void *dm_big_reuse(size_t bytes);
void dm_big_release(void *p, size_t bytes);
void dm_big_keep(int on);

/* memcpy and memset(0) on all threads in pieces of 8 MiB, for a destination freshly allocated:
 * the first touch of its pages, not the copying, bounds one thread (a UK Biobank DWI, 650 MB
 * of doubles, took 0.17 s on one). */
void dm_big_copy(void *dst, const void *src, size_t bytes);
void dm_big_clear(void *dst, size_t bytes);

#endif
