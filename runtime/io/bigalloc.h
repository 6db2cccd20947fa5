/* Large buffers (hundreds of megabytes: a DWI as doubles, a tractogram's points) backed by huge
 * pages where the kernel offers them on request (transparent huge pages in "madvise" mode): the
 * first touch of each 4 KiB page is otherwise a page fault, and faults, not the copying, bound
 * how fast such a buffer is filled. */
#ifndef DIMOC_IO_BIGALLOC_H
#define DIMOC_IO_BIGALLOC_H

#include <stddef.h>

/* As malloc (freed with free(), may be realloc'd); NULL when out of memory. */
void *dm_big_alloc(size_t bytes);

#endif
