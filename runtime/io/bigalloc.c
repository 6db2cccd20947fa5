#include "io/bigalloc.h"

#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

void *dm_big_alloc(size_t bytes)
{
    if (bytes < 4 * HUGE_PAGE) return malloc(bytes ? bytes : 1);
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE, bytes) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE); /* a hint: where refused, ordinary pages */
#endif
    return p;
}
