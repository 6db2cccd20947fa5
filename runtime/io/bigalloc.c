#include "io/bigalloc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)
#define KEPT 8

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

/* dst[0..bytes) from src, or zeroed (src NULL), in pieces of 8 MiB on all threads. */
static void fill_pieces(void *dst, const void *src, size_t bytes)
{
    const size_t piece = (size_t)8 << 20;
    const long n = (long)((bytes + piece - 1) / piece);
#pragma omp parallel for schedule(static) if (n > 1)
    for (long c = 0; c < n; c++) {
        const size_t at = (size_t)c * piece, len = bytes - at < piece ? bytes - at : piece;
        if (src)
            memcpy((char *)dst + at, (const char *)src + at, len);
        else
            memset((char *)dst + at, 0, len);
    }
}

void dm_big_copy(void *dst, const void *src, size_t bytes)
{
    fill_pieces(dst, src, bytes);
}

void dm_big_clear(void *dst, size_t bytes)
{
    fill_pieces(dst, NULL, bytes);
}

/* The buffers given back while keeping, the latest first. */
typedef struct kept_buffer {
    void *p;
    size_t bytes;
} kept_buffer;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static kept_buffer kept[KEPT];
static int keeping;

void *dm_big_reuse(size_t bytes)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < KEPT; i++)
        if (kept[i].p && kept[i].bytes >= bytes && kept[i].bytes / 4 * 3 <= bytes) {
            void *p = kept[i].p;
            for (int k = i; k + 1 < KEPT; k++) kept[k] = kept[k + 1];
            kept[KEPT - 1] = (kept_buffer){NULL, 0};
            pthread_mutex_unlock(&lock);
            return p;
        }
    pthread_mutex_unlock(&lock);
    return dm_big_alloc(bytes);
}

void dm_big_release(void *p, size_t bytes)
{
    if (!p) return;
    void *drop = p;
    pthread_mutex_lock(&lock);
    if (keeping) { /* the oldest kept one makes room */
        drop = kept[KEPT - 1].p;
        for (int k = KEPT - 1; k > 0; k--) kept[k] = kept[k - 1];
        kept[0] = (kept_buffer){p, bytes};
    }
    pthread_mutex_unlock(&lock);
    free(drop);
}

void dm_big_keep(int on)
{
    kept_buffer drop[KEPT];
    pthread_mutex_lock(&lock);
    keeping = on;
    for (int k = 0; k < KEPT; k++) {
        drop[k] = on ? (kept_buffer){NULL, 0} : kept[k];
        if (!on) kept[k] = (kept_buffer){NULL, 0};
    }
    pthread_mutex_unlock(&lock);
    for (int k = 0; k < KEPT; k++) free(drop[k].p);
}
